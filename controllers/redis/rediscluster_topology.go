package redis

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	redisadmin "github.com/middleware-operator/middleware-operator/internal/redis"
	"github.com/middleware-operator/middleware-operator/internal/status"
)

// member is one pod's Redis node as it describes itself.
type member struct {
	pod  *corev1.Pod
	addr string
	self redisadmin.Node
	view []redisadmin.Node
}

// fresh reports whether the node is new and empty: it knows only itself and serves no slot.
func (m member) fresh() bool { return len(m.view) <= 1 && len(m.self.Slots) == 0 }

// leaving reports whether the pod is above the desired replica count (the StatefulSet
// removes the highest ordinals first).
func leaving(s *state, p *corev1.Pod) bool { return ordinal(p.Name) >= int(s.rc.Spec.Replicas) }

// readTopology asks every pod's node for CLUSTER NODES (read-only) and keeps the answers in
// s.members, in ordinal order. A pod that does not answer waits the reconcile.
func (r *RedisClusterReconciler) readTopology(ctx context.Context, s *state) (*ctrl.Result, error) {
	admin := r.adminFor(s)
	s.members = s.members[:0]
	for i := range s.pods {
		p := &s.pods[i]
		view, err := admin.ClusterNodes(ctx, podAddr(p))
		if err != nil {
			return &ctrl.Result{RequeueAfter: waitInterval}, nil //nolint:nilerr // a server still starting: wait
		}
		m := member{pod: p, addr: podAddr(p), view: view}
		for _, n := range view {
			if n.Myself {
				m.self = n
			}
		}
		s.members = append(s.members, m)
	}
	return nil, nil
}

// operation records the lifecycle operation under way, for the phase and reason.
func (s *state) operation(phase redisv1alpha1.Phase, reason string) {
	s.opPhase, s.opReason = phase, reason
}

// announce writes the phase and reason of an operation that may take a while (moving
// slots) before starting it, so `kubectl get` shows it while it runs.
func (r *RedisClusterReconciler) announce(ctx context.Context, s *state, phase redisv1alpha1.Phase, reason string) {
	s.operation(phase, reason)
	if s.rc.Status.Phase == phase && s.rc.Status.Reason == reason {
		return
	}
	next := s.rc.DeepCopy()
	setPhase(next, phase, reason)
	status.Set(&next.Status.Conditions, s.rc.Generation, ConditionProgressing, metav1.ConditionTrue, string(phase), reason)
	if _, err := status.Patch(ctx, r.Client, s.rc, next, redisClusterStatus); err == nil {
		s.rc = next
		s.next.ResourceVersion = next.ResourceVersion
	}
}

// addrs are the addresses of every member.
func (s *state) addrs() []string {
	out := make([]string, len(s.members))
	for i, m := range s.members {
		out[i] = m.addr
	}
	return out
}

// joined are the members that belong to the cluster (not fresh).
func (s *state) joined() []member {
	var out []member
	for _, m := range s.members {
		if !m.fresh() {
			out = append(out, m)
		}
	}
	return out
}

// moveOptions are the slot-move settings from spec.updateStrategy.
func moveOptions(s *state) redisadmin.MoveOptions {
	opts := redisadmin.MoveOptions{}
	if p := s.rc.Spec.UpdateStrategy.Pipeline; p != nil {
		opts.Pipeline = p.IntValue()
	}
	return opts
}

// clusterHealthy reports whether every member is connected, none is flagged failing, no
// slot is open, and the first member's CLUSTER INFO says ok.
func (r *RedisClusterReconciler) clusterHealthy(ctx context.Context, s *state) bool {
	if len(s.members) == 0 {
		return false
	}
	info, err := r.adminFor(s).ClusterInfo(ctx, s.members[0].addr)
	if err != nil || info["cluster_state"] != "ok" {
		return false
	}
	for _, m := range s.members {
		if m.fresh() || m.self.HasOpenSlots() {
			return false
		}
		for _, n := range m.view {
			if n.Failed || n.PossiblyFailed || n.HasFlag("handshake") || n.HasFlag("noaddr") {
				return false
			}
		}
	}
	return true
}
