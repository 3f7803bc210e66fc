package redis

import (
	"context"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/metrics"
	"github.com/middleware-operator/middleware-operator/internal/quietlook"
)

// A converged cluster is looked at every IdleLook (2.5 s) so that a cut-off master shows
// before a second master claims its slots, but reading every node whole, planning and
// deriving the status that often cost about 6 ms of CPU a look, mostly garbage, and even a
// reconcile that only asked CLUSTER INFO cost 1.5 ms (issue 53). So after a full look that
// found the cluster Ready with nothing to do, and until the next full look is due
// (plan.Step.Steady: a minute, or 10 s for clusters that scale on memory or archive), the looks
// are quiet and made by the prober (quietlook.Marks.Run), outside any reconcile: every IdleLook
// it asks each node only CLUSTER INFO and compares the head of each answer
// (observe.Observation.InfoHead: state, slot counts, failing slots, known nodes, epochs)
// with the full look's. A different head or a node that does not answer wakes the cluster's
// reconcile, which looks whole at once. A reconcile that comes meanwhile for another reason
// checks what the prober cannot see (the RedisCluster and its pods as the full look saw
// them, no event since about a pod, a child, a Secret or ConfigMap it names) and ends there
// when nothing differs. A full look leaves no mark while something is under way that only
// a full look would see end (the planner's Step.Steady is 0 then). What a quiet look cannot see (memory,
// replication offsets and links, key counts, children drifting without a watch) waits for
// the next full look. Without a running prober (a reconciler outside a manager) a reconcile
// makes the quiet look itself, as the prober would.

// quietMarkOf is the mark s's full look leaves: ok only when it ended without error on a
// step the planner found steady (plan.Step.Steady: the cluster idle and Ready, every pod's
// node answering with its CLUSTER INFO, nothing under way that only a full look follows).
func quietMarkOf(s *state, now time.Time) (quietlook.Mark, bool) {
	if s.err != nil || s.step.Steady == 0 {
		return quietlook.Mark{}, false
	}
	m := quietlook.Mark{ResourceVersion: s.next.ResourceVersion, Pods: podsFingerprint(s.pods),
		Until: now.Add(s.step.Steady), After: s.lookAgain()}
	for i := range s.snap.Nodes {
		o := &s.snap.Nodes[i]
		m.Addrs, m.Heads = append(m.Addrs, o.Addr), append(m.Heads, o.InfoHead)
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

// noteLook records the end of a full look that ended without error, its quiet mark or
// none, and returns how soon the cluster is to be reconciled again: when the step asks,
// or, with a mark and the prober running, when the next full look is due (the prober
// wakes the cluster sooner on any change).
func (r *RedisClusterReconciler) noteLook(s *state) time.Duration {
	now := time.Now()
	m, ok := quietMarkOf(s, now)
	r.setQuiet(client.ObjectKeyFromObject(s.rc), m, ok)
	if ok && r.quietMarks.Probing() {
		return m.Until.Sub(now)
	}
	return s.lookAgain()
}

// quietLook is a look at rc that ends without reading the nodes whole, when a full look
// left a quiet mark that is not due yet, the RedisCluster and its pods are as that look
// saw them, and the quiet looks since (the prober's, or one made here when the prober has
// not looked lately) found every node's CLUSTER INFO head unchanged: it returns how soon
// to look again and true. Otherwise it drops the mark and the reconcile goes on to a full
// look (which leaves a new mark if it ends as quietly); silent holds the nodes whose CLUSTER
// INFO timed out, so that look does not wait on them a second time.
func (r *RedisClusterReconciler) quietLook(ctx context.Context, rc *redisv1alpha1.RedisCluster) (after time.Duration, quiet bool, silent map[string]error) {
	key := client.ObjectKeyFromObject(rc)
	after, quiet, silent = r.stillQuiet(ctx, rc, key)
	if quiet {
		return after, true, nil
	}
	r.setQuiet(key, quietlook.Mark{}, false)
	metrics.RedisLooks.WithLabelValues("full").Inc()
	return 0, false, silent
}

// stillQuiet reports whether rc, its pods and every node's CLUSTER INFO head are as the
// quiet mark's full look saw them, before the mark is due, and how soon to look again;
// silent are the nodes whose read timed out.
func (r *RedisClusterReconciler) stillQuiet(ctx context.Context, rc *redisv1alpha1.RedisCluster, key types.NamespacedName) (time.Duration, bool, map[string]error) {
	now := time.Now()
	e, ok := r.quiet(key)
	if !ok || !now.Before(e.Mark.Until) || rc.ResourceVersion != e.Mark.ResourceVersion || !rc.DeletionTimestamp.IsZero() {
		return 0, false, nil
	}
	if e.Changed {
		return 0, false, e.Silent
	}
	if r.changes.pending(key) {
		// An event since the full look: a pod, a child, a Secret or ConfigMap it names.
		return 0, false, nil
	}
	if pods, err := r.clusterPods(ctx, rc); err != nil || podsFingerprint(pods) != e.Mark.Pods {
		return 0, false, nil
	}
	if !r.quietMarks.Probing() || now.Sub(e.Probed) > e.Mark.After+quietlook.ProbeTimeout {
		// No prober looked lately: look here, as it would.
		unchanged, silent := quietlook.Probe(ctx, e.Heads, e.Mark)
		if !unchanged {
			return 0, false, silent
		}
		r.quietMarks.ProbedAt(key, e.Gen, now)
	}
	if r.quietMarks.Probing() {
		return e.Mark.Until.Sub(now), true, nil
	}
	return e.Mark.After, true, nil
}

// setQuiet keeps m as cluster's quiet mark beside the Admin pooled for it now (ok), or drops
// the mark; with no Admin pooled, no mark is kept.
func (r *RedisClusterReconciler) setQuiet(cluster types.NamespacedName, m quietlook.Mark, ok bool) {
	if c, pooled := r.admins.Lookup(cluster); ok && pooled {
		r.quietMarks.Set(cluster, c.Admin, m)
		return
	}
	r.quietMarks.Forget(cluster)
}

// quiet returns cluster's quiet entry, while the Admin it was left beside is still the one
// pooled for the cluster.
func (r *RedisClusterReconciler) quiet(cluster types.NamespacedName) (quietlook.Entry, bool) {
	c, pooled := r.admins.Lookup(cluster)
	if !pooled {
		return quietlook.Entry{}, false
	}
	return r.quietMarks.Get(cluster, c.Admin)
}
