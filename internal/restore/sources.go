package restore

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/middleware-operator/middleware-operator/internal/backupstore"
)

// Sources keeps, per cluster, the source it restores or reloads from as last read, so that
// its manifest is read from the store once, not at every look; a read that failed on the
// store (or on the manifest's content) is read again only after its back-off (Keep).
type Sources struct {
	mu sync.Mutex
	m  map[backupstore.FailureKey]*Source
}

// Get returns the source kept for k, nil when there is none (or its back-off is over).
func (c *Sources) Get(k backupstore.FailureKey) *Source {
	c.mu.Lock()
	defer c.mu.Unlock()
	src := c.m[k]
	if src != nil && !src.retryAt.IsZero() && !time.Now().Before(src.retryAt) {
		delete(c.m, k)
		return nil
	}
	return src
}

// Keep keeps src for k; a source whose store failed (StoreFailed) only until retryAt, when
// it is read again.
func (c *Sources) Keep(k backupstore.FailureKey, src *Source, retryAt time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[backupstore.FailureKey]*Source{}
	}
	src.retryAt = retryAt
	c.m[k] = src
}

// Drop drops the source kept for k.
func (c *Sources) Drop(k backupstore.FailureKey) {
	c.locked(func() { delete(c.m, k) })
}

// Forget drops what is kept of cluster's sources.
func (c *Sources) Forget(cluster types.NamespacedName) {
	c.locked(func() { backupstore.DeleteObject(c.m, cluster) })
}

// locked runs f holding c's lock.
func (c *Sources) locked(f func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f()
}
