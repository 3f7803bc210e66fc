package apps

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1api "github.com/middleware-operator/middleware-operator/api/apps/v1"
	"github.com/middleware-operator/middleware-operator/internal/child"
	"github.com/middleware-operator/middleware-operator/internal/objectlabels"
	"github.com/middleware-operator/middleware-operator/internal/resources"
)

// cloudManagerOwnerIndex indexes the kinds a CloudManager owns by the UID of the
// CloudManager that controls them.
const cloudManagerOwnerIndex = "cloudmanager.metadata.controller"

// ownedKinds are the kinds a CloudManager creates.
func ownedKinds() []client.Object {
	return []client.Object{&appsv1.Deployment{}, &appsv1.StatefulSet{}, &corev1.Service{}, &corev1.Secret{}}
}

// ownedLists are the list kinds of ownedKinds.
func ownedLists() []client.ObjectList {
	return []client.ObjectList{&appsv1.DeploymentList{}, &appsv1.StatefulSetList{}, &corev1.ServiceList{}, &corev1.SecretList{}}
}

// controllingCloudManager is the index function of cloudManagerOwnerIndex.
func controllingCloudManager(obj client.Object) []string {
	owner := metav1.GetControllerOf(obj)
	if owner == nil || owner.APIVersion != appsv1api.GroupVersion.String() || owner.Kind != "CloudManager" {
		return nil
	}
	return []string{string(owner.UID)}
}

// childKey names one child the spec wants.
type childKey struct{ kind, name string }

// wantedChildren are the children the spec names, with the component each belongs to.
func wantedChildren(cm *appsv1api.CloudManager) map[childKey]string {
	want := map[childKey]string{
		{"Deployment", cm.Spec.Front.Deployment.Name}:    resources.ComponentFront,
		{"Deployment", cm.Spec.Identity.Deployment.Name}: resources.ComponentIdentity,
		{"StatefulSet", cm.Spec.DB.StatefulSet.Name}:     resources.ComponentDB,
		{"Service", cm.Spec.DB.StatefulSet.Name}:         resources.ComponentDB,
	}
	if cm.Spec.DB.RootPasswordSecretRef == nil {
		want[childKey{"Secret", resources.CloudManagerSecretName(cm)}] = resources.ComponentDB
	}
	return want
}

// cleanup deletes the children the CloudManager controls that the spec no longer names: the
// Deployment of a renamed tier, the StatefulSet and Service of a renamed database, the
// password Secret once a rootPasswordSecretRef replaces it. It also deletes a Deployment
// whose pods belong to another tier (the front and identity names were swapped), since a
// selector cannot change. Objects the CloudManager does not control are never deleted.
func (r *CloudManagerReconciler) cleanup(ctx context.Context, cm *appsv1api.CloudManager, _ *cloudManagerTiers) error {
	want := wantedChildren(cm)
	for _, list := range ownedLists() {
		if err := r.List(ctx, list, client.InNamespace(cm.Namespace), client.MatchingFields{cloudManagerOwnerIndex: string(cm.UID)}); err != nil {
			return fmt.Errorf("while listing the children of CloudManager %s: %w", cm.Name, err)
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			return err
		}
		for _, item := range items {
			obj, ok := item.(client.Object)
			if !ok || !metav1.IsControlledBy(obj, cm) || !obj.GetDeletionTimestamp().IsZero() {
				continue
			}
			component, wanted := want[childKey{child.KindOf(obj), obj.GetName()}]
			if wanted && selectsComponent(obj, component) {
				continue
			}
			if err := r.deleteChild(ctx, cm, obj); err != nil {
				return err
			}
		}
	}
	return nil
}

// selectsComponent reports whether a workload's immutable selector picks the pods of
// component; other kinds have no immutable selector and always do.
func selectsComponent(obj client.Object, component string) bool {
	if d, ok := obj.(*appsv1.Deployment); ok && d.Spec.Selector != nil {
		return d.Spec.Selector.MatchLabels[objectlabels.LabelComponent] == component
	}
	return true
}

// deleteChild deletes one child, only if it is still the object that was listed.
func (r *CloudManagerReconciler) deleteChild(ctx context.Context, cm *appsv1api.CloudManager, obj client.Object) error {
	uid := obj.GetUID()
	err := r.Delete(ctx, obj, client.Preconditions{UID: &uid}, client.PropagationPolicy(metav1.DeletePropagationBackground))
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("while deleting %s %s: %w", child.KindOf(obj), obj.GetName(), err)
	}
	r.Recorder.Eventf(cm, obj, corev1.EventTypeNormal, ReasonDeleted, "Delete", "Deleted %s %s: the spec no longer names it",
		child.KindOf(obj), obj.GetName())
	return nil
}
