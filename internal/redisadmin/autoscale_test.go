package redisadmin

import (
	"strings"
	"testing"
	"time"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/health"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/observe"
	"github.com/middleware-operator/middleware-operator/tests/fakesnapshot"
)

// autoscaleCase is a row of TestPlanAutoscale: the decision want, whose reason says says.
type autoscaleCase struct {
	a     Autoscale
	st    AutoscaleState
	snap  observe.Snapshot
	busy  string
	want  AutoscaleKind
	says  string
	check func(t *testing.T, d AutoscaleDecision)
}

func TestPlanAutoscale(t *testing.T) {
	a := Autoscale{TargetPercent: 70, MinMasters: 3, MaxMasters: 5, Sustain: 5 * time.Minute, CoolDown: 10 * time.Minute}
	scaleIn := a
	scaleIn.ScaleIn = true
	atMax := a
	atMax.MaxMasters = 3
	ago := func(d time.Duration) time.Time { return fakesnapshot.Now.Add(-d) }
	full := func() observe.Snapshot { return fakesnapshot.Six().Current().Used(80, 75, 72, 80, 75, 72).Snap }
	cases := map[string]autoscaleCase{
		"below the target: nothing, and no clock runs": {
			a: a, st: AutoscaleState{AboveSince: ago(time.Minute)}, snap: fakesnapshot.Six().Current().Used(50, 40, 30, 50, 40, 30).Snap, want: AutoscaleNone,
			says: "below the target 70%",
			check: func(t *testing.T, d AutoscaleDecision) {
				expect(t, d.State.AboveSince.IsZero() && d.State.BelowSince.IsZero(), "state %+v", d.State)
			},
		},
		"just crossed the target: the clock starts, nothing yet": {
			a: a, snap: full(), want: AutoscaleNone, says: "acting after 5m0s",
			check: func(t *testing.T, d AutoscaleDecision) {
				expect(t, d.State.AboveSince.Equal(fakesnapshot.Now), "above since %s", d.State.AboveSince)
			},
		},
		"past the target for the sustain period: add a shard": {
			a: a, st: AutoscaleState{AboveSince: ago(6 * time.Minute)}, snap: full(), want: AutoscaleOut, says: "master rc-0 uses 80%",
			check: func(t *testing.T, d AutoscaleDecision) {
				expect(t, d.Masters == 4, "masters %d", d.Masters)
				expect(t, d.State.LastChange.Equal(fakesnapshot.Now) && d.State.AboveSince.IsZero(), "state %+v", d.State)
			},
		},
		"past the target but cooling down after the last change": {
			a: a, st: AutoscaleState{AboveSince: ago(6 * time.Minute), LastChange: ago(3 * time.Minute)}, snap: full(), want: AutoscaleNone,
			says: "cooling down",
			check: func(t *testing.T, d AutoscaleDecision) {
				expect(t, d.State.AboveSince.Equal(ago(6*time.Minute)), "the clock was reset: %+v", d.State)
			},
		},
		"past the target after the cool-down": {
			a: a, st: AutoscaleState{AboveSince: ago(6 * time.Minute), LastChange: ago(11 * time.Minute)}, snap: full(), want: AutoscaleOut,
		},
		"giant slot: a master its held slot alone keeps past the target gets no shard": {
			a: a, st: AutoscaleState{AboveSince: ago(6 * time.Minute), Held: []HeldSlot{{Slot: 0, Source: "aaaaaaaa", Target: "dddddddd", Size: SlotSize{38000, 750}, Giant: true}}},
			snap: full(), want: AutoscaleNone, says: "its slots 0 (38000 keys, about 750 B) are too big to move",
			check: func(t *testing.T, d AutoscaleDecision) {
				expect(t, d.Phase == PhaseSlotTooBig && d.Masters == 3, "phase %s, masters %d", d.Phase, d.Masters)
				expect(t, strings.Contains(d.Reason, "adding shards cannot relieve it"), "reason %q", d.Reason)
			},
		},
		"a held slot below the target share: the master can still be relieved, add a shard": {
			a: a, st: AutoscaleState{AboveSince: ago(6 * time.Minute), Held: []HeldSlot{{Slot: 0, Source: "aaaaaaaa", Size: SlotSize{100, 300}, Giant: true}}},
			snap: full(), want: AutoscaleOut,
		},
		"a slot held only because its target was full: add a shard": {
			a: a, st: AutoscaleState{AboveSince: ago(6 * time.Minute), Held: []HeldSlot{{Slot: 0, Source: "aaaaaaaa", Size: SlotSize{100, 750}}}},
			snap: full(), want: AutoscaleOut,
		},
		"a held slot on another master than the fullest: add a shard": {
			a: a, st: AutoscaleState{AboveSince: ago(6 * time.Minute), Held: []HeldSlot{{Slot: 6000, Source: "bbbbbbbb", Size: SlotSize{100, 750}, Giant: true}}},
			snap: full(), want: AutoscaleOut,
		},
		"past the target at the maximum: nothing, and the status says so": {
			a: atMax, st: AutoscaleState{AboveSince: ago(time.Hour)}, snap: full(), want: AutoscaleNone, says: "maximum of 3 masters",
		},
		"one hot master while the others have room: rebalance by memory, no new shard": {
			a: a, st: AutoscaleState{AboveSince: ago(6 * time.Minute)}, snap: fakesnapshot.Six().Current().Used(90, 20, 20, 90, 20, 20).Snap, want: AutoscaleRebalance,
			check: func(t *testing.T, d AutoscaleDecision) {
				expect(t, d.Masters == 3, "masters %d", d.Masters)
				hot, cold := d.Weights["aaaaaaaa"], d.Weights["bbbbbbbb"]
				expect(t, len(d.Weights) == 3 && hot > 0 && cold > 4*hot, "weights %v: the hot master should weigh far less", d.Weights)
				expect(t, d.State.LastChange.Equal(fakesnapshot.Now), "state %+v", d.State)
			},
		},
		"busy with a backup: wait, the clocks are kept": {
			a: a, st: AutoscaleState{AboveSince: ago(time.Hour)}, snap: full(), busy: "a backup is under way", want: AutoscaleWait,
			says: "a backup is under way",
			check: func(t *testing.T, d AutoscaleDecision) {
				expect(t, d.State.AboveSince.Equal(ago(time.Hour)), "state %+v", d.State)
			},
		},
		"a node down: wait": {
			a: a, st: AutoscaleState{AboveSince: ago(time.Hour)}, snap: fakesnapshot.Six().Current().Used(80, 75, 72, 80, 75, 72).Silence(4, fakesnapshot.ErrDown).Snap,
			want: AutoscaleWait, says: "not healthy",
		},
		"a scale under way (a master without slots yet): wait": {
			a: a, st: AutoscaleState{AboveSince: ago(time.Hour)},
			snap: func() observe.Snapshot { s := full(); s.Masters = 4; return s }(), want: AutoscaleWait, says: "3 masters serve slots and the spec asks for 4",
		},
		"no maxmemory: nothing to scale on": {
			a: a, snap: fakesnapshot.Six().Current().Snap, want: AutoscaleNone, says: "no maxmemory",
		},
		"nearly empty, scale in not opted in: nothing": {
			a: a, snap: fakesnapshot.Six().Current().Used(10, 10, 10, 10, 10, 10).Snap, want: AutoscaleNone,
			check: func(t *testing.T, d AutoscaleDecision) { expect(t, d.State.BelowSince.IsZero(), "state %+v", d.State) },
		},
		"nearly empty at the minimum: nothing": {
			a: scaleIn, st: AutoscaleState{BelowSince: ago(time.Hour)}, snap: fakesnapshot.Six().Current().Used(10, 10, 10, 10, 10, 10).Snap, want: AutoscaleNone,
			says: "minimum of 3 masters",
		},
	}
	// Above the minimum: four masters whose data fits in three.
	four := func(percent int64) observe.Snapshot {
		c := eight()
		c.Snap.Masters = 4
		for i := range c.Snap.Nodes {
			r := c.Snap.Nodes[i].Replication
			r["maxmemory"], r["used_memory"] = "1000", itoa(percent*10)
		}
		return c.Snap
	}
	cases["fits in one master fewer for long: remove a shard"] = autoscaleCase{a: scaleIn, st: AutoscaleState{BelowSince: ago(6 * time.Minute)}, snap: four(30), want: AutoscaleIn, says: "removing a shard (3 masters)",
		check: func(t *testing.T, d AutoscaleDecision) { expect(t, d.Masters == 3, "masters %d", d.Masters) }}
	cases["would be near the target on one master fewer: no scale in"] = autoscaleCase{a: scaleIn, st: AutoscaleState{BelowSince: ago(time.Hour)}, snap: four(45), want: AutoscaleNone, says: "below the target",
		check: func(t *testing.T, d AutoscaleDecision) { expect(t, d.State.BelowSince.IsZero(), "state %+v", d.State) }}

	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			d := PlanAutoscale(tc.a, tc.st, tc.snap, health.Assess(tc.snap), tc.busy)
			if d.Kind != tc.want {
				t.Fatalf("decision %s (%s), want %s", d.Kind, d.Reason, tc.want)
			}
			if d.Phase == "" {
				t.Errorf("%s decision without a phase for the status", d.Kind)
			}
			if d.Reason == "" || !strings.Contains(d.Reason, tc.says) {
				t.Errorf("reason %q, want it to say %q", d.Reason, tc.says)
			}
			if d.Kind != AutoscaleOut && d.Kind != AutoscaleIn && d.Masters != tc.snap.Masters {
				t.Errorf("%s asks for %d masters, want %d", d.Kind, d.Masters, tc.snap.Masters)
			}
			if tc.check != nil {
				tc.check(t, d)
			}
		})
	}
}

