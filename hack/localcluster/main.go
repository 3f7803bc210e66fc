// Command localcluster runs the project's local Kubernetes (see tests/localcluster) in the
// foreground until interrupted, printing the line that points kubectl at it.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"

	"github.com/middleware-operator/middleware-operator/tests/localcluster"
)

func main() {
	nodes := flag.Int("nodes", 3, "number of fake kwok nodes")
	dir := flag.String("dir", "", "directory for the cluster's files (default: a new temporary directory)")
	kubeconfigOut := flag.String("kubeconfig-out", "", "also copy the kubeconfig to this path")
	flag.Parse()

	if err := run(*nodes, *dir, *kubeconfigOut); err != nil {
		log.Fatal(err)
	}
}

func run(nodes int, dir, kubeconfigOut string) error {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	cluster, err := localcluster.Start(ctx, localcluster.Options{Nodes: nodes, Dir: dir, Logf: log.Printf})
	if err != nil {
		return fmt.Errorf("local cluster: %w", err)
	}
	defer cluster.Stop()
	if kubeconfigOut != "" {
		data, err := os.ReadFile(cluster.Kubeconfig)
		if err == nil {
			err = os.WriteFile(kubeconfigOut, data, 0o600)
		}
		if err != nil {
			return fmt.Errorf("while copying the kubeconfig: %w", err)
		}
	}
	fmt.Printf("local cluster ready with %d nodes; use it with:\n\n  export KUBECONFIG=%s\n\nCtrl-C stops it.\n", len(cluster.Nodes), cluster.Kubeconfig)
	<-ctx.Done()
	log.Print("stopping the local cluster")
	return nil
}
