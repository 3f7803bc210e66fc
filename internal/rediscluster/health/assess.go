package health

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/conn"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/observe"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/recovery"
)

// Health is what clients would see of a cluster, derived from one Snapshot.
type Health struct {
	// SlotsAssigned counts the slots some joined node routes to some master.
	SlotsAssigned int
	// SlotsServed counts the slots a client reaches through any node: every joined node
	// routes the slot to the same master, that master answers and claims it itself.
	SlotsServed int
	// Masters counts the masters that own slots, in the answering owners' own words.
	Masters int
	// Silent lists the pods whose node does not answer; Fresh those that answer without
	// belonging to the cluster; AuthFailed those that refused the password.
	Silent, Fresh, AuthFailed []string
	// FailedIDs counts the node IDs the cluster's tables list that are flagged fail or that
	// no pod answers to.
	FailedIDs int
	// Problems says, in a few words each, what keeps the cluster from being Ready.
	Problems []string
	// Unseparated says which replicas share a Kubernetes node (or zone) with their master
	// when no swap can separate them (see Unseparated); it does not keep the cluster from
	// being Ready, but one node's loss then loses a shard's every copy.
	Unseparated []string
	// Partitions are the masters that answer but are cut off from their peers: an answering
	// master flags them failing, or they flag an answering peer so (found by partitions);
	// DualClaims the slots two answering masters both claim, each in its own view (found by
	// dualClaims); RefusingWrites the masters that refuse writes for want of a replica in
	// time under min-replicas-to-write (see RefusingWrites). Each keeps the cluster from
	// being Ready.
	Partitions     []Partition
	DualClaims     []string
	RefusingWrites []string
	// SettledIn is how long until the most recently started node has settled (0 when all
	// have): the next look should come no later.
	SettledIn time.Duration
}

// writableDelay is how long a restarted Redis master waits before it turns its cluster state
// ok (CLUSTER_WRITABLE_DELAY in cluster_legacy.c).
const writableDelay = 2 * time.Second

// SettleTime is how long after its start a node is not trusted to report its cluster state:
// a restarted node reloads nodes.conf and turns ok after the writable delay, then may flag a
// peer failing, or hear that one was, only within cluster-node-timeout; until then a client
// it answers may still meet CLUSTERDOWN.
func SettleTime(nodeTimeout time.Duration) time.Duration { return nodeTimeout + writableDelay }

// SettleLeft is how long until the node of o is trusted to report its cluster state (0 when
// it is, or its start is unknown): SettleTime after its start, except for a process the
// operator formed the cluster from (its run ID in s.FormedFrom). Such a process knew no peer
// until the operator introduced them all, so it has no view from before a restart that
// gossip must correct; what it reports is as current as a long-running node's. A restart
// changes the run ID, so a node that restarted since the forming settles as any other.
func SettleLeft(s *observe.Snapshot, o *observe.Observation) time.Duration {
	if o.Started.IsZero() || o.RunID() != "" && s.FormedFrom[o.RunID()] {
		return 0
	}
	return max(0, SettleTime(s.NodeTimeout)-s.Now.Sub(o.Started))
}

// HasFailedNodes reports whether a node ID in the cluster's tables is failed or answers nowhere.
func (h Health) HasFailedNodes() bool { return h.FailedIDs > 0 }

// Ready reports whether every client can reach every slot through any node, and every
// node knows every member at its current address.
func (h Health) Ready() bool { return len(h.Problems) == 0 }

