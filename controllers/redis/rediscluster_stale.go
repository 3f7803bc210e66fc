package redis

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// staleGuard remembers, per RedisCluster, the resourceVersions the operator's own status
// writes replaced. A reconcile that reads one of them from the cache, which has not seen
// the write yet, would act on an old status (assignment progress, say) and fail to write
// its own on a conflict; it waits a moment instead.
type staleGuard struct {
	mu       sync.Mutex
	replaced map[types.NamespacedName]map[string]bool
}

// wrote records that a write replaced version before of key.
func (g *staleGuard) wrote(key types.NamespacedName, before string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.replaced == nil {
		g.replaced = map[types.NamespacedName]map[string]bool{}
	}
	if g.replaced[key] == nil {
		g.replaced[key] = map[string]bool{}
	}
	g.replaced[key][before] = true
}

// stale reports whether version is one the operator's writes replaced; a version it did
// not write over means the cache caught up, and the record is dropped.
func (g *staleGuard) stale(key types.NamespacedName, version string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.replaced[key][version] {
		return true
	}
	delete(g.replaced, key)
	return false
}
