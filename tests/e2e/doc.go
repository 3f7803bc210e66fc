// Package e2e drives the operator binary, built from this repository, against the local
// cluster the way a user does: kubectl apply a sample, watch it become Ready, scale it,
// delete it, scrape the metrics.
package e2e
