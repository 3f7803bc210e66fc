package plan

import (
	"errors"
	"testing"
	"time"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/autoscale"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/health"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/observe"
	"github.com/middleware-operator/middleware-operator/tests/fakesnapshot"
)

// TestSteady: NextStep lets quiet looks stand in for full ones (Step.Steady) only for an idle,
// Ready cluster whose every node answered with its CLUSTER INFO, with nothing under way that
// only a full look would see end; a minute, or LookIdle for a cluster that scales on memory or
// archives.
func TestSteady(t *testing.T) {
	converged := func() observe.Snapshot {
		c := fakesnapshot.Six().Current()
		for i := range c.Snap.Nodes {
			c.Snap.Nodes[i].InfoHead = "cluster_state:ok"
		}
		return c.Snap
	}
	for name, tc := range map[string]struct {
		spec  func(*Desired)
		spoil func(*observe.Snapshot)
		want  time.Duration
	}{
		"converged":      {want: LookSteady},
		"autoscaled":     {spec: func(d *Desired) { d.Autoscale = &autoscale.Settings{TargetPercent: 70, MinMasters: 3, MaxMasters: 3} }, want: LookIdle},
		"archived":       {spec: func(d *Desired) { d.Archived = true }, want: LookIdle},
		"a step to take": {spec: func(d *Desired) { d.MembersRecorded = false }},
		"paused":         {spec: func(d *Desired) { d.Paused = true }},
		"an upgrade":     {spec: func(d *Desired) { d.UpdateRevision = "r2" }},
		"a rotation waiting out its grace": {spec: func(d *Desired) {
			d.Rotation = Rotation{Credentials: []Credential{{User: "default", Desired: "new", Recorded: true, Current: "new", Previous: "old",
				SwitchedAt: fakesnapshot.Now.Add(-time.Second), UpToDate: true}}, Grace: time.Hour}
		}},
		"claims growing": {spec: func(d *Desired) {
			d.Volumes = Volumes{Want: 2 << 30, WantText: "2Gi", Template: 2 << 30, Claims: []Claim{{Name: "data-rc-0", Pod: "rc-0", Request: 2 << 30, Capacity: 1 << 30}}}
		}},
		"a pod yet to be created": {spec: func(d *Desired) { d.Replicas, d.StatefulSetReplicas = 7, 7 }},
		"not Ready":               {spoil: func(s *observe.Snapshot) { s.Nodes[4].Replication["master_link_status"] = "down" }},
		"a node silent":           {spoil: func(s *observe.Snapshot) { s.Nodes[1].Err, s.Nodes[1].View = errors.New("timeout"), nil }},
		"no CLUSTER INFO head":    {spoil: func(s *observe.Snapshot) { s.Nodes[0].InfoHead = "" }},
		"a pod terminating":       {spoil: func(s *observe.Snapshot) { s.Nodes[0].Terminating = true }},
		"no nodes at all":         {spoil: func(s *observe.Snapshot) { s.Nodes = nil }},
	} {
		t.Run(name, func(t *testing.T) {
			spec, snap := specFor(6), converged()
			if tc.spec != nil {
				tc.spec(&spec)
			}
			if tc.spoil != nil {
				tc.spoil(&snap)
			}
			step := nextStepSeen(spec, snap, health.Assess(snap))
			if step.Steady != tc.want {
				t.Fatalf("Steady = %s, want %s (step %s %q, %s)", step.Steady, tc.want, step.Kind, step.Reason, step.Rotation)
			}
		})
	}
}
