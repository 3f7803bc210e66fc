package plan

import (
	"slices"
	"testing"
	"time"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/health"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/observe"
	"github.com/middleware-operator/middleware-operator/tests/fakesnapshot"
)

func TestPlanCoverage(t *testing.T) {
	covering := func(value string) Desired {
		s := specFor(6)
		s.Coverage = value
		return s
	}
	all := []string{fakesnapshot.Addr(0), fakesnapshot.Addr(1), fakesnapshot.Addr(2), fakesnapshot.Addr(3), fakesnapshot.Addr(4), fakesnapshot.Addr(5)}
	cases := map[string]struct {
		spec  Desired
		snap  observe.Snapshot
		want  StepKind
		addrs []string // the nodes StepSetCoverage sets
		// behind is the step a StepSetCoverage leaves for the status (Step.Behind).
		behind StepKind
	}{
		"every node set: idle":                          {spec: covering("no"), snap: fakesnapshot.Six().Current().Snap, want: StepIdle},
		"an operator that just started sets every node": {spec: covering("no"), snap: fakesnapshot.Six().Current().Stale(0, 1, 2, 3, 4, 5).Snap, want: StepSetCoverage, addrs: all, behind: StepIdle},
		"a restarted node is set again":                 {spec: covering("no"), snap: fakesnapshot.Six().Current().Stale(4).Snap, want: StepSetCoverage, addrs: []string{fakesnapshot.Addr(4)}, behind: StepIdle},
		"a recovery under way stays what the status shows": {
			spec: covering("no"), snap: fakesnapshot.Six().Current().WithNewMaster().Stale(0).Snap, want: StepSetCoverage, addrs: []string{fakesnapshot.Addr(0)}, behind: StepRecover,
		},
		"a silent node is left for when it answers": {
			spec: covering("yes"), snap: fakesnapshot.Six().Current().Stale(0, 1, 2, 3, 4, 5).Silence(1, fakesnapshot.ErrDown).Snap, want: StepSetCoverage,
			addrs: []string{fakesnapshot.Addr(0), fakesnapshot.Addr(2), fakesnapshot.Addr(3), fakesnapshot.Addr(4), fakesnapshot.Addr(5)}, behind: StepWait,
		},
		"a lost shard: the other shards are set first, the loss still shown": {
			spec: covering("no"), snap: fakesnapshot.LostShard(time.Minute).Stale(1, 2, 4, 5).Snap, want: StepSetCoverage,
			addrs: []string{fakesnapshot.Addr(1), fakesnapshot.Addr(2), fakesnapshot.Addr(4), fakesnapshot.Addr(5)}, behind: StepLost,
		},
		"a lost shard, the others set: the loss is reported": {spec: covering("no"), snap: fakesnapshot.LostShard(time.Minute).Snap, want: StepLost},
		"the configuration not known: nothing is set":        {spec: specFor(6), snap: fakesnapshot.Six().Current().Stale(0, 1).Snap, want: StepIdle},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, ok := nextStepIs(t, tc.spec, tc.snap, tc.want, StepSetCoverage)
			if !ok {
				return
			}
			expect(t, got.Coverage == tc.spec.Coverage && got.After == lookNext, "sets %q after %s, want %q", got.Coverage, got.After, tc.spec.Coverage)
			expect(t, slices.Equal(got.Addrs, tc.addrs), "sets %v, want %v", got.Addrs, tc.addrs)
			expect(t, got.Behind != nil && got.Shown().Kind == tc.behind, "the status shows %s, want %s", got.Shown().Kind, tc.behind)
			if got.Behind != nil {
				behind := nextStepSeen(tc.spec, clearStale(tc.snap), health.Assess(tc.snap))
				expect(t, got.Shown().Operation == behind.Operation && got.Shown().Reason == behind.Reason,
					"the status shows %q (%s), the step once the nodes are set is %q (%s)", got.Shown().Operation, got.Shown().Reason, behind.Operation, behind.Reason)
			}
		})
	}
}

// nextStepIs fails the test unless NextStep chooses the step kind want, and reports whether
// that is the kind a table checks further (check).
func nextStepIs(t *testing.T, spec Desired, snap observe.Snapshot, want, check StepKind) (Step, bool) {
	t.Helper()
	got := nextStepSeen(spec, snap, health.Assess(snap))
	if got.Kind != want {
		t.Fatalf("step %s (%s), want %s", got.Kind, got.Reason, want)
	}
	return got, got.Kind == check
}

// clearStale is snap once every node is set.
func clearStale(snap observe.Snapshot) observe.Snapshot {
	snap.Nodes = slices.Clone(snap.Nodes)
	for i := range snap.Nodes {
		snap.Nodes[i].StaleCoverage = false
	}
	return snap
}
