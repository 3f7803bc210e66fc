package execute

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/layout"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
	goredis "github.com/redis/go-redis/v9"
)

// defaultPipeline is redis-cli's default --cluster-pipeline: how many keys one
// CLUSTER GETKEYSINSLOT returns and one MIGRATE moves.
const defaultPipeline = 10

// defaultMigrateTimeout is the timeout redis-cli gives MIGRATE (60 s).
const defaultMigrateTimeout = 60 * time.Second

// defaultSlotBatch is how many slots runMoves opens at once between one source and one
// target.
const defaultSlotBatch = 128

// ErrKeyConflict is wrapped by the error of a move that stopped because a key exists on
// both the source and the target with different values (MIGRATE answered BUSYKEY). Nothing
// was overwritten: the slot stays open with the key on both nodes, for a person to decide.
var ErrKeyConflict = errors.New("key exists on both nodes with different values")

// MoveOptions tunes how slots are moved. The zero value moves like redis-cli does by default.
type MoveOptions struct {
	// Pipeline is how many keys one CLUSTER GETKEYSINSLOT returns and one MIGRATE moves
	// (redis-cli's --cluster-pipeline, updateStrategy.pipeline); 0 means 10, redis-cli's
	// default (defaultPipeline).
	Pipeline int
	// Timeout is the MIGRATE timeout; 0 means 60 s, redis-cli's (defaultMigrateTimeout).
	Timeout time.Duration
	// SlotBatch is how many slots runMoves opens at once between one source and one
	// target, with their commands pipelined; 0 means 128 (defaultSlotBatch). moveOneSlot
	// and Fix move one slot at a time.
	SlotBatch int
	// Replace overwrites a key that exists on the target with the source's value
	// (redis-cli's --cluster-replace). Without it, a key on both nodes is overwritten only
	// when both hold the same value; otherwise the move stops with ErrKeyConflict.
	Replace bool
	// Budget bounds how long runMoves keeps starting new batches; 0 means no bound. A
	// batch under way is always finished, so stopping leaves no slot open, and the stats say
	// Partial; running the same plan (or a new one) again goes on from there.
	Budget time.Duration
	// Fence, when set, is checked before every batch, again before a batch's slots are
	// handed to their target, and before every slot Fix closes; an error stops the moves
	// there and is returned (slots of a batch stopped before the hand-over stay open, for
	// Fix). The operator's fence fails once another replica holds the leader election lease.
	Fence func(context.Context) error
}

func (o MoveOptions) withDefaults() MoveOptions {
	if o.Pipeline <= 0 {
		o.Pipeline = defaultPipeline
	}
	if o.Timeout <= 0 {
		o.Timeout = defaultMigrateTimeout
	}
	if o.SlotBatch <= 0 {
		o.SlotBatch = defaultSlotBatch
	}
	return o
}

// MoveStats says what a move did.
type MoveStats struct {
	// Moves is the plan that was executed.
	Moves []layout.Move
	// Slots is the number of slots whose ownership changed.
	Slots int
	// Keys is the number of keys MIGRATE moved.
	Keys int64
	// Elapsed is how long it took.
	Elapsed time.Duration
	// Partial is true when MoveOptions.Budget ran out before every slot moved.
	Partial bool
	// Held are the slots of the plan that were not moved because they would not fit in
	// their target (layout.Fit); Moves no longer lists them.
	Held []layout.HeldSlot
	// Fixes are the slots a failed move left open that were closed at once (a target that
	// refused keys with OOM: closeHalfMoved).
	Fixes []SlotFix
}

