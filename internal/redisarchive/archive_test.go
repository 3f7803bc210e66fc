package redisarchive_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/middleware-operator/middleware-operator/internal/rdbload"
	"github.com/middleware-operator/middleware-operator/internal/rdbstream"
	"github.com/middleware-operator/middleware-operator/internal/redisarchive"
	"github.com/middleware-operator/middleware-operator/tests/testredis"
)

// mixedWrites writes after a base what an application does: overwrites, deletes, counters,
// every type, expiries (relative, which the stream carries as PEXPIREAT), a Lua script and a
// function (carried as their effects), a transaction, and a value of 1 MiB.
func mixedWrites(t testing.TB, c *goredis.Client) {
	t.Helper()
	ctx := context.Background()
	pipe := c.Pipeline()
	for i := range 2000 {
		pipe.Set(ctx, fmt.Sprintf("key:%d", i), fmt.Sprintf("new-%d", i), 0) // overwrites the base's
		pipe.Incr(ctx, fmt.Sprintf("counter:%d", i%10))
		pipe.RPush(ctx, fmt.Sprintf("list:%d", i%50), i)
		pipe.HIncrBy(ctx, fmt.Sprintf("hash:%d", i%50), "n", 1)
		pipe.ZIncrBy(ctx, "zset:board", 1, fmt.Sprintf("m%d", i%100))
		if i%7 == 0 {
			pipe.Del(ctx, fmt.Sprintf("key:%d", i+1))
		}
		if i%11 == 0 {
			pipe.Expire(ctx, fmt.Sprintf("key:%d", i), time.Hour)
			pipe.Set(ctx, fmt.Sprintf("ex:%d", i), i, 30*time.Minute)
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Eval(ctx, "redis.call('SET', KEYS[1], ARGV[1]); return redis.call('INCRBY', KEYS[2], 5)",
		[]string{"{lua}a", "{lua}b"}, "from-lua").Err(); err != nil {
		t.Fatal(err)
	}
	lib := "#!lua name=arch\nredis.register_function('bump', function(keys, args) return redis.call('APPEND', keys[1], args[1]) end)"
	if err := c.FunctionLoadReplace(ctx, lib).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.FCall(ctx, "bump", []string{"fn:key"}, "xyz").Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		p.Set(ctx, "{tx}a", 1, 0)
		p.Set(ctx, "{tx}b", 2, 0)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := c.Set(ctx, "big", strings.Repeat("b", 1<<20), 0).Err(); err != nil {
		t.Fatal(err)
	}
}

// TestArchiveReplaysEveryWrite (a): a base RDB taken with rdbstream.Fetch records its
// replication ID and offset; writes go on; a follower archives them from the base on; a
// fresh server loaded from the base and replayed to the archive's end holds exactly the
// source's keys (every key DUMP-equal, same expiries, 0 lost).
func TestArchiveReplaysEveryWrite(t *testing.T) {
	src := testredis.StartClusterNode(t, t.TempDir(), goredis.Options{})
	testredis.Dataset{Strings: 3000, Others: 100}.Write(t, src.Client)
	dir, b := base(t, src)
	// Written before the follower starts: still in the master's backlog.
	if err := src.Client.Set(t.Context(), "between", "base-and-follower", 0).Err(); err != nil {
		t.Fatal(err)
	}
	sink := &redisarchive.MemorySink{}
	f := follow(t, redisarchive.Options{Conn: rdbstream.Options{Addr: src.Addr}, From: redisarchive.Position{ReplID: b.ReplID, Offset: b.Offset}, Sink: sink})
	mixedWrites(t, src.Client)
	f.caughtUp(t, src.Client)
	f.stop(t)
	p := f.Progress()
	t.Logf("archived %d commands in %d segments, offsets %d..%d", p.Commands, p.Segments, b.Offset, p.Archived)

	dst := testredis.Restore(t, dir)
	res := replay(t, sink, dst, redisarchive.ReplayOptions{From: b.Offset})
	if !res.Complete || res.Commands == 0 {
		t.Fatalf("replay %+v: want the whole archive", res)
	}
	same(t, snapshot(t, src.Client), snapshot(t, dst))
}

// TestArchiveRestoresToATime (b): restored to a time T in the middle of a writer's run,
// the replay holds exactly the writes the archive received by T (every one, none after),
// and so, in the writer's terms, every key acknowledged before T less the archive's lag
// and none acknowledged after T plus the most a receive came before its ack. The lag is
// measured, not assumed (a busy machine delays the reader), and bounded by maxLag.
func TestArchiveRestoresToATime(t *testing.T) {
	const maxLag = 2 * time.Second
	src := testredis.Start(t, t.TempDir(), goredis.Options{})
	dir, b := base(t, src)
	sink := &redisarchive.MemorySink{}
	f := follow(t, redisarchive.Options{Conn: rdbstream.Options{Addr: src.Addr}, From: redisarchive.Position{ReplID: b.ReplID, Offset: b.Offset}, Sink: sink})
	w := startWriter(src.Client, "w")
	time.Sleep(1500 * time.Millisecond)
	acks := w.end(t)
	f.caughtUp(t, src.Client)
	target := acks[len(acks)/2]

	// How the archive's receive times relate to the acknowledgements.
	received := map[string]int64{}
	if err := redisarchive.Scan(t.Context(), sink, cluster, shard, 1, b.Offset, func(c redisarchive.Command) error {
		if c.Name == "set" {
			received[string(c.Args[1])] = c.Time
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var early, late time.Duration // the most a receive time came before / after its ack
	for i, ack := range acks {
		r, ok := received[fmt.Sprintf("w:%d", i)]
		if !ok {
			t.Fatalf("w:%d was acknowledged and is not in the archive", i)
		}
		d := time.UnixMilli(r).Sub(ack)
		early, late = max(early, -d), max(late, d)
	}
	t.Logf("%d writes; receive time minus ack time within [-%s, +%s] (ms resolution)", len(acks), early, late)
	if late > maxLag {
		t.Fatalf("the archive received a write %s after its ack, past %s", late, maxLag)
	}

	dst := testredis.Restore(t, dir)
	res := replay(t, sink, dst, redisarchive.ReplayOptions{From: b.Offset, Until: target})
	if res.Complete || res.Reached.After(target) {
		t.Fatalf("replay %+v went past the target %s", res, target)
	}
	ctx := t.Context()
	var wanted, missing, unwanted, present, before, after int
	for i, ack := range acks {
		key := fmt.Sprintf("w:%d", i)
		n, err := dst.Exists(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		if received[key] <= target.UnixMilli() {
			wanted++
			missing += int(1 - n)
		} else {
			unwanted++
			present += int(n)
		}
		// The same in acknowledgements: a margin of the measured lag on either side.
		switch {
		case ack.Before(target.Add(-late - time.Millisecond)):
			before++
		case ack.After(target.Add(early + time.Millisecond)):
			after++
		}
	}
	t.Logf("target %s: %d writes received by it (%d missing), %d after it (%d present); %d acknowledged more than the lag before it, %d after it",
		target.Format(time.RFC3339Nano), wanted, missing, unwanted, present, before, after)
	if missing > 0 || present > 0 || before == 0 || after == 0 {
		t.Fatal("the restore to the target time is not the data of that time")
	}
}

// TestArchiveUndoesFlushAll (c): a FLUSHALL in the stream; the replay to just before it
// (its receive time less a millisecond, as a person reading Scan would ask) gives back
// every key.
func TestArchiveUndoesFlushAll(t *testing.T) {
	src := testredis.Start(t, t.TempDir(), goredis.Options{})
	testredis.Dataset{Strings: 1000, Others: 50}.Write(t, src.Client)
	dir, b := base(t, src)
	sink := &redisarchive.MemorySink{}
	f := follow(t, redisarchive.Options{Conn: rdbstream.Options{Addr: src.Addr}, From: redisarchive.Position{ReplID: b.ReplID, Offset: b.Offset}, Sink: sink})
	mixedWrites(t, src.Client)
	want := snapshot(t, src.Client)
	time.Sleep(20 * time.Millisecond)
	ctx := t.Context()
	if err := src.Client.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := src.Client.Set(ctx, "after-the-flush", 1, 0).Err(); err != nil {
		t.Fatal(err)
	}
	f.caughtUp(t, src.Client)

	var flushed redisarchive.Command
	errFound := errors.New("found")
	if err := redisarchive.Scan(ctx, sink, cluster, shard, 1, b.Offset, func(c redisarchive.Command) error {
		if c.Name == "flushall" {
			flushed = c
			return errFound
		}
		return nil
	}); !errors.Is(err, errFound) {
		t.Fatalf("Scan found no FLUSHALL: %v", err)
	}
	// The follower says when it received it, for the operator's status and event.
	if p := f.Progress(); p.LastFlush.UnixMilli() != flushed.Time || p.LastFlushOffset != flushed.Offset {
		t.Errorf("Progress says the last flush was received at %s (offset %d), the archive at %d ms (offset %d)",
			p.LastFlush, p.LastFlushOffset, flushed.Time, flushed.Offset)
	}
	dst := testredis.Restore(t, dir)
	res := replay(t, sink, dst, redisarchive.ReplayOptions{From: b.Offset, Until: time.UnixMilli(flushed.Time - 1)})
	if res.Offset >= flushed.Offset {
		t.Fatalf("the replay reached offset %d, past the FLUSHALL ending at %d", res.Offset, flushed.Offset)
	}
	same(t, want, snapshot(t, dst))
}

// TestArchiveSurvivesAKilledFollower (d): the follower is killed in the middle of a
// writer's run (its open segment lost, as with a crash), and a new one resumes from the
// last segment's end: the master continues (+CONTINUE), no gap, 0 lost, counters and lists
// not applied twice.
func TestArchiveSurvivesAKilledFollower(t *testing.T) {
	src := testredis.Start(t, t.TempDir(), goredis.Options{})
	dir, b := base(t, src)
	sink := &redisarchive.MemorySink{}
	opts := redisarchive.Options{Conn: rdbstream.Options{Addr: src.Addr}, From: redisarchive.Position{ReplID: b.ReplID, Offset: b.Offset}, Sink: sink,
		SegmentAge: 300 * time.Millisecond}
	first := follow(t, opts)
	w := startWriter(src.Client, "w")
	stopCounting := make(chan struct{})
	counted := make(chan error, 1)
	go func() { // counters and lists: a command applied twice shows
		ctx := context.Background()
		for i := 0; ; i++ {
			select {
			case <-stopCounting:
				counted <- nil
				return
			default:
			}
			if err := src.Client.Incr(ctx, "counter").Err(); err != nil {
				counted <- err
				return
			}
			if err := src.Client.RPush(ctx, "list", i).Err(); err != nil {
				counted <- err
				return
			}
		}
	}()
	// Killed once a segment is archived and the next one holds commands: no Stop, the open
	// segment is not written.
	if err := testredis.WaitFor(t.Context(), func() bool { p := first.Progress(); return p.Segments >= 1 && p.Open > 0 }); err != nil {
		t.Fatalf("the follower never archived a segment with another open: %+v", first.Progress())
	}
	first.cancel()
	if err := first.result(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run returned %v", err)
	}
	killed := first.Progress()
	if killed.Received <= killed.Archived || killed.Segments == 0 {
		t.Fatalf("the follower was killed at %+v: nothing received past the archive, the test proves nothing", killed)
	}
	time.Sleep(300 * time.Millisecond) // writes go on while no follower runs

	from, ok, err := redisarchive.Resume(t.Context(), sink, cluster, shard, 1)
	if err != nil || !ok || from.Offset > killed.Archived || from.Offset < killed.Archived-100 {
		t.Fatalf("Resume = %+v, %v, %v; the killed follower had archived up to %d", from, ok, err, killed.Archived)
	}
	opts.From = from
	second := follow(t, opts)
	time.Sleep(300 * time.Millisecond)
	w.end(t)
	close(stopCounting)
	if err := <-counted; err != nil {
		t.Fatal(err)
	}
	second.caughtUp(t, src.Client)
	if p := second.Progress(); p.Connections != 1 || p.LastError != "" {
		t.Fatalf("the resumed follower: %+v", p)
	}
	t.Logf("killed with %d bytes received and not archived; resumed from offset %d", killed.Received-killed.Archived, from.Offset)

	dst := testredis.Restore(t, dir)
	replay(t, sink, dst, redisarchive.ReplayOptions{From: b.Offset})
	same(t, snapshot(t, src.Client), snapshot(t, dst))
}

// TestArchiveFollowsAFailover (e): the master's replica is promoted (REPLICAOF NO ONE) and
// the old master shut down; the follower reconnects to the new master with the old
// history's ID and offset, which it continues through its replid2: +CONTINUE, no gap, and
// the replay of the archive gives the new master's data. The old master's SHUTDOWN sent a
// GETACK the new master never had: the follower steps back over it once (Rewinds).
func TestArchiveFollowsAFailover(t *testing.T) {
	// No PING of the master to its replicas: one sent between the replica's catching up and
	// its promotion would reach the follower and not the new master, which could then not
	// continue the follower's history (a real gap, which TestArchiveReportsAGap covers; CI
	// met it once under load).
	oldMaster := testredis.Start(t, t.TempDir(), goredis.Options{}, "--repl-ping-replica-period", "3600")
	host, port, _ := strings.Cut(oldMaster.Addr, ":")
	// The follower stays away GetAckPause (2 s) after the old master's shutdown GETACK, while
	// the writer below writes to the new master as fast as it can (1.3 MB in CI's slowest
	// run): the new master's backlog must hold that, as docs/backup.md asks of users, or the
	// follower meets a real gap (TestArchiveReportsAGap's case, not the failover staged here;
	// CI met it three times with Redis's default 1 MB).
	replica := testredis.Start(t, t.TempDir(), goredis.Options{}, "--replicaof", host, port, "--repl-backlog-size", "64mb")
	ctx := t.Context()
	testredis.Dataset{Strings: 1000, Others: 20}.Write(t, oldMaster.Client)
	dir, b := base(t, oldMaster)
	var master atomic.Value
	master.Store(oldMaster.Addr)
	sink := &redisarchive.MemorySink{}
	f := follow(t, redisarchive.Options{
		Master: func(context.Context) (string, error) { return master.Load().(string), nil },
		From:   redisarchive.Position{ReplID: b.ReplID, Offset: b.Offset}, Sink: sink,
	})
	mixedWrites(t, oldMaster.Client)
	// As a manual failover does, the old master stops writing until its replica took over:
	// while paused nothing reaches its stream, so the follower, the replica and the old
	// master can be checked at one offset. It resumes just before it shuts down, so that its
	// shutdown's GETACK still reaches the follower, which steps back over it (Rewinds).
	if err := oldMaster.Client.Do(ctx, "CLIENT", "PAUSE", "60000", "WRITE").Err(); err != nil {
		t.Fatal(err)
	}
	f.caughtUp(t, oldMaster.Client)
	if err := testredis.WaitFor(ctx, func() bool { return replOffset(t, replica.Client) == replOffset(t, oldMaster.Client) }); err != nil {
		t.Fatal("the replica never caught up")
	}
	if got, want := f.Progress().Received, replOffset(t, oldMaster.Client); got != want {
		t.Fatalf("the follower received up to %d, the paused old master wrote %d", got, want)
	}
	oldID := f.Progress().ReplID

	if err := replica.Client.Do(ctx, "REPLICAOF", "NO", "ONE").Err(); err != nil {
		t.Fatal(err)
	}
	master.Store(replica.Addr)
	if err := oldMaster.Client.Do(ctx, "CLIENT", "UNPAUSE").Err(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_ = oldMaster.Client.Shutdown(ctx).Err() // its connection ends: no answer
	t.Logf("the old master shut down in %s with the follower connected", time.Since(start).Round(time.Millisecond))
	w := startWriter(replica.Client, "after")
	time.Sleep(500 * time.Millisecond)
	w.end(t)
	f.caughtUp(t, replica.Client)
	f.stop(t)
	p := f.Progress()
	info, _ := replica.Client.Info(ctx, "replication").Result()
	t.Logf("after the failover: %+v", p)
	if p.ReplID == oldID || !strings.Contains(info, "master_replid:"+p.ReplID) || !strings.Contains(info, "master_replid2:"+oldID) || p.Connections < 2 ||
		p.Rewinds != 1 {
		t.Fatalf("after the failover the follower is at %+v (history %s before); the new master says:\n%s", p, oldID, info)
	}
	dst := testredis.Restore(t, dir)
	replay(t, sink, dst, redisarchive.ReplayOptions{From: b.Offset})
	same(t, snapshot(t, replica.Client), snapshot(t, dst))
}

// TestArchiveReportsAGap (f): the follower is away while more is written than the master's
// backlog holds; the master offers a full resync, which the follower reports as a gap
// (*GapError) and never continues past: the timeline ends where its last segment ends, and
// a new timeline starts from a new base.
func TestArchiveReportsAGap(t *testing.T) {
	src := testredis.Start(t, t.TempDir(), goredis.Options{}, "--repl-backlog-size", "16kb")
	_, b := base(t, src)
	sink := &redisarchive.MemorySink{}
	opts := redisarchive.Options{Conn: rdbstream.Options{Addr: src.Addr}, From: redisarchive.Position{ReplID: b.ReplID, Offset: b.Offset}, Sink: sink}
	f := follow(t, opts)
	mixedWrites(t, src.Client)
	f.caughtUp(t, src.Client)
	f.stop(t)

	ctx := t.Context()
	pipe := src.Client.Pipeline()
	for i := range 2000 {
		pipe.Set(ctx, fmt.Sprintf("while-away:%d", i), strings.Repeat("x", 100), 0)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	from, _, err := redisarchive.Resume(ctx, sink, cluster, shard, 1)
	if err != nil {
		t.Fatal(err)
	}
	opts.From = from
	again := follow(t, opts)
	var gap *redisarchive.GapError
	select {
	case <-again.done:
		err = again.err
	case <-time.After(10 * time.Second):
		t.Fatalf("the follower went on without a gap: %+v", again.Progress())
	}
	if !errors.As(err, &gap) || gap.From != from {
		t.Fatalf("Run returned %v, want a gap from %+v", err, from)
	}
	t.Log(err)
	if after, _, _ := redisarchive.Resume(ctx, sink, cluster, shard, 1); after != from {
		t.Fatalf("timeline 1 ends at %+v after the gap, want %+v: something was archived past it", after, from)
	}
	// What follows: a new base, timeline 2.
	dir2, b2 := base(t, src)
	opts.From, opts.Timeline = redisarchive.Position{ReplID: b2.ReplID, Offset: b2.Offset}, 2
	next := follow(t, opts)
	if err := src.Client.Set(ctx, "on-timeline-2", 1, 0).Err(); err != nil {
		t.Fatal(err)
	}
	next.caughtUp(t, src.Client)
	dst := testredis.Restore(t, dir2)
	replay(t, sink, dst, redisarchive.ReplayOptions{Cluster: cluster, Shard: shard, Timeline: 2, From: b2.Offset})
	same(t, snapshot(t, src.Client), snapshot(t, dst))
}

// TestReplayTriedAgainAppliesEveryCommandOnce: a restore whose replay failed half-way is
// tried again as the operator does it (the load's slots emptied with rdbload.ClearSlots, the
// base loaded again, the whole archive replayed): the node ends exactly as the source, every
// counter and list counted once. Without the emptying, the INCRs and RPUSHes of keys the
// base does not hold would apply twice.
func TestReplayTriedAgainAppliesEveryCommandOnce(t *testing.T) {
	src := testredis.StartClusterNode(t, t.TempDir(), goredis.Options{})
	testredis.Dataset{Strings: 1000, Others: 50}.Write(t, src.Client)
	dir, b := base(t, src)
	sink := &redisarchive.MemorySink{}
	f := follow(t, redisarchive.Options{Conn: rdbstream.Options{Addr: src.Addr}, From: redisarchive.Position{ReplID: b.ReplID, Offset: b.Offset}, Sink: sink})
	mixedWrites(t, src.Client)
	f.caughtUp(t, src.Client)
	f.stop(t)
	archived := f.Progress().Archived

	dst := testredis.StartClusterNode(t, t.TempDir(), goredis.Options{})
	node := rdbstream.Options{Addr: dst.Addr}
	all := []rdbload.SlotRange{{From: 0, To: rdbload.Slots - 1}}
	loadBase := func() {
		t.Helper()
		file, err := os.Open(filepath.Join(dir, "dump.rdb"))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = file.Close() }()
		if _, err := rdbload.Load(t.Context(), rdbload.Options{Node: node, Slots: all}, file); err != nil {
			t.Fatal(err)
		}
	}
	loadBase()
	half := replay(t, sink, dst.Client, redisarchive.ReplayOptions{From: b.Offset, UntilOffset: b.Offset + (archived-b.Offset)/2})
	if half.Complete || half.Commands == 0 {
		t.Fatalf("the first attempt replayed %+v: want part of the archive", half)
	}
	removed, err := rdbload.ClearSlots(t.Context(), node, all)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the first attempt replayed %d commands; %d keys cleared before the second", half.Commands, removed)
	loadBase()
	replay(t, sink, dst.Client, redisarchive.ReplayOptions{From: b.Offset})
	same(t, snapshot(t, src.Client), snapshot(t, dst.Client))
}
