package rdbload

import (
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
	c := goredis.NewClient(&goredis.Options{Addr: node.Addr, Protocol: 2, DisableIdentity: true, PoolSize: 1, MaxRetries: -1,
		Dialer: func(ctx context.Context, _, _ string) (net.Conn, error) { return rdbstream.Dial(ctx, node) }})
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
