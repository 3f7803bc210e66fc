package redisadmin

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/layout"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/observe"
)

// Room is how many bytes a master may still receive: maxmemory minus used_memory, with a
// margin (see roomOf). Unlimited is true for a master without maxmemory.
type Room struct {
	Bytes     int64
	Unlimited bool
	// Capacity is the room the master would have empty (fillPercent of its maxmemory): a
	// slot bigger than that fits in no master of its size, however the data is spread.
	Capacity int64
	// Holds bounds what the master's keys take: all its used memory, overhead included (the
	// overhead's own figure lags behind buffers that grow and shrink): no move from it
	// sends more.
	Holds int64
	// Spare is maxmemory minus used, never below 0: what the master takes before it answers
	// OOM (a rollback gives a master keys it held a moment ago, so it may fill it past
	// fillPercent; a move may not).
	Spare int64
}

// full reports whether a master with used and maxMemory bytes has less than fullPercent of
// its maxmemory left below fillPercent: it should get no more slots until the data is
// spread otherwise.
func full(used, maxMemory int64) bool {
	return maxMemory > 0 && maxMemory/100*fillPercent-used < maxMemory/100*fullPercent
}

// skipFullTargets drops from moves those whose target is full (Room.full, from its INFO
// memory in s): a count balance would only fill it.
func skipFullTargets(moves []layout.Move, s observe.Snapshot) []layout.Move {
	isFull := map[string]bool{}
	for _, o := range s.Answering() {
		self, _ := o.Self()
		if m := observe.MemoryOf(o); m.Known && full(m.Used, m.MaxMemory) {
			isFull[self.ID] = true
		}
	}
	var out []layout.Move
	for _, m := range moves {
		if !isFull[m.Target] {
			out = append(out, m)
		}
	}
	return out
}

// fullPercent: a master with less room than this share of its maxmemory gets no slots
// (planMoveSlots): a slot of any size would rather fill it than balance anything.
const fullPercent = 5

// fits reports whether bytes fit in r.
func (r Room) fits(bytes int64) bool { return r.Unlimited || bytes <= r.Bytes }

// SlotSize is what a slot holds on its master: its keys and an estimate of their bytes.
type SlotSize struct {
	Keys  int64
	Bytes int64
}

// fillPercent is how full of its maxmemory a slot move may leave a target: the rest is
// kept for the writes that go on during the move and for what an estimate misses (the
// per-key overhead of the keyspace, the replication buffers).
const fillPercent = 90

// roomOf is the room of a master with used and maxMemory bytes (INFO memory): up to
// fillPercent of maxmemory, never below 0; unlimited without maxmemory. Its capacity is
// the room it would have without its keys, overhead bytes of used being what it uses
// besides them (used_memory_overhead; 0 when not known).
func roomOf(used, maxMemory, overhead int64) Room {
	holds := max(used, 0)
	if maxMemory <= 0 {
		return Room{Unlimited: true, Holds: holds}
	}
	limit := maxMemory / 100 * fillPercent
	return Room{Bytes: max(limit-used, 0), Capacity: max(limit-min(overhead, used), 0), Holds: holds, Spare: max(maxMemory-used, 0)}
}

// inQuestion returns the targets of moves whose room might not take what the moves send:
// those with a limit and less room than everything their sources hold. Slots moving to any
// other target fit whatever their size, and need no measuring. It is pure.
func inQuestion(moves []layout.Move, rooms map[string]Room) map[string]bool {
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

// moveFacts are the facts the fitting of a plan needs, gathered by measureMoves: the size
// of every slot the plan moves (on its source) and the room of every master of the plan.
type moveFacts struct {
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
			"room for it besides that, or the spec changes", h.Slot, h.Size.Keys, formatBytes(h.Size.Bytes), nodes.ShortID(h.Target), formatBytes(h.Room.Bytes))
	}
	if !h.Giant {
		return fmt.Sprintf("slot %d (%d keys, about %s) waits: %s has %s of room left", h.Slot, h.Size.Keys, formatBytes(h.Size.Bytes), nodes.ShortID(h.Target), formatBytes(h.Room.Bytes))
	}
	return fmt.Sprintf("slot %d (%d keys, about %s) does not fit in %s (%s of room); a larger memory limit, "+
		"a higher maxMemoryPercent or fewer keys under one hash tag would let it move",
		h.Slot, h.Size.Keys, formatBytes(h.Size.Bytes), nodes.ShortID(h.Target), formatBytes(h.Room.Bytes))
}

