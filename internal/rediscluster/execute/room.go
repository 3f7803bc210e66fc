package execute

import "github.com/middleware-operator/middleware-operator/internal/rediscluster/layout"

// halfMovedSlot is what closing a half-moved slot needs to know: the keys (and their bytes)
// still on the owner and already on the target, and the room of each.
type halfMovedSlot struct {
	Left, Moved           layout.SlotSize
	OwnerRoom, TargetRoom layout.Room
}

// closeWay decides how a half-moved slot (its owner migrating it to a target that holds
// some of its keys) is closed: FixFinished when the keys left on the owner fit in the
// target's room; else FixRolledBack when the keys that moved fit in the owner's spare
// memory (it held them a moment ago, but writes may have filled it since); else
// FixFinished when the keys left fit in the target's spare memory (past FillPercent, below
// maxmemory: a slot open on two nodes is worse than a target nearly full, which the
// autoscaler or the user can relieve); else FixKeptOpen: closing either way would meet OOM
// half-way, so the slot stays open (both serve it, through ASK) until one side has room.
// It is pure.
func closeWay(f halfMovedSlot) string {
	switch {
	case f.TargetRoom.Fits(f.Left.Bytes):
		return FixFinished
	case rollBackFits(f):
		return FixRolledBack
	case f.Left.Bytes <= f.TargetRoom.Spare:
		return FixFinished
	}
	return FixKeptOpen
}

// rollBackFits reports whether the keys of a half-moved slot that are on its target fit
// in its owner's spare memory (maxmemory minus used: what it takes before OOM).
func rollBackFits(f halfMovedSlot) bool {
	return f.OwnerRoom.Unlimited || f.Moved.Bytes <= f.OwnerRoom.Spare
}
