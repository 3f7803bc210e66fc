package redis

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/autoscale"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/plan"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/report"
)

// The autoscaler's defaults (spec.autoscale's fields when unset).
const (
	defaultAutoscaleTarget   = 70
	defaultAutoscaleSustain  = 5 * time.Minute
	defaultAutoscaleCoolDown = 10 * time.Minute
)

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
	reason := map[autoscale.Kind]string{autoscale.Out: report.ReasonAutoscaledOut, autoscale.In: report.ReasonAutoscaledIn,
		autoscale.Rebalance: report.ReasonAutoscaleRebalanced}[d.Kind]
	r.event(s, corev1.EventTypeNormal, reason, "Scale", "%s", d.Reason)
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
