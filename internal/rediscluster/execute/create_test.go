package execute

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/layout"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
	goredis "github.com/redis/go-redis/v9"
)

// endpointsOf gives the servers three pretend Kubernetes nodes, round-robin.
func endpointsOf(servers []*testServer) []layout.Endpoint {
	out := make([]layout.Endpoint, len(servers))
	for i, s := range servers {
		out[i] = layout.Endpoint{Addr: s.addr, Host: fmt.Sprintf("k8s-node-%d", i%3)}
	}
	return out
}

// createCluster plans and creates a cluster on servers.
func createCluster(ctx context.Context, t testing.TB, admin *Admin, servers []*testServer, replicas int) layout.Plan {
	t.Helper()
	plan, err := layout.Create(endpointsOf(servers), replicas)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := admin.Create(ctx, plan); err != nil {
		t.Fatal(err)
	}
	t.Logf("cluster of %d nodes created in %v", len(servers), time.Since(start).Round(time.Millisecond))
	return plan
}

// assertTopology checks that every node sees the planned masters and slots at once, that
// every replica reports itself attached to its master at once, and that every node learns
// of every replica through gossip soon after.
func assertTopology(ctx context.Context, t *testing.T, admin *Admin, plan layout.Plan) {
	t.Helper()
	ids := map[string]string{}
	for _, e := range plan.Endpoints() {
		nodes, err := admin.ClusterNodes(ctx, e.Addr)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range nodes {
			if n.Myself {
				ids[e.Addr] = n.ID
			}
		}
	}
	// topology fails the test when the view of addr gets masters or slots wrong, and returns
	// the planned replicas (only addr itself if onlySelf) it does not see attached yet.
	topology := func(addr string, onlySelf bool) (problems []string) {
		view, err := admin.ClusterNodes(ctx, addr)
		if err != nil {
			t.Fatal(err)
		}
		byID := map[string]nodes.Node{}
		for _, n := range view {
			byID[n.ID] = n
		}
		if len(byID) != len(plan.Endpoints()) {
			t.Errorf("%s knows %d nodes, want %d", addr, len(byID), len(plan.Endpoints()))
		}
		for _, m := range plan.Masters {
			got := byID[ids[m.Addr]]
			if got.Role != nodes.RoleMaster || nodes.FormatSlotRanges(got.Slots) != nodes.FormatSlotRanges(m.Slots) {
				t.Errorf("%s sees %s as %s with slots %s, want master with %s",
					addr, m.Addr, got.Role, nodes.FormatSlotRanges(got.Slots), nodes.FormatSlotRanges(m.Slots))
			}
			for _, r := range m.Replicas {
				if onlySelf && r.Addr != addr {
					continue
				}
				got := byID[ids[r.Addr]]
				if got.Role != nodes.RoleSlave || got.MasterID != ids[m.Addr] {
					problems = append(problems, fmt.Sprintf("%s sees %s as %s of %q, want replica of %s",
						addr, r.Addr, got.Role, got.MasterID, m.Addr))
				}
			}
		}
		return problems
	}
	for _, e := range plan.Endpoints() {
		for _, p := range topology(e.Addr, true) {
			t.Error(p)
		}
	}
	var last []string
	err := admin.Poll(ctx, "every node to see every replica", func(context.Context) (bool, string) {
		last = nil
		for _, e := range plan.Endpoints() {
			last = append(last, topology(e.Addr, false)...)
		}
		return len(last) == 0, strings.Join(last, "; ")
	})
	if err != nil {
		t.Error(err)
	}
}

// redisCliCheck runs the real `redis-cli --cluster check` and asserts it passes.
func redisCliCheck(ctx context.Context, t testing.TB, addr, password string) {
	t.Helper()
	args := []string{"--cluster", "check", addr}
	if password != "" {
		args = append([]string{"-a", password, "--no-auth-warning"}, args...)
	}
	out, err := exec.CommandContext(ctx, "redis-cli", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("redis-cli --cluster check %s: %v\n%s", addr, err, out)
	}
	for _, want := range []string{"[OK] All nodes agree about slots configuration.", "[OK] All 16384 slots covered."} {
		if !strings.Contains(string(out), want) {
			t.Errorf("redis-cli --cluster check output lacks %q:\n%s", want, out)
		}
	}
}

