package execute

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/observe"
	goredis "github.com/redis/go-redis/v9"
)

// TestObserveReusesItsConnections: an Admin kept from one look to the next reads every node
// over the connection it already has (no new connection, so no new AUTH), one CLUSTER NODES
// per look; a connection the node closed is replaced within the same look (go-redis checks a
// kept connection before it uses it), not reported as a silent node.
func TestObserveReusesItsConnections(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	servers := startServers(t, 6, "pw")
	admin := NewAdmin("pw", 2*time.Second)
	defer func() { _ = admin.Close() }()
	createCluster(ctx, t, admin, servers, 1)

	look := func() {
		obs := make([]observe.Observation, len(servers))
		for i, s := range servers {
			obs[i] = observe.Observation{Pod: fmt.Sprintf("rc-%d", i), Addr: s.addr}
		}
		admin.Observe(ctx, obs)
		for _, o := range obs {
			if !o.Joined() || o.Info["cluster_state"] == "" || o.Replication["role"] == "" || o.Started.IsZero() {
				t.Fatalf("%s: answered %t, joined %t, info %d fields, replication %d fields, err %v", o.Pod, o.Answered(), o.Joined(), len(o.Info), len(o.Replication), o.Err)
			}
			// Only the fields something reads are kept: the memory ones, not the version.
			if m := observe.MemoryOf(&o); !m.Known || m.Policy == "" || m.Used == 0 || m.Fragmentation == 0 {
				t.Fatalf("%s: memory %+v from INFO fields %v", o.Pod, m, o.Replication)
			}
			if _, kept := o.Replication["redis_version"]; kept || len(o.Info) > 4 {
				t.Fatalf("%s: a look kept INFO %v and CLUSTER INFO %v", o.Pod, o.Replication, o.Info)
			}
		}
	}
	look()
	before := stats(ctx, t, servers)
	for range 3 {
		look()
	}
	after := stats(ctx, t, servers)
	for i := range servers {
		// The stats reader itself opens one connection per node and sends INFO twice.
		if got := after[i].connections - before[i].connections; got != 1 {
			t.Errorf("node %d: %d connections during three looks, want only the stats reader's", i, got)
		}
		if got := after[i].clusterNodes - before[i].clusterNodes; got != 3 {
			t.Errorf("node %d: CLUSTER NODES %d times in three looks, want 3", i, got)
		}
	}

	// The node closes every normal connection, the Admin's among them.
	for _, s := range servers {
		c := goredis.NewClient(&goredis.Options{Addr: s.addr, Password: "pw"})
		if err := c.Do(ctx, "CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes").Err(); err != nil {
			t.Fatal(err)
		}
		_ = c.Close()
	}
	look()
}

// nodeStats are a node's counters that show how it was talked to.
type nodeStats struct{ connections, clusterNodes int }

func stats(ctx context.Context, t *testing.T, servers []*testServer) []nodeStats {
	t.Helper()
	out := make([]nodeStats, len(servers))
	for i, s := range servers {
		c := goredis.NewClient(&goredis.Options{Addr: s.addr, Password: "pw", Protocol: 2, DisableIdentity: true})
		stats, err := c.Info(ctx, "stats").Result()
		if err == nil {
			var cmds string
			cmds, err = c.Info(ctx, "commandstats").Result()
			out[i].clusterNodes = commandCalls(cmds, "cluster|nodes")
		}
		_ = c.Close()
		if err != nil {
			t.Fatal(err)
		}
		out[i].connections, _ = strconv.Atoi(nodes.ParseClusterInfo(stats)["total_connections_received"])
	}
	return out
}

// commandCalls is the calls= count of cmd in INFO commandstats.
func commandCalls(info, cmd string) int {
	line := nodes.ParseClusterInfo(info)["cmdstat_"+cmd]
	var calls int
	_, _ = fmt.Sscanf(line, "calls=%d", &calls)
	return calls
}
