package redis

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/plan"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/report"
)

// TestCarriedRefusal: the API server's refusal to grow the claims holds for the spec's
// generation, until RefusedExpansionRetry after it was last refused; nothing else carries.
func TestCarriedRefusal(t *testing.T) {
	now := time.Date(2026, 11, 28, 21, 0, 0, 0, time.UTC)
	refused := func(gen int64, ago time.Duration, status metav1.ConditionStatus, reason string) *redisv1alpha1.RedisCluster {
		rc := &redisv1alpha1.RedisCluster{}
		rc.Generation = 3
		rc.Status.Conditions = []metav1.Condition{{Type: report.ConditionVolumeSize, Status: status, Reason: reason, Message: "refused",
			ObservedGeneration: gen, LastTransitionTime: metav1.NewTime(now.Add(-ago))}}
		return rc
	}
	cases := map[string]struct {
		rc   *redisv1alpha1.RedisCluster
		hold bool
	}{
		"refused a minute ago for this spec: holds":        {rc: refused(3, time.Minute, metav1.ConditionFalse, report.ReasonVolumeExpansionNotAllowed), hold: true},
		"refused for an older spec: asked again":           {rc: refused(2, time.Minute, metav1.ConditionFalse, report.ReasonVolumeExpansionNotAllowed)},
		"refused RefusedExpansionRetry ago: asked again":   {rc: refused(3, plan.RefusedExpansionRetry, metav1.ConditionFalse, report.ReasonVolumeExpansionNotAllowed)},
		"a shrink refused: the planner's own, not carried": {rc: refused(3, time.Minute, metav1.ConditionFalse, report.ReasonVolumeShrinkRefused)},
		"growing: nothing carried":                         {rc: refused(3, time.Minute, metav1.ConditionFalse, report.ReasonVolumesGrowing)},
		"no condition: nothing carried":                    {rc: &redisv1alpha1.RedisCluster{}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := carriedRefusal(tc.rc, now)
			if (got != nil) != tc.hold {
				t.Fatalf("carried %+v, want held %v", got, tc.hold)
			}
			if got != nil && (got.Reason != plan.RefusedNotExpandable || got.Message != "refused") {
				t.Errorf("carried %+v, want the condition's reason and message", got)
			}
		})
	}
}
