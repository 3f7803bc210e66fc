package redis

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/execute"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/layout"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/plan"
	"github.com/middleware-operator/middleware-operator/internal/status"
)

// The condition and reasons of slots too big to move.
const (
	// ConditionSlotsMovable is False while status.heldSlots names slots a slot move left
	// where they are because their data would not fit in any target; absent otherwise.
	ConditionSlotsMovable = "SlotsMovable"
	// ReasonSlotTooBig is its reason, and the reason of the Warning event naming each slot.
	ReasonSlotTooBig = "SlotTooBig"
	// ReasonMoveRolledBack: a target refused a slot's keys with OOM mid-move, and the slot
	// was rolled back to its owner at once (Warning event).
	ReasonMoveRolledBack = "MoveRolledBack"
	// ReasonScaleInHeld: a scale in cannot end because the leaving masters keep only held
	// slots, which fit in no staying master (SlotsMovable False, and a Warning event).
	ReasonScaleInHeld = "ScaleInHeld"
)

// maxNamedSlots is how many slots the SlotsMovable condition names.
const maxNamedSlots = 16

// plannerHeldSlots are status.heldSlots that stay held, in the planner's terms: those of
// the current generation (a change of spec, a larger memory limit say, lets every slot be
// tried again) that plan.StillHeld keeps (a slot is tried again once the room
// changed: a master has room for it besides the room it was held with).
func plannerHeldSlots(s *state) []layout.HeldSlot {
	var out []layout.HeldSlot
	for _, h := range s.rc.Status.HeldSlots {
		if h.Generation == s.rc.Generation {
			out = append(out, layout.HeldSlot{Slot: int(h.Slot), Source: h.Master, Target: h.Target, Giant: h.Giant, RolledBack: h.RolledBack,
				Size: layout.SlotSize{Keys: h.Keys, Bytes: h.Bytes}, Room: layout.Room{Bytes: h.Room}})
		}
	}
	return plan.StillHeld(out, s.snap)
}

// recordMoveOutcome notes what a slot move held back or rolled back: the status keeps the
// giant held slots (heldSlotsStatus), each newly held one with a Warning event, those
// rolled back after their target answered OOM (so the next plan goes around them until
// the room changes rather than meet the same OOM), and the others, waiting for a full
// target, only when the move could move nothing else; a Warning event for each slot
// rolled back to its owner (an open slot finished on its target is no event).
func (r *RedisClusterReconciler) recordMoveOutcome(s *state, stats execute.MoveStats) {
	known := layout.HeldSlotNumbers(plannerHeldSlots(s))
	for _, h := range stats.Held {
		if !h.Giant && !h.RolledBack && stats.Slots > 0 {
			continue
		}
		s.held = append(s.held, h)
		if h.Giant && !slices.Contains(known, h.Slot) {
			r.event(s, corev1.EventTypeWarning, ReasonSlotTooBig, "Scale", "%s", h)
		}
	}
	for _, f := range stats.Fixes {
		if f.Action != execute.FixRolledBack {
			continue // an open slot finished on its target: nothing went back
		}
		r.event(s, corev1.EventTypeWarning, ReasonMoveRolledBack, "Scale", "slot %d %s to %s (%d keys moved): %s", f.Slot, f.Action, f.Owner, f.Keys, f.Detail)
	}
}

// heldSlotsStatus sets status.heldSlots (those that stay held, and those this reconcile's
// move held, at most layout.MaxHeldSlots: layout.CapHeld) and the SlotsMovable condition:
// False ScaleInHeld, with a Warning event when it becomes so, while held slots keep a
// scale in from ending; False SlotTooBig while giant slots are held; absent otherwise.
func heldSlotsStatus(s *state, gen int64) {
	var out []layout.HeldSlot
	for _, h := range append(plannerHeldSlots(s), s.held...) {
		if i := slices.IndexFunc(out, func(o layout.HeldSlot) bool { return o.Slot == h.Slot }); i >= 0 {
			out[i] = h
			continue
		}
		out = append(out, h)
	}
	out = layout.CapHeld(out)
	s.next.Status.HeldSlots = nil
	var names []string
	for _, h := range out {
		s.next.Status.HeldSlots = append(s.next.Status.HeldSlots, redisv1alpha1.HeldSlotStatus{
			Slot: int32(h.Slot), Master: h.Source, Target: h.Target, Giant: h.Giant, RolledBack: h.RolledBack, //nolint:gosec // a slot is below 16384
			Keys: h.Size.Keys, Bytes: h.Size.Bytes, Room: h.Room.Bytes, Generation: gen, Message: h.String()})
		if h.Giant {
			names = append(names, fmt.Sprint(h.Slot))
		}
	}
	if shown := s.step.Shown(); len(shown.DrainHeld) > 0 {
		if c := meta.FindStatusCondition(s.rc.Status.Conditions, ConditionSlotsMovable); c == nil || c.Reason != ReasonScaleInHeld {
			s.report(corev1.EventTypeWarning, ReasonScaleInHeld, "Scale", "%s", shown.Reason)
		}
		status.Set(&s.next.Status.Conditions, gen, ConditionSlotsMovable, metav1.ConditionFalse, ReasonScaleInHeld, shown.Reason)
		return
	}
	if len(names) == 0 {
		meta.RemoveStatusCondition(&s.next.Status.Conditions, ConditionSlotsMovable)
		return
	}
	if len(names) > maxNamedSlots {
		names = append(names[:maxNamedSlots], fmt.Sprintf("and %d more", len(names)-maxNamedSlots))
	}
	msg := fmt.Sprintf("slots %s stay on their masters: each holds more data than any target has room for (status.heldSlots gives their sizes); "+
		"a larger memory limit, a higher maxMemoryPercent or fewer keys under one hash tag would let them move", strings.Join(names, ", "))
	status.Set(&s.next.Status.Conditions, gen, ConditionSlotsMovable, metav1.ConditionFalse, ReasonSlotTooBig, msg)
}
