package status

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// TestPacerSpacesTransitionalWrites: the first transitional status of a resource waits one
// interval, later ones LaterIntervals intervals (a minute at 5 s); a settled status is never
// held back and starts the next transition afresh; resources are paced apart.
func TestPacerSpacesTransitionalWrites(t *testing.T) {
	now := time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)
	p := &Pacer{Interval: 5 * time.Second, Now: func() time.Time { return now }}
	a, b := types.NamespacedName{Namespace: "ns", Name: "a"}, types.NamespacedName{Namespace: "ns", Name: "b"}
	steps := []struct {
		advance      time.Duration
		key          types.NamespacedName
		transitional bool
		want         time.Duration
	}{
		{0, a, true, 5 * time.Second},               // a's rollout starts: its first progress waits
		{2 * time.Second, a, true, 3 * time.Second}, // what is left of the interval
		{0, b, true, 5 * time.Second},               // b is paced on its own
		{3 * time.Second, a, true, 0},               // a's interval is over: write
		{time.Second, a, true, 59 * time.Second},    // later progress waits a minute
		{30 * time.Second, a, true, 29 * time.Second},
		{29 * time.Second, a, true, 0},  // written
		{0, a, true, time.Minute},       // and the next a minute later
		{10 * time.Second, a, false, 0}, // a settles: written at once
		{0, a, true, 5 * time.Second},   // a new rollout of a starts afresh
		{0, b, false, 0},
	}
	for i, s := range steps {
		now = now.Add(s.advance)
		if got := p.Wait(s.key, s.transitional); got != s.want {
			t.Errorf("step %d (%s, transitional %t): wait %s, want %s", i, s.key.Name, s.transitional, got, s.want)
		}
	}
	p.Forget(a)
	if got := p.Wait(a, true); got != 5*time.Second {
		t.Errorf("after Forget: wait %s, want a whole interval", got)
	}
}
