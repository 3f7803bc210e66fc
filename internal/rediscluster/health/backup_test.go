package health

import (
	"strings"
	"testing"
	"time"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
	"github.com/middleware-operator/middleware-operator/tests/fakesnapshot"
)

func TestStableSlotMap(t *testing.T) {
	cases := map[string]struct {
		c       *fakesnapshot.Cluster
		wantErr string // "" for a stable map
	}{
		"a healthy cluster": {c: fakesnapshot.Six()},
		"a slot being migrated": {c: fakesnapshot.Six().Each("aaaaaaaa", func(n *nodes.Node) {
			n.Migrating = map[int]string{7: "bbbbbbbb"}
		}), wantErr: "migrating"},
		"a master silent and failed": {c: fakesnapshot.Six().Silence(0, fakesnapshot.ErrDown).Fail("aaaaaaaa", time.Minute), wantErr: "not Ready"},
		"two views disagree": {c: func() *fakesnapshot.Cluster {
			c := fakesnapshot.Six()
			// rc-1's own view gives slot 0 to bbbbbbbb as well.
			for j := range c.Snap.Nodes[1].View {
				if c.Snap.Nodes[1].View[j].ID == "bbbbbbbb" {
					c.Snap.Nodes[1].View[j].Slots = []nodes.SlotRange{{Start: 0, End: 0}, {Start: 5461, End: 10922}}
				}
			}
			return c
		}(), wantErr: "disagree"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			for _, h := range []Health{Assess(tc.c.Snap), {}} {
				m, err := StableSlotMap(tc.c.Snap, h)
				checkStable(t, m, err, tc.wantErr)
			}
		})
	}
}

func checkStable(t *testing.T, m SlotMap, err error, wantErr string) {
	t.Helper()
	if wantErr == "" {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		if len(m) != 3 || nodes.CountSlots(m["aaaaaaaa"]) != 5461 || m.String() != "aaaaaaaa:0-5460 bbbbbbbb:5461-10922 cccccccc:10923-16383" {
			t.Fatalf("slot map %s", m)
		}
		return
	}
	if err == nil {
		t.Fatalf("taken as stable (%s), want an error containing %q", m, wantErr)
	}
}

func TestBackupSources(t *testing.T) {
	cases := map[string]struct {
		c    *fakesnapshot.Cluster
		want []string // the pod each shard is taken from, in slot order
	}{
		"each shard from its replica": {c: fakesnapshot.Six(), want: []string{"rc-3", "rc-4", "rc-5"}},
		"a replica whose link is down: from the master": {c: func() *fakesnapshot.Cluster {
			c := fakesnapshot.Six()
			c.Snap.Nodes[3].Replication["master_link_status"] = "down"
			return c
		}(), want: []string{"rc-0", "rc-4", "rc-5"}},
		"a replica in a full sync: from the master": {c: func() *fakesnapshot.Cluster {
			c := fakesnapshot.Six()
			c.Snap.Nodes[4].Replication["master_sync_in_progress"] = "1"
			return c
		}(), want: []string{"rc-3", "rc-1", "rc-5"}},
		"a silent replica: from the master": {c: fakesnapshot.Six().Silence(5, fakesnapshot.ErrDown), want: []string{"rc-3", "rc-4", "rc-2"}},
		"two replicas: the most advanced": {c: func() *fakesnapshot.Cluster {
			c := fakesnapshot.New(3, 2,
				fakesnapshot.Node{Pod: "rc-0", ID: "aaaaaaaa", Host: "n1", Slots: []nodes.SlotRange{{Start: 0, End: 5460}}},
				fakesnapshot.Node{Pod: "rc-1", ID: "bbbbbbbb", Host: "n2", Slots: []nodes.SlotRange{{Start: 5461, End: 10922}}},
				fakesnapshot.Node{Pod: "rc-2", ID: "cccccccc", Host: "n3", Slots: []nodes.SlotRange{{Start: 10923, End: 16383}}},
				fakesnapshot.Node{Pod: "rc-3", ID: "dddddddd", Host: "n2", Master: "aaaaaaaa"},
				fakesnapshot.Node{Pod: "rc-4", ID: "eeeeeeee", Host: "n3", Master: "aaaaaaaa"},
				fakesnapshot.Node{Pod: "rc-5", ID: "ffffffff", Host: "n1", Master: "bbbbbbbb"},
				fakesnapshot.Node{Pod: "rc-6", ID: "gggggggg", Host: "n1", Master: "cccccccc"},
			)
			c.Snap.Nodes[4].Replication["slave_repl_offset"] = "2000"
			return c
		}(), want: []string{"rc-4", "rc-5", "rc-6"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			m, err := StableSlotMap(tc.c.Snap, Health{})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, src := range BackupSources(tc.c.Snap, m) {
				got = append(got, src.Pod)
				if src.Replica != (src.NodeID != src.MasterID) {
					t.Errorf("%s: Replica %v but node %s of master %s", src.Pod, src.Replica, src.NodeID, src.MasterID)
				}
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("sources %v, want %v", got, tc.want)
			}
		})
	}
}
