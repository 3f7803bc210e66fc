package redis

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// formedClusters remembers when this operator process began forming each cluster from empty
// nodes (observe.Snapshot.FormedAt): the nodes that started before then are trusted at once
// (health.SettleLeft). An operator that restarts forgets, and its nodes settle as any do.
type formedClusters struct {
	mu sync.Mutex
	at map[types.NamespacedName]time.Time
}

// mark records that the forming of cluster begins at t.
func (f *formedClusters) mark(cluster types.NamespacedName, t time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.at == nil {
		f.at = map[types.NamespacedName]time.Time{}
	}
	f.at[cluster] = t
}

// since is when the forming of cluster began, or zero when this process did not form it or
// did so over settle before now (every node started before then has settled anyway, and the
// record is dropped).
func (f *formedClusters) since(cluster types.NamespacedName, now time.Time, settle time.Duration) time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	at, ok := f.at[cluster]
	if ok && now.Sub(at) > settle {
		delete(f.at, cluster)
		return time.Time{}
	}
	return at
}

// forget drops what is known of cluster.
func (f *formedClusters) forget(cluster types.NamespacedName) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.at, cluster)
}
