package testenv

import (
	"context"
	"sync/atomic"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CountingClient wraps a client and counts every write it makes in Writes.
type CountingClient struct {
	client.Client
	Writes *atomic.Int64
}

// Create counts a write and passes it on.
func (c CountingClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	c.Writes.Add(1)
	return c.Client.Create(ctx, obj, opts...)
}

// Update counts a write and passes it on.
func (c CountingClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	c.Writes.Add(1)
	return c.Client.Update(ctx, obj, opts...)
}

// Patch counts a write and passes it on.
func (c CountingClient) Patch(ctx context.Context, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
	c.Writes.Add(1)
	return c.Client.Patch(ctx, obj, p, opts...)
}

// Delete counts a write and passes it on.
func (c CountingClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	c.Writes.Add(1)
	return c.Client.Delete(ctx, obj, opts...)
}

// Status returns a status writer that counts its writes too.
func (c CountingClient) Status() client.SubResourceWriter {
	return countingStatus{c.Client.Status(), c.Writes}
}

type countingStatus struct {
	client.SubResourceWriter
	Writes *atomic.Int64
}

func (c countingStatus) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	c.Writes.Add(1)
	return c.SubResourceWriter.Update(ctx, obj, opts...)
}

func (c countingStatus) Patch(ctx context.Context, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
	c.Writes.Add(1)
	return c.SubResourceWriter.Patch(ctx, obj, p, opts...)
}
