// Package resources holds the pure builders: a custom resource in, the Kubernetes objects it
// should own out. Nothing here talks to the API server, so every builder is table-tested
// without a cluster.
package resources
