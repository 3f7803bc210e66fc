package plan

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/observe"
	"github.com/middleware-operator/middleware-operator/tests/fakesnapshot"
)

// externalHost is the external host test clusters give pod rc-i.
func externalHost(i int) string { return fmt.Sprintf("203.0.113.%d", i+1) }

// announced is six nodes with external access on: every pod has its external host, the
// pods at indexes set are set on this process and announce it.
func announced(c *fakesnapshot.Cluster, set ...int) (Desired, *fakesnapshot.Cluster) {
	spec := specFor(len(c.Snap.Nodes))
	spec.Announce = &Announce{On: true, Hostnames: map[string]string{}, Set: map[string]bool{}}
	for i := range c.Snap.Nodes {
		spec.Announce.Hostnames[c.Snap.Nodes[i].Pod] = externalHost(i)
	}
	for _, i := range set {
		spec.Announce.Set[c.Snap.Nodes[i].Pod] = true
		c.Announcing(i, externalHost(i))
	}
	return spec, c
}

func TestPlanAnnounce(t *testing.T) {
	all := []int{0, 1, 2, 3, 4, 5}
	cases := map[string]struct {
		spec func() (Desired, observe.Snapshot)
		want StepKind
		pod  string // the node StepAnnounce sets
		host string // what it announces
		// behind is what the status shows of a StepAnnounce (Step.Behind).
		behind StepKind
	}{
		"every node announces its host: idle": {
			spec: func() (Desired, observe.Snapshot) {
				s, c := announced(fakesnapshot.Six().Current(), all...)
				return s, c.Snap
			},
			want: StepIdle,
		},
		"external access just on: the first node first, one at a time": {
			spec: func() (Desired, observe.Snapshot) { s, c := announced(fakesnapshot.Six().Current()); return s, c.Snap },
			want: StepAnnounce, pod: "rc-0", host: externalHost(0), behind: StepIdle,
		},
		"a restarted process announces the host from nodes.conf, but its endpoint type is redis.conf's: set again": {
			spec: func() (Desired, observe.Snapshot) {
				s, c := announced(fakesnapshot.Six().Current(), 0, 1, 2, 3, 5)
				c.Announcing(4, externalHost(4))
				return s, c.Snap
			},
			want: StepAnnounce, pod: "rc-4", host: externalHost(4), behind: StepIdle,
		},
		"a new load-balancer address: announced": {
			spec: func() (Desired, observe.Snapshot) {
				s, c := announced(fakesnapshot.Six().Current(), all...)
				s.Announce.Hostnames["rc-2"] = "198.51.100.9"
				return s, c.Snap
			},
			want: StepAnnounce, pod: "rc-2", host: "198.51.100.9", behind: StepIdle,
		},
		"a node without an address yet is left as it is": {
			spec: func() (Desired, observe.Snapshot) {
				s, c := announced(fakesnapshot.Six().Current(), 0, 1, 2, 3, 4)
				delete(s.Announce.Hostnames, "rc-5")
				return s, c.Snap
			},
			want: StepIdle,
		},
		"a silent node is left for when it answers": {
			spec: func() (Desired, observe.Snapshot) {
				s, c := announced(fakesnapshot.Six().Current(), 0, 1, 2, 3, 5)
				return s, c.Silence(4, fakesnapshot.ErrDown).Snap
			},
			want: StepWait,
		},
		"a recovery under way stays what the status shows": {
			spec: func() (Desired, observe.Snapshot) {
				c := fakesnapshot.Six().Current().WithNewMaster()
				s, c := announced(c, 0, 1, 2, 3, 4, 5)
				return s, c.Snap
			},
			want: StepAnnounce, pod: "rc-6", host: externalHost(6), behind: StepRecover,
		},
		"a new node announces before it joins": {
			spec: func() (Desired, observe.Snapshot) {
				s, c := announced(fakesnapshot.Six().Current().Fresh("rc-6", "gggggggg", "n1"), all...)
				return s, c.Snap
			},
			want: StepAnnounce, pod: "rc-6", host: externalHost(6), behind: StepJoin,
		},
		"a new node without an address does not join": {
			spec: func() (Desired, observe.Snapshot) {
				s, c := announced(fakesnapshot.Six().Current().Fresh("rc-6", "gggggggg", "n1"), all...)
				delete(s.Announce.Hostnames, "rc-6")
				return s, c.Snap
			},
			want: StepWait,
		},
		"a new node with its address announced joins": {
			spec: func() (Desired, observe.Snapshot) {
				s, c := announced(fakesnapshot.Six().Current().Fresh("rc-6", "gggggggg", "n1"), 0, 1, 2, 3, 4, 5, 6)
				return s, c.Snap
			},
			want: StepJoin,
		},
		"external access removed: each node announces nothing again": {
			spec: func() (Desired, observe.Snapshot) {
				s, c := announced(fakesnapshot.Six().Current(), all...)
				s.Announce = &Announce{Set: map[string]bool{"rc-0": true}}
				return s, c.Snap
			},
			want: StepAnnounce, pod: "rc-0", host: "", behind: StepIdle,
		},
		"external access removed, a node set back but announcing a host still: set": {
			spec: func() (Desired, observe.Snapshot) {
				s, c := announced(fakesnapshot.Six().Current(), all...)
				s.Announce = &Announce{Set: map[string]bool{"rc-0": true, "rc-1": true, "rc-2": true}}
				c.Announcing(0, "").Announcing(1, "")
				return s, c.Snap
			},
			want: StepAnnounce, pod: "rc-2", host: "", behind: StepIdle,
		},
		"the operator leaves announcements alone: idle": {
			spec: func() (Desired, observe.Snapshot) {
				_, c := announced(fakesnapshot.Six().Current(), 1)
				return specFor(6), c.Snap
			},
			want: StepIdle,
		},
		"a lost shard is reported, not hidden behind an announcement": {
			spec: func() (Desired, observe.Snapshot) {
				s, c := announced(fakesnapshot.LostShard(time.Minute))
				return s, c.Snap
			},
			want: StepLost,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			spec, snap := tc.spec()
			got, ok := nextStepIs(t, spec, snap, tc.want, StepAnnounce)
			if !ok {
				return
			}
			expect(t, got.Pod == tc.pod && got.Hostname == tc.host && got.After == LookSoon, "announces %q on %s after %s, want %q on %s", got.Hostname, got.Pod, got.After, tc.host, tc.pod)
			expect(t, got.Behind != nil && got.Shown().Kind == tc.behind, "the status shows %s, want %s", got.Shown().Kind, tc.behind)
		})
	}
}

func TestAnnounceEndpointType(t *testing.T) {
	if got := (Announce{On: true}).EndpointType(); got != "hostname" {
		t.Errorf("on: %q, want hostname", got)
	}
	if got := (Announce{}).EndpointType(); got != "ip" {
		t.Errorf("off: %q, want ip", got)
	}
}

// TestPlanAnnounceWaitSaysWhy: a new node waiting for its external address says why it may
// have none, as the Service's kind gives it (a load balancer's ingress by default).
func TestPlanAnnounceWaitSaysWhy(t *testing.T) {
	for why, want := range map[string]string{
		"":                            "(its Service has no load-balancer ingress yet)",
		"(its node port was refused)": "(its node port was refused)",
	} {
		s, c := announced(fakesnapshot.Six().Current().Fresh("rc-6", "gggggggg", "n1"), 0, 1, 2, 3, 4, 5)
		delete(s.Announce.Hostnames, "rc-6")
		s.Announce.PendingWhy = why
		got, ok := nextStepIs(t, s, c.Snap, StepWait, StepAnnounce)
		if ok {
			expect(t, strings.Contains(got.Reason, "rc-6 waits for an external address "+want), "the wait says %q, want it to say %q", got.Reason, want)
		}
	}
}