// assertCheckOK runs Check and asserts a healthy cluster of the shape of plan.
func assertCheckOK(ctx context.Context, t *testing.T, admin *Admin, addr string, plan layout.Plan) CheckResult {
	t.Helper()
	res, err := admin.Check(ctx, []string{addr})
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Err(); err != nil {
		t.Fatal(err)
	}
	masters, replicas := len(plan.Masters), len(plan.Endpoints())-len(plan.Masters)
	if got := len(res.Masters()); got != masters {
		t.Errorf("Check found %d masters, want %d", got, masters)
	}
	if got := len(res.Replicas()); got != replicas {
		t.Errorf("Check found %d replicas, want %d", got, replicas)
	}
	if res.SlotsCovered != nodes.SlotCount {
		t.Errorf("Check found %d slots covered, want %d", res.SlotsCovered, nodes.SlotCount)
	}
	return res
}

func clusterClient(addrs []string, password string) *goredis.ClusterClient {
	return goredis.NewClusterClient(&goredis.ClusterOptions{
		Addrs: addrs, Password: password, DisableIdentity: true, Protocol: 2,
	})
}

func writeKeys(ctx context.Context, t *testing.T, c *goredis.ClusterClient, n int) {
	t.Helper()
	_, err := c.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i := range n {
			p.Set(ctx, fmt.Sprintf("key:%d", i), fmt.Sprintf("value:%d", i), 0)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("while writing %d keys: %v", n, err)
	}
}

func readKeys(ctx context.Context, t *testing.T, c *goredis.ClusterClient, n int) {
	t.Helper()
	cmds, err := c.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i := range n {
			p.Get(ctx, fmt.Sprintf("key:%d", i))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("while reading %d keys: %v", n, err)
	}
	for i, cmd := range cmds {
		if got, want := cmd.(*goredis.StringCmd).Val(), fmt.Sprintf("value:%d", i); got != want {
			t.Fatalf("key:%d = %q, want %q", i, got, want)
		}
	}
}

func TestCreateSixNodes(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	servers := startServers(t, 6, "")
	admin := NewAdmin("", 2*time.Second)
	defer func() { _ = admin.Close() }()

	plan := createCluster(ctx, t, admin, servers, 1)
	assertTopology(ctx, t, admin, plan)
	res := assertCheckOK(ctx, t, admin, servers[0].addr, plan)
	if len(res.Masters()) != 3 || len(res.Replicas()) != 3 {
		t.Fatalf("Check found %d masters and %d replicas, want 3 and 3", len(res.Masters()), len(res.Replicas()))
	}
	masterOf := map[string]bool{}
	for _, r := range res.Replicas() {
		if masterOf[r.MasterID] {
			t.Errorf("two replicas of master %s", r.MasterID)
		}
		masterOf[r.MasterID] = true
	}
	redisCliCheck(ctx, t, servers[0].addr, "")

	cc := clusterClient(addrsOf(servers), "")
	defer func() { _ = cc.Close() }()
	writeKeys(ctx, t, cc, 10000)
	readKeys(ctx, t, cc, 10000)

	t.Run("a second Create refuses and changes nothing", func(t *testing.T) {
		for _, p := range []layout.Plan{plan, mustPlan(t, endpointsOf(servers[1:]), 0)} {
			err := admin.Create(ctx, p)
			if !errors.Is(err, layout.ErrNodeNotEmpty) {
				t.Fatalf("Create on an existing cluster: error = %v, want ErrNodeNotEmpty", err)
			}
			if !strings.Contains(err.Error(), "nothing was changed") || !strings.Contains(err.Error(), "already knows 5 other nodes") {
				t.Errorf("error %q does not explain itself", err)
			}
		}
		readKeys(ctx, t, cc, 10000)
		var total int64
		for _, m := range res.Masters() {
			n, err := admin.Client(m.Addr).DBSize(ctx).Result()
			if err != nil {
				t.Fatal(err)
			}
			total += n
		}
		if total != 10000 {
			t.Errorf("masters hold %d keys, want 10000", total)
		}
		assertTopology(ctx, t, admin, plan)
		redisCliCheck(ctx, t, servers[3].addr, "")
	})
}

// TestMeetIntroducesEveryPairAtOnce: right after the MEETs, before any gossip, every node
// already lists every node after it in the plan (in handshake or known): each was met
// directly, so none waits for the gossip of the first master to learn of the others.
func TestMeetIntroducesEveryPairAtOnce(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	admin, plan, empty := createUpTo(ctx, t, func(a *Admin) []createStep { return []createStep{a.assignSlots, a.setConfigEpochs, a.meet} })
	endpoints := plan.Endpoints()
	for i, e := range endpoints {
		view, err := admin.ClusterNodes(ctx, e.Addr)
		if err != nil {
			t.Fatal(err)
		}
		if want := len(endpoints) - i; len(view) < want {
			t.Errorf("%s (node %d of the plan) lists %d nodes right after the MEETs, want at least %d: itself and every node after it", e.Addr, i, len(view), want)
		}
	}
	if err := admin.waitMet(ctx, plan, empty); err != nil {
		t.Fatalf("the nodes met directly did not come to know each other: %v", err)
	}
}

