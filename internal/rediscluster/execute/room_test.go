package execute

import (
	"reflect"
	"strings"
	"testing"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/layout"
)

// TestCloseWay is the table of how a half-moved slot is closed.
func TestCloseWay(t *testing.T) {
	t.Parallel()
	const mib = 1 << 20
	cases := map[string]struct {
		facts halfMovedSlot
		want  string
	}{
		"the rest fits in the target: finish": {
			halfMovedSlot{Left: layout.SlotSize{Keys: 100, Bytes: mib}, Moved: layout.SlotSize{Keys: 100, Bytes: mib}, OwnerRoom: layout.Room{Bytes: 0}, TargetRoom: layout.Room{Bytes: 2 * mib}}, FixFinished,
		},
		"roll back a half-moved slot: the target is full": {
			halfMovedSlot{Left: layout.SlotSize{Keys: 20000, Bytes: 25 * mib}, Moved: layout.SlotSize{Keys: 18000, Bytes: 22 * mib}, OwnerRoom: layout.Room{Bytes: 20 * mib, Spare: 24 * mib}, TargetRoom: layout.Room{Bytes: 0}}, FixRolledBack,
		},
		"roll back: the rest is bigger than the target's room": {
			halfMovedSlot{Left: layout.SlotSize{Keys: 100, Bytes: 5 * mib}, Moved: layout.SlotSize{Keys: 1, Bytes: 1000}, OwnerRoom: layout.Room{Spare: 1000}, TargetRoom: layout.Room{Bytes: 4 * mib}}, FixRolledBack,
		},
		"keep open: the target is full and writes filled the owner since": {
			halfMovedSlot{Left: layout.SlotSize{Keys: 20000, Bytes: 25 * mib}, Moved: layout.SlotSize{Keys: 18000, Bytes: 22 * mib}, OwnerRoom: layout.Room{Bytes: 0, Spare: 3 * mib}, TargetRoom: layout.Room{Bytes: 0}}, FixKeptOpen,
		},
		"keep open: a byte short on each side": {
			halfMovedSlot{Left: layout.SlotSize{Keys: 1, Bytes: 1001}, Moved: layout.SlotSize{Keys: 1, Bytes: 1001}, OwnerRoom: layout.Room{Bytes: 1000, Spare: 1000}, TargetRoom: layout.Room{Bytes: 1000, Spare: 1000}}, FixKeptOpen,
		},
		"finish into the target's spare when the owner cannot take back what moved (a giant slot, stop 59)": {
			halfMovedSlot{Left: layout.SlotSize{Keys: 35, Bytes: 2800 << 10}, Moved: layout.SlotSize{Keys: 294, Bytes: 23 * mib}, OwnerRoom: layout.Room{Bytes: 19 * mib, Spare: 22 * mib},
				TargetRoom: layout.Room{Bytes: 655 << 10, Spare: 4 * mib}}, FixFinished,
		},
		"roll back into an owner past fillPercent but below maxmemory": {
			halfMovedSlot{Left: layout.SlotSize{Keys: 10, Bytes: 5 * mib}, Moved: layout.SlotSize{Keys: 10, Bytes: 2 * mib}, OwnerRoom: layout.Room{Bytes: 0, Spare: 2 * mib}, TargetRoom: layout.Room{Bytes: mib}}, FixRolledBack,
		},
		"no maxmemory on the owner: roll back": {
			halfMovedSlot{Left: layout.SlotSize{Keys: 10, Bytes: 5 * mib}, Moved: layout.SlotSize{Keys: 10, Bytes: 50 * mib}, OwnerRoom: layout.Room{Unlimited: true}, TargetRoom: layout.Room{Bytes: mib}}, FixRolledBack,
		},
		"no maxmemory on the target: finish": {
			halfMovedSlot{Left: layout.SlotSize{Keys: 20000, Bytes: 25 * mib}, TargetRoom: layout.Room{Unlimited: true}}, FixFinished,
		},
	}
	for name, tc := range cases {
		if got := closeWay(tc.facts); got != tc.want {
			t.Errorf("%s: %s, want %s", name, got, tc.want)
		}
	}
}

