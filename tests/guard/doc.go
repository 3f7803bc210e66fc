// Package guard tests the admission guard of config/guard against a local API server, with
// the operator ServiceAccount's own token: what it refuses, what it still accepts, and the
// operator's start-up check of it. The integration suites of controllers/ run every
// reconciler under the same token and guard (testenv.StartManager).
package guard
