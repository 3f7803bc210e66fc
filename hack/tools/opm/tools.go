//go:build tools

// Package tools pins opm from operator-registry, which renders, validates and serves the
// File-Based Catalog under catalog/.
package tools

import _ "github.com/operator-framework/operator-registry/cmd/opm"
