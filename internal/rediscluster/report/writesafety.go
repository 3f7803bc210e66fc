package report

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/health"
	"github.com/middleware-operator/middleware-operator/internal/status"
)

// setWritesAccepted says which masters refuse writes under min-replicas-to-write, with an
// event when some start to and when all accept them again. Nothing is said of a cluster
// that runs without min-replicas-to-write, nor when no node answered this look.
func setWritesAccepted(s *Input, gen int64) {
	if !s.WriteSafety.Managed || s.WriteSafety.MinReplicas == 0 || len(s.Snap.Nodes) == 0 || s.Health.Masters == 0 {
		meta.RemoveStatusCondition(&s.Next.Status.Conditions, ConditionWritesAccepted)
		return
	}
	was := meta.FindStatusCondition(s.Cluster.Status.Conditions, ConditionWritesAccepted)
	refusing := health.RefusingWrites(s.Snap)
	if len(refusing) == 0 {
		if was != nil && was.Status == metav1.ConditionFalse {
			s.report(corev1.EventTypeNormal, ReasonWritesResumed, "Observe", "every master accepts writes again (was: %s)", clip(was.Message, eventNoteLimit-60))
		}
		status.Set(&s.Next.Status.Conditions, gen, ConditionWritesAccepted, metav1.ConditionTrue, ReasonWritesAccepted,
			"every master has a replica that acknowledged its writes in time (spec.writeSafety Strict)")
		return
	}
	msg := "masters " + strings.Join(refusing, ", ") + " refuse writes (NOREPLICAS): no replica acknowledged their stream within min-replicas-max-lag " +
		"(spec.writeSafety Strict); they accept writes again once a replica is connected and in sync"
	if s.Step.Operation != "" {
		msg += "; under way: " + s.Step.Reason
	}
	if was == nil || was.Status != metav1.ConditionFalse {
		s.report(corev1.EventTypeWarning, ReasonNoReplicaInTime, "Observe", "%s", clip(msg, eventNoteLimit))
	}
	status.Set(&s.Next.Status.Conditions, gen, ConditionWritesAccepted, metav1.ConditionFalse, ReasonNoReplicaInTime, msg)
}
