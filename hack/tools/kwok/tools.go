//go:build tools

// Package tools pins sigs.k8s.io/kwok/cmd/kwok.
package tools

import _ "sigs.k8s.io/kwok/cmd/kwok"
