package execute

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/layout"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
	goredis "github.com/redis/go-redis/v9"
)

// runMoves carries out a plan (from layout.Rebalance, layout.Reshard or built by hand) on
// the cluster reached through addrs, much faster than redis-cli, with the same steps for
// every slot as moveOneSlot and the same guarantees:
//
//   - the moves of one source to one target form a pair; pairs run in parallel, one
//     goroutine each, except that a node never gives slots in one pair while it receives
//     slots in another (a receiving node bumps its config epoch, and a source that bumped
//     its epoch while it still claims a slot handed over could win that slot back);
//   - within a pair, slots are moved SlotBatch at a time, each step pipelined for the whole
//     batch: SETSLOT IMPORTING on the target; SETSLOT MIGRATING and GETKEYSINSLOT on the
//     source; MIGRATE of each slot's keys, each followed by a fresh GETKEYSINSLOT, until
//     every slot of the batch is empty; then SETSLOT NODE on the target, then on the
//     source, then on every other master at once;
//   - SETSLOT NODE is sent only for a slot whose last GETKEYSINSLOT, run after its last
//     MIGRATE, found it empty; a MIGRATE error (BUSYKEY is handled as in moveOneSlot) stops
//     the pair and every other pair after its current batch, and the error is returned;
//     the slots of the failed batch that still hold keys stay open for Fix or a new run.
//
// Before it changes anything it waits, up to 30 s, until every master reports
// cluster_state:ok (a master that just joined refuses keys until then) and no master that
// serves slots shares its config epoch with another (see waitSettled).
//
// runMoves is idempotent and resumable: a slot the target already owns is only
// completed (SETSLOT NODE on a source that still claims it, after checking it holds no
// key), and an open slot is moved on from where it stopped. It refuses the whole plan,
// changing nothing, when a slot is owned by neither its source nor its target, appears
// twice, or a node of the plan cannot be reached or is not a master.
func (a *Admin) runMoves(ctx context.Context, addrs []string, moves []layout.Move, opts MoveOptions) (MoveStats, error) {
	topo, err := a.loadTopology(ctx, addrs)
	if err != nil {
		return MoveStats{Moves: moves}, fmt.Errorf("while moving slots: %w", err)
	}
	return a.executeMoves(ctx, topo, moves, opts)
}

// pair is the work of one source and one target.
type pair struct {
	source, target nodes.Node
	// others are the other reachable masters, told of every new owner.
	others []nodes.Node
	// move lists the slots to move; finish those the target owns already, that the source
	// must still be told of.
	move, finish []int
}

func (a *Admin) executeMoves(ctx context.Context, topo *topology, moves []layout.Move, opts MoveOptions) (MoveStats, error) {
	start := time.Now()
	stats := MoveStats{Moves: moves}
	pairs, err := planPairs(topo, moves)
	if err != nil {
		return stats, fmt.Errorf("while moving slots, nothing was changed: %w", err)
	}
	if err := a.waitSettled(ctx, topo.masters(), true); err != nil {
		return stats, fmt.Errorf("while moving slots, nothing was changed: %w", err)
	}
	m := a.newMover(opts, len(pairs)+2)
	defer m.close()
	err = m.runPairs(ctx, pairs)
	stats.Slots, stats.Keys, stats.Elapsed, stats.Partial = int(m.slots.Load()), m.keys.Load(), time.Since(start), m.partial.Load()
	if err != nil && isOOM(err) {
		// A target refused keys past its maxmemory: close the slots left open now (each
		// rolled back unless the rest fits after all), rather than leave them for a Fix.
		fixes, fixErr := a.closeOpenSlots(ctx, topo.entry, opts)
		stats.Fixes, stats.Elapsed = fixes, time.Since(start)
		err = errors.Join(err, fixErr)
	}
	if err != nil {
		return stats, fmt.Errorf("while moving slots (%d moved, %d open slots closed): %w", stats.Slots, len(stats.Fixes), err)
	}
	return stats, nil
}

