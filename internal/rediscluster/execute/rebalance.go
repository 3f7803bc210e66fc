package execute

import (
	"context"
	"fmt"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/layout"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
)

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
// finishes or rolls back any open slot first (Fix), plans with layout.Rebalance and moves the
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
		threshold = layout.DefaultRebalanceThreshold
	}
	moves, err := layout.Rebalance(topo.masters(), weights, threshold, opts.UseEmptyMasters, opts.Pinned, nil)
	if err != nil {
		return MoveStats{}, fmt.Errorf("while rebalancing: %w", err)
	}
	return a.executeFitted(ctx, topo, moves, opts.Move)
}

// Reshard reproduces `redis-cli --cluster reshard --cluster-slots n --cluster-from <from>
// --cluster-to <to> --cluster-yes`: it loads the cluster through addrs, finishes or rolls
// back any open slot first (Fix), plans with layout.Reshard and moves the slots with
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
	moves, err := layout.Reshard(topo.masters(), n, fromIDs, target.ID)
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
	var owner [nodes.SlotCount]string
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
func (a *Admin) MoveSlots(ctx context.Context, addrs []string, moves []layout.Move, opts MoveOptions) (MoveStats, error) {
	topo, err := a.readyTopology(ctx, addrs, opts)
	if err != nil {
		return MoveStats{Moves: moves}, fmt.Errorf("before moving slots: %w", err)
	}
	return a.executeFitted(ctx, topo, moves, opts)
}

// executeFitted runs the part of moves that fits in the targets (fitPlan) and reports in
// the stats the held slots: those that did not fit, and those a target refused with OOM
// all the same and that went back to their owner (rolledBackHeld).
func (a *Admin) executeFitted(ctx context.Context, topo *topology, moves []layout.Move, opts MoveOptions) (MoveStats, error) {
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
// fix did, when larger), and the room the fitting counted on for them: the target's room
// before the move less what the plan sent it before that slot (a slot late in a large move
// met a target nearly as full as the estimate allowed, not an empty one). The next plans
// go around them until a master has more room than that (StillHeld). It is pure.
func rolledBackHeld(fixes []SlotFix, moves []layout.Move, facts layout.MoveFacts) []layout.HeldSlot {
	target := map[int]string{}
	left := map[int]int64{} // the target's room the fitting counted on when it admitted the slot
	charged := map[string]int64{}
	for _, m := range moves {
		for _, s := range m.Slots {
			target[s] = m.Target
			left[s] = max(facts.Rooms[m.Target].Bytes-charged[m.Target], 0)
			charged[m.Target] += facts.Sizes[s].Bytes
		}
	}
	var out []layout.HeldSlot
	for _, f := range fixes {
		t, planned := target[f.Slot]
		if f.Action != FixRolledBack || !planned {
			continue
		}
		size := facts.Sizes[f.Slot]
		if f.Size.Bytes > size.Bytes {
			size = f.Size
		}
		room := facts.Rooms[t]
		room.Bytes = left[f.Slot]
		out = append(out, layout.HeldSlot{Slot: f.Slot, Source: f.Owner, Target: t, Size: size, Room: room, RolledBack: true})
	}
	return out
}
