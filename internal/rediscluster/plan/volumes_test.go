package plan

import (
	"fmt"
	"strings"
	"testing"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/health"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/observe"
	"github.com/middleware-operator/middleware-operator/tests/fakesnapshot"
)

const gi = int64(1) << 30

// sixClaims are the claims of six()'s pods, each asking and having size bytes of class.
func sixClaims(size int64, class string) []Claim {
	claims := make([]Claim, 6)
	for i := range claims {
		claims[i] = Claim{Name: fmt.Sprintf("redis-data-rc-%d", i), Pod: fmt.Sprintf("rc-%d", i), Request: size, Capacity: size,
			RequestText: fmt.Sprintf("%dGi", size/gi), Class: class}
	}
	return claims
}

// growing is the spec of six() asking want bytes of claims having claims, with the
// StatefulSet's template at template bytes.
func growing(want, template int64, claims []Claim) Desired {
	s := specFor(6)
	s.Volumes = Volumes{Want: want, WantText: fmt.Sprintf("%dGi", want/gi), Template: template, Claims: claims}
	return s
}

func TestPlanVolumes(t *testing.T) {
	cases := map[string]volumesCase{
		"every claim at the size: nothing to do": {
			spec: growing(gi, gi, sixClaims(gi, "kwok-volume")), want: StepIdle,
		},
		"a larger size on an expandable class: every claim grows at once": {
			spec: growing(2*gi, gi, sixClaims(gi, "kwok-volume")), want: StepGrowClaims,
			check: func(t *testing.T, s Step) {
				expect(t, len(s.Claims) == 6 && s.Claims[0] == "redis-data-rc-0", "claims %v", s.Claims)
			},
		},
		"claims grown, the StatefulSet's template still old: recreate it": {
			spec: growing(2*gi, gi, sixClaims(2*gi, "kwok-volume")), want: StepRecreateStatefulSet,
		},
		"claims grown but the template held (refused ACL rules): no recreation, the wait says why": heldRecreation(func(s *Desired) {
			s.TemplateHeld = "spec.acl.users[0].rules: Redis refused +nosuchcommand"
		}, "+nosuchcommand"),
		"claims grown but the version unsupported: no recreation (it would carry the refused image), the wait says why": heldRecreation(func(s *Desired) {
			s.Refused = "spec.version names Redis 6.2"
		}, "Redis 6.2"),
		"the StatefulSet being deleted: wait for it": {
			spec: func() Desired {
				s := growing(2*gi, gi, sixClaims(2*gi, "kwok-volume"))
				s.Volumes.StatefulSetDeleting = true
				return s
			}(), want: StepWait,
			check: func(t *testing.T, s Step) {
				expect(t, strings.Contains(s.Reason, "orphaned"), "reason %q", s.Reason)
			},
		},
		"a scale in under way: it ends first (the StatefulSet is not recreated)": {
			spec: func() Desired {
				s := growing(2*gi, gi, sixClaims(2*gi, "kwok-volume"))
				s.StatefulSetReplicas = 8
				return s
			}(), want: StepShrink,
		},
		"a filesystem resize pending: a replica's pod restarts first": {
			spec: func() Desired {
				s := growing(2*gi, 2*gi, sixClaims(2*gi, "kwok-volume"))
				s.Volumes.Claims[0].FileSystemResizePending = true
				s.Volumes.Claims[4].FileSystemResizePending = true
				return s
			}(), want: StepReplacePod,
			check: func(t *testing.T, s Step) { expect(t, s.Pod == "rc-4", "replaces %s", s.Pod) },
		},
		"a master's filesystem resize pending: its replica takes over first": {
			spec: func() Desired {
				s := growing(2*gi, 2*gi, sixClaims(2*gi, "kwok-volume"))
				s.Volumes.Claims[0].FileSystemResizePending = true
				return s
			}(), want: StepFailover,
			check: func(t *testing.T, s Step) {
				expect(t, s.Pod == "rc-0" && s.Addr == fakesnapshot.Addr(3), "%s by %s", s.Pod, s.Addr)
			},
		},
		"a filesystem resize pending while a pod terminates: one at a time, wait": {
			spec: func() Desired {
				s := growing(2*gi, 2*gi, sixClaims(2*gi, "kwok-volume"))
				s.Volumes.Claims[4].FileSystemResizePending = true
				return s
			}(),
			snap: func() observe.Snapshot {
				c := fakesnapshot.Six().Current()
				c.Snap.Nodes[3].Terminating = true
				return c.Snap
			}(), want: StepWait,
		},
		"a smaller size: refused, nothing changes": {
			spec: growing(gi, 2*gi, sixClaims(2*gi, "kwok-volume")), want: StepIdle, refusal: RefusedShrink,
		},
		"a class without expansion: the API server judges, so the claims are asked to grow": {
			spec: growing(2*gi, gi, sixClaims(gi, "local-path")), want: StepGrowClaims,
		},
		"the API server refused the growth: refused, nothing changes": {
			spec: func() Desired {
				s := growing(2*gi, gi, sixClaims(gi, "local-path"))
				s.Volumes.Refused = ExpansionRefused(s.Volumes, s.Volumes.Claims[0], "only dynamically provisioned pvc can be resized")
				return s
			}(), want: StepIdle, refusal: RefusedNotExpandable,
		},
		"a refusal carried after the claims reached the size (grown another way): no longer holds": {
			spec: func() Desired {
				s := growing(2*gi, 2*gi, sixClaims(2*gi, "local-path"))
				s.Volumes.Refused = ExpansionRefused(s.Volumes, s.Volumes.Claims[0], "refused")
				return s
			}(), want: StepIdle,
		},
		"no claims of the operator's (nfs, hostPath): nothing": {
			spec: growing(0, 0, nil), want: StepIdle,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			snap := tc.snap
			if snap.Nodes == nil {
				snap = fakesnapshot.Six().Current().Snap
			}
			got := nextStepSeen(tc.spec, snap, health.Assess(snap))
			if got.Kind != tc.want {
				t.Fatalf("step %s (%s), want %s", got.Kind, got.Reason, tc.want)
			}
			refusal := RefuseVolumes(tc.spec.Volumes)
			switch {
			case tc.refusal == "" && refusal != nil:
				t.Errorf("refused: %s", refusal.Message)
			case tc.refusal != "" && (refusal == nil || refusal.Reason != tc.refusal):
				t.Errorf("refusal %+v, want %s", refusal, tc.refusal)
			case refusal != nil && !strings.Contains(refusal.Message, "set"):
				t.Errorf("the refusal names no fix: %s", refusal.Message)
			}
			if tc.check != nil {
				tc.check(t, got)
			}
		})
	}
}

