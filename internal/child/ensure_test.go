package child_test

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/middleware-operator/middleware-operator/internal/child"
)

// TestEnsureWaitsForACacheBehindItsOwnCreate: a reconcile that misses in the cache a child
// an earlier reconcile created a moment ago gets AlreadyExists from its Create; Ensure waits
// for the cache instead of calling the child someone else's. A same-named object that never
// reaches the cache (one without the operator's label) is still reported as not controlled.
func TestEnsureWaitsForACacheBehindItsOwnCreate(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner", Namespace: "ns", UID: "owner-uid"}}
	desired := func() *corev1.Service {
		return &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
		}
	}
	for _, tc := range []struct {
		name       string
		missesLeft int // Gets that find nothing, as a cache behind the server
		wantErr    bool
	}{
		{"the cache catches up after two misses", 2, false},
		{"never in the cache", 1 << 30, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			server := fake.NewClientBuilder().WithScheme(scheme).Build()
			existing := desired()
			if err := controllerutil.SetControllerReference(owner, existing, scheme); err != nil {
				t.Fatal(err)
			}
			if err := server.Create(t.Context(), existing); err != nil {
				t.Fatal(err)
			}
			misses := tc.missesLeft
			creates := 0
			c := laggingCache(server, &misses, &creates)
			start := time.Now()
			live, outcome, err := child.Ensure(t.Context(), c, scheme, owner, desired(), child.MergeService)
			var notOurs *child.NotControlledError
			if tc.wantErr {
				if !errors.As(err, &notOurs) || !notOurs.Unlabelled {
					t.Fatalf("Ensure = %v, want a NotControlledError for an unlabelled object", err)
				}
				if waited := time.Since(start); waited < 900*time.Millisecond || waited > 5*time.Second {
					t.Errorf("reported after %s, want after about a second of waiting for the cache", waited)
				}
				return
			}
			if err != nil || live == nil {
				t.Fatalf("Ensure = %v, %v; want the child as the server has it", live, err)
			}
			if outcome == child.Created || creates != 1 {
				t.Errorf("outcome %q after %d creates, want the existing child kept (one refused create)", outcome, creates)
			}
		})
	}
}

// TestEnsureDoesNotRecreateWhatItJustCreated: a second reconcile that runs before the cache
// holds the child the first one created (started by a sibling's event) waits for the cache
// and sends no Create, which could only fail with AlreadyExists.
func TestEnsureDoesNotRecreateWhatItJustCreated(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner", Namespace: "ns", UID: "owner-uid-2"}}
	desired := func() *corev1.Service {
		return &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "just-created", Namespace: "ns"},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
		}
	}
	server := fake.NewClientBuilder().WithScheme(scheme).Build()
	misses, creates := 0, 0
	c := laggingCache(server, &misses, &creates)
	if _, outcome, err := child.Ensure(t.Context(), c, scheme, owner, desired(), child.MergeService); err != nil || outcome != child.Created {
		t.Fatalf("first Ensure = %q, %v; want Created", outcome, err)
	}
	misses = 3 // the cache is three polls behind
	live, outcome, err := child.Ensure(t.Context(), c, scheme, owner, desired(), child.MergeService)
	if err != nil || live == nil || outcome != child.Unchanged {
		t.Fatalf("second Ensure = %v, %q, %v; want the created child, Unchanged", live, outcome, err)
	}
	if creates != 1 {
		t.Errorf("%d creates, want 1: the second reconcile should have waited for the cache", creates)
	}
}

// laggingCache is server seen through a cache *misses Gets behind it; it counts Creates.
func laggingCache(server client.WithWatch, misses, creates *int) client.WithWatch {
	return interceptor.NewClient(server, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if *misses > 0 {
				*misses--
				return apierrors.NewNotFound(corev1.Resource("services"), key.Name)
			}
			return c.Get(ctx, key, obj, opts...)
		},
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			*creates++
			return c.Create(ctx, obj, opts...)
		},
	})
}