// closeOpenSlots loads the cluster again through entry and fixes every open slot.
func (a *Admin) closeOpenSlots(ctx context.Context, entry string, opts MoveOptions) ([]SlotFix, error) {
	topo, err := a.loadTopology(ctx, []string{entry})
	if err != nil {
		return nil, fmt.Errorf("while closing the slots a failed move left open: %w", err)
	}
	return a.fix(ctx, topo, opts)
}

// fitPlan measures what moves would move (measureMoves) and keeps only what fits
// (layout.Fit); the rest is returned as held, with the facts measured.
func (a *Admin) fitPlan(ctx context.Context, topo *topology, moves []layout.Move, opts MoveOptions) ([]layout.Move, []layout.HeldSlot, layout.MoveFacts, error) {
	if len(moves) == 0 {
		return nil, nil, layout.MoveFacts{}, nil
	}
	m := a.newMover(opts, 1)
	defer m.close()
	facts, err := m.measureMoves(ctx, topo, moves)
	if err != nil {
		return nil, nil, facts, fmt.Errorf("while measuring the slots to move, nothing was changed: %w", err)
	}
	fitted, held := layout.Fit(moves, facts)
	return fitted, held, facts, nil
}

// settleTimeout bounds how long moves wait for the masters to settle.
const settleTimeout = 30 * time.Second

// waitStateOK waits until every node reports cluster_state:ok: a node that has just joined
// or restarted refuses MIGRATE (and MIGRATE's RESTORE-ASKING) with CLUSTERDOWN until then.
func (a *Admin) waitStateOK(ctx context.Context, nodes []nodes.Node) error {
	return a.waitSettled(ctx, nodes, false)
}

// waitSettled waits until every node reports cluster_state:ok and, with uniqueEpochs, no
// node that serves slots shares its config epoch with another. Two masters with the same
// epoch are told apart by Redis later, by bumping one of them to a new, highest epoch: if
// that happened to a source between SETSLOT NODE on the target and on the source, the
// source's stale claim would beat the target's and the target would drop the slot's keys.
// Sources never bump their epoch otherwise (a node never gives and receives at once).
func (a *Admin) waitSettled(ctx context.Context, nodes []nodes.Node, uniqueEpochs bool) error {
	ctx, cancel := context.WithTimeout(ctx, settleTimeout)
	defer cancel()
	what := "the nodes to report cluster_state:ok"
	if uniqueEpochs {
		what += " with distinct config epochs"
	}
	return a.Poll(ctx, what, func(ctx context.Context) (bool, string) {
		type master struct {
			addr   string
			serves bool
		}
		byEpoch := map[int64][]master{}
		for _, n := range nodes {
			info, err := a.ClusterInfo(ctx, n.Addr)
			if err != nil {
				return false, err.Error()
			}
			if state := info["cluster_state"]; state != "ok" {
				return false, fmt.Sprintf("%s reports cluster_state:%s", n.Addr, state)
			}
			if !uniqueEpochs {
				continue
			}
			self, _, err := a.Myself(ctx, n.Addr)
			if err != nil {
				return false, err.Error()
			}
			if self.IsMaster() {
				byEpoch[self.ConfigEpoch] = append(byEpoch[self.ConfigEpoch], master{n.Addr, len(self.Slots) > 0})
			}
		}
		for epoch, ms := range byEpoch {
			if len(ms) > 1 && slices.ContainsFunc(ms, func(m master) bool { return m.serves }) {
				return false, fmt.Sprintf("%s and %s share config epoch %d", ms[0].addr, ms[1].addr, epoch)
			}
		}
		return true, ""
	})
}

