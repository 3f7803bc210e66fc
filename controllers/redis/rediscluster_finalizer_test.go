package redis_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	rediscontrollers "github.com/middleware-operator/middleware-operator/controllers/redis"
	"github.com/middleware-operator/middleware-operator/internal/objectlabels"
	"github.com/middleware-operator/middleware-operator/tests/redistest"
)

// TestRedisClusterFinalizerDeletesItsClaimsOneByOne deletes a RedisCluster that carries
// PVCFinalizer: its claims go, one DELETE each (the operator has no deletecollection
// grant), a claim of another cluster stays, and the finalizer is removed.
func TestRedisClusterFinalizerDeletesItsClaimsOneByOne(t *testing.T) {
	rc := redistest.NewCluster("ns", "gone", 3)
	rc.Finalizers = []string{rediscontrollers.PVCFinalizer}
	now := metav1.Now()
	rc.DeletionTimestamp = &now
	claim := func(cluster, name string) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name,
			Labels: objectlabels.ObjectLabels(objectlabels.RedisClusterKind, cluster)}}
	}
	collections := 0
	c := fake.NewClientBuilder().WithScheme(env.Scheme).
		WithObjects(rc, claim("gone", "data-gone-0"), claim("gone", "data-gone-1"), claim("kept", "data-kept-0")).
		WithInterceptorFuncs(interceptor.Funcs{DeleteAllOf: func(context.Context, client.WithWatch, client.Object, ...client.DeleteAllOfOption) error {
			collections++
			return nil
		}}).Build()
	r := &rediscontrollers.RedisClusterReconciler{Client: c, Scheme: env.Scheme, Recorder: events.NewFakeRecorder(10)}
	if _, err := r.Reconcile(t.Context(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(rc)}); err != nil {
		t.Fatal(err)
	}
	left := &corev1.PersistentVolumeClaimList{}
	if err := c.List(t.Context(), left); err != nil {
		t.Fatal(err)
	}
	if len(left.Items) != 1 || left.Items[0].Name != "data-kept-0" || collections != 0 {
		t.Errorf("claims left %v after %d deletecollection requests, want only data-kept-0 after none", left.Items, collections)
	}
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(rc), rc); err == nil {
		t.Errorf("the RedisCluster is still there with finalizers %v", rc.Finalizers)
	}
}
