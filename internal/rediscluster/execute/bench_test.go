package execute

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
)

// benchKeys is the number of keys BenchmarkRebalance loads: MWO_BENCH_KEYS, 200,000 by
// default.
func benchKeys(b *testing.B) int {
	b.Helper()
	v := os.Getenv("MWO_BENCH_KEYS")
	if v == "" {
		return 200000
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		b.Fatalf("MWO_BENCH_KEYS=%q is not a positive number", v)
	}
	return n
}

// benchCluster starts six redis-servers, makes a cluster of three masters of the first
// three and loads n keys spread over all slots.
func benchCluster(ctx context.Context, b *testing.B, admin *Admin, n int) []*testServer {
	b.Helper()
	servers := startServers(b, 6, "")
	createCluster(ctx, b, admin, servers[:3], 0)
	cc := goredis.NewClusterClient(&goredis.ClusterOptions{
		Addrs: []string{servers[0].addr}, DisableIdentity: true, Protocol: 2, ReadTimeout: 30 * time.Second,
	})
	defer func() { _ = cc.Close() }()
	start := time.Now()
	const chunk = 20000
	for i := 0; i < n; i += chunk {
		// The cluster client splits each pipeline by node and runs the parts in parallel.
		_, err := cc.Pipelined(ctx, func(p goredis.Pipeliner) error {
			for j := i; j < min(i+chunk, n); j++ {
				p.Set(ctx, "key:"+strconv.Itoa(j), "value:"+strconv.Itoa(j), 0)
			}
			return nil
		})
		if err != nil {
			b.Fatalf("while loading keys: %v", err)
		}
	}
	b.Logf("loaded %d keys in %v", n, time.Since(start).Round(time.Millisecond))
	return servers
}

// keysOn returns the number of keys the nodes hold.
func keysOn(ctx context.Context, b *testing.B, admin *Admin, servers []*testServer) int64 {
	b.Helper()
	var total int64
	for _, s := range servers {
		n, err := admin.Client(s.addr).DBSize(ctx).Result()
		if err != nil {
			b.Fatal(err)
		}
		total += n
	}
	return total
}

// rebalanceRun is what one rebalance to three empty masters did.
type rebalanceRun struct {
	slots   int
	keys    int64
	elapsed time.Duration
}

func (r rebalanceRun) keysPerSec() float64  { return float64(r.keys) / r.elapsed.Seconds() }
func (r rebalanceRun) slotsPerSec() float64 { return float64(r.slots) / r.elapsed.Seconds() }

// benchOurs adds the three empty masters with AddNode and times Rebalance with
// UseEmptyMasters.
func benchOurs(ctx context.Context, b *testing.B, n int) rebalanceRun {
	b.Helper()
	admin := NewAdmin("", 2*time.Second)
	defer func() { _ = admin.Close() }()
	servers := benchCluster(ctx, b, admin, n)
	defer stopAll(servers)
	entry := servers[0].addr
	for _, s := range servers[3:] {
		if err := admin.AddNode(ctx, s.addr, entry, ""); err != nil {
			b.Fatal(err)
		}
	}
	start := time.Now()
	stats, err := admin.Rebalance(ctx, []string{entry}, RebalanceOptions{UseEmptyMasters: true})
	elapsed := time.Since(start)
	if err != nil {
		b.Fatal(err)
	}
	if moved := keysOn(ctx, b, admin, servers[3:]); moved != stats.Keys {
		b.Errorf("the new masters hold %d keys, Rebalance says it moved %d", moved, stats.Keys)
	}
	if total := keysOn(ctx, b, admin, servers); total != int64(n) {
		b.Errorf("the cluster holds %d keys, want %d", total, n)
	}
	// A master told the new owner of a slot may switch back for a moment on a gossip
	// message the old owner sent before it was told, until the new owner's higher epoch
	// reaches it: redis-cli's check would report that as a disagreement.
	err = admin.Poll(ctx, "a healthy cluster", func(ctx context.Context) (bool, string) {
		res, err := admin.Check(ctx, []string{entry})
		if err != nil {
			return false, err.Error()
		}
		return res.OK(), fmt.Sprint(res.Problems)
	})
	if err != nil {
		b.Fatal(err)
	}
	redisCliCheck(ctx, b, entry, "")
	return rebalanceRun{slots: stats.Slots, keys: stats.Keys, elapsed: elapsed}
}

