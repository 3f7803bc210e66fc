package recovery

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/conn"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/observe"
)

// LostShard is a master whose slots have no copy left: it is flagged failed, no pod answers
// with its ID, it has been silent for longer than a forced failover waits, and no replica
// that ever synced from it answers (nothing could be promoted). Its pod and every replica's
// came back without their data, or never came back.
type LostShard struct {
	// ID and Addr are the lost master's node ID and last address.
	ID, Addr string
	// Slots are the slots it owned.
	Slots []nodes.SlotRange
	// LastHeard is when the rest of the cluster last heard from it (its newest pong in any
	// joined view): the loss came after; zero when no view recorded one.
	LastHeard time.Time
}

// LostShards lists the lost shards of s (see LostShard), in ID order.
func LostShards(s observe.Snapshot) []LostShard {
	var out []LostShard
	for _, k := range s.Cluster() {
		if !k.Node.IsMaster() || len(k.Slots) == 0 || !k.Failed || k.Answers != nil ||
			s.SilentFor(k) < forceFailoverAfter*s.NodeTimeout || promotable(s, k.Node.ID) != nil {
			continue
		}
		out = append(out, LostShard{ID: k.Node.ID, Addr: k.Node.Addr, Slots: k.Slots, LastHeard: s.LastHeard(k)})
	}
	return out
}

// promotable is the most caught-up answering replica of the master with ID master that
// ever synced from it, or nil: one that never synced (offset 0) would serve the slots empty.
func promotable(s observe.Snapshot, master string) *observe.Observation {
	var best *observe.Observation
	var bestOffset int64
	for _, o := range s.Joined() {
		self, _ := o.Self()
		if self.Role != nodes.RoleSlave || self.MasterID != master {
			continue
		}
		if offset, _ := strconv.ParseInt(o.Replication["slave_repl_offset"], 10, 64); offset > bestOffset {
			best, bestOffset = o, offset
		}
	}
	return best
}

// Abandon forgets the masters of lost shards on every member that lists them, so that
// their slots become unassigned everywhere and Recover covers them (planCover) with a
// live master: those slots are served again, empty. It is the one recovery that gives up
// data, so the operator runs it only when the user has accepted the loss. It returns false
// when there is no lost shard, or a member still replicates one (it cannot forget its own
// master).
func Abandon(s observe.Snapshot) (Action, bool) {
	shards := LostShards(s)
	if len(shards) == 0 {
		return Action{}, false
	}
	var cmds []conn.Command
	var names []string
	for _, sh := range shards {
		for _, o := range s.Joined() {
			self, _ := o.Self()
			if self.MasterID == sh.ID {
				return Action{}, false
			}
			if slices.ContainsFunc(o.View, func(n nodes.Node) bool { return n.ID == sh.ID }) {
				cmds = append(cmds, conn.Command{Addr: o.Addr, Args: []string{"CLUSTER", "FORGET", sh.ID}})
			}
		}
		names = append(names, fmt.Sprintf("%s (last at %s, %d slots)", nodes.ShortID(sh.ID), sh.Addr, nodes.CountSlots(sh.Slots)))
	}
	if len(cmds) == 0 {
		return Action{}, false
	}
	return Action{ActionAbandon, cmds, fmt.Sprintf("the loss was accepted: forgot lost master %s; its slots will be served again, empty",
		strings.Join(names, ", "))}, true
}

// planCover gives the slots no member routes to any master (after a lost shard was
// abandoned, or a CLUSTER DELSLOTS) to the answering master with the fewest slots, as
// redis-cli --cluster fix does: only while every joined master answers, no slot is open
// and no master holds a key in them (a slot with keys somewhere is left for a person; the
// status names it). One CLUSTER ADDSLOTSRANGE.
func planCover(s observe.Snapshot) (Action, bool) {
	joined := s.Joined()
	if masters, agreed := observe.AgreedRoutes(joined); agreed {
		routed := 0
		for _, n := range masters {
			routed += nodes.CountSlots(n.Slots)
		}
		if routed == nodes.SlotCount {
			return Action{}, false // every view routes every slot
		}
	}
	var covered [nodes.SlotCount]bool
	var target *observe.Observation
	targetSlots := 0
	for _, o := range joined {
		self, _ := o.Self()
		if self.HasOpenSlots() {
			return Action{}, false
		}
		for slot, owner := range o.Routes() {
			covered[slot] = covered[slot] || owner != ""
		}
		if self.IsMaster() && (target == nil || nodes.CountSlots(self.Slots) < targetSlots) {
			target, targetSlots = o, nodes.CountSlots(self.Slots)
		}
	}
	if target == nil || !layoutStable(&s) {
		return Action{}, false
	}
	var uncovered []nodes.SlotRange
	for slot := range nodes.SlotCount {
		if covered[slot] {
			continue
		}
		for _, o := range joined {
			if o.KeysInUncovered[slot] > 0 {
				return Action{}, false
			}
		}
		if n := len(uncovered); n > 0 && uncovered[n-1].End == slot-1 {
			uncovered[n-1].End = slot
		} else {
			uncovered = append(uncovered, nodes.SlotRange{Start: slot, End: slot})
		}
	}
	if len(uncovered) == 0 {
		return Action{}, false
	}
	args := []string{"CLUSTER", "ADDSLOTSRANGE"}
	for _, r := range uncovered {
		args = append(args, strconv.Itoa(r.Start), strconv.Itoa(r.End))
	}
	return Action{ActionCover, []conn.Command{{Addr: target.Addr, Args: args}}, fmt.Sprintf("%d slots (%s) had no owner and no keys on any master: given to %s",
		nodes.CountSlots(uncovered), nodes.FormatSlotRanges(uncovered), target.Pod)}, true
}
