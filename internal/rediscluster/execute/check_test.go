package execute

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
)

// problemKinds returns the kinds of problems in res, sorted and deduplicated.
func problemKinds(res CheckResult) []ProblemKind {
	var kinds []ProblemKind
	for _, p := range res.Problems {
		kinds = append(kinds, p.Kind)
	}
	slices.Sort(kinds)
	return slices.Compact(kinds)
}

// waitCheck runs Check until cond holds on its result.
func waitCheck(ctx context.Context, t *testing.T, admin *Admin, addrs []string, what string, cond func(CheckResult) bool) CheckResult {
	t.Helper()
	var res CheckResult
	err := admin.Poll(ctx, what, func(ctx context.Context) (bool, string) {
		var err error
		res, err = admin.Check(ctx, addrs)
		if err != nil {
			return false, err.Error()
		}
		return cond(res), fmt.Sprint(res.Problems)
	})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestCheckFindsProblems breaks a real cluster in the ways redis-cli --cluster check
// detects and checks that Check reports each, then that it is healthy again once repaired.
func TestCheckFindsProblems(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	servers := startServers(t, 6, "")
	admin := NewAdmin("", time.Second)
	defer func() { _ = admin.Close() }()
	plan := createCluster(ctx, t, admin, servers, 1)
	m0, m1 := plan.Masters[0].Addr, plan.Masters[1].Addr
	res := assertCheckOK(ctx, t, admin, m0, plan)
	id := map[string]string{}
	for _, n := range res.Nodes {
		id[n.Addr] = n.ID
	}
	do := func(addr string, args ...any) {
		t.Helper()
		if err := admin.Client(addr).Do(ctx, args...).Err(); err != nil {
			t.Fatalf("%s %v: %v", addr, args, err)
		}
	}
	healthy := func(r CheckResult) bool { return r.OK() }

	t.Run("unreachable address", func(t *testing.T) {
		dead := "127.0.0.1:1"
		res, err := admin.Check(ctx, []string{dead, m0})
		if err != nil {
			t.Fatal(err)
		}
		if got := problemKinds(res); !slices.Equal(got, []ProblemKind{ProblemUnreachable}) || res.Problems[0].Addr != dead {
			t.Errorf("problems = %v, want only %s unreachable", res.Problems, dead)
		}
		if len(res.Nodes) != 6 {
			t.Errorf("found %d nodes, want 6", len(res.Nodes))
		}
		if _, err := admin.Check(ctx, []string{dead}); err == nil {
			t.Error("Check with no reachable node: want an error")
		}
		if _, err := admin.Check(ctx, nil); err == nil {
			t.Error("Check with no address: want an error")
		}
	})

	t.Run("open slots", func(t *testing.T) {
		do(m1, "CLUSTER", "SETSLOT", 100, "IMPORTING", id[m0])
		do(m0, "CLUSTER", "SETSLOT", 100, "MIGRATING", id[m1])
		res, err := admin.Check(ctx, []string{m0})
		if err != nil {
			t.Fatal(err)
		}
		if got := problemKinds(res); !slices.Equal(got, []ProblemKind{ProblemOpenSlots}) || len(res.Problems) != 2 {
			t.Fatalf("problems = %v, want open slots on two nodes", res.Problems)
		}
		msgs := res.Err().Error()
		for _, want := range []string{"100 migrating to " + id[m1], "100 importing from " + id[m0]} {
			if !strings.Contains(msgs, want) {
				t.Errorf("problems %q lack %q", msgs, want)
			}
		}
		out, err := exec.CommandContext(ctx, "redis-cli", "--cluster", "check", m0).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "open slot") {
			t.Errorf("redis-cli --cluster check agrees there are open slots? err=%v\n%s", err, out)
		}
		do(m0, "CLUSTER", "SETSLOT", 100, "STABLE")
		do(m1, "CLUSTER", "SETSLOT", 100, "STABLE")
		waitCheck(ctx, t, admin, []string{m0}, "a healthy cluster", healthy)
	})

	t.Run("uncovered slots", func(t *testing.T) {
		do(m0, "CLUSTER", "DELSLOTSRANGE", 0, 9)
		res := waitCheck(ctx, t, admin, []string{m0}, "a cluster state failure", func(r CheckResult) bool {
			return slices.Contains(problemKinds(r), ProblemClusterState)
		})
		if !slices.Contains(problemKinds(res), ProblemSlotsUncovered) || res.SlotsCovered != nodes.SlotCount-10 {
			t.Errorf("problems = %v, covered = %d, want slots 0-9 uncovered", res.Problems, res.SlotsCovered)
		}
		if !strings.Contains(res.Err().Error(), "10 slots unassigned (0-9)") {
			t.Errorf("problems %q do not name the slots", res.Err())
		}
		do(m0, "CLUSTER", "ADDSLOTSRANGE", 0, 9)
		waitCheck(ctx, t, admin, []string{m0}, "a healthy cluster", healthy)
	})

	t.Run("failed node", func(t *testing.T) {
		victim := plan.Masters[2].Replicas[0].Addr
		for _, s := range servers {
			if s.addr == victim {
				s.stop()
			}
		}
		res := waitCheck(ctx, t, admin, []string{m0}, "the dead replica flagged", func(r CheckResult) bool {
			return slices.Contains(problemKinds(r), ProblemNodeFailed)
		})
		kinds := problemKinds(res)
		if !slices.Contains(kinds, ProblemUnreachable) {
			t.Errorf("problems = %v, want the dead replica unreachable too", res.Problems)
		}
		for _, p := range res.Problems {
			if p.Addr != victim {
				t.Errorf("problem %v is not about the dead replica %s", p, victim)
			}
		}
	})
}

func TestCheckResult(t *testing.T) {
	res := CheckResult{Nodes: []nodes.Node{{ID: "a", Role: nodes.RoleMaster}, {ID: "b", Role: nodes.RoleSlave}, {ID: "c"}}}
	if !res.OK() || res.Err() != nil {
		t.Errorf("no problems: OK = %v, Err = %v", res.OK(), res.Err())
	}
	if len(res.Masters()) != 1 || len(res.Replicas()) != 1 || len(res.Nodes) != 3 {
		t.Errorf("Masters = %v, Replicas = %v", res.Masters(), res.Replicas())
	}
	res.Problems = []Problem{{ProblemOpenSlots, "x:1", "x:1 has open slots: 1 migrating to b"}, {ProblemClusterState, "x:1", "x:1 reports cluster_state:fail"}}
	err := res.Err()
	want := "cluster check failed: OpenSlots: x:1 has open slots: 1 migrating to b; ClusterState: x:1 reports cluster_state:fail"
	if res.OK() || err == nil || err.Error() != want {
		t.Errorf("Err = %v, want %q", err, want)
	}
	var target interface{ Error() string }
	if !errors.As(err, &target) {
		t.Error("Err is not an error")
	}
}
