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
// and waits until every paused node has rewritten its AOF from what it holds: only then do
// the loaded keys survive the node's restart. A node that logs every loaded command to its
// AOF spends about 40% more CPU on the load (a master and its replica, 333,333 SETs of
// redis-cli --pipe: 1.35 CPU-s with the AOF, 0.93 without), and a restore's masters and
// replicas share the machine's cores.
//
// Only for a new cluster's restore, which admits no client and whose operator-made
// redis.conf sets appendonly yes (resources.RedisConf): a node that restarts meanwhile
// comes back with its AOF on and without the load's keys, its load fails and is tried
// again, and a load tried again after an operator that died mid-load finds the AOF off and
// turns it on at its end. A replica that does not answer is left as it is (its AOF on, the
// load slower); resume fails when a paused node cannot be asked, or has not rewritten its
// AOF when ctx ends, so that the load is tried again rather than reported done.
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
	return func(ctx context.Context) error {
		errs := make([]error, len(paused))
		var wg sync.WaitGroup
		for i, n := range paused {
			wg.Go(func() { errs[i] = resumeAppendOnly(ctx, n) }) // the nodes rewrite side by side
		}
		wg.Wait()
		return errors.Join(errs...)
	}, nil
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

// aofPoll is how often resumeAppendOnly asks a node whether its AOF rewrite ended.
const aofPoll = 100 * time.Millisecond

// resumeAppendOnly turns the node's AOF on and waits until a rewrite that began after has
// ended well and none is under way or scheduled. A node whose AOF is on already (it
// restarted) waits only for a rewrite under way.
func resumeAppendOnly(ctx context.Context, node rdbstream.Options) error {
	c := clientOf(node)
	defer func() { _ = c.Close() }()
	read := func() (aofState, error) {
		text, err := c.Info(ctx, "persistence").Result()
		if err != nil {
			return aofState{}, fmt.Errorf("while reading the AOF state of %s: %w", node.Addr, err)
		}
		return parseAOFState(text)
	}
	before, err := read()
	if err != nil {
		return err
	}
	if !before.Enabled {
		if err := c.ConfigSet(ctx, "appendonly", "yes").Err(); err != nil {
			return fmt.Errorf("while turning the AOF of %s on again: %w", node.Addr, err)
		}
	}
	for {
		now, err := read()
		if err != nil {
			return err
		}
		if now.Enabled && now.done(before) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the AOF of %s was not rewritten in time (the loaded keys are not on its disk yet; last: %s): %w", node.Addr, now, ctx.Err())
		case <-time.After(aofPoll):
		}
	}
}

// aofState is what INFO persistence says of a node's AOF.
type aofState struct {
	Enabled, InProgress, Scheduled bool
	// Rewrites counts the rewrites started since the node started; LastOK is whether the last
	// one ended well.
	Rewrites int64
	LastOK   bool
}

// done says whether a rewrite started since before has ended well and none is under way: a
// node whose AOF was off rewrites it when it is turned on.
func (s aofState) done(before aofState) bool {
	if s.InProgress || s.Scheduled || !s.LastOK {
		return false
	}
	return before.Enabled || s.Rewrites > before.Rewrites
}

func (s aofState) String() string {
	return fmt.Sprintf("aof_enabled %t, rewrite in progress %t, scheduled %t, rewrites %d, last ok %t", s.Enabled, s.InProgress, s.Scheduled, s.Rewrites, s.LastOK)
}

// parseAOFState reads the AOF fields of INFO persistence.
func parseAOFState(info string) (aofState, error) {
	var s aofState
	seen := 0
	for line := range strings.Lines(info) {
		name, value, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		switch name {
		case "aof_enabled":
			s.Enabled = value == "1"
		case "aof_rewrite_in_progress":
			s.InProgress = value == "1"
		case "aof_rewrite_scheduled":
			s.Scheduled = value == "1"
		case "aof_rewrites":
			n, err := strconv.ParseInt(value, 10, 64)
			if err != nil {
				return s, fmt.Errorf("INFO persistence's aof_rewrites %q is not a number", value)
			}
			s.Rewrites = n
		case "aof_last_bgrewrite_status":
			s.LastOK = value == "ok"
		default:
			continue
		}
		seen++
	}
	if seen != 5 {
		return s, fmt.Errorf("INFO persistence lacks some of aof_enabled, aof_rewrite_in_progress, aof_rewrite_scheduled, aof_rewrites and aof_last_bgrewrite_status (%d of 5)", seen)
	}
	return s, nil
}
