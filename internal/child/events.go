package child

import (
	"errors"
	"strings"

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

// Outcomes collects what one reconcile did to its children, so that it is reported in one
// Normal event per outcome ("Created Deployment web, Service web") instead of one per
// child: at scale every event is an API write of its own.
type Outcomes struct {
	children map[Outcome][]client.Object
}

// Note adds a child's outcome from Ensure; a same-named object that is not the owner's is
// reported at once, as RecordOutcome does.
func (o *Outcomes) Note(rec events.EventRecorder, owner runtime.Object, conds []metav1.Condition, live client.Object, outcome Outcome, err error) {
	if err != nil {
		RecordOutcome(rec, owner, conds, live, outcome, err)
		return
	}
	if outcome != Created && outcome != Updated {
		return
	}
	if o.children == nil {
		o.children = map[Outcome][]client.Object{}
	}
	o.children[outcome] = append(o.children[outcome], live)
}

// Forget drops the children noted with outcome, for an owner whose status already reports
// what the outcome would say.
func (o *Outcomes) Forget(outcome Outcome) { delete(o.children, outcome) }

// Record emits the events of the outcomes noted: Created, then Updated, each naming its
// children (and relating the event to the child when there is only one).
func (o *Outcomes) Record(rec events.EventRecorder, owner runtime.Object) {
	for _, outcome := range []Outcome{Created, Updated} {
		children := o.children[outcome]
		if len(children) == 0 {
			continue
		}
		names := make([]string, len(children))
		for i, c := range children {
			names[i] = KindOf(c) + " " + c.GetName()
		}
		var related runtime.Object
		if len(children) == 1 {
			related = children[0]
		}
		rec.Eventf(owner, related, corev1.EventTypeNormal, string(outcome), string(outcome), "%s %s", outcome, strings.Join(names, ", "))
	}
}
