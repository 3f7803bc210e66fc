package redisadmin

import (
	"reflect"
	"testing"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/layout"
	"github.com/middleware-operator/middleware-operator/tests/fakesnapshot"
)

// TestFitMoves is the slot-move fitting's table: what starts, in which order, and what is
// held because it would not fit.
func TestFitMoves(t *testing.T) {
	t.Parallel()
	const mib = 1 << 20
	room := func(b int64) Room { return Room{Bytes: b, Capacity: 45 * mib} }
	cases := map[string]struct {
		moves    []layout.Move
		facts    moveFacts
		want     []layout.Move
		wantHeld []int
		// wantGiant lists the held slots too big even for an empty target.
		wantGiant []int
	}{
		"everything fits": {
			moves: []layout.Move{{Source: "a", Target: "d", Slots: []int{1, 2}}},
			facts: moveFacts{Sizes: map[int]SlotSize{1: {10, mib}, 2: {10, mib}}, Rooms: map[string]Room{"a": room(0), "d": room(10 * mib)}},
			want:  []layout.Move{{Source: "a", Target: "d", Slots: []int{1, 2}}},
		},
		"move does not fit": {
			moves:    []layout.Move{{Source: "a", Target: "d", Slots: []int{1, 2}}},
			facts:    moveFacts{Sizes: map[int]SlotSize{1: {10, 3 * mib}, 2: {10, 3 * mib}}, Rooms: map[string]Room{"a": room(0), "d": room(4 * mib)}},
			want:     []layout.Move{{Source: "a", Target: "d", Slots: []int{1}}},
			wantHeld: []int{2},
		},
		"giant slot: the small slots move, the giant one is held": {
			moves: []layout.Move{{Source: "a", Target: "d", Slots: []int{0, 1, 2, 3}}},
			facts: moveFacts{Sizes: map[int]SlotSize{0: {38000, 47 * mib}, 1: {1, 1000}, 2: {1, 1000}, 3: {0, 0}},
				Rooms: map[string]Room{"a": room(0), "d": room(40 * mib)}},
			want:     []layout.Move{{Source: "a", Target: "d", Slots: []int{1, 2, 3}}},
			wantHeld: []int{0}, wantGiant: []int{0},
		},
		"target filled by a concurrent move": {
			moves: []layout.Move{{Source: "a", Target: "d", Slots: []int{1}}, {Source: "b", Target: "d", Slots: []int{2}}},
			facts: moveFacts{Sizes: map[int]SlotSize{1: {5, 6 * mib}, 2: {5, 6 * mib}},
				Rooms: map[string]Room{"a": room(0), "b": room(0), "d": room(10 * mib)}},
			want:     []layout.Move{{Source: "a", Target: "d", Slots: []int{1}}},
			wantHeld: []int{2},
		},
		"a source's freed room is used before its target fills": {
			// b gives slot 2 to c, then receives slot 1 from a: only the room slot 2
			// frees lets slot 1 fit. In plan order b would receive first.
			moves: []layout.Move{{Source: "a", Target: "b", Slots: []int{1}}, {Source: "b", Target: "c", Slots: []int{2}}},
			facts: moveFacts{Sizes: map[int]SlotSize{1: {5, 6 * mib}, 2: {5, 5 * mib}},
				Rooms: map[string]Room{"a": room(0), "b": room(2 * mib), "c": room(10 * mib)}},
			want: []layout.Move{{Source: "b", Target: "c", Slots: []int{2}}, {Source: "a", Target: "b", Slots: []int{1}}},
		},
		"a slot held at first fits once others freed room": {
			// Slot 1 (a→b) comes first but fits only after b gave slot 3 away (the giver
			// order cannot help as a and b give to each other): it moves last.
			moves: []layout.Move{{Source: "a", Target: "b", Slots: []int{1}}, {Source: "b", Target: "a", Slots: []int{3}}},
			facts: moveFacts{Sizes: map[int]SlotSize{1: {5, 6 * mib}, 3: {5, 5 * mib}},
				Rooms: map[string]Room{"a": room(5 * mib), "b": room(2 * mib)}},
			want: []layout.Move{{Source: "b", Target: "a", Slots: []int{3}}, {Source: "a", Target: "b", Slots: []int{1}}},
		},
		"no maxmemory: unlimited room": {
			moves: []layout.Move{{Source: "a", Target: "d", Slots: []int{1}}},
			facts: moveFacts{Sizes: map[int]SlotSize{1: {38000, 47 * mib}}, Rooms: map[string]Room{"a": {Unlimited: true}, "d": {Unlimited: true}}},
			want:  []layout.Move{{Source: "a", Target: "d", Slots: []int{1}}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, held := fitMoves(tc.moves, tc.facts)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("moves = %v, want %v", got, tc.want)
			}
			var heldSlots, giants []int
			for _, h := range held {
				heldSlots = append(heldSlots, h.Slot)
				if h.Giant {
					giants = append(giants, h.Slot)
				}
				if h.Size != tc.facts.Sizes[h.Slot] {
					t.Errorf("held slot %d size %+v, want %+v", h.Slot, h.Size, tc.facts.Sizes[h.Slot])
				}
			}
			if !reflect.DeepEqual(heldSlots, tc.wantHeld) {
				t.Errorf("held = %v, want %v", heldSlots, tc.wantHeld)
			}
			if !reflect.DeepEqual(giants, tc.wantGiant) {
				t.Errorf("giant = %v, want %v", giants, tc.wantGiant)
			}
		})
	}
}

