package execute

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/layout"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
	goredis "github.com/redis/go-redis/v9"
)

// Fix actions, as reported in SlotFix.Action.
const (
	// FixFinished: the interrupted move was carried on to its target.
	FixFinished = "finished"
	// FixRolledBack: the slot stays with its owner; keys that had moved are moved back.
	FixRolledBack = "rolled back"
	// FixClosed: the slot was only marked open somewhere; the mark was cleared.
	FixClosed = "closed"
	// FixKeptOpen: neither the target has room for the keys left on the owner nor the owner
	// for those on the target (closeWay): the slot is left open, and Fix fails saying so.
	FixKeptOpen = "kept open"
)

// SlotFix is what Fix did to one open slot.
type SlotFix struct {
	// Slot is the hash slot.
	Slot int
	// Action is FixFinished, FixRolledBack or FixClosed.
	Action string
	// Owner is the ID of the master that serves the slot afterwards.
	Owner string
	// Keys is the number of keys migrated.
	Keys int64
	// Detail says what was found.
	Detail string
	// Target is the node the slot was moving to, and Size the keys of the slot (on both
	// sides) as measured before it was closed, when a half-moved slot was (closeHalfMoved).
	Target string
	Size   layout.SlotSize
}

// Fix closes every open slot (a slot in migrating or importing state on some master) of
// the cluster reached through addrs, the way `redis-cli --cluster fix` does
// (clusterManagerFixOpenSlot), so that no key is lost. For each open slot:
//
//   - the owner migrates it to a target that holds keys of it: the move is finished
//     (moveOneSlot from the owner to that target) when the keys left on the owner fit in
//     the target's room (closeWay), else, or when the target refuses them with OOM all
//     the same, it is rolled back: the keys that moved go back to the owner (rollBack);
//   - the owner migrates it to a target that holds none: the move is rolled back, race
//     free: IMPORTING is cleared on the target first (from then on it refuses the slot's
//     keys), its key count is checked again (if a client wrote one meanwhile the move is
//     finished instead), then MIGRATING is cleared on the owner. redis-cli finishes here
//     too; rolling back moves nothing;
//   - the owner is not migrating it, and one importing node holds keys of it (the owner's
//     migrating state was lost, or the source failed over to a replica): the move is
//     finished towards that node;
//   - the owner is not migrating it, and several nodes hold keys of it: as redis-cli's
//     case 2, their keys are moved back to the owner and their state cleared;
//   - the owner is not migrating it and no other node holds keys: the importing marks, and
//     the migrating mark of a former owner that learnt the new owner by gossip before it
//     was told by SETSLOT NODE, are cleared (redis-cli's cases 2 and 4 with nothing to
//     move);
//   - both the target and the source claim it, the source migrating it to the target and
//     holding no key: the move passed its commit point and is finished (SETSLOT NODE);
//   - no reachable master claims it and one node imports it from a source the cluster
//     flags as failed (or forgot): the source is gone, so the importing node takes the
//     slot (SETSLOT NODE on it, then on the other masters); keys only the dead source held
//     are gone with it, as they would be without Fix;
//   - the owner migrates it to a target the cluster flags as failed (or forgot): the move
//     is rolled back on the owner.
//
// Anything else (several claimed owners with keys, a target or source that is unreachable
// but not flagged failed) is left alone and reported in the error; redis-cli too gives up
// on most of these ("can't fix this slot yet"). A key found on both nodes is handled as in
// moveOneSlot: never overwritten with a different value.
//
// Fix is idempotent: on a cluster without open slots it does nothing.
func (a *Admin) Fix(ctx context.Context, addrs []string, opts MoveOptions) ([]SlotFix, error) {
	topo, err := a.loadTopology(ctx, addrs)
	if err != nil {
		return nil, fmt.Errorf("while fixing open slots: %w", err)
	}
	return a.fix(ctx, topo, opts)
}

