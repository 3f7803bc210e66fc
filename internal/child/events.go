package child

import (
	"errors"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ReasonNotControlled is the event and condition reason for a same-named object the owner
// does not control.
const ReasonNotControlled = "ChildNotControlled"

// RecordOutcome emits a Normal event when Ensure created or updated a child, and a Warning
// when a same-named object is not the owner's, unless the owner's Degraded condition (in
// conds, as last written) already says so, so backoff retries do not repeat the Warning.
func RecordOutcome(rec events.EventRecorder, owner runtime.Object, conds []metav1.Condition, live client.Object, outcome Outcome, err error) {
	var notOurs *NotControlledError
	switch {
	case errors.As(err, &notOurs):
		c := meta.FindStatusCondition(conds, "Degraded")
		if c == nil || c.Status != metav1.ConditionTrue || c.Message != notOurs.Error() {
			rec.Eventf(owner, nil, corev1.EventTypeWarning, ReasonNotControlled, "Reconcile", "%s", notOurs.Error())
		}
	case err == nil && (outcome == Created || outcome == Updated):
		rec.Eventf(owner, live, corev1.EventTypeNormal, string(outcome), string(outcome), "%s %s %s", outcome, KindOf(live), live.GetName())
	}
}
