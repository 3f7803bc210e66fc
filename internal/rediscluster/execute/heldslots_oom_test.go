package execute

import (
	"strconv"
	"strings"
	"testing"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/layout"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
)

// halfMoveUntilOOM opens slot from src to dst and MIGRATEs its keys, 10 at a time, until
// dst refuses them with OOM; it fails the test when dst took them all.
func (c *slotCluster) halfMoveUntilOOM(slot int, src, dst nodes.Node, keys []string) {
	c.t.Helper()
	c.do(dst.Addr, "CLUSTER", "SETSLOT", slot, "IMPORTING", src.ID)
	c.do(src.Addr, "CLUSTER", "SETSLOT", slot, "MIGRATING", dst.ID)
	oom := false
	for i := 0; i < len(keys) && !oom; i += 10 {
		args := []any{"MIGRATE", dst.Host, dst.Port, "", 0, 5000, "KEYS"}
		for _, k := range keys[i:min(i+10, len(keys))] {
			args = append(args, k)
		}
		oom = isOOM(c.admin.Client(src.Addr).Do(c.ctx, args...).Err())
	}
	if !oom || c.count(dst, slot) == 0 {
		c.t.Fatalf("the target took %d keys without OOM: the fault was not injected", c.count(dst, slot))
	}
}

// TestFixKeepsOpenWhenNeitherSideHasRoom half-moves a giant slot into a target until it
// answers OOM, then fills its owner too (its spare memory below what moved): closing the
// slot either way would meet OOM half-way, so Fix leaves it open, changes nothing and says
// why; every key still reads back (through ASK). Once the owner has room again, Fix rolls
// it back and no slot is open.
func TestFixKeepsOpenWhenNeitherSideHasRoom(t *testing.T) {
	t.Parallel()
	c, slot, src, dst, keys := newGiantSlot(t, "bothfull")
	ctx := c.ctx
	c.halfMoveUntilOOM(slot, src, dst, keys)
	c.squeeze(src, 32<<10)
	onTarget, onOwner := c.count(dst, slot), c.count(src, slot)
	_, err := c.admin.Fix(ctx, addrsOf(c.servers), MoveOptions{})
	if err == nil || !strings.Contains(err.Error(), "stays open") {
		t.Fatalf("Fix returned %v, want it to keep the slot open and say so", err)
	}
	t.Logf("Fix: %v", err)
	if a, b := c.count(dst, slot), c.count(src, slot); a != onTarget || b != onOwner {
		t.Errorf("keys of slot %d: %d on the target and %d on the owner, were %d and %d: Fix moved keys into a master without room", slot, a, b, onTarget, onOwner)
	}
	if got := c.do(src.Addr, "INFO", "errorstats").Val().(string); strings.Contains(got, "errorstat_OOM") {
		t.Errorf("the owner refused keys with OOM: %s", got)
	}
	for i, k := range keys {
		if got, err := c.cc.Get(ctx, k).Result(); err != nil || got != giantPayload(i) {
			t.Fatalf("with the slot open, %s reads %d bytes (%v), want its value", k, len(got), err)
		}
	}
	c.do(src.Addr, "CONFIG", "SET", "maxmemory", "0")
	fixes, err := c.admin.Fix(ctx, addrsOf(c.servers), MoveOptions{})
	if err != nil || len(fixes) != 1 || fixes[0].Action != FixRolledBack || fixes[0].Target != dst.ID || fixes[0].Size.Keys != int64(len(keys)) {
		t.Fatalf("once the owner has room: fixes %+v, %v; want slot %d rolled back from %s, its %d keys measured", fixes, err, slot, dst.Addr, len(keys))
	}
	c.assertNoOpenSlot()
	c.assertGiant(keys, slot, src)
}

