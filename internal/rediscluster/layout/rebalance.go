package layout

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
)

// DefaultRebalanceThreshold is redis-cli's default --cluster-threshold: a rebalance moves
// slots only when some master is more than this many percent away from its share.
const DefaultRebalanceThreshold = 2.0

// Move is one step of a plan: the master Source gives Slots to the master Target (both node
// IDs).
type Move struct {
	Source string
	Target string
	Slots  []int
}

// String describes the move as "N slots from <source> to <target>".
func (m Move) String() string {
	return fmt.Sprintf("%d slots (%s) from %s to %s", len(m.Slots), nodes.FormatSlotRanges(nodes.RangesOf(m.Slots)), m.Source, m.Target)
}

// CountMoved returns the number of slots moves move.
func CountMoved(moves []Move) int {
	n := 0
	for _, m := range moves {
		n += len(m.Slots)
	}
	return n
}

// balanceNode is a master as redis-cli's rebalance sees it.
type balanceNode struct {
	id      string
	ranges  []nodes.SlotRange
	count   int   // slots in ranges
	slots   []int // sorted; listed from ranges only once moves are planned
	weight  float32
	balance int
}

// Rebalance computes the moves `redis-cli --cluster rebalance` makes, with the same
// arithmetic (float32 and all), so the same masters give the same moves:
//
//   - masters are taken in the order given (redis-cli: the node it was pointed at, then the
//     others in that node's CLUSTER NODES order); replicas are skipped, and so are masters
//     without slots unless useEmptyMasters;
//   - a master's weight is weights[ID], 1 when absent; a weight of 0 drains the master;
//   - expected = int(16384 / total weight * weight), balance = slots - expected; if no
//     master is more than threshold percent away from expected (or threshold <= 0, as in
//     redis-cli), there is nothing to do and the plan is empty;
//   - the rounding surplus is taken from the masters with balance <= 0, in order, one slot
//     at a time; masters are sorted by balance (stable), and slots go from the last
//     (most positive) to the first (most negative) until every balance is 0; each step
//     moves the lowest-numbered slots of its source;
//   - a pinned slot is never moved: its master gives its next slots instead (or fewer,
//     when only pinned slots are left to it);
//   - a master in full (its memory is full: it should receive nothing) that would not give
//     slots keeps them and stays out of the balance: the others share the slots left, and
//     no slot goes to it (without this, a plan whose moves into a full master were dropped
//     kept moving rounding slots among the others for ever). redis-cli has no such set.
//
// It fails when a weight is negative or names no master, when the weights add up to 0, or
// when the masters do not serve all 16384 slots between them (redis-cli refuses to
// rebalance a cluster with problems).
func Rebalance(masters []nodes.Node, weights map[string]float64, threshold float64, useEmptyMasters bool, pinned []int, full []string) ([]Move, error) {
	known := map[string]bool{}
	var owned [nodes.SlotCount]bool
	var all []*balanceNode
	for _, n := range masters {
		if !n.IsMaster() {
			continue
		}
		if known[n.ID] {
			return nil, fmt.Errorf("while planning the rebalance: master %s is listed twice", n.ID)
		}
		known[n.ID] = true
		w := float32(1)
		if v, ok := weights[n.ID]; ok {
			if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, fmt.Errorf("while planning the rebalance: weight %v of %s is not a number >= 0", v, n.ID)
			}
			w = float32(v)
		}
		count := 0
		for _, r := range n.Slots {
			for s := r.Start; s <= r.End; s++ {
				if owned[s] {
					return nil, fmt.Errorf("while planning the rebalance: slot %d is served by two masters", s)
				}
				owned[s] = true
			}
			count += r.End - r.Start + 1
		}
		all = append(all, &balanceNode{id: n.ID, ranges: n.Slots, count: count, weight: w})
	}
	for id := range weights {
		if !known[id] {
			return nil, fmt.Errorf("while planning the rebalance: no such master %s", id)
		}
	}
	for s, ok := range owned {
		if !ok {
			return nil, fmt.Errorf("while planning the rebalance: slot %d is served by none of the masters; fix the cluster first", s)
		}
	}
	var involved []*balanceNode
	var total float32
	for _, n := range all {
		if !useEmptyMasters && n.count == 0 {
			continue
		}
		total += n.weight
		involved = append(involved, n)
	}
	if total == 0 {
		return nil, errors.New("while planning the rebalance: the weights of the masters add up to 0")
	}

	involved, perWeight := leaveOutFull(involved, total, full)
	if len(involved) == 0 {
		return nil, nil
	}
	over, totalBalance := false, 0
	for _, n := range involved {
		expected := int(float32(perWeight * n.weight))
		n.balance = n.count - expected
		totalBalance += n.balance
		if threshold > 0 {
			if n.count > 0 {
				errPerc := float32(math.Abs(100 - 100.0*float64(expected)/float64(n.count)))
				if errPerc > float32(threshold) {
					over = true
				}
			} else if expected > 1 {
				over = true
			}
		}
	}
	if !over {
		return nil, nil
	}
	for _, n := range involved {
		n.slots = nodes.SlotList(n.ranges)
	}
	for totalBalance > 0 {
		for _, n := range involved {
			if n.balance <= 0 && totalBalance > 0 {
				n.balance--
				totalBalance--
			}
		}
	}
	sorted := slices.Clone(involved)
	slices.SortStableFunc(sorted, func(x, y *balanceNode) int { return cmp.Compare(x.balance, y.balance) })

	var moves []Move
	for dst, src := 0, len(sorted)-1; dst < src; {
		d, s := sorted[dst], sorted[src]
		num := min(abs(d.balance), abs(s.balance))
		if num > 0 {
			if num > len(s.slots) {
				return nil, fmt.Errorf("while planning the rebalance: %s should give %d slots but serves %d", s.id, num, len(s.slots))
			}
			var taken []int
			s.slots, taken = takeUnpinned(s.slots, num, pinned)
			d.slots = append(d.slots, taken...)
			slices.Sort(d.slots)
			if len(taken) > 0 {
				moves = append(moves, Move{Source: s.id, Target: d.id, Slots: taken})
			}
		}
		d.balance += num
		s.balance -= num
		if d.balance == 0 {
			dst++
		}
		if s.balance == 0 {
			src--
		}
	}
	return moves, nil
}