// planPairs groups moves by source and target and sorts each slot into the ones to move
// and the ones to finish, from the nodes' own views.
func planPairs(topo *topology, moves []layout.Move) ([]*pair, error) {
	byKey := map[[2]string]*pair{}
	var pairs []*pair
	seen := map[int]bool{}
	for _, mv := range moves {
		src, dst := topo.node(mv.Source), topo.node(mv.Target)
		switch {
		case src == nil || dst == nil:
			return nil, fmt.Errorf("move %s: node not in the cluster", mv)
		case src.ID == dst.ID:
			return nil, fmt.Errorf("move %s: source and target are the same node", mv)
		case !topo.reachable[src.ID] || !topo.reachable[dst.ID]:
			return nil, fmt.Errorf("move %s: %s or %s cannot be reached", mv, src.Addr, dst.Addr)
		case !dst.IsMaster():
			return nil, fmt.Errorf("move %s: target %s is not a master", mv, dst.Addr)
		}
		key := [2]string{src.ID, dst.ID}
		p := byKey[key]
		if p == nil {
			p = &pair{source: *src, target: *dst}
			for _, o := range topo.masters() {
				if o.ID != src.ID && o.ID != dst.ID {
					p.others = append(p.others, o)
				}
			}
			byKey[key] = p
			pairs = append(pairs, p)
		}
		for _, s := range mv.Slots {
			if s < 0 || s >= nodes.SlotCount {
				return nil, fmt.Errorf("move %s: %d is not a slot", mv, s)
			}
			if seen[s] {
				return nil, fmt.Errorf("slot %d is moved twice", s)
			}
			seen[s] = true
			srcOwns := src.IsMaster() && nodes.OwnsSlot(*src, s)
			switch {
			case nodes.OwnsSlot(*dst, s):
				if srcOwns || src.Migrating[s] != "" {
					p.finish = append(p.finish, s)
				}
			case srcOwns:
				p.move = append(p.move, s)
			default:
				return nil, fmt.Errorf("move %s: slot %d is served by neither %s nor %s", mv, s, src.Addr, dst.Addr)
			}
		}
	}
	return pairs, nil
}

// runPairs runs the pairs in parallel, never letting a node give and receive at once.
// After an error it starts no new pair and asks the running ones to stop after their batch.
func (m *mover) runPairs(ctx context.Context, pairs []*pair) error {
	type result struct {
		p   *pair
		err error
	}
	done := make(chan result)
	giving, taking := map[string]int{}, map[string]int{}
	var stop atomic.Bool
	var errs []error
	pending, running := pairs, 0
	for {
		if !stop.Load() {
			rest := pending[:0]
			for _, p := range pending {
				if taking[p.source.ID] > 0 || giving[p.target.ID] > 0 {
					rest = append(rest, p)
					continue
				}
				giving[p.source.ID]++
				taking[p.target.ID]++
				running++
				go func() { done <- result{p, m.runPair(ctx, p, &stop)} }()
			}
			pending = rest
		}
		if running == 0 {
			break
		}
		r := <-done
		running--
		giving[r.p.source.ID]--
		taking[r.p.target.ID]--
		if r.err != nil {
			errs = append(errs, r.err)
			stop.Store(true)
		}
	}
	if len(pending) > 0 && len(errs) > 0 {
		errs = append(errs, fmt.Errorf("%d source/target pairs were not started", len(pending)))
	}
	return errors.Join(errs...)
}

// runPair moves the slots of one pair, batch by batch.
func (m *mover) runPair(ctx context.Context, p *pair, stop *atomic.Bool) error {
	wrap := func(err error) error {
		return fmt.Errorf("while moving slots from %s to %s: %w", p.source.Addr, p.target.Addr, err)
	}
	if len(p.finish) > 0 {
		if err := m.fenced(ctx); err != nil {
			return wrap(err)
		}
		if err := underWay(ctx, func(ctx context.Context) error { return m.finishBatch(ctx, p, p.finish) }); err != nil {
			return wrap(err)
		}
	}
	for start := 0; start < len(p.move); start += m.opts.SlotBatch {
		if err := ctx.Err(); err != nil {
			return wrap(err)
		}
		if stop.Load() || m.outOfBudget() {
			return nil
		}
		if err := m.fenced(ctx); err != nil {
			return wrap(err)
		}
		batch := p.move[start:min(start+m.opts.SlotBatch, len(p.move))]
		if err := underWay(ctx, func(ctx context.Context) error { return m.moveBatch(ctx, p, batch) }); err != nil {
			return wrap(err)
		}
	}
	return nil
}

