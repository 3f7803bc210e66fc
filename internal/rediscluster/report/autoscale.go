package report

import (
	"math"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/autoscale"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/plan"
	"github.com/middleware-operator/middleware-operator/internal/resources"
)

// autoscaleWeightScale is the largest slot weight status.autoscale.slotWeights holds.
const autoscaleWeightScale = 10000

// autoscaleStatus sets status.autoscale from the step's autoscale decision: the masters it
// asks for, its clocks, its phase (with the reason as of the phase's change) and its last
// change. Without spec.autoscale there is none.
func autoscaleStatus(s *Input) {
	if s.Cluster.Spec.Autoscale == nil {
		s.Next.Status.Autoscale = nil
		return
	}
	st := s.Next.Status.Autoscale
	if st == nil {
		st = &redisv1alpha1.AutoscaleStatus{}
		s.Next.Status.Autoscale = st
	}
	st.Masters = int32(resources.AutoscaleMasters(s.Cluster)) //nolint:gosec // at most 500 (CRD)
	d := s.Step.Autoscale
	if d == nil {
		// Nothing was decided this look (the nodes could not be observed): keep the rest.
		return
	}
	if phase := redisv1alpha1.AutoscalePhase(d.Phase); st.Phase != phase {
		st.Phase, st.Message = phase, d.Reason
	}
	st.AboveSince, st.BelowSince = metaTime(d.State.AboveSince), metaTime(d.State.BelowSince)
	if s.Step.Kind != plan.StepAutoscale || s.Err != nil {
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

// metaTime is t for the status, nil when zero (seconds only, as the API server keeps them).
func metaTime(t time.Time) *metav1.Time {
	if t.IsZero() {
		return nil
	}
	return &metav1.Time{Time: t.Truncate(time.Second)}
}
