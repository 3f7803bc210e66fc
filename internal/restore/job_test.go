package restore

import (
	"context"
	"errors"
	"testing"

	"github.com/middleware-operator/middleware-operator/internal/rdbstream"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/plan"
)

// TestFencedLoadEmptiesNothing: a load whose process lost the lead while it ran (the fence
// refuses) empties no slot: it does not even reach the node.
func TestFencedLoadEmptiesNothing(t *testing.T) {
	lost := errors.New("not the leader")
	j := Job{Restoring: true, Step: plan.ShardLoad{Slots: []nodes.SlotRange{{Start: 0, End: 5460}}},
		Fence: func(context.Context) error { return lost }}
	// Nothing listens on port 1: emptying without the fence would fail to dial instead.
	removed, err := j.empty(t.Context(), rdbstream.Options{Addr: "127.0.0.1:1"})
	if !errors.Is(err, lost) || removed != 0 {
		t.Fatalf("empty = %d, %v; want 0 and the fence's refusal", removed, err)
	}
	if err := j.emptyAfter(t.Context(), rdbstream.Options{Addr: "127.0.0.1:1"}, errors.New("checksum")); !errors.Is(err, lost) {
		t.Fatalf("emptyAfter = %v, want the fence's refusal in it", err)
	}
}
