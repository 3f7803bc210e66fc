package redis

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/clusterconn"
	"github.com/middleware-operator/middleware-operator/internal/metrics"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/observe"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/plan"
)

// A converged cluster is looked at every IdleLook (2.5 s) so that a cut-off master shows
// before a second master claims its slots, but reading every node whole, planning and
// deriving the status that often cost about 6 ms of CPU a look, mostly garbage. So after
// a full look that found the cluster Ready with nothing to do, the looks until LookIdle
// has passed are quiet: when the RedisCluster and its pods are as that look saw them, each
// node is asked only CLUSTER INFO, and when every node answers with the same head
// (observe.Observation.InfoHead: state, slot counts, failing slots, known nodes, epochs),
// the look ends there. Anything else (a node that does not answer, another head, a changed
// object) makes it a full look at once. What a quiet look cannot see (memory, replication
// offsets and links, key counts, children drifting) waits for the next full look, at most
// LookIdle after the last.

// quietMark is what a full look of a converged cluster leaves for the quiet looks after it.
type quietMark struct {
	resourceVersion string        // the RedisCluster's, after the look's status write
	pods            string        // podsFingerprint of the pods the look saw
	addrs, heads    []string      // every node's address and observe.Observation.InfoHead
	until           time.Time     // when a full look is due
	after           time.Duration // how soon a quiet look looks again
}

// quietMarkOf is the mark s's full look leaves: ok only when it ended without error on the
// idle step with the cluster Ready and every pod's node answering.
func quietMarkOf(s *state, now time.Time) (quietMark, bool) {
	if s.err != nil || s.step.Kind != plan.StepIdle || len(s.snap.Nodes) == 0 ||
		!meta.IsStatusConditionTrue(s.next.Status.Conditions, ConditionReady) {
		return quietMark{}, false
	}
	m := quietMark{resourceVersion: s.next.ResourceVersion, pods: podsFingerprint(s.pods),
		until: now.Add(plan.LookIdle), after: s.lookAgain()}
	for i := range s.snap.Nodes {
		o := &s.snap.Nodes[i]
		if !o.Answered() || o.InfoHead == "" || o.Terminating || o.Leaving {
			return quietMark{}, false
		}
		m.addrs, m.heads = append(m.addrs, o.Addr), append(m.heads, o.InfoHead)
	}
	return m, true
}

// podsFingerprint names each pod with its resource version: any change Kubernetes makes to
// a pod (a restart, a new IP, readiness, deletion) changes it.
func podsFingerprint(pods []corev1.Pod) string {
	var b strings.Builder
	for i := range pods {
		b.WriteString(pods[i].Name)
		b.WriteByte('@')
		b.WriteString(pods[i].ResourceVersion)
		b.WriteByte(' ')
	}
	return b.String()
}

// noteLook records the end of a full look that ended without error: its quiet mark, or
// none.
func (r *RedisClusterReconciler) noteLook(s *state) {
	m, ok := quietMarkOf(s, time.Now())
	r.setQuiet(client.ObjectKeyFromObject(s.rc), m, ok)
}

// quietLook is a look at rc that ends after one CLUSTER INFO a node, when a full look
// left a quiet mark less than LookIdle ago and nothing it can see differs from that look:
// it returns how soon to look again and true. Otherwise it drops the mark and the reconcile
// goes on to a full look (which leaves a new mark if it ends as quietly); silent holds the
// nodes whose CLUSTER INFO timed out, so that look does not wait on them a second time.
func (r *RedisClusterReconciler) quietLook(ctx context.Context, rc *redisv1alpha1.RedisCluster) (after time.Duration, quiet bool, silent map[string]error) {
	key := client.ObjectKeyFromObject(rc)
	after, quiet, silent = r.stillQuiet(ctx, rc, key)
	if quiet {
		metrics.RedisLooks.WithLabelValues("quiet").Inc()
		return after, true, nil
	}
	r.setQuiet(key, quietMark{}, false)
	metrics.RedisLooks.WithLabelValues("full").Inc()
	return 0, false, silent
}

// stillQuiet reports whether rc, its pods and every node's CLUSTER INFO head are as the
// quiet mark's full look saw them, before the mark is due; silent are the nodes whose read
// timed out.
func (r *RedisClusterReconciler) stillQuiet(ctx context.Context, rc *redisv1alpha1.RedisCluster, key types.NamespacedName) (time.Duration, bool, map[string]error) {
	m, admin, ok := r.quiet(key)
	if !ok || !time.Now().Before(m.until) || rc.ResourceVersion != m.resourceVersion || !rc.DeletionTimestamp.IsZero() {
		return 0, false, nil
	}
	if pods, err := r.clusterPods(ctx, rc); err != nil || podsFingerprint(pods) != m.pods {
		return 0, false, nil
	}
	heads, errs := admin.InfoHeads(ctx, m.addrs)
	answered := true
	var silent map[string]error
	for i, err := range errs {
		answered = answered && err == nil
		if observe.TimedOut(err) {
			if silent == nil {
				silent = map[string]error{}
			}
			silent[m.addrs[i]] = err
		}
	}
	return m.after, answered && slices.Equal(heads, m.heads), silent
}

// quietMarks keeps each cluster's quiet mark beside the Admin of clusterconn.Pool whose
// connections read it. A mark counts only while that Admin is still the one pooled for the
// cluster: when the pool replaces it (a new password, another TLS configuration) or forgets
// the cluster, the mark is gone with it. Admins are told apart with ==, as the pool's are
// (pointers from clusterconn.DefaultAdminFactory).
type quietMarks struct {
	mu        sync.Mutex
	byCluster map[types.NamespacedName]quietEntry
}

// quietEntry is a quiet mark with the Admin it was left beside.
type quietEntry struct {
	admin clusterconn.Admin
	mark  quietMark
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
		q.byCluster = map[types.NamespacedName]quietEntry{}
	}
	q.byCluster[cluster] = quietEntry{admin: admin, mark: m}
}

// get returns cluster's mark when it was left beside admin.
func (q *quietMarks) get(cluster types.NamespacedName, admin clusterconn.Admin) (quietMark, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	e, ok := q.byCluster[cluster]
	if !ok || e.admin != admin {
		return quietMark{}, false
	}
	return e.mark, true
}

// forget drops cluster's mark.
func (q *quietMarks) forget(cluster types.NamespacedName) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.byCluster, cluster)
}

// setQuiet keeps m as cluster's quiet mark beside the Admin pooled for it now (ok), or drops
// the mark; with no Admin pooled, no mark is kept.
func (r *RedisClusterReconciler) setQuiet(cluster types.NamespacedName, m quietMark, ok bool) {
	c, pooled := r.admins.Lookup(cluster)
	r.quietMarks.set(cluster, c.Admin, m, ok && pooled)
}

// quiet returns cluster's quiet mark with the Admin whose connections read it, while that
// Admin is still the one pooled for the cluster.
func (r *RedisClusterReconciler) quiet(cluster types.NamespacedName) (quietMark, clusterconn.Admin, bool) {
	c, pooled := r.admins.Lookup(cluster)
	if !pooled {
		return quietMark{}, nil, false
	}
	m, ok := r.quietMarks.get(cluster, c.Admin)
	if !ok {
		return quietMark{}, nil, false
	}
	return m, c.Admin, true
}