func TestVolumesResizing(t *testing.T) {
	grown := sixClaims(2*gi, "kwok-volume")
	grown[2].Capacity = gi
	cases := map[string]struct {
		v    Volumes
		want string // a part of the answer; "" for an empty one
	}{
		"done":                         {v: growing(2*gi, 2*gi, sixClaims(2*gi, "c")).Volumes},
		"asked":                        {v: growing(2*gi, gi, sixClaims(gi, "c")).Volumes, want: "6 claims to grow to 2Gi"},
		"growing":                      {v: growing(2*gi, 2*gi, grown).Volumes, want: "1 claims growing (redis-data-rc-2)"},
		"template":                     {v: growing(2*gi, gi, sixClaims(2*gi, "c")).Volumes, want: "StatefulSet to be recreated"},
		"refused: no resize under way": {v: growing(gi, 2*gi, sixClaims(2*gi, "c")).Volumes},
		"growth refused by the API server: no resize under way": {v: func() Volumes {
			v := growing(2*gi, gi, sixClaims(gi, "c")).Volumes
			v.Refused = ExpansionRefused(v, v.Claims[0], "refused")
			return v
		}()},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := VolumesResizing(tc.v)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestExpansionRefusedNamesTheClaimTheClassAndTheFix(t *testing.T) {
	v := growing(2*gi, gi, sixClaims(gi, "local-path")).Volumes
	for _, c := range []Claim{v.Claims[0], {Name: "redis-data-rc-1", RequestText: "1Gi"}} {
		got := ExpansionRefused(v, c, "only dynamically provisioned pvc can be resized")
		for _, part := range []string{c.Name, "2Gi", "only dynamically provisioned", "allowVolumeExpansion: true", "new RedisCluster", "the claims keep 1Gi"} {
			if !strings.Contains(got.Message, part) {
				t.Errorf("%s: the message does not say %q: %s", c.Name, part, got.Message)
			}
		}
		if got.Reason != RefusedNotExpandable {
			t.Errorf("reason %s", got.Reason)
		}
	}
	if got := ExpansionRefused(v, v.Claims[0], "x"); !strings.Contains(got.Message, `StorageClass "local-path"`) {
		t.Errorf("the class is not named: %s", got.Message)
	}
}

// volumesCase is a row of TestPlanVolumes: the step planned for spec and snap.
type volumesCase struct {
	spec    Desired
	snap    observe.Snapshot
	want    StepKind
	refusal string // the refusal's reason, "" for none
	check   func(t *testing.T, s Step)
}

// heldRecreation is a row of claims grown to 2Gi under a template of 1Gi while hold keeps
// the StatefulSet from being written: a wait whose reason names the hold (says).
func heldRecreation(hold func(*Desired), says string) volumesCase {
	spec := growing(2*gi, gi, sixClaims(2*gi, "kwok-volume"))
	hold(&spec)
	return volumesCase{spec: spec, want: StepWait, check: func(t *testing.T, s Step) {
		expect(t, strings.Contains(s.Reason, says), "reason %q, want it to name %q", s.Reason, says)
	}}
}
