package redisadmin

import (
	"reflect"
	"testing"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/layout"
)

// TestCloseWay is the table of how a half-moved slot is closed.
func TestCloseWay(t *testing.T) {
	t.Parallel()
	const mib = 1 << 20
	cases := map[string]struct {
		facts OpenSlotFacts
		want  string
	}{
		"the rest fits in the target: finish": {
			OpenSlotFacts{Left: layout.SlotSize{Keys: 100, Bytes: mib}, Moved: layout.SlotSize{Keys: 100, Bytes: mib}, OwnerRoom: layout.Room{Bytes: 0}, TargetRoom: layout.Room{Bytes: 2 * mib}}, FixFinished,
		},
		"roll back a half-moved slot: the target is full": {
			OpenSlotFacts{Left: layout.SlotSize{Keys: 20000, Bytes: 25 * mib}, Moved: layout.SlotSize{Keys: 18000, Bytes: 22 * mib}, OwnerRoom: layout.Room{Bytes: 20 * mib, Spare: 24 * mib}, TargetRoom: layout.Room{Bytes: 0}}, FixRolledBack,
		},
		"roll back: the rest is bigger than the target's room": {
			OpenSlotFacts{Left: layout.SlotSize{Keys: 100, Bytes: 5 * mib}, Moved: layout.SlotSize{Keys: 1, Bytes: 1000}, OwnerRoom: layout.Room{Spare: 1000}, TargetRoom: layout.Room{Bytes: 4 * mib}}, FixRolledBack,
		},
		"keep open: the target is full and writes filled the owner since": {
			OpenSlotFacts{Left: layout.SlotSize{Keys: 20000, Bytes: 25 * mib}, Moved: layout.SlotSize{Keys: 18000, Bytes: 22 * mib}, OwnerRoom: layout.Room{Bytes: 0, Spare: 3 * mib}, TargetRoom: layout.Room{Bytes: 0}}, FixKeptOpen,
		},
		"keep open: a byte short on each side": {
			OpenSlotFacts{Left: layout.SlotSize{Keys: 1, Bytes: 1001}, Moved: layout.SlotSize{Keys: 1, Bytes: 1001}, OwnerRoom: layout.Room{Bytes: 1000, Spare: 1000}, TargetRoom: layout.Room{Bytes: 1000, Spare: 2000}}, FixKeptOpen,
		},
		"roll back into an owner past fillPercent but below maxmemory": {
			OpenSlotFacts{Left: layout.SlotSize{Keys: 10, Bytes: 5 * mib}, Moved: layout.SlotSize{Keys: 10, Bytes: 2 * mib}, OwnerRoom: layout.Room{Bytes: 0, Spare: 2 * mib}, TargetRoom: layout.Room{Bytes: mib}}, FixRolledBack,
		},
		"no maxmemory on the owner: roll back": {
			OpenSlotFacts{Left: layout.SlotSize{Keys: 10, Bytes: 5 * mib}, Moved: layout.SlotSize{Keys: 10, Bytes: 50 * mib}, OwnerRoom: layout.Room{Unlimited: true}, TargetRoom: layout.Room{Bytes: mib}}, FixRolledBack,
		},
		"no maxmemory on the target: finish": {
			OpenSlotFacts{Left: layout.SlotSize{Keys: 20000, Bytes: 25 * mib}, TargetRoom: layout.Room{Unlimited: true}}, FixFinished,
		},
	}
	for name, tc := range cases {
		if got := closeWay(tc.facts); got != tc.want {
			t.Errorf("%s: %s, want %s", name, got, tc.want)
		}
	}
}

// TestMeanSizesOf: a node whose user may not run MEMORY USAGE has its slots estimated by
// their keys times its mean bytes a key; a node without keys leaves them unknown (0).
func TestMeanSizesOf(t *testing.T) {
	t.Parallel()
	got := meanSizesOf(map[int]layout.SlotSize{1: {Keys: 10}, 2: {Keys: 0}}, 1000, 100)
	if want := map[int]layout.SlotSize{1: {Keys: 10, Bytes: 100}, 2: {Keys: 0, Bytes: 0}}; !reflect.DeepEqual(got, want) {
		t.Errorf("meanSizesOf = %v, want %v", got, want)
	}
	if got := meanSizesOf(map[int]layout.SlotSize{1: {Keys: 10}}, 1000, 0); got[1].Bytes != 0 {
		t.Errorf("with no keys, slot 1 = %+v, want 0 bytes", got[1])
	}
}
