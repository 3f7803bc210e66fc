package redis

import (
	"context"
	"fmt"

	"github.com/middleware-operator/middleware-operator/internal/metrics"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
)

// upgradePods replaces pods that run an old template (a new version, repository or pod
// setting), one at a time, only while the cluster is healthy: replicas first; before a
// master's pod goes, a caught-up replica takes over with CLUSTER FAILOVER, so at most one
// failover happens at a time and clients lose no acknowledged write.
func (r *RedisClusterReconciler) upgradePods(ctx context.Context, s *state) (*ctrl.Result, error) {
	rev := s.sts.Status.UpdateRevision
	if rev == "" {
		return nil, nil
	}
	var outdated []member
	for _, m := range s.members {
		if m.pod.Labels[appsv1.ControllerRevisionHashLabelKey] != rev {
			outdated = append(outdated, m)
		}
	}
	if len(outdated) == 0 {
		return nil, nil
	}
	s.operation(redisv1alpha1.PhaseUpgrading, fmt.Sprintf("%d of %d pods run an old template", len(outdated), len(s.members)))
	if !s.health.Ready() {
		s.waiting = "waiting for the cluster to be Ready before replacing the next pod"
		return &ctrl.Result{RequeueAfter: waitInterval}, nil
	}
	// The pod replaced last may still answer while it terminates (its process stops after
	// the delete): replacing the next one then would take two down at once.
	for i := range s.pods {
		if p := &s.pods[i]; !p.DeletionTimestamp.IsZero() || p.Status.Phase != corev1.PodRunning {
			s.waiting = fmt.Sprintf("waiting for pod %s to be replaced before the next one", p.Name)
			return &ctrl.Result{RequeueAfter: waitInterval}, nil
		}
	}
	if len(s.pods) < int(s.rc.Spec.Replicas) {
		s.waiting = fmt.Sprintf("waiting for %d of %d pods to exist before replacing the next one", len(s.pods), s.rc.Spec.Replicas)
		return &ctrl.Result{RequeueAfter: waitInterval}, nil
	}
	next := outdated[0]
	for _, m := range outdated {
		if !m.self.IsMaster() {
			next = m
			break
		}
	}
	if next.self.IsMaster() {
		replica := caughtUpReplica(s, next.self.ID)
		if replica == "" && ptr.Deref(s.rc.Spec.ReplicasPerMaster, 1) > 0 {
			// Without a replica to take over, its slots would be down until the pod is back.
			s.waiting = fmt.Sprintf("waiting for a connected replica of master %s before replacing its pod", next.pod.Name)
			return &ctrl.Result{RequeueAfter: waitInterval}, nil
		}
		if replica != "" {
			inProgress, err := bounded(ctx, func(ctx context.Context) error { return r.adminFor(s).Failover(ctx, replica) })
			if err != nil {
				return nil, fmt.Errorf("while failing %s over before its upgrade: %w", next.pod.Name, err)
			}
			if inProgress {
				return &ctrl.Result{RequeueAfter: waitInterval}, nil
			}
			metrics.RedisFailovers.WithLabelValues(s.rc.Namespace, s.rc.Name, "coordinated").Inc()
			r.Recorder.Eventf(s.rc, nil, corev1.EventTypeNormal, "FailedOver", "Upgrade",
				"a replica took over from %s before its pod restarts", next.pod.Name)
			return &ctrl.Result{RequeueAfter: waitInterval}, nil
		}
	}
	uid := next.pod.UID
	if err := r.Delete(ctx, next.pod, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("while replacing pod %s: %w", next.pod.Name, err)
	}
	r.Recorder.Eventf(s.rc, nil, corev1.EventTypeNormal, "PodReplaced", "Upgrade", "replaced pod %s to run the new template", next.pod.Name)
	return &ctrl.Result{RequeueAfter: waitInterval}, nil
}

// caughtUpReplica is the address of a connected replica of master (Failover itself waits
// for its replication offset to catch up), or "".
func caughtUpReplica(s *state, master string) string {
	for _, m := range s.members {
		if !m.self.IsMaster() && m.self.MasterID == master && !m.self.Failed {
			return m.addr
		}
	}
	return ""
}
