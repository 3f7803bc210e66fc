package plan

import (
	"testing"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/observe"
	"github.com/middleware-operator/middleware-operator/tests/fakesnapshot"
)

func TestPlanMemory(t *testing.T) {
	const mi = 1 << 20
	want := func(maxMemory int64, policy string) Desired {
		s := specFor(6)
		s.Memory = Memory{MaxMemory: maxMemory, Policy: policy}
		return s
	}
	cases := map[string]struct {
		spec Desired
		snap observe.Snapshot
		want StepKind
		// addrs are the nodes the step sets, when it is StepSetMemory.
		addrs []string
	}{
		"every node runs the configuration: idle": {
			spec: want(450*mi, "noeviction"), snap: fakesnapshot.Six().Current().Memory(450*mi, "noeviction").Snap, want: StepIdle,
		},
		"a new share: every node is set, no restart": {
			spec: want(600*mi, "noeviction"), snap: fakesnapshot.Six().Current().Memory(450*mi, "noeviction").Snap, want: StepSetMemory,
			addrs: []string{fakesnapshot.Addr(0), fakesnapshot.Addr(1), fakesnapshot.Addr(2), fakesnapshot.Addr(3), fakesnapshot.Addr(4), fakesnapshot.Addr(5)},
		},
		"a new policy on one node restarted from an old redis.conf": {
			spec: want(450*mi, "allkeys-lru"), snap: func() observe.Snapshot {
				c := fakesnapshot.Six().Current().Memory(450*mi, "allkeys-lru")
				c.Snap.Nodes[4].Replication["maxmemory_policy"] = "noeviction"
				return c.Snap
			}(), want: StepSetMemory, addrs: []string{fakesnapshot.Addr(4)},
		},
		"a pod on an old template is left to the upgrade": {
			spec: want(450*mi, "noeviction"), snap: func() observe.Snapshot {
				c := fakesnapshot.Six().Current().Memory(450*mi, "noeviction")
				c.Snap.Nodes[2].Revision = "r0"
				c.Snap.Nodes[2].Replication["maxmemory"] = "100"
				return c.Snap
			}(), want: StepFailover,
		},
		"a silent node is not set, the others are": {
			spec: want(450*mi, "noeviction"), snap: fakesnapshot.Six().Current().Memory(0, "noeviction").Silence(1, fakesnapshot.ErrDown).Snap, want: StepSetMemory,
			addrs: []string{fakesnapshot.Addr(0), fakesnapshot.Addr(2), fakesnapshot.Addr(3), fakesnapshot.Addr(4), fakesnapshot.Addr(5)},
		},
		"the user's unreadable maxmemory is kept, the policy is set": {
			spec: func() Desired {
				s := want(0, "allkeys-lfu")
				s.Memory.KeepMaxMemory = true
				return s
			}(), snap: fakesnapshot.Six().Current().Memory(123, "noeviction").Snap, want: StepSetMemory,
			addrs: []string{fakesnapshot.Addr(0), fakesnapshot.Addr(1), fakesnapshot.Addr(2), fakesnapshot.Addr(3), fakesnapshot.Addr(4), fakesnapshot.Addr(5)},
		},
		"no configuration known: nothing is set": {
			spec: specFor(6), snap: fakesnapshot.Six().Current().Memory(123, "noeviction").Snap, want: StepIdle,
		},
		"a node that reports no maxmemory is not set": {
			spec: want(450*mi, "noeviction"), snap: fakesnapshot.Six().Current().Snap, want: StepIdle,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, ok := nextStepIs(t, tc.spec, tc.snap, tc.want, StepSetMemory)
			if !ok {
				return
			}
			expect(t, got.Reason != "" && got.After == LookSoon, "reason %q, after %s", got.Reason, got.After)
			expect(t, got.Memory == tc.spec.Memory, "sets %+v, want %+v", got.Memory, tc.spec.Memory)
			expect(t, len(got.Addrs) == len(tc.addrs), "sets %v, want %v", got.Addrs, tc.addrs)
			for i := range min(len(got.Addrs), len(tc.addrs)) {
				expect(t, got.Addrs[i] == tc.addrs[i], "sets %v, want %v", got.Addrs, tc.addrs)
			}
		})
	}
}

func TestMemoryOf(t *testing.T) {
	o := &observe.Observation{Replication: map[string]string{"used_memory": "900", "maxmemory": "1000", "maxmemory_policy": "allkeys-lru",
		"mem_fragmentation_ratio": "1.25", "evicted_keys": "7", "errorstat_OOM": "count=3"}}
	m := observe.MemoryOf(o)
	want := observe.NodeMemory{Used: 900, MaxMemory: 1000, Policy: "allkeys-lru", Fragmentation: 1.25, Evicted: 7, Rejected: 3, Known: true}
	expect(t, m == want, "MemoryOf = %+v, want %+v", m, want)
	p, ok := m.Percent()
	expect(t, ok && p == 90, "Percent = %d, %v", p, ok)
	if _, ok := observe.MemoryOf(&observe.Observation{}).Percent(); ok {
		t.Error("a node without maxmemory has a percentage")
	}
}