func (a *Admin) fix(ctx context.Context, topo *topology, opts MoveOptions) ([]SlotFix, error) {
	open := slices.Compact(slices.Sorted(slices.Values(append(topo.openSlots(), topo.strayed()...))))
	if len(open) == 0 {
		return nil, nil
	}
	if err := a.waitSettled(ctx, topo.masters(), true); err != nil {
		return nil, fmt.Errorf("while fixing open slots, nothing was changed: %w", err)
	}
	m := a.newMover(opts, 2)
	defer m.close()
	counts, err := m.countKeys(ctx, topo.masters(), open)
	if err != nil {
		return nil, fmt.Errorf("while fixing open slots: %w", err)
	}
	var fixes []SlotFix
	var errs []error
	for _, s := range open {
		if ctx.Err() != nil {
			errs = append(errs, fmt.Errorf("stopped before slot %d: %w", s, ctx.Err()))
			break
		}
		if err := m.fenced(ctx); err != nil {
			errs = append(errs, fmt.Errorf("stopped before slot %d: %w", s, err))
			break
		}
		var f SlotFix
		err := underWay(ctx, func(ctx context.Context) (err error) {
			f, err = m.fixSlot(ctx, topo, s, counts)
			return err
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("slot %d: %w", s, err))
			if ctx.Err() != nil {
				break
			}
			continue
		}
		fixes = append(fixes, f)
	}
	if len(errs) > 0 {
		return fixes, fmt.Errorf("while fixing open slots (%d fixed): %w", len(fixes), errors.Join(errs...))
	}
	return fixes, nil
}

// countKeys runs CLUSTER COUNTKEYSINSLOT for every slot on every master, one pipeline per
// master, and returns counts[node ID][slot].
func (m *mover) countKeys(ctx context.Context, masters []nodes.Node, slots []int) (map[string]map[int]int64, error) {
	counts := map[string]map[int]int64{}
	for _, n := range masters {
		cmds := m.pipelined(ctx, n.Addr, func(pl goredis.Pipeliner) {
			for _, s := range slots {
				pl.Do(ctx, "CLUSTER", "COUNTKEYSINSLOT", s)
			}
		})
		counts[n.ID] = map[int]int64{}
		for i, c := range cmds {
			v, err := c.(*goredis.Cmd).Int64()
			if err != nil {
				return nil, fmt.Errorf("while running CLUSTER COUNTKEYSINSLOT %d on %s: %w", slots[i], n.Addr, err)
			}
			counts[n.ID][slots[i]] = v
		}
	}
	return counts, nil
}

// countOne runs CLUSTER COUNTKEYSINSLOT on n.
func (m *mover) countOne(ctx context.Context, n nodes.Node, slot int) (int64, error) {
	v, err := m.client(n.Addr).Do(ctx, "CLUSTER", "COUNTKEYSINSLOT", slot).Int64()
	if err != nil {
		return 0, fmt.Errorf("while running CLUSTER COUNTKEYSINSLOT %d on %s: %w", slot, n.Addr, err)
	}
	return v, nil
}

// othersThan returns the reachable masters other than the given ones.
func othersThan(topo *topology, ids ...string) []nodes.Node {
	var out []nodes.Node
	for _, n := range topo.masters() {
		if !slices.Contains(ids, n.ID) {
			out = append(out, n)
		}
	}
	return out
}

// gone reports whether the node with id is forgotten or flagged failed by the cluster.
func gone(topo *topology, id string) bool {
	n := topo.node(id)
	return n == nil || (!topo.reachable[id] && n.Failed)
}

