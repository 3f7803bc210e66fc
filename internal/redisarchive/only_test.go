package redisarchive_test

import (
	"errors"
	"strings"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/middleware-operator/middleware-operator/internal/rdbload"
	"github.com/middleware-operator/middleware-operator/internal/rdbstream"
	"github.com/middleware-operator/middleware-operator/internal/redisarchive"
	"github.com/middleware-operator/middleware-operator/tests/testredis"
)

// TestReplayKeptToSomeSlots: a replay kept to the slot of {a} (a reload of lost slots into
// a master that serves others) applies every write to {a} keys, those whose key is not
// their first argument included (BITOP, XGROUP), and none to {b} keys; a FLUSHALL in the
// archive stops it with a NodeWideError instead of reaching the other slots.
func TestReplayKeptToSomeSlots(t *testing.T) {
	src := testredis.Start(t, t.TempDir(), goredis.Options{})
	dir, b := base(t, src)
	sink := &redisarchive.MemorySink{}
	f := follow(t, redisarchive.Options{Conn: rdbstream.Options{Addr: src.Addr}, From: redisarchive.Position{ReplID: b.ReplID, Offset: b.Offset}, Sink: sink})
	ctx := t.Context()
	for _, tag := range []string{"{a}", "{b}"} {
		for _, cmd := range [][]any{
			{"SET", tag + "s", "1"}, {"INCR", tag + "n"}, {"RPUSH", tag + "l", "x", "y"}, {"SETBIT", tag + "bits", "3", "1"},
			{"BITOP", "OR", tag + "or", tag + "bits"}, {"XADD", tag + "x", "*", "f", "v"}, {"XGROUP", "CREATE", tag + "x", "g", "0"},
			{"SET", tag + "ex", "v", "EX", "1000"},
		} {
			if err := src.Client.Do(ctx, cmd...).Err(); err != nil {
				t.Fatalf("%v: %v", cmd, err)
			}
		}
	}
	f.caughtUp(t, src.Client)
	aSlot := rdbload.KeySlot("{a}")
	only := func(slot int) bool { return slot == aSlot }

	dst := testredis.Restore(t, dir)
	res := replay(t, sink, dst, redisarchive.ReplayOptions{From: b.Offset, Only: only})
	keys, err := dst.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if !strings.HasPrefix(k, "{a}") {
			t.Errorf("the replay kept to {a}'s slot wrote %s", k)
		}
	}
	want := snapshot(t, src.Client)
	for k := range want {
		if !strings.HasPrefix(k, "{a}") {
			delete(want, k)
		}
	}
	same(t, want, snapshot(t, dst))
	if groups, err := dst.XInfoGroups(ctx, "{a}x").Result(); err != nil || len(groups) != 1 {
		t.Errorf("{a}x's consumer groups %v (%v), want the one XGROUP CREATE made", groups, err)
	}
	if res.Filtered == 0 {
		t.Errorf("replay %+v filtered nothing", res)
	}
	t.Logf("%d commands applied, %d left out for their slot", res.Commands, res.Filtered)

	if err := src.Client.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	f.caughtUp(t, src.Client)
	_, err = redisarchive.Replay(ctx, sink, redisarchive.ReplayOptions{Target: rdbstream.Options{Addr: dst.Options().Addr}, Cluster: cluster, Shard: shard, Timeline: 1,
		From: res.Offset, Only: only})
	var wide *redisarchive.NodeWideError
	if !errors.As(err, &wide) || wide.Command != "flushall" {
		t.Fatalf("replaying a FLUSHALL kept to some slots: %v, want a NodeWideError", err)
	}
	if n, _ := dst.DBSize(ctx).Result(); n == 0 {
		t.Error("the FLUSHALL reached the target")
	}
}
