package restore

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/middleware-operator/middleware-operator/internal/rdbload"
)

// TestLoadsRunOffTheWorker: a load runs in the background while poll says it is under
// way; its end wakes its cluster and is reported once, with its result; a second start of
// a known load does nothing; forget cancels a load under way.
func TestLoadsRunOffTheWorker(t *testing.T) {
	l := NewLoads()
	k := Key{Cluster: types.NamespacedName{Namespace: "ns", Name: "rc"}, Node: "aaaa", Shard: 1}
	release := make(chan struct{})
	starts := 0
	load := func(ctx context.Context) (Result, error) {
		starts++
		select {
		case <-release:
			return Result{Result: rdbload.Result{Restored: 42}}, nil
		case <-ctx.Done():
			return Result{}, ctx.Err()
		}
	}
	if st, _, _ := l.Poll(k); st != Unknown {
		t.Fatalf("an unknown load is %v", st)
	}
	l.Start(k, time.Minute, load)
	l.Start(k, time.Minute, load) // already known: not started twice
	if st, _, _ := l.Poll(k); st != Running {
		t.Fatalf("a load under way is %v", st)
	}
	close(release)
	select {
	case ev := <-l.Wake():
		if ev.Object.GetNamespace() != "ns" || ev.Object.GetName() != "rc" {
			t.Errorf("woke %s/%s, want ns/rc", ev.Object.GetNamespace(), ev.Object.GetName())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the load's end woke nobody")
	}
	st, res, err := l.Poll(k)
	if st != Finished || err != nil || res.Restored != 42 {
		t.Fatalf("the ended load: %v, %+v, %v", st, res, err)
	}
	if st, _, _ := l.Poll(k); st != Unknown || starts != 1 {
		t.Fatalf("after its end was taken the load is %v; started %d times", st, starts)
	}

	// A deleted cluster's load is cancelled.
	l.Start(k, time.Minute, cancelledLoad(t))
	l.Forget(k.Cluster)
	if st, _, _ := l.Poll(k); st != Unknown {
		t.Fatalf("a forgotten load is %v", st)
	}
}

// cancelledLoad is a load that waits for its context and fails the test unless it is cancelled
// within 10 s.
func cancelledLoad(t *testing.T) func(context.Context) (Result, error) {
	done := make(chan struct{})
	t.Cleanup(func() {
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("forget did not cancel the load")
		}
	})
	return func(ctx context.Context) (Result, error) {
		defer close(done)
		<-ctx.Done()
		if !errors.Is(ctx.Err(), context.Canceled) {
			t.Errorf("the load ended with %v, want it cancelled", ctx.Err())
		}
		return Result{}, ctx.Err()
	}
}

// TestBackoff: a reconcile whose only errors are failed loads looks again after the
// shortest back-off; any other error goes to the workqueue's own retry.
func TestBackoff(t *testing.T) {
	five := &FailedError{Message: "checksum", After: 5 * time.Second}
	forty := &FailedError{Message: "access denied", After: 40 * time.Second}
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
			if after, ok := Backoff(tc.err); after != tc.after || ok != tc.ok {
				t.Fatalf("Backoff = %s %t, want %s %t", after, ok, tc.after, tc.ok)
			}
		})
	}
}