// fixSlot fixes one open slot; see Fix.
func (m *mover) fixSlot(ctx context.Context, topo *topology, s int, counts map[string]map[int]int64) (SlotFix, error) {
	masters := topo.masters()
	var owners, importing []nodes.Node
	for _, n := range masters {
		if nodes.OwnsSlot(n, s) {
			owners = append(owners, n)
		}
		if n.Importing[s] != "" {
			importing = append(importing, n)
		}
	}
	switch len(owners) {
	case 1:
		owner := owners[0]
		if tid := owner.Migrating[s]; tid != "" {
			return m.fixMigrating(ctx, topo, s, owner, tid, importing, counts)
		}
		return m.fixImporting(ctx, topo, s, owner, importing, counts)
	case 0:
		if len(importing) == 0 {
			return m.fixStrayed(ctx, topo, s, counts)
		}
		return m.fixOrphan(ctx, topo, s, importing)
	case 2:
		src, dst := owners[0], owners[1]
		if dst.Migrating[s] == src.ID {
			src, dst = dst, src
		}
		if src.Migrating[s] == dst.ID && counts[src.ID][s] == 0 {
			if err := m.setSlotNodes(ctx, src, []int{s}, dst.ID); err != nil {
				return SlotFix{}, err
			}
			others := othersThan(topo, src.ID, dst.ID)
			if err := m.tellOthers(ctx, &pair{source: src, target: dst, others: others}, []int{s}); err != nil {
				return SlotFix{}, err
			}
			return SlotFix{Slot: s, Action: FixFinished, Owner: dst.ID,
				Detail: fmt.Sprintf("%s owned it already, %s still migrating it without keys", dst.Addr, src.Addr)}, nil
		}
	}
	var names []string
	for _, o := range owners {
		names = append(names, o.Addr)
	}
	return SlotFix{}, fmt.Errorf("claimed by %d masters (%s); not fixed", len(owners), strings.Join(names, ", "))
}

// fixMigrating fixes a slot its owner migrates to the node with ID tid.
func (m *mover) fixMigrating(ctx context.Context, topo *topology, s int, owner nodes.Node, tid string,
	importing []nodes.Node, counts map[string]map[int]int64) (SlotFix, error) {
	target := topo.node(tid)
	if target == nil || gone(topo, tid) {
		if err := m.setSlot(ctx, owner, s, "STABLE", ""); err != nil {
			return SlotFix{}, err
		}
		if err := m.closeEmptyImporters(ctx, s, importing, "", counts); err != nil {
			return SlotFix{}, err
		}
		return SlotFix{Slot: s, Action: FixRolledBack, Owner: owner.ID,
			Detail: fmt.Sprintf("%s migrated it to %s, which is gone", owner.Addr, tid)}, nil
	}
	if !topo.reachable[tid] || !target.IsMaster() {
		return SlotFix{}, fmt.Errorf("%s migrates it to %s, which cannot be reached or is not a master; not fixed", owner.Addr, target.Addr)
	}
	if err := m.closeEmptyImporters(ctx, s, importing, tid, counts); err != nil {
		return SlotFix{}, err
	}
	finish := func(detail string) (SlotFix, error) {
		keys, err := m.moveSlot(ctx, s, owner, *target, othersThan(topo, owner.ID, tid))
		if err != nil {
			return SlotFix{}, err
		}
		return SlotFix{Slot: s, Action: FixFinished, Owner: tid, Keys: keys, Detail: detail}, nil
	}
	if n := counts[tid][s]; n > 0 {
		return m.closeHalfMoved(ctx, s, owner, *target, finish)
	}
	// Roll back: once the target no longer imports, it refuses the slot's keys, so the
	// count read after that is final.
	if target.Importing[s] != "" {
		if err := m.setSlot(ctx, *target, s, "STABLE", ""); err != nil {
			return SlotFix{}, err
		}
	}
	n, err := m.countOne(ctx, *target, s)
	if err != nil {
		return SlotFix{}, err
	}
	if n > 0 {
		return finish(fmt.Sprintf("%s migrating it to %s, which received %d keys while it was being fixed", owner.Addr, target.Addr, n))
	}
	if err := m.setSlot(ctx, owner, s, "STABLE", ""); err != nil {
		return SlotFix{}, err
	}
	return SlotFix{Slot: s, Action: FixRolledBack, Owner: owner.ID,
		Detail: fmt.Sprintf("%s migrating it to %s, which holds no key of it", owner.Addr, target.Addr)}, nil
}

