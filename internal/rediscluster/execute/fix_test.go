package execute

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
	goredis "github.com/redis/go-redis/v9"
)

// slotCluster is a cluster of three masters under test, with helpers to open slots by
// hand the way an interrupted move leaves them.
type slotCluster struct {
	t       *testing.T
	ctx     context.Context
	admin   *Admin
	servers []*testServer
	cc      *goredis.ClusterClient
	// masters by address, as Check found them after creation.
	masters map[string]nodes.Node
}

func newSlotCluster(ctx context.Context, t *testing.T, extra ...string) *slotCluster {
	t.Helper()
	servers := startServers(t, 3, "", extra...)
	admin := NewAdmin("", 2*time.Second)
	t.Cleanup(func() { _ = admin.Close() })
	createCluster(ctx, t, admin, servers, 0)
	c := &slotCluster{t: t, ctx: ctx, admin: admin, servers: servers, masters: map[string]nodes.Node{}}
	c.cc = clusterClient(addrsOf(servers), "")
	t.Cleanup(func() { _ = c.cc.Close() })
	res, err := admin.Check(ctx, []string{servers[0].addr})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range res.Masters() {
		c.masters[m.Addr] = m
	}
	return c
}

// do runs a command on the node at addr and fails the test on error.
func (c *slotCluster) do(addr string, args ...any) *goredis.Cmd {
	c.t.Helper()
	cmd := c.admin.Client(addr).Do(c.ctx, args...)
	if err := cmd.Err(); err != nil {
		c.t.Fatalf("%s %v: %v", addr, args, err)
	}
	return cmd
}

// slotOf returns the slot of tag and the master serving it.
func (c *slotCluster) slotOf(tag string) (int, nodes.Node) {
	c.t.Helper()
	slot := int(c.do(c.servers[0].addr, "CLUSTER", "KEYSLOT", tag).Val().(int64))
	for _, m := range c.masters {
		if nodes.OwnsSlot(m, slot) {
			return slot, m
		}
	}
	c.t.Fatalf("no master serves slot %d", slot)
	return 0, nodes.Node{}
}

// other returns a master other than n.
func (c *slotCluster) other(n nodes.Node) nodes.Node {
	for _, addr := range addrsOf(c.servers) {
		if addr != n.Addr {
			return c.masters[addr]
		}
	}
	return nodes.Node{}
}

// fill writes n keys "{tag}:i" = "v:i" and returns them.
func (c *slotCluster) fill(tag string, n int) []string {
	c.t.Helper()
	var keys []string
	_, err := c.cc.Pipelined(c.ctx, func(p goredis.Pipeliner) error {
		for i := range n {
			k := fmt.Sprintf("{%s}:%d", tag, i)
			keys = append(keys, k)
			p.Set(c.ctx, k, "v:"+strconv.Itoa(i), 0)
		}
		return nil
	})
	if err != nil {
		c.t.Fatal(err)
	}
	return keys
}

// migrate moves keys from src to dst with MIGRATE, as an interrupted move would have.
func (c *slotCluster) migrate(src, dst nodes.Node, keys []string) {
	c.t.Helper()
	args := []any{"MIGRATE", dst.Host, dst.Port, "", 0, 5000, "KEYS"}
	for _, k := range keys {
		args = append(args, k)
	}
	c.do(src.Addr, args...)
}

// assertKeys checks every key reads back through the cluster client with its value.
func (c *slotCluster) assertKeys(keys []string) {
	c.t.Helper()
	for _, k := range keys {
		i := k[strings.LastIndexByte(k, ':')+1:]
		got, err := c.cc.Get(c.ctx, k).Result()
		if err != nil || got != "v:"+i {
			c.t.Errorf("%s = %q (%v), want v:%s", k, got, err, i)
		}
	}
}

// count returns the number of keys of slot on n.
func (c *slotCluster) count(n nodes.Node, slot int) int64 {
	c.t.Helper()
	return c.do(n.Addr, "CLUSTER", "COUNTKEYSINSLOT", slot).Val().(int64)
}

// healthy waits until Check finds no problem.
func (c *slotCluster) healthy() CheckResult {
	c.t.Helper()
	return waitCheck(c.ctx, c.t, c.admin, []string{c.servers[0].addr}, "a healthy cluster", func(r CheckResult) bool { return r.OK() })
}

// ownerOf returns the address of the master Check sees serving slot.
func ownerOf(res CheckResult, slot int) string {
	for _, m := range res.Masters() {
		if nodes.OwnsSlot(m, slot) {
			return m.Addr
		}
	}
	return ""
}

