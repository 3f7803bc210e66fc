//go:build tools

// Package tools pins the Operator SDK CLI v1.33.0 (the newest the module proxy serves) and
// its scorecard test runner, the program inside the scorecard-test image. golang.org/x/tools
// is raised to v0.38.0 because the version operator-sdk requires does not build with Go 1.26.
package tools

import (
	_ "github.com/operator-framework/operator-sdk/cmd/operator-sdk"
	_ "github.com/operator-framework/operator-sdk/images/scorecard-test"
)
