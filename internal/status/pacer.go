package status

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Pacer spaces the status writes of resources whose status is in transition (a rollout
// under way), so a rollout that settles within Interval costs one status write, the settled
// one, instead of one per step the child reports; a longer rollout still shows its progress
// after Interval, then after gaps that double (2, 4, 8 Intervals, at most MaxGaps
// Intervals), so it costs a few writes, not one per Interval, when the API server is slow
// and every rollout takes long. A settled status is never held back. The pace is kept in
// memory: after a restart a resource's first transitional status waits one Interval again.
type Pacer struct {
	// Interval is the least time between two writes of a transitional status, and how long
	// the first one of a transition waits.
	Interval time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time

	mu   sync.Mutex
	next map[types.NamespacedName]pace
}

// MaxGaps bounds the gap between two transitional writes, in Intervals.
const MaxGaps = 8

// pace is when a resource's next transitional write may go, and the gap after it.
type pace struct {
	due time.Time
	gap time.Duration
}

// NewPacer returns a Pacer with the given interval and the wall clock.
func NewPacer(interval time.Duration) *Pacer { return &Pacer{Interval: interval} }

// Wait is how long a write of the resource's status must wait: zero for a settled status
// (which also ends the resource's transition), zero when the transition has waited its
// turn (and the next transitional write then waits twice as long), otherwise what is left.
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
		p.next = map[types.NamespacedName]pace{}
	}
	next, ok := p.next[key]
	if !ok {
		p.next[key] = pace{due: now.Add(p.Interval), gap: 2 * p.Interval}
		return p.Interval
	}
	if left := next.due.Sub(now); left > 0 {
		return left
	}
	p.next[key] = pace{due: now.Add(next.gap), gap: min(2*next.gap, MaxGaps*p.Interval)}
	return 0
}

// Forget drops a deleted resource's pace.
func (p *Pacer) Forget(key types.NamespacedName) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.next, key)
}
