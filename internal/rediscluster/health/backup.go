package health

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/observe"
)

// ShardSource is the node one shard's snapshot is taken from.
type ShardSource struct {
	// MasterID is the shard's master and Slots the slots it serves; MasterAddr is the
	// master's address, "" when it does not answer.
	MasterID, MasterAddr string
	Slots                []nodes.SlotRange
	// Pod, Addr and NodeID are the node to ask; Replica is true when it is a replica of the
	// master (in sync with it), false when it is the master itself.
	Pod, Addr, NodeID string
	Replica           bool
}

// SlotMap is a cluster's masters by node ID with the slots each serves, as every joined node
// routes them.
type SlotMap map[string][]nodes.SlotRange

// String lists the masters in slot order, "id:0-5460 id:5461-10922 ...".
func (m SlotMap) String() string {
	ids := m.masters()
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = nodes.ShortID(id) + ":" + nodes.FormatSlotRanges(m[id])
	}
	return strings.Join(parts, " ")
}

// Equal reports whether two slot maps give every slot to the same master.
func (m SlotMap) Equal(o SlotMap) bool {
	if len(m) != len(o) {
		return false
	}
	for id, ranges := range m {
		if !slices.Equal(ranges, o[id]) {
			return false
		}
	}
	return true
}

// masters are the map's master IDs in the order of their first slot.
func (m SlotMap) masters() []string {
	ids := make([]string, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b string) int { return m[a][0].Start - m[b][0].Start })
	return ids
}

// StableSlotMap returns the slot map of a cluster a backup can be taken of: Ready (every
// client reaches every slot through any node), no slot being moved, every joined node
// routing every slot alike, and every master answering and flagged by none. Otherwise it
// says why not. It checks the views itself rather than trusting h alone: an open slot or a
// split view must never reach a manifest.
func StableSlotMap(s observe.Snapshot, h Health) (SlotMap, error) {
	if !h.Ready() {
		return nil, fmt.Errorf("the cluster is not Ready: %s", strings.Join(h.Problems, "; "))
	}
	joined := s.Joined()
	if len(joined) == 0 {
		return nil, errors.New("no node of the cluster answers")
	}
	var first SlotMap
	for _, o := range joined {
		m := SlotMap{}
		for _, n := range o.View {
			if n.HasOpenSlots() {
				return nil, fmt.Errorf("slots are being moved (node %s migrates or imports slots): a backup waits for the slot map to be stable", nodes.ShortID(n.ID))
			}
			if n.IsMaster() && len(n.Slots) > 0 {
				m[n.ID] = nodes.MergeSlots(slices.Clone(n.Slots))
			}
		}
		if first == nil {
			first = m
		} else if !first.Equal(m) {
			return nil, fmt.Errorf("nodes disagree on the slot map (%s sees %s, %s sees %s)", joined[0].Pod, first, o.Pod, m)
		}
	}
	ids := s.ByID()
	for _, o := range joined {
		for _, n := range o.View {
			if _, master := first[n.ID]; master && (n.Failed || n.PossiblyFailed || ids[n.ID] == nil) {
				return nil, fmt.Errorf("master %s is failing or silent: a failover may change the slot map", nodes.ShortID(n.ID))
			}
		}
	}
	return first, nil
}

// BackupSources picks, for each master of a stable slot map, the node its shard's snapshot
// is taken from: the replica of it that is connected and in sync (link up, no sync under way)
// with the highest replication offset, so the master's fork does not add to its load; the
// master itself when it has none.
func BackupSources(s observe.Snapshot, m SlotMap) []ShardSource {
	ids := s.ByID()
	var out []ShardSource
	for _, master := range m.masters() {
		src := ShardSource{MasterID: master, Slots: m[master], NodeID: master}
		if o := ids[master]; o != nil {
			src.Pod, src.Addr, src.MasterAddr = o.Pod, o.Addr, o.Addr
		}
		best := int64(-1)
		for _, o := range s.Answering() {
			self, _ := o.Self()
			if self.IsMaster() || self.MasterID != master || self.Failed || !o.InSync() {
				continue
			}
			if off, _ := strconv.ParseInt(o.Replication["slave_repl_offset"], 10, 64); off > best {
				best = off
				src.Pod, src.Addr, src.NodeID, src.Replica = o.Pod, o.Addr, self.ID, true
			}
		}
		out = append(out, src)
	}
	return out
}