// TestNextStepAutoscale checks where the autoscaler sits in NextStep: it acts only when
// nothing else is to be done, its decision rides on every step (keeping its clocks), and a
// memory rebalance's weights steer the slot moves only while they name every master.
func TestNextStepAutoscale(t *testing.T) {
	a := &Autoscale{TargetPercent: 70, MinMasters: 3, MaxMasters: 5, Sustain: 5 * time.Minute, CoolDown: 10 * time.Minute}
	above := func(s Spec) Spec {
		s.Autoscale, s.AutoscaleState = a, AutoscaleState{AboveSince: fakesnapshot.Now.Add(-time.Hour)}
		return s
	}
	full := func(c *fakesnapshot.Cluster) observe.Snapshot { return c.Used(80, 75, 72, 80, 75, 72).Snap }
	cases := map[string]struct {
		spec  Spec
		snap  observe.Snapshot
		want  StepKind
		phase AutoscalePhase
		check func(t *testing.T, s Step)
	}{
		"full for long and nothing else to do: the autoscale step adds a shard": {
			spec: above(specFor(6)), snap: full(fakesnapshot.Six().Current()), want: StepAutoscale, phase: PhaseScalingOut,
			check: func(t *testing.T, s Step) {
				expect(t, s.Autoscale.Masters == 4 && s.Operation == OpScaling && s.After == LookSoon, "masters %d, operation %s, after %s", s.Autoscale.Masters, s.Operation, s.After)
			},
		},
		"no autoscale: idle however full": {
			spec: specFor(6), snap: full(fakesnapshot.Six().Current()), want: StepIdle,
			check: func(t *testing.T, s Step) { expect(t, s.Autoscale == nil, "decision %+v", s.Autoscale) },
		},
		"full, but a pod to join first: the join, and the autoscaler waits with its clock": {
			spec: above(specFor(7)), snap: full(fakesnapshot.Six().Current().Fresh("rc-6", "gggggggg", "n1")), want: StepJoin, phase: PhaseWaiting,
			check: func(t *testing.T, s Step) {
				expect(t, s.Autoscale.State.AboveSince.Equal(fakesnapshot.Now.Add(-time.Hour)), "the clock was reset: %+v", s.Autoscale.State)
				expect(t, strings.Contains(s.Autoscale.Reason, "Join"), "reason %q", s.Autoscale.Reason)
			},
		},
		"full, but a backup under way: idle, the autoscaler waits": {
			spec: func() Spec { s := above(specFor(6)); s.Busy = "backup nightly is under way"; return s }(), snap: full(fakesnapshot.Six().Current()), want: StepIdle, phase: PhaseWaiting,
		},
		"below the target: idle": {
			spec: above(specFor(6)), snap: fakesnapshot.Six().Current().Used(30, 30, 30, 30, 30, 30).Snap, want: StepIdle, phase: PhaseBelowTarget,
		},
		"weights naming every master steer the slot moves": {
			spec: func() Spec {
				s := specFor(6)
				s.SlotWeights = map[string]float64{"aaaaaaaa": 1, "bbbbbbbb": 2, "cccccccc": 2}
				return s
			}(),
			snap: fakesnapshot.Six().Current().Snap, want: StepRebalance,
			check: func(t *testing.T, s Step) {
				expect(t, s.Weights["aaaaaaaa"] == 1 && s.Weights["bbbbbbbb"] == 2, "weights %v", s.Weights)
			},
		},
		"weights that miss a master are stale: even slots, nothing to move": {
			spec: func() Spec {
				s := specFor(6)
				s.SlotWeights = map[string]float64{"aaaaaaaa": 1, "bbbbbbbb": 2}
				return s
			}(),
			snap: fakesnapshot.Six().Current().Snap, want: StepIdle,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			step := NextStep(tc.spec, tc.snap, health.Assess(tc.snap))
			if step.Kind != tc.want {
				t.Fatalf("step %s (%s), want %s", step.Kind, step.Reason, tc.want)
			}
			if tc.phase != "" && (step.Autoscale == nil || step.Autoscale.Phase != tc.phase) {
				t.Errorf("autoscale decision %+v, want phase %s", step.Autoscale, tc.phase)
			}
			if tc.check != nil {
				tc.check(t, step)
			}
		})
	}
}