// TestCloseWay is the table of how a half-moved slot is closed.
func TestCloseWay(t *testing.T) {
	t.Parallel()
	const mib = 1 << 20
	cases := map[string]struct {
		facts OpenSlotFacts
		want  string
	}{
		"the rest fits in the target: finish": {
			OpenSlotFacts{Left: SlotSize{100, mib}, Moved: SlotSize{100, mib}, OwnerRoom: Room{Bytes: 0}, TargetRoom: Room{Bytes: 2 * mib}}, FixFinished,
		},
		"roll back a half-moved slot: the target is full": {
			OpenSlotFacts{Left: SlotSize{20000, 25 * mib}, Moved: SlotSize{18000, 22 * mib}, OwnerRoom: Room{Bytes: 20 * mib, Spare: 24 * mib}, TargetRoom: Room{Bytes: 0}}, FixRolledBack,
		},
		"roll back: the rest is bigger than the target's room": {
			OpenSlotFacts{Left: SlotSize{100, 5 * mib}, Moved: SlotSize{1, 1000}, OwnerRoom: Room{Spare: 1000}, TargetRoom: Room{Bytes: 4 * mib}}, FixRolledBack,
		},
		"keep open: the target is full and writes filled the owner since": {
			OpenSlotFacts{Left: SlotSize{20000, 25 * mib}, Moved: SlotSize{18000, 22 * mib}, OwnerRoom: Room{Bytes: 0, Spare: 3 * mib}, TargetRoom: Room{Bytes: 0}}, FixKeptOpen,
		},
		"keep open: a byte short on each side": {
			OpenSlotFacts{Left: SlotSize{1, 1001}, Moved: SlotSize{1, 1001}, OwnerRoom: Room{Bytes: 1000, Spare: 1000}, TargetRoom: Room{Bytes: 1000, Spare: 2000}}, FixKeptOpen,
		},
		"roll back into an owner past fillPercent but below maxmemory": {
			OpenSlotFacts{Left: SlotSize{10, 5 * mib}, Moved: SlotSize{10, 2 * mib}, OwnerRoom: Room{Bytes: 0, Spare: 2 * mib}, TargetRoom: Room{Bytes: mib}}, FixRolledBack,
		},
		"no maxmemory on the owner: roll back": {
			OpenSlotFacts{Left: SlotSize{10, 5 * mib}, Moved: SlotSize{10, 50 * mib}, OwnerRoom: Room{Unlimited: true}, TargetRoom: Room{Bytes: mib}}, FixRolledBack,
		},
		"no maxmemory on the target: finish": {
			OpenSlotFacts{Left: SlotSize{20000, 25 * mib}, TargetRoom: Room{Unlimited: true}}, FixFinished,
		},
	}
	for name, tc := range cases {
		if got := closeWay(tc.facts); got != tc.want {
			t.Errorf("%s: %s, want %s", name, got, tc.want)
		}
	}
}

