// Command metricsdoc prints docs/metrics.md: the table of the operator's own metrics.
package main

import (
	"fmt"

	"github.com/middleware-operator/middleware-operator/internal/metrics"
)

func main() { fmt.Print(metrics.Markdown()) }
