package redisadmin

import (
	"strings"
	"testing"
	"time"
)

func TestStableSlotMap(t *testing.T) {
	cases := map[string]struct {
		c       *cluster
		wantErr string // "" for a stable map
	}{
		"a healthy cluster": {c: six()},
		"a slot being migrated": {c: six().each("aaaaaaaa", func(n *Node) {
			n.Migrating = map[int]string{7: "bbbbbbbb"}
		}), wantErr: "migrating"},
		"a master silent and failed": {c: six().silence(0, errDown).fail("aaaaaaaa", time.Minute), wantErr: "not Ready"},
		"two views disagree": {c: func() *cluster {
			c := six()
			// rc-1's own view gives slot 0 to bbbbbbbb as well.
			for j := range c.snap.Nodes[1].View {
				if c.snap.Nodes[1].View[j].ID == "bbbbbbbb" {
					c.snap.Nodes[1].View[j].Slots = []SlotRange{{Start: 0, End: 0}, {Start: 5461, End: 10922}}
				}
			}
			return c
		}(), wantErr: "disagree"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			for _, h := range []Health{Assess(tc.c.snap), {}} {
				m, err := StableSlotMap(tc.c.snap, h)
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
		if len(m) != 3 || CountSlots(m["aaaaaaaa"]) != 5461 || m.String() != "aaaaaaaa:0-5460 bbbbbbbb:5461-10922 cccccccc:10923-16383" {
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
		c    *cluster
		want []string // the pod each shard is taken from, in slot order
	}{
		"each shard from its replica": {c: six(), want: []string{"rc-3", "rc-4", "rc-5"}},
		"a replica whose link is down: from the master": {c: func() *cluster {
			c := six()
			c.snap.Nodes[3].Replication["master_link_status"] = "down"
			return c
		}(), want: []string{"rc-0", "rc-4", "rc-5"}},
		"a replica in a full sync: from the master": {c: func() *cluster {
			c := six()
			c.snap.Nodes[4].Replication["master_sync_in_progress"] = "1"
			return c
		}(), want: []string{"rc-3", "rc-1", "rc-5"}},
		"a silent replica: from the master": {c: six().silence(5, errDown), want: []string{"rc-3", "rc-4", "rc-2"}},
		"two replicas: the most advanced": {c: func() *cluster {
			c := newFake(3, 2,
				fakeNode{"rc-0", "aaaaaaaa", "n1", "", []SlotRange{{Start: 0, End: 5460}}},
				fakeNode{"rc-1", "bbbbbbbb", "n2", "", []SlotRange{{Start: 5461, End: 10922}}},
				fakeNode{"rc-2", "cccccccc", "n3", "", []SlotRange{{Start: 10923, End: 16383}}},
				fakeNode{"rc-3", "dddddddd", "n2", "aaaaaaaa", nil},
				fakeNode{"rc-4", "eeeeeeee", "n3", "aaaaaaaa", nil},
				fakeNode{"rc-5", "ffffffff", "n1", "bbbbbbbb", nil},
				fakeNode{"rc-6", "gggggggg", "n1", "cccccccc", nil},
			)
			c.snap.Nodes[4].Replication["slave_repl_offset"] = "2000"
			return c
		}(), want: []string{"rc-4", "rc-5", "rc-6"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			m, err := StableSlotMap(tc.c.snap, Health{})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, src := range BackupSources(tc.c.snap, m) {
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