// TestMoveSlotsMovesExactlyThePlan: MoveSlots moves the slots of the plan it is given, and
// no other: it does not plan again (a balanced cluster's rebalance would move none).
func TestMoveSlotsMovesExactlyThePlan(t *testing.T) {
	t.Parallel()
	c, slot, src, dst, keys := newGiantSlot(t, "exact")
	ctx := c.ctx
	var plan []int
	for _, r := range src.Slots {
		for s := r.Start; s <= r.End && len(plan) < 3; s++ {
			if s != slot {
				plan = append(plan, s)
			}
		}
	}
	third := c.other(dst)
	if third.ID == src.ID {
		for _, m := range c.masters {
			if m.ID != src.ID && m.ID != dst.ID {
				third = m
			}
		}
	}
	stats, err := c.admin.MoveSlots(ctx, addrsOf(c.servers), []layout.Move{{Source: src.ID, Target: third.ID, Slots: plan}}, MoveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if stats.Slots != len(plan) {
		t.Errorf("%d slots moved, want the plan's %d", stats.Slots, len(plan))
	}
	res := c.healthy()
	for _, s := range plan {
		if owner := ownerOf(res, s); owner != third.Addr {
			t.Errorf("slot %d is served by %s, want %s as planned", s, owner, third.Addr)
		}
	}
	before := map[string]int{}
	for _, m := range c.masters {
		before[m.ID] = nodes.CountSlots(m.Slots)
	}
	for _, m := range res.Masters() {
		want := before[m.ID]
		switch m.ID {
		case src.ID:
			want -= len(plan)
		case third.ID:
			want += len(plan)
		}
		if got := nodes.CountSlots(m.Slots); got != want {
			t.Errorf("%s serves %d slots, want %d: slots moved besides the plan", m.Addr, got, want)
		}
	}
	c.assertGiant(keys, slot, src)
}

// TestMoveSlotsHoldsARolledBackSlot: a slot whose sampled keys are tiny while most of its
// bytes are in big keys is estimated far below its size, so the fitting lets it go to a
// target with 1 MiB of room, which answers OOM mid-move. The slot is rolled back at once,
// and the stats hold it as RolledBack, with its target and the target's room before the
// move, so the next plans go around it (StillHeld) instead of meeting the same OOM.
func TestMoveSlotsHoldsARolledBackSlot(t *testing.T) {
	t.Parallel()
	c, slot, src, dst, keys := newGiantSlot(t, "sampled")
	ctx := c.ctx
	// Tiny keys at both ends of the slot's key list, so whichever end GETKEYSINSLOT
	// samples, it finds only those.
	for i := range 16 {
		c.do(src.Addr, "SET", "{sampled}:tiny:"+strconv.Itoa(i), "x")
	}
	c.squeeze(dst, 1<<20)
	stats, err := c.admin.MoveSlots(ctx, addrsOf(c.servers), []layout.Move{{Source: src.ID, Target: dst.ID, Slots: []int{slot}}}, MoveOptions{})
	if err == nil || !isOOM(err) {
		t.Fatalf("the move returned %v (held %+v), want the target's OOM: the estimate was not fooled", err, stats.Held)
	}
	if len(stats.Held) != 1 || stats.Held[0].Slot != slot || !stats.Held[0].RolledBack || stats.Held[0].Target != dst.ID || stats.Held[0].Source != src.ID {
		t.Fatalf("held = %+v, want slot %d held as rolled back from %s", stats.Held, slot, dst.Addr)
	}
	h := stats.Held[0]
	if h.Size.Bytes < 480*giantValue || h.Room.Bytes <= 0 {
		t.Errorf("held %+v: want its size as the fix measured it (at least %d bytes) and the target's room before the move", h, 480*giantValue)
	}
	t.Logf("held: %s", h)
	c.assertNoOpenSlot()
	if a, b := c.count(src, slot), c.count(dst, slot); a != int64(len(keys))+16 || b != 0 {
		t.Errorf("slot %d: %d keys on its owner, %d on the target, want all %d on the owner", slot, a, b, len(keys)+16)
	}
	for i, k := range keys {
		if got, err := c.cc.Get(ctx, k).Result(); err != nil || got != giantPayload(i) {
			t.Fatalf("%s reads %d bytes (%v), want its value", k, len(got), err)
		}
	}
}
