package plan

import (
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/observe"
)

// strayedSlots are the slots that no answering master claims as its own while a view routes
// them to an answering master: a master that lost a slot in its own view (told by gossip or
// SETSLOT that another node had it) while the rest of the cluster still routes the slot to
// it. Nobody serves such a slot, and gossip never mends it (Redis hands a slot over only on
// a claim), so Fix gives it to the master holding its keys. A slot that some view routes to
// a node that does not answer is a failover's or the lost-shard guards' case, not this.
func strayedSlots(s observe.Snapshot) []int {
	joined := s.Joined()
	if _, agreed := observe.AgreedRoutes(joined); agreed {
		// Every view routes every slot alike, each owner's own among them: every routed
		// slot is claimed by the master it is routed to (the common case, every look).
		return nil
	}
	answering := map[string]bool{}
	var claimed [nodes.SlotCount]bool
	for _, o := range joined {
		self, _ := o.Self()
		if !self.IsMaster() {
			continue
		}
		answering[self.ID] = true
		for _, r := range self.Slots {
			for slot := r.Start; slot <= r.End; slot++ {
				claimed[slot] = true
			}
		}
	}
	var toAnswering, toSilent [nodes.SlotCount]bool
	for _, o := range joined {
		for slot, owner := range o.Routes() {
			switch {
			case owner == "" || claimed[slot]:
			case answering[owner]:
				toAnswering[slot] = true
			default:
				toSilent[slot] = true
			}
		}
	}
	var out []int
	for slot := range nodes.SlotCount {
		if toAnswering[slot] && !toSilent[slot] {
			out = append(out, slot)
		}
	}
	return out
}