// TestMeanSizesOf: a node whose user may not run MEMORY USAGE has its slots estimated by
// their keys times its mean bytes a key; a node without keys leaves them unknown (0).
func TestMeanSizesOf(t *testing.T) {
	t.Parallel()
	got := meanSizesOf(map[int]layout.SlotSize{1: {Keys: 10}, 2: {Keys: 0}}, 1000, 100)
	if want := map[int]layout.SlotSize{1: {Keys: 10, Bytes: 100}, 2: {Keys: 0, Bytes: 0}}; !reflect.DeepEqual(got, want) {
		t.Errorf("meanSizesOf = %v, want %v", got, want)
	}
	if got := meanSizesOf(map[int]layout.SlotSize{1: {Keys: 10}}, 1000, 0); got[1].Bytes != 0 {
		t.Errorf("with no keys, slot 1 = %+v, want 0 bytes", got[1])
	}
}

// TestRolledBackHeld: a slot of the plan that a fix rolled back after OOM is held, with
// its target and the room the fitting counted on for it (the target's room before the
// move less the slots sent before it: slot 8 comes after 5's 1000 bytes); a finished slot,
// or one not of the plan, is not.
func TestRolledBackHeld(t *testing.T) {
	t.Parallel()
	moves := []layout.Move{{Source: "a", Target: "d", Slots: []int{5, 6, 8}}}
	facts := layout.MoveFacts{Sizes: map[int]layout.SlotSize{5: {Keys: 10, Bytes: 1000}, 8: {Keys: 3, Bytes: 100}}, Rooms: map[string]layout.Room{"d": {Bytes: 2000}}}
	fixes := []SlotFix{
		{Slot: 5, Action: FixRolledBack, Owner: "a", Size: layout.SlotSize{Keys: 12, Bytes: 900}},
		{Slot: 6, Action: FixFinished, Owner: "d"},
		{Slot: 7, Action: FixRolledBack, Owner: "b"},
		{Slot: 8, Action: FixRolledBack, Owner: "a", Size: layout.SlotSize{Keys: 5, Bytes: 4000}},
	}
	got := rolledBackHeld(fixes, moves, facts)
	want := []layout.HeldSlot{
		{Slot: 5, Source: "a", Target: "d", Size: layout.SlotSize{Keys: 10, Bytes: 1000}, Room: layout.Room{Bytes: 2000}, RolledBack: true},
		{Slot: 8, Source: "a", Target: "d", Size: layout.SlotSize{Keys: 5, Bytes: 4000}, Room: layout.Room{Bytes: 1000}, RolledBack: true},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("held = %+v\nwant %+v", got, want)
	}
	if s := got[0].String(); !strings.Contains(s, "rolled back") || !strings.Contains(s, "OOM") {
		t.Errorf("message %q does not say it was rolled back after OOM", s)
	}
}

// TestFormatRoom: a room in a message says what the node uses of its maxmemory.
func TestFormatRoom(t *testing.T) {
	t.Parallel()
	const mib = 1 << 20
	for _, c := range []struct {
		room layout.Room
		want string
	}{
		{layout.RoomOf(20*mib, 32*mib, 2*mib), "8.8 MiB (using 20.0 MiB of its maxmemory 32.0 MiB)"},
		{layout.RoomOf(33*mib, 32*mib, 2*mib), "0 B (using 33.0 MiB: at or past its maxmemory)"},
		{layout.RoomOf(5*mib, 0, 0), "no maxmemory, so unlimited room"},
	} {
		if got := formatRoom(c.room); got != c.want {
			t.Errorf("formatRoom(%+v) = %q, want %q", c.room, got, c.want)
		}
	}
}
