package execute

import (
	"context"
	"math"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/layout"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
)

// nodeIDs maps the address of every node of the cluster reached at addr to its ID.
func nodeIDs(ctx context.Context, t *testing.T, admin *Admin, addr string) map[string]string {
	t.Helper()
	nodes, err := admin.ClusterNodes(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	for _, n := range nodes {
		ids[n.Addr] = n.ID
	}
	return ids
}

// slotCounts returns the number of slots each master serves, by address, once Check finds
// the cluster healthy.
func slotCounts(ctx context.Context, t *testing.T, admin *Admin, addr string) map[string]int {
	t.Helper()
	res := waitCheck(ctx, t, admin, []string{addr}, "a healthy cluster", func(r CheckResult) bool { return r.OK() })
	out := map[string]int{}
	for _, m := range res.Masters() {
		out[m.Addr] = nodes.CountSlots(m.Slots)
	}
	return out
}

var (
	simulatedMove = regexp.MustCompile(`(?m)^Moving (\d+) slots from (\S+) to (\S+)$`)
	ansiColor     = regexp.MustCompile(`\x1b\[[0-9;]*m`)
)

// redisCliRebalancePlan runs `redis-cli --cluster rebalance --cluster-simulate` and
// returns its moves as "source>target:count" with addresses, or nil when it finds nothing
// to do.
func redisCliRebalancePlan(ctx context.Context, t *testing.T, addr string, useEmpty bool, weights ...string) []string {
	t.Helper()
	args := []string{"--cluster", "rebalance", addr, "--cluster-simulate"}
	if useEmpty {
		args = append(args, "--cluster-use-empty-masters")
	}
	if len(weights) > 0 {
		args = append(append(args, "--cluster-weight"), weights...)
	}
	out, err := exec.CommandContext(ctx, "redis-cli", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("redis-cli %v: %v\n%s", args, err, out)
	}
	var plan []string
	for _, m := range simulatedMove.FindAllStringSubmatch(ansiColor.ReplaceAllString(string(out), ""), -1) {
		plan = append(plan, m[2]+">"+m[3]+":"+m[1])
	}
	if plan == nil && !strings.Contains(string(out), "No rebalancing needed") {
		t.Fatalf("redis-cli rebalance simulation printed neither moves nor 'No rebalancing needed':\n%s", out)
	}
	return plan
}

// ourRebalancePlan is layout.Rebalance on the cluster as Rebalance loads it, rendered like
// redisCliRebalancePlan.
func ourRebalancePlan(ctx context.Context, t *testing.T, admin *Admin, addr string, weights map[string]float64, useEmpty bool) []string {
	t.Helper()
	topo, err := admin.loadTopology(ctx, []string{addr})
	if err != nil {
		t.Fatal(err)
	}
	moves, err := layout.Rebalance(topo.masters(), weights, layout.DefaultRebalanceThreshold, useEmpty, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var plan []string
	for _, m := range moves {
		plan = append(plan, topo.node(m.Source).Addr+">"+topo.node(m.Target).Addr+":"+strconv.Itoa(len(m.Slots)))
	}
	return plan
}

// TestScaleOutAndIn grows a three-master cluster to five masters and rebalances it, then
// removes two masters, while a writer writes and reads keys; no key may be lost, every
// master ends within 2% of an even share, and redis-cli agrees with every plan and every
// result.
func TestScaleOutAndIn(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	servers := startServers(t, 5, "")
	admin := NewAdmin("", 2*time.Second)
	defer func() { _ = admin.Close() }()
	createCluster(ctx, t, admin, servers[:3], 0)
	entry := servers[0].addr
	cc := clusterClient([]string{entry}, "")
	defer func() { _ = cc.Close() }()
	const keys = 20000
	writeKeys(ctx, t, cc, keys)
	w := startWriter(t, []string{entry}, "", 1000)

	// Scale out: two empty masters join and receive slots.
	for _, s := range servers[3:] {
		if err := admin.AddNode(ctx, s.addr, entry, ""); err != nil {
			t.Fatal(err)
		}
		if err := admin.AddNode(ctx, s.addr, entry, ""); err != nil {
			t.Fatalf("AddNode again: %v", err)
		}
	}
	if ours, theirs := ourRebalancePlan(ctx, t, admin, entry, nil, true), redisCliRebalancePlan(ctx, t, entry, true); !slices.Equal(ours, theirs) {
		t.Fatalf("rebalance plans differ:\nours     %q\nredis-cli %q", ours, theirs)
	}
	stats, err := admin.Rebalance(ctx, []string{entry}, RebalanceOptions{UseEmptyMasters: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("rebalanced to 5 masters: %d slots and %d keys in %v", stats.Slots, stats.Keys, stats.Elapsed.Round(time.Millisecond))
	if stats.Slots != 6556 {
		t.Errorf("moved %d slots, want 6556 as redis-cli", stats.Slots)
	}
	counts := slotCounts(ctx, t, admin, entry)
	for addr, n := range counts {
		if dev := math.Abs(float64(n)-nodes.SlotCount/5.0) / (nodes.SlotCount / 5.0); dev > 0.02 {
			t.Errorf("%s serves %d slots, %.1f%% away from even", addr, n, 100*dev)
		}
	}
	if len(counts) != 5 {
		t.Errorf("%d masters, want 5", len(counts))
	}
	if plan := redisCliRebalancePlan(ctx, t, entry, true); plan != nil {
		t.Errorf("redis-cli still wants to move %q", plan)
	}
	if again, err := admin.Rebalance(ctx, []string{entry}, RebalanceOptions{UseEmptyMasters: true}); err != nil || again.Slots != 0 {
		t.Errorf("a second Rebalance moved %d slots (error %v), want none", again.Slots, err)
	}
	redisCliCheck(ctx, t, entry, "")

	// Scale in: servers[1] gives all its slots to servers[0] (Reshard); servers[4] is
	// drained by weight 0 (Rebalance); both leave.
	ids := nodeIDs(ctx, t, admin, entry)
	gone1, gone4 := servers[1].addr, servers[4].addr
	stats, err = admin.Reshard(ctx, []string{entry}, counts[gone1], []string{ids[gone1]}, entry, MoveOptions{Pipeline: 100})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("resharded %s away: %d slots and %d keys in %v", gone1, stats.Slots, stats.Keys, stats.Elapsed.Round(time.Millisecond))
	stats, err = admin.Rebalance(ctx, []string{entry}, RebalanceOptions{Weights: map[string]float64{gone4: 0}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("drained %s: %d slots and %d keys in %v", gone4, stats.Slots, stats.Keys, stats.Elapsed.Round(time.Millisecond))
	// Clients that knew the removed nodes get CLUSTERDOWN from them once they are reset
	// (go-redis does not reload its slot map on that answer): stop the writer first, and
	// read everything back afterwards with a new client.
	w.stopAndVerify(ctx, t)
	for _, gone := range []string{gone1, gone4} {
		if err := admin.DelNode(ctx, entry, gone); err != nil {
			t.Fatal(err)
		}
		if err := admin.DelNode(ctx, entry, gone); err != nil {
			t.Fatalf("DelNode again: %v", err)
		}
	}
	counts = slotCounts(ctx, t, admin, entry)
	if len(counts) != 3 || counts[gone1]+counts[gone4] != 0 {
		t.Errorf("masters after scale-in: %v", counts)
	}
	res, err := admin.Check(ctx, []string{entry})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Nodes) != 3 {
		t.Errorf("the cluster still has %d nodes, want 3", len(res.Nodes))
	}
	for _, gone := range []string{gone1, gone4} {
		view, err := admin.ClusterNodes(ctx, gone)
		if err != nil {
			t.Fatal(err)
		}
		if len(view) != 1 || view[0].ID == ids[gone] {
			t.Errorf("%s was not reset: %d nodes known, id %s", gone, len(view), view[0].ID)
		}
	}
	fresh := clusterClient([]string{entry}, "")
	defer func() { _ = fresh.Close() }()
	readKeys(ctx, t, fresh, keys)
	stale := w.c
	w.c = fresh
	_ = stale.Close()
	w.verifyAgain(ctx, t)
	redisCliCheck(ctx, t, entry, "")
	for addr, n := range slotCounts(ctx, t, admin, entry) {
		t.Logf("%s serves %d slots", addr, n)
	}
}
