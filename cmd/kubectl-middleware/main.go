// Command kubectl-middleware is the middleware-operator's kubectl plugin: copied onto PATH,
// it runs as `kubectl middleware status|backup|restore|report` (docs/kubectl-plugin.md).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"

	"github.com/middleware-operator/middleware-operator/internal/kubectlplugin"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := kubectlplugin.NewCommand(os.Stdout, os.Stderr).ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		stop()
		os.Exit(1) //nolint:gocritic // stop has run
	}
}