// moveOneSlot moves one slot exactly as redis-cli's clusterManagerMoveSlot does:
//
//  1. CLUSTER SETSLOT <slot> IMPORTING <source-id> on the target;
//  2. CLUSTER SETSLOT <slot> MIGRATING <target-id> on the source;
//  3. CLUSTER GETKEYSINSLOT <slot> <pipeline> on the source and MIGRATE <target-ip>
//     <target-port> "" 0 <timeout> [AUTH <password>] KEYS <keys...>, until no key is left;
//  4. CLUSTER SETSLOT <slot> NODE <target-id> on the target first, then on the source, then
//     on every one of otherMasters.
//
// A MIGRATE error stops the move before step 4, with the slot left open; Fix or a new
// moveOneSlot finishes it. When MIGRATE answers BUSYKEY (a key is on both nodes), moveOneSlot
// does what redis-cli 7.0 does: it compares the values on both nodes (DUMP instead of
// redis-cli's DEBUG DIGEST-VALUE, which Redis 7 disables by default) and migrates again
// with REPLACE only if they are all equal or opts.Replace is set; otherwise it stops with
// an error wrapping ErrKeyConflict.
//
// The source answering "Please use SETSLOT only with masters" in step 4 is not an error
// (it just gave away its last slot and became a replica of the target, as redis-cli
// accepts); the same answer from another master is accepted too, for the same reason.
//
// moveOneSlot is idempotent: on a slot the target already owns it only completes step 4.
// Nodes need ID and Addr (or Host and Port).
func (a *Admin) moveOneSlot(ctx context.Context, slot int, source, target nodes.Node, otherMasters []nodes.Node, opts MoveOptions) error {
	if slot < 0 || slot >= nodes.SlotCount {
		return fmt.Errorf("while moving slot %d: not a slot", slot)
	}
	if source.ID == "" || target.ID == "" || source.ID == target.ID {
		return fmt.Errorf("while moving slot %d: source %q and target %q must be two nodes", slot, source.ID, target.ID)
	}
	m := a.newMover(opts, 2)
	defer m.close()
	_, err := m.moveSlot(ctx, slot, source, target, otherMasters)
	return err
}

// mover runs moves with clients of its own: one pool per node, sized for the moves it
// runs in parallel, with read timeouts longer than a MIGRATE may take.
type mover struct {
	a        *Admin
	opts     MoveOptions
	poolSize int

	mu      sync.Mutex
	clients map[string]*goredis.Client

	slots atomic.Int64
	keys  atomic.Int64
	// deadline is when no new batch starts (zero: none); partial is set when one did not.
	deadline time.Time
	partial  atomic.Bool
}

func (a *Admin) newMover(opts MoveOptions, poolSize int) *mover {
	m := &mover{a: a, opts: opts.withDefaults(), poolSize: poolSize, clients: map[string]*goredis.Client{}}
	if opts.Budget > 0 {
		m.deadline = time.Now().Add(opts.Budget)
	}
	return m
}

// outOfBudget reports, and remembers, that the budget ran out before a batch.
func (m *mover) outOfBudget() bool {
	if m.deadline.IsZero() || time.Now().Before(m.deadline) {
		return false
	}
	m.partial.Store(true)
	return true
}

// fenced checks MoveOptions.Fence, if any.
func (m *mover) fenced(ctx context.Context) error {
	if m.opts.Fence == nil {
		return nil
	}
	return m.opts.Fence(ctx)
}

func (m *mover) client(addr string) *goredis.Client {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c, ok := m.clients[addr]; ok {
		return c
	}
	opts := m.a.Options(addr, m.poolSize)
	opts.ReadTimeout = m.opts.Timeout + 10*time.Second // a MIGRATE may take its whole timeout
	opts.WriteTimeout = opts.ReadTimeout
	c := goredis.NewClient(opts)
	m.clients[addr] = c
	return c
}

func (m *mover) close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for addr, c := range m.clients {
		_ = c.Close()
		delete(m.clients, addr)
	}
}

// setSlot runs CLUSTER SETSLOT <slot> <state> [<id>] on n.
func (m *mover) setSlot(ctx context.Context, n nodes.Node, slot int, state, id string) error {
	args := []any{"CLUSTER", "SETSLOT", slot, state}
	if id != "" {
		args = append(args, id)
	}
	if err := m.client(n.Addr).Do(ctx, args...).Err(); err != nil {
		return fmt.Errorf("while running CLUSTER SETSLOT %d %s %s on %s: %w", slot, state, id, n.Addr, err)
	}
	return nil
}

