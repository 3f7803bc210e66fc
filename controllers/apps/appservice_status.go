package apps

import (
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/events"

	appsv1api "github.com/middleware-operator/middleware-operator/api/apps/v1"
	"github.com/middleware-operator/middleware-operator/internal/child"
	"github.com/middleware-operator/middleware-operator/internal/objectlabels"
	"github.com/middleware-operator/middleware-operator/internal/resources"
	"github.com/middleware-operator/middleware-operator/internal/status"
)

// Condition reasons of an AppService.
const (
	ReasonReplicasAvailable   = "MinimumReplicasAvailable"
	ReasonReplicasUnavailable = "ReplicasUnavailable"
	ReasonRolloutComplete     = "RolloutComplete"
	ReasonRollingOut          = "RollingOut"
	ReasonReconciled          = "Reconciled"
	ReasonNotControlled       = child.ReasonNotControlled
	ReasonReconcileError      = "ReconcileError"
	ReasonRolloutStuck        = "ProgressDeadlineExceeded"
	ReasonReplicaFailure      = "ReplicaFailure"
)

// setAppServiceStatus derives the status from the Deployment, what stops its pods (see
// podsFailing) and the reconcile error.
func setAppServiceStatus(app *appsv1api.AppService, d *appsv1.Deployment, failing rolloutProblem, err error) {
	st := &app.Status
	gen := app.Generation
	st.ObservedGeneration = gen
	size := resources.AppServiceSize(app)
	if d != nil && metav1.IsControlledBy(d, app) {
		st.Replicas, st.ReadyReplicas = d.Status.Replicas, d.Status.ReadyReplicas
		st.AvailableReplicas, st.UpdatedReplicas = d.Status.AvailableReplicas, d.Status.UpdatedReplicas
	}
	st.Ready = fmt.Sprintf("%d/%d", st.ReadyReplicas, size)
	st.Selector = labels.SelectorFromSet(objectlabels.SelectorLabels(objectlabels.AppServiceKind, app.Name)).String()

	if st.AvailableReplicas >= size && d != nil && metav1.IsControlledBy(d, app) {
		status.Set(&st.Conditions, gen, appsv1api.ConditionAvailable, metav1.ConditionTrue, ReasonReplicasAvailable,
			fmt.Sprintf("%d of %d replicas available", st.AvailableReplicas, size))
	} else {
		status.Set(&st.Conditions, gen, appsv1api.ConditionAvailable, metav1.ConditionFalse, ReasonReplicasUnavailable,
			fmt.Sprintf("%d of %d replicas available", st.AvailableReplicas, size))
	}
	if rollingOut(d, size) {
		status.Set(&st.Conditions, gen, appsv1api.ConditionProgressing, metav1.ConditionTrue, ReasonRollingOut,
			fmt.Sprintf("%d of %d replicas updated, %d ready", st.UpdatedReplicas, size, st.ReadyReplicas))
	} else {
		status.Set(&st.Conditions, gen, appsv1api.ConditionProgressing, metav1.ConditionFalse, ReasonRolloutComplete,
			"the Deployment runs the current spec")
	}
	setDegraded(&st.Conditions, gen, err, rolloutStuck(d, failing))
}

// rolloutStuck is why the rollout cannot finish: pods refused by the API server first, then
// a container of the pods that cannot start (the cause), then the Deployment past its
// progress deadline (the symptom).
func rolloutStuck(d *appsv1.Deployment, failing rolloutProblem) rolloutProblem {
	stuck := deploymentStuck(d)
	if stuck.reason == ReasonReplicaFailure || failing.reason == "" {
		return stuck
	}
	return failing
}

// setDegraded sets Degraded from a reconcile error or a stuck rollout message.
func setDegraded(conds *[]metav1.Condition, gen int64, err error, stuck rolloutProblem) {
	var notOurs *child.NotControlledError
	switch {
	case errors.As(err, &notOurs):
		status.Set(conds, gen, appsv1api.ConditionDegraded, metav1.ConditionTrue, ReasonNotControlled, notOurs.Error())
	case err != nil:
		status.Set(conds, gen, appsv1api.ConditionDegraded, metav1.ConditionTrue, ReasonReconcileError, err.Error())
	case stuck.reason != "":
		status.Set(conds, gen, appsv1api.ConditionDegraded, metav1.ConditionTrue, stuck.reason, stuck.message)
	default:
		status.Set(conds, gen, appsv1api.ConditionDegraded, metav1.ConditionFalse, ReasonReconciled, "all children match the spec")
	}
}

