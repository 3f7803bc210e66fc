package rdbload

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/middleware-operator/middleware-operator/internal/rdbstream"
)

// PauseAppendOnly turns the append-only file off on a restoring shard's nodes, its master
// and its replicas, for the length of a load, and returns resume, which turns it on again
// on them (EnsureAppendOnly). A node that logs every loaded command to its AOF, and
// rewrites it each time it doubles, spends about twice the CPU on a large load (the
// restored nodes 25.6-27.2 CPU-s against 12.7-13.6 at 3,000,000 keys), and a restore's
// masters and replicas share the machine's cores.
//
// Only for a new cluster's restore, which admits no client and whose operator-made
// redis.conf sets appendonly yes (resources.RedisConf), so a node that restarts comes back
// with its AOF on: a master then fails its load, which is tried again. Whatever turned the
// AOF off, the restore's end turns it on again on every node of the cluster
// (EnsureAppendOnly) before it counts as done: a retry after an operator that died
// mid-load, or a replica re-pointed meanwhile to another shard, leaves no node without
// its AOF. A replica that does not answer is left as it is (its AOF on, the load slower).
func PauseAppendOnly(ctx context.Context, master rdbstream.Options, replicas []rdbstream.Options) (resume func(context.Context) error, err error) {
	if err := setAppendOnly(ctx, master, "no"); err != nil {
		return nil, err
	}
	paused := []rdbstream.Options{master}
	for _, r := range replicas {
		if setAppendOnly(ctx, r, "no") == nil {
			paused = append(paused, r)
		}
	}
	return func(ctx context.Context) error { return EnsureAppendOnly(ctx, paused) }, nil
}

