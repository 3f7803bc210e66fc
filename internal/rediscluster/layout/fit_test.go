package layout

import (
	"reflect"
	"slices"
	"testing"
)

// TestFitMoves is the slot-move fitting's table: what starts, in which order, and what is
// held because it would not fit.
func TestFitMoves(t *testing.T) {
	t.Parallel()
	const mib = 1 << 20
	room := func(b int64) Room { return Room{Bytes: b, Capacity: 45 * mib} }
	cases := map[string]struct {
		moves    []Move
		facts    MoveFacts
		want     []Move
		wantHeld []int
		// wantGiant lists the held slots too big even for an empty target.
		wantGiant []int
	}{
		"everything fits": {
			moves: []Move{{Source: "a", Target: "d", Slots: []int{1, 2}}},
			facts: MoveFacts{Sizes: map[int]SlotSize{1: {10, mib}, 2: {10, mib}}, Rooms: map[string]Room{"a": room(0), "d": room(10 * mib)}},
			want:  []Move{{Source: "a", Target: "d", Slots: []int{1, 2}}},
		},
		"move does not fit": {
			moves:    []Move{{Source: "a", Target: "d", Slots: []int{1, 2}}},
			facts:    MoveFacts{Sizes: map[int]SlotSize{1: {10, 3 * mib}, 2: {10, 3 * mib}}, Rooms: map[string]Room{"a": room(0), "d": room(4 * mib)}},
			want:     []Move{{Source: "a", Target: "d", Slots: []int{1}}},
			wantHeld: []int{2},
		},
		"giant slot: the small slots move, the giant one is held": {
			moves: []Move{{Source: "a", Target: "d", Slots: []int{0, 1, 2, 3}}},
			facts: MoveFacts{Sizes: map[int]SlotSize{0: {38000, 47 * mib}, 1: {1, 1000}, 2: {1, 1000}, 3: {0, 0}},
				Rooms: map[string]Room{"a": room(0), "d": room(40 * mib)}},
			want:     []Move{{Source: "a", Target: "d", Slots: []int{1, 2, 3}}},
			wantHeld: []int{0}, wantGiant: []int{0},
		},
		"target filled by a concurrent move": {
			moves: []Move{{Source: "a", Target: "d", Slots: []int{1}}, {Source: "b", Target: "d", Slots: []int{2}}},
			facts: MoveFacts{Sizes: map[int]SlotSize{1: {5, 6 * mib}, 2: {5, 6 * mib}},
				Rooms: map[string]Room{"a": room(0), "b": room(0), "d": room(10 * mib)}},
			want:     []Move{{Source: "a", Target: "d", Slots: []int{1}}},
			wantHeld: []int{2},
		},
		"a source's freed room is used before its target fills": {
			// b gives slot 2 to c, then receives slot 1 from a: only the room slot 2
			// frees lets slot 1 fit. In plan order b would receive first.
			moves: []Move{{Source: "a", Target: "b", Slots: []int{1}}, {Source: "b", Target: "c", Slots: []int{2}}},
			facts: MoveFacts{Sizes: map[int]SlotSize{1: {5, 6 * mib}, 2: {5, 5 * mib}},
				Rooms: map[string]Room{"a": room(0), "b": room(2 * mib), "c": room(10 * mib)}},
			want: []Move{{Source: "b", Target: "c", Slots: []int{2}}, {Source: "a", Target: "b", Slots: []int{1}}},
		},
		"a slot held at first fits once others freed room": {
			// Slot 1 (a→b) comes first but fits only after b gave slot 3 away (the giver
			// order cannot help as a and b give to each other): it moves last.
			moves: []Move{{Source: "a", Target: "b", Slots: []int{1}}, {Source: "b", Target: "a", Slots: []int{3}}},
			facts: MoveFacts{Sizes: map[int]SlotSize{1: {5, 6 * mib}, 3: {5, 5 * mib}},
				Rooms: map[string]Room{"a": room(5 * mib), "b": room(2 * mib)}},
			want: []Move{{Source: "b", Target: "a", Slots: []int{3}}, {Source: "a", Target: "b", Slots: []int{1}}},
		},
		"no maxmemory: unlimited room": {
			moves: []Move{{Source: "a", Target: "d", Slots: []int{1}}},
			facts: MoveFacts{Sizes: map[int]SlotSize{1: {38000, 47 * mib}}, Rooms: map[string]Room{"a": {Unlimited: true}, "d": {Unlimited: true}}},
			want:  []Move{{Source: "a", Target: "d", Slots: []int{1}}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, held := Fit(tc.moves, tc.facts)
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

// TestRoomOf checks the room keeps FillPercent of maxmemory and never goes negative, and
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
		if got := RoomOf(tc.used, tc.max, tc.overhead); got != tc.want {
			t.Errorf("RoomOf(%d, %d, %d) = %+v, want %+v", tc.used, tc.max, tc.overhead, got, tc.want)
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
		moves []Move
		want  map[string]bool
	}{
		{"room for both sources", []Move{{Source: "src1", Target: "roomy", Slots: []int{1}}, {Source: "src2", Target: "roomy", Slots: []int{2}}}, map[string]bool{}},
		{"less room than both hold", []Move{{Source: "src1", Target: "tight", Slots: []int{1}}, {Source: "src2", Target: "tight", Slots: []int{2}}}, map[string]bool{"tight": true}},
		{"one source counted once", []Move{{Source: "src1", Target: "tight", Slots: []int{1}}, {Source: "src1", Target: "tight", Slots: []int{3}}}, map[string]bool{}},
		{"no limit", []Move{{Source: "src1", Target: "free", Slots: []int{1}}}, map[string]bool{}},
		{"a byte short", []Move{{Source: "src1", Target: "small", Slots: []int{1}}}, map[string]bool{"small": true}},
		{"an empty move sends nothing", []Move{{Source: "src1", Target: "small"}}, map[string]bool{}},
	} {
		if got := InQuestion(tc.moves, rooms); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: InQuestion = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestCapHeld: at most MaxHeldSlots are kept, giant ones first, then rolled back, then the
// largest; in slot order.
func TestCapHeld(t *testing.T) {
	t.Parallel()
	var held []HeldSlot
	for i := range MaxHeldSlots + 6 {
		held = append(held, HeldSlot{Slot: 100 + i, Size: SlotSize{Bytes: int64(1000 + i)}})
	}
	held = append(held, HeldSlot{Slot: 1, Giant: true, Size: SlotSize{Bytes: 1}}, HeldSlot{Slot: 2, RolledBack: true, Size: SlotSize{Bytes: 2}})
	got := CapHeld(held)
	if len(got) != MaxHeldSlots {
		t.Fatalf("kept %d, want %d", len(got), MaxHeldSlots)
	}
	nums := HeldSlotNumbers(got)
	if !slices.IsSorted(nums) || nums[0] != 1 || nums[1] != 2 {
		t.Errorf("kept %v, want the giant slot 1 and the rolled-back slot 2 first, in slot order", nums)
	}
	// The 8 smallest of the others (slots 100..107) make room for the two.
	if slices.Contains(nums, 107) || !slices.Contains(nums, 108) {
		t.Errorf("kept %v, want slots 100-107 (the smallest) left out", nums)
	}
	if got := CapHeld(held[:3]); len(got) != 3 {
		t.Errorf("under the cap: kept %d of 3", len(got))
	}
}
