package redis

import (
	corev1 "k8s.io/api/core/v1"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	redisadmin "github.com/middleware-operator/middleware-operator/internal/redis"
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

// operation records the lifecycle operation under way, for the phase and reason.
func (s *state) operation(phase redisv1alpha1.Phase, reason string) {
	s.opPhase, s.opReason = phase, reason
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
