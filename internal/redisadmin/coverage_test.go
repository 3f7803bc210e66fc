package redisadmin

import (
	"slices"
	"testing"
	"time"
)

// stale marks the nodes at indexes i as not yet set to Spec.Coverage.
func (c *cluster) stale(i ...int) *cluster {
	for _, n := range i {
		c.snap.Nodes[n].StaleCoverage = true
	}
	return c
}

func TestPlanCoverage(t *testing.T) {
	covering := func(value string) Spec {
		s := specFor(6)
		s.Coverage = value
		return s
	}
	all := []string{addrOf(0), addrOf(1), addrOf(2), addrOf(3), addrOf(4), addrOf(5)}
	cases := map[string]struct {
		spec  Spec
		snap  Snapshot
		want  StepKind
		addrs []string // the nodes StepSetCoverage sets
	}{
		"every node set: idle":                          {spec: covering("no"), snap: six().current().snap, want: StepIdle},
		"an operator that just started sets every node": {spec: covering("no"), snap: six().current().stale(0, 1, 2, 3, 4, 5).snap, want: StepSetCoverage, addrs: all},
		"a restarted node is set again":                 {spec: covering("no"), snap: six().current().stale(4).snap, want: StepSetCoverage, addrs: []string{addrOf(4)}},
		"a silent node is left for when it answers": {
			spec: covering("yes"), snap: six().current().stale(0, 1, 2, 3, 4, 5).silence(1, errDown).snap, want: StepSetCoverage,
			addrs: []string{addrOf(0), addrOf(2), addrOf(3), addrOf(4), addrOf(5)},
		},
		"a lost shard: the other shards are set before the loss is reported": {
			spec: covering("no"), snap: lostShard(time.Minute).stale(1, 2, 4, 5).snap, want: StepSetCoverage,
			addrs: []string{addrOf(1), addrOf(2), addrOf(4), addrOf(5)},
		},
		"a lost shard, the others set: the loss is reported": {spec: covering("no"), snap: lostShard(time.Minute).snap, want: StepLost},
		"the configuration not known: nothing is set":        {spec: specFor(6), snap: six().current().stale(0, 1).snap, want: StepIdle},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, ok := nextStepIs(t, tc.spec, tc.snap, tc.want, StepSetCoverage)
			if !ok {
				return
			}
			expect(t, got.Coverage == tc.spec.Coverage && got.After == LookSoon, "sets %q after %s, want %q", got.Coverage, got.After, tc.spec.Coverage)
			expect(t, slices.Equal(got.Addrs, tc.addrs), "sets %v, want %v", got.Addrs, tc.addrs)
		})
	}
}

// nextStepIs fails the test unless NextStep chooses the step kind want, and reports whether
// that is the kind a table checks further (check).
func nextStepIs(t *testing.T, spec Spec, snap Snapshot, want, check StepKind) (Step, bool) {
	t.Helper()
	got := NextStep(spec, snap, Assess(snap))
	if got.Kind != want {
		t.Fatalf("step %s (%s), want %s", got.Kind, got.Reason, want)
	}
	return got, got.Kind == check
}
