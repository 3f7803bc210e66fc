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

// countingReader counts the Gets that reach the wrapped reader.
type countingReader struct {
	client.Reader
	gets int
}

func (c *countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	c.gets++
	return c.Reader.Get(ctx, key, obj, opts...)
}

// TestCachedLeaseFence: a cached fence reads the Lease once while the hold it saw lasts
// (less the margin), reads it again after that point, and refuses from then on when another
// replica took the Lease, as a leader frozen past its Lease finds it on waking.
func TestCachedLeaseFence(t *testing.T) {
	start := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	key := client.ObjectKey{Namespace: "ops", Name: "lease"}
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("me"), LeaseDurationSeconds: ptr.To[int32](15), RenewTime: &metav1.MicroTime{Time: start}}}
	c := fake.NewClientBuilder().WithObjects(lease).Build()
	reader := &countingReader{Reader: c}
	now := start
	check := LeaseFence{Reader: reader, Lease: key, Identity: "me", Now: func() time.Time { return now }}.Cached()
	ctx := context.Background()
	for _, step := range []struct {
		at     time.Duration // since the renewal
		holder string        // the Lease's holder from then on ("" leaves it)
		leader bool
		gets   int // Lease reads so far
	}{
		{at: 0, leader: true, gets: 1},
		{at: 5 * time.Second, leader: true, gets: 1},
		{at: 12 * time.Second, leader: true, gets: 1}, // 13 s = 15 s less the margin
		{at: 13 * time.Second, leader: true, gets: 2}, // read again: still its renewal of start, 2 s left
		{at: 14 * time.Second, leader: true, gets: 3}, // within the margin every call reads
		{at: 40 * time.Second, holder: "other", leader: false, gets: 4},
		{at: 41 * time.Second, leader: false, gets: 5},
	} {
		now = start.Add(step.at)
		if step.holder != "" {
			stored := &coordinationv1.Lease{}
			if err := c.Get(ctx, key, stored); err != nil {
				t.Fatal(err)
			}
			stored.Spec.HolderIdentity, stored.Spec.RenewTime = ptr.To(step.holder), &metav1.MicroTime{Time: now}
			if err := c.Update(ctx, stored); err != nil {
				t.Fatal(err)
			}
		}
		err := check(ctx)
		if step.leader != (err == nil) || (err != nil && !errors.Is(err, ErrNotLeader)) {
			t.Fatalf("at %s: %v, want leader %v", step.at, err, step.leader)
		}
		if reader.gets != step.gets {
			t.Errorf("at %s: %d Lease reads, want %d", step.at, reader.gets, step.gets)
		}
	}
}