// EnsureAppendOnly turns the AOF on where it is off on nodes, side by side, and waits until
// every node has rewritten it from what it holds and none has a rewrite under way or
// scheduled: only then is every key on each node's disk. It fails at once on a rewrite that
// failed, and when ctx ends first.
func EnsureAppendOnly(ctx context.Context, nodes []rdbstream.Options) error {
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() { errs[i] = ensureAppendOnly(ctx, n) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// WorthPausingAppendOnly says whether a load of size bytes (a shard's RDB) into node gains
// from PauseAppendOnly: when the AOF the load would write outgrows the node's
// auto-aof-rewrite-min-size (its AOF is larger than the RDB of the same keys), the node
// rewrites it during the load, again each time it doubles, forking under the load's writes,
// and the one rewrite at the load's end costs less than those and the logging of every
// command. Below it, or with automatic rewrites off, that one rewrite costs more than the
// logging it saves: at 1,000,000 keys in three 39 MB shards a paused restore loaded faster
// but was Ready about a second later (docs/development/benchmarks/measurements.md).
func WorthPausingAppendOnly(ctx context.Context, node rdbstream.Options, size int64) (bool, error) {
	c := clientOf(node)
	defer func() { _ = c.Close() }()
	conf, err := c.ConfigGet(ctx, "auto-aof-rewrite-*").Result()
	if err != nil {
		return false, fmt.Errorf("while reading the AOF rewrite settings of %s: %w", node.Addr, err)
	}
	percentage, err1 := strconv.ParseInt(conf["auto-aof-rewrite-percentage"], 10, 64)
	minSize, err2 := strconv.ParseInt(conf["auto-aof-rewrite-min-size"], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return false, fmt.Errorf("%s's auto-aof-rewrite settings %v: %w", node.Addr, conf, err)
	}
	return percentage > 0 && size >= minSize, nil
}

// setAppendOnly sets the node's appendonly to value.
func setAppendOnly(ctx context.Context, node rdbstream.Options, value string) error {
	c := clientOf(node)
	defer func() { _ = c.Close() }()
	if err := c.ConfigSet(ctx, "appendonly", value).Err(); err != nil {
		return fmt.Errorf("while setting appendonly %s on %s: %w", value, node.Addr, err)
	}
	return nil
}

// aofPoll is how often ensureAppendOnly asks a node whether its AOF rewrite ended, and
// aofReadTries how many reads in a row may fail before it gives up on the node.
const (
	aofPoll      = 100 * time.Millisecond
	aofReadTries = 20
)

// ensureAppendOnly turns the node's AOF on, once it is neither loading nor syncing with its
// master (a rewrite then would be of half its data), and waits until a rewrite that began
// after has ended well and none is under way or scheduled. A node whose AOF is on already
// waits only for a rewrite under way.
func ensureAppendOnly(ctx context.Context, node rdbstream.Options) error {
	c := clientOf(node)
	defer func() { _ = c.Close() }()
	var last aofState
	wait := func(until func(aofState) (bool, error)) error {
		for failures := 0; ; {
			text, err := c.Info(ctx, "persistence", "replication").Result()
			if err == nil {
				if last, err = parseAOFState(text); err == nil {
					failures = 0
					if ok, err := until(last); ok || err != nil {
						return err
					}
				}
			}
			if err != nil {
				if failures++; failures == aofReadTries { // a node gone: the caller tries again, with the nodes as they are then
					return fmt.Errorf("while reading the AOF state of %s: %w", node.Addr, err)
				}
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("the AOF of %s is not on and rewritten (the keys are not all on its disk; last seen: %s): %w", node.Addr, last, ctx.Err())
			case <-time.After(aofPoll):
			}
		}
	}
	if err := wait(func(s aofState) (bool, error) { return s.settled(), nil }); err != nil {
		return err
	}
	before := last
	if !before.Enabled {
		if err := c.ConfigSet(ctx, "appendonly", "yes").Err(); err != nil {
			return fmt.Errorf("while turning the AOF of %s on: %w", node.Addr, err)
		}
	}
	return wait(func(s aofState) (bool, error) {
		if s.failed() {
			return false, fmt.Errorf("the AOF rewrite of %s failed (aof_last_bgrewrite_status err; see its log): its keys are not all on its disk", node.Addr)
		}
		return s.Enabled && s.settled() && s.done(before), nil
	})
}

// aofState is what INFO persistence and replication say of a node's AOF.
type aofState struct {
	Enabled, InProgress, Scheduled bool
	// Rewrites counts the rewrites started since the node started; LastOK is whether the last
	// one ended well.
	Rewrites int64
	LastOK   bool
	// Loading is true while the node loads a dataset (its own at start, or its master's in a
	// full sync); Replica is true for a replica, LinkUp when its link to its master is up.
	Loading, Replica, LinkUp bool
}

// settled says whether the node is neither loading nor syncing with its master.
func (s aofState) settled() bool { return !s.Loading && (!s.Replica || s.LinkUp) }

// done says whether a rewrite started since before has ended well and none is under way: a
// node whose AOF was off rewrites it when it is turned on.
func (s aofState) done(before aofState) bool {
	if s.InProgress || s.Scheduled || !s.LastOK {
		return false
	}
	return before.Enabled || s.Rewrites > before.Rewrites
}

// failed says whether the last rewrite failed and none is under way or scheduled (Redis
// tries a failed one again later, after a back-off of up to an hour).
func (s aofState) failed() bool { return !s.LastOK && !s.InProgress && !s.Scheduled }

func (s aofState) String() string {
	return fmt.Sprintf("aof_enabled %t, rewrite in progress %t, scheduled %t, rewrites %d, last ok %t, loading %t, replica %t (link up %t)",
		s.Enabled, s.InProgress, s.Scheduled, s.Rewrites, s.LastOK, s.Loading, s.Replica, s.LinkUp)
}

// parseAOFState reads the AOF, loading and replication fields of INFO persistence and
// replication.
func parseAOFState(info string) (aofState, error) {
	var s aofState
	flags := map[string]struct {
		to   *bool
		when string
	}{
		"loading": {&s.Loading, "1"}, "role": {&s.Replica, "slave"}, "master_link_status": {&s.LinkUp, "up"},
		"aof_enabled": {&s.Enabled, "1"}, "aof_rewrite_in_progress": {&s.InProgress, "1"},
		"aof_rewrite_scheduled": {&s.Scheduled, "1"}, "aof_last_bgrewrite_status": {&s.LastOK, "ok"},
	}
	seen := map[string]bool{}
	for line := range strings.Lines(info) {
		name, value, ok := strings.Cut(strings.TrimSpace(line), ":")
		if f, known := flags[name]; ok && known {
			*f.to, seen[name] = value == f.when, true
		}
		if ok && name == "aof_rewrites" {
			n, err := strconv.ParseInt(value, 10, 64)
			if err != nil {
				return s, fmt.Errorf("INFO persistence's aof_rewrites %q is not a number", value)
			}
			s.Rewrites, seen[name] = n, true
		}
	}
	// master_link_status is a replica's alone.
	for _, name := range []string{"loading", "role", "aof_enabled", "aof_rewrite_in_progress", "aof_rewrite_scheduled", "aof_rewrites", "aof_last_bgrewrite_status"} {
		if !seen[name] {
			return s, fmt.Errorf("INFO persistence and replication lack %s", name)
		}
	}
	return s, nil
}
