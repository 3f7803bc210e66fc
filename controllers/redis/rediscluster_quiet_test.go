package redis

import (
	"context"
	"errors"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/clusterconn"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/observe"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/plan"
)

// TestQuietMarkOf: only a full look that ended without error on a step the planner found
// steady (plan.Step.Steady, table-tested in plan's TestSteady) leaves a quiet mark, due when
// the step says, with every node's address and CLUSTER INFO head.
func TestQuietMarkOf(t *testing.T) {
	converged := func() *state {
		s := &state{rc: &redisv1alpha1.RedisCluster{}, next: &redisv1alpha1.RedisCluster{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "42"}}}
		s.step = plan.Step{Kind: plan.StepIdle, After: 2500 * time.Millisecond, Steady: plan.LookSteady}
		for i, name := range []string{"rc-0", "rc-1"} {
			s.pods = append(s.pods, corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: string(rune('7' + i))}})
			s.snap.Nodes = append(s.snap.Nodes, observe.Observation{Pod: name, Addr: "127.1.0." + string(rune('1'+i)) + ":6379",
				View: []nodes.Node{{ID: name, Flags: []string{"myself", "master"}}}, InfoHead: "cluster_state:ok\r\n" + name})
		}
		return s
	}
	now := time.Unix(1000, 0)
	m, ok := quietMarkOf(converged(), now)
	if !ok {
		t.Fatal("a converged look left no quiet mark")
	}
	if m.resourceVersion != "42" || m.pods != "rc-0@7 rc-1@8 " || len(m.addrs) != 2 || m.heads[1] != "cluster_state:ok\r\nrc-1" ||
		!m.until.Equal(now.Add(plan.LookSteady)) || m.after != 2500*time.Millisecond {
		t.Errorf("quiet mark = %+v", m)
	}
	s := converged()
	s.step.Steady = plan.LookIdle
	if m, ok := quietMarkOf(s, now); !ok || !m.until.Equal(now.Add(plan.LookIdle)) {
		t.Errorf("a step steady for %s left a mark due %s later (left: %v)", plan.LookIdle, m.until.Sub(now), ok)
	}
	for name, spoil := range map[string]func(*state){
		"an error":   func(s *state) { s.err = errors.New("boom") },
		"not steady": func(s *state) { s.step.Steady = 0 },
	} {
		s := converged()
		spoil(s)
		if m, ok := quietMarkOf(s, now); ok {
			t.Errorf("%s: a quiet mark was left: %+v", name, m)
		}
	}
}

// headsAdmin answers InfoHeads with heads, or errs for the addresses it names, counting
// the calls; nothing else is asked of it.
type headsAdmin struct {
	clusterconn.Admin
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
// unchanged cluster keeps being looked at every IdleLook, and a cluster whose full look is
// due is not looked at.
func TestProberWakesOnlyChangedClusters(t *testing.T) {
	const after = 100 * time.Millisecond
	mark := func(until time.Duration) quietMark {
		return quietMark{addrs: []string{"a:1", "b:1"}, heads: []string{"ha", "hb"}, after: after, until: time.Now().Add(until)}
	}
	admin := func() *headsAdmin {
		return &headsAdmin{heads: map[string]string{"a:1": "ha", "b:1": "hb"}, errs: map[string]error{}}
	}
	steady, failover, frozen, due := admin(), admin(), admin(), admin()
	key := func(name string) types.NamespacedName { return types.NamespacedName{Namespace: "ns", Name: name} }
	var q quietMarks
	q.set(key("steady"), steady, mark(time.Minute), true)
	q.set(key("failover"), failover, mark(time.Minute), true)
	q.set(key("frozen"), frozen, mark(time.Minute), true)
	q.set(key("due"), due, mark(-time.Second), true)
	failover.set("b:1", "hb after a failover", nil)
	timeout := &net.OpError{Op: "read", Err: os.ErrDeadlineExceeded}
	frozen.set("a:1", "", timeout)

	ctx, cancel := context.WithCancel(t.Context())
	wake := make(chan event.GenericEvent, 8)
	done := make(chan error)
	go func() { done <- q.run(ctx, wake) }()
	woken := map[string]bool{}
	deadline := time.After(5 * time.Second)
	for len(woken) < 2 {
		select {
		case ev := <-wake:
			woken[ev.Object.GetName()] = true
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
		t.Errorf("%s woken as well", ev.Object.GetName())
	default:
	}
	if n := steady.count(); n < 2 {
		t.Errorf("the unchanged cluster was looked at %d times, want again every %s", n, after)
	}
	if n := due.count(); n != 0 {
		t.Errorf("a cluster whose full look is due was looked at %d times, want 0 (its reconcile reads it whole)", n)
	}
	e, _ := q.get(key("frozen"), frozen)
	if !e.changed || e.silent["a:1"] == nil || len(e.silent) != 1 {
		t.Errorf("the frozen cluster's entry: changed %v, silent %v; want changed with a:1 silent", e.changed, e.silent)
	}
	if e, _ := q.get(key("steady"), steady); e.changed || time.Since(e.probed) > time.Second {
		t.Errorf("the unchanged cluster's entry: changed %v, last found unchanged %s ago", e.changed, time.Since(e.probed))
	}
	if q.probing() {
		t.Error("the prober still counts as running after it returned")
	}
}

// TestProberWaitsForTheFirstMark: with no converged cluster the prober does not tick; the
// first mark set wakes it, and that cluster is looked at (and woken, its head changed).
func TestProberWaitsForTheFirstMark(t *testing.T) {
	var q quietMarks
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	wake := make(chan event.GenericEvent, 1)
	done := make(chan error)
	go func() { done <- q.run(ctx, wake) }()
	time.Sleep(3 * probeTick)
	a := &headsAdmin{heads: map[string]string{"a:1": "changed"}, errs: map[string]error{}}
	q.set(types.NamespacedName{Namespace: "ns", Name: "late"}, a,
		quietMark{addrs: []string{"a:1"}, heads: []string{"h"}, after: 100 * time.Millisecond, until: time.Now().Add(time.Minute)}, true)
	select {
	case ev := <-wake:
		if ev.Object.GetName() != "late" {
			t.Errorf("woken: %s, want late", ev.Object.GetName())
		}
	case <-time.After(5 * time.Second):
		t.Errorf("the cluster marked after the prober started was not woken within 5 s (looked at %d times)", a.count())
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
