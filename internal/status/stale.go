package status

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// StaleGuard remembers, per resource, the resourceVersions the operator's own status writes
// replaced. A reconcile that reads one of them from the cache, which has not seen the write
// yet, would act on an old status (a RedisCluster's assignment progress, say) or write again
// what it has just written; it waits a moment instead (StaleRetry).
type StaleGuard struct {
	mu       sync.Mutex
	replaced map[types.NamespacedName]map[string]bool
}

// StaleRetry is how soon a reconcile that read an object older than its own last status
// write looks again: the cache catches up within milliseconds.
const StaleRetry = 100 * time.Millisecond

// Wrote records that a write replaced version before of key.
func (g *StaleGuard) Wrote(key types.NamespacedName, before string) {
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

// Forget drops what g keeps of key (an object that is gone).
func (g *StaleGuard) Forget(key types.NamespacedName) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.replaced, key)
}

// Stale reports whether version is one the operator's writes replaced; a version it did
// not write over means the cache caught up, and the record is dropped.
func (g *StaleGuard) Stale(key types.NamespacedName, version string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.replaced[key][version] {
		return true
	}
	delete(g.replaced, key)
	return false
}
