// Package child keeps the objects a custom resource owns in their desired state: it creates
// a missing child, refuses to touch a same-named object the owner does not control, and
// updates a child only when it drifted, so a converged reconcile makes no API writes.
package child