// benchRedisCli adds the three empty masters with `redis-cli --cluster add-node` and times
// `redis-cli --cluster rebalance --cluster-use-empty-masters`.
func benchRedisCli(ctx context.Context, b *testing.B, n int) rebalanceRun {
	b.Helper()
	admin := NewAdmin("", 2*time.Second)
	defer func() { _ = admin.Close() }()
	servers := benchCluster(ctx, b, admin, n)
	defer stopAll(servers)
	entry := servers[0].addr
	for _, s := range servers[3:] {
		if out, err := exec.CommandContext(ctx, "redis-cli", "--cluster", "add-node", s.addr, entry).CombinedOutput(); err != nil {
			b.Fatalf("redis-cli --cluster add-node: %v\n%s", err, out)
		}
	}
	// A master that just joined refuses keys (CLUSTERDOWN) until it reports
	// cluster_state:ok; let redis-cli start on a settled cluster.
	var members []nodes.Node
	for _, s := range servers {
		members = append(members, nodes.Node{Addr: s.addr})
	}
	if err := admin.waitStateOK(ctx, members); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	out, err := exec.CommandContext(ctx, "redis-cli", "--cluster", "rebalance", entry, "--cluster-use-empty-masters").CombinedOutput()
	elapsed := time.Since(start)
	if err != nil {
		b.Fatalf("redis-cli --cluster rebalance: %v\n%s", err, out)
	}
	var slots int
	for _, m := range simulatedMove.FindAllStringSubmatch(ansiColor.ReplaceAllString(string(out), ""), -1) {
		k, _ := strconv.Atoi(m[1])
		slots += k
	}
	moved := keysOn(ctx, b, admin, servers[3:])
	if total := keysOn(ctx, b, admin, servers); total != int64(n) {
		b.Errorf("the cluster holds %d keys, want %d", total, n)
	}
	return rebalanceRun{slots: slots, keys: moved, elapsed: elapsed}
}

func stopAll(servers []*testServer) {
	for _, s := range servers {
		s.stop()
	}
}

// BenchmarkRebalance measures a rebalance from three masters to six (three empty masters
// joining, --cluster-use-empty-masters) with MWO_BENCH_KEYS keys: ours, then redis-cli's
// on a fresh cluster with the same data. Run it with
//
//	go test ./internal/redis/ -run '^$' -bench Rebalance -benchtime 1x
func BenchmarkRebalance(b *testing.B) {
	n := benchKeys(b)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	var ours, cli rebalanceRun
	for range b.N {
		ours = benchOurs(ctx, b, n)
		cli = benchRedisCli(ctx, b, n)
	}
	b.ReportMetric(ours.keysPerSec(), "ours-keys/s")
	b.ReportMetric(ours.slotsPerSec(), "ours-slots/s")
	b.ReportMetric(cli.keysPerSec(), "redis-cli-keys/s")
	b.ReportMetric(cli.slotsPerSec(), "redis-cli-slots/s")
	b.ReportMetric(cli.elapsed.Seconds()/ours.elapsed.Seconds(), "speedup")
	b.Logf("%d keys, 3 -> 6 masters: ours: %.0f keys/s, %.0f slots/s (%d keys, %d slots in %.2f s), "+
		"redis-cli: %.0f keys/s, %.0f slots/s (%d keys, %d slots in %.2f s), ratio %.1f",
		n, ours.keysPerSec(), ours.slotsPerSec(), ours.keys, ours.slots, ours.elapsed.Seconds(),
		cli.keysPerSec(), cli.slotsPerSec(), cli.keys, cli.slots, cli.elapsed.Seconds(),
		cli.elapsed.Seconds()/ours.elapsed.Seconds())
}