// TestRoomOf checks the room keeps fillPercent of maxmemory and never goes negative, and
// the capacity leaves out what the node uses besides its keys.
func TestRoomOf(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		used, max, overhead int64
		want                Room
	}{
		{0, 0, 0, Room{Unlimited: true}},
		{40, 0, 10, Room{Unlimited: true, Holds: 40}},
		{50, 1000, 0, Room{Bytes: 850, Capacity: 900, Holds: 50, Spare: 950}},
		{50, 1000, 30, Room{Bytes: 850, Capacity: 870, Holds: 50, Spare: 950}},
		{950, 1000, 100, Room{Bytes: 0, Capacity: 800, Holds: 950, Spare: 50}},
		{1000, 1000, 100, Room{Bytes: 0, Capacity: 800, Holds: 1000}},
		{2000, 1000, 100, Room{Bytes: 0, Capacity: 800, Holds: 2000}},
		{50, 1000, 80, Room{Bytes: 850, Capacity: 850, Holds: 50, Spare: 950}},
	} {
		if got := roomOf(tc.used, tc.max, tc.overhead); got != tc.want {
			t.Errorf("roomOf(%d, %d, %d) = %+v, want %+v", tc.used, tc.max, tc.overhead, got, tc.want)
		}
	}
}

// TestInQuestion: only a target with a limit and less room than all its sources hold needs
// its slots measured; a source sending it two moves counts once.
func TestInQuestion(t *testing.T) {
	t.Parallel()
	rooms := map[string]Room{
		"src1": {Bytes: 0, Holds: 600}, "src2": {Bytes: 0, Holds: 500},
		"roomy": {Bytes: 1200}, "tight": {Bytes: 1000}, "free": {Unlimited: true}, "small": {Bytes: 599},
	}
	for _, tc := range []struct {
		name  string
		moves []layout.Move
		want  map[string]bool
	}{
		{"room for both sources", []layout.Move{{Source: "src1", Target: "roomy", Slots: []int{1}}, {Source: "src2", Target: "roomy", Slots: []int{2}}}, map[string]bool{}},
		{"less room than both hold", []layout.Move{{Source: "src1", Target: "tight", Slots: []int{1}}, {Source: "src2", Target: "tight", Slots: []int{2}}}, map[string]bool{"tight": true}},
		{"one source counted once", []layout.Move{{Source: "src1", Target: "tight", Slots: []int{1}}, {Source: "src1", Target: "tight", Slots: []int{3}}}, map[string]bool{}},
		{"no limit", []layout.Move{{Source: "src1", Target: "free", Slots: []int{1}}}, map[string]bool{}},
		{"a byte short", []layout.Move{{Source: "src1", Target: "small", Slots: []int{1}}}, map[string]bool{"small": true}},
		{"an empty move sends nothing", []layout.Move{{Source: "src1", Target: "small"}}, map[string]bool{}},
	} {
		if got := inQuestion(tc.moves, rooms); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: inQuestion = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestSkipFullTargets: a slot move plans nothing into a master with under fullPercent of its
// maxmemory left, and the rest as before.
func TestSkipFullTargets(t *testing.T) {
	t.Parallel()
	snap := fakesnapshot.Six().Current().Used(50, 97, 30, 50, 97, 30).Snap
	moves := []layout.Move{{Source: "aaaaaaaa", Target: "bbbbbbbb", Slots: []int{1}}, {Source: "aaaaaaaa", Target: "cccccccc", Slots: []int{2}}}
	got := skipFullTargets(moves, snap)
	if want := moves[1:]; !reflect.DeepEqual(got, want) {
		t.Errorf("moves = %v, want %v (rc-1 is 97%% full)", got, want)
	}
}

// TestMeanSizesOf: a node whose user may not run MEMORY USAGE has its slots estimated by
// their keys times its mean bytes a key; a node without keys leaves them unknown (0).
func TestMeanSizesOf(t *testing.T) {
	t.Parallel()
	got := meanSizesOf(map[int]SlotSize{1: {Keys: 10}, 2: {Keys: 0}}, 1000, 100)
	if want := map[int]SlotSize{1: {Keys: 10, Bytes: 100}, 2: {Keys: 0, Bytes: 0}}; !reflect.DeepEqual(got, want) {
		t.Errorf("meanSizesOf = %v, want %v", got, want)
	}
	if got := meanSizesOf(map[int]SlotSize{1: {Keys: 10}}, 1000, 0); got[1].Bytes != 0 {
		t.Errorf("with no keys, slot 1 = %+v, want 0 bytes", got[1])
	}
}
