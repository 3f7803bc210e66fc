package operator

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ErrNotLeader is returned by LeaseFence.Check when this process no longer holds the
// leader election Lease.
var ErrNotLeader = errors.New("this operator replica no longer holds the leader election lease")

// LeaseFence tells whether this process still holds the leader election Lease, as the API
// server has it now, not as the elector last saw it. A leader frozen past its lease (a
// SIGSTOP, a stalled node, a long GC pause) wakes up still believing it leads until its next
// renewal fails, up to the renew deadline later, while the other replica already acts; the
// RedisCluster controller checks the fence before every Redis command that changes the
// topology and before every batch of slot moves, so the stale leader stops at once.
type LeaseFence struct {
	// Reader reads the Lease from the API server (never a cache).
	Reader client.Reader
	// Lease is the leader election Lease.
	Lease client.ObjectKey
	// Identity is this process's holder identity in the Lease.
	Identity string
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Check returns nil while the Lease names this process as holder and its last renewal has
// not expired; ErrNotLeader (wrapped, saying why) otherwise.
func (f LeaseFence) Check(ctx context.Context) error {
	_, err := f.heldUntil(ctx)
	return err
}

// heldUntil is when this process's hold of the Lease expires unless renewed: no other
// replica can take the Lease before then. ErrNotLeader (wrapped) when it does not hold it now.
func (f LeaseFence) heldUntil(ctx context.Context) (time.Time, error) {
	lease := &coordinationv1.Lease{}
	if err := f.Reader.Get(ctx, f.Lease, lease); err != nil {
		return time.Time{}, fmt.Errorf("while checking the leader election lease %s: %w", f.Lease, err)
	}
	if holder := ptr.Deref(lease.Spec.HolderIdentity, ""); holder != f.Identity {
		return time.Time{}, fmt.Errorf("%w: %q holds it", ErrNotLeader, holder)
	}
	if lease.Spec.RenewTime == nil || lease.Spec.LeaseDurationSeconds == nil {
		return time.Time{}, fmt.Errorf("%w: the lease has no renewal", ErrNotLeader)
	}
	expires := lease.Spec.RenewTime.Add(time.Duration(*lease.Spec.LeaseDurationSeconds) * time.Second)
	if !f.now().Before(expires) {
		return time.Time{}, fmt.Errorf("%w: its last renewal expired at %s", ErrNotLeader, expires.UTC().Format(time.RFC3339))
	}
	return expires, nil
}

func (f LeaseFence) now() time.Time {
	if f.Now != nil {
		return f.Now()
	}
	return time.Now()
}

// cachedFenceMargin is how long before the Lease's expiry a Cached fence reads the Lease
// again: the time a write checked just before it may take to reach the store.
const cachedFenceMargin = 2 * time.Second

// Cached is Check for frequent writers (the archive's segments: two a second per shard
// while clients write): a Lease read holds until the hold it saw is about to expire
// (cachedFenceMargin before), since no other replica can take the Lease before that; then
// the next call reads it again. A replica frozen past its Lease wakes after that point, so
// its next call reads the Lease and is refused.
func (f LeaseFence) Cached() func(context.Context) error {
	var mu sync.Mutex
	var until time.Time
	return func(ctx context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		if f.now().Before(until) {
			return nil
		}
		expires, err := f.heldUntil(ctx)
		if err != nil {
			until = time.Time{}
			return err
		}
		until = expires.Add(-cachedFenceMargin)
		return nil
	}
}

// LeaderLock is the leader election Lease lock, with an identity this process knows so a
// LeaseFence can compare it (controller-runtime's own lock keeps it private): the host name
// and a random suffix, as controller-runtime makes it. namespace empty means the namespace
// the pod runs in.
func LeaderLock(cfg *rest.Config, namespace, name string) (*resourcelock.LeaseLock, error) {
	if namespace == "" {
		data, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
		if err != nil {
			return nil, errors.New("leader election needs --leader-election-namespace when the operator runs outside a cluster")
		}
		namespace = strings.TrimSpace(string(data))
	}
	host, err := os.Hostname()
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(rest.AddUserAgent(rest.CopyConfig(cfg), "leader-election"))
	if err != nil {
		return nil, err
	}
	return &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: namespace, Name: name},
		Client:     cs.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: host + "_" + uuid.NewString()},
	}, nil
}

// FenceOf is the fence of lock's Lease and identity, read through reader.
func FenceOf(lock *resourcelock.LeaseLock, reader client.Reader) LeaseFence {
	return LeaseFence{Reader: reader, Lease: client.ObjectKey{Namespace: lock.LeaseMeta.Namespace, Name: lock.LeaseMeta.Name}, Identity: lock.Identity()}
}