// TestAnnounceSlotsSendsEveryNodeAMeetFromEveryOtherMaster: once the nodes know each other,
// each master's MEET reaches every other node (the packet a node takes a known master's
// slots from), so no node waits for its next ping to learn them.
func TestAnnounceSlotsSendsEveryNodeAMeetFromEveryOtherMaster(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	admin, plan, empty := createUpTo(ctx, t, func(a *Admin) []createStep { return []createStep{a.assignSlots, a.setConfigEpochs, a.meet, a.waitMet} })
	meetsReceived := func(addr string) int {
		info, err := admin.ClusterInfo(ctx, addr)
		if err != nil {
			t.Fatal(err)
		}
		n, _ := strconv.Atoi(info["cluster_stats_messages_meet_received"]) // absent until the first
		return n
	}
	endpoints := plan.Endpoints()
	before := map[string]int{}
	for _, e := range endpoints {
		before[e.Addr] = meetsReceived(e.Addr)
	}
	if err := admin.announceSlots(ctx, plan, empty); err != nil {
		t.Fatal(err)
	}
	isMaster := map[string]bool{}
	for _, m := range plan.Masters {
		isMaster[m.Addr] = true
	}
	for _, e := range endpoints {
		want := len(plan.Masters)
		if isMaster[e.Addr] {
			want-- // not from itself
		}
		// Redis sends a MEET from its cron (every 100 ms) once it has a link to the node.
		deadline := time.Now().Add(5 * time.Second)
		got := meetsReceived(e.Addr) - before[e.Addr]
		for got < want && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
			got = meetsReceived(e.Addr) - before[e.Addr]
		}
		if got < want {
			t.Errorf("%s received %d MEETs after every node knew the others, want one from each of the %d other masters", e.Addr, got, want)
		}
	}
	if err := admin.waitSlots(ctx, plan, empty); err != nil {
		t.Fatalf("the nodes did not come to agree on the slots: %v", err)
	}
}

// createStep is one of Create's steps.
type createStep func(context.Context, layout.Plan, map[string]emptyNode) error

// createUpTo starts six empty servers, plans a cluster of three masters with a replica each,
// runs the preflight and then the Create steps that steps names, and returns the admin (closed
// at the test's end), the plan and what the preflight learnt.
func createUpTo(ctx context.Context, t *testing.T, steps func(*Admin) []createStep) (*Admin, layout.Plan, map[string]emptyNode) {
	t.Helper()
	servers := startServers(t, 6, "")
	admin := NewAdmin("", 2*time.Second)
	t.Cleanup(func() { _ = admin.Close() })
	plan := mustPlan(t, endpointsOf(servers), 1)
	empty, err := admin.preflight(ctx, plan)
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range steps(admin) {
		if err := step(ctx, plan, empty); err != nil {
			t.Fatal(err)
		}
	}
	return admin, plan, empty
}

