package redisarchive

import (
	"context"
	"fmt"
	"time"
)

// Pruner is a Sink whose objects can be deleted: the object store (StoreSink), or memory
// in tests.
type Pruner interface {
	Sink
	// Delete removes the object name; removing one that does not exist is no error.
	Delete(ctx context.Context, name string) error
}

// Expired are the timelines of shard (of all, as BaseTimelines lists them) that no restore
// to a time within keep of now needs: a restore to a time picks the last timeline whose base
// was captured at or before it (ChooseTimelines), so the timeline picked at now - keep and
// every later one stay, and those before it go (by ServesFrom, as ChooseTimelines picks). None without a timeline that old, or when
// keep is 0 (keep everything).
func Expired(all []Timeline, shard string, now time.Time, keep time.Duration) []Timeline {
	if keep <= 0 {
		return nil
	}
	cutoff := now.Add(-keep)
	var mine []Timeline
	pick := -1
	for _, tl := range all {
		if tl.Shard != shard {
			continue
		}
		mine = append(mine, tl)
		if !tl.ServesFrom.After(cutoff) {
			pick = len(mine) - 1
		}
	}
	if pick <= 0 {
		return nil
	}
	return mine[:pick]
}

// DeleteTimeline removes a timeline of shard from the archive: its base description first,
// so that a restore never picks a timeline being deleted (ChooseTimelines lists only
// timelines whose description is there), then every other object under its prefix (the
// base snapshot, the segments).
func DeleteTimeline(ctx context.Context, sink Pruner, cluster, shard string, timeline int) error {
	if err := sink.Delete(ctx, BaseName(cluster, shard, timeline)); err != nil {
		return fmt.Errorf("while deleting the base of %s timeline %d: %w", shard, timeline, err)
	}
	names, err := sink.List(ctx, TimelinePrefix(cluster, shard, timeline))
	if err != nil {
		return fmt.Errorf("while listing %s timeline %d: %w", shard, timeline, err)
	}
	for _, name := range names {
		if err := sink.Delete(ctx, name); err != nil {
			return fmt.Errorf("while deleting %s: %w", name, err)
		}
	}
	return nil
}
