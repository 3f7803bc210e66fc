// Package apps holds the reconcilers of the apps.middleware-operator.io kinds: AppService
// and CloudManager. Each Reconcile is a short pipeline of named steps; the objects they
// enforce come from the pure builders in internal/resources.
package apps