// takeUnpinned takes the first n slots of slots that are not pinned (fewer when there are
// not so many) and returns the slots left and the slots taken.
func takeUnpinned(slots []int, n int, pinned []int) (left, taken []int) {
	for _, s := range slots {
		if len(taken) < n && !slices.Contains(pinned, s) {
			taken = append(taken, s)
			continue
		}
		left = append(left, s)
	}
	return left, taken
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// Reshard computes the moves `redis-cli --cluster reshard --cluster-slots n
// --cluster-from <from> --cluster-to <to>` makes (clusterManagerComputeReshardTable): the
// sources sorted by slot count, largest first (stable); the first gives ceil(n * its
// share) slots, the others floor(n * their share), in float32 as redis-cli computes it;
// each gives its lowest-numbered slots.
//
// from lists node IDs; empty, or "all" among them, means every master but the target, as
// redis-cli's "all". Where redis-cli's rounding would move fewer than n slots (it then
// silently does), the missing slots are taken from the sources in the same order, so the
// plan always moves exactly n slots.
//
// It fails when n is not within 1..16384, the target or a source is not a master, the
// target is among the sources, or the sources serve fewer than n slots.
func Reshard(masters []nodes.Node, n int, from []string, to string) ([]Move, error) {
	if n <= 0 || n > nodes.SlotCount {
		return nil, fmt.Errorf("while planning the reshard: %d slots is not within 1..%d", n, nodes.SlotCount)
	}
	byID := map[string]nodes.Node{}
	for _, m := range masters {
		if m.IsMaster() {
			byID[m.ID] = m
		}
	}
	if _, ok := byID[to]; !ok {
		return nil, fmt.Errorf("while planning the reshard: the receiving node %s is not known or not a master", to)
	}
	var sources []*balanceNode
	if len(from) == 0 || slices.Contains(from, "all") {
		for _, m := range masters {
			if m.IsMaster() && m.ID != to {
				sources = append(sources, &balanceNode{id: m.ID, slots: nodes.SlotList(m.Slots)})
			}
		}
	} else {
		seen := map[string]bool{}
		for _, id := range from {
			m, ok := byID[id]
			switch {
			case !ok:
				return nil, fmt.Errorf("while planning the reshard: the source node %s is not known or not a master", id)
			case id == to:
				return nil, fmt.Errorf("while planning the reshard: %s cannot be both source and target", id)
			case seen[id]:
				continue
			}
			seen[id] = true
			sources = append(sources, &balanceNode{id: m.ID, slots: nodes.SlotList(m.Slots)})
		}
	}
	total := 0
	for _, s := range sources {
		total += len(s.slots)
	}
	if total < n {
		return nil, fmt.Errorf("while planning the reshard: the sources serve %d slots, fewer than the %d to move", total, n)
	}
	slices.SortStableFunc(sources, func(x, y *balanceNode) int { return cmp.Compare(len(y.slots), len(x.slots)) })

	taken := make([]int, len(sources))
	moved := 0
	for i, s := range sources {
		share := float32(float32(float32(n)/float32(total)) * float32(len(s.slots)))
		limit := int(math.Floor(float64(share)))
		if i == 0 {
			limit = int(math.Ceil(float64(share)))
		}
		for taken[i] < len(s.slots) && taken[i] < limit && moved < n {
			taken[i]++
			moved++
		}
	}
	for i, s := range sources {
		for taken[i] < len(s.slots) && moved < n {
			taken[i]++
			moved++
		}
	}
	var moves []Move
	for i, s := range sources {
		if taken[i] > 0 {
			moves = append(moves, Move{Source: s.id, Target: to, Slots: slices.Clone(s.slots[:taken[i]])})
		}
	}
	return moves, nil
}

// leaveOutFull drops from involved, until none is left to drop, the masters in full whose
// expected count (their weight's share of the slots the others leave) is at least the
// slots they serve: they keep those slots, and the others share the rest. It returns the
// masters left and the slots per weight among them (redis-cli's float32 arithmetic, the
// same as it when no master is dropped).
func leaveOutFull(involved []*balanceNode, total float32, full []string) ([]*balanceNode, float32) {
	slots := nodes.SlotCount
	for {
		perWeight := float32(float32(slots) / total)
		i := slices.IndexFunc(involved, func(n *balanceNode) bool {
			return slices.Contains(full, n.id) && n.count <= int(float32(perWeight*n.weight))
		})
		if i < 0 {
			return involved, perWeight
		}
		n := involved[i]
		involved = slices.Delete(slices.Clone(involved), i, i+1)
		slots -= n.count
		total -= n.weight
		if !slices.ContainsFunc(involved, func(n *balanceNode) bool { return n.weight > 0 }) {
			return nil, 0 // none left that may receive: nothing moves
		}
	}
}
