package redisarchive

import (
	"slices"
	"testing"
	"time"

	"github.com/middleware-operator/middleware-operator/internal/backup"
)

// TestExpired: the timelines a retention deletes are exactly those before the one a restore
// to now - keep would pick, shard by shard.
func TestExpired(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	tl := func(shard string, n int, ago time.Duration) Timeline {
		return Timeline{Shard: shard, Timeline: n, Base: backup.Shard{CapturedAt: now.Add(-ago - time.Minute)}, ServesFrom: now.Add(-ago)}
	}
	day := 24 * time.Hour
	all := []Timeline{
		tl("shard-000", 1, 10*day), tl("shard-000", 2, 9*day), tl("shard-000", 3, 8*day), tl("shard-000", 4, 7*day), tl("shard-000", 5, 1*day),
		tl("shard-001", 1, 10*day), tl("shard-001", 2, 2*time.Hour),
	}
	cases := []struct {
		name  string
		shard string
		keep  time.Duration
		want  []int
	}{
		{"keep everything", "shard-000", 0, nil},
		{"a window older than every base", "shard-000", 30 * day, nil},
		{"the window starts inside timeline 2: 1 goes", "shard-000", 8*day + time.Hour, []int{1}},
		{"the window starts inside timeline 3: 1 and 2 go", "shard-000", 8*day - time.Hour, []int{1, 2}},
		{"the window starts at timeline 4's base: 1 to 3 go", "shard-000", 7 * day, []int{1, 2, 3}},
		{"a window shorter than the newest timeline keeps it and drops the rest", "shard-000", time.Hour, []int{1, 2, 3, 4}},
		{"another shard's timelines are its own", "shard-001", 3 * day, nil},
		{"another shard, its first timeline past", "shard-001", time.Hour, []int{1}},
		{"a shard without timelines", "shard-002", time.Hour, nil},
	}
	for _, c := range cases {
		var got []int
		for _, e := range Expired(all, c.shard, now, c.keep) {
			if e.Shard != c.shard {
				t.Errorf("%s: %s timeline %d expired", c.name, e.Shard, e.Timeline)
			}
			got = append(got, e.Timeline)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: expired %v, want %v", c.name, got, c.want)
		}
		// What stays serves a restore to any time in the window: the one picked at the
		// window's start is kept.
		if c.keep > 0 {
			if picked, err := ChooseTimelines(without(all, got, c.shard), now.Add(-c.keep)); err == nil {
				for _, p := range picked {
					if p.Shard == c.shard && slices.Contains(got, p.Timeline) {
						t.Errorf("%s: a restore to the window's start picks timeline %d, which expired", c.name, p.Timeline)
					}
				}
			}
		}
	}
}

// without is all less shard's timelines listed in gone.
func without(all []Timeline, gone []int, shard string) []Timeline {
	var out []Timeline
	for _, tl := range all {
		if tl.Shard != shard || !slices.Contains(gone, tl.Timeline) {
			out = append(out, tl)
		}
	}
	return out
}

// TestDeleteTimeline: a timeline's base description, snapshot and segments go, and nothing
// of the other timelines or shards.
func TestDeleteTimeline(t *testing.T) {
	sink := &MemorySink{}
	for _, name := range []string{
		BaseName("c", "shard-000", 1), BaseRDBName("c", "shard-000", 1), SegmentName("c", "shard-000", 1, 10), SegmentName("c", "shard-000", 1, 20),
		BaseName("c", "shard-000", 2), SegmentName("c", "shard-000", 2, 30), BaseName("c", "shard-001", 1), SegmentName("c", "shard-001", 1, 10),
	} {
		if err := sink.Put(t.Context(), name, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	if err := DeleteTimeline(t.Context(), sink, "c", "shard-000", 1); err != nil {
		t.Fatal(err)
	}
	left, _ := sink.List(t.Context(), "c/")
	want := []string{BaseName("c", "shard-000", 2), SegmentName("c", "shard-000", 2, 30), BaseName("c", "shard-001", 1), SegmentName("c", "shard-001", 1, 10)}
	slices.Sort(want)
	if !slices.Equal(left, want) {
		t.Errorf("left %v, want %v", left, want)
	}
}