// moveSlot is moveOneSlot; it returns the number of keys migrated.
func (m *mover) moveSlot(ctx context.Context, slot int, source, target nodes.Node, others []nodes.Node) (int64, error) {
	if err := m.setSlot(ctx, target, slot, "IMPORTING", source.ID); err != nil {
		if !strings.Contains(err.Error(), "already the owner") {
			return 0, err
		}
		// The target took the slot already: the move passed its commit point.
		keys, err := m.getKeys(ctx, source, slot, 1)
		if err != nil {
			return 0, err
		}
		if len(keys) > 0 {
			return 0, fmt.Errorf("while moving slot %d: %s owns it but %s still holds keys of it; run Fix", slot, target.Addr, source.Addr)
		}
		return 0, m.assignSlot(ctx, slot, source, target, others)
	}
	if err := m.setSlot(ctx, source, slot, "MIGRATING", target.ID); err != nil {
		return 0, err
	}
	moved, err := m.migrateKeys(ctx, slot, source, target)
	if err != nil {
		return moved, err
	}
	if err := m.assignSlot(ctx, slot, source, target, others); err != nil {
		return moved, err
	}
	m.slots.Add(1)
	return moved, nil
}

// assignSlot gives slot to target: SETSLOT NODE on the target, then the source, then the
// other masters, one after the other as redis-cli does.
func (m *mover) assignSlot(ctx context.Context, slot int, source, target nodes.Node, others []nodes.Node) error {
	if err := m.setSlot(ctx, target, slot, "NODE", target.ID); err != nil {
		return err
	}
	for _, n := range append([]nodes.Node{source}, others...) {
		if n.ID == target.ID {
			continue
		}
		if err := m.setSlot(ctx, n, slot, "NODE", target.ID); err != nil && !isNotMaster(err) {
			return err
		}
	}
	return nil
}

// isNotMaster reports the answer of a node that turned into a replica to SETSLOT.
func isNotMaster(err error) bool {
	return err != nil && strings.Contains(err.Error(), "only with masters")
}

func isBusyKey(err error) bool { return err != nil && strings.Contains(err.Error(), "BUSYKEY") }

// getKeys runs CLUSTER GETKEYSINSLOT <slot> <count> on n.
func (m *mover) getKeys(ctx context.Context, n nodes.Node, slot, count int) ([]string, error) {
	keys, err := m.client(n.Addr).Do(ctx, "CLUSTER", "GETKEYSINSLOT", slot, count).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("while running CLUSTER GETKEYSINSLOT %d on %s: %w", slot, n.Addr, err)
	}
	return keys, nil
}

// migrateKeys moves every key of slot from source to target, pipeline keys at a time, as
// clusterManagerMigrateKeysInSlot does.
func (m *mover) migrateKeys(ctx context.Context, slot int, source, target nodes.Node) (int64, error) {
	var moved int64
	for {
		keys, err := m.getKeys(ctx, source, slot, m.opts.Pipeline)
		if err != nil {
			return moved, err
		}
		if len(keys) == 0 {
			return moved, nil
		}
		args, err := m.migrateArgs(target, keys, false)
		if err != nil {
			return moved, err
		}
		err = m.client(source.Addr).Do(ctx, args...).Err()
		if isBusyKey(err) {
			err = m.resolveBusy(ctx, slot, source, target, keys)
		}
		if err != nil {
			return moved, fmt.Errorf("while migrating %d keys of slot %d from %s to %s (the slot stays open): %w",
				len(keys), slot, source.Addr, target.Addr, err)
		}
		moved += int64(len(keys))
		m.keys.Add(int64(len(keys)))
	}
}

