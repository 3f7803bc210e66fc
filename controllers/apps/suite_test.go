package apps_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	"github.com/middleware-operator/middleware-operator/controllers/apps"
	"github.com/middleware-operator/middleware-operator/tests/testenv"
)

// env is the local cluster every test of this package shares; each test uses its own
// namespace.
var env *testenv.Env

// podCheckAfter is the suite's apps.PodCheckAfter: a failed image shows in seconds.
const podCheckAfter = 3 * time.Second

// mgr is the manager running the reconcilers under test.
var mgr ctrl.Manager

func TestMain(m *testing.M) {
	if code, ran := testenv.RunUnitTestsWhenShort(m); ran {
		os.Exit(code)
	}
	var err error
	env, err = testenv.Start(context.Background(), 3)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var stop func() error
	mgr, stop, err = env.StartManager(func(mgr ctrl.Manager) error {
		if err := (&apps.AppServiceReconciler{
			Client: mgr.GetClient(), Scheme: mgr.GetScheme(), Recorder: mgr.GetEventRecorder("appservice-controller"),
			PodCheckAfter: podCheckAfter,
		}).SetupWithManager(mgr, controller.Options{}); err != nil {
			return err
		}
		return (&apps.CloudManagerReconciler{
			Client: mgr.GetClient(), Scheme: mgr.GetScheme(), Recorder: mgr.GetEventRecorder("cloudmanager-controller"),
		}).SetupWithManager(mgr, controller.Options{})
	})
	if err != nil {
		env.Stop()
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	code = env.CheckManagerGrants(code, mayBeUnused, "controllers/apps/appservice_controller.go", "controllers/apps/cloudmanager_controller.go")
	if err := stop(); err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
	}
	env.Stop()
	os.Exit(code)
}

// mayBeUnused are the grants of the RBAC markers that no request of the operator needs to
// use in a test run, and why the operator has them.
var mayBeUnused = map[testenv.Grant]string{
	{Group: "apps.middleware-operator.io", Resource: "cloudmanagers/finalizers", Verb: "update"}: "the API server checks it when the operator sets blockOwnerDeletion on a child's owner reference; the operator sends no such request itself",
	{Group: "events.k8s.io", Resource: "events", Verb: "patch"}:                                  "the event recorder patches an event's series only when the same event repeats within minutes",
}