func mustPlan(t *testing.T, nodes []layout.Endpoint, replicas int) layout.Plan {
	t.Helper()
	p, err := layout.Create(nodes, replicas)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCreateSevenNodes(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	servers := startServers(t, 7, "")
	admin := NewAdmin("", 2*time.Second)
	defer func() { _ = admin.Close() }()

	plan := createCluster(ctx, t, admin, servers, 1)
	if len(plan.Masters) != 3 || len(plan.Endpoints()) != 7 {
		t.Fatalf("plan has %d masters and %d nodes, want 3 and 7", len(plan.Masters), len(plan.Endpoints()))
	}
	assertTopology(ctx, t, admin, plan)
	res := assertCheckOK(ctx, t, admin, servers[6].addr, plan)
	if len(res.Masters()) != 3 || len(res.Replicas()) != 4 {
		t.Fatalf("Check found %d masters and %d replicas, want 3 and 4", len(res.Masters()), len(res.Replicas()))
	}
	perMaster := map[string]int{}
	for _, r := range res.Replicas() {
		perMaster[r.MasterID]++
	}
	if len(perMaster) != 3 {
		t.Errorf("replicas serve %d masters, want 3: %v", len(perMaster), perMaster)
	}
	redisCliCheck(ctx, t, servers[0].addr, "")
}

func TestCreateWithPassword(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	servers := startServers(t, 6, "x", "--requirepass", "x", "--masterauth", "x")
	plan := mustPlan(t, endpointsOf(servers), 1)

	wrong := NewAdmin("wrong", 2*time.Second)
	defer func() { _ = wrong.Close() }()
	if err := wrong.Create(ctx, plan); err == nil || !strings.Contains(err.Error(), "nothing was changed") {
		t.Fatalf("Create with a wrong password: error = %v, want an auth error before any change", err)
	}

	admin := NewAdmin("x", 2*time.Second)
	defer func() { _ = admin.Close() }()
	if err := admin.Create(ctx, plan); err != nil {
		t.Fatal(err)
	}
	assertTopology(ctx, t, admin, plan)
	assertCheckOK(ctx, t, admin, servers[0].addr, plan)
	redisCliCheck(ctx, t, servers[0].addr, "x")

	cc := clusterClient(addrsOf(servers), "x")
	defer func() { _ = cc.Close() }()
	writeKeys(ctx, t, cc, 1000)
	readKeys(ctx, t, cc, 1000)
}

// TestCreateRefusesNonEmptyNodes prepares one node of three fresh ones the way an existing
// cluster would leave it and checks Create refuses without touching any node.
func TestCreateRefusesNonEmptyNodes(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		prepare func(ctx context.Context, admin *Admin, servers []*testServer) error
		wantErr string
	}{
		"a node holds keys": {
			prepare: func(ctx context.Context, admin *Admin, servers []*testServer) error {
				c := admin.Client(servers[2].addr)
				if err := c.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", 0, nodes.SlotCount-1).Err(); err != nil {
					return err
				}
				// The node refuses writes for about two seconds after it gets slots.
				err := admin.Poll(ctx, "a write", func(ctx context.Context) (bool, string) {
					err := c.Set(ctx, "precious", "data", 0).Err()
					return err == nil, fmt.Sprint(err)
				})
				if err != nil {
					return err
				}
				return c.Do(ctx, "CLUSTER", "DELSLOTSRANGE", 0, nodes.SlotCount-1).Err()
			},
			wantErr: "holds 1 keys",
		},
		"a node serves slots": {
			prepare: func(ctx context.Context, admin *Admin, servers []*testServer) error {
				return admin.Client(servers[1].addr).Do(ctx, "CLUSTER", "ADDSLOTS", 42).Err()
			},
			wantErr: "already has slots assigned (42)",
		},
		"two nodes already met": {
			prepare: func(ctx context.Context, admin *Admin, servers []*testServer) error {
				if err := admin.Client(servers[0].addr).Do(ctx, "CLUSTER", "MEET", "127.0.0.1", servers[2].port).Err(); err != nil {
					return err
				}
				// MEET does not carry the bus port here (it is not port+10000), so wait only
				// for the node to be listed, in handshake or not.
				return admin.Poll(ctx, "the meet", func(ctx context.Context) (bool, string) {
					nodes, err := admin.ClusterNodes(ctx, servers[0].addr)
					return err == nil && len(nodes) == 2, ""
				})
			},
			wantErr: "already knows 1 other nodes",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			servers := startServers(t, 3, "")
			admin := NewAdmin("", 2*time.Second)
			defer func() { _ = admin.Close() }()
			if err := tc.prepare(ctx, admin, servers); err != nil {
				t.Fatalf("while preparing: %v", err)
			}
			before := snapshot(ctx, t, admin, servers)
			err := admin.Create(ctx, mustPlan(t, endpointsOf(servers), 0))
			if !errors.Is(err, layout.ErrNodeNotEmpty) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error = %v, want ErrNodeNotEmpty mentioning %q", err, tc.wantErr)
			}
			if after := snapshot(ctx, t, admin, servers); after != before {
				t.Errorf("Create changed the nodes:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
}

// snapshot describes the cluster state of servers: known nodes, slots, epochs and keys.
func snapshot(ctx context.Context, t *testing.T, admin *Admin, servers []*testServer) string {
	t.Helper()
	var parts []string
	for _, s := range servers {
		info, err := admin.ClusterInfo(ctx, s.addr)
		if err != nil {
			t.Fatal(err)
		}
		keys, err := admin.Client(s.addr).DBSize(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, fmt.Sprintf("%s known=%s slots=%s epoch=%s keys=%d", s.addr,
			info["cluster_known_nodes"], info["cluster_slots_assigned"], info["cluster_current_epoch"], keys))
	}
	return strings.Join(parts, "; ")
}

func TestCreateRejectsInvalidPlan(t *testing.T) {
	admin := NewAdmin("", time.Second)
	defer func() { _ = admin.Close() }()
	err := admin.Create(context.Background(), layout.Plan{})
	if err == nil || !strings.Contains(err.Error(), "invalid plan") {
		t.Fatalf("error = %v, want an invalid plan error", err)
	}
}
