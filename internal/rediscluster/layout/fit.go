package layout

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
)

// Room is how many bytes a master may still receive: maxmemory minus used_memory, with a
// margin (see RoomOf). Unlimited is true for a master without maxmemory.
type Room struct {
	Bytes     int64
	Unlimited bool
	// Capacity is the room the master would have empty (FillPercent of its maxmemory): a
	// slot bigger than that fits in no master of its size, however the data is spread.
	Capacity int64
	// Holds bounds what the master's keys take: all its used memory, overhead included (the
	// overhead's own figure lags behind buffers that grow and shrink): no move from it
	// sends more.
	Holds int64
	// Spare is maxmemory minus used, never below 0: what the master takes before it answers
	// OOM (a rollback gives a master keys it held a moment ago, so it may fill it past
	// FillPercent; a move may not).
	Spare int64
}

// Fits reports whether bytes fit in r.
func (r Room) Fits(bytes int64) bool { return r.Unlimited || bytes <= r.Bytes }

// SlotSize is what a slot holds on its master: its keys and an estimate of their bytes.
type SlotSize struct {
	Keys  int64
	Bytes int64
}

// FillPercent is how full of its maxmemory a slot move may leave a target: the rest is
// kept for the writes that go on during the move and for what an estimate misses (the
// per-key overhead of the keyspace, the replication buffers).
const FillPercent = 90

// RoomOf is the room of a master with used and maxMemory bytes (INFO memory): up to
// FillPercent of maxmemory, never below 0; unlimited without maxmemory. Its capacity is
// the room it would have without its keys, overhead bytes of used being what it uses
// besides them (used_memory_overhead; 0 when not known).
func RoomOf(used, maxMemory, overhead int64) Room {
	holds := max(used, 0)
	if maxMemory <= 0 {
		return Room{Unlimited: true, Holds: holds}
	}
	limit := maxMemory / 100 * FillPercent
	return Room{Bytes: max(limit-used, 0), Capacity: max(limit-min(overhead, used), 0), Holds: holds, Spare: max(maxMemory-used, 0)}
}

// InQuestion returns the targets of moves whose room might not take what the moves send:
// those with a limit and less room than everything their sources hold. Slots moving to any
// other target fit whatever their size, and need no measuring. It is pure.
func InQuestion(moves []Move, rooms map[string]Room) map[string]bool {
	bound := map[string]int64{}
	counted := map[[2]string]bool{}
	for _, m := range moves {
		if len(m.Slots) == 0 || counted[[2]string{m.Source, m.Target}] {
			continue
		}
		counted[[2]string{m.Source, m.Target}] = true
		bound[m.Target] += rooms[m.Source].Holds
	}
	out := map[string]bool{}
	for target, b := range bound {
		if r := rooms[target]; !r.Unlimited && r.Bytes < b {
			out[target] = true
		}
	}
	return out
}

// MoveFacts are the facts the fitting of a plan needs, gathered by measureMoves: the size
// of every slot the plan moves (on its source) and the room of every master of the plan.
type MoveFacts struct {
	Sizes map[int]SlotSize
	Rooms map[string]Room
}

// HeldSlot is a slot a plan wanted to move but did not start, because its data would not
// fit in its target: no move starts that would fill a target past its maxmemory.
type HeldSlot struct {
	// Slot is the hash slot, Source and Target the masters' node IDs.
	Slot           int
	Source, Target string
	// Size is what the slot holds; Room the target's room when the plan was fitted.
	Size SlotSize
	Room Room
	// Giant: the slot is bigger than the target's room even empty (Room.Capacity), so no
	// spreading of the data lets it move; otherwise the target is only full now.
	Giant bool
	// RolledBack: the slot was moving when its target answered OOM, and went back to its
	// owner (the estimate said it fit); Room is then the target's room before the move.
	RolledBack bool
}

// String names the slot, its size and what would help, for events and conditions.
func (h HeldSlot) String() string {
	if h.RolledBack && !h.Giant {
		return fmt.Sprintf("slot %d (%d keys, about %s) was rolled back: %s answered OOM with %s of room; it is tried again once a master has "+
			"room for it besides that, or the spec changes", h.Slot, h.Size.Keys, FormatBytes(h.Size.Bytes), nodes.ShortID(h.Target), FormatBytes(h.Room.Bytes))
	}
	if !h.Giant {
		return fmt.Sprintf("slot %d (%d keys, about %s) waits: %s has %s of room left", h.Slot, h.Size.Keys, FormatBytes(h.Size.Bytes), nodes.ShortID(h.Target), FormatBytes(h.Room.Bytes))
	}
	return fmt.Sprintf("slot %d (%d keys, about %s) does not fit in %s (%s of room); a larger memory limit, "+
		"a higher maxMemoryPercent or fewer keys under one hash tag would let it move",
		h.Slot, h.Size.Keys, FormatBytes(h.Size.Bytes), nodes.ShortID(h.Target), FormatBytes(h.Room.Bytes))
}

