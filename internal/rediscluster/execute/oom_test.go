package execute

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/layout"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
	goredis "github.com/redis/go-redis/v9"
)

// giantValue is the size of each key of a giant slot in these tests.
const giantValue = 8 << 10

// fillGiant writes n keys "{tag}:i" of giantValue bytes each and returns them.
func (c *slotCluster) fillGiant(tag string, n int) []string {
	c.t.Helper()
	var keys []string
	_, err := c.cc.Pipelined(c.ctx, func(p goredis.Pipeliner) error {
		for i := range n {
			k := fmt.Sprintf("{%s}:%d", tag, i)
			keys = append(keys, k)
			p.Set(c.ctx, k, giantPayload(i), 0)
		}
		return nil
	})
	if err != nil {
		c.t.Fatal(err)
	}
	return keys
}

func giantPayload(i int) string {
	return strconv.Itoa(i) + ":" + strings.Repeat("g", giantValue)
}

// squeeze sets n's maxmemory to its used memory plus room bytes, noeviction.
func (c *slotCluster) squeeze(n nodes.Node, room int64) {
	c.t.Helper()
	text := c.do(n.Addr, "INFO", "memory").Val().(string)
	used, _ := strconv.ParseInt(nodes.ParseInfoFields(text, func(f string) bool { return f == "used_memory" })["used_memory"], 10, 64)
	c.do(n.Addr, "CONFIG", "SET", "maxmemory", used+room, "maxmemory-policy", "noeviction")
}

// newGiantSlot starts a cluster of three masters, writes 480 keys of giantValue bytes
// (about 4 MiB) under tag, and leaves another master than their owner 1 MiB of room.
func newGiantSlot(t *testing.T, tag string) (c *slotCluster, slot int, src, dst nodes.Node, keys []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	t.Cleanup(cancel)
	c = newSlotCluster(ctx, t)
	slot, src = c.slotOf(tag)
	dst = c.other(src)
	keys = c.fillGiant(tag, 480)
	c.squeeze(dst, 1<<20)
	return c, slot, src, dst, keys
}

// assertGiant checks every key of keys reads back with its value through a client entering
// at each node, and that slot's keys are all on owner and none on the others.
func (c *slotCluster) assertGiant(keys []string, slot int, owner nodes.Node) {
	c.t.Helper()
	for _, entry := range addrsOf(c.servers) {
		cc := clusterClient([]string{entry}, "")
		for i, k := range keys {
			got, err := cc.Get(c.ctx, k).Result()
			if err != nil || got != giantPayload(i) {
				c.t.Errorf("through %s: %s reads %d bytes (%v), want its value", entry, k, len(got), err)
				break
			}
		}
		_ = cc.Close()
	}
	for _, m := range c.masters {
		want := int64(0)
		if m.ID == owner.ID {
			want = int64(len(keys))
		}
		if n := c.count(m, slot); n != want {
			c.t.Errorf("%s holds %d keys of slot %d, want %d", m.Addr, n, slot, want)
		}
	}
}

// assertNoOpenSlot checks no master has a slot migrating or importing.
func (c *slotCluster) assertNoOpenSlot() {
	c.t.Helper()
	topo, err := c.admin.loadTopology(c.ctx, addrsOf(c.servers))
	if err != nil {
		c.t.Fatal(err)
	}
	if open := topo.openSlots(); len(open) > 0 {
		c.t.Errorf("slots %v are still open", open)
	}
}

// TestMoveRollsBackWhenTargetOOM moves a giant slot (480 keys of 8 KiB, about 4 MiB) to a
// master with 1 MiB of room, without the fitting, so MIGRATE fails with OOM mid-slot while
// a writer writes and reads through the cluster: the move rolls the slot back at once,
// leaves no slot open, and every key reads back through every node, from its one master.
func TestMoveRollsBackWhenTargetOOM(t *testing.T) {
	t.Parallel()
	c, slot, src, dst, keys := newGiantSlot(t, "giant")
	ctx := c.ctx
	w := startWriter(t, addrsOf(c.servers), "", 200)
	time.Sleep(300 * time.Millisecond)
	stats, err := c.admin.runMoves(ctx, addrsOf(c.servers), []layout.Move{{Source: src.ID, Target: dst.ID, Slots: []int{slot}}}, MoveOptions{})
	if err == nil || !isOOM(err) {
		t.Fatalf("the move returned %v, want the target's OOM: the fault was not injected", err)
	}
	t.Logf("move: %v", err)
	if len(stats.Fixes) != 1 || stats.Fixes[0].Action != FixRolledBack || stats.Fixes[0].Owner != src.ID || stats.Fixes[0].Keys == 0 {
		t.Fatalf("fixes = %+v, want slot %d rolled back to %s with the keys that had moved", stats.Fixes, slot, src.Addr)
	}
	t.Logf("rolled back %d keys (%s); the whole move, OOM and roll back, took %s", stats.Fixes[0].Keys, stats.Fixes[0].Detail, stats.Elapsed.Round(time.Millisecond))
	c.assertNoOpenSlot()
	mem := nodes.ParseInfoFields(c.do(dst.Addr, "INFO", "memory").Val().(string), func(f string) bool { return f == "used_memory" || f == "maxmemory" })
	t.Logf("target memory after the roll back: %v", mem)
	time.Sleep(time.Second)
	w.stopAndVerify(ctx, t)
	c.assertGiant(keys, slot, src)
	redisCliCheck(ctx, t, c.servers[0].addr, "")
}

