package recovery

import (
	"fmt"
	"strings"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/conn"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/observe"
)

// planVotableEpochs: a master serving slots says a smaller config epoch of itself than some
// other node knows of it. Nodes keep the highest epoch they ever credited to a node ID, and
// Redis credits what answers at an address to the node it expected there before it checks
// the ID: after pods come back at each other's old IPs, a node can credit the master with
// the epoch a replica advertised (its own master's). Every master then refuses its vote to
// this master's replicas, whose request carries the smaller epoch they learned from their
// master: neither Redis's own failover nor CLUSTER FAILOVER FORCE can promote them, and a
// coordinated failover before an upgrade waits for ever. CLUSTER BUMPEPOCH on the master
// gives it the cluster's next epoch, above every stale record, and gossip carries it to all
// nodes within a ping or two; a master whose epoch is already the highest it knows would
// answer STILL, so another master bumps first (epochRaiser), as planRoute does. Only a
// master every view routes its slots to is raised: an old master back from the dead still
// claims in its own view the slots its promoted replica took over, and a raised epoch would
// hand them back to it with the writes the replica took since.
func planVotableEpochs(s observe.Snapshot) (Action, bool) {
	joined := s.Joined()
	for _, o := range joined {
		if self, _ := o.Self(); self.HasOpenSlots() {
			return Action{}, false // a move under way ends with its own epoch bump; Fix settles a stopped one
		}
	}
	var cmds []conn.Command
	var skewed []string
	raised := map[*observe.Observation]bool{}
	for _, o := range joined {
		self, _ := o.Self()
		if !self.IsMaster() || len(self.Slots) == 0 {
			continue
		}
		known, by := self.ConfigEpoch, ""
		for _, other := range joined {
			for _, n := range other.View {
				if n.ID == self.ID && n.ConfigEpoch > known {
					known, by = n.ConfigEpoch, other.Pod
				}
			}
		}
		if by == "" || !routedToItByAll(joined, self) { // the slot walk only on a skew: this runs every healthy look
			continue
		}
		skewed = append(skewed, fmt.Sprintf("%s says %d, %s knows %d", o.Pod, self.ConfigEpoch, by, known))
		if bumpStill(o) {
			if helper := epochRaiser(joined, o); helper != nil && !raised[helper] {
				raised[helper] = true
				cmds = append(cmds, conn.Command{Addr: helper.Addr, Args: []string{"CLUSTER", "BUMPEPOCH"}})
			}
		}
		cmds = append(cmds, conn.Command{Addr: o.Addr, Args: []string{"CLUSTER", "BUMPEPOCH"}})
	}
	if len(cmds) == 0 {
		return Action{}, false
	}
	return Action{ActionRaiseEpoch, cmds, fmt.Sprintf(
		"raised the config epoch of %d masters that said a smaller one of themselves than other nodes know (%s), which made the masters refuse their replicas' failovers",
		len(skewed), strings.Join(skewed, "; "))}, true
}

// routedToItByAll reports whether every view of joined routes each slot self claims to self.
func routedToItByAll(joined []*observe.Observation, self nodes.Node) bool {
	for _, o := range joined {
		routes := o.Routes()
		for _, r := range self.Slots {
			for slot := r.Start; slot <= r.End; slot++ {
				if routes[slot] != self.ID {
					return false
				}
			}
		}
	}
	return true
}
