package plan

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/health"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/observe"
	"github.com/middleware-operator/middleware-operator/tests/fakesnapshot"
)

func TestPlanRotation(t *testing.T) {
	current := func(user, pw string) Credential {
		return Credential{User: user, Source: "rc-users", Desired: pw, Recorded: true, UpToDate: true, Current: pw}
	}
	changed := func(c Credential, pw string) Credential { c.Desired = pw; return c }
	switched := func(c Credential, ago time.Duration) Credential {
		c.Previous, c.Current, c.SwitchedAt = c.Current, c.Desired, fakesnapshot.Now.Add(-ago)
		return c
	}
	with := func(creds ...Credential) Desired {
		s := specFor(6)
		s.Name = "rc"
		s.Rotation = Rotation{Credentials: creds, Grace: 2 * time.Minute}
		return s
	}
	noPod5 := func() observe.Snapshot {
		c := fakesnapshot.Six().Current()
		c.Snap.Nodes = c.Snap.Nodes[:5]
		return c.Snap
	}
	cases := map[string]struct {
		spec Desired
		snap observe.Snapshot
		want StepKind // "" for no rotation step
		cred int
		note string // a part of the note
	}{
		"every password current: nothing, and the status says so": {
			spec: with(current("default", "a")), want: "", note: RotationCurrent,
		},
		"a new cluster has no record: write the Secret's password as the one the nodes run": {
			spec: with(Credential{User: "default", Desired: "a"}), want: StepWriteRecord,
		},
		"an older operator's record: rewrite it in today's format, touching no node": {
			spec: with(func() Credential { c := current("default", "a"); c.UpToDate = false; return c }()), want: StepWriteRecord,
		},
		"the Secret changed: every running node accepts the new password too": {
			spec: with(changed(current("default", "a"), "b")), want: StepAddPassword,
		},
		"the Secret changed while a pod is missing: wait, without holding other steps": {
			spec: with(changed(current("default", "a"), "b")), snap: noPod5(), want: "", note: "waiting for rc-5 to run",
		},
		"both passwords accepted, within the grace period: wait for it": {
			spec: with(switched(changed(current("default", "a"), "b"), time.Minute)), want: "", note: "accepts both passwords until",
		},
		"the grace period is over: retire the previous password": {
			spec: with(switched(changed(current("default", "a"), "b"), 3*time.Minute)), want: StepKeepOnlyPassword,
		},
		"the grace period is over but a pod is missing: wait": {
			spec: with(switched(changed(current("default", "a"), "b"), 3*time.Minute)), snap: noPod5(), want: "", note: "before the previous password is retired",
		},
		"with ACL users, the application's password changes once the operator's is current": {
			spec: with(current("operator", "o"), changed(current("default", "a"), "b"), current("exporter", "e")), want: StepAddPassword, cred: 1,
		},
		"one rotation at a time: the application's waits while the operator's is under way": {
			spec: with(switched(changed(current("operator", "o"), "p"), time.Minute), changed(current("default", "a"), "b")),
			want: "", note: "rotating user operator",
		},
		"a password not known yet: nothing is said or done": {
			spec: with(Credential{User: "default"}), want: "", note: "",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			snap := tc.snap
			if snap.Nodes == nil {
				snap = fakesnapshot.Six().Current().Snap
			}
			step, note, acts := planRotation(tc.spec, snap)
			if acts != (tc.want != "") || step.Kind != tc.want {
				t.Fatalf("step %q (acts %t), want %q", step.Kind, acts, tc.want)
			}
			if got := nextStepSeen(tc.spec, snap, health.Assess(snap)); acts && got.Kind != tc.want && (got.Behind == nil || got.Behind.Kind != tc.want) {
				t.Errorf("NextStep chose %s (%s), want %s", got.Kind, got.Reason, tc.want)
			}
			if acts && (step.Credential != tc.cred || step.Reason == "") {
				t.Errorf("step for credential %d (%q), want %d with a reason", step.Credential, step.Reason, tc.cred)
			}
			if (step.Kind == StepAddPassword || step.Kind == StepKeepOnlyPassword) && len(step.Addrs) != len(snap.Nodes) {
				t.Errorf("changes %d nodes, want every running one (%d)", len(step.Addrs), len(snap.Nodes))
			}
			if tc.note == "" && note != "" || !strings.Contains(note, tc.note) {
				t.Errorf("note %q, want it to say %q", note, tc.note)
			}
		})
	}
}

// TestNextStepRotation: a rotation step comes first, and the rotation's state rides on
// every step.
func TestNextStepRotation(t *testing.T) {
	spec := specFor(6)
	spec.Rotation = Rotation{Credentials: []Credential{{User: "default", Desired: "b", Recorded: true, UpToDate: true, Current: "a"}}, Grace: time.Minute}
	c := fakesnapshot.Six().Current()
	v := &c.Snap.Nodes[4].View[1]
	v.Addr, v.Flags = "10.9.9.9:6379", append(v.Flags, "noaddr")
	if got := nextStepSeen(spec, c.Snap, health.Assess(c.Snap)); got.Kind != StepAddPassword {
		t.Errorf("a rotation and an introduction due: %s, want the rotation first", got.Kind)
	}
	spec.Rotation.Credentials[0].Desired = "a"
	if got := nextStepSeen(spec, c.Snap, health.Assess(c.Snap)); got.Kind != StepRecover || got.Rotation != RotationCurrent {
		t.Errorf("rotation current, introduction due: %s with rotation %q, want Recover with %q", got.Kind, got.Rotation, RotationCurrent)
	}
	// A new cluster's pods wait for the record (the exporter sidecar mounts it): it is
	// written before the cluster can form.
	fresh := specFor(6)
	fresh.MembersRecorded = false
	fresh.Rotation = Rotation{Credentials: []Credential{{User: "default", Desired: "a"}}}
	waiting := sixNewPods()
	for i := range waiting.Nodes {
		waiting.Nodes[i] = observe.Observation{Pod: waiting.Nodes[i].Pod, Err: errors.New("the pod has no IP")}
	}
	if got := nextStepSeen(fresh, waiting, health.Assess(waiting)); got.Kind != StepWriteRecord {
		t.Errorf("a new cluster whose pods do not run yet: %s (%s), want WriteRecord first", got.Kind, got.Reason)
	}
	spec.Paused = true
	if got := nextStepSeen(spec, c.Snap, health.Assess(c.Snap)); got.Rotation != "" {
		t.Errorf("paused: rotation %q, want it not looked at", got.Rotation)
	}
}
