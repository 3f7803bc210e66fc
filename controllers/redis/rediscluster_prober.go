package redis

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/clusterconn"
)

const (
	// probeTimeout bounds a quiet look: a node that has not answered CLUSTER INFO by then
	// counts as silent, and the full look it wakes does not wait on it again.
	probeTimeout = 2 * time.Second
	// probeTick is how often the prober checks which clusters are due a quiet look.
	probeTick = 250 * time.Millisecond
)

// quietMarks keeps each cluster's quiet mark beside the Admin of clusterconn.Pool whose
// connections read it, with what the quiet looks since found; its run loop is the prober.
// A mark counts only while that Admin is still the one pooled for the cluster: when the
// pool replaces it (a new password, another TLS configuration) or forgets the cluster, the
// mark is gone with it. Admins are told apart with ==, as the pool's are (pointers from
// clusterconn.DefaultAdminFactory).
type quietMarks struct {
	mu        sync.Mutex
	byCluster map[types.NamespacedName]*quietEntry
	gen       uint64      // numbers the marks set, so a probe of a replaced mark is ignored
	running   atomic.Bool // run is probing
	// marked wakes run when a mark is set while it waits with none (nil until run starts).
	marked chan struct{}
}

// quietEntry is a quiet mark with the Admin it was left beside and what the quiet looks
// since found.
type quietEntry struct {
	admin clusterconn.Admin
	mark  quietMark
	gen   uint64
	// probed is when the last quiet look (or the full look) found every head unchanged.
	probed time.Time
	// changed: a quiet look found a head changed or a node silent (those timed out are in
	// silent); the cluster's next reconcile looks whole.
	changed bool
	silent  map[string]error
	// inFlight: the prober is reading the nodes now.
	inFlight bool
}

// set keeps m as cluster's mark beside admin (ok), or drops the mark.
func (q *quietMarks) set(cluster types.NamespacedName, admin clusterconn.Admin, m quietMark, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !ok {
		delete(q.byCluster, cluster)
		return
	}
	if q.byCluster == nil {
		q.byCluster = map[types.NamespacedName]*quietEntry{}
	}
	q.gen++
	q.byCluster[cluster] = &quietEntry{admin: admin, mark: m, gen: q.gen, probed: time.Now()}
	select {
	case q.marked <- struct{}{}:
	default:
	}
}

// get returns a copy of cluster's entry when its mark was left beside admin.
func (q *quietMarks) get(cluster types.NamespacedName, admin clusterconn.Admin) (quietEntry, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	e, ok := q.byCluster[cluster]
	if !ok || e.admin != admin {
		return quietEntry{}, false
	}
	return *e, true
}

// probedAt records a quiet look of cluster's mark gen that found nothing changed at t.
func (q *quietMarks) probedAt(cluster types.NamespacedName, gen uint64, t time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if e, ok := q.byCluster[cluster]; ok && e.gen == gen && t.After(e.probed) {
		e.probed = t
	}
}

// forget drops cluster's mark.
func (q *quietMarks) forget(cluster types.NamespacedName) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.byCluster, cluster)
}

// probing reports whether the prober runs: then reconciles leave the quiet looks to it.
func (q *quietMarks) probing() bool { return q.running.Load() }

// run is the prober: until ctx ends, every probeTick it makes a quiet look (quietProbe) of
// each cluster whose last one is IdleLook old, while its mark is not due, and sends wake an
// event for each cluster where a look found something changed. Clusters are looked at side
// by side, one goroutine a look; one whose nodes are slow delays no other.
func (q *quietMarks) run(ctx context.Context, wake chan<- event.GenericEvent) error {
	q.mu.Lock()
	q.marked = make(chan struct{}, 1)
	marked := q.marked
	q.mu.Unlock()
	q.running.Store(true)
	defer q.running.Store(false)
	tick := time.NewTicker(probeTick)
	defer tick.Stop()
	var looks sync.WaitGroup
	defer looks.Wait()
	for {
		if q.empty() {
			// No converged cluster: no tick either (a wake-up costs an idle operator too).
			tick.Stop()
			select {
			case <-ctx.Done():
				return nil
			case <-marked:
			}
			tick.Reset(probeTick)
		}
		select {
		case <-ctx.Done():
			return nil
		case now := <-tick.C:
			for cluster, e := range q.due(now) {
				looks.Go(func() { q.look(ctx, cluster, e, wake) })
			}
		}
	}
}

// empty reports whether no cluster has a quiet mark.
func (q *quietMarks) empty() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.byCluster) == 0
}

// due returns a copy of the entries due a quiet look at now, marking them in flight.
func (q *quietMarks) due(now time.Time) map[types.NamespacedName]quietEntry {
	q.mu.Lock()
	defer q.mu.Unlock()
	var due map[types.NamespacedName]quietEntry
	for cluster, e := range q.byCluster {
		if e.inFlight || e.changed || !now.Before(e.mark.until) || now.Sub(e.probed) < e.mark.after {
			continue
		}
		if due == nil {
			due = map[types.NamespacedName]quietEntry{}
		}
		e.inFlight = true
		due[cluster] = *e
	}
	return due
}

// look makes one quiet look of cluster's entry e and records it; a change wakes the
// cluster.
func (q *quietMarks) look(ctx context.Context, cluster types.NamespacedName, e quietEntry, wake chan<- event.GenericEvent) {
	unchanged, silent := quietProbe(ctx, e.admin, e.mark)
	q.mu.Lock()
	cur, ok := q.byCluster[cluster]
	current := ok && cur.gen == e.gen
	if current {
		cur.inFlight = false
		if unchanged {
			cur.probed = time.Now()
		} else {
			cur.changed, cur.silent = true, silent
		}
	}
	q.mu.Unlock()
	if !current || unchanged {
		return
	}
	select {
	case wake <- event.GenericEvent{Object: &redisv1alpha1.RedisCluster{ObjectMeta: metav1.ObjectMeta{Namespace: cluster.Namespace, Name: cluster.Name}}}:
	case <-ctx.Done():
	}
}
