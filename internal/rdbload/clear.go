package rdbload

import (
	"cmp"
	"context"
	"fmt"
	"net"

	goredis "github.com/redis/go-redis/v9"

	"github.com/middleware-operator/middleware-operator/internal/rdbstream"
)

// clearBatch is how many keys ClearSlots asks for (CLUSTER GETKEYSINSLOT) and unlinks at a
// time, and how many slots it counts in one pipeline.
const clearBatch = 1000

// ClearSlots deletes (UNLINK) every key of slots on the cluster node, and returns how many.
// A load that replays commands after its keys (an archive's INCR, LPUSH...) must start
// from empty slots when it is tried again: what the failed attempt applied would be
// applied twice. Slots with no key cost one CLUSTER COUNTKEYSINSLOT each, pipelined.
func ClearSlots(ctx context.Context, node rdbstream.Options, slots []SlotRange) (int64, error) {
	set, err := newSlotSet(slots)
	if err != nil {
		return 0, err
	}
	c := clientOf(node)
	defer func() { _ = c.Close() }()
	var all []int
	for s := range Slots {
		if set.has(s) {
			all = append(all, s)
		}
	}
	var removed int64
	for start := 0; start < len(all); start += clearBatch {
		chunk := all[start:min(start+clearBatch, len(all))]
		counts := make([]*goredis.IntCmd, len(chunk))
		if _, err := c.Pipelined(ctx, func(p goredis.Pipeliner) error {
			for i, s := range chunk {
				counts[i] = p.ClusterCountKeysInSlot(ctx, s)
			}
			return nil
		}); err != nil {
			return removed, fmt.Errorf("while counting the keys of slots %d-%d on %s: %w", chunk[0], chunk[len(chunk)-1], node.Addr, err)
		}
		for i, s := range chunk {
			for counts[i].Val() > 0 {
				keys, err := c.ClusterGetKeysInSlot(ctx, s, clearBatch).Result()
				if err != nil {
					return removed, fmt.Errorf("while listing the keys of slot %d on %s: %w", s, node.Addr, err)
				}
				if len(keys) == 0 {
					break
				}
				gone, err := c.Unlink(ctx, keys...).Result()
				if err != nil {
					return removed, fmt.Errorf("while deleting the keys of slot %d on %s: %w", s, node.Addr, err)
				}
				removed += gone
			}
		}
	}
	return removed, nil
}

// clientOf is a client of one connection to node, dialled as rdbstream dials it.
func clientOf(node rdbstream.Options) *goredis.Client {
	return goredis.NewClient(&goredis.Options{Addr: node.Addr, Protocol: 2, DisableIdentity: true, PoolSize: 1, MaxRetries: -1,
		Dialer: func(ctx context.Context, _, _ string) (net.Conn, error) { return rdbstream.Dial(ctx, node) }})
}

// FlushFunctions deletes every function library of node (FUNCTION FLUSH SYNC): a new
// cluster's master emptied after a failed load keeps none of the libraries the load sent
// (ClearSlots deletes keys only).
func FlushFunctions(ctx context.Context, node rdbstream.Options) error {
	c := clientOf(node)
	defer func() { _ = c.Close() }()
	if err := c.Do(ctx, "FUNCTION", "FLUSH", "SYNC").Err(); err != nil {
		return fmt.Errorf("while deleting the function libraries of %s: %w", node.Addr, err)
	}
	return nil
}

// SanitizePayloads makes node check every RESTORE payload's structure in depth
// (sanitize-dump-payload yes) until undo sets it back: a damaged value of a file whose
// checksum is only known at its end is then refused by the node (an error that stops the
// load) instead of being taken as it is, which can crash it. SET of a plain string is not
// concerned.
func SanitizePayloads(ctx context.Context, node rdbstream.Options) (undo func(context.Context) error, err error) {
	const setting = "sanitize-dump-payload"
	c := clientOf(node)
	defer func() { _ = c.Close() }()
	was, err := c.ConfigGet(ctx, setting).Result()
	if err != nil {
		return nil, fmt.Errorf("while reading %s of %s: %w", setting, node.Addr, err)
	}
	before := was[setting]
	if before == "yes" {
		return func(context.Context) error { return nil }, nil
	}
	if err := c.ConfigSet(ctx, setting, "yes").Err(); err != nil {
		return nil, fmt.Errorf("while setting %s of %s: %w", setting, node.Addr, err)
	}
	return func(ctx context.Context) error {
		c := clientOf(node) // the load may last long after this connection would have been idle
		defer func() { _ = c.Close() }()
		return c.ConfigSet(ctx, setting, cmp.Or(before, "no")).Err()
	}, nil
}
