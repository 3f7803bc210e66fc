package redisadmin

import (
	"cmp"
	"context"
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
	return fmt.Sprintf("%d slots (%s) from %s to %s", len(m.Slots), FormatSlotRanges(nodes.RangesOf(m.Slots)), m.Source, m.Target)
}

// countMovedSlots returns the number of slots moves move.
func countMovedSlots(moves []Move) int {
	n := 0
	for _, m := range moves {
		n += len(m.Slots)
	}
	return n
}

// balanceNode is a master as redis-cli's rebalance sees it.
type balanceNode struct {
	id      string
	ranges  []SlotRange
	count   int   // slots in ranges
	slots   []int // sorted; listed from ranges only once moves are planned
	weight  float32
	balance int
}

// planRebalance computes the moves `redis-cli --cluster rebalance` makes, with the same
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
//     when only pinned slots are left to it).
//
// It fails when a weight is negative or names no master, when the weights add up to 0, or
// when the masters do not serve all 16384 slots between them (redis-cli refuses to
// rebalance a cluster with problems).
func planRebalance(masters []Node, weights map[string]float64, threshold float64, useEmptyMasters bool, pinned []int) ([]Move, error) {
	known := map[string]bool{}
	var owned [SlotCount]bool
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

	over, totalBalance := false, 0
	perWeight := float32(float32(SlotCount) / total)
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

// planReshard computes the moves `redis-cli --cluster reshard --cluster-slots n
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
func planReshard(masters []Node, n int, from []string, to string) ([]Move, error) {
	if n <= 0 || n > SlotCount {
		return nil, fmt.Errorf("while planning the reshard: %d slots is not within 1..%d", n, SlotCount)
	}
	byID := map[string]Node{}
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

// RebalanceOptions tunes Rebalance.
type RebalanceOptions struct {
	// Weights maps a master's node ID (or address) to its weight; a master not listed
	// weighs 1, a weight of 0 empties it (redis-cli's --cluster-weight).
	Weights map[string]float64
	// Threshold is the percentage away from its share a master must be for the cluster to
	// be rebalanced; 0 means DefaultRebalanceThreshold.
	Threshold float64
	// UseEmptyMasters gives slots to masters that have none (--cluster-use-empty-masters).
	UseEmptyMasters bool
	// Move tunes how slots are moved.
	Move MoveOptions
	// Pinned are slots the plan never moves (slots too big for any target, as a previous
	// run held them): their masters give other slots instead.
	Pinned []int
}

// Rebalance reproduces `redis-cli --cluster rebalance`: it loads the cluster through addrs,
// finishes or rolls back any open slot first (Fix), plans with planRebalance and moves the
// slots with runMoves. It refuses when a master cannot be reached or the masters do not
// serve every slot. Running it again after an interruption finishes the job; on a
// balanced cluster it moves nothing.
func (a *Admin) Rebalance(ctx context.Context, addrs []string, opts RebalanceOptions) (MoveStats, error) {
	topo, err := a.readyTopology(ctx, addrs, opts.Move)
	if err != nil {
		return MoveStats{}, fmt.Errorf("while rebalancing: %w", err)
	}
	weights := map[string]float64{}
	for k, w := range opts.Weights {
		n := topo.find(k)
		if n == nil {
			return MoveStats{}, fmt.Errorf("while rebalancing: no such master %s", k)
		}
		weights[n.ID] = w
	}
	threshold := opts.Threshold
	if threshold == 0 {
		threshold = DefaultRebalanceThreshold
	}
	moves, err := planRebalance(topo.masters(), weights, threshold, opts.UseEmptyMasters, opts.Pinned)
	if err != nil {
		return MoveStats{}, fmt.Errorf("while rebalancing: %w", err)
	}
	return a.executeFitted(ctx, topo, moves, opts.Move)
}

// Reshard reproduces `redis-cli --cluster reshard --cluster-slots n --cluster-from <from>
// --cluster-to <to> --cluster-yes`: it loads the cluster through addrs, finishes or rolls
// back any open slot first (Fix), plans with planReshard and moves the slots with
// runMoves. from and to are node IDs or addresses.
//
// Unlike Rebalance, a second run moves n more slots: a caller resuming an interrupted
// Reshard plans the rest itself (or uses runMoves with the same plan, which skips the
// slots already moved).
func (a *Admin) Reshard(ctx context.Context, addrs []string, n int, from []string, to string, opts MoveOptions) (MoveStats, error) {
	topo, err := a.readyTopology(ctx, addrs, opts)
	if err != nil {
		return MoveStats{}, fmt.Errorf("while resharding: %w", err)
	}
	target := topo.find(to)
	if target == nil {
		return MoveStats{}, fmt.Errorf("while resharding: the receiving node %s is not known", to)
	}
	var fromIDs []string
	for _, f := range from {
		if f == "all" {
			fromIDs = append(fromIDs, f)
			continue
		}
		src := topo.find(f)
		if src == nil {
			return MoveStats{}, fmt.Errorf("while resharding: the source node %s is not known", f)
		}
		fromIDs = append(fromIDs, src.ID)
	}
	moves, err := planReshard(topo.masters(), n, fromIDs, target.ID)
	if err != nil {
		return MoveStats{}, fmt.Errorf("while resharding: %w", err)
	}
	return a.executeFitted(ctx, topo, moves, opts)
}

// readyTopology loads the cluster, fixes open slots, and checks every master answers and
// no slot is claimed by two masters, as redis-cli checks before it reshards.
func (a *Admin) readyTopology(ctx context.Context, addrs []string, opts MoveOptions) (*topology, error) {
	topo, err := a.loadTopology(ctx, addrs)
	if err != nil {
		return nil, err
	}
	for _, n := range topo.nodes {
		if n.IsMaster() && !topo.reachable[n.ID] {
			return nil, fmt.Errorf("master %s cannot be reached; refusing to move slots", n.Addr)
		}
	}
	if len(topo.openSlots()) > 0 {
		if _, err := a.fix(ctx, topo, opts); err != nil {
			return nil, err
		}
		if topo, err = a.loadTopology(ctx, addrs); err != nil {
			return nil, err
		}
	}
	var owner [SlotCount]string
	for _, m := range topo.masters() {
		for _, s := range nodes.SlotList(m.Slots) {
			if owner[s] != "" {
				return nil, fmt.Errorf("slot %d is claimed by both %s and %s; the nodes do not agree yet", s, owner[s], m.ID)
			}
			owner[s] = m.ID
		}
	}
	return topo, nil
}

// MoveSlots moves exactly moves, as a planner planned them from the cluster it saw (the
// lifecycle's Step.Moves): it loads the cluster through addrs, closes any open slot first
// (Fix), and runs the part of moves that fits in the targets (fitPlan), a budget's worth.
// It plans nothing itself, so what is executed is what was planned and tested; a slot
// owned by neither its source nor its target since refuses the whole plan, changing
// nothing (the next look plans again).
func (a *Admin) MoveSlots(ctx context.Context, addrs []string, moves []Move, opts MoveOptions) (MoveStats, error) {
	topo, err := a.readyTopology(ctx, addrs, opts)
	if err != nil {
		return MoveStats{Moves: moves}, fmt.Errorf("before moving slots: %w", err)
	}
	return a.executeFitted(ctx, topo, moves, opts)
}

// executeFitted runs the part of moves that fits in the targets (fitPlan) and reports in
// the stats the held slots: those that did not fit, and those a target refused with OOM
// all the same and that went back to their owner (rolledBackHeld).
func (a *Admin) executeFitted(ctx context.Context, topo *topology, moves []Move, opts MoveOptions) (MoveStats, error) {
	fitted, held, facts, err := a.fitPlan(ctx, topo, moves, opts)
	if err != nil {
		return MoveStats{Moves: moves}, err
	}
	stats, err := a.executeMoves(ctx, topo, fitted, opts)
	held = append(held, rolledBackHeld(stats.Fixes, fitted, facts)...)
	stats.Held = held
	return stats, err
}

// rolledBackHeld are the slots of moves that fixes rolled back to their owner (a target
// answered OOM mid-move), as held slots: their size as the fitting measured it (or as the
// fix did, when larger), the target's room before the move. The next plans go around them
// until the room changes (StillHeld). It is pure.
func rolledBackHeld(fixes []SlotFix, moves []Move, facts moveFacts) []HeldSlot {
	target := map[int]string{}
	for _, m := range moves {
		for _, s := range m.Slots {
			target[s] = m.Target
		}
	}
	var out []HeldSlot
	for _, f := range fixes {
		t, planned := target[f.Slot]
		if f.Action != FixRolledBack || !planned {
			continue
		}
		size := facts.Sizes[f.Slot]
		if f.Size.Bytes > size.Bytes {
			size = f.Size
		}
		out = append(out, HeldSlot{Slot: f.Slot, Source: f.Owner, Target: t, Size: size, Room: facts.Rooms[t], RolledBack: true})
	}
	return out
}
