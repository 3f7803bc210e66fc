package plan

import (
	"testing"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/health"
	"github.com/middleware-operator/middleware-operator/tests/fakesnapshot"
)

// BenchmarkIdleLook is what a full look of a converged six-node cluster costs the planner:
// its health assessed and its next step (Idle) chosen, from a fresh snapshot each time as
// a look has. "snapshot" is building the fake snapshot alone, to subtract.
func BenchmarkIdleLook(b *testing.B) {
	spec := specFor(6)
	b.Run("snapshot", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = fakesnapshot.Six().Current().Snap
		}
	})
	b.Run("assess+plan", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			snap := fakesnapshot.Six().Current().Snap
			if step := NextStep(spec, snap, health.Assess(snap)); step.Kind != StepIdle {
				b.Fatalf("step %s (%s), want Idle", step.Kind, step.Reason)
			}
		}
	})
}