// pipelined runs fill's commands on the node at addr in one round trip and returns them;
// each command carries its own error.
func (m *mover) pipelined(ctx context.Context, addr string, fill func(p goredis.Pipeliner)) []goredis.Cmder {
	cmds, _ := m.client(addr).Pipelined(ctx, func(p goredis.Pipeliner) error {
		fill(p)
		return nil
	})
	return cmds
}

// moveBatch moves a batch of slots of one pair.
func (m *mover) moveBatch(ctx context.Context, p *pair, slots []int) error {
	src, dst := p.source, p.target
	cmds := m.pipelined(ctx, dst.Addr, func(pl goredis.Pipeliner) {
		for _, s := range slots {
			pl.Do(ctx, "CLUSTER", "SETSLOT", s, "IMPORTING", src.ID)
		}
	})
	for i, c := range cmds {
		if err := c.Err(); err != nil {
			return fmt.Errorf("while running CLUSTER SETSLOT %d IMPORTING on %s: %w", slots[i], dst.Addr, err)
		}
	}
	cmds = m.pipelined(ctx, src.Addr, func(pl goredis.Pipeliner) {
		for _, s := range slots {
			pl.Do(ctx, "CLUSTER", "SETSLOT", s, "MIGRATING", dst.ID)
			pl.Do(ctx, "CLUSTER", "GETKEYSINSLOT", s, m.opts.Pipeline)
		}
	})
	keys := make([][]string, len(slots))
	for i := range slots {
		if err := cmds[2*i].Err(); err != nil {
			return fmt.Errorf("while running CLUSTER SETSLOT %d MIGRATING on %s: %w", slots[i], src.Addr, err)
		}
		var err error
		if keys[i], err = cmds[2*i+1].(*goredis.Cmd).StringSlice(); err != nil {
			return fmt.Errorf("while running CLUSTER GETKEYSINSLOT %d on %s: %w", slots[i], src.Addr, err)
		}
	}
	var failure error
	for failure == nil {
		var busy []int // indexes of slots with keys left
		for i := range slots {
			if len(keys[i]) > 0 {
				busy = append(busy, i)
			}
		}
		if len(busy) == 0 {
			break
		}
		failure = m.migrateRound(ctx, p, slots, keys, busy)
	}
	var empty []int
	for i, s := range slots {
		if len(keys[i]) == 0 {
			empty = append(empty, s)
		}
	}
	// A replica fenced off while its keys moved (it lost the lease meanwhile) leaves the
	// slots open for the leader's Fix rather than hand them over under its nose.
	if err := m.fenced(ctx); err != nil {
		return errors.Join(failure, err)
	}
	if err := m.assignBatch(ctx, p, empty); err != nil {
		return errors.Join(failure, err)
	}
	return failure
}

// migrateRound sends, in one pipeline, a MIGRATE of the keys found in each busy slot, each
// followed by a GETKEYSINSLOT of that slot, and updates keys with what is left. It returns
// the first MIGRATE error it could not resolve; the keys of that slot are then left as
// they were, so the slot is never assigned.
func (m *mover) migrateRound(ctx context.Context, p *pair, slots []int, keys [][]string, busy []int) error {
	src, dst := p.source, p.target
	var buildErr error
	cmds := m.pipelined(ctx, src.Addr, func(pl goredis.Pipeliner) {
		for _, i := range busy {
			args, err := m.migrateArgs(dst, keys[i], false)
			if err != nil {
				buildErr = err
				return
			}
			pl.Do(ctx, args...)
			pl.Do(ctx, "CLUSTER", "GETKEYSINSLOT", slots[i], m.opts.Pipeline)
		}
	})
	if buildErr != nil {
		return buildErr
	}
	var failure error
	for j, i := range busy {
		migrateErr := cmds[2*j].Err()
		if isBusyKey(migrateErr) && failure == nil {
			migrateErr = m.resolveBusy(ctx, slots[i], src, dst, keys[i])
			if migrateErr == nil {
				// The GETKEYSINSLOT of the pipeline ran before the retry: ask again.
				m.keys.Add(int64(len(keys[i])))
				left, err := m.getKeys(ctx, src, slots[i], m.opts.Pipeline)
				if err != nil {
					failure = err
					continue
				}
				keys[i] = left
				continue
			}
		}
		if migrateErr != nil {
			if failure == nil {
				failure = fmt.Errorf("while migrating %d keys of slot %d (the slot stays open): %w", len(keys[i]), slots[i], migrateErr)
			}
			continue
		}
		m.keys.Add(int64(len(keys[i])))
		left, err := cmds[2*j+1].(*goredis.Cmd).StringSlice()
		if err != nil {
			if failure == nil {
				failure = fmt.Errorf("while running CLUSTER GETKEYSINSLOT %d on %s: %w", slots[i], src.Addr, err)
			}
			continue
		}
		keys[i] = left
	}
	return failure
}