// HeldSlotNumbers are the slot numbers of held.
func HeldSlotNumbers(held []HeldSlot) []int {
	out := make([]int, len(held))
	for i, h := range held {
		out[i] = h.Slot
	}
	return out
}

// Fit keeps of moves only the slots that fit in their targets, in an order that uses
// the room a source frees before its own target fills, and holds back the rest. It is pure.
//
// The moves are ordered so that a master gives before it receives (a move whose target is
// also the source of another move comes after it: runMoves starts pairs in plan order and
// never lets a node give and receive at once). Slots are then admitted one by one, each
// charged to its target's room (what is already on its way counts) and credited to its
// source's; a slot that does not fit is tried again once every other slot was admitted
// (the room freed meanwhile may make it fit), in a move of its own at the end of the plan,
// then held. (runMoves runs the moves of one source and target as one pair, at the place
// of the first: a late slot of a pair that also has early ones may be moved before the room
// it counts on is freed; the target then refuses it with OOM and the slot is rolled back.)
// A slot of unknown size (not in
// facts) is admitted as empty; a master of unknown room has none.
func Fit(moves []Move, facts MoveFacts) ([]Move, []HeldSlot) {
	givers := map[string]bool{}
	for _, m := range moves {
		if len(m.Slots) > 0 {
			givers[m.Source] = true
		}
	}
	ordered := slices.Clone(moves)
	slices.SortStableFunc(ordered, func(x, y Move) int {
		return cmp.Compare(b2i(givers[x.Target]), b2i(givers[y.Target]))
	})
	room := map[string]Room{}
	for _, m := range ordered {
		room[m.Source], room[m.Target] = facts.Rooms[m.Source], facts.Rooms[m.Target]
	}
	admit := func(m Move, s int) bool {
		size := facts.Sizes[s]
		r := room[m.Target]
		if !r.Fits(size.Bytes) {
			return false
		}
		if !r.Unlimited {
			r.Bytes -= size.Bytes
			room[m.Target] = r
		}
		if src := room[m.Source]; !src.Unlimited {
			src.Bytes += size.Bytes
			room[m.Source] = src
		}
		return true
	}
	kept := make([][]int, len(ordered))
	type later struct{ move, slot int }
	var waiting []later
	for i, m := range ordered {
		for _, s := range m.Slots {
			if admit(m, s) {
				kept[i] = append(kept[i], s)
			} else {
				waiting = append(waiting, later{i, s})
			}
		}
	}
	var held []HeldSlot
	late := make([][]int, len(ordered))
	for _, w := range waiting {
		m := ordered[w.move]
		if admit(m, w.slot) {
			late[w.move] = append(late[w.move], w.slot)
			continue
		}
		r, size := room[m.Target], facts.Sizes[w.slot]
		held = append(held, HeldSlot{Slot: w.slot, Source: m.Source, Target: m.Target, Size: size, Room: r, Giant: size.Bytes > r.Capacity})
	}
	var out []Move
	for _, lists := range [][][]int{kept, late} {
		for i, m := range ordered {
			if len(lists[i]) > 0 {
				out = append(out, Move{Source: m.Source, Target: m.Target, Slots: lists[i]})
			}
		}
	}
	return out, held
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// FormatBytes writes n bytes in the largest binary unit that keeps it above 1.
func FormatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for v := n / unit; v >= unit; v /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// MaxHeldSlots bounds how many held slots are remembered (status.heldSlots): CapHeld.
const MaxHeldSlots = 64

// CapHeld keeps at most MaxHeldSlots of held, in slot order: the giant ones first, then
// those rolled back after an OOM, then the largest. A slot left out is only forgotten: the
// next move that plans it measures it again and holds it again if it still does not fit.
// It is pure.
func CapHeld(held []HeldSlot) []HeldSlot {
	out := slices.Clone(held)
	if len(out) > MaxHeldSlots {
		slices.SortStableFunc(out, func(a, b HeldSlot) int {
			return cmp.Or(cmp.Compare(b2i(b.Giant), b2i(a.Giant)), cmp.Compare(b2i(b.RolledBack), b2i(a.RolledBack)),
				cmp.Compare(b.Size.Bytes, a.Size.Bytes), cmp.Compare(a.Slot, b.Slot))
		})
		out = out[:MaxHeldSlots]
	}
	slices.SortFunc(out, func(a, b HeldSlot) int { return cmp.Compare(a.Slot, b.Slot) })
	return out
}
