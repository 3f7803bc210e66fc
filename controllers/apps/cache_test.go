package apps_test

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/middleware-operator/middleware-operator/tests/testenv"
)

// TestTheCacheHoldsOnlyTheOperatorsObjects: a user's Secret and ConfigMap in a namespace the
// operator watches never enter the manager's cache (which main.go configures the same way),
// while an AppService's Deployment and Service do, without their managedFields.
func TestTheCacheHoldsOnlyTheOperatorsObjects(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	for _, obj := range []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "mine", Namespace: ns}, StringData: map[string]string{"k": "v"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "mine", Namespace: ns}, Data: map[string]string{"k": "v"}},
	} {
		if err := env.Client.Create(t.Context(), obj); err != nil {
			t.Fatal(err)
		}
	}
	app := seedAppService(ns, 0)
	if err := env.Client.Create(t.Context(), app); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(app)
	cached := mgr.GetCache()
	testenv.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string) {
		dep, svc := &appsv1.Deployment{}, &corev1.Service{}
		if err := cached.Get(ctx, key, dep); err != nil {
			return false, "Deployment: " + err.Error()
		}
		if err := cached.Get(ctx, key, svc); err != nil {
			return false, "Service: " + err.Error()
		}
		if dep.ManagedFields != nil || svc.ManagedFields != nil {
			t.Fatalf("managedFields are cached: %v %v", dep.ManagedFields, svc.ManagedFields)
		}
		return true, ""
	})
	// The Deployment came through the same kind of informer after the user's objects were
	// created: had they been selected, they would be there by now.
	for _, obj := range []client.Object{&corev1.Secret{}, &corev1.ConfigMap{}} {
		err := cached.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "mine"}, obj)
		if !apierrors.IsNotFound(err) {
			t.Errorf("%T of the user's read from the cache: %v, want not found", obj, err)
		}
	}
	secrets := &corev1.SecretList{}
	if err := cached.List(t.Context(), secrets, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(secrets.Items) != 0 {
		t.Errorf("%d Secrets cached in a namespace where the operator made none", len(secrets.Items))
	}
}
