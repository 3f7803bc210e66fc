// Package caching decides what the operator's informers hold: of the kinds it creates, only
// the objects carrying its managed-by label (Redis pods and claims only), everything without
// managedFields; and of the Secrets and ConfigMaps a user names in a spec, only the ones the
// operator labelled WatchLabel when it first read them, by name only, in a metadata cache of
// their own, enough to wake a reconciler when one changes. No informer of the operator lists
// or watches a Secret or ConfigMap it was never told about: the API server filters them out
// by label before they reach it. Reconcilers read the user objects through the API reader.
package caching

import (
	"github.com/middleware-operator/middleware-operator/internal/objectlabels"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Owned maps each kind the operator creates to the labels an object of that kind must carry
// to be cached: the managed-by label, and for pods and claims (only Redis reads them) the
// RedisCluster name label too, so AppService and CloudManager pods stay out of memory.
func Owned() map[client.Object]labels.Set {
	ours := labels.Set{objectlabels.LabelManagedBy: objectlabels.ManagedBy}
	redis := labels.Set{objectlabels.LabelManagedBy: objectlabels.ManagedBy, objectlabels.LabelName: objectlabels.RedisClusterKind}
	return map[client.Object]labels.Set{
		&appsv1.Deployment{}:            ours,
		&appsv1.StatefulSet{}:           ours,
		&corev1.Service{}:               ours,
		&corev1.ConfigMap{}:             ours,
		&corev1.Secret{}:                ours,
		&policyv1.PodDisruptionBudget{}: ours,
		&networkingv1.NetworkPolicy{}:   ours, // its informer starts at the first read, once RBAC allows it
		&corev1.Pod{}:                   redis,
		&corev1.PersistentVolumeClaim{}: redis,
	}
}

// Options returns base with a label-selected cache for every kind in Owned and managedFields
// stripped from every cached object.
func Options(base cache.Options) cache.Options {
	base.ByObject = map[client.Object]cache.ByObject{}
	for obj, set := range Owned() {
		base.ByObject[obj] = cache.ByObject{Label: labels.SelectorFromSet(set)}
	}
	base.DefaultTransform = cache.TransformStripManagedFields()
	return base
}

// WatchLabel is the label the operator puts on a user's Secret or ConfigMap that a spec
// names (a password Secret, a TLS Secret, a Redis configuration ConfigMap) when it first
// reads it: the references cache watches only objects that carry it. A user may set it in
// advance; removing it only delays the operator's reaction to a change until its next
// periodic read, which labels the object again.
const WatchLabel = "middleware-operator.io/watched"

// WatchLabelValue is WatchLabel's value.
const WatchLabelValue = "true"

// ReferencesSelector selects, on the API server, the Secrets and ConfigMaps the references
// cache lists and watches: only those carrying WatchLabel.
func ReferencesSelector() labels.Selector {
	return labels.SelectorFromSet(labels.Set{WatchLabel: WatchLabelValue})
}

// NewReferences starts, with the manager, a metadata-only cache over namespaces (all when
// empty) of the Secrets and ConfigMaps labelled WatchLabel that keeps of each object only its
// identity: reconcilers watch user-named Secrets and ConfigMaps through it and read them
// through the API reader (see Versioned).
func NewReferences(mgr ctrl.Manager, namespaces map[string]cache.Config) (cache.Cache, error) {
	c, err := cache.New(mgr.GetConfig(), cache.Options{
		Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(), HTTPClient: mgr.GetHTTPClient(),
		DefaultNamespaces: namespaces, DefaultTransform: keepIdentity, DefaultLabelSelector: ReferencesSelector(),
	})
	if err != nil {
		return nil, err
	}
	return c, mgr.Add(c)
}

// Metadata is an empty metadata-only object of a core kind (Secret, ConfigMap), for a watch
// through the references cache.
func Metadata(kind string) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: kind}}
}

// keepIdentity drops everything of a metadata object but what names it and its version.
func keepIdentity(obj any) (any, error) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok { // a tombstone (toolscache.DeletedFinalStateUnknown) and anything else pass as they are
		return obj, nil
	}
	return &metav1.PartialObjectMetadata{TypeMeta: m.TypeMeta, ObjectMeta: metav1.ObjectMeta{
		Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion,
	}}, nil
}

var _ toolscache.TransformFunc = keepIdentity

// UserObjects fills in, where unset, the API reader and the references cache (over all
// namespaces) through which a reconciler reads and watches the objects a user names.
func UserObjects(mgr ctrl.Manager, reader *client.Reader, refs *cache.Cache) error {
	if *reader == nil {
		*reader = mgr.GetAPIReader()
	}
	if *refs != nil {
		return nil
	}
	c, err := NewReferences(mgr, nil)
	*refs = c
	return err
}
