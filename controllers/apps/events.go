package apps

import (
	"errors"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1api "github.com/middleware-operator/middleware-operator/api/apps/v1"
	"github.com/middleware-operator/middleware-operator/internal/child"
)

// recordChildOutcome emits a Normal event when a child was created or updated and a Warning
// when a same-named object is not ours, unless the owner already reports that (conds holds
// the owner's conditions as last written), so backoff retries do not repeat the Warning.
func recordChildOutcome(rec events.EventRecorder, owner runtime.Object, conds []metav1.Condition, live client.Object, outcome child.Outcome, err error) {
	var notOurs *child.NotControlledError
	switch {
	case errors.As(err, &notOurs):
		c := meta.FindStatusCondition(conds, appsv1api.ConditionDegraded)
		if c == nil || c.Status != metav1.ConditionTrue || c.Message != notOurs.Error() {
			rec.Eventf(owner, nil, corev1.EventTypeWarning, ReasonNotControlled, "Reconcile", "%s", notOurs.Error())
		}
	case err != nil:
		return
	case outcome == child.Created || outcome == child.Updated:
		rec.Eventf(owner, live, corev1.EventTypeNormal, string(outcome), string(outcome), "%s %s %s", outcome, child.KindOf(live), live.GetName())
	}
}
