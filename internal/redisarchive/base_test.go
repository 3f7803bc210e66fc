package redisarchive

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/middleware-operator/middleware-operator/internal/backup"
)

func TestParseBaseName(t *testing.T) {
	for _, tc := range []struct {
		name     string
		shard    string
		timeline int
		ok       bool
	}{
		{BaseName("cache", "shard-001", 3), "shard-001", 3, true},
		{"cache/archive/shard-001/00000003/00000000000000000012.seg", "", 0, false},
		{BaseRDBName("cache", "shard-001", 3), "", 0, false},
		{"other/archive/shard-001/00000003/base.json", "", 0, false},
		{"cache/archive/shard-001/00000000/base.json", "", 0, false},
		{"cache/archive/shard-001/3/base.json", "", 0, false},
	} {
		shard, timeline, ok := parseBaseName("cache", tc.name)
		if shard != tc.shard || timeline != tc.timeline || ok != tc.ok {
			t.Errorf("parseBaseName(%q) = %q, %d, %v; want %q, %d, %v", tc.name, shard, timeline, ok, tc.shard, tc.timeline, tc.ok)
		}
	}
}

// TestChooseReloadTimelines: a reload takes each shard's timeline that served when the lost
// masters were last heard from, not the one the archive began afterwards from a pod back
// empty; a shard with none then (its slots changed since) takes the one serving when the
// reload was recorded.
func TestChooseReloadTimelines(t *testing.T) {
	at := func(s int) time.Time { return time.Date(2026, 11, 30, 12, 0, s, 0, time.UTC) }
	tl := func(shard string, timeline, from int) Timeline {
		return Timeline{Shard: shard, Timeline: timeline, Base: backup.Shard{CapturedAt: at(from)}, ServesFrom: at(from)}
	}
	// shard-002 lost its master at 40 s; its pod came back empty and the archive began
	// timeline 2 from it at 45 s; the reload was recorded at 55 s. shard-003's only timeline
	// began at 42 s (a slot change).
	all := []Timeline{tl("shard-001", 1, 0), tl("shard-002", 1, 0), tl("shard-002", 2, 45), tl("shard-003", 1, 42)}
	for _, tc := range []struct {
		name           string
		lostAt, target time.Time
		want           string
	}{
		{"chosen at the loss", at(40), at(56), "shard-001:1 shard-002:1 shard-003:1"},
		{"no loss time: at the record", time.Time{}, at(56), "shard-001:1 shard-002:2 shard-003:1"},
		{"a loss time after the record: at the record", at(57), at(56), "shard-001:1 shard-002:2 shard-003:1"},
	} {
		got, err := ChooseReloadTimelines(all, tc.lostAt, tc.target)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var parts []string
		for _, g := range got {
			parts = append(parts, fmt.Sprintf("%s:%d", g.Shard, g.Timeline))
		}
		if text := strings.Join(parts, " "); text != tc.want {
			t.Errorf("%s: chose %s, want %s", tc.name, text, tc.want)
		}
	}
	if _, err := ChooseReloadTimelines(all, at(40), at(41)); err == nil {
		t.Error("a shard with no timeline by the record: no error")
	}
}

