package status

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Pacer spaces the status writes of resources whose status is in transition (a rollout
// under way), so a rollout that settles within Interval costs one status write, the settled
// one, instead of one per step the child reports; a longer rollout shows its progress once
// after Interval, then once per LaterIntervals Intervals, so a rollout costs at most one
// progress write besides its outcome unless it lasts over a minute (with 5 s): when the API
// server is the bottleneck every rollout takes long, and progress writes would take its
// capacity from the rollouts themselves. A settled status is never held back. The pace is
// kept in memory: after a restart a resource's first transitional status waits one Interval
// again.
type Pacer struct {
	// Interval is the least time between two writes of a transitional status, and how long
	// the first one of a transition waits.
	Interval time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time

	mu   sync.Mutex
	next map[types.NamespacedName]time.Time
}

// LaterIntervals is the gap, in Intervals, between a rollout's later progress writes.
const LaterIntervals = 12

// NewPacer returns a Pacer with the given interval and the wall clock.
func NewPacer(interval time.Duration) *Pacer { return &Pacer{Interval: interval} }

// Wait is how long a write of the resource's status must wait: zero for a settled status
// (which also ends the resource's transition), zero when the transition has waited its
// turn (and the next transitional write then waits LaterIntervals), otherwise what is left.
func (p *Pacer) Wait(key types.NamespacedName, transitional bool) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !transitional {
		delete(p.next, key)
		return 0
	}
	now := time.Now()
	if p.Now != nil {
		now = p.Now()
	}
	if p.next == nil {
		p.next = map[types.NamespacedName]time.Time{}
	}
	due, ok := p.next[key]
	if !ok {
		p.next[key] = now.Add(p.Interval)
		return p.Interval
	}
	if left := due.Sub(now); left > 0 {
		return left
	}
	p.next[key] = now.Add(LaterIntervals * p.Interval)
	return 0
}

// Forget drops a deleted resource's pace.
func (p *Pacer) Forget(key types.NamespacedName) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.next, key)
}
