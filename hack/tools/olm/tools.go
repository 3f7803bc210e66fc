//go:build tools

// Package tools pins Operator Lifecycle Manager's olm and catalog operators, which the OLM
// e2e test runs out of cluster, and its CRDs (deploy/chart/crds in the same module).
package tools

import (
	_ "github.com/operator-framework/operator-lifecycle-manager/cmd/catalog"
	_ "github.com/operator-framework/operator-lifecycle-manager/cmd/olm"
)
