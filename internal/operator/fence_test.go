package operator

import (
	"context"
	"errors"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func TestLeaseFence(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	key := client.ObjectKey{Namespace: "ops", Name: "middleware-operator.middleware-operator.io"}
	lease := func(holder string, renewed time.Duration) *coordinationv1.Lease {
		return &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity: ptr.To(holder), LeaseDurationSeconds: ptr.To[int32](15),
				RenewTime: &metav1.MicroTime{Time: now.Add(-renewed)},
			},
		}
	}
	for name, tc := range map[string]struct {
		lease  *coordinationv1.Lease
		leader bool
	}{
		"held and renewed 2 s ago":                {lease("me", 2*time.Second), true},
		"held, last renewal expired (frozen 20s)": {lease("me", 20*time.Second), false},
		"another replica holds it":                {lease("other", time.Second), false},
		"released (empty holder)":                 {lease("", time.Second), false},
	} {
		t.Run(name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithObjects(tc.lease).Build()
			err := LeaseFence{Reader: c, Lease: key, Identity: "me", Now: func() time.Time { return now }}.Check(context.Background())
			if tc.leader != (err == nil) {
				t.Fatalf("Check = %v, want leader %v", err, tc.leader)
			}
			if err != nil && !errors.Is(err, ErrNotLeader) {
				t.Errorf("Check = %v, want ErrNotLeader", err)
			}
		})
	}
	t.Run("lease missing", func(t *testing.T) {
		err := LeaseFence{Reader: fake.NewClientBuilder().Build(), Lease: key, Identity: "me"}.Check(context.Background())
		if err == nil {
			t.Fatal("Check passed without a Lease")
		}
	})
}
