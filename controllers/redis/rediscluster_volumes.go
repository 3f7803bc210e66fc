package redis

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/clusterconn"
	"github.com/middleware-operator/middleware-operator/internal/objectlabels"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/plan"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/report"
	"github.com/middleware-operator/middleware-operator/internal/resources"
)

// resizeRefused is the cause the API server's PersistentVolumeClaimResize admission gives
// when it refuses a claim's growth: the claim has no StorageClass, or its class does not
// set allowVolumeExpansion: true.
const resizeRefused = "only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize"

// readClaims reads the pods' claims for the planner (plan.Volumes): each one's request
// and capacity, the claims a finished scale in left (with spec.finalizers "foreground",
// which deletes them: planDeleteClaims), and the API server's refusal to grow them to the
// spec's size, which the
// VolumeSize condition carries for this generation (plan.RefusedExpansionRetry). Only
// volumes of type pvc have claims of the operator's. No StorageClass is read: whether a
// class allows expansion is the API server's to judge, on the claim's patch (growClaims).
func (r *RedisClusterReconciler) readClaims(ctx context.Context, s *state) error {
	s.volumes = plan.Volumes{}
	v := plan.Volumes{DeleteLeft: s.rc.Spec.Finalizers == "foreground"}
	want, sized := resources.RedisVolumeSize(s.rc)
	if !sized && !v.DeleteLeft {
		return nil
	}
	if sized {
		v.Want, v.WantText, v.Refused = want.Value(), want.String(), carriedRefusal(s.rc, time.Now())
	}
	nodes := int(resources.RedisNodes(s.rc))
	if s.sts != nil {
		v.StatefulSetDeleting = !s.sts.DeletionTimestamp.IsZero()
		nodes = max(nodes, int(ptr.Deref(s.sts.Spec.Replicas, 0)))
		for _, t := range s.sts.Spec.VolumeClaimTemplates {
			if t.Name == resources.RedisDataVolume {
				v.Template = t.Spec.Resources.Requests.Storage().Value()
			}
		}
	}
	claims := &corev1.PersistentVolumeClaimList{}
	if err := r.List(ctx, claims, client.InNamespace(s.rc.Namespace),
		client.MatchingLabels(objectlabels.SelectorLabels(objectlabels.RedisClusterKind, s.rc.Name))); err != nil {
		return fmt.Errorf("while listing the claims of %s: %w", s.rc.Name, err)
	}
	prefix := resources.RedisDataVolume + "-" + s.rc.Name + "-"
	for i := range claims.Items {
		c := &claims.Items[i]
		if !strings.HasPrefix(c.Name, prefix) || !c.DeletionTimestamp.IsZero() {
			continue
		}
		pod := strings.TrimPrefix(c.Name, resources.RedisDataVolume+"-")
		if clusterconn.Ordinal(c.Name) >= nodes {
			if v.DeleteLeft {
				v.Left = append(v.Left, plan.Claim{Name: c.Name, Pod: pod, UID: string(c.UID)})
			}
			continue
		}
		if !sized {
			continue
		}
		request := c.Spec.Resources.Requests.Storage()
		claim := plan.Claim{Name: c.Name, Pod: pod, UID: string(c.UID),
			Request: request.Value(), RequestText: request.String(), Capacity: c.Status.Capacity.Storage().Value(),
			Class: ptr.Deref(c.Spec.StorageClassName, "")}
		for _, cond := range c.Status.Conditions {
			if cond.Type == corev1.PersistentVolumeClaimFileSystemResizePending && cond.Status == corev1.ConditionTrue {
				claim.FileSystemResizePending = true
			}
		}
		v.Claims = append(v.Claims, claim)
	}
	// The cache lists in no set order: by ordinal, status.volumes is the same at every look
	// and is written only when a claim changes.
	byOrdinal := func(a, b plan.Claim) int {
		return cmp.Compare(clusterconn.Ordinal(a.Name), clusterconn.Ordinal(b.Name))
	}
	slices.SortFunc(v.Claims, byOrdinal)
	slices.SortFunc(v.Left, byOrdinal)
	s.volumes = v
	return nil
}

// carriedRefusal is the API server's refusal to grow the claims that the VolumeSize
// condition reports, while it holds: for the spec's generation, and for
// plan.RefusedExpansionRetry after it was last refused (the StorageClass may allow
// expansion since). Nil when none holds.
func carriedRefusal(rc *redisv1alpha1.RedisCluster, now time.Time) *plan.VolumeRefusal {
	c := meta.FindStatusCondition(rc.Status.Conditions, report.ConditionVolumeSize)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != report.ReasonVolumeExpansionNotAllowed ||
		c.ObservedGeneration != rc.Generation || now.Sub(c.LastTransitionTime.Time) >= plan.RefusedExpansionRetry {
		return nil
	}
	return &plan.VolumeRefusal{Reason: c.Reason, Message: c.Message}
}

// growClaims raises the request of the step's claims to the spec's size; the storage grows
// the volumes (online where it can; otherwise FileSystemResizePending asks for a restart).
// When the API server refuses a claim's growth (resizeRefused), no other claim is asked:
// the refusal goes to the VolumeSize condition and a Warning event (report.Derive), not to
// the reconcile's error, and holds until the spec changes or RefusedExpansionRetry passes.
func (r *RedisClusterReconciler) growClaims(ctx context.Context, s *state) error {
	size := resource.NewQuantity(s.volumes.Want, resource.BinarySI)
	for _, name := range s.step.Claims {
		c := &corev1.PersistentVolumeClaim{}
		if err := r.Get(ctx, client.ObjectKey{Namespace: s.rc.Namespace, Name: name}, c); err != nil {
			return fmt.Errorf("while reading claim %s: %w", name, err)
		}
		patched := c.DeepCopy()
		if patched.Spec.Resources.Requests == nil {
			patched.Spec.Resources.Requests = corev1.ResourceList{}
		}
		patched.Spec.Resources.Requests[corev1.ResourceStorage] = *size
		err := r.Patch(ctx, patched, client.MergeFrom(c))
		if apierrors.IsForbidden(err) && strings.Contains(err.Error(), resizeRefused) {
			claim := plan.Claim{Name: name, Class: ptr.Deref(c.Spec.StorageClassName, ""), RequestText: c.Spec.Resources.Requests.Storage().String()}
			s.volumes.Refused = plan.ExpansionRefused(s.volumes, claim, resizeRefused)
			s.volumesRefusedNow = true
			return nil
		}
		if err != nil {
			return fmt.Errorf("while growing claim %s to %s: %w", name, s.volumes.WantText, err)
		}
	}
	r.event(s, corev1.EventTypeNormal, "VolumesGrowing", "Resize", "asked %d claims to grow to %s", len(s.step.Claims), s.volumes.WantText)
	return nil
}

// recreateStatefulSet deletes the StatefulSet with its pods orphaned (they keep running);
// ensureStatefulSet creates it again with claim templates of the spec's size, and it adopts
// the pods, which run its template already, so none restarts.
func (r *RedisClusterReconciler) recreateStatefulSet(ctx context.Context, s *state) error {
	if s.sts == nil {
		return nil
	}
	uid := s.sts.UID
	if err := r.Delete(ctx, s.sts, client.PropagationPolicy(metav1.DeletePropagationOrphan), client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("while deleting StatefulSet %s, its pods orphaned, to recreate it: %w", s.sts.Name, err)
	}
	r.event(s, corev1.EventTypeNormal, "StatefulSetRecreated", "Resize",
		"deleted the StatefulSet, its pods kept running, to create it again with claims of %s", s.volumes.WantText)
	return nil
}
