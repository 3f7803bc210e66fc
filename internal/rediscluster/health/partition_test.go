package health

import (
	"strings"
	"testing"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/observe"
	"github.com/middleware-operator/middleware-operator/tests/fakesnapshot"
)

// cutOff flags master aaaaaaaa (rc-0) possibly failing in the views of every other node,
// and every other node possibly failing in rc-0's view: rc-0 is alone on its side.
func cutOff() *fakesnapshot.Cluster {
	c := fakesnapshot.Six()
	for i, id := range []string{"aaaaaaaa", "bbbbbbbb", "cccccccc", "dddddddd", "eeeeeeee", "ffffffff"} {
		if i == 0 {
			continue
		}
		c.Flag(i, "aaaaaaaa", "fail?").Flag(0, id, "fail?")
	}
	return c
}

// promotedAcross is cutOff after the majority failed rc-0 over to its replica rc-3: every
// other view flags rc-0 fail and routes its slots to rc-3, while rc-0 still claims them.
func promotedAcross() *fakesnapshot.Cluster {
	c := fakesnapshot.Six()
	for i := 1; i < 6; i++ {
		c.Flag(i, "aaaaaaaa", "fail")
	}
	for _, id := range []string{"bbbbbbbb", "cccccccc", "dddddddd", "eeeeeeee", "ffffffff"} {
		c.Flag(0, id, "fail?")
	}
	// rc-3 becomes master of 0-5460 in every view but rc-0's.
	for i := 1; i < 6; i++ {
		for j := range c.Snap.Nodes[i].View {
			switch n := &c.Snap.Nodes[i].View[j]; n.ID {
			case "dddddddd":
				n.Role, n.MasterID, n.Slots, n.Flags = nodes.RoleMaster, "", []nodes.SlotRange{{Start: 0, End: 5460}}, append(n.Flags[:len(n.Flags)-1:len(n.Flags)-1], nodes.RoleMaster)
			case "aaaaaaaa":
				n.Slots = nil
			}
		}
	}
	c.Snap.Nodes[3].Replication = map[string]string{"role": "master"}
	return c
}

// TestPartitionHealth: within one look, a master that its peers flag failing, or that
// flags its peers failing, while it still answers, keeps the cluster from being Ready and
// is named with what each side sees; two masters claiming the same slots are never Ready.
func TestPartitionHealth(t *testing.T) {
	for name, tc := range map[string]struct {
		c              *fakesnapshot.Cluster
		wantPartitions []string // substrings of the Partition strings, in order
		wantDual       string   // substring of the only dual claim, "" for none
		wantRefusing   string
	}{
		"healthy": {c: fakesnapshot.Six()},
		"two masters cut off, each alone": {
			c: fakesnapshot.Six().Flag(1, "aaaaaaaa", "fail?").Flag(2, "aaaaaaaa", "fail?").Flag(4, "aaaaaaaa", "fail?").
				Flag(0, "cccccccc", "fail?").Flag(1, "cccccccc", "fail?").Flag(3, "cccccccc", "fail?"),
			wantPartitions: []string{
				"master rc-0 answers but is cut off from its peers: flagged failing by rc-1 (fail?), rc-2 (fail?); itself flags rc-2 (fail?) failing",
				"master rc-2 answers but is cut off from its peers: flagged failing by rc-0 (fail?), rc-1 (fail?); itself flags rc-0 (fail?) failing",
			},
		},
		"only the cut-off master sees its peers failing": {
			c: func() *fakesnapshot.Cluster {
				c := fakesnapshot.Six()
				return c.Flag(0, "bbbbbbbb", "fail?").Flag(0, "dddddddd", "fail?")
			}(),
			wantPartitions: []string{"master rc-0 answers but is cut off from its peers: itself flags rc-1 (fail?), rc-3 (fail?) failing"},
		},
		"only the majority flags it": {
			c:              fakesnapshot.Six().Flag(1, "aaaaaaaa", "fail?").Flag(2, "aaaaaaaa", "fail?"),
			wantPartitions: []string{"master rc-0 answers but is cut off from its peers: flagged failing by rc-1 (fail?), rc-2 (fail?)"},
		},
		"both sides": {
			c: cutOff(),
			wantPartitions: []string{
				"master rc-0 answers but is cut off from its peers: flagged failing by rc-1 (fail?), rc-2 (fail?); itself flags rc-1 (fail?), rc-2 (fail?), rc-3 (fail?), rc-4 (fail?), rc-5 (fail?) failing",
			},
		},
		"after the failover, two masters claim the slots": {
			c:              promotedAcross(),
			wantPartitions: []string{"master rc-0 answers but is cut off from its peers: flagged failing by rc-1 (fail), rc-2 (fail), rc-3 (fail); itself flags"},
			wantDual:       "slots 0-5460 are claimed as master by both rc-0 and rc-3",
		},
		"a crashed master is no partition": {
			c: fakesnapshot.Six().Silence(0, fakesnapshot.ErrDown).Fail("aaaaaaaa", 0),
		},
		"a master refusing writes for want of a replica": {
			c: func() *fakesnapshot.Cluster {
				c := fakesnapshot.Six()
				c.Snap.Nodes[1].Replication[observe.GoodReplicasField] = "0"
				c.Snap.Nodes[0].Replication[observe.GoodReplicasField] = "1"
				return c
			}(),
			wantRefusing: "rc-1",
		},
	} {
		t.Run(name, func(t *testing.T) {
			h := Assess(tc.c.Snap)
			if len(h.Partitions) != len(tc.wantPartitions) {
				t.Fatalf("partitions %v, want %d: %v", h.Partitions, len(tc.wantPartitions), tc.wantPartitions)
			}
			for i, p := range h.Partitions {
				if !strings.HasPrefix(p.String(), tc.wantPartitions[i]) {
					t.Errorf("partition %d says %q, want %q", i, p, tc.wantPartitions[i])
				}
				if !strings.Contains(strings.Join(h.Problems, "; "), p.String()) {
					t.Errorf("the problems do not name partition %q: %v", p, h.Problems)
				}
			}
			switch {
			case tc.wantDual == "" && len(h.DualClaims) > 0:
				t.Errorf("dual claims %v, want none", h.DualClaims)
			case tc.wantDual != "" && (len(h.DualClaims) != 1 || !strings.Contains(h.DualClaims[0], tc.wantDual)):
				t.Errorf("dual claims %v, want %q", h.DualClaims, tc.wantDual)
			}
			if got := strings.Join(h.RefusingWrites, ","); got != tc.wantRefusing {
				t.Errorf("refusing writes %q, want %q", got, tc.wantRefusing)
			}
			faulty := len(tc.wantPartitions) > 0 || tc.wantDual != "" || tc.wantRefusing != ""
			if h.Ready() == faulty && name != "a crashed master is no partition" {
				t.Errorf("Ready %v with problems %v", h.Ready(), h.Problems)
			}
		})
	}
}
