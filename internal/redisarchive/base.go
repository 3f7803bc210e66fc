package redisarchive

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/middleware-operator/middleware-operator/internal/backup"
)

// A timeline's base is two objects beside its segments: the snapshot (BaseRDBName, an RDB
// as a backup's shard file) and its description (BaseName, a backup.Shard as JSON: the
// slots, the replication ID and offset the snapshot holds, its size and SHA-256), written
// last, so a timeline whose base description exists has its whole base.
const (
	baseFile    = "base.json"
	baseRDBFile = "base.rdb"
)

// ShardName is the name of the archive's shard at index, in slot order (shard-000 holds
// the first slots).
func ShardName(index int) string { return fmt.Sprintf("shard-%03d", index) }

// BaseName is the object name of the description of a timeline's base.
func BaseName(cluster, shard string, timeline int) string {
	return TimelinePrefix(cluster, shard, timeline) + baseFile
}

// BaseRDBName is the object name of a timeline's base snapshot.
func BaseRDBName(cluster, shard string, timeline int) string {
	return TimelinePrefix(cluster, shard, timeline) + baseRDBFile
}

// baseDescription is what BaseName holds: the base, and ServesFrom, the time from which
// restores use the timeline. A scheduled base writes it: its timeline's follower starts
// from the base's offset while the timeline before goes on, and catches up through the
// master's backlog, receiving those commands (acknowledged long before) all at once; until
// it has, a restore to a time must replay the timeline before, whose receive times are the
// writes' own. Absent (a first base, or one after a gap), the base's CapturedAt.
type baseDescription struct {
	backup.Shard
	ServesFrom time.Time `json:"servesFrom,omitzero"`
}

// EncodeBase is the description of a base, as BaseName holds it; servesFrom is zero but
// for a scheduled base (see baseDescription).
func EncodeBase(b backup.Shard, servesFrom time.Time) ([]byte, error) {
	return json.MarshalIndent(baseDescription{Shard: b, ServesFrom: servesFrom}, "", "  ")
}

// DecodeBase reads a base's description: the base, and the time from which restores use
// its timeline.
func DecodeBase(data []byte) (backup.Shard, time.Time, error) {
	var d baseDescription
	if err := json.Unmarshal(data, &d); err != nil {
		return d.Shard, time.Time{}, fmt.Errorf("a base description is not JSON: %w", err)
	}
	b := d.Shard
	if b.ReplicationID == "" || b.ReplicationOffset < 0 || b.File == "" || len(b.Slots) == 0 {
		return b, time.Time{}, fmt.Errorf("a base description needs the slots, the replication ID and offset and the file")
	}
	if d.ServesFrom.IsZero() {
		d.ServesFrom = b.CapturedAt
	}
	return b, d.ServesFrom, nil
}

// Timeline is one timeline of a shard's archive with its base.
type Timeline struct {
	Shard    string
	Timeline int
	Base     backup.Shard
	// ServesFrom is the earliest restore target the timeline serves (see baseDescription).
	ServesFrom time.Time
}

// BaseTimelines lists the timelines of every shard of cluster's archive whose base is
// whole (its description written), by shard then timeline.
func BaseTimelines(ctx context.Context, sink Sink, cluster string) ([]Timeline, error) {
	names, err := sink.List(ctx, cluster+"/archive/")
	if err != nil {
		return nil, err
	}
	var out []Timeline
	for _, n := range names {
		shard, timeline, ok := parseBaseName(cluster, n)
		if !ok {
			continue
		}
		data, err := sink.Get(ctx, n)
		if err != nil {
			return nil, err
		}
		b, from, err := DecodeBase(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", n, err)
		}
		out = append(out, Timeline{Shard: shard, Timeline: timeline, Base: b, ServesFrom: from})
	}
	slices.SortFunc(out, func(a, b Timeline) int {
		if c := strings.Compare(a.Shard, b.Shard); c != 0 {
			return c
		}
		return a.Timeline - b.Timeline
	})
	return out, nil
}

// parseBaseName reads the shard and timeline out of a base description's name.
func parseBaseName(cluster, name string) (shard string, timeline int, ok bool) {
	rest, ok := strings.CutPrefix(name, cluster+"/archive/")
	if !ok {
		return "", 0, false
	}
	parts := strings.Split(rest, "/")
	if len(parts) != 3 || parts[2] != baseFile || parts[0] == "" || len(parts[1]) != 8 {
		return "", 0, false
	}
	timeline, err := strconv.Atoi(parts[1])
	if err != nil || timeline < 1 {
		return "", 0, false
	}
	return parts[0], timeline, true
}

// ChooseTimelines picks, for a restore to target (zero: the latest), each shard's timeline:
// the last one that serves the target (ServesFrom at or before it: its base's capture, or
// for a scheduled base, when its follower had caught up). A shard with no such
// timeline is an error naming it.
func ChooseTimelines(all []Timeline, target time.Time) ([]Timeline, error) {
	var out []Timeline
	var missing []string
	for i := 0; i < len(all); {
		j := i
		var pick *Timeline
		for ; j < len(all) && all[j].Shard == all[i].Shard; j++ {
			if target.IsZero() || !all[j].ServesFrom.After(target) {
				pick = &all[j]
			}
		}
		if pick == nil {
			missing = append(missing, fmt.Sprintf("%s (its oldest timeline serves from %s)", all[i].Shard, all[i].ServesFrom.Format(time.RFC3339Nano)))
		} else {
			out = append(out, *pick)
		}
		i = j
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("the archive has no base at or before %s for %s: choose a later target time", target.Format(time.RFC3339Nano), strings.Join(missing, ", "))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("the archive holds no base yet")
	}
	return out, nil
}