// TestFixOpenSlots leaves slots open the ways an interrupted move can, all at once, and
// checks one Fix finishes or rolls back each, with every key kept.
func TestFixOpenSlots(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	c := newSlotCluster(ctx, t)
	type scenario struct {
		open func(slot int, src, dst nodes.Node, keys []string)
		// wantAction lists the acceptable actions; wantTarget says whether dst must own
		// the slot afterwards (else src).
		wantAction []string
		wantTarget bool
	}
	scenarios := map[string]scenario{
		"half the keys moved": {
			open: func(slot int, src, dst nodes.Node, keys []string) {
				c.do(dst.Addr, "CLUSTER", "SETSLOT", slot, "IMPORTING", src.ID)
				c.do(src.Addr, "CLUSTER", "SETSLOT", slot, "MIGRATING", dst.ID)
				c.migrate(src, dst, keys[:len(keys)/2])
			},
			wantAction: []string{FixFinished}, wantTarget: true,
		},
		"no key moved": {
			open: func(slot int, src, dst nodes.Node, _ []string) {
				c.do(dst.Addr, "CLUSTER", "SETSLOT", slot, "IMPORTING", src.ID)
				c.do(src.Addr, "CLUSTER", "SETSLOT", slot, "MIGRATING", dst.ID)
			},
			wantAction: []string{FixRolledBack},
		},
		"target took the slot, source not told": {
			open: func(slot int, src, dst nodes.Node, keys []string) {
				c.do(dst.Addr, "CLUSTER", "SETSLOT", slot, "IMPORTING", src.ID)
				c.do(src.Addr, "CLUSTER", "SETSLOT", slot, "MIGRATING", dst.ID)
				c.migrate(src, dst, keys)
				c.do(dst.Addr, "CLUSTER", "SETSLOT", slot, "NODE", dst.ID)
			},
			// Depending on whether gossip told the source before Fix looks.
			wantAction: []string{FixFinished, FixClosed}, wantTarget: true,
		},
		"importing only": {
			open: func(slot int, src, dst nodes.Node, _ []string) {
				c.do(dst.Addr, "CLUSTER", "SETSLOT", slot, "IMPORTING", src.ID)
			},
			wantAction: []string{FixClosed},
		},
		"migrating only": {
			open: func(slot int, src, dst nodes.Node, _ []string) {
				c.do(src.Addr, "CLUSTER", "SETSLOT", slot, "MIGRATING", dst.ID)
			},
			wantAction: []string{FixRolledBack},
		},
		"source lost its migrating state": {
			open: func(slot int, src, dst nodes.Node, keys []string) {
				c.do(dst.Addr, "CLUSTER", "SETSLOT", slot, "IMPORTING", src.ID)
				c.do(src.Addr, "CLUSTER", "SETSLOT", slot, "MIGRATING", dst.ID)
				c.migrate(src, dst, keys[:3])
				c.do(src.Addr, "CLUSTER", "SETSLOT", slot, "STABLE")
			},
			wantAction: []string{FixFinished}, wantTarget: true,
		},
	}
	type opened struct {
		slot     int
		src, dst nodes.Node
		keys     []string
	}
	state := map[string]opened{}
	var all []string
	for name, sc := range scenarios {
		tag := strings.ReplaceAll(name, " ", "-")
		slot, src := c.slotOf(tag)
		dst := c.other(src)
		keys := c.fill(tag, 40)
		all = append(all, keys...)
		sc.open(slot, src, dst, keys)
		state[name] = opened{slot, src, dst, keys}
	}
	fixes, err := c.admin.Fix(ctx, []string{c.servers[0].addr}, MoveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bySlot := map[int]SlotFix{}
	for _, f := range fixes {
		bySlot[f.Slot] = f
		t.Logf("slot %d: %s (%d keys): %s", f.Slot, f.Action, f.Keys, f.Detail)
	}
	res := c.healthy()
	for name, sc := range scenarios {
		o := state[name]
		f, ok := bySlot[o.slot]
		if !ok {
			t.Errorf("%s: slot %d was not fixed", name, o.slot)
			continue
		}
		if !slices.Contains(sc.wantAction, f.Action) {
			t.Errorf("%s: action %q, want one of %q", name, f.Action, sc.wantAction)
		}
		want := o.src
		if sc.wantTarget {
			want = o.dst
		}
		if got := ownerOf(res, o.slot); got != want.Addr || f.Owner != want.ID {
			t.Errorf("%s: slot %d is served by %s (Fix says %s), want %s", name, o.slot, got, f.Owner, want.Addr)
		}
		other := o.dst
		if sc.wantTarget {
			other = o.src
		}
		if n := c.count(other, o.slot); n != 0 {
			t.Errorf("%s: %s still holds %d keys of slot %d", name, other.Addr, n, o.slot)
		}
	}
	c.assertKeys(all)
	if again, err := c.admin.Fix(ctx, []string{c.servers[0].addr}, MoveOptions{}); err != nil || len(again) != 0 {
		t.Errorf("a second Fix did %v (error %v), want nothing", again, err)
	}
	redisCliCheck(ctx, t, c.servers[0].addr, "")
}

// restart kills the server with SIGKILL and starts it again with the same arguments.
func (s *testServer) restart(t *testing.T, password string) {
	t.Helper()
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.done
	s.cmd = exec.Command(s.cmd.Path, s.cmd.Args[1:]...)
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	s.done = make(chan struct{})
	started := make(chan error, 1)
	spawner() <- func() { started <- s.cmd.Start() }
	if err := <-started; err != nil {
		t.Fatalf("while restarting redis-server: %v", err)
	}
	go func() {
		_ = s.cmd.Wait()
		close(s.done)
	}()
	if err := s.waitPing(password); err != nil {
		t.Fatal(err)
	}
}

// TestFixAfterSourceKilled kills the source master with SIGKILL in the middle of a move
// (after IMPORTING and MIGRATING are set and half the keys moved) and restarts it from its
// append-only file and nodes.conf; Fix finishes the move and no key is lost.
func TestFixAfterSourceKilled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	c := newSlotCluster(ctx, t, "--appendonly", "yes", "--appendfsync", "always")
	slot, src := c.slotOf("killed")
	dst := c.other(src)
	keys := c.fill("killed", 60)
	c.do(dst.Addr, "CLUSTER", "SETSLOT", slot, "IMPORTING", src.ID)
	c.do(src.Addr, "CLUSTER", "SETSLOT", slot, "MIGRATING", dst.ID)
	c.migrate(src, dst, keys[:25])
	for _, s := range c.servers {
		if s.addr == src.Addr {
			s.restart(t, "")
		}
	}
	fixes, err := c.admin.Fix(ctx, []string{c.servers[0].addr}, MoveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(fixes) != 1 || fixes[0].Slot != slot || fixes[0].Action != FixFinished || fixes[0].Keys != 35 {
		t.Errorf("fixes = %+v, want slot %d finished with 35 keys moved", fixes, slot)
	}
	res := c.healthy()
	if got := ownerOf(res, slot); got != dst.Addr {
		t.Errorf("slot %d is served by %s, want %s", slot, got, dst.Addr)
	}
	c.assertKeys(keys)
	redisCliCheck(ctx, t, c.servers[0].addr, "")
}

// TestFixStrayedSlot stages the split a cut scale in left on 2026-11-27: a master whose own
// view gives one of its slots, keys and all, to another master that does not claim it,
// while every other view still routes the slot to it. Nobody serves the slot. Fix gives it
// back to the master holding the keys, and every key reads back.
func TestFixStrayedSlot(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	c := newSlotCluster(ctx, t)
	slot, owner := c.slotOf("strayed")
	other := c.other(owner)
	keys := c.fill("strayed", 40)
	// DELSLOTS drops the slot from the owner's view without the key check SETSLOT NODE
	// makes; SETSLOT NODE then routes it to the other master, which never claimed it.
	c.do(owner.Addr, "CLUSTER", "DELSLOTS", slot)
	c.do(owner.Addr, "CLUSTER", "SETSLOT", slot, "NODE", other.ID)
	if _, err := c.cc.Get(ctx, keys[0]).Result(); err == nil {
		t.Fatalf("%s still reads back after the split was staged: the fault was not injected", keys[0])
	}
	fixes, err := c.admin.Fix(ctx, []string{c.servers[0].addr}, MoveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(fixes) != 1 || fixes[0].Slot != slot || fixes[0].Action != FixFinished || fixes[0].Owner != owner.ID {
		t.Fatalf("fixes = %+v, want slot %d given back to %s", fixes, slot, owner.Addr)
	}
	if got := ownerOf(c.healthy(), slot); got != owner.Addr {
		t.Errorf("slot %d is served by %s, want %s", slot, got, owner.Addr)
	}
	c.assertKeys(keys)
	redisCliCheck(ctx, t, c.servers[0].addr, "")
	if again, err := c.admin.Fix(ctx, []string{c.servers[0].addr}, MoveOptions{}); err != nil || len(again) != 0 {
		t.Errorf("a second Fix did %+v (%v), want nothing", again, err)
	}
}
