// Package plugin drives the kubectl plugin (cmd/kubectl-middleware), built from this
// repository, against the local cluster with real Redis pods, an object store and the
// operator binary: status, backup, restore and report as a user runs them, and a report
// that holds no Secret value. It also installs the one-file release manifest.
package plugin
