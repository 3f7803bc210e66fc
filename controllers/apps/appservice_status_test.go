package apps

import (
	"errors"
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"

	appsv1api "github.com/middleware-operator/middleware-operator/api/apps/v1"
	"github.com/middleware-operator/middleware-operator/internal/status"
)

// TestRollingOutQuietly: which statuses wait. Only a rollout under way with nothing wrong
// and availability unchanged does: held until its end when the AppService has a status,
// paced when it is the first; a finished rollout, an error, a stuck rollout, one moving
// again and a change of availability are written at once. statusChange names each.
func TestRollingOutQuietly(t *testing.T) {
	app := func() *appsv1api.AppService {
		return &appsv1api.AppService{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Generation: 2, UID: "u1"},
			Spec:       appsv1api.AppServiceSpec{Size: ptr.To[int32](1), Image: "nginx"},
		}
	}
	owned := func() *appsv1.Deployment {
		d := readyDeployment()
		d.OwnerReferences = []metav1.OwnerReference{{Kind: "AppService", Name: "web", UID: "u1", Controller: ptr.To(true)}}
		return d
	}
	settled := app()
	setAppServiceStatus(settled, owned(), rolloutProblem{}, nil)
	settled.Status.ObservedGeneration = 1

	started := owned() // the Deployment's new spec, not yet observed by its controller
	started.Generation = 3
	surged := owned() // a new pod up, the old one still there
	surged.Status.Replicas = 2
	unavailable := owned() // the only pod lost while rolling out
	unavailable.Generation, unavailable.Status.AvailableReplicas, unavailable.Status.ReadyReplicas = 3, 0, 0
	stuck := owned()
	stuck.Generation = 3
	stuck.Status.Conditions = append(stuck.Status.Conditions, appsv1.DeploymentCondition{
		Type: appsv1.DeploymentProgressing, Reason: "ProgressDeadlineExceeded", Message: "too slow"})

	rolling := app()
	rolling.Status = *settled.Status.DeepCopy()
	setAppServiceStatus(rolling, surged, rolloutProblem{}, nil)
	countsOff := *settled.Status.DeepCopy()
	countsOff.ObservedGeneration, countsOff.AvailableReplicas = 2, 0
	degraded := app()
	degraded.Status = *settled.Status.DeepCopy()
	setAppServiceStatus(degraded, stuck, rolloutProblem{}, nil)

	cases := []struct {
		name   string
		before appsv1api.AppServiceStatus
		d      *appsv1.Deployment
		err    error
		quiet  bool
		change string
		// write is when the reconcile writes it: "now", "paced" (after StatusInterval) or
		// "held" (until the Deployment reports the rollout's end or a problem).
		write string
	}{
		{"a new AppService, its Deployment just created", appsv1api.AppServiceStatus{}, nil, nil, true, "first", "paced"},
		{"an image change under way", settled.Status, started, nil, true, "progress", "held"},
		{"the rollout's next step", settled.Status, surged, nil, true, "progress", "held"},
		{"the rollout finished", rolling.Status, owned(), nil, false, "settled", "now"},
		{"a spec change with nothing to roll out", settled.Status, owned(), nil, false, "generation", "now"},
		{"only a replica count differs", countsOff, owned(), nil, false, "counts", "now"},
		{"availability lost during the rollout", settled.Status, unavailable, nil, false, "availability", "now"},
		{"the rollout stuck", settled.Status, stuck, nil, false, "degraded", "now"},
		{"a stuck rollout moving again", degraded.Status, surged, nil, false, "degraded", "now"},
		{"a reconcile error", settled.Status, started, errors.New("boom"), false, "degraded", "now"},
		{"nothing changed", settled.Status, owned(), nil, false, "generation", "now"},
	}
	for _, c := range cases {
		next := app()
		next.Status = *c.before.DeepCopy()
		setAppServiceStatus(next, c.d, rolloutProblem{}, c.err)
		if got := rollingOutQuietly(c.before, next.Status); got != c.quiet {
			t.Errorf("%s: rollingOutQuietly = %t, want %t (conditions %v)", c.name, got, c.quiet, next.Status.Conditions)
		}
		if got := statusChange(c.before, next.Status); got != c.change {
			t.Errorf("%s: statusChange = %q, want %q", c.name, got, c.change)
		}
		r := &AppServiceReconciler{StatusPace: status.NewPacer(StatusInterval)}
		before := app()
		before.Status = c.before
		if c.name == "nothing changed" {
			before.Status = next.Status
		}
		got := "now"
		switch wait, hold := r.statusWait(types.NamespacedName{Name: c.name}, before, next); {
		case hold && wait == 0:
			got = "held"
		case !hold && wait == StatusInterval:
			got = "paced"
		case hold || wait != 0:
			got = fmt.Sprintf("wait %s, hold %t", wait, hold)
		}
		if got != c.write {
			t.Errorf("%s: statusWait says %s, want %s", c.name, got, c.write)
		}
	}
}

// TestWarnRolloutProblem: a Warning when the status newly says the rollout failed or is
// past its deadline, once.
func TestWarnRolloutProblem(t *testing.T) {
	withDegraded := func(reason string) *appsv1api.AppService {
		a := &appsv1api.AppService{ObjectMeta: metav1.ObjectMeta{Name: "web"}}
		if reason != "" {
			status.Set(&a.Status.Conditions, 1, appsv1api.ConditionDegraded, metav1.ConditionTrue, reason, "why")
		}
		return a
	}
	cases := []struct {
		before, next string
		want         int
	}{
		{"", ReasonRolloutStuck, 1},
		{"", ReasonReplicaFailure, 1},
		{ReasonReplicaFailure, ReasonRolloutStuck, 1},
		{ReasonRolloutStuck, ReasonRolloutStuck, 0},
		{"", ReasonReconcileError, 0},
		{"", "", 0},
	}
	for _, c := range cases {
		rec := events.NewFakeRecorder(5)
		warnRolloutProblem(rec, withDegraded(c.before), withDegraded(c.next))
		if got := len(rec.Events); got != c.want {
			t.Errorf("Degraded %q then %q: %d events, want %d", c.before, c.next, got, c.want)
		}
	}
}
