package rdbload_test

import (
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/middleware-operator/middleware-operator/internal/rdbload"
	"github.com/middleware-operator/middleware-operator/internal/rdbstream"
	"github.com/middleware-operator/middleware-operator/tests/localcluster"
	"github.com/middleware-operator/middleware-operator/tests/testredis"
)

// TestAppendOnlyPausedForALoadHoldsEveryKeyOnceResumed: a master and its replica load with
// their AOF off (a replica that does not answer is skipped); once resume returns, each
// holds every loaded key on its own disk: killed (SIGKILL) at that moment and started
// again on its directory, each comes back from its AOF with all of them.
func TestAppendOnlyPausedForALoadHoldsEveryKeyOnceResumed(t *testing.T) {
	ctx := t.Context()
	masterDir, replicaDir := t.TempDir(), t.TempDir()
	master := testredis.Start(t, masterDir, goredis.Options{}, "--appendonly", "yes")
	host, port, _ := strings.Cut(master.Addr, ":")
	replica := testredis.Start(t, replicaDir, goredis.Options{}, "--appendonly", "yes", "--replicaof", host, port)
	if err := testredis.WaitFor(ctx, func() bool { return infoField(t, replica.Client, "replication", "master_link_status") == "up" }); err != nil {
		t.Fatal("the replica never linked")
	}
	free, err := localcluster.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	gone := rdbstream.Options{Addr: "127.0.0.1:" + strconv.Itoa(free[0])} // nothing listens there

	resume, err := rdbload.PauseAppendOnly(ctx, rdbstream.Options{Addr: master.Addr}, []rdbstream.Options{{Addr: replica.Addr}, gone})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []*testredis.Server{master, replica} {
		if got := infoField(t, s.Client, "persistence", "aof_enabled"); got != "0" {
			t.Fatalf("%s: aof_enabled %s during the load, want 0", s.Addr, got)
		}
	}
	const keys = 100_000
	for start := 0; start < keys; start += 10_000 {
		pipe := master.Client.Pipeline()
		for i := start; i < start+10_000; i++ {
			pipe.Set(ctx, fmt.Sprintf("key:%d", i), testredis.Value(i), 0)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := testredis.WaitFor(ctx, func() bool { return replica.Client.DBSize(ctx).Val() == keys }); err != nil {
		t.Fatal("the replica never received every key")
	}
	if err := resume(ctx); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*testredis.Server{master, replica} {
		pid, err := strconv.Atoi(infoField(t, s.Client, "server", "process_id"))
		if err != nil {
			t.Fatal(err)
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
	}
	for _, dir := range []string{masterDir, replicaDir} {
		again := testredis.Start(t, dir, goredis.Options{}, "--appendonly", "yes")
		if n := again.Client.DBSize(ctx).Val(); n != keys {
			t.Errorf("started again on %s after a kill: %d keys, want %d (%s)", dir, n, keys, infoField(t, again.Client, "persistence", "aof_last_bgrewrite_status"))
		}
	}
}

// TestAppendOnlyIsPausedOnlyForLoadsThatWouldRewriteIt: with Redis's defaults (rewrites at
// 64 MB, doubling), a 39 MB shard loads with the AOF on and a 64 MB one with it off; with
// automatic rewrites off, none is paused.
func TestAppendOnlyIsPausedOnlyForLoadsThatWouldRewriteIt(t *testing.T) {
	ctx := t.Context()
	defaults := testredis.Start(t, t.TempDir(), goredis.Options{})
	noRewrites := testredis.Start(t, t.TempDir(), goredis.Options{}, "--auto-aof-rewrite-percentage", "0")
	for _, c := range []struct {
		node *testredis.Server
		size int64
		want bool
	}{{defaults, 39 << 20, false}, {defaults, 64 << 20, true}, {defaults, 1 << 30, true}, {noRewrites, 1 << 30, false}} {
		got, err := rdbload.WorthPausingAppendOnly(ctx, rdbstream.Options{Addr: c.node.Addr}, c.size)
		if err != nil || got != c.want {
			t.Errorf("a load of %d MiB into %s: pause %t, %v; want %t", c.size>>20, c.node.Addr, got, err, c.want)
		}
	}
}

// TestEnsureAppendOnlyGivesUpOnANodeThatIsGone: a node that does not answer fails the check
// within seconds, naming it (the restore's end tries again with the nodes as they are then),
// rather than holding the restore for the load's whole time limit.
func TestEnsureAppendOnlyGivesUpOnANodeThatIsGone(t *testing.T) {
	free, err := localcluster.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	gone := rdbstream.Options{Addr: "127.0.0.1:" + strconv.Itoa(free[0])}
	start := time.Now()
	err = rdbload.EnsureAppendOnly(t.Context(), []rdbstream.Options{gone})
	if err == nil || !strings.Contains(err.Error(), gone.Addr) || time.Since(start) > 10*time.Second {
		t.Fatalf("EnsureAppendOnly of a node gone returned %v after %s, want an error naming %s within 10 s", err, time.Since(start), gone.Addr)
	}
}