// Assess derives the Health of s. A slot counts as served only when its owner answers and
// every answering node routes it there, never from one node's opinion.
func Assess(s observe.Snapshot) Health {
	var h Health
	joined := s.Joined()
	for i := range s.Nodes {
		o := &s.Nodes[i]
		switch {
		case conn.IsAuthError(o.Err):
			h.AuthFailed = append(h.AuthFailed, o.Pod)
			h.Silent = append(h.Silent, o.Pod)
		case !o.Answered():
			h.Silent = append(h.Silent, o.Pod)
		case !o.Joined():
			h.Fresh = append(h.Fresh, o.Pod)
		}
	}
	ids := s.ByID()
	masters := map[string]bool{}
	disagree, unowned := 0, 0
	if routed, agreed := observe.AgreedRoutes(joined); agreed {
		// Every view routes alike: a master serves its slots when it answers as a master.
		for _, n := range routed {
			count := nodes.CountSlots(n.Slots)
			h.SlotsAssigned += count
			o := ids[n.ID]
			if o == nil {
				continue
			}
			self, _ := o.Self()
			served := 0
			if self.IsMaster() && nodes.FormatSlotRanges(self.Slots) == nodes.FormatSlotRanges(n.Slots) {
				served = count
			} else if self.IsMaster() {
				for _, slot := range nodes.SlotList(n.Slots) {
					if nodes.OwnsSlot(self, slot) {
						served++
					}
				}
			}
			if served > 0 {
				h.SlotsServed += served
				masters[self.ID] = true
			}
		}
		unowned = nodes.SlotCount - h.SlotsAssigned
	} else {
		disagree, unowned = servedSlotBySlot(&h, joined, ids, masters)
	}
	h.Masters = len(masters)
	h.Unseparated = recovery.Unseparated(s)
	if len(h.AuthFailed) > 0 {
		h.Problems = append(h.Problems, fmt.Sprintf("%d nodes refuse the password (%s)", len(h.AuthFailed), strings.Join(h.AuthFailed, ", ")))
	}
	if n := len(h.Silent) - len(h.AuthFailed); n > 0 {
		h.Problems = append(h.Problems, fmt.Sprintf("%d nodes do not answer (%s)", n, strings.Join(without(h.Silent, h.AuthFailed), ", ")))
	}
	if len(h.Fresh) > 0 {
		h.Problems = append(h.Problems, fmt.Sprintf("%d nodes are not in the cluster yet (%s)", len(h.Fresh), strings.Join(h.Fresh, ", ")))
	}
	if h.SlotsServed < nodes.SlotCount {
		h.Problems = append(h.Problems, fmt.Sprintf("%d of %d slots are not served (%d unassigned, %d routed differently by different nodes)",
			nodes.SlotCount-h.SlotsServed, nodes.SlotCount, unowned, disagree))
	}
	if extra := recovery.ExtraMasters(s); len(extra) > 0 {
		h.Problems = append(h.Problems, fmt.Sprintf("%d masters serve no slot beyond the %d the spec asks for and are not replicas yet (%s)",
			len(extra), s.Masters, strings.Join(extra, ", ")))
	}
	if a, ok := recovery.Meet(s); ok {
		h.Problems = append(h.Problems, fmt.Sprintf("members do not all know each other at their current addresses (%d introductions missing)", len(a.Commands)))
	}
	failed, open, stateNotOK, syncing := 0, 0, 0, 0
	for _, o := range joined {
		if self, _ := o.Self(); self.Role == nodes.RoleSlave && !o.InSync() {
			syncing++
		}
		if o.Info["cluster_state"] != "ok" {
			stateNotOK++
		}
		if self, _ := o.Self(); self.HasOpenSlots() {
			open++
		}
	}
	for _, k := range s.Cluster() {
		if k.Failed || k.Answers == nil {
			failed++
		}
	}
	h.Partitions, h.DualClaims, h.RefusingWrites = partitions(s), dualClaims(s), RefusingWrites(s)
	h.Problems = append(h.Problems, h.DualClaims...)
	for _, p := range h.Partitions {
		h.Problems = append(h.Problems, p.String())
	}
	if len(h.RefusingWrites) > 0 {
		h.Problems = append(h.Problems, fmt.Sprintf("masters %s refuse writes: no replica acknowledged their stream within min-replicas-max-lag",
			strings.Join(h.RefusingWrites, ", ")))
	}
	suspected := 0
	for _, o := range joined {
		for _, n := range o.View {
			if n.PossiblyFailed && !n.Failed {
				suspected++
			}
		}
	}
	if suspected > 0 {
		h.Problems = append(h.Problems, fmt.Sprintf("%d times a node suspects a peer of failing (fail?)", suspected))
	}
	h.FailedIDs = failed
	if failed > 0 {
		h.Problems = append(h.Problems, fmt.Sprintf("%d node IDs in the cluster's tables are failed or answer nowhere", failed))
	}
	settling := 0
	for _, o := range joined {
		if left := SettleLeft(&s, o); left > 0 {
			settling++
			h.SettledIn = max(h.SettledIn, left)
		}
	}
	if settling > 0 {
		h.Problems = append(h.Problems, fmt.Sprintf("%d nodes started less than %s ago and may still learn of a failing peer (settling)",
			settling, SettleTime(s.NodeTimeout)))
	}
	if stateNotOK > 0 {
		h.Problems = append(h.Problems, fmt.Sprintf("%d nodes report cluster_state other than ok", stateNotOK))
	}
	if syncing > 0 {
		h.Problems = append(h.Problems, fmt.Sprintf("%d replicas have no live, synced link to their master", syncing))
	}
	if open > 0 {
		h.Problems = append(h.Problems, fmt.Sprintf("%d nodes have slots in migrating or importing state", open))
	}
	for i := range s.Nodes {
		// A terminating pod's node answers only until its process stops.
		if s.Nodes[i].Terminating {
			h.Problems = append(h.Problems, "pod "+s.Nodes[i].Pod+" is terminating")
		}
	}
	if len(joined) == 0 && len(h.Problems) == 0 {
		h.Problems = append(h.Problems, "no node belongs to a cluster")
	}
	return h
}

// Lost reports whether the cluster s records was formed and none of its nodes answers with
// cluster state: every member is silent or back empty. Forming a new cluster then would
// silently replace the lost one.
func Lost(s observe.Snapshot) bool { return len(s.Members) > 0 && len(s.Joined()) == 0 }

func without(all, drop []string) []string {
	return slices.DeleteFunc(slices.Clone(all), func(a string) bool { return slices.Contains(drop, a) })
}

// servedSlotBySlot counts, slot by slot, the slots assigned and served (into h) when views
// route differently, and returns how many slots views disagree on and how many none routes.
func servedSlotBySlot(h *Health, joined []*observe.Observation, ids map[string]*observe.Observation, masters map[string]bool) (disagree, unowned int) {
	var owner [nodes.SlotCount]string
	var agreed [nodes.SlotCount]bool
	for i := range agreed {
		agreed[i] = true
	}
	for vi, o := range joined {
		mine := o.Routes()
		for slot := range mine {
			if vi == 0 {
				owner[slot] = mine[slot]
			} else if owner[slot] != mine[slot] {
				agreed[slot] = false
				if owner[slot] == "" {
					owner[slot] = mine[slot]
				}
			}
		}
	}
	disagree, unowned = 0, 0
	for slot := range owner {
		if owner[slot] == "" {
			unowned++
			continue
		}
		h.SlotsAssigned++
		if !agreed[slot] {
			disagree++
			continue
		}
		o := ids[owner[slot]]
		if o == nil {
			continue
		}
		if self, _ := o.Self(); self.IsMaster() && nodes.OwnsSlot(self, slot) {
			h.SlotsServed++
			masters[self.ID] = true
		}
	}
	return disagree, unowned
}
