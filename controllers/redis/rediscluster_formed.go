package redis

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// formedClusters remembers, for each cluster this operator process formed, the run IDs of
// the node processes it formed it from (observe.Snapshot.FormedFrom): they are trusted at
// once (health.SettleLeft). An operator that restarts forgets, and the nodes settle as any.
type formedClusters struct {
	mu sync.Mutex
	at map[types.NamespacedName]formed
}

// formed is one forming: when it began and from which processes.
type formed struct {
	began  time.Time
	runIDs map[string]bool
}

// mark records that cluster was formed from the processes runIDs, in a step that began at began.
func (f *formedClusters) mark(cluster types.NamespacedName, began time.Time, runIDs map[string]bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.at == nil {
		f.at = map[types.NamespacedName]formed{}
	}
	f.at[cluster] = formed{began: began, runIDs: runIDs}
}

// from is the run IDs cluster was formed from, or nil when this process did not form it or
// began over settle before now (the processes formed then have settled anyway, and the
// record is dropped).
func (f *formedClusters) from(cluster types.NamespacedName, now time.Time, settle time.Duration) map[string]bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	at, ok := f.at[cluster]
	if ok && now.Sub(at.began) > settle {
		delete(f.at, cluster)
		return nil
	}
	return at.runIDs
}

// forget drops what is known of cluster.
func (f *formedClusters) forget(cluster types.NamespacedName) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.at, cluster)
}
