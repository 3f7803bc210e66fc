// Package quietlook keeps, for each converged RedisCluster, what its last full look saw of
// its nodes (a Mark: each node's address and CLUSTER INFO head), and looks at them quietly
// between full looks: one CLUSTER INFO a node, its head compared with the mark's (Probe),
// by the prober (Marks.Run) in the background of the leader. A head that differs or a node
// that does not answer wakes the cluster's reconcile, which looks whole.
package quietlook

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/middleware-operator/middleware-operator/internal/metrics"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/observe"
)

// ProbeTimeout bounds a quiet look: a node that has not answered CLUSTER INFO by then counts
// as silent, and the full look it wakes does not wait on it again.
const ProbeTimeout = 2 * time.Second

// Heads reads the head of each node's CLUSTER INFO (observe.Observation.InfoHead), in the
// order of addrs, with an error for each node that did not answer: a cluster's pooled
// connections (clusterconn.Admin).
type Heads interface {
	InfoHeads(ctx context.Context, addrs []string) ([]string, []error)
}

// Mark is what a full look of a converged cluster leaves for the quiet looks after it.
type Mark struct {
	// ResourceVersion is the RedisCluster's after the look's status write, Pods the
	// fingerprint of the pods it saw (the controller's podsFingerprint).
	ResourceVersion, Pods string
	// Addrs are the nodes' addresses, Heads their CLUSTER INFO heads, in the same order.
	Addrs, Heads []string
	// Until is when a full look is due, After how soon a quiet look looks again.
	Until time.Time
	After time.Duration
}

// Entry is a mark with the Heads it was left beside and what the quiet looks since found.
type Entry struct {
	Heads Heads
	Mark  Mark
	// Gen numbers the marks set, so that a look at a replaced mark is not recorded.
	Gen uint64
	// Probed is when the last quiet look (or the full look) found every head unchanged.
	Probed time.Time
	// Changed: a quiet look found a head changed or a node silent (those that timed out are
	// in Silent); the cluster's next reconcile looks whole.
	Changed bool
	Silent  map[string]error
	// inFlight: the prober is reading the nodes now.
	inFlight bool
}

// Marks keeps each cluster's mark beside the Heads (the pooled Admin) that read it, with
// what the quiet looks since found; its Run loop is the prober. A mark counts only while
// that Heads is still the one pooled for the cluster (Get): when the pool replaces it (a
// new password, another TLS configuration) or forgets the cluster, the mark is gone with
// it. They are told apart with ==, as the pool's Admins are (pointers).
type Marks struct {
	mu        sync.Mutex
	byCluster map[types.NamespacedName]*Entry
	gen       uint64
	running   atomic.Bool
	// marked wakes Run when a mark is set while it waits with none (nil until Run starts).
	marked chan struct{}
}

// Set keeps m as cluster's mark beside heads.
func (q *Marks) Set(cluster types.NamespacedName, heads Heads, m Mark) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.byCluster == nil {
		q.byCluster = map[types.NamespacedName]*Entry{}
	}
	q.gen++
	q.byCluster[cluster] = &Entry{Heads: heads, Mark: m, Gen: q.gen, Probed: time.Now()}
	select {
	case q.marked <- struct{}{}:
	default:
	}
}

// Get returns a copy of cluster's entry when its mark was left beside heads.
func (q *Marks) Get(cluster types.NamespacedName, heads Heads) (Entry, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	e, ok := q.byCluster[cluster]
	if !ok || e.Heads != heads {
		return Entry{}, false
	}
	return *e, true
}

// ProbedAt records a quiet look of cluster's mark gen that found nothing changed at t.
func (q *Marks) ProbedAt(cluster types.NamespacedName, gen uint64, t time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if e, ok := q.byCluster[cluster]; ok && e.Gen == gen && t.After(e.Probed) {
		e.Probed = t
	}
}

// Forget drops cluster's mark.
func (q *Marks) Forget(cluster types.NamespacedName) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.byCluster, cluster)
}

// Probing reports whether the prober runs: then reconciles leave the quiet looks to it.
func (q *Marks) Probing() bool { return q.running.Load() }

// quietLooks counts the quiet looks that found nothing changed (looked up once: the prober
// counts every 2.5 s for every converged cluster).
var quietLooks = metrics.RedisLooks.WithLabelValues("quiet")

// Probe is one quiet look at the nodes of m: one CLUSTER INFO a node through heads, within
// ProbeTimeout. unchanged: every node answered with the head m saw; silent are the nodes
// whose read timed out.
func Probe(ctx context.Context, heads Heads, m Mark) (unchanged bool, silent map[string]error) {
	ctx, cancel := context.WithTimeout(ctx, ProbeTimeout)
	defer cancel()
	got, errs := heads.InfoHeads(ctx, m.Addrs)
	answered := true
	for i, err := range errs {
		answered = answered && err == nil
		if observe.TimedOut(err) {
			if silent == nil {
				silent = map[string]error{}
			}
			silent[m.Addrs[i]] = err
		}
	}
	unchanged = answered && slices.Equal(got, m.Heads)
	if unchanged {
		quietLooks.Inc()
	}
	return unchanged, silent
}
