package redis

import (
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/execute"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/layout"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/report"
)

// recordMoveOutcome notes what a slot move held back or rolled back: the status keeps the
// giant held slots (report.Derive), each newly held one with a Warning event, those
// rolled back after their target answered OOM (so the next plan goes around them until
// the room changes rather than meet the same OOM), and the others, waiting for a full
// target, only when the move could move nothing else; a Warning event for each slot
// rolled back to its owner (an open slot finished on its target is no event).
func (r *RedisClusterReconciler) recordMoveOutcome(s *state, stats execute.MoveStats) {
	known := layout.HeldSlotNumbers(report.HeldSlots(s.rc, s.snap))
	for _, h := range stats.Held {
		if !h.Giant && !h.RolledBack && stats.Slots > 0 {
			continue
		}
		s.held = append(s.held, h)
		if h.Giant && !slices.Contains(known, h.Slot) {
			r.event(s, corev1.EventTypeWarning, report.ReasonSlotTooBig, "Scale", "%s", h)
		}
	}
	for _, f := range stats.Fixes {
		if f.Action != execute.FixRolledBack {
			continue // an open slot finished on its target: nothing went back
		}
		r.event(s, corev1.EventTypeWarning, report.ReasonMoveRolledBack, "Scale", "slot %d %s to %s (%d keys moved): %s", f.Slot, f.Action, f.Owner, f.Keys, f.Detail)
	}
}
