package apps_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"

	appsv1api "github.com/middleware-operator/middleware-operator/api/apps/v1"
	"github.com/middleware-operator/middleware-operator/controllers/apps"
	"github.com/middleware-operator/middleware-operator/tests/testenv"
)

func TestCloudManagerReadyReconcileMakesNoWrites(t *testing.T) {
	t.Parallel()
	cases := map[string]func(*appsv1api.CloudManager){
		"rootPass":           func(*appsv1api.CloudManager) {},
		"generated password": func(cm *appsv1api.CloudManager) { cm.Spec.DB.RootPass = "" },
	}
	for name, change := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ns := env.Namespace(t)
			cm := seedCloudManager(t, ns)
			change(cm)
			key := createCM(t, cm)
			ready := waitReady(t, key, readyTimeout)
			// The reconciler below reads the manager's cache: wait until it has the Ready status
			// too, or a stale read would make it write what is already there.
			testenv.Eventually(t, 10*time.Second, func(ctx context.Context) (bool, string) {
				cached := &appsv1api.CloudManager{}
				if err := mgr.GetClient().Get(ctx, key, cached); err != nil {
					return false, err.Error()
				}
				return cached.Status.Phase == ready.Status.Phase && cached.Status.ObservedGeneration == ready.Generation,
					fmt.Sprintf("the cache has phase %s of generation %d", cached.Status.Phase, cached.Status.ObservedGeneration)
			})

			var writes atomic.Int64
			recorder := events.NewFakeRecorder(10)
			r := &apps.CloudManagerReconciler{Client: testenv.CountingClient{Client: mgr.GetClient(), Writes: &writes}, Scheme: env.Scheme, Recorder: recorder}
			for i := range 5 {
				res, err := r.Reconcile(t.Context(), ctrl.Request{NamespacedName: key})
				if err != nil {
					t.Fatalf("reconcile %d: %v", i, err)
				}
				if res.RequeueAfter != 0 {
					t.Errorf("reconcile %d of a Ready CloudManager asks to requeue after %s", i, res.RequeueAfter)
				}
			}
			if n := writes.Load(); n != 0 {
				t.Errorf("5 reconciles of a Ready CloudManager made %d API writes, want 0", n)
			}
			if n := len(recorder.Events); n != 0 {
				t.Errorf("5 reconciles of a Ready CloudManager emitted %d events, want 0: %v", n, <-recorder.Events)
			}

			// The counter does count: a changed spec makes the same reconciler write, unless the
			// suite's reconciler, racing it, wrote first; so change the spec until it does.
			images := []string{"nginx:1.21", "nginx:1.22"}
			i := 0
			testenv.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string) {
				i++
				updateCM(t, key, func(cm *appsv1api.CloudManager) { cm.Spec.Front.Deployment.Image = images[i%2] })
				_, _ = r.Reconcile(ctx, ctrl.Request{NamespacedName: key}) // conflicts with the racing reconciler count too
				return writes.Load() > 0, "no reconcile after an image change made a write"
			})
		})
	}
}

func TestCloudManagerPrinterColumns(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	key := createCM(t, seedCloudManager(t, ns))
	waitReady(t, key, readyTimeout)

	table, names := env.Table(t, "apps.middleware-operator.io/v1", ns, "cloudmanagers")
	if got, want := fmt.Sprint(names), "[Name Phase Front Identity DB Age]"; got != want {
		t.Errorf("columns %s, want %s", got, want)
	}
	if len(table.Rows) != 1 {
		t.Fatalf("got %d rows", len(table.Rows))
	}
	if got, want := fmt.Sprint(table.Rows[0].Cells[:5]), "[cloudmanager-sample Ready 1/1 1/1 1/1]"; got != want {
		t.Errorf("row %s, want %s", got, want)
	}
}