// HeldSlotNumbers are the slot numbers of held.
func HeldSlotNumbers(held []HeldSlot) []int {
	out := make([]int, len(held))
	for i, h := range held {
		out[i] = h.Slot
	}
	return out
}

// fitMoves keeps of moves only the slots that fit in their targets, in an order that uses
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
func fitMoves(moves []layout.Move, facts moveFacts) ([]layout.Move, []HeldSlot) {
	givers := map[string]bool{}
	for _, m := range moves {
		if len(m.Slots) > 0 {
			givers[m.Source] = true
		}
	}
	ordered := slices.Clone(moves)
	slices.SortStableFunc(ordered, func(x, y layout.Move) int {
		return cmp.Compare(b2i(givers[x.Target]), b2i(givers[y.Target]))
	})
	room := map[string]Room{}
	for _, m := range ordered {
		room[m.Source], room[m.Target] = facts.Rooms[m.Source], facts.Rooms[m.Target]
	}
	admit := func(m layout.Move, s int) bool {
		size := facts.Sizes[s]
		r := room[m.Target]
		if !r.fits(size.Bytes) {
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
	var out []layout.Move
	for _, lists := range [][][]int{kept, late} {
		for i, m := range ordered {
			if len(lists[i]) > 0 {
				out = append(out, layout.Move{Source: m.Source, Target: m.Target, Slots: lists[i]})
			}
		}
	}
	return out, held
}

// OpenSlotFacts are the facts closing a half-moved slot needs: the keys (and their bytes)
// still on the owner and already on the target, and the room of each.
type OpenSlotFacts struct {
	Left, Moved           SlotSize
	OwnerRoom, TargetRoom Room
}

// closeWay decides how a half-moved slot (its owner migrating it to a target that holds
// some of its keys) is closed: FixFinished when the keys left on the owner fit in the
// target's room; else FixRolledBack when the keys that moved fit in the owner's spare
// memory (it held them a moment ago, but writes may have filled it since); else
// FixKeptOpen: closing either way would meet OOM half-way, so the slot stays open (both
// serve it, through ASK) until one side has room. It is pure.
func closeWay(f OpenSlotFacts) string {
	switch {
	case f.TargetRoom.fits(f.Left.Bytes):
		return FixFinished
	case rollBackFits(f):
		return FixRolledBack
	}
	return FixKeptOpen
}

// rollBackFits reports whether the keys of a half-moved slot that are on its target fit
// in its owner's spare memory (maxmemory minus used: what it takes before OOM).
func rollBackFits(f OpenSlotFacts) bool {
	return f.OwnerRoom.Unlimited || f.Moved.Bytes <= f.OwnerRoom.Spare
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// formatBytes writes n bytes in the largest binary unit that keeps it above 1.
func formatBytes(n int64) string {
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

// StillHeld keeps of held the slots that stay held in the cluster of s. A held slot is
// dropped, so that the next plan tries it again, once its owner no longer serves it (it
// moved), or once the room changed: some staying master other than its owner has room
// for the slot besides the room the slot was held with (its room now is at least that
// room plus the slot's bytes: a new master, a larger maxmemory or deleted keys give that;
// the room a rolled-back move left again does not). A master without maxmemory always
// has room. A change of spec is the caller's to judge (status.heldSlots keeps the
// generation). It is pure.
func StillHeld(held []HeldSlot, s observe.Snapshot) []HeldSlot {
	if len(held) == 0 {
		return nil
	}
	owner := map[int]string{}
	rooms := map[string]Room{}
	for _, o := range s.Answering() {
		self, _ := o.Self()
		if !self.IsMaster() {
			continue
		}
		for _, slot := range nodes.SlotList(self.Slots) {
			owner[slot] = self.ID
		}
		if m := observe.MemoryOf(o); m.Known && o.Joined() && !o.Leaving {
			rooms[self.ID] = roomOf(m.Used, m.MaxMemory, 0)
		}
	}
	var out []HeldSlot
	for _, h := range held {
		if owner[h.Slot] != h.Source || roomGrew(h, rooms) {
			continue
		}
		out = append(out, h)
	}
	return out
}

// roomGrew reports whether a master other than h's owner has room for h besides the room
// h was held with.
func roomGrew(h HeldSlot, rooms map[string]Room) bool {
	for id, r := range rooms {
		if id != h.Source && (r.Unlimited || r.Bytes >= h.Room.Bytes+h.Size.Bytes) {
			return true
		}
	}
	return false
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
