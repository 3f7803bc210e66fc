package report

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/plan"
	"github.com/middleware-operator/middleware-operator/internal/status"
)

// volumesStatus reports the claims' sizes and the VolumeSize condition, with a Warning event
// when the spec's size is newly refused.
func volumesStatus(s *Input) {
	v := s.Volumes
	conds := &s.Next.Status.Conditions
	if v.Want == 0 {
		s.Next.Status.Volumes = nil
		meta.RemoveStatusCondition(conds, ConditionVolumeSize)
		return
	}
	st := &redisv1alpha1.RedisVolumesStatus{Size: v.WantText, Resizing: plan.VolumesResizing(v)}
	for _, c := range v.Claims {
		st.Claims = append(st.Claims, redisv1alpha1.RedisClaimStatus{Name: c.Name, Requested: c.RequestText,
			Capacity: resource.NewQuantity(c.Capacity, resource.BinarySI).String(), FileSystemResizePending: c.FileSystemResizePending})
	}
	s.Next.Status.Volumes = st
	gen := s.Cluster.Generation
	if refusal := plan.RefuseVolumes(v); refusal != nil {
		if c := meta.FindStatusCondition(s.Cluster.Status.Conditions, ConditionVolumeSize); c == nil || c.Reason != refusal.Reason || c.Message != refusal.Message {
			s.report(corev1.EventTypeWarning, refusal.Reason, "Resize", "%s", refusal.Message)
		}
		if s.VolumesRefusedNow {
			// Refused again after RefusedExpansionRetry: the condition's time says when it
			// was last refused, so that the next ask waits as long again.
			meta.RemoveStatusCondition(conds, ConditionVolumeSize)
		}
		status.Set(conds, gen, ConditionVolumeSize, metav1.ConditionFalse, refusal.Reason, refusal.Message)
		return
	}
	if st.Resizing != "" {
		status.Set(conds, gen, ConditionVolumeSize, metav1.ConditionFalse, ReasonVolumesGrowing, st.Resizing)
		return
	}
	status.Set(conds, gen, ConditionVolumeSize, metav1.ConditionTrue, ReasonVolumesAtSize, "every claim has "+v.WantText)
}