// closeEmptyImporters clears the importing state of every importing node but keep; one
// that holds keys is an error.
func (m *mover) closeEmptyImporters(ctx context.Context, s int, importing []nodes.Node, keep string, counts map[string]map[int]int64) error {
	for _, n := range importing {
		if n.ID == keep {
			continue
		}
		if c := counts[n.ID][s]; c > 0 {
			return fmt.Errorf("%s imports it and holds %d keys of it, but the owner migrates it elsewhere; not fixed", n.Addr, c)
		}
		if err := m.setSlot(ctx, n, s, "STABLE", ""); err != nil {
			return err
		}
	}
	return nil
}

// fixImporting fixes a slot its owner does not migrate but other masters import, hold keys
// of, or still migrate (a source that was told the new owner by gossip before it was told
// by SETSLOT NODE).
func (m *mover) fixImporting(ctx context.Context, topo *topology, s int, owner nodes.Node, importing []nodes.Node,
	counts map[string]map[int]int64) (SlotFix, error) {
	var holders, stale []nodes.Node
	for _, n := range topo.masters() {
		switch {
		case n.ID == owner.ID:
		case counts[n.ID][s] > 0:
			holders = append(holders, n)
		case n.Migrating[s] != "":
			stale = append(stale, n)
		}
	}
	clear := func(nodes ...[]nodes.Node) error {
		for _, list := range nodes {
			for _, n := range list {
				if err := m.setSlot(ctx, n, s, "STABLE", ""); err != nil {
					return err
				}
			}
		}
		return nil
	}
	switch {
	case len(holders) == 0:
		if err := clear(importing, stale); err != nil {
			return SlotFix{}, err
		}
		return SlotFix{Slot: s, Action: FixClosed, Owner: owner.ID, Detail: "open on nodes that hold no key of it"}, nil
	case len(holders) == 1 && holders[0].Importing[s] != "":
		target := holders[0]
		if err := m.closeEmptyImporters(ctx, s, importing, target.ID, counts); err != nil {
			return SlotFix{}, err
		}
		if err := clear(stale); err != nil {
			return SlotFix{}, err
		}
		keys, err := m.moveSlot(ctx, s, owner, target, othersThan(topo, owner.ID, target.ID))
		if err != nil {
			return SlotFix{}, err
		}
		return SlotFix{Slot: s, Action: FixFinished, Owner: target.ID, Keys: keys,
			Detail: fmt.Sprintf("%s imports it from %s with %d keys, %s is not migrating it",
				target.Addr, target.Importing[s], counts[target.ID][s], owner.Addr)}, nil
	}
	// redis-cli's case 2: move every holder's keys to the owner.
	var moved int64
	for _, n := range holders {
		if n.Importing[s] == "" && n.Migrating[s] == "" {
			// MIGRATE works on a node's own keys only while the slot is open there.
			if err := m.setSlot(ctx, n, s, "IMPORTING", owner.ID); err != nil {
				return SlotFix{}, err
			}
		}
		keys, err := m.migrateKeys(ctx, s, n, owner)
		moved += keys
		if err != nil {
			return SlotFix{}, err
		}
	}
	if err := clear(importing, holders, stale); err != nil {
		return SlotFix{}, err
	}
	if err := m.tellOthers(ctx, &pair{target: owner, others: othersThan(topo, owner.ID)}, []int{s}); err != nil {
		return SlotFix{}, err
	}
	return SlotFix{Slot: s, Action: FixRolledBack, Owner: owner.ID, Keys: moved,
		Detail: fmt.Sprintf("keys of it on %d nodes besides its owner %s", len(holders), owner.Addr)}, nil
}

// fixOrphan fixes an open slot no reachable master claims.
func (m *mover) fixOrphan(ctx context.Context, topo *topology, s int, importing []nodes.Node) (SlotFix, error) {
	if len(importing) != 1 {
		return SlotFix{}, fmt.Errorf("no reachable master serves it and %d nodes import it; not fixed", len(importing))
	}
	target := importing[0]
	for _, n := range topo.nodes {
		if nodes.OwnsSlot(n, s) && !gone(topo, n.ID) {
			return SlotFix{}, fmt.Errorf("its owner %s cannot be reached but is not flagged failed; not fixed", n.Addr)
		}
	}
	if src := target.Importing[s]; !gone(topo, src) {
		return SlotFix{}, fmt.Errorf("%s imports it from %s, which is still there but does not serve it; not fixed", target.Addr, src)
	}
	if err := m.takeSlot(ctx, topo, s, target, false); err != nil {
		return SlotFix{}, err
	}
	return SlotFix{Slot: s, Action: FixFinished, Owner: target.ID,
		Detail: fmt.Sprintf("its source %s is gone; %s took it", target.Importing[s], target.Addr)}, nil
}