func TestChooseTimelines(t *testing.T) {
	at := func(s int) time.Time { return time.Date(2026, 11, 28, 12, 0, s, 0, time.UTC) }
	tl := func(shard string, timeline, captured, from int) Timeline {
		return Timeline{Shard: shard, Timeline: timeline, Base: backup.Shard{CapturedAt: at(captured)}, ServesFrom: at(from)}
	}
	// shard-000's timeline 2 is a scheduled base captured at 30 s whose follower had caught
	// up at 33 s: timeline 1 serves targets up to then.
	all := []Timeline{tl("shard-000", 1, 0, 0), tl("shard-000", 2, 30, 33), tl("shard-001", 1, 5, 5)}
	for _, tc := range []struct {
		target time.Time
		want   string // shard:timeline, or the error's start
	}{
		{time.Time{}, "shard-000:2 shard-001:1"},
		{at(29), "shard-000:1 shard-001:1"},
		{at(31), "shard-000:1 shard-001:1"},
		{at(33), "shard-000:2 shard-001:1"},
		{at(4), "error: the archive has no base at or before"},
	} {
		got, err := ChooseTimelines(all, tc.target)
		var text string
		if err != nil {
			text = "error: " + err.Error()
		} else {
			var parts []string
			for _, g := range got {
				parts = append(parts, g.Shard+":"+string(rune('0'+g.Timeline)))
			}
			text = strings.Join(parts, " ")
		}
		if !strings.HasPrefix(text, tc.want) {
			t.Errorf("ChooseTimelines(%s) = %s, want %s", tc.target, text, tc.want)
		}
	}
	if _, err := ChooseTimelines(nil, time.Time{}); err == nil {
		t.Error("ChooseTimelines of no timeline succeeded, want an error")
	}
	// The timeline chosen before a later one knows when that one serves from.
	all[1].PreviousWhole = at(34)
	got, err := ChooseTimelines(all, at(31))
	if err != nil || !got[0].Next.Equal(at(33)) || !got[0].NextWhole.Equal(at(34)) || !got[1].Next.IsZero() {
		t.Errorf("ChooseTimelines(31 s) = %+v, %v: want shard-000:1 followed by a timeline serving from 33 s, whole to 34 s, and shard-001:1 by none", got, err)
	}
}

// TestUncovered: a restore to a time between the end of a timeline's archive and the
// moment the shard's next timeline serves from is refused naming both, unless the replay
// stopped at a later record (the timeline went on past the target) or the next base says
// the timeline before was followed until after the target (a scheduled base).
func TestUncovered(t *testing.T) {
	at := func(s int) time.Time { return time.Date(2026, 11, 28, 12, 0, s, 0, time.UTC) }
	// Timeline 1's last record came at 10 s; the slots moved, and timeline 2's base,
	// captured at 12 s, had its reader caught up at 15 s.
	tl := Timeline{Shard: "shard-001", Timeline: 1, ServesFrom: at(0), Next: at(15)}
	read := ReplayResult{Reached: at(10), Complete: true}
	for _, tc := range []struct {
		name   string
		tl     Timeline
		target time.Time
		res    ReplayResult
		want   string // "" or the error's words
	}{
		{"inside the hole", tl, at(13), read, "shard-001's timeline 1 holds up to 2026-11-28T12:00:10Z, and its timeline 2 serves restores only from 2026-11-28T12:00:15Z"},
		{"nothing replayed", tl, at(13), ReplayResult{Complete: true}, "holds nothing after its base, which serves from 2026-11-28T12:00:00Z"},
		{"at the last record", tl, at(10), read, ""},
		{"the timeline went on past the target", tl, at(13), ReplayResult{Reached: at(12), Complete: false}, ""},
		{"latest", tl, time.Time{}, read, ""},
		{"the last timeline", Timeline{Shard: "shard-001", Timeline: 2, ServesFrom: at(15)}, at(40), read, ""},
		{"a scheduled base: followed until its catch-up", Timeline{Shard: "shard-001", Timeline: 1, Next: at(15), NextWhole: at(15)}, at(13), read, ""},
	} {
		err := tc.tl.Uncovered(tc.target, tc.res)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v, want none", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// TestBaseDescription: a description without servesFrom (a first base, one after a gap, or
// one an earlier operator wrote) serves from its capture; a scheduled base's from its own.
func TestBaseDescription(t *testing.T) {
	captured := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	b := backup.Shard{ReplicationID: "r", ReplicationOffset: 10, File: "f", Slots: []backup.SlotRange{{Start: 0, End: 5}}, CapturedAt: captured}
	for _, from := range []time.Time{{}, captured.Add(1500 * time.Millisecond)} {
		data, err := EncodeBase(b, from, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		got, serves, err := DecodeBase(data)
		want := from
		if from.IsZero() {
			want = captured
		}
		if err != nil || got.ReplicationOffset != 10 || !serves.Equal(want) {
			t.Errorf("EncodeBase(servesFrom %v) read back as %+v serving from %v (%v), want from %v", from, got, serves, err, want)
		}
		if from.IsZero() && strings.Contains(string(data), "servesFrom") {
			t.Errorf("a base without servesFrom writes one: %s", data)
		}
	}
}
