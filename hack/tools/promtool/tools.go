//go:build tools

// Package tools pins promtool, which `make test` runs on the alerting rules
// (promtool check rules, promtool test rules).
package tools

import _ "github.com/prometheus/prometheus/cmd/promtool"
