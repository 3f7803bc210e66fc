// Command localcluster runs the project's local Kubernetes (see tests/localcluster) in the
// foreground until interrupted, printing the line that points kubectl at it. Redis pods in
// it run real redis-server processes (tests/redispods), so a RedisCluster forms there as it
// would on a real cluster; an S3-compatible object store serves a bucket for backups. Stopping
// the command stops them and the cluster.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/middleware-operator/middleware-operator/tests/localcluster"
	"github.com/middleware-operator/middleware-operator/tests/redispods"
)

func main() {
	nodes := flag.Int("nodes", 3, "number of fake kwok nodes")
	dir := flag.String("dir", "", "directory for the cluster's files (default: a new temporary directory)")
	kubeconfigOut := flag.String("kubeconfig-out", "", "also copy the kubeconfig to this path")
	objectStore := flag.Bool("object-store", true, "also run an S3-compatible object store (versitygw) with a bucket for backups")
	objectStoreEnvOut := flag.String("object-store-env-out", "", "write the object store's endpoint, bucket and credentials to this path as shell assignments")
	flag.Parse()

	if err := run(*nodes, *dir, *kubeconfigOut, *objectStore, *objectStoreEnvOut); err != nil {
		log.Fatal(err)
	}
}

func run(nodes int, dir, kubeconfigOut string, objectStore bool, objectStoreEnvOut string) error {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	cluster, err := localcluster.Start(ctx, localcluster.Options{Nodes: nodes, Dir: dir, ObjectStore: objectStore, Logf: log.Printf})
	if err != nil {
		return fmt.Errorf("local cluster: %w", err)
	}
	defer cluster.Stop()
	kubelet, err := redispods.Watching(cluster.Config, filepath.Join(cluster.Dir, "redis-data"), log.Printf)
	if err != nil {
		return fmt.Errorf("local cluster: %w", err)
	}
	kubelet.Probes = true // a pod is Ready as a real kubelet would say
	kubeletDone := make(chan struct{})
	go func() { kubelet.Run(ctx); close(kubeletDone) }()
	defer func() { cancel(); <-kubeletDone }() // it stops every redis-server once ctx ends
	if objectStoreEnvOut != "" && cluster.ObjectStore != nil {
		// Before the kubeconfig: a script that waits for the kubeconfig finds this too.
		if err := os.WriteFile(objectStoreEnvOut, []byte(cluster.ObjectStore.Env()), 0o600); err != nil {
			return fmt.Errorf("while writing the object store's settings: %w", err)
		}
	}
	if kubeconfigOut != "" {
		data, err := os.ReadFile(cluster.Kubeconfig)
		if err == nil {
			err = os.WriteFile(kubeconfigOut, data, 0o600)
		}
		if err != nil {
			return fmt.Errorf("while copying the kubeconfig: %w", err)
		}
	}
	fmt.Printf("local cluster ready with %d nodes; use it with:\n\n  export KUBECONFIG=%s\n\n", len(cluster.Nodes), cluster.Kubeconfig)
	if o := cluster.ObjectStore; o != nil {
		fmt.Printf("object store (S3, for backups): endpoint %s, bucket %s, region %s, CA %s\n\n  %s\n\n",
			o.Endpoint, o.Bucket, o.Region, o.CAFile, strings.ReplaceAll(strings.TrimSpace(o.Env()), "\n", "\n  "))
	}
	fmt.Printf("Ctrl-C stops it.\n")
	<-ctx.Done()
	log.Print("stopping the local cluster")
	return nil
}
