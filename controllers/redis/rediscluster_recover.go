package redis

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/metrics"
	redisadmin "github.com/middleware-operator/middleware-operator/internal/redis"
)

// AcceptDataLossAnnotation, set to "true" on a RedisCluster whose every node came back
// without its data, lets the operator form a new, empty cluster in its place. The operator
// removes it once the new cluster is formed.
const AcceptDataLossAnnotation = "redis.middleware-operator.io/accept-data-loss"

// lostAfter is how long every recorded member must stay silent or empty after its pod
// started before the operator calls the cluster lost (pods restarting together are not).
const lostAfter = time.Minute

// opTimeout bounds every Redis action of one reconcile, so no reconcile holds a worker long.
const opTimeout = 10 * time.Second

// waitPodsInterval is how often the reconciler looks again while it waits for pods that do
// not answer (Pending, starting, held by their start guard).
const waitPodsInterval = 5 * time.Second

// guardLostCluster refuses to form a new cluster over a formed one whose every node is
// silent or back empty: that would silently replace the user's data. The status says so and
// how to accept the loss; with AcceptDataLossAnnotation the record is cleared, the start
// guards let the empty pods start, and formCluster forms a new cluster.
func (r *RedisClusterReconciler) guardLostCluster(ctx context.Context, s *state) (*ctrl.Result, error) {
	if !redisadmin.Lost(s.snap) {
		return nil, nil
	}
	if s.rc.Annotations[AcceptDataLossAnnotation] == "true" {
		if err := r.writeMembers(ctx, s, map[string]string{}); err != nil {
			return nil, err
		}
		r.Recorder.Eventf(s.rc, nil, corev1.EventTypeWarning, "DataLossAccepted", "Create",
			"%s is set: the record of the lost cluster's %d members is cleared and a new, empty cluster will be formed",
			AcceptDataLossAnnotation, len(s.snap.Members))
		return &ctrl.Result{RequeueAfter: waitInterval}, nil
	}
	if time.Since(silentSince(s)) < lostAfter || len(s.pods) == 0 {
		s.waiting = fmt.Sprintf("none of the %d recorded members answers with its cluster state yet", len(s.snap.Members))
		return &ctrl.Result{RequeueAfter: waitPodsInterval}, nil
	}
	s.lost = fmt.Sprintf("none of the %d recorded members of the cluster has answered with its cluster state for over %s: "+
		"if their volumes were lost, so is the data. The operator forms no new cluster over it; to accept the loss and start an empty one, "+
		"run: kubectl annotate rediscluster %s %s=true", len(s.snap.Members), lostAfter, s.rc.Name, AcceptDataLossAnnotation)
	return &ctrl.Result{RequeueAfter: healthInterval}, nil
}

