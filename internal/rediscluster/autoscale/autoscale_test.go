package autoscale

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/health"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/layout"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/observe"
	"github.com/middleware-operator/middleware-operator/tests/fakesnapshot"
)

// autoscaleCase is a row of TestPlanAutoscale: the decision want, whose reason says says.
type autoscaleCase struct {
	a     Settings
	st    State
	snap  observe.Snapshot
	busy  string
	want  Kind
	says  string
	check func(t *testing.T, d Decision)
}

func TestPlanAutoscale(t *testing.T) {
	a := Settings{TargetPercent: 70, MinMasters: 3, MaxMasters: 5, Sustain: 5 * time.Minute, CoolDown: 10 * time.Minute}
	scaleIn := a
	scaleIn.ScaleIn = true
	atMax := a
	atMax.MaxMasters = 3
	ago := func(d time.Duration) time.Time { return fakesnapshot.Now.Add(-d) }
	full := func() observe.Snapshot { return fakesnapshot.Six().Current().Used(80, 75, 72, 80, 75, 72).Snap }
	cases := map[string]autoscaleCase{
		"below the target: nothing, and no clock runs": {
			a: a, st: State{AboveSince: ago(time.Minute)}, snap: fakesnapshot.Six().Current().Used(50, 40, 30, 50, 40, 30).Snap, want: None,
			says: "below the target 70%",
			check: func(t *testing.T, d Decision) {
				expect(t, d.State.AboveSince.IsZero() && d.State.BelowSince.IsZero(), "state %+v", d.State)
			},
		},
		"just crossed the target: the clock starts, nothing yet": {
			a: a, snap: full(), want: None, says: "acting after 5m0s",
			check: func(t *testing.T, d Decision) {
				expect(t, d.State.AboveSince.Equal(fakesnapshot.Now), "above since %s", d.State.AboveSince)
			},
		},
		"past the target for the sustain period: add a shard": {
			a: a, st: State{AboveSince: ago(6 * time.Minute)}, snap: full(), want: Out, says: "master rc-0 uses 80%",
			check: func(t *testing.T, d Decision) {
				expect(t, d.Masters == 4, "masters %d", d.Masters)
				expect(t, d.State.LastChange.Equal(fakesnapshot.Now) && d.State.AboveSince.IsZero(), "state %+v", d.State)
			},
		},
		"past the target but cooling down after the last change": {
			a: a, st: State{AboveSince: ago(6 * time.Minute), LastChange: ago(3 * time.Minute)}, snap: full(), want: None,
			says: "cooling down",
			check: func(t *testing.T, d Decision) {
				expect(t, d.State.AboveSince.Equal(ago(6*time.Minute)), "the clock was reset: %+v", d.State)
			},
		},
		"past the target after the cool-down": {
			a: a, st: State{AboveSince: ago(6 * time.Minute), LastChange: ago(11 * time.Minute)}, snap: full(), want: Out,
		},
		"giant slot: a master its held slot alone keeps past the target gets no shard": {
			a: a, st: State{AboveSince: ago(6 * time.Minute), Held: []layout.HeldSlot{{Slot: 0, Source: "aaaaaaaa", Target: "dddddddd", Size: layout.SlotSize{Keys: 38000, Bytes: 750}, Giant: true}}},
			snap: full(), want: None, says: "its slots 0 (38000 keys, about 750 B) are too big to move",
			check: func(t *testing.T, d Decision) {
				expect(t, d.Phase == PhaseSlotTooBig && d.Masters == 3, "phase %s, masters %d", d.Phase, d.Masters)
				expect(t, strings.Contains(d.Reason, "adding shards cannot relieve it"), "reason %q", d.Reason)
			},
		},
		"a held slot below the target share: the master can still be relieved, add a shard": {
			a: a, st: State{AboveSince: ago(6 * time.Minute), Held: []layout.HeldSlot{{Slot: 0, Source: "aaaaaaaa", Size: layout.SlotSize{Keys: 100, Bytes: 300}, Giant: true}}},
			snap: full(), want: Out,
		},
		"a slot held only because its target was full: add a shard": {
			a: a, st: State{AboveSince: ago(6 * time.Minute), Held: []layout.HeldSlot{{Slot: 0, Source: "aaaaaaaa", Size: layout.SlotSize{Keys: 100, Bytes: 750}}}},
			snap: full(), want: Out,
		},
		"a held slot on another master than the fullest: add a shard": {
			a: a, st: State{AboveSince: ago(6 * time.Minute), Held: []layout.HeldSlot{{Slot: 6000, Source: "bbbbbbbb", Size: layout.SlotSize{Keys: 100, Bytes: 750}, Giant: true}}},
			snap: full(), want: Out,
		},
		"past the target at the maximum: nothing, and the status says so": {
			a: atMax, st: State{AboveSince: ago(time.Hour)}, snap: full(), want: None, says: "maximum of 3 masters",
		},
		"one hot master while the others have room: rebalance by memory, no new shard": {
			a: a, st: State{AboveSince: ago(6 * time.Minute)}, snap: fakesnapshot.Six().Current().Used(90, 20, 20, 90, 20, 20).Snap, want: Rebalance,
			check: func(t *testing.T, d Decision) {
				expect(t, d.Masters == 3, "masters %d", d.Masters)
				hot, cold := d.Weights["aaaaaaaa"], d.Weights["bbbbbbbb"]
				expect(t, len(d.Weights) == 3 && hot > 0 && cold > 4*hot, "weights %v: the hot master should weigh far less", d.Weights)
				expect(t, d.State.LastChange.Equal(fakesnapshot.Now), "state %+v", d.State)
			},
		},
		"busy with a backup: wait, the clocks are kept": {
			a: a, st: State{AboveSince: ago(time.Hour)}, snap: full(), busy: "a backup is under way", want: Wait,
			says: "a backup is under way",
			check: func(t *testing.T, d Decision) {
				expect(t, d.State.AboveSince.Equal(ago(time.Hour)), "state %+v", d.State)
			},
		},
		"a node down: wait": {
			a: a, st: State{AboveSince: ago(time.Hour)}, snap: fakesnapshot.Six().Current().Used(80, 75, 72, 80, 75, 72).Silence(4, fakesnapshot.ErrDown).Snap,
			want: Wait, says: "not healthy",
		},
		"a scale under way (a master without slots yet): wait": {
			a: a, st: State{AboveSince: ago(time.Hour)},
			snap: func() observe.Snapshot { s := full(); s.Masters = 4; return s }(), want: Wait, says: "3 masters serve slots and the spec asks for 4",
		},
		"no maxmemory: nothing to scale on": {
			a: a, snap: fakesnapshot.Six().Current().Snap, want: None, says: "no maxmemory",
		},
		"nearly empty, scale in not opted in: nothing": {
			a: a, snap: fakesnapshot.Six().Current().Used(10, 10, 10, 10, 10, 10).Snap, want: None,
			check: func(t *testing.T, d Decision) { expect(t, d.State.BelowSince.IsZero(), "state %+v", d.State) },
		},
		"nearly empty at the minimum: nothing": {
			a: scaleIn, st: State{BelowSince: ago(time.Hour)}, snap: fakesnapshot.Six().Current().Used(10, 10, 10, 10, 10, 10).Snap, want: None,
			says: "minimum of 3 masters",
		},
	}
	// Above the minimum: four masters whose data fits in three.
	four := func(percent int64) observe.Snapshot {
		c := fakesnapshot.Eight()
		c.Snap.Masters = 4
		for i := range c.Snap.Nodes {
			r := c.Snap.Nodes[i].Replication
			r["maxmemory"], r["used_memory"] = "1000", itoa(percent*10)
		}
		return c.Snap
	}
	cases["fits in one master fewer for long: remove a shard"] = autoscaleCase{a: scaleIn, st: State{BelowSince: ago(6 * time.Minute)}, snap: four(30), want: In, says: "removing a shard (3 masters)",
		check: func(t *testing.T, d Decision) { expect(t, d.Masters == 3, "masters %d", d.Masters) }}
	cases["would be near the target on one master fewer: no scale in"] = autoscaleCase{a: scaleIn, st: State{BelowSince: ago(time.Hour)}, snap: four(45), want: None, says: "below the target",
		check: func(t *testing.T, d Decision) { expect(t, d.State.BelowSince.IsZero(), "state %+v", d.State) }}

	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			d := Decide(tc.a, tc.st, tc.snap, health.Assess(tc.snap), tc.busy)
			if d.Kind != tc.want {
				t.Fatalf("decision %s (%s), want %s", d.Kind, d.Reason, tc.want)
			}
			if d.Phase == "" {
				t.Errorf("%s decision without a phase for the status", d.Kind)
			}
			if d.Reason == "" || !strings.Contains(d.Reason, tc.says) {
				t.Errorf("reason %q, want it to say %q", d.Reason, tc.says)
			}
			if d.Kind != Out && d.Kind != In && d.Masters != tc.snap.Masters {
				t.Errorf("%s asks for %d masters, want %d", d.Kind, d.Masters, tc.snap.Masters)
			}
			if tc.check != nil {
				tc.check(t, d)
			}
		})
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func expect(t *testing.T, ok bool, format string, args ...any) {
	t.Helper()
	if !ok {
		t.Errorf(format, args...)
	}
}
