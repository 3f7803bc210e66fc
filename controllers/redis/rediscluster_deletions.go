package redis

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// deletionSeenWithin bounds how long a pod this process deleted counts as going away while
// the cache still shows it as it was: the deletion reaches the cache within milliseconds on
// an idle API server, within seconds on a loaded one.
const deletionSeenWithin = time.Minute

// deletedPods remembers the pods this process deleted, by UID, until the cache shows the
// deletion. A look that runs before that (an upgrade's next look is a second away, and a
// loaded API server can deliver the watch event later) would otherwise see the replaced pod
// still running and Ready, and replace the next one too: two pods down at once, a master
// and its replica among them.
type deletedPods struct {
	mu   sync.Mutex
	uids map[types.UID]time.Time
}

// mark records that this process deleted the pod of uid at now.
func (d *deletedPods) mark(uid types.UID, now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.uids == nil {
		d.uids = map[types.UID]time.Time{}
	}
	for u, at := range d.uids {
		if now.Sub(at) > deletionSeenWithin {
			delete(d.uids, u)
		}
	}
	d.uids[uid] = now
}

// pending reports whether p, as the cache has it, is a pod this process deleted less than
// deletionSeenWithin ago whose deletion the cache does not show yet.
func (d *deletedPods) pending(p *corev1.Pod, now time.Time) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	at, ok := d.uids[p.UID]
	if !ok {
		return false
	}
	if !p.DeletionTimestamp.IsZero() || now.Sub(at) > deletionSeenWithin {
		delete(d.uids, p.UID)
		return false
	}
	return true
}
