package bench

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/tests/redistest"
)

// BenchmarkFormingTimeline creates RedisClusters of 3 masters and 3 replicas one after
// another (MWO_BENCH_FORM_RUNS, default 3) and prints, for each, when an outside observer saw
// its pods created and Ready, its nodes met, its slots assigned, its replicas linked and
// cluster_state ok on every node, then its status Ready; with MWO_BENCH_FORM_LOGS=1, each
// node's "Cluster state changed" log lines too.
func BenchmarkFormingTimeline(b *testing.B) {
	runs := intsFromEnv(b, "MWO_BENCH_FORM_RUNS", 3)[0]
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	rb, err := startRedisBench(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer rb.stop()
	const ns = "form"
	if err := namespace(ctx, rb.env.Client, ns); err != nil {
		b.Fatal(err)
	}
	var ready []float64
	for i := range runs {
		rc := redistest.NewCluster(ns, fmt.Sprintf("form-%d", i), 6)
		key := client.ObjectKeyFromObject(rc)
		start := time.Now()
		if err := rb.env.Client.Create(ctx, rc); err != nil {
			b.Fatal(err)
		}
		formed := traceForming(ctx, rb.env.Client, key, 6, 3, func() (string, error) { return clusterPassword(ctx, rb.env.Client, rc) }, start)
		took, err := waitFor(ctx, start, key.Name+" Ready", func(ctx context.Context) (bool, error) {
			got := &redisv1alpha1.RedisCluster{}
			if err := rb.env.Client.Get(ctx, key, got); err != nil {
				return false, err
			}
			return isReady(got), nil
		})
		if err != nil {
			b.Fatal(err)
		}
		m := formed()
		ready = append(ready, took)
		b.Logf("%s: %s; status Ready %.2f s", key.Name, m, took)
		if os.Getenv("MWO_BENCH_FORM_LOGS") != "" {
			for j := range 6 {
				pod := fmt.Sprintf("%s-%d", key.Name, j)
				b.Logf("%s: %s", pod, stateChanges(filepath.Join(rb.env.Cluster.Dir, "redis-data", ns, ".volumes", pod, "stdout.log")))
			}
		}
	}
	b.ReportMetric(median(ready), "ready-s")
}

// stateChanges are the lines of a redis-server log that say its cluster state changed.
func stateChanges(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer func() { _ = f.Close() }()
	var out []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		if l := s.Text(); strings.Contains(l, "Cluster state changed") || strings.Contains(l, "configEpoch") || strings.Contains(l, "MASTER <-> REPLICA sync: Finished") {
			out = append(out, l)
		}
	}
	return strings.Join(out, " | ")
}