// TestFixRollsBackHalfMovedSlotIntoFullTarget leaves a giant slot half moved into a target
// that is now full (MIGRATE moved keys until the target answered OOM), as the rebalance of
// 2026-11-28 left three: Fix rolls it back instead of retrying the finish, and says why.
func TestFixRollsBackHalfMovedSlotIntoFullTarget(t *testing.T) {
	t.Parallel()
	c, slot, src, dst, keys := newGiantSlot(t, "half")
	ctx := c.ctx
	c.do(dst.Addr, "CLUSTER", "SETSLOT", slot, "IMPORTING", src.ID)
	c.do(src.Addr, "CLUSTER", "SETSLOT", slot, "MIGRATING", dst.ID)
	oom := false
	for i := 0; i < len(keys) && !oom; i += 10 {
		args := []any{"MIGRATE", dst.Host, dst.Port, "", 0, 5000, "KEYS"}
		for _, k := range keys[i:min(i+10, len(keys))] {
			args = append(args, k)
		}
		oom = isOOM(c.admin.Client(src.Addr).Do(ctx, args...).Err())
	}
	if !oom || c.count(dst, slot) == 0 {
		t.Fatalf("the target took %d keys without OOM: the fault was not injected", c.count(dst, slot))
	}
	start := time.Now()
	fixes, err := c.admin.Fix(ctx, addrsOf(c.servers), MoveOptions{})
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if len(fixes) != 1 || fixes[0].Action != FixRolledBack || fixes[0].Owner != src.ID {
		t.Fatalf("fixes = %+v, want slot %d rolled back to %s", fixes, slot, src.Addr)
	}
	t.Logf("from the failed move to no open slot: %s (%d keys moved back: %s)", took.Round(time.Millisecond), fixes[0].Keys, fixes[0].Detail)
	c.assertNoOpenSlot()
	c.assertGiant(keys, slot, src)
	redisCliCheck(ctx, t, c.servers[0].addr, "")
}

// TestRebalanceHoldsGiantSlot reshards a giant slot to a master with too little room: the
// fitting holds it (nothing is opened, the target never answers OOM) and says so.
func TestRebalanceHoldsGiantSlot(t *testing.T) {
	t.Parallel()
	c, slot, src, dst, keys := newGiantSlot(t, "held")
	ctx := c.ctx
	topo, err := c.admin.loadTopology(ctx, addrsOf(c.servers))
	if err != nil {
		t.Fatal(err)
	}
	small := slot + 1
	if !nodes.OwnsSlot(src, small) {
		small = slot - 1
	}
	stats, err := c.admin.executeFitted(ctx, topo, []layout.Move{{Source: src.ID, Target: dst.ID, Slots: []int{slot, small}}}, MoveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(stats.Held) != 1 || stats.Held[0].Slot != slot || !stats.Held[0].Giant || stats.Held[0].Size.Keys != 480 || stats.Held[0].Size.Bytes < 480*giantValue {
		t.Fatalf("held = %+v, want slot %d with 480 keys of at least %d bytes", stats.Held, slot, 480*giantValue)
	}
	if stats.Slots != 1 {
		t.Errorf("%d slots moved, want the small slot %d", stats.Slots, small)
	}
	t.Logf("held: %s", stats.Held[0])
	if got := c.do(dst.Addr, "INFO", "errorstats").Val().(string); strings.Contains(got, "errorstat_OOM") {
		t.Errorf("the target refused writes with OOM: %s", got)
	}
	c.assertNoOpenSlot()
	c.assertGiant(keys, slot, src)
}

// TestRebalanceHoldsGiantSlotWithoutMemoryUsage: the same fitting as an operator user whose
// rules predate the MEMORY USAGE grant (nodes started by an older operator keep their rules
// until restarted): the slot sizes come from the node's mean key size instead, the giant
// slot is still held, and nothing is opened.
func TestRebalanceHoldsGiantSlotWithoutMemoryUsage(t *testing.T) {
	t.Parallel()
	c, slot, src, dst, keys := newGiantSlot(t, "noperm")
	ctx := c.ctx
	const user, pw = "oldrules", "oldrules-pw"
	for _, n := range c.masters {
		c.do(n.Addr, "ACL", "SETUSER", user, "on", ">"+pw, "~*", "resetchannels", "-@all", "+ping", "+info", "+dbsize",
			"+cluster|nodes", "+cluster|info", "+cluster|countkeysinslot", "+cluster|getkeysinslot", "+cluster|setslot",
			"+migrate", "+asking", "+dump", "+select", "+restore-asking", "+config|set")
	}
	admin := NewAdmin(pw, 2*time.Second).WithUser(user)
	t.Cleanup(func() { _ = admin.Close() })
	if err := admin.Client(src.Addr).Do(ctx, "MEMORY", "USAGE", keys[0]).Err(); err == nil || !strings.HasPrefix(err.Error(), "NOPERM") {
		t.Fatalf("MEMORY USAGE as %s answered %v, want NOPERM: the fault was not staged", user, err)
	}
	topo, err := admin.loadTopology(ctx, addrsOf(c.servers))
	if err != nil {
		t.Fatal(err)
	}
	stats, err := admin.executeFitted(ctx, topo, []layout.Move{{Source: src.ID, Target: dst.ID, Slots: []int{slot}}}, MoveOptions{})
	if err != nil {
		t.Fatalf("the move as a user without MEMORY USAGE: %v", err)
	}
	if len(stats.Held) != 1 || stats.Held[0].Slot != slot || !stats.Held[0].Giant || stats.Held[0].Size.Bytes < 480*giantValue {
		t.Fatalf("held = %+v, want slot %d, giant, estimated at least %d bytes from the mean key size", stats.Held, slot, 480*giantValue)
	}
	t.Logf("held by the mean key size: %s", stats.Held[0])
	c.assertNoOpenSlot()
	c.assertGiant(keys, slot, src)
}
