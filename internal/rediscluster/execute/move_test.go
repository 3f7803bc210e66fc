package execute

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
	goredis "github.com/redis/go-redis/v9"
)

// TestMoveSlotBusyKey puts a key on both nodes of a move: with different values the move
// stops before SETSLOT NODE and overwrites nothing; with equal values it goes on with
// REPLACE, as redis-cli does.
func TestMoveSlotBusyKey(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	c := newSlotCluster(ctx, t)
	slot, src := c.slotOf("busy")
	dst := c.other(src)
	keys := c.fill("busy", 25)
	var others []nodes.Node
	for _, m := range c.masters {
		if m.ID != src.ID && m.ID != dst.ID {
			others = append(others, m)
		}
	}
	conflict := keys[7]
	c.do(dst.Addr, "CLUSTER", "SETSLOT", slot, "IMPORTING", src.ID)
	setOnTarget := func(value string) {
		t.Helper()
		if _, err := c.admin.Client(dst.Addr).Pipelined(ctx, func(p goredis.Pipeliner) error {
			p.Do(ctx, "ASKING")
			p.Set(ctx, conflict, value, 0)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	setOnTarget("different")

	err := c.admin.moveOneSlot(ctx, slot, src, dst, others, MoveOptions{Pipeline: 10})
	if !errors.Is(err, ErrKeyConflict) || strings.Contains(err.Error(), conflict) || !strings.Contains(err.Error(), fmt.Sprintf("slot %d", slot)) {
		t.Fatalf("moveOneSlot with a conflicting key: error = %v, want ErrKeyConflict naming slot %d and not the key %s", err, slot, conflict)
	}
	if got := c.do(src.Addr, "GET", conflict).Val(); got != "v:7" {
		t.Errorf("the source's %s = %v, want v:7 untouched", conflict, got)
	}
	view, _ := c.admin.ClusterNodes(ctx, src.Addr)
	for _, n := range view {
		if n.Myself && (!nodes.OwnsSlot(n, slot) || n.Migrating[slot] != dst.ID) {
			t.Errorf("after a failed MIGRATE the source must still own slot %d, migrating: %s", slot, nodes.FormatSlotRanges(n.Slots))
		}
	}

	setOnTarget("v:7")
	if err := c.admin.moveOneSlot(ctx, slot, src, dst, others, MoveOptions{Pipeline: 10}); err != nil {
		t.Fatal(err)
	}
	if err := c.admin.moveOneSlot(ctx, slot, src, dst, others, MoveOptions{}); err != nil {
		t.Fatalf("moveOneSlot again: %v", err)
	}
	res := c.healthy()
	if got := ownerOf(res, slot); got != dst.Addr {
		t.Errorf("slot %d is served by %s, want %s", slot, got, dst.Addr)
	}
	if n := c.count(dst, slot); n != int64(len(keys)) {
		t.Errorf("the target holds %d keys of slot %d, want %d", n, slot, len(keys))
	}
	c.assertKeys(keys)
}
