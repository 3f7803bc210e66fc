package plan

import (
	"testing"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/health"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/observe"
	"github.com/middleware-operator/middleware-operator/tests/fakesnapshot"
)

// TestPlanWriteSafety: the setting goes to every answering node when a master runs with
// min-replicas-to-write on while it should be off, or the other way round; nothing when
// they agree, or when the operator does not manage it.
func TestPlanWriteSafety(t *testing.T) {
	strict := WriteSafety{MinReplicas: 1, MaxLag: 2, Managed: true}
	off := WriteSafety{MaxLag: 10, Managed: true}
	withGood := func(pods ...int) observe.Snapshot {
		c := fakesnapshot.Six().Current()
		for _, i := range pods {
			c.Snap.Nodes[i].Replication[observe.GoodReplicasField] = "1"
		}
		return c.Snap
	}
	for name, tc := range map[string]struct {
		want  WriteSafety
		snap  observe.Snapshot
		addrs int
	}{
		"strict, every master on":       {want: strict, snap: withGood(0, 1, 2)},
		"strict, one master off":        {want: strict, snap: withGood(0, 1), addrs: 6},
		"strict, none on":               {want: strict, snap: withGood(), addrs: 6},
		"default, off everywhere":       {want: off, snap: withGood()},
		"default, a master still on":    {want: off, snap: withGood(2), addrs: 6},
		"not managed: the user decides": {want: WriteSafety{}, snap: withGood(2)},
	} {
		t.Run(name, func(t *testing.T) {
			step, ok := planWriteSafety(Desired{WriteSafety: tc.want}, tc.snap, health.Health{})
			if ok != (tc.addrs > 0) || len(step.Addrs) != tc.addrs {
				t.Fatalf("step %v (%v) to %d nodes, want %d", step.Kind, ok, len(step.Addrs), tc.addrs)
			}
			if ok && (step.Kind != StepSetWriteSafety || step.WriteSafety != tc.want) {
				t.Errorf("step %v sets %v, want %v", step.Kind, step.WriteSafety, tc.want)
			}
			spec := specFor(6)
			spec.WriteSafety = tc.want
			if got := nextStepSeen(spec, tc.snap, health.Assess(tc.snap)); ok && got.Kind != StepSetWriteSafety {
				t.Errorf("NextStep chose %s (%s), want %s", got.Kind, got.Reason, StepSetWriteSafety)
			}
		})
	}
}
