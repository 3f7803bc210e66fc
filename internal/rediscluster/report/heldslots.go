package report

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/layout"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/observe"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/plan"
	"github.com/middleware-operator/middleware-operator/internal/status"
)

// maxNamedSlots is how many slots the SlotsMovable condition names.
const maxNamedSlots = 16

// HeldSlots are status.heldSlots that stay held, in the planner's terms: those of
// the current generation (a change of spec, a larger memory limit say, lets every slot be
// tried again) that plan.StillHeld keeps (a slot is tried again once the room
// changed: a master has room for it besides the room it was held with).
func HeldSlots(rc *redisv1alpha1.RedisCluster, snap observe.Snapshot) []layout.HeldSlot {
	var out []layout.HeldSlot
	for _, h := range rc.Status.HeldSlots {
		if h.Generation == rc.Generation {
			out = append(out, layout.HeldSlot{Slot: int(h.Slot), Source: h.Master, Target: h.Target, Giant: h.Giant, RolledBack: h.RolledBack,
				Size: layout.SlotSize{Keys: h.Keys, Bytes: h.Bytes}, Room: layout.Room{Bytes: h.Room}})
		}
	}
	return plan.StillHeld(out, snap)
}

// heldSlotsStatus sets status.heldSlots (those that stay held, and those this reconcile's
// move held, at most layout.MaxHeldSlots: layout.CapHeld) and the SlotsMovable condition:
// False ScaleInHeld, with a Warning event when it becomes so, while held slots keep a
// scale in from ending; False SlotTooBig while giant slots are held; absent otherwise.
func heldSlotsStatus(s *Input, gen int64) {
	var out []layout.HeldSlot
	for _, h := range append(HeldSlots(s.Cluster, s.Snap), s.Held...) {
		if i := slices.IndexFunc(out, func(o layout.HeldSlot) bool { return o.Slot == h.Slot }); i >= 0 {
			out[i] = h
			continue
		}
		out = append(out, h)
	}
	out = layout.CapHeld(out)
	s.Next.Status.HeldSlots = nil
	var names []string
	for _, h := range out {
		s.Next.Status.HeldSlots = append(s.Next.Status.HeldSlots, redisv1alpha1.HeldSlotStatus{
			Slot: int32(h.Slot), Master: h.Source, Target: h.Target, Giant: h.Giant, RolledBack: h.RolledBack, //nolint:gosec // a slot is below 16384
			Keys: h.Size.Keys, Bytes: h.Size.Bytes, Room: h.Room.Bytes, Generation: gen, Message: h.String()})
		if h.Giant {
			names = append(names, fmt.Sprint(h.Slot))
		}
	}
	if shown := s.Step.Shown(); len(shown.DrainHeld) > 0 {
		if c := meta.FindStatusCondition(s.Cluster.Status.Conditions, ConditionSlotsMovable); c == nil || c.Reason != ReasonScaleInHeld {
			s.report(corev1.EventTypeWarning, ReasonScaleInHeld, "Scale", "%s", shown.Reason)
		}
		status.Set(&s.Next.Status.Conditions, gen, ConditionSlotsMovable, metav1.ConditionFalse, ReasonScaleInHeld, shown.Reason)
		return
	}
	if len(names) == 0 {
		meta.RemoveStatusCondition(&s.Next.Status.Conditions, ConditionSlotsMovable)
		return
	}
	if len(names) > maxNamedSlots {
		names = append(names[:maxNamedSlots], fmt.Sprintf("and %d more", len(names)-maxNamedSlots))
	}
	msg := fmt.Sprintf("slots %s stay on their masters: each holds more data than any target has room for (status.heldSlots gives their sizes); "+
		"a larger memory limit, a higher maxMemoryPercent or fewer keys under one hash tag would let them move", strings.Join(names, ", "))
	status.Set(&s.Next.Status.Conditions, gen, ConditionSlotsMovable, metav1.ConditionFalse, ReasonSlotTooBig, msg)
}
