package apps

import (
	"errors"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	appsv1api "github.com/middleware-operator/middleware-operator/api/apps/v1"
)

// TestRollingOutQuietly: which statuses the pacer may hold back. Only a rollout under way
// with nothing wrong and availability unchanged is; a finished rollout, an error, a stuck
// rollout and a change of availability are written at once. statusChange names each.
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
	setAppServiceStatus(settled, owned(), nil)
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
	setAppServiceStatus(rolling, surged, nil)
	countsOff := *settled.Status.DeepCopy()
	countsOff.ObservedGeneration, countsOff.AvailableReplicas = 2, 0

	cases := []struct {
		name   string
		before appsv1api.AppServiceStatus
		d      *appsv1.Deployment
		err    error
		quiet  bool
		change string
	}{
		{"a new AppService, its Deployment just created", appsv1api.AppServiceStatus{}, nil, nil, true, "first"},
		{"an image change under way", settled.Status, started, nil, true, "progress"},
		{"the rollout's next step", settled.Status, surged, nil, true, "progress"},
		{"the rollout finished", rolling.Status, owned(), nil, false, "settled"},
		{"a spec change with nothing to roll out", settled.Status, owned(), nil, false, "generation"},
		{"only a replica count differs", countsOff, owned(), nil, false, "counts"},
		{"availability lost during the rollout", settled.Status, unavailable, nil, false, "availability"},
		{"the rollout stuck", settled.Status, stuck, nil, false, "degraded"},
		{"a reconcile error", settled.Status, started, errors.New("boom"), false, "degraded"},
	}
	for _, c := range cases {
		next := app()
		next.Status = *c.before.DeepCopy()
		setAppServiceStatus(next, c.d, c.err)
		if got := rollingOutQuietly(c.before, next.Status); got != c.quiet {
			t.Errorf("%s: rollingOutQuietly = %t, want %t (conditions %v)", c.name, got, c.quiet, next.Status.Conditions)
		}
		if got := statusChange(c.before, next.Status); got != c.change {
			t.Errorf("%s: statusChange = %q, want %q", c.name, got, c.change)
		}
	}
}
