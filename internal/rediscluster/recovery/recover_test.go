package recovery

import (
	"testing"

	"github.com/middleware-operator/middleware-operator/tests/fakesnapshot"
)

// TestPlanMeetEveryPairEveryView checks the full mesh: after every pod moved, each of the
// six members is introduced to each of the five others from its own view.
func TestPlanMeetEveryPairEveryView(t *testing.T) {
	c := fakesnapshot.Six()
	for i := range c.Snap.Nodes {
		for j := range c.Snap.Nodes[i].View {
			if v := &c.Snap.Nodes[i].View[j]; !v.Myself {
				v.Addr, v.Flags = "10.9.9.9:6379", append(v.Flags, "noaddr")
			}
		}
	}
	a, ok := Recover(c.Snap)
	if !ok || len(a.Commands) != 30 {
		t.Fatalf("got %d introductions (%v), want 30", len(a.Commands), a.Kind)
	}
	from := map[string]int{}
	for _, cmd := range a.Commands {
		from[cmd.Addr]++
	}
	for i := range 6 {
		if from[fakesnapshot.Addr(i)] != 5 {
			t.Errorf("%s sends %d MEETs, want 5", fakesnapshot.Addr(i), from[fakesnapshot.Addr(i)])
		}
	}
}
