package report

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/layout"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/observe"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/plan"
)

// heldMaster is an answering, joined master id serving slots, with used of 1000 bytes of
// maxmemory.
func heldMaster(id, used string, slots ...nodes.SlotRange) observe.Observation {
	self := nodes.Node{ID: id, Myself: true, Role: nodes.RoleMaster, Slots: slots}
	return observe.Observation{Pod: id, Addr: "127.1.0.1:6379", View: []nodes.Node{self, {ID: "other"}},
		Replication: map[string]string{"role": "master", "used_memory": used, "maxmemory": "1000", "maxmemory_policy": "noeviction"}}
}

// TestHeldSlotsStatus: status.heldSlots keeps the held slots of this generation that
// still do not fit (a rolled-back one until a master has room for it besides its old
// room), at most layout.MaxHeldSlots; a scale in they keep from ending sets
// SlotsMovable=False ScaleInHeld naming them, with one Warning event, not one a look.
func TestHeldSlotsStatus(t *testing.T) {
	const gen = 3
	rc := &redisv1alpha1.RedisCluster{ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: "ns", Generation: gen}}
	rc.Status.HeldSlots = []redisv1alpha1.HeldSlotStatus{
		{Slot: 12288, Master: "g", Target: "a", Giant: true, Keys: 38000, Bytes: 47 << 20, Room: 2 << 20, Generation: gen},
		{Slot: 5, Master: "a", Target: "b", RolledBack: true, Keys: 10, Bytes: 300, Room: 100, Generation: gen},
		{Slot: 6, Master: "a", Target: "b", Keys: 10, Bytes: 300, Room: 100, Generation: gen - 1},
	}
	snap := func(bUsed string) observe.Snapshot {
		return observe.Snapshot{Now: time.Now(), Nodes: []observe.Observation{
			heldMaster("a", "600", nodes.SlotRange{Start: 0, End: 12287}, nodes.SlotRange{Start: 12289, End: 16383}),
			heldMaster("b", bUsed), heldMaster("g", "990", nodes.SlotRange{Start: 12288, End: 12288}),
		}}
	}
	s := &Input{Cluster: rc, Next: rc.DeepCopy(), Snap: snap("700")}
	giant := layout.HeldSlot{Slot: 12288, Source: "g", Target: "a", Giant: true, Size: layout.SlotSize{Keys: 38000, Bytes: 47 << 20}}
	s.Step = plan.Step{Kind: plan.StepWait, Operation: plan.OpScaling, DrainHeld: []layout.HeldSlot{giant},
		Reason: "the scale in is held: slot 12288 ..."}
	heldSlotsStatus(s, gen)
	var got []int32
	for _, h := range s.Next.Status.HeldSlots {
		got = append(got, h.Slot)
	}
	if len(got) != 2 || got[0] != 5 || got[1] != 12288 || !s.Next.Status.HeldSlots[0].RolledBack {
		t.Fatalf("heldSlots %v (%+v), want the rolled-back slot 5 and the giant 12288 (slot 6 is of an older generation)", got, s.Next.Status.HeldSlots)
	}
	c := meta.FindStatusCondition(s.Next.Status.Conditions, ConditionSlotsMovable)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != ReasonScaleInHeld || !strings.Contains(c.Message, "slot 12288") {
		t.Fatalf("SlotsMovable = %+v, want False %s naming slot 12288", c, ReasonScaleInHeld)
	}
	if n := len(s.events); n != 1 {
		t.Fatalf("%d events, want one %s", n, ReasonScaleInHeld)
	}
	if e := s.events[0]; e.Reason != ReasonScaleInHeld || !strings.Contains(e.Note, "slot 12288") {
		t.Errorf("event %+v, want %s naming slot 12288", e, ReasonScaleInHeld)
	}
	// The next look, with the condition recorded: no second event.
	s.Cluster = s.Next.DeepCopy()
	s.Next, s.events = s.Cluster.DeepCopy(), nil
	heldSlotsStatus(s, gen)
	if n := len(s.events); n != 0 {
		t.Errorf("%d more events on the next look, want none", n)
	}
	// b's room grows to 800, room for slot 5 (300 bytes) besides its old room (100): it is
	// tried again; the giant slot stays held.
	s.Snap = snap("100")
	s.Step = plan.Step{Kind: plan.StepIdle}
	heldSlotsStatus(s, gen)
	if h := s.Next.Status.HeldSlots; len(h) != 1 || h[0].Slot != 12288 {
		t.Errorf("heldSlots %+v once b has room, want only the giant slot 12288", h)
	}
	if c := meta.FindStatusCondition(s.Next.Status.Conditions, ConditionSlotsMovable); c == nil || c.Reason != ReasonSlotTooBig {
		t.Errorf("SlotsMovable = %+v once the scale in is not held, want %s", c, ReasonSlotTooBig)
	}
	// A move that held more than the cap: at most layout.MaxHeldSlots are kept.
	for i := range layout.MaxHeldSlots + 10 {
		s.Held = append(s.Held, layout.HeldSlot{Slot: 100 + i, Source: "a", Target: "b", Size: layout.SlotSize{Bytes: int64(i)}})
	}
	heldSlotsStatus(s, gen)
	if n := len(s.Next.Status.HeldSlots); n != layout.MaxHeldSlots {
		t.Errorf("%d held slots in the status, want at most %d", n, layout.MaxHeldSlots)
	}
}
