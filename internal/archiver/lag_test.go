package archiver

import (
	"testing"
	"time"
)

// TestLag is the table of an archive's lag across looks: bytes behind the node, how long
// since it held all the node had, and the bytes archived between looks.
func TestLag(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var l lagState
	for i, look := range []struct {
		timeline             int
		base, archived, node int64
		at                   time.Duration
		behind               int64
		since                time.Duration
		added                int64
	}{
		{timeline: 1, base: 100, archived: 500, node: 5000, at: 0, behind: 4500, since: 0, added: 0}, // the first look counts as caught up
		{timeline: 1, base: 100, archived: 900, node: 9000, at: 10 * time.Second, behind: 8100, since: 10 * time.Second, added: 400},
		{timeline: 1, base: 100, archived: 9000, node: 9100, at: 20 * time.Second, behind: 100, since: 0, added: 8100}, // within LagSlack: caught up
		{timeline: 1, base: 100, archived: 9000, node: 20000, at: 30 * time.Second, behind: 11000, since: 10 * time.Second, added: 0},
		{timeline: 1, base: 100, archived: 9000, node: 30000, at: 90 * time.Second, behind: 21000, since: 70 * time.Second, added: 0},
		{timeline: 2, base: 40000, archived: 40300, node: 40300, at: 100 * time.Second, behind: 0, since: 0, added: 300}, // a new timeline counts from its base
		{timeline: 2, base: 40000, archived: 40400, node: 40300, at: 110 * time.Second, behind: 0, since: 0, added: 100}, // a replica followed may be a little behind the archive
	} {
		behind, since, added := l.measure(look.timeline, look.base, look.archived, look.node, t0.Add(look.at))
		if behind != look.behind || since != look.since || added != look.added {
			t.Errorf("look %d: behind %d, since %s, added %d; want %d, %s, %d", i, behind, since, added, look.behind, look.since, look.added)
		}
	}
}
