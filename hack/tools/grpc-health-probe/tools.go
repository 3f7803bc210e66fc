//go:build tools

// Package tools pins grpc_health_probe, which the opm base image of catalog.Dockerfile ships
// at /bin/grpc_health_probe and OLM runs as the readiness, liveness and startup probe of a
// CatalogSource's pod. The version is the one operator-registry (opm) pins in its go.mod, as
// its image build does; `make catalog-image-tar` puts it in the catalog image.
package tools

import _ "github.com/grpc-ecosystem/grpc-health-probe"
