package quietlook

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// probeTick is how often the prober checks which clusters are due a quiet look.
const probeTick = 250 * time.Millisecond

// Run is the prober: until ctx ends, every probeTick it makes a quiet look (Probe) of each
// cluster whose last one is its mark's After old, while its mark is not due, and calls wake
// for each cluster where a look found something changed. Clusters are looked at side by
// side, one goroutine a look; one whose nodes are slow delays no other. With no mark it
// does not tick at all (a wake-up costs an idle operator too).
func (q *Marks) Run(ctx context.Context, wake func(context.Context, types.NamespacedName)) error {
	q.mu.Lock()
	q.marked = make(chan struct{}, 1)
	marked := q.marked
	q.mu.Unlock()
	q.running.Store(true)
	defer q.running.Store(false)
	tick := time.NewTicker(probeTick)
	defer tick.Stop()
	var looks sync.WaitGroup
	defer looks.Wait()
	for {
		if q.empty() {
			tick.Stop()
			select {
			case <-ctx.Done():
				return nil
			case <-marked:
			}
			tick.Reset(probeTick)
		}
		select {
		case <-ctx.Done():
			return nil
		case now := <-tick.C:
			for cluster, e := range q.due(now) {
				looks.Go(func() { q.look(ctx, cluster, e, wake) })
			}
		}
	}
}

// empty reports whether no cluster has a mark.
func (q *Marks) empty() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.byCluster) == 0
}

// due returns a copy of the entries due a quiet look at now, marking them in flight.
func (q *Marks) due(now time.Time) map[types.NamespacedName]Entry {
	q.mu.Lock()
	defer q.mu.Unlock()
	var due map[types.NamespacedName]Entry
	for cluster, e := range q.byCluster {
		if e.inFlight || e.Changed || !now.Before(e.Mark.Until) || now.Sub(e.Probed) < e.Mark.After {
			continue
		}
		if due == nil {
			due = map[types.NamespacedName]Entry{}
		}
		e.inFlight = true
		due[cluster] = *e
	}
	return due
}

// look makes one quiet look of cluster's entry e and records it; a change wakes the
// cluster.
func (q *Marks) look(ctx context.Context, cluster types.NamespacedName, e Entry, wake func(context.Context, types.NamespacedName)) {
	unchanged, silent := Probe(ctx, e.Heads, e.Mark)
	q.mu.Lock()
	cur, ok := q.byCluster[cluster]
	current := ok && cur.Gen == e.Gen
	if current {
		cur.inFlight = false
		if unchanged {
			cur.Probed = time.Now()
		} else {
			cur.Changed, cur.Silent = true, silent
		}
	}
	q.mu.Unlock()
	if current && !unchanged {
		wake(ctx, cluster)
	}
}