// guardLostShards handles masters whose slots have no copy left (redisadmin.LostShards: the
// master and every replica came back without data, or never came back). Redis cannot serve
// those slots, and with cluster-require-full-coverage the whole cluster refuses writes. The
// operator never gives those slots up by itself: the status names them and how to accept
// the loss. With AcceptDataLossAnnotation, every member forgets the lost masters
// (redisadmin.PlanAbandon), the annotation is removed, and the next recoveries serve the
// slots again, empty (planCover), while the held pods are released to rejoin.
func (r *RedisClusterReconciler) guardLostShards(ctx context.Context, s *state) (*ctrl.Result, error) {
	shards := redisadmin.LostShards(s.snap)
	if len(shards) == 0 {
		return nil, nil
	}
	var names []string
	slots := 0
	for _, sh := range shards {
		names = append(names, fmt.Sprintf("%s (last at %s, slots %s)", sh.ID[:min(8, len(sh.ID))], sh.Addr, redisadmin.FormatSlotRanges(sh.Slots)))
		slots += redisadmin.CountSlots(sh.Slots)
	}
	if s.rc.Annotations[AcceptDataLossAnnotation] != "true" {
		s.lost = fmt.Sprintf("%d slots have no copy left: master %s and every replica of it came back without data or never answered; "+
			"the cluster serves nothing while slots are uncovered. The operator gives no slot up by itself; to accept the loss of the keys "+
			"in those slots and serve them again, empty, run: kubectl annotate rediscluster %s %s=true",
			slots, strings.Join(names, ", "), s.rc.Name, AcceptDataLossAnnotation)
		return &ctrl.Result{RequeueAfter: healthInterval}, nil
	}
	action, ok := redisadmin.PlanAbandon(s.snap)
	if !ok {
		s.waiting = "waiting for the members of the lost shards to settle before forgetting them"
		return &ctrl.Result{RequeueAfter: waitPodsInterval}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	if err := r.adminFor(s).Run(ctx, action); err != nil {
		return nil, fmt.Errorf("while forgetting the lost shards: %w", err)
	}
	metrics.RedisRecoveries.WithLabelValues(s.rc.Namespace, s.rc.Name, string(action.Kind)).Inc()
	r.Recorder.Eventf(s.rc, nil, corev1.EventTypeWarning, "DataLossAccepted", "Heal", "%s is set: %s", AcceptDataLossAnnotation, action.Message)
	if err := r.dropAcceptance(ctx, s.rc); err != nil {
		return nil, err
	}
	s.operation(redisv1alpha1.PhaseHealing, action.Message)
	return &ctrl.Result{RequeueAfter: waitInterval}, nil
}

// silentSince is since when the cluster may have been lost: the later of when it stopped
// being Ready and when its newest pod started (now while the last status still says Ready).
func silentSince(s *state) time.Time {
	since := time.Now()
	if c := meta.FindStatusCondition(s.rc.Status.Conditions, ConditionReady); c != nil && c.Status == metav1.ConditionFalse {
		since = c.LastTransitionTime.Time
	}
	if started := newestStart(s.pods); started.After(since) {
		since = started
	}
	return since
}

// newestStart is when the most recently started pod started (its creation while it has not).
func newestStart(pods []corev1.Pod) time.Time {
	var newest time.Time
	for _, p := range pods {
		t := p.CreationTimestamp.Time
		if p.Status.StartTime != nil {
			t = p.Status.StartTime.Time
		}
		if t.After(newest) {
			newest = t
		}
	}
	return newest
}

// dropAcceptance removes AcceptDataLossAnnotation once a cluster is formed again, so it
// cannot accept a later loss unseen.
func (r *RedisClusterReconciler) dropAcceptance(ctx context.Context, rc *redisv1alpha1.RedisCluster) error {
	if _, ok := rc.Annotations[AcceptDataLossAnnotation]; !ok {
		return nil
	}
	patched := rc.DeepCopy()
	delete(patched.Annotations, AcceptDataLossAnnotation)
	if err := r.Patch(ctx, patched, client.MergeFrom(rc)); err != nil {
		return fmt.Errorf("while removing the annotation %s: %w", AcceptDataLossAnnotation, err)
	}
	return nil
}

// recover runs the next recovery PlanRecovery finds in the snapshot (re-introductions,
// re-pointed replicas, forced failovers, forgotten ghosts, demotions, replica moves): one
// bounded action per reconcile, then a fresh look.
func (r *RedisClusterReconciler) recover(ctx context.Context, s *state) (*ctrl.Result, error) {
	action, ok := redisadmin.PlanRecovery(s.snap)
	if !ok {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	if err := r.adminFor(s).Run(ctx, action); err != nil {
		return nil, fmt.Errorf("while healing the cluster (%s): %w", action.Kind, err)
	}
	metrics.RedisRecoveries.WithLabelValues(s.rc.Namespace, s.rc.Name, string(action.Kind)).Inc()
	kind := corev1.EventTypeNormal
	switch action.Kind {
	case redisadmin.ActionForceFailover:
		kind = corev1.EventTypeWarning
		metrics.RedisFailovers.WithLabelValues(s.rc.Namespace, s.rc.Name, "forced").Inc()
	case redisadmin.ActionTakeover:
		kind = corev1.EventTypeWarning
		metrics.RedisFailovers.WithLabelValues(s.rc.Namespace, s.rc.Name, "takeover").Inc()
	}
	r.Recorder.Eventf(s.rc, nil, kind, string(action.Kind), "Heal", "%s", action.Message)
	s.operation(redisv1alpha1.PhaseHealing, action.Message)
	return &ctrl.Result{RequeueAfter: waitInterval}, nil
}

// waitForMembers stops the lifecycle steps (join, slot moves, removal, upgrade) while a
// recorded member does not answer or the cluster still lists a failed node: they need
// every slot owner and change nothing a recovery depends on. A new pod that never joined
// (Pending for good, say) does not stop them.
func (r *RedisClusterReconciler) waitForMembers(_ context.Context, s *state) (*ctrl.Result, error) {
	var silent []string
	for i := range s.snap.Nodes {
		o := &s.snap.Nodes[i]
		if _, recorded := s.recorded[o.Pod]; recorded && !o.Answered() {
			silent = append(silent, o.Pod)
		}
	}
	if len(silent) == 0 && !s.health.HasFailedNodes() {
		return nil, nil
	}
	if len(silent) > 0 {
		s.waiting = fmt.Sprintf("waiting for %s to answer", strings.Join(silent, ", "))
	} else {
		s.waiting = "waiting for the cluster to settle a failed node"
	}
	return &ctrl.Result{RequeueAfter: waitPodsInterval}, nil
}

// bounded runs an action that may wait on Redis for up to opTimeout. Running out of time is
// not an error: the action is idempotent and the next reconcile goes on from where it is.
func bounded(ctx context.Context, act func(ctx context.Context) error) (inProgress bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	err = act(ctx)
	if err != nil && errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil {
		return true, nil
	}
	return false, err
}
