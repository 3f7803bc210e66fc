package archiver

import "time"

// LagSlack is how many bytes of a node's stream the archive may lack and still count as
// caught up: the master's PINGs and the replicas' REPLCONFs of the last moments, which a
// segment takes only when it closes.
const LagSlack = 256

// lagState is what Lag keeps between looks.
type lagState struct {
	caughtUp        time.Time
	countedTimeline int
	countedOffset   int64
}

// Lag is the shard's archive measured against the replication offset nodeOffset of the node
// it follows, read at now: behind, the bytes of that stream the store does not hold yet
// (archived is the offset it holds up to); since, how long the archive has not held all the
// node had (0 while it is within LagSlack; a shard's first look counts as caught up); and
// added, the bytes archived since the last Lag (0 at the first, and counted from the base
// on a new timeline).
func (sh *Shard) Lag(timeline int, base, archived, nodeOffset int64, now time.Time) (behind int64, since time.Duration, added int64) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.lag.measure(timeline, base, archived, nodeOffset, now)
}

// measure is Lag on the state alone.
func (l *lagState) measure(timeline int, base, archived, nodeOffset int64, now time.Time) (behind int64, since time.Duration, added int64) {
	behind = max(nodeOffset-archived, 0)
	if behind <= LagSlack || l.caughtUp.IsZero() {
		l.caughtUp = now
	}
	switch {
	case l.countedTimeline == 0:
	case timeline != l.countedTimeline:
		added = max(archived-base, 0)
	default:
		added = max(archived-l.countedOffset, 0)
	}
	l.countedTimeline, l.countedOffset = timeline, archived
	return behind, now.Sub(l.caughtUp), added
}
