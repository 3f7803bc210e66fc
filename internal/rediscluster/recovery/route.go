package recovery

import (
	"fmt"
	"strconv"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/conn"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/observe"
)

// planRoute: a slot exactly one answering master claims as its own and most views route to
// it, which a few nodes' views route elsewhere or nowhere (an entry gossip does not correct: a failed or removed owner
// that carries a higher config epoch than the real one). The real owner bumps its config
// epoch so its claim outranks the stale one in every view (CLUSTER BUMPEPOCH), and every
// master whose view is wrong is told the owner (CLUSTER SETSLOT <slot> NODE <owner>, as
// redis-cli does after a move). Nothing happens while any slot is open (fixOpenSlots settles
// those) or when two masters claim the slot (that needs the keys looked at).
func planRoute(s observe.Snapshot) (Action, bool) {
	joined := s.Joined()
	if _, agreed := observe.AgreedRoutes(joined); agreed {
		// Every view routes every slot alike, each owner's own view among them: nothing
		// routes a slot away from the master that claims it.
		return Action{}, false
	}
	var claimer [nodes.SlotCount]*observe.Observation
	var contested [nodes.SlotCount]bool
	for _, o := range joined {
		self, _ := o.Self()
		if self.HasOpenSlots() {
			return Action{}, false
		}
		if !self.IsMaster() {
			continue
		}
		for _, r := range self.Slots {
			for slot := r.Start; slot <= r.End; slot++ {
				contested[slot] = contested[slot] || claimer[slot] != nil
				claimer[slot] = o
			}
		}
	}
	var claimerID [nodes.SlotCount]string
	for slot, owner := range claimer {
		if owner != nil {
			claimerID[slot] = observe.SelfID(owner)
		}
	}
	all := make([]*[nodes.SlotCount]string, len(joined))
	var agree [nodes.SlotCount]int
	for i, o := range joined {
		all[i] = o.Routes()
		for slot, owner := range claimer {
			if owner != nil && all[i][slot] == claimerID[slot] {
				agree[slot]++
			}
		}
	}
	var bump, setslot []conn.Command
	bumped := map[*observe.Observation]bool{}
	wrongViews, wrongSlots := 0, map[int]bool{}
	for i, o := range joined {
		self, _ := o.Self()
		route, wrong := all[i], false
		for slot, owner := range claimer {
			// Only a minority of stale views is corrected: where most views route the slot
			// elsewhere, the claimer may be an old master back from the dead, and raising its
			// epoch would hand it the slots its promoted replica took writes for since.
			if owner == nil || contested[slot] || route[slot] == claimerID[slot] || agree[slot]*2 <= len(joined) {
				continue
			}
			wrong, wrongSlots[slot] = true, true
			if !bumped[owner] {
				bumped[owner] = true
				if helper := epochRaiser(joined, owner); helper != nil && !bumped[helper] && bumpStill(owner) {
					// The owner's epoch is the highest it knows, so its BUMPEPOCH would
					// answer STILL, and a stale entry of the same epoch (a forgotten master's
					// in a view that did not forget it) would outrank it for good: another
					// master's bump raises the cluster's epoch first, and the owner's bump
					// at the next look then outranks the stale entry.
					bumped[helper] = true
					bump = append(bump, conn.Command{Addr: helper.Addr, Args: []string{"CLUSTER", "BUMPEPOCH"}})
				}
				bump = append(bump, conn.Command{Addr: owner.Addr, Args: []string{"CLUSTER", "BUMPEPOCH"}})
			}
			if self.IsMaster() { // a replica refuses SETSLOT; it follows the bumped epoch
				setslot = append(setslot, conn.Command{Addr: o.Addr, Args: []string{"CLUSTER", "SETSLOT", strconv.Itoa(slot), "NODE", claimerID[slot]}})
			}
		}
		if wrong {
			wrongViews++
		}
	}
	if len(bump) == 0 {
		return Action{}, false
	}
	return Action{ActionRoute, append(bump, setslot...), fmt.Sprintf(
		"%d slots were routed away from the master that serves them by %d nodes: their owners' config epochs were bumped and the owners set where Redis allows",
		len(wrongSlots), wrongViews)}, true
}

// bumpStill reports whether o, a master, would answer CLUSTER BUMPEPOCH with STILL: its
// config epoch is set and no node of its view has a higher one (Redis bumps an epoch only
// when it is 0 or not already the greatest).
func bumpStill(o *observe.Observation) bool {
	self, _ := o.Self()
	if self.ConfigEpoch == 0 {
		return false
	}
	for _, n := range o.View {
		if n.ConfigEpoch > self.ConfigEpoch {
			return false
		}
	}
	return true
}

// epochRaiser is the answering master other than owner with the lowest config epoch, whose
// BUMPEPOCH raises the cluster's current epoch above the owner's; nil when none would.
func epochRaiser(joined []*observe.Observation, owner *observe.Observation) *observe.Observation {
	var best *observe.Observation
	var bestEpoch int64
	for _, o := range joined {
		self, _ := o.Self()
		if o == owner || !self.IsMaster() || bumpStill(o) {
			continue
		}
		if best == nil || self.ConfigEpoch < bestEpoch {
			best, bestEpoch = o, self.ConfigEpoch
		}
	}
	return best
}