// migrateArgs builds MIGRATE <ip> <port> "" 0 <timeout> [REPLACE] [AUTH <password> | AUTH2
// <user> <password>] KEYS
// <keys...>.
func (m *mover) migrateArgs(target nodes.Node, keys []string, replace bool) ([]any, error) {
	host, port, err := hostPort(target)
	if err != nil {
		return nil, err
	}
	args := make([]any, 0, 10+len(keys))
	args = append(args, "MIGRATE", host, port, "", 0, m.opts.Timeout.Milliseconds())
	if replace {
		args = append(args, "REPLACE")
	}
	switch login := m.a.Login(); {
	case login.User != "":
		args = append(args, "AUTH2", login.User, login.Password)
	case login.Password != "":
		args = append(args, "AUTH", login.Password)
	}
	args = append(args, "KEYS")
	for _, k := range keys {
		args = append(args, k)
	}
	return args, nil
}

// resolveBusy handles a BUSYKEY answer to MIGRATE as redis-cli 7.0 does: unless Replace is
// set, it compares the values of keys on both nodes and migrates again with REPLACE only
// when none differs.
func (m *mover) resolveBusy(ctx context.Context, slot int, source, target nodes.Node, keys []string) error {
	if !m.opts.Replace {
		diffs, err := m.compareValues(ctx, source, target, keys)
		if err != nil {
			return fmt.Errorf("target key exists and the values could not be compared: %w", err)
		}
		if len(diffs) > 0 {
			// Key names are user data: the error (which reaches the status and events) gives
			// the slot and the nodes, for `redis-cli --cluster fix` or a manual look.
			return fmt.Errorf("%d key(s) of slot %d exist on both %s and %s with different values: %w",
				len(diffs), slot, source.Addr, target.Addr, ErrKeyConflict)
		}
	}
	args, err := m.migrateArgs(target, keys, true)
	if err != nil {
		return err
	}
	return m.client(source.Addr).Do(ctx, args...).Err()
}

// compareValues returns the keys that both nodes hold with different DUMP payloads. A key
// missing on either side is not a difference. Each DUMP is preceded by ASKING, as either
// node may only be importing the slot.
func (m *mover) compareValues(ctx context.Context, source, target nodes.Node, keys []string) ([]string, error) {
	dump := func(n nodes.Node) ([][]byte, error) {
		cmds := m.pipelined(ctx, n.Addr, func(p goredis.Pipeliner) {
			for _, k := range keys {
				p.Do(ctx, "ASKING")
				p.Dump(ctx, k)
			}
		})
		var out [][]byte
		for _, c := range cmds {
			dc, ok := c.(*goredis.StringCmd)
			if !ok {
				if err := c.Err(); err != nil {
					return nil, fmt.Errorf("while running ASKING on %s: %w", n.Addr, err)
				}
				continue
			}
			v, err := dc.Bytes()
			switch {
			case err == nil:
				out = append(out, v)
			case errors.Is(err, goredis.Nil), strings.HasPrefix(err.Error(), "ASK "):
				out = append(out, nil)
			default:
				return nil, fmt.Errorf("while running DUMP on %s: %w", n.Addr, err)
			}
		}
		return out, nil
	}
	src, err := dump(source)
	if err != nil {
		return nil, err
	}
	dst, err := dump(target)
	if err != nil {
		return nil, err
	}
	var diffs []string
	for i, k := range keys {
		if src[i] != nil && dst[i] != nil && !bytes.Equal(src[i], dst[i]) {
			diffs = append(diffs, k)
		}
	}
	return diffs, nil
}

// batchGrace bounds how long a batch of slot moves (or one slot being fixed) that is under
// way keeps going after its caller's context ends. A shutdown then finishes the batch
// instead of leaving its slots open, well within a pod's 30 s termination grace period.
const batchGrace = 15 * time.Second

// underWay runs step, which must not be stopped half way, with a context that the end of
// ctx does not cancel at once but batchGrace later. Callers check ctx before starting the
// next step.
func underWay(ctx context.Context, step func(context.Context) error) error {
	detached, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	stop := context.AfterFunc(ctx, func() {
		t := time.NewTimer(batchGrace)
		defer t.Stop()
		select {
		case <-t.C:
			cancel()
		case <-detached.Done():
		}
	})
	defer stop()
	return step(detached)
}