// assignBatch sends SETSLOT NODE for every slot: to the target first, then to the source,
// then to every other master at once, each as one pipeline.
func (m *mover) assignBatch(ctx context.Context, p *pair, slots []int) error {
	if len(slots) == 0 {
		return nil
	}
	if err := m.setSlotNodes(ctx, p.target, slots, p.target.ID); err != nil {
		return err
	}
	if err := m.setSlotNodes(ctx, p.source, slots, p.target.ID); err != nil {
		return err
	}
	// The slots changed hands; the other masters would learn it from the target anyway.
	m.slots.Add(int64(len(slots)))
	return m.tellOthers(ctx, p, slots)
}

// tellOthers sends SETSLOT NODE for every slot to every other master, in parallel.
func (m *mover) tellOthers(ctx context.Context, p *pair, slots []int) error {
	errs := make([]error, len(p.others))
	var wg sync.WaitGroup
	for i, o := range p.others {
		wg.Go(func() { errs[i] = m.setSlotNodes(ctx, o, slots, p.target.ID) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// setSlotNodes runs CLUSTER SETSLOT <slot> NODE <id> for every slot on n in one pipeline.
// A node that answers it is no longer a master has given its last slot away: not an error.
func (m *mover) setSlotNodes(ctx context.Context, n nodes.Node, slots []int, id string) error {
	cmds := m.pipelined(ctx, n.Addr, func(pl goredis.Pipeliner) {
		for _, s := range slots {
			pl.Do(ctx, "CLUSTER", "SETSLOT", s, "NODE", id)
		}
	})
	for i, c := range cmds {
		if err := c.Err(); err != nil && !isNotMaster(err) {
			return fmt.Errorf("while running CLUSTER SETSLOT %d NODE %s on %s: %w", slots[i], id, n.Addr, err)
		}
	}
	return nil
}

// finishBatch completes slots the target already owns: after checking the source holds no
// key of them, SETSLOT NODE on the source, then on the other masters.
func (m *mover) finishBatch(ctx context.Context, p *pair, slots []int) error {
	cmds := m.pipelined(ctx, p.source.Addr, func(pl goredis.Pipeliner) {
		for _, s := range slots {
			pl.Do(ctx, "CLUSTER", "COUNTKEYSINSLOT", s)
		}
	})
	for i, c := range cmds {
		n, err := c.(*goredis.Cmd).Int64()
		if err != nil {
			return fmt.Errorf("while running CLUSTER COUNTKEYSINSLOT %d on %s: %w", slots[i], p.source.Addr, err)
		}
		if n > 0 {
			return fmt.Errorf("%s owns slot %d but %s still holds %d keys of it; run Fix", p.target.Addr, slots[i], p.source.Addr, n)
		}
	}
	if err := m.setSlotNodes(ctx, p.source, slots, p.target.ID); err != nil {
		return err
	}
	m.slots.Add(int64(len(slots)))
	return m.tellOthers(ctx, p, slots)
}
