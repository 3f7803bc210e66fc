package child

import (
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Echoes remembers the resourceVersion of the children this process has just written, so a
// watch can tell the event its own write causes (the echo) from another writer's change.
// The reconcile that wrote a child already has the server's answer and derived the status
// from it; its echo would re-run that reconcile for nothing, once per AppService in a
// fleet-wide image change. One record per child, spent by the child's next update event
// with a new resourceVersion (echo or not) or by its deletion: an echo that arrives before
// Wrote is called passes (one reconcile more), and the record it leaves matches nothing.
type Echoes struct{ written sync.Map } // client.ObjectKey -> resourceVersion

// Wrote records obj as the server answered this process's write of it.
func (e *Echoes) Wrote(obj client.Object) {
	e.written.Store(client.ObjectKeyFromObject(obj), obj.GetResourceVersion())
}

// Echo reports whether obj, as an update event carries it, is this process's last write of
// it, and forgets that write either way: only the first event after a write can be its echo.
func (e *Echoes) Echo(obj client.Object) bool {
	rv, ok := e.written.LoadAndDelete(client.ObjectKeyFromObject(obj))
	return ok && rv == obj.GetResourceVersion()
}

// Forget drops the record of obj (its deletion).
func (e *Echoes) Forget(obj client.Object) {
	e.written.Delete(client.ObjectKeyFromObject(obj))
}
