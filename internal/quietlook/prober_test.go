package quietlook

import (
	"context"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// wakeInto is a prober's wake that sends the cluster woken into ch.
func wakeInto(ch chan<- types.NamespacedName) func(context.Context, types.NamespacedName) {
	return func(ctx context.Context, cluster types.NamespacedName) {
		select {
		case ch <- cluster:
		case <-ctx.Done():
		}
	}
}

// headsAdmin answers InfoHeads with heads, or errs for the addresses it names, counting
// the calls.
type headsAdmin struct {
	mu    sync.Mutex
	heads map[string]string
	errs  map[string]error
	calls int
}

func (a *headsAdmin) InfoHeads(_ context.Context, addrs []string) ([]string, []error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls++
	heads, errs := make([]string, len(addrs)), make([]error, len(addrs))
	for i, addr := range addrs {
		heads[i], errs[i] = a.heads[addr], a.errs[addr]
	}
	return heads, errs
}

func (a *headsAdmin) set(addr, head string, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.heads[addr] = head
	if err != nil {
		a.errs[addr] = err
	}
}

func (a *headsAdmin) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.calls
}

// TestProberWakesOnlyChangedClusters runs the prober over three converged clusters: one
// stays as its full look saw it, one's node answers with another head, one's node times
// out. Only the last two are woken, the silent node is handed to the full look, the
// unchanged cluster keeps being looked at every mark's After, and a cluster whose full look is
// due is not looked at.
func TestProberWakesOnlyChangedClusters(t *testing.T) {
	const after = 100 * time.Millisecond
	mark := func(until time.Duration) Mark {
		return Mark{Addrs: []string{"a:1", "b:1"}, Heads: []string{"ha", "hb"}, After: after, Until: time.Now().Add(until)}
	}
	admin := func() *headsAdmin {
		return &headsAdmin{heads: map[string]string{"a:1": "ha", "b:1": "hb"}, errs: map[string]error{}}
	}
	steady, failover, frozen, due := admin(), admin(), admin(), admin()
	key := func(name string) types.NamespacedName { return types.NamespacedName{Namespace: "ns", Name: name} }
	var q Marks
	q.Set(key("steady"), steady, mark(time.Minute))
	q.Set(key("failover"), failover, mark(time.Minute))
	q.Set(key("frozen"), frozen, mark(time.Minute))
	q.Set(key("due"), due, mark(-time.Second))
	failover.set("b:1", "hb after a failover", nil)
	timeout := &net.OpError{Op: "read", Err: os.ErrDeadlineExceeded}
	frozen.set("a:1", "", timeout)

	ctx, cancel := context.WithCancel(t.Context())
	wake := make(chan types.NamespacedName, 8)
	done := make(chan error)
	go func() { done <- q.Run(ctx, wakeInto(wake)) }()
	woken := map[string]bool{}
	deadline := time.After(5 * time.Second)
	for len(woken) < 2 {
		select {
		case ev := <-wake:
			woken[ev.Name] = true
		case <-deadline:
			t.Fatalf("woken after 5 s: %v, want failover and frozen", woken)
		}
	}
	// The unchanged cluster is looked at again and again meanwhile.
	time.Sleep(4 * probeTick)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !woken["failover"] || !woken["frozen"] || len(woken) != 2 {
		t.Errorf("woken: %v, want failover and frozen", woken)
	}
	select {
	case ev := <-wake:
		t.Errorf("%s woken as well", ev.Name)
	default:
	}
	if n := steady.count(); n < 2 {
		t.Errorf("the unchanged cluster was looked at %d times, want again every %s", n, after)
	}
	if n := due.count(); n != 0 {
		t.Errorf("a cluster whose full look is due was looked at %d times, want 0 (its reconcile reads it whole)", n)
	}
	e, _ := q.Get(key("frozen"), frozen)
	if !e.Changed || e.Silent["a:1"] == nil || len(e.Silent) != 1 {
		t.Errorf("the frozen cluster's entry: changed %v, silent %v; want changed with a:1 silent", e.Changed, e.Silent)
	}
	if e, _ := q.Get(key("steady"), steady); e.Changed || time.Since(e.Probed) > time.Second {
		t.Errorf("the unchanged cluster's entry: changed %v, last found unchanged %s ago", e.Changed, time.Since(e.Probed))
	}
	if q.Probing() {
		t.Error("the prober still counts as running after it returned")
	}
}

// TestProberWaitsForTheFirstMark: with no converged cluster the prober does not tick; the
// first mark set wakes it, and that cluster is looked at (and woken, its head changed).
func TestProberWaitsForTheFirstMark(t *testing.T) {
	var q Marks
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	wake := make(chan types.NamespacedName, 1)
	done := make(chan error)
	go func() { done <- q.Run(ctx, wakeInto(wake)) }()
	time.Sleep(3 * probeTick)
	a := &headsAdmin{heads: map[string]string{"a:1": "changed"}, errs: map[string]error{}}
	q.Set(types.NamespacedName{Namespace: "ns", Name: "late"}, a,
		Mark{Addrs: []string{"a:1"}, Heads: []string{"h"}, After: 100 * time.Millisecond, Until: time.Now().Add(time.Minute)})
	select {
	case ev := <-wake:
		if ev.Name != "late" {
			t.Errorf("woken: %s, want late", ev.Name)
		}
	case <-time.After(5 * time.Second):
		t.Errorf("the cluster marked after the prober started was not woken within 5 s (looked at %d times)", a.count())
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
