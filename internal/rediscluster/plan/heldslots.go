package plan

import (
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/layout"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/observe"
)

// full reports whether a master with used and maxMemory bytes has less than fullPercent of
// its maxmemory left below layout.FillPercent: it should get no more slots until the data is
// spread otherwise.
func full(used, maxMemory int64) bool {
	return maxMemory > 0 && maxMemory/100*layout.FillPercent-used < maxMemory/100*fullPercent
}

// fullMasters are the node IDs of the masters of s that are full (Room.full, from their
// INFO memory): a rebalance gives them no slot, a count balance would only fill them.
func fullMasters(s observe.Snapshot) []string {
	var out []string
	for _, o := range s.Answering() {
		self, _ := o.Self()
		if m := observe.MemoryOf(o); self.IsMaster() && m.Known && full(m.Used, m.MaxMemory) {
			out = append(out, self.ID)
		}
	}
	return out
}

// fullPercent: a master with less room than this share of its maxmemory gets no slots
// (planMoveSlots): a slot of any size would rather fill it than balance anything.
const fullPercent = 5

// StillHeld keeps of held the slots that stay held in the cluster of s. A held slot is
// dropped, so that the next plan tries it again, once its owner no longer serves it (it
// moved), or once the room changed: some staying master other than its owner has room
// for the slot besides the room the slot was held with (its room now is at least that
// room plus the slot's bytes: a new master, a larger maxmemory or deleted keys give that;
// the room a rolled-back move left again does not). A master without maxmemory always
// has room. A change of spec is the caller's to judge (status.heldSlots keeps the
// generation). It is pure.
func StillHeld(held []layout.HeldSlot, s observe.Snapshot) []layout.HeldSlot {
	if len(held) == 0 {
		return nil
	}
	owner := map[int]string{}
	rooms := map[string]layout.Room{}
	for _, o := range s.Answering() {
		self, _ := o.Self()
		if !self.IsMaster() {
			continue
		}
		for _, slot := range nodes.SlotList(self.Slots) {
			owner[slot] = self.ID
		}
		if m := observe.MemoryOf(o); m.Known && o.Joined() && !o.Leaving {
			rooms[self.ID] = layout.RoomOf(m.Used, m.MaxMemory, 0)
		}
	}
	var out []layout.HeldSlot
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
func roomGrew(h layout.HeldSlot, rooms map[string]layout.Room) bool {
	for id, r := range rooms {
		if id != h.Source && (r.Unlimited || r.Bytes >= h.Room.Bytes+h.Size.Bytes) {
			return true
		}
	}
	return false
}
