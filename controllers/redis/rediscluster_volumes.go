package redis

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/redisadmin"
	"github.com/middleware-operator/middleware-operator/internal/resources"
	"github.com/middleware-operator/middleware-operator/internal/status"
)

const (
	// ConditionVolumeSize: every pod's claim has spec.pod[0].volumes.size (True), grows to
	// it, or the size is refused (False). Only volumes of type pvc have it.
	ConditionVolumeSize = "VolumeSize"
	// ReasonVolumesAtSize: every claim has the size the spec asks.
	ReasonVolumesAtSize = "VolumesAtSize"
	// ReasonVolumesGrowing: claims grow to the spec's size; the message says what is left.
	ReasonVolumesGrowing = "VolumesGrowing"
	// ReasonVolumeShrinkRefused: the spec asks less than a claim has (redisadmin.RefusedShrink).
	ReasonVolumeShrinkRefused = "VolumeShrinkRefused"
	// ReasonVolumeExpansionNotAllowed: a claim's StorageClass cannot grow it, or it has none
	// (redisadmin.RefusedNotExpandable).
	ReasonVolumeExpansionNotAllowed = "VolumeExpansionNotAllowed"
)

// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=patch
// +kubebuilder:rbac:groups=storage.k8s.io,resources=storageclasses,verbs=get

// readClaims reads the pods' claims for the planner (redisadmin.Volumes): each one's request,
// capacity and, when it must grow, whether its StorageClass allows expansion. Only volumes
// of type pvc have claims of the operator's.
func (r *RedisClusterReconciler) readClaims(ctx context.Context, s *state) error {
	s.volumes = redisadmin.Volumes{}
	want, ok := resources.RedisVolumeSize(s.rc)
	if !ok {
		return nil
	}
	v := redisadmin.Volumes{Want: want.Value(), WantText: want.String()}
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
		client.MatchingLabels(resources.SelectorLabels(resources.RedisClusterKind, s.rc.Name))); err != nil {
		return fmt.Errorf("while listing the claims of %s: %w", s.rc.Name, err)
	}
	prefix := resources.RedisDataVolume + "-" + s.rc.Name + "-"
	classes := map[string]bool{}
	for i := range claims.Items {
		c := &claims.Items[i]
		if !strings.HasPrefix(c.Name, prefix) || ordinal(c.Name) >= nodes || !c.DeletionTimestamp.IsZero() {
			continue
		}
		request := c.Spec.Resources.Requests.Storage()
		claim := redisadmin.Claim{Name: c.Name, Pod: strings.TrimPrefix(c.Name, resources.RedisDataVolume+"-"),
			Request: request.Value(), RequestText: request.String(), Capacity: c.Status.Capacity.Storage().Value(),
			Class: ptr.Deref(c.Spec.StorageClassName, "")}
		for _, cond := range c.Status.Conditions {
			if cond.Type == corev1.PersistentVolumeClaimFileSystemResizePending && cond.Status == corev1.ConditionTrue {
				claim.FileSystemResizePending = true
			}
		}
		if claim.Request < v.Want && claim.Class != "" {
			expandable, known := classes[claim.Class]
			if !known {
				var err error
				if expandable, err = r.classExpandable(ctx, claim.Class); err != nil {
					return err
				}
				classes[claim.Class] = expandable
			}
			claim.Expandable = expandable
		}
		v.Claims = append(v.Claims, claim)
	}
	s.volumes = v
	return nil
}

// classExpandable reports whether StorageClass name exists and allows volume expansion. It
// is read from the API (the cache holds no StorageClasses), and only while a claim must grow;
// without the grant to read it, the claim is taken to be expandable and the API server's
// own check refuses the patch if it is not (the reconcile error says so).
func (r *RedisClusterReconciler) classExpandable(ctx context.Context, name string) (bool, error) {
	reader := r.APIReader
	if reader == nil {
		reader = r.Client
	}
	sc := &storagev1.StorageClass{}
	if err := reader.Get(ctx, client.ObjectKey{Name: name}, sc); err != nil {
		switch {
		case apierrors.IsNotFound(err):
			return false, nil
		case apierrors.IsForbidden(err):
			// A namespaced install (a Role) cannot read a cluster-scoped StorageClass: the
			// API server's PersistentVolumeClaimResize admission judges the claim's patch.
			return true, nil
		}
		return false, fmt.Errorf("while reading StorageClass %s: %w", name, err)
	}
	return ptr.Deref(sc.AllowVolumeExpansion, false), nil
}

// growClaims raises the request of the step's claims to the spec's size; the storage grows
// the volumes (online where it can; otherwise FileSystemResizePending asks for a restart).
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
		if err := r.Patch(ctx, patched, client.MergeFrom(c)); err != nil {
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

// volumesStatus reports the claims' sizes and the VolumeSize condition, with a Warning event
// when the spec's size is newly refused.
func (r *RedisClusterReconciler) volumesStatus(s *state) {
	v := s.volumes
	conds := &s.next.Status.Conditions
	if v.Want == 0 {
		s.next.Status.Volumes = nil
		meta.RemoveStatusCondition(conds, ConditionVolumeSize)
		return
	}
	st := &redisv1alpha1.RedisVolumesStatus{Size: v.WantText, Resizing: redisadmin.VolumesResizing(v)}
	for _, c := range v.Claims {
		st.Claims = append(st.Claims, redisv1alpha1.RedisClaimStatus{Name: c.Name, Requested: c.RequestText,
			Capacity: resource.NewQuantity(c.Capacity, resource.BinarySI).String(), FileSystemResizePending: c.FileSystemResizePending})
	}
	s.next.Status.Volumes = st
	gen := s.rc.Generation
	if refusal := redisadmin.RefuseVolumes(v); refusal != nil {
		if c := meta.FindStatusCondition(s.rc.Status.Conditions, ConditionVolumeSize); c == nil || c.Reason != refusal.Reason || c.Message != refusal.Message {
			r.event(s, corev1.EventTypeWarning, refusal.Reason, "Resize", "%s", refusal.Message)
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