// fixStrayed gives a slot no master claims, and none imports, to the one master that holds
// keys of it, or to the master the entry's view routes it to when none does; the new owner
// raises its config epoch so that its claim outranks every stale view, and the other
// masters are told. Keys of it on several masters are left for a person.
func (m *mover) fixStrayed(ctx context.Context, topo *topology, s int, counts map[string]map[int]int64) (SlotFix, error) {
	var holders []nodes.Node
	for _, n := range topo.masters() {
		if counts[n.ID][s] > 0 {
			holders = append(holders, n)
		}
	}
	var owner *nodes.Node
	switch len(holders) {
	case 0:
		for _, n := range topo.entryView {
			if nodes.OwnsSlot(n, s) && n.IsMaster() && topo.reachable[n.ID] {
				owner = topo.node(n.ID)
			}
		}
		if owner == nil {
			return SlotFix{}, errors.New("no master claims it and the entry routes it to none that answers; not fixed")
		}
	case 1:
		owner = &holders[0]
	default:
		var names []string
		for _, n := range holders {
			names = append(names, n.Addr)
		}
		return SlotFix{}, fmt.Errorf("no master claims it and %d hold keys of it (%s); not fixed", len(holders), strings.Join(names, ", "))
	}
	if err := m.takeSlot(ctx, topo, s, *owner, true); err != nil {
		return SlotFix{}, err
	}
	return SlotFix{Slot: s, Action: FixFinished, Owner: owner.ID,
		Detail: fmt.Sprintf("no master claimed it; %s, holding %d keys of it, took it back", owner.Addr, counts[owner.ID][s])}, nil
}

// takeSlot makes n the owner of slot s: SETSLOT NODE on n itself, then, with bump, CLUSTER
// BUMPEPOCH on n (a node that takes a slot it was not importing keeps its epoch, which a
// stale view may outrank), then SETSLOT NODE on every other master.
func (m *mover) takeSlot(ctx context.Context, topo *topology, s int, n nodes.Node, bump bool) error {
	if err := m.setSlot(ctx, n, s, "NODE", n.ID); err != nil {
		return err
	}
	if bump {
		if err := m.client(n.Addr).Do(ctx, "CLUSTER", "BUMPEPOCH").Err(); err != nil {
			return fmt.Errorf("while running CLUSTER BUMPEPOCH on %s: %w", n.Addr, err)
		}
	}
	return m.tellOthers(ctx, &pair{target: n, others: othersThan(topo, n.ID)}, []int{s})
}

