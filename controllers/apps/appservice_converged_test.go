package apps_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1api "github.com/middleware-operator/middleware-operator/api/apps/v1"
	"github.com/middleware-operator/middleware-operator/controllers/apps"
	"github.com/middleware-operator/middleware-operator/tests/testenv"
)

func TestAppServiceConvergedReconcileMakesNoWrites(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	app := seedAppService(ns, 30013)
	if err := env.Client.Create(t.Context(), app); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(app)
	waitAvailable(t, key, 2)

	var writes atomic.Int64
	recorder := events.NewFakeRecorder(10)
	r := &apps.AppServiceReconciler{Client: testenv.CountingClient{Client: mgr.GetClient(), Writes: &writes}, Scheme: env.Scheme, Recorder: recorder}
	// Available may come a moment before the rollout's settled status is written (the
	// status waits for the Deployment to report its end): look until a look changes
	// nothing, so the five below start from a converged AppService.
	testenv.LookUntilQuiet(t, r, key, &writes, recorder)
	writes.Store(0)
	for i := range 5 {
		if _, err := r.Reconcile(t.Context(), ctrl.Request{NamespacedName: key}); err != nil {
			t.Fatalf("reconcile %d: %v", i, err)
		}
	}
	if n := writes.Load(); n != 0 {
		t.Errorf("5 reconciles of a converged AppService made %d API writes, want 0", n)
	}
	if n := len(recorder.Events); n != 0 {
		t.Errorf("5 reconciles of a converged AppService emitted %d events, want 0", n)
	}

	// The counter does count: a changed spec makes the same reconciler write, unless the
	// suite's reconciler, racing it, wrote first; so change the spec until it does.
	images := []string{"nginx:1.27", "nginx:1.28"}
	i := 0
	testenv.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string) {
		i++
		updateApp(t, key, func(a *appsv1api.AppService) { a.Spec.Image = images[i%2] })
		_, _ = r.Reconcile(ctx, ctrl.Request{NamespacedName: key}) // conflicts with the racing reconciler count too
		return writes.Load() > 0, "no reconcile after an image change made a write"
	})
}

func TestAppServicePrinterColumns(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	app := seedAppService(ns, 30014)
	if err := env.Client.Create(t.Context(), app); err != nil {
		t.Fatal(err)
	}
	waitAvailable(t, client.ObjectKeyFromObject(app), 2)

	table, names := env.Table(t, "apps.middleware-operator.io/v1", ns, "appservices")
	if got, want := fmt.Sprint(names), "[Name Ready Image Available Age]"; got != want {
		t.Errorf("columns %s, want %s", got, want)
	}
	if len(table.Rows) != 1 {
		t.Fatalf("got %d rows", len(table.Rows))
	}
	if got := fmt.Sprint(table.Rows[0].Cells[:4]); got != "[nginx-app 2/2 nginx:1.7.9 True]" {
		t.Errorf("row %s, want [nginx-app 2/2 nginx:1.7.9 True]", got)
	}
}