// statusChange names what changed from before to next, for the status_writes_total
// metric: the first status, Degraded, Available, a rollout under way (progress) or over
// (settled), the observed generation alone, or else the replica counts.
func statusChange(before, next appsv1api.AppServiceStatus) string {
	changed := func(t string) bool {
		b, n := meta.FindStatusCondition(before.Conditions, t), meta.FindStatusCondition(next.Conditions, t)
		return b == nil || n == nil || b.Status != n.Status || b.Reason != n.Reason
	}
	switch {
	case len(before.Conditions) == 0:
		return "first"
	case changed(appsv1api.ConditionDegraded) || meta.IsStatusConditionTrue(next.Conditions, appsv1api.ConditionDegraded):
		return "degraded"
	case changed(appsv1api.ConditionAvailable):
		return "availability"
	case meta.IsStatusConditionTrue(next.Conditions, appsv1api.ConditionProgressing):
		return "progress"
	case changed(appsv1api.ConditionProgressing):
		return "settled"
	case before.ObservedGeneration != next.ObservedGeneration:
		return "generation"
	}
	return "counts"
}

// rollingOutQuietly reports whether next is the status of a rollout under way that nothing
// has gone wrong with: Progressing, not Degraded (nor was it: its end is news), and
// available as before (a change of availability is news; the Available condition's first
// setting is not).
func rollingOutQuietly(before, next appsv1api.AppServiceStatus) bool {
	if !meta.IsStatusConditionTrue(next.Conditions, appsv1api.ConditionProgressing) ||
		meta.IsStatusConditionTrue(next.Conditions, appsv1api.ConditionDegraded) ||
		meta.IsStatusConditionTrue(before.Conditions, appsv1api.ConditionDegraded) {
		return false
	}
	was := meta.FindStatusCondition(before.Conditions, appsv1api.ConditionAvailable)
	return was == nil || meta.IsStatusConditionPresentAndEqual(next.Conditions, appsv1api.ConditionAvailable, was.Status)
}

func rollingOut(d *appsv1.Deployment, size int32) bool {
	if d == nil {
		return true
	}
	return d.Generation != d.Status.ObservedGeneration || d.Status.UpdatedReplicas < size ||
		d.Status.Replicas > d.Status.UpdatedReplicas || d.Status.ReadyReplicas < size
}

// rolloutProblem is why a Deployment cannot reach its spec (reason ReplicaFailure or
// ProgressDeadlineExceeded, with the Deployment's message); zero when there is none.
type rolloutProblem struct{ reason, message string }

// deploymentStuck is the Deployment's problem: its pods refused (ReplicaFailure, for example
// by Pod Security admission or a quota) or its rollout past its deadline.
func deploymentStuck(d *appsv1.Deployment) rolloutProblem {
	if d == nil {
		return rolloutProblem{}
	}
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentReplicaFailure && c.Status == corev1.ConditionTrue {
			return rolloutProblem{ReasonReplicaFailure, c.Message}
		}
	}
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentProgressing && c.Reason == "ProgressDeadlineExceeded" {
			return rolloutProblem{ReasonRolloutStuck, c.Message}
		}
	}
	return rolloutProblem{}
}

// warnRolloutProblem emits a Warning when the status written, next, newly says that the
// rollout failed (ReplicaFailure), that a container of its pods cannot start (the waiting
// reason, see podFailureHints) or that it passed its deadline (ProgressDeadlineExceeded):
// once per problem, as the status changes.
func warnRolloutProblem(rec events.EventRecorder, before, next *appsv1api.AppService) {
	c := meta.FindStatusCondition(next.Status.Conditions, appsv1api.ConditionDegraded)
	if c == nil || c.Status != metav1.ConditionTrue || (c.Reason != ReasonRolloutStuck && c.Reason != ReasonReplicaFailure && podFailureHints[c.Reason] == "") {
		return
	}
	if was := meta.FindStatusCondition(before.Status.Conditions, appsv1api.ConditionDegraded); was != nil &&
		was.Status == c.Status && was.Reason == c.Reason {
		return
	}
	rec.Eventf(before, nil, corev1.EventTypeWarning, c.Reason, "Rollout", "%s", c.Message)
}
