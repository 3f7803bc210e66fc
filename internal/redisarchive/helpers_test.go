package redisarchive_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/middleware-operator/middleware-operator/internal/rdbstream"
	"github.com/middleware-operator/middleware-operator/internal/redisarchive"
	"github.com/middleware-operator/middleware-operator/tests/testredis"
)

const cluster, shard = "demo", "shard-000"

// base fetches src's RDB into a new directory as dump.rdb and returns the directory and
// the snapshot's replication position.
func base(t testing.TB, src *testredis.Server) (string, rdbstream.Result) {
	t.Helper()
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "dump.rdb"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := rdbstream.Fetch(t.Context(), rdbstream.Options{Addr: src.Addr, ViaDisk: true}, f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	return dir, res
}

// running is a follower running on a goroutine.
type running struct {
	*redisarchive.Follower
	cancel context.CancelFunc
	done   chan struct{} // closed when Run has returned err
	err    error
}

// result waits for Run to return and returns its error.
func (r *running) result() error {
	<-r.done
	return r.err
}

// follow starts a follower with opts (segments of 100 ms unless opts says).
func follow(t testing.TB, opts redisarchive.Options) *running {
	t.Helper()
	if opts.Cluster == "" {
		opts.Cluster, opts.Shard = cluster, shard
	}
	if opts.Timeline == 0 {
		opts.Timeline = 1
	}
	if opts.SegmentAge == 0 {
		opts.SegmentAge = 100 * time.Millisecond
	}
	if opts.RetryDelay == 0 {
		opts.RetryDelay = 100 * time.Millisecond
	}
	f, err := redisarchive.NewFollower(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{Follower: f, cancel: cancel, done: make(chan struct{})}
	go func() {
		r.err = f.Run(ctx)
		close(r.done)
	}()
	t.Cleanup(func() {
		cancel()
		<-r.done
	})
	return r
}

// replOffset is the master_repl_offset of c's node.
func replOffset(t testing.TB, c *goredis.Client) int64 {
	t.Helper()
	info, err := c.Info(context.Background(), "replication").Result()
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "master_repl_offset:"); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	t.Fatal("no master_repl_offset in INFO replication")
	return 0
}

// caughtUp waits until the follower has received everything c's node has written and every
// command is in a closed segment.
func (r *running) caughtUp(t testing.TB, c *goredis.Client) {
	t.Helper()
	want := replOffset(t, c)
	deadline := time.Now().Add(15 * time.Second)
	for {
		p := r.Progress()
		if p.Received >= want && p.Open == 0 {
			return
		}
		select {
		case <-r.done:
			t.Fatalf("the follower stopped: %v", r.err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the follower is at %+v, the master at offset %d", p, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop stops the follower gracefully and checks it returned nil.
func (r *running) stop(t testing.TB) {
	t.Helper()
	r.Stop()
	if err := r.result(); err != nil {
		t.Fatalf("Run returned %v after Stop", err)
	}
}

// replay replays the archive onto the node of c from offset from.
func replay(t testing.TB, sink redisarchive.Sink, c *goredis.Client, opts redisarchive.ReplayOptions) redisarchive.ReplayResult {
	t.Helper()
	if opts.Cluster == "" {
		opts.Cluster, opts.Shard, opts.Timeline = cluster, shard, 1
	}
	opts.Target = rdbstream.Options{Addr: c.Options().Addr}
	start := time.Now()
	res, err := redisarchive.Replay(t.Context(), sink, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("replayed %d commands from %d segments in %s: offset %d, time %s, complete %v", res.Commands, res.Segments,
		time.Since(start).Round(time.Millisecond), res.Offset, res.Reached.Format(time.RFC3339Nano), res.Complete)
	return res
}

// keyState is what a key is: its DUMP (for a set, its sorted members: the DUMP of a set
// held as a hash table lists them in the table's order, which differs between a node that
// loaded them from an RDB and one that added them one by one) and absolute expiry.
type keyState struct {
	dump     string
	expireAt int64
}

// snapshot reads every key of c's node with its DUMP and PEXPIRETIME.
func snapshot(t testing.TB, c *goredis.Client) map[string]keyState {
	t.Helper()
	ctx := context.Background()
	out := map[string]keyState{}
	iter := c.Scan(ctx, 0, "*", 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	for start := 0; start < len(keys); start += 500 {
		pipe := c.Pipeline()
		batch := keys[start:min(start+500, len(keys))]
		dumps := make([]*goredis.StringCmd, len(batch))
		exps := make([]*goredis.Cmd, len(batch))
		members := make([]*goredis.StringSliceCmd, len(batch))
		types := make([]*goredis.StatusCmd, len(batch))
		for i, k := range batch {
			dumps[i] = pipe.Dump(ctx, k)
			exps[i] = pipe.Do(ctx, "PEXPIRETIME", k)
			types[i] = pipe.Type(ctx, k)
		}
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, goredis.Nil) {
			t.Fatal(err)
		}
		for i, k := range batch {
			if types[i].Val() == "set" {
				members[i] = pipe.SMembers(ctx, k)
			}
		}
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, goredis.Nil) {
			t.Fatal(err)
		}
		for i, k := range batch {
			e, _ := exps[i].Int64()
			dump := dumps[i].Val()
			if members[i] != nil {
				m := members[i].Val()
				slices.Sort(m)
				dump = "set " + strings.Join(m, ",")
			}
			out[k] = keyState{dump, e}
		}
	}
	return out
}

// same compares two snapshots and fails the test with the count of keys lost, extra or
// different.
func same(t testing.TB, want, got map[string]keyState) {
	t.Helper()
	var lost, extra, differ []string
	for k, v := range want {
		g, ok := got[k]
		switch {
		case !ok:
			lost = append(lost, k)
		case g != v:
			differ = append(differ, k)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			extra = append(extra, k)
		}
	}
	t.Logf("compared %d keys: %d lost, %d extra, %d different", len(want), len(lost), len(extra), len(differ))
	if len(lost)+len(extra)+len(differ) > 0 {
		t.Fatalf("lost %d (%v), extra %d (%v), different %d (%v)", len(lost), head(lost), len(extra), head(extra), len(differ), head(differ))
	}
}

func head(s []string) []string { return s[:min(len(s), 5)] }

// writer writes w:<i> = <i> one at a time, never overwriting, and records each ack time.
type writer struct {
	mu   sync.Mutex
	acks []time.Time
	stop chan struct{}
	done chan error
}

func startWriter(c *goredis.Client, prefix string) *writer {
	w := &writer{stop: make(chan struct{}), done: make(chan error, 1)}
	go func() {
		ctx := context.Background()
		for i := 0; ; i++ {
			select {
			case <-w.stop:
				w.done <- nil
				return
			default:
			}
			if err := c.Set(ctx, fmt.Sprintf("%s:%d", prefix, i), i, 0).Err(); err != nil {
				w.done <- err
				return
			}
			now := time.Now()
			w.mu.Lock()
			w.acks = append(w.acks, now)
			w.mu.Unlock()
		}
	}()
	return w
}

// end stops the writer and returns its ack times.
func (w *writer) end(t testing.TB) []time.Time {
	t.Helper()
	close(w.stop)
	if err := <-w.done; err != nil {
		t.Fatal(err)
	}
	return w.acks
}
