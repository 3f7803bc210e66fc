package testenv

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// CountingClient wraps a client and counts every write it makes: in Writes, and by verb
// and kind in ByWrite (either may be nil).
type CountingClient struct {
	client.Client
	Writes  *atomic.Int64
	ByWrite *WriteCounts
}

// WriteCounts counts writes by "verb Kind" (verb: create, update, patch, delete,
// update-status, patch-status); a write the API server refused on a conflict (made from a
// stale cached object) counts as "conflict verb Kind" instead.
type WriteCounts struct {
	mu     sync.Mutex
	counts map[string]int64
}

// Reset returns the counts so far and starts again from zero.
func (w *WriteCounts) Reset() map[string]int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := maps.Clone(w.counts)
	if out == nil {
		out = map[string]int64{}
	}
	clear(w.counts)
	return out
}

// Get is the count under key so far.
func (w *WriteCounts) Get(key string) int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.counts[key]
}

// Add counts one write under key ("verb Kind").
func (w *WriteCounts) Add(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.counts == nil {
		w.counts = map[string]int64{}
	}
	w.counts[key]++
}

func (c CountingClient) count(verb string, obj client.Object, err error) {
	if c.Writes != nil {
		c.Writes.Add(1)
	}
	if apierrors.IsConflict(err) {
		verb = "conflict " + verb
	}
	if c.ByWrite == nil {
		return
	}
	kind := fmt.Sprintf("%T", obj)
	if gvk, err := c.GroupVersionKindFor(obj); err == nil {
		kind = gvk.Kind
	}
	c.ByWrite.Add(verb + " " + kind)
}

// Create counts a write and passes it on.
func (c CountingClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	err := c.Client.Create(ctx, obj, opts...)
	c.count("create", obj, err)
	return err
}

// Update counts a write and passes it on.
func (c CountingClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	err := c.Client.Update(ctx, obj, opts...)
	c.count("update", obj, err)
	return err
}

// Patch counts a write and passes it on.
func (c CountingClient) Patch(ctx context.Context, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
	err := c.Client.Patch(ctx, obj, p, opts...)
	c.count("patch", obj, err)
	return err
}

// Delete counts a write and passes it on.
func (c CountingClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	err := c.Client.Delete(ctx, obj, opts...)
	c.count("delete", obj, err)
	return err
}

// Status returns a status writer that counts its writes too.
func (c CountingClient) Status() client.SubResourceWriter {
	return countingStatus{c.Client.Status(), c}
}

type countingStatus struct {
	client.SubResourceWriter
	client CountingClient
}

func (c countingStatus) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	err := c.SubResourceWriter.Update(ctx, obj, opts...)
	c.client.count("update-status", obj, err)
	return err
}

func (c countingStatus) Patch(ctx context.Context, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
	err := c.SubResourceWriter.Patch(ctx, obj, p, opts...)
	c.client.count("patch-status", obj, err)
	return err
}

// LookUntilQuiet reconciles key with r until a reconcile makes no write that writes counts
// (within 30 s), then empties recorder: a test that counts what a converged object costs
// starts from one that is converged, whatever the suite's own reconciler left to do.
func LookUntilQuiet(t *testing.T, r reconcile.Reconciler, key client.ObjectKey, writes *atomic.Int64, recorder *events.FakeRecorder) {
	t.Helper()
	Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string) {
		writes.Store(0)
		if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: key}); err != nil {
			return false, err.Error()
		}
		return writes.Load() == 0, fmt.Sprintf("a look made %d API writes", writes.Load())
	})
	for len(recorder.Events) > 0 {
		<-recorder.Events
	}
}
