package redisadmin

import (
	"slices"
	"testing"
	"time"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/observe"
)

// lostShard is six() with master aaaaaaaa and its replica dddddddd both back empty and held
// by their start guards (silent), aaaaaaaa flagged fail for ago.
func lostShard(ago time.Duration) *cluster {
	return six().silence(0, errDown).silence(3, errDown).fail("aaaaaaaa", ago).fail("dddddddd", ago)
}

// forgotten is lostShard after every answering member forgot aaaaaaaa and dddddddd: slots
// 0-5460 are routed nowhere.
func forgotten() *cluster {
	c := lostShard(time.Minute)
	for i := range c.snap.Nodes {
		o := &c.snap.Nodes[i]
		o.View = slices.DeleteFunc(o.View, func(n Node) bool { return n.ID == "aaaaaaaa" || n.ID == "dddddddd" })
	}
	return c
}

func TestLostShards(t *testing.T) {
	cases := map[string]struct {
		snap observe.Snapshot
		want []string // lost master IDs
	}{
		"a healthy cluster has none":                                          {snap: six().snap},
		"master and replica silent for 8 s: not yet":                          {snap: lostShard(8 * time.Second).snap},
		"master and replica silent for 20 s: lost":                            {snap: lostShard(20 * time.Second).snap, want: []string{"aaaaaaaa"}},
		"master dead, its replica answers and synced: a failover, not a loss": {snap: six().silence(0, errDown).fail("aaaaaaaa", time.Minute).snap},
		"master dead, its only replica answers but never synced: lost": {
			snap: func() observe.Snapshot {
				c := six().silence(0, errDown).fail("aaaaaaaa", time.Minute)
				c.snap.Nodes[3].Replication["slave_repl_offset"] = "0"
				return c.snap
			}(),
			want: []string{"aaaaaaaa"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var got []string
			for _, sh := range lostShards(tc.snap) {
				got = append(got, sh.ID)
				if CountSlots(sh.Slots) != 5461 {
					t.Errorf("lost shard %s has %d slots, want 5461", sh.ID, CountSlots(sh.Slots))
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("lost %v, want %v", got, tc.want)
			}
		})
	}
}

func TestPlanAbandon(t *testing.T) {
	if _, ok := planAbandon(six().snap); ok {
		t.Error("abandoned something in a healthy cluster")
	}
	if _, ok := planAbandon(lostShard(8 * time.Second).snap); ok {
		t.Error("abandoned a shard silent for less than a forced failover waits")
	}
	a, ok := planAbandon(lostShard(time.Minute).snap)
	if !ok || a.Kind != ActionAbandon {
		t.Fatalf("got %v %v, want %s", a, ok, ActionAbandon)
	}
	var got []string
	for _, c := range a.Commands {
		got = append(got, c.String())
	}
	want := []string{ // every answering member forgets the lost master; the silent ones are not asked
		addrOf(1) + ": CLUSTER FORGET aaaaaaaa", addrOf(2) + ": CLUSTER FORGET aaaaaaaa",
		addrOf(4) + ": CLUSTER FORGET aaaaaaaa", addrOf(5) + ": CLUSTER FORGET aaaaaaaa",
	}
	if !slices.Equal(got, want) {
		t.Errorf("commands %q, want %q", got, want)
	}
	// A member that still replicates the lost master cannot forget it: nothing is done.
	c := six().silence(0, errDown).fail("aaaaaaaa", time.Minute)
	c.snap.Nodes[3].Replication["slave_repl_offset"] = "0"
	if a, ok := planAbandon(c.snap); ok {
		t.Errorf("planned %v while a member replicates the lost master", a)
	}
}

func TestPlanCover(t *testing.T) {
	cases := map[string]struct {
		snap     observe.Snapshot
		want     ActionKind
		commands []string
	}{
		"a healthy cluster: nothing to cover":                                             {snap: six().snap},
		"a lost shard not yet forgotten: its slots still have an owner, nothing to cover": {snap: lostShard(time.Minute).snap},
		"the lost shard forgotten: its slots go to the master with the fewest": {
			snap: forgotten().snap, want: ActionCover,
			commands: []string{addrOf(2) + ": CLUSTER ADDSLOTSRANGE 0 5460"}, // rc-2 has 5461 slots, rc-1 5462
		},
		"a master holds keys in an unassigned slot: left for a person": {
			snap: func() observe.Snapshot {
				c := forgotten()
				c.snap.Nodes[2].KeysInUncovered = map[int]int64{17: 3}
				return c.snap
			}(),
		},
		"a slot is open somewhere: Fix goes first": {
			snap: func() observe.Snapshot {
				c := forgotten()
				c.snap.Nodes[1].View[0].Migrating = map[int]string{6000: "cccccccc"}
				return c.snap
			}(),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			a, ok := planRecovery(tc.snap)
			if !ok {
				a = Action{}
			}
			if a.Kind != tc.want && (tc.want != "" || a.Kind == ActionCover) {
				t.Fatalf("planned %s (%v), want %q", a.Kind, a.Commands, tc.want)
			}
			if tc.commands == nil {
				return
			}
			var got []string
			for _, c := range a.Commands {
				got = append(got, c.String())
			}
			if !slices.Equal(got, tc.commands) {
				t.Errorf("commands %q, want %q", got, tc.commands)
			}
		})
	}
}
