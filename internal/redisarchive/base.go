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
// writes' own. A base after a gap or a change of the shard's slots has no timeline before
// it that goes on: its follower catches up the same way, and ServesFrom is when it had.
// Absent (a description written before it was kept), the base's CapturedAt.
//
// PreviousWhole is when the shard's timeline before was still followed, so that its archive
// holds every write received up to then: a scheduled base's ServesFrom (the timeline
// before goes on until then). Zero when unknown (after a gap or a change of slots): its
// archive is then whole up to its last record only.
type baseDescription struct {
	backup.Shard
	ServesFrom    time.Time `json:"servesFrom,omitzero"`
	PreviousWhole time.Time `json:"previousWhole,omitzero"`
}

// EncodeBase is the description of a base, as BaseName holds it (see baseDescription):
// servesFrom is when its follower had caught up, previousWhole when the timeline before
// was still followed (zero: unknown).
func EncodeBase(b backup.Shard, servesFrom, previousWhole time.Time) ([]byte, error) {
	return json.MarshalIndent(baseDescription{Shard: b, ServesFrom: servesFrom, PreviousWhole: previousWhole}, "", "  ")
}

// DecodeBase reads a base's description: the base, and the time from which restores use
// its timeline.
func DecodeBase(data []byte) (backup.Shard, time.Time, error) {
	d, err := decodeBase(data)
	return d.Shard, d.ServesFrom, err
}

// decodeBase reads a base's description whole, ServesFrom defaulted to the capture.
func decodeBase(data []byte) (baseDescription, error) {
	var d baseDescription
	if err := json.Unmarshal(data, &d); err != nil {
		return d, fmt.Errorf("a base description is not JSON: %w", err)
	}
	b := d.Shard
	if b.ReplicationID == "" || b.ReplicationOffset < 0 || b.File == "" || len(b.Slots) == 0 {
		return d, fmt.Errorf("a base description needs the slots, the replication ID and offset and the file")
	}
	if d.ServesFrom.IsZero() {
		d.ServesFrom = b.CapturedAt
	}
	return d, nil
}

// Timeline is one timeline of a shard's archive with its base.
type Timeline struct {
	Shard    string
	Timeline int
	Base     backup.Shard
	// ServesFrom is the earliest restore target the timeline serves (see baseDescription).
	ServesFrom time.Time
	// PreviousWhole is when the shard's timeline before this one was still followed (see
	// baseDescription); zero when unknown.
	PreviousWhole time.Time
	// Next and NextWhole, set by ChooseTimelines, are the ServesFrom and PreviousWhole of
	// the shard's next timeline (zero when there is none): a restore to a time before Next
	// replays this timeline, whose archive may end before that time (see Uncovered).
	Next, NextWhole time.Time
}

// MayNotCover says whether a restore to target (zero: the latest) may need more of tl than
// it holds: a later timeline of the shard serves only from after target, and tl is not known
// to have been followed up to target. Only then does Uncovered need to know how far tl goes.
func (tl Timeline) MayNotCover(target time.Time) bool {
	return !target.IsZero() && !tl.Next.IsZero() && target.After(tl.NextWhole)
}

// Uncovered says, for a replay of tl up to target (zero: the latest) that reached res,
// whether writes acknowledged by target may be in neither timeline: the replay read tl's
// archive to its end without passing target, which is after the last time tl is known to
// have been followed, and the shard's next timeline serves only from after target (its
// base's follower caught up later). It is an error naming both times and what to choose;
// nil when the target is covered.
func (tl Timeline) Uncovered(target time.Time, res ReplayResult) error {
	if !tl.MayNotCover(target) || !res.Complete {
		return nil
	}
	last, upTo := res.Reached, "up to"
	if last.IsZero() {
		last, upTo = tl.ServesFrom, "nothing after its base, which serves from"
	}
	if !target.After(last) {
		return nil
	}
	return fmt.Errorf("%s's timeline %d holds %s %s, and its timeline %d serves restores only from %s (when its base's reader had caught up): "+
		"writes between the two may be in neither, so %s cannot be restored exactly; restore to a time up to %s or from %s",
		tl.Shard, tl.Timeline, upTo, last.UTC().Format(time.RFC3339Nano), tl.Timeline+1, tl.Next.UTC().Format(time.RFC3339Nano),
		target.UTC().Format(time.RFC3339Nano), last.UTC().Format(time.RFC3339Nano), tl.Next.UTC().Format(time.RFC3339Nano))
}

// ChooseReloadTimelines is ChooseTimelines for a reload of lost slots: each shard's timeline
// that served at lostAt, when the lost masters were last heard from, rather than at target,
// when the reload was recorded. Between the two the archive may have begun a timeline from
// a lost master's pod back empty (its history broke: a new base at once), and that base
// holds none of the lost keys. A shard without a timeline at lostAt (its slots changed
// since), or a zero lostAt, gets the one serving at target.
func ChooseReloadTimelines(all []Timeline, lostAt, target time.Time) ([]Timeline, error) {
	if lostAt.IsZero() || !lostAt.Before(target) {
		return ChooseTimelines(all, target)
	}
	var out []Timeline
	for i := 0; i < len(all); {
		j := i
		for j < len(all) && all[j].Shard == all[i].Shard {
			j++
		}
		chosen, err := ChooseTimelines(all[i:j], lostAt)
		if err != nil {
			if chosen, err = ChooseTimelines(all[i:j], target); err != nil {
				return nil, err
			}
		}
		out = append(out, chosen...)
		i = j
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("the archive holds no base yet")
	}
	return out, nil
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
		d, err := decodeBase(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", n, err)
		}
		out = append(out, Timeline{Shard: shard, Timeline: timeline, Base: d.Shard, ServesFrom: d.ServesFrom, PreviousWhole: d.PreviousWhole})
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
		next := -1
		for ; j < len(all) && all[j].Shard == all[i].Shard; j++ {
			if target.IsZero() || !all[j].ServesFrom.After(target) {
				pick, next = &all[j], j+1
			}
		}
		switch {
		case pick == nil:
			missing = append(missing, fmt.Sprintf("%s (its oldest timeline serves from %s)", all[i].Shard, all[i].ServesFrom.Format(time.RFC3339Nano)))
		case next < j:
			chosen := *pick
			chosen.Next, chosen.NextWhole = all[next].ServesFrom, all[next].PreviousWhole
			out = append(out, chosen)
		default:
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
