package redis

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/rdbload"
)

// TestShardLoadsRunOffTheWorker: a load runs in the background while poll says it is under
// way; its end wakes its cluster and is reported once, with its result; a second start of
// a known load does nothing; forget cancels a load under way.
func TestShardLoadsRunOffTheWorker(t *testing.T) {
	l := newShardLoads()
	k := loadKey{cluster: types.NamespacedName{Namespace: "ns", Name: "rc"}, node: "aaaa", shard: 1}
	release := make(chan struct{})
	starts := 0
	load := func(ctx context.Context) (rdbload.Result, error) {
		starts++
		select {
		case <-release:
			return rdbload.Result{Restored: 42}, nil
		case <-ctx.Done():
			return rdbload.Result{}, ctx.Err()
		}
	}
	if st, _, _ := l.poll(k); st != loadNone {
		t.Fatalf("an unknown load is %v", st)
	}
	l.start(k, time.Minute, load)
	l.start(k, time.Minute, load) // already known: not started twice
	if st, _, _ := l.poll(k); st != loadRunning {
		t.Fatalf("a load under way is %v", st)
	}
	close(release)
	select {
	case ev := <-l.wake:
		if ev.Object.GetNamespace() != "ns" || ev.Object.GetName() != "rc" {
			t.Errorf("woke %s/%s, want ns/rc", ev.Object.GetNamespace(), ev.Object.GetName())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the load's end woke nobody")
	}
	st, res, err := l.poll(k)
	if st != loadFinished || err != nil || res.Restored != 42 {
		t.Fatalf("the ended load: %v, %+v, %v", st, res, err)
	}
	if st, _, _ := l.poll(k); st != loadNone || starts != 1 {
		t.Fatalf("after its end was taken the load is %v; started %d times", st, starts)
	}

	// A deleted cluster's load is cancelled.
	l.start(k, time.Minute, cancelledLoad(t))
	l.forget(k.cluster)
	if st, _, _ := l.poll(k); st != loadNone {
		t.Fatalf("a forgotten load is %v", st)
	}
}

// cancelledLoad is a load that waits for its context and fails the test unless it is cancelled
// within 10 s.
func cancelledLoad(t *testing.T) func(context.Context) (rdbload.Result, error) {
	done := make(chan struct{})
	t.Cleanup(func() {
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("forget did not cancel the load")
		}
	})
	return func(ctx context.Context) (rdbload.Result, error) {
		defer close(done)
		<-ctx.Done()
		if !errors.Is(ctx.Err(), context.Canceled) {
			t.Errorf("the load ended with %v, want it cancelled", ctx.Err())
		}
		return rdbload.Result{}, ctx.Err()
	}
}

// TestLoadBackoff: a reconcile whose only errors are failed loads looks again after the
// shortest back-off; any other error goes to the workqueue's own retry.
func TestLoadBackoff(t *testing.T) {
	five := &loadFailedError{message: "checksum", after: 5 * time.Second}
	forty := &loadFailedError{message: "access denied", after: 40 * time.Second}
	cases := map[string]struct {
		err   error
		after time.Duration
		ok    bool
	}{
		"none":                   {},
		"one":                    {err: forty, after: 40 * time.Second, ok: true},
		"wrapped":                {err: fmt.Errorf("while restoring: %w", forty), after: 40 * time.Second, ok: true},
		"two joined":             {err: errors.Join(forty, five), after: 5 * time.Second, ok: true},
		"with an API error":      {err: errors.Join(five, errors.New("the API server is down"))},
		"an API error by itself": {err: errors.New("conflict")},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if after, ok := loadBackoff(tc.err); after != tc.after || ok != tc.ok {
				t.Fatalf("loadBackoff = %s %t, want %s %t", after, ok, tc.after, tc.ok)
			}
		})
	}
}

// TestReloadLoadGate: a reload's load from the archive begins only once the status shows it
// recorded; it is a retry (its slots emptied first) exactly when the record names another
// operator run, which is what a restarted operator finds after dying during the replay.
func TestReloadLoadGate(t *testing.T) {
	first, restarted := newShardLoads(), newShardLoads()
	if first.run == "" || first.run == restarted.run {
		t.Fatalf("runs %q and %q: each operator process needs a name of its own", first.run, restarted.run)
	}
	begun := &redisv1alpha1.ShardReloadStatus{StartedLoads: []redisv1alpha1.ShardLoadStart{{Shard: 1, Run: first.run}}}
	for name, tc := range map[string]struct {
		st                    *redisv1alpha1.ShardReloadStatus
		shard                 int32
		run                   string
		begin, wantMayHaveRun bool
	}{
		"no reload":                                  {st: nil, shard: 1, run: first.run},
		"not recorded yet: record first":             {st: &redisv1alpha1.ShardReloadStatus{}, shard: 1, run: first.run},
		"another shard's record does not count":      {st: begun, shard: 0, run: first.run},
		"recorded by this run: its first load":       {st: begun, shard: 1, run: first.run, begin: true},
		"recorded by another run: empty, then again": {st: begun, shard: 1, run: restarted.run, begin: true, wantMayHaveRun: true},
	} {
		t.Run(name, func(t *testing.T) {
			begin, mayHaveRun := reloadLoadGate(tc.st, tc.shard, tc.run)
			if begin != tc.begin || mayHaveRun != tc.wantMayHaveRun {
				t.Fatalf("begin %v, mayHaveRun %v; want %v, %v", begin, mayHaveRun, tc.begin, tc.wantMayHaveRun)
			}
		})
	}
}