// closeHalfMoved closes a slot owner migrates to target, which holds keys of it: it
// measures both sides (openSlotFacts) and finishes the move when the rest fits in the
// target (closeWay), else rolls it back. A finish the target refuses with OOM all the same
// (the estimate missed, or the target filled meanwhile) is rolled back too, so a full
// target never keeps a slot open.
func (m *mover) closeHalfMoved(ctx context.Context, s int, owner, target nodes.Node, finish func(string) (SlotFix, error)) (SlotFix, error) {
	facts, err := m.openSlotFacts(ctx, s, owner, target)
	if err != nil {
		return SlotFix{}, err
	}
	what := fmt.Sprintf("%s migrating it to %s, which holds %d keys of it (about %s) and has %s of room for the %d left (about %s)",
		owner.Addr, target.Addr, facts.Moved.Keys, layout.FormatBytes(facts.Moved.Bytes), formatRoom(facts.TargetRoom), facts.Left.Keys, layout.FormatBytes(facts.Left.Bytes))
	way := closeWay(facts)
	if way == FixFinished {
		f, err := finish(what)
		if err == nil || !isOOM(err) {
			return f, err
		}
		what = fmt.Sprintf("%s; finishing failed: %v", what, err)
		// More keys are on the target now: does the owner still have room for them?
		if facts, err = m.openSlotFacts(ctx, s, owner, target); err != nil {
			return SlotFix{}, err
		}
		way = FixRolledBack
		if !rollBackFits(facts) {
			way = FixKeptOpen
		}
	}
	if way == FixKeptOpen {
		return SlotFix{}, fmt.Errorf("%s, and %s has %s of spare memory for the %d keys on the target: closing it either way would meet OOM, "+
			"so it stays open (both nodes serve it) until one has room; a larger memory limit or fewer keys would let it close",
			what, owner.Addr, layout.FormatBytes(facts.OwnerRoom.Spare), facts.Moved.Keys)
	}
	f, err := m.rollBack(ctx, s, owner, target, what)
	if err != nil {
		return f, err
	}
	f.Target, f.Size = target.ID, layout.SlotSize{Keys: facts.Left.Keys + facts.Moved.Keys, Bytes: facts.Left.Bytes + facts.Moved.Bytes}
	return f, nil
}

// rollBackRounds bounds how often rollBack looks again for keys a client wrote to the
// target while it was emptied.
const rollBackRounds = 3

// rollBack undoes a half-done move of slot s from owner to target, as redis-cli's fix
// moves stray keys back to an owner: the owner stops migrating (only then does it accept
// the keys back), and with the slot open on the target (IMPORTING, which lets it MIGRATE
// keys it does not own) every key of it goes back to the owner. Then the target stops
// importing and is counted again, a few rounds at most. While keys go back, a client that
// asks the owner for one still on the target finds none (the window is the time MIGRATE
// takes to move them); a key written meanwhile on the owner is on both nodes and handled
// as in moveOneSlot: never overwritten with a different value.
func (m *mover) rollBack(ctx context.Context, s int, owner, target nodes.Node, detail string) (SlotFix, error) {
	// The owner stops migrating first: it accepts the keys coming back only then (while
	// migrating, it answers ASK for a key it lacks, the RESTORE of MIGRATE included).
	if err := m.setSlot(ctx, owner, s, "STABLE", ""); err != nil {
		return SlotFix{}, err
	}
	var moved int64
	for round := 0; ; round++ {
		if err := m.setSlot(ctx, target, s, "IMPORTING", owner.ID); err != nil {
			return SlotFix{}, err
		}
		keys, err := m.migrateKeys(ctx, s, target, owner)
		moved += keys
		if err != nil {
			return SlotFix{}, fmt.Errorf("while rolling back (%d keys moved back): %w", moved, err)
		}
		if err := m.setSlot(ctx, target, s, "STABLE", ""); err != nil {
			return SlotFix{}, err
		}
		n, err := m.countOne(ctx, target, s)
		if err != nil {
			return SlotFix{}, err
		}
		if n == 0 {
			break
		}
		if round+1 == rollBackRounds {
			return SlotFix{}, fmt.Errorf("while rolling back: %s still holds %d keys of it after %d rounds", target.Addr, n, rollBackRounds)
		}
	}
	return SlotFix{Slot: s, Action: FixRolledBack, Owner: owner.ID, Keys: moved, Detail: detail}, nil
}

// formatRoom writes a room for messages.
func formatRoom(r layout.Room) string {
	if r.Unlimited {
		return "no maxmemory, so unlimited room"
	}
	// What the node uses of its maxmemory says, when a target refused keys with OOM
	// although the plan's estimate said they fit, how far the estimate was off.
	if r.Spare == 0 {
		return fmt.Sprintf("%s (using %s: at or past its maxmemory)", layout.FormatBytes(r.Bytes), layout.FormatBytes(r.Holds))
	}
	return fmt.Sprintf("%s (using %s of its maxmemory %s)", layout.FormatBytes(r.Bytes), layout.FormatBytes(r.Holds), layout.FormatBytes(r.Holds+r.Spare))
}
