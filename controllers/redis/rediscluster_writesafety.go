package redis

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/execute"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/health"
	"github.com/middleware-operator/middleware-operator/internal/status"
)

// The write-safety condition and events.
const (
	// ConditionWritesAccepted: every master serving slots accepts writes as far as
	// min-replicas-to-write goes (spec.writeSafety Strict): False names the masters that
	// refuse them (NOREPLICAS) for want of a replica acknowledging their stream.
	ConditionWritesAccepted = "WritesAccepted"
	// ReasonWritesAccepted and ReasonNoReplicaInTime are its reasons; ReasonNoReplicaInTime
	// is also the Warning event when masters start refusing writes, ReasonWritesResumed the
	// Normal event when they all accept them again.
	ReasonWritesAccepted  = "WritesAccepted"
	ReasonNoReplicaInTime = "NoReplicaInTime"
	ReasonWritesResumed   = "WritesResumed"
	// ReasonWriteSafetyConfigured is the event of nodes given a new min-replicas-to-write
	// while running.
	ReasonWriteSafetyConfigured = "WriteSafetyConfigured"
)

// setWriteSafety carries out StepSetWriteSafety: CONFIG SET on each node of the step.
func (r *RedisClusterReconciler) setWriteSafety(ctx context.Context, s *state) error {
	return r.configureReported(ctx, s, ReasonWriteSafetyConfigured, s.step.WriteSafety.String(), func(addr string) error {
		return execute.SetWriteSafety(ctx, addr, s.certs.config, s.login(), s.step.WriteSafety)
	})
}

// setWritesAccepted says which masters refuse writes under min-replicas-to-write, with an
// event when some start to and when all accept them again. Nothing is said of a cluster
// that runs without min-replicas-to-write, nor when no node answered this look.
func setWritesAccepted(s *state, gen int64) {
	if !s.writeSafety.Managed || s.writeSafety.MinReplicas == 0 || len(s.snap.Nodes) == 0 || s.health.Masters == 0 {
		meta.RemoveStatusCondition(&s.next.Status.Conditions, ConditionWritesAccepted)
		return
	}
	was := meta.FindStatusCondition(s.rc.Status.Conditions, ConditionWritesAccepted)
	refusing := health.RefusingWrites(s.snap)
	if len(refusing) == 0 {
		if was != nil && was.Status == metav1.ConditionFalse {
			s.report(corev1.EventTypeNormal, ReasonWritesResumed, "Observe", "every master accepts writes again (was: %s)", clip(was.Message, eventNoteLimit-60))
		}
		status.Set(&s.next.Status.Conditions, gen, ConditionWritesAccepted, metav1.ConditionTrue, ReasonWritesAccepted,
			"every master has a replica that acknowledged its writes in time (spec.writeSafety Strict)")
		return
	}
	msg := "masters " + strings.Join(refusing, ", ") + " refuse writes (NOREPLICAS): no replica acknowledged their stream within min-replicas-max-lag " +
		"(spec.writeSafety Strict); they accept writes again once a replica is connected and in sync"
	if s.step.Operation != "" {
		msg += "; under way: " + s.step.Reason
	}
	if was == nil || was.Status != metav1.ConditionFalse {
		s.report(corev1.EventTypeWarning, ReasonNoReplicaInTime, "Observe", "%s", clip(msg, eventNoteLimit))
	}
	status.Set(&s.next.Status.Conditions, gen, ConditionWritesAccepted, metav1.ConditionFalse, ReasonNoReplicaInTime, msg)
}
