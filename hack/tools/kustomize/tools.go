//go:build tools

// Package tools pins sigs.k8s.io/kustomize/kustomize/v5.
package tools

import _ "sigs.k8s.io/kustomize/kustomize/v5"
