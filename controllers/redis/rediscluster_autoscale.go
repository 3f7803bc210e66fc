package redis

import (
	"context"
	"fmt"
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/autoscale"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/plan"
	"github.com/middleware-operator/middleware-operator/internal/resources"
)

// The autoscaler's defaults (spec.autoscale's fields when unset).
const (
	defaultAutoscaleTarget   = 70
	defaultAutoscaleSustain  = 5 * time.Minute
	defaultAutoscaleCoolDown = 10 * time.Minute
)

// The events of the memory autoscaler's changes.
const (
	ReasonAutoscaledOut       = "AutoscaledOut"
	ReasonAutoscaledIn        = "AutoscaledIn"
	ReasonAutoscaleRebalanced = "AutoscaleRebalanced"
)

// autoscaleWeightScale is the largest slot weight status.autoscale.slotWeights holds.
const autoscaleWeightScale = 10000

// readBackupsUnderWay notes, with spec.autoscale, a backup of the cluster that is pending
// or running (from the cache): the autoscaler does not change the slot map under it.
func (r *RedisClusterReconciler) readBackupsUnderWay(ctx context.Context, s *state) {
	if s.rc.Spec.Autoscale == nil {
		return
	}
	backups := &redisv1alpha1.RedisBackupList{}
	if err := r.List(ctx, backups, client.InNamespace(s.rc.Namespace), client.UnsafeDisableDeepCopy); err != nil {
		// Not knowing is busy: no scale on a guess.
		s.backupUnderWay = "the backups cannot be listed: " + err.Error()
		return
	}
	for i := range backups.Items {
		b := &backups.Items[i]
		if b.Spec.Cluster == s.rc.Name && (b.Status.Phase == "" || b.Status.Phase == redisv1alpha1.BackupPending || b.Status.Phase == redisv1alpha1.BackupRunning) {
			s.backupUnderWay = fmt.Sprintf("backup %s is under way", b.Name)
			return
		}
	}
}

// plannerAutoscale sets, on the desired cluster spec, spec.autoscale and what
// status.autoscale remembers (with the backup under way and the slot weights), in the
// planner's terms.
func plannerAutoscale(s *state, spec *plan.Desired) {
	a := s.rc.Spec.Autoscale
	if a == nil {
		return
	}
	spec.Autoscale = &autoscale.Settings{
		TargetPercent: int(ptr.Deref(a.TargetPercent, defaultAutoscaleTarget)),
		MinMasters:    int(a.MinMasters), MaxMasters: int(a.MaxMasters),
		Sustain:  durationOr(a.Sustain, defaultAutoscaleSustain),
		CoolDown: durationOr(a.CoolDown, defaultAutoscaleCoolDown),
		ScaleIn:  a.ScaleIn,
	}
	spec.Busy = s.backupUnderWay
	spec.AutoscaleState.Held = spec.HeldSlots
	st := s.rc.Status.Autoscale
	if st == nil {
		return
	}
	spec.AutoscaleState = autoscale.State{AboveSince: timeOf(st.AboveSince), BelowSince: timeOf(st.BelowSince), LastChange: timeOf(st.LastChange),
		Held: spec.HeldSlots}
	if len(st.SlotWeights) > 0 {
		spec.SlotWeights = map[string]float64{}
		for id, w := range st.SlotWeights {
			spec.SlotWeights[id] = float64(w)
		}
	}
}

// actAutoscale records the autoscaler's change as an event; the status (autoscaleStatus)
// carries the new number of masters or the slot weights, and the next look scales.
func (r *RedisClusterReconciler) actAutoscale(s *state) {
	d := s.step.Autoscale
	reason := map[autoscale.Kind]string{autoscale.Out: ReasonAutoscaledOut, autoscale.In: ReasonAutoscaledIn,
		autoscale.Rebalance: ReasonAutoscaleRebalanced}[d.Kind]
	r.event(s, corev1.EventTypeNormal, reason, "Scale", "%s", d.Reason)
}

// autoscaleStatus sets status.autoscale from the step's autoscale decision: the masters it
// asks for, its clocks, its phase (with the reason as of the phase's change) and its last
// change. Without spec.autoscale there is none.
func autoscaleStatus(s *state) {
	if s.rc.Spec.Autoscale == nil {
		s.next.Status.Autoscale = nil
		return
	}
	st := s.next.Status.Autoscale
	if st == nil {
		st = &redisv1alpha1.AutoscaleStatus{}
		s.next.Status.Autoscale = st
	}
	st.Masters = int32(resources.AutoscaleMasters(s.rc)) //nolint:gosec // at most 500 (CRD)
	d := s.step.Autoscale
	if d == nil {
		// Nothing was decided this look (the nodes could not be observed): keep the rest.
		return
	}
	if phase := redisv1alpha1.AutoscalePhase(d.Phase); st.Phase != phase {
		st.Phase, st.Message = phase, d.Reason
	}
	st.AboveSince, st.BelowSince = metaTime(d.State.AboveSince), metaTime(d.State.BelowSince)
	if s.step.Kind != plan.StepAutoscale || s.err != nil {
		st.LastChange = metaTime(d.State.LastChange)
		return
	}
	st.LastChange, st.LastChangeReason = metaTime(d.State.LastChange), d.Reason
	switch d.Kind {
	case autoscale.Out, autoscale.In:
		st.Masters, st.SlotWeights = int32(d.Masters), nil //nolint:gosec // within minMasters and maxMasters
	case autoscale.Rebalance:
		st.SlotWeights = slotWeights(d.Weights)
	}
}

// slotWeights are weights as whole numbers, the largest autoscaleWeightScale, none below 1.
func slotWeights(weights map[string]float64) map[string]int32 {
	top := 0.0
	for _, w := range weights {
		top = math.Max(top, w)
	}
	out := map[string]int32{}
	for id, w := range weights {
		out[id] = 1
		if top > 0 {
			out[id] = int32(max(1, math.Round(w/top*autoscaleWeightScale)))
		}
	}
	return out
}

// durationOr is d, or def when d is nil.
func durationOr(d *metav1.Duration, def time.Duration) time.Duration {
	if d == nil {
		return def
	}
	return d.Duration
}

// timeOf is t's time, zero when nil.
func timeOf(t *metav1.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.Time
}

// metaTime is t for the status, nil when zero (seconds only, as the API server keeps them).
func metaTime(t time.Time) *metav1.Time {
	if t.IsZero() {
		return nil
	}
	return &metav1.Time{Time: t.Truncate(time.Second)}
}
