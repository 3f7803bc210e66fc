package redisarchive_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/middleware-operator/middleware-operator/internal/rdbstream"
	"github.com/middleware-operator/middleware-operator/internal/redisarchive"
	"github.com/middleware-operator/middleware-operator/tests/testredis"
)

// serverLog is the log of a testredis server.
func serverLog(t *testing.T, s *testredis.Server) string {
	t.Helper()
	_, port, _ := strings.Cut(s.Addr, ":")
	data, err := os.ReadFile(filepath.Join(s.Dir, "redis-"+port+".log"))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestFollowerIsNotAGoodReplica measures what a master makes of a follower that never
// acknowledges: min-replicas-to-write counts it only for min-replicas-max-lag seconds after
// its PSYNC (Redis sets the acknowledgement time there), WAIT never counts it, and the
// master's repl-timeout drops it, which KeepAlive (reconnecting before repl-timeout) avoids
// without losing a write.
func TestFollowerIsNotAGoodReplica(t *testing.T) {
	ctx := t.Context()
	// silent: never reconnects on its own, under min-replicas-to-write 1, max lag 1 s.
	silent := testredis.Start(t, t.TempDir(), goredis.Options{}, "--min-replicas-to-write", "1", "--min-replicas-max-lag", "1", "--repl-timeout", "3")
	_, b1 := base(t, silent)
	fs := follow(t, redisarchive.Options{Conn: rdbstream.Options{Addr: silent.Addr}, From: redisarchive.Position{ReplID: b1.ReplID, Offset: b1.Offset},
		Sink: &redisarchive.MemorySink{}, KeepAlive: -1})
	// kept: reconnects every 2 s, under repl-timeout 3 s, while a writer runs.
	kept := testredis.Start(t, t.TempDir(), goredis.Options{}, "--repl-timeout", "3")
	dir, b2 := base(t, kept)
	sink := &redisarchive.MemorySink{}
	fk := follow(t, redisarchive.Options{Conn: rdbstream.Options{Addr: kept.Addr}, From: redisarchive.Position{ReplID: b2.ReplID, Offset: b2.Offset},
		Sink: sink, KeepAlive: 2 * time.Second})
	w := startWriter(kept.Client, "w")

	if err := testredis.WaitFor(ctx, func() bool { return fs.Progress().Connections == 1 }); err != nil {
		t.Fatal("the follower never connected")
	}
	connected := time.Now()
	// psyncs are the earliest times the follower's PSYNCs can have been: when the previous
	// probe still saw the connection count before them.
	psyncs := []time.Time{connected}
	var accepted, refused []time.Duration
	var acceptedAt []time.Time
	seen := connected
	for conns := 1; time.Since(connected) < 6*time.Second; {
		err := silent.Client.Set(ctx, "probe", 1, 0).Err()
		if n := fs.Progress().Connections; n > conns {
			conns, psyncs = n, append(psyncs, seen)
		}
		seen = time.Now()
		switch {
		case err == nil:
			accepted, acceptedAt = append(accepted, time.Since(connected)), append(acceptedAt, time.Now())
		case strings.HasPrefix(err.Error(), "NOREPLICAS"):
			refused = append(refused, time.Since(connected))
		default:
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// A write accepted more than max lag (1 s), the whole second Redis rounds a lag down to
	// (it counts lag as unixtime - ack time in whole seconds: a lag of 1 is up to 2 s), a cron
	// period (1 s) and slack for a loaded machine after the last PSYNC before it is outside
	// (2.5 s allowed, without the rounding, failed at 2.5-2.7 s in a loaded CI run). The
	// master counts the follower from its PSYNC, which the follower's count shows only once
	// it has read +CONTINUE: a PSYNC seen up to 500 ms after a write may have come before it.
	var outside []time.Duration
	for _, at := range acceptedAt {
		last := psyncs[0]
		for _, p := range psyncs {
			if p.Before(at.Add(500 * time.Millisecond)) {
				last = p
			}
		}
		if since := at.Sub(last); since > 3500*time.Millisecond {
			outside = append(outside, since)
		}
	}
	info, _ := silent.Client.Info(ctx, "replication").Result()
	t.Logf("min-replicas-to-write 1, max lag 1 s, a follower only, PSYNCs at %v: writes accepted at %v, %d refused", since(connected, psyncs), round(accepted), len(refused))
	if len(refused) == 0 || len(outside) > 0 {
		t.Fatalf("the master counted the follower as a good replica beyond max lag after a PSYNC: %v\n%s", outside, info)
	}
	log := serverLog(t, silent)
	if !strings.Contains(log, "Disconnecting timedout replica") || fs.Progress().Connections < 2 {
		t.Fatalf("repl-timeout 3 s did not drop the silent follower (connections %d):\n%s", fs.Progress().Connections, log)
	}
	n, err := silent.Client.Do(ctx, "WAIT", 1, 200).Int()
	if err != nil || n != 0 {
		t.Fatalf("WAIT 1 200 = %d, %v: the follower was counted", n, err)
	}

	w.end(t)
	fk.caughtUp(t, kept.Client)
	if log := serverLog(t, kept); strings.Contains(log, "Disconnecting timedout replica") || fk.Progress().Connections < 3 {
		t.Fatalf("with KeepAlive 2 s under repl-timeout 3 s: %d connections, log:\n%s", fk.Progress().Connections, log)
	}
	t.Logf("KeepAlive 2 s: %d connections in %s, no timeout in the master's log", fk.Progress().Connections, time.Since(connected).Round(time.Second))
	dst := testredis.Restore(t, dir)
	replay(t, sink, dst, redisarchive.ReplayOptions{From: b2.Offset})
	same(t, snapshot(t, kept.Client), snapshot(t, dst))
}

func since(start time.Time, ts []time.Time) []time.Duration {
	out := make([]time.Duration, len(ts))
	for i, t := range ts {
		out[i] = t.Sub(start).Round(100 * time.Millisecond)
	}
	return out
}

func round(d []time.Duration) []time.Duration {
	out := make([]time.Duration, len(d))
	for i, x := range d {
		out[i] = x.Round(100 * time.Millisecond)
	}
	return out
}

// TestShutdownIsNotHeldByTheFollower: a master asked to SHUTDOWN waits up to
// shutdown-timeout for every replica to acknowledge its offset, and sends them REPLCONF
// GETACK. A follower that stays (GetAckPause < 0) holds it the whole timeout; one that
// leaves on GETACK (the default) lets it go at once.
func TestShutdownIsNotHeldByTheFollower(t *testing.T) {
	took := map[string]time.Duration{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, mode := range []string{"stays", "leaves"} {
		s := testredis.Start(t, t.TempDir(), goredis.Options{}, "--shutdown-timeout", "3")
		_, b := base(t, s)
		pause := time.Duration(-1)
		if mode == "leaves" {
			pause = 0
		}
		f := follow(t, redisarchive.Options{Conn: rdbstream.Options{Addr: s.Addr}, From: redisarchive.Position{ReplID: b.ReplID, Offset: b.Offset},
			Sink: &redisarchive.MemorySink{}, GetAckPause: pause})
		if err := s.Client.Set(t.Context(), "k", 1, 0).Err(); err != nil {
			t.Fatal(err)
		}
		f.caughtUp(t, s.Client)
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			_ = s.Client.Shutdown(context.Background()).Err()
			mu.Lock()
			took[mode] = time.Since(start)
			mu.Unlock()
		}()
	}
	wg.Wait()
	t.Logf("SHUTDOWN with shutdown-timeout 3 s: %s with a follower that stays, %s with one that leaves on GETACK",
		took["stays"].Round(time.Millisecond), took["leaves"].Round(time.Millisecond))
	if took["stays"] < 2500*time.Millisecond || took["leaves"] > time.Second {
		t.Fatal("the follower's answer to GETACK does not decide how long SHUTDOWN waits")
	}
}

// TestArchiveFromAReplica follows a replica instead of the master: a replica passes its
// master's stream on to its own replicas unchanged (same replication ID and offsets), so
// the archive is the same, and the master never sees the follower (its INFO replication
// lists the replica alone), which keeps min-replicas-to-write, WAIT and SHUTDOWN on the
// master entirely out of the follower's reach.
func TestArchiveFromAReplica(t *testing.T) {
	master := testredis.Start(t, t.TempDir(), goredis.Options{})
	host, port, _ := strings.Cut(master.Addr, ":")
	replica := testredis.Start(t, t.TempDir(), goredis.Options{}, "--replicaof", host, port)
	ctx := t.Context()
	if err := testredis.WaitFor(ctx, func() bool {
		return strings.Contains(replica.Client.Info(ctx, "replication").Val(), "master_link_status:up")
	}); err != nil {
		t.Fatal("the replica never linked")
	}
	testredis.Dataset{Strings: 500, Others: 10}.Write(t, master.Client)
	dir, b := base(t, replica)
	sink := &redisarchive.MemorySink{}
	f := follow(t, redisarchive.Options{Conn: rdbstream.Options{Addr: replica.Addr}, From: redisarchive.Position{ReplID: b.ReplID, Offset: b.Offset}, Sink: sink})
	mixedWrites(t, master.Client)
	if err := testredis.WaitFor(ctx, func() bool { return replOffset(t, replica.Client) == replOffset(t, master.Client) }); err != nil {
		t.Fatal("the replica never caught up")
	}
	f.caughtUp(t, replica.Client)
	info := master.Client.Info(ctx, "replication").Val()
	if !strings.Contains(info, "connected_slaves:1\r\n") || !strings.Contains(info, "master_replid:"+f.Progress().ReplID) {
		t.Fatalf("the master sees:\n%s\nthe follower is at %+v", info, f.Progress())
	}
	f.stop(t)
	dst := testredis.Restore(t, dir)
	replay(t, sink, dst, redisarchive.ReplayOptions{From: b.Offset})
	same(t, snapshot(t, master.Client), snapshot(t, dst))
}
