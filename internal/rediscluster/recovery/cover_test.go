package recovery

import (
	"slices"
	"testing"
	"time"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/observe"
	"github.com/middleware-operator/middleware-operator/tests/fakesnapshot"
)

func TestLostShards(t *testing.T) {
	cases := map[string]struct {
		snap      observe.Snapshot
		want      []string      // lost master IDs
		lastHeard time.Duration // how long before the look they were last heard from
	}{
		"a healthy cluster has none":                                          {snap: fakesnapshot.Six().Snap},
		"master and replica silent for 8 s: not yet":                          {snap: fakesnapshot.LostShard(8 * time.Second).Snap},
		"master and replica silent for 20 s: lost":                            {snap: fakesnapshot.LostShard(20 * time.Second).Snap, want: []string{"aaaaaaaa"}, lastHeard: 20 * time.Second},
		"master dead, its replica answers and synced: a failover, not a loss": {snap: fakesnapshot.Six().Silence(0, fakesnapshot.ErrDown).Fail("aaaaaaaa", time.Minute).Snap},
		"master dead, its only replica answers but never synced: lost": {
			snap: func() observe.Snapshot {
				c := fakesnapshot.Six().Silence(0, fakesnapshot.ErrDown).Fail("aaaaaaaa", time.Minute)
				c.Snap.Nodes[3].Replication["slave_repl_offset"] = "0"
				return c.Snap
			}(),
			want: []string{"aaaaaaaa"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var got []string
			for _, sh := range LostShards(tc.snap) {
				got = append(got, sh.ID)
				if nodes.CountSlots(sh.Slots) != 5461 {
					t.Errorf("lost shard %s has %d slots, want 5461", sh.ID, nodes.CountSlots(sh.Slots))
				}
				if tc.lastHeard != 0 && !sh.LastHeard.Equal(fakesnapshot.Now.Add(-tc.lastHeard)) {
					t.Errorf("lost shard %s last heard at %s, want %s before the look", sh.ID, sh.LastHeard, tc.lastHeard)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("lost %v, want %v", got, tc.want)
			}
		})
	}
}

func TestPlanAbandon(t *testing.T) {
	if _, ok := Abandon(fakesnapshot.Six().Snap); ok {
		t.Error("abandoned something in a healthy cluster")
	}
	if _, ok := Abandon(fakesnapshot.LostShard(8 * time.Second).Snap); ok {
		t.Error("abandoned a shard silent for less than a forced failover waits")
	}
	a, ok := Abandon(fakesnapshot.LostShard(time.Minute).Snap)
	if !ok || a.Kind != ActionAbandon {
		t.Fatalf("got %v %v, want %s", a, ok, ActionAbandon)
	}
	var got []string
	for _, c := range a.Commands {
		got = append(got, c.String())
	}
	want := []string{ // every answering member forgets the lost master; the silent ones are not asked
		fakesnapshot.Addr(1) + ": CLUSTER FORGET aaaaaaaa", fakesnapshot.Addr(2) + ": CLUSTER FORGET aaaaaaaa",
		fakesnapshot.Addr(4) + ": CLUSTER FORGET aaaaaaaa", fakesnapshot.Addr(5) + ": CLUSTER FORGET aaaaaaaa",
	}
	if !slices.Equal(got, want) {
		t.Errorf("commands %q, want %q", got, want)
	}
	// A member that still replicates the lost master cannot forget it: nothing is done.
	c := fakesnapshot.Six().Silence(0, fakesnapshot.ErrDown).Fail("aaaaaaaa", time.Minute)
	c.Snap.Nodes[3].Replication["slave_repl_offset"] = "0"
	if a, ok := Abandon(c.Snap); ok {
		t.Errorf("planned %v while a member replicates the lost master", a)
	}
}

func TestPlanCover(t *testing.T) {
	cases := map[string]struct {
		snap     observe.Snapshot
		want     ActionKind
		commands []string
	}{
		"a healthy cluster: nothing to cover":                                             {snap: fakesnapshot.Six().Snap},
		"a lost shard not yet forgotten: its slots still have an owner, nothing to cover": {snap: fakesnapshot.LostShard(time.Minute).Snap},
		"the lost shard forgotten: its slots go to the master with the fewest": {
			snap: fakesnapshot.Forgotten().Snap, want: ActionCover,
			commands: []string{fakesnapshot.Addr(2) + ": CLUSTER ADDSLOTSRANGE 0 5460"}, // rc-2 has 5461 slots, rc-1 5462
		},
		"a master holds keys in an unassigned slot: left for a person": {
			snap: func() observe.Snapshot {
				c := fakesnapshot.Forgotten()
				c.Snap.Nodes[2].KeysInUncovered = map[int]int64{17: 3}
				return c.Snap
			}(),
		},
		"a slot is open somewhere: Fix goes first": {
			snap: func() observe.Snapshot {
				c := fakesnapshot.Forgotten()
				c.Snap.Nodes[1].View[0].Migrating = map[int]string{6000: "cccccccc"}
				return c.Snap
			}(),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			a, ok := Recover(tc.snap)
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
