package caching

import (
	"fmt"
	"testing"

	"github.com/middleware-operator/middleware-operator/internal/objectlabels"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

func TestOptionsSelectOnlyTheOperatorsObjects(t *testing.T) {
	opts := Options(cache.Options{})
	if opts.DefaultTransform == nil {
		t.Error("no transform: managedFields would be cached")
	}
	if len(opts.ByObject) != len(Owned()) {
		t.Fatalf("%d kinds selected, want %d", len(opts.ByObject), len(Owned()))
	}
	ours := labels.Set(objectlabels.ObjectLabels(objectlabels.AppServiceKind, "a"))
	redis := labels.Set(objectlabels.ObjectLabels(objectlabels.RedisClusterKind, "r"))
	users := labels.Set{"app": "mine"}
	for obj, by := range opts.ByObject {
		kind := fmt.Sprintf("%T", obj)
		if by.Label == nil || by.Label.Matches(users) {
			t.Errorf("%s: an object without the operator's label is cached (selector %v)", kind, by.Label)
			continue
		}
		if !by.Label.Matches(redis) {
			t.Errorf("%s: a RedisCluster's object is not cached (selector %v)", kind, by.Label)
		}
		_, isPod := obj.(*corev1.Pod)
		_, isClaim := obj.(*corev1.PersistentVolumeClaim)
		if want := !isPod && !isClaim; by.Label.Matches(ours) != want {
			t.Errorf("%s: an AppService's object cached: %v, want %v (only Redis reads pods and claims)", kind, by.Label.Matches(ours), want)
		}
	}
}

func TestKeepIdentityDropsAllButTheName(t *testing.T) {
	in := &metav1.PartialObjectMetadata{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns", UID: "u", ResourceVersion: "7",
			Labels: map[string]string{"a": "b"}, Annotations: map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{...}"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}},
	}
	got, err := keepIdentity(in)
	if err != nil {
		t.Fatal(err)
	}
	m := got.(*metav1.PartialObjectMetadata) //nolint:forcetypeassert // keepIdentity returns the same type
	if m.Name != "s" || m.Namespace != "ns" || m.UID != "u" || m.ResourceVersion != "7" || m.Kind != "Secret" {
		t.Errorf("identity lost: %+v", m)
	}
	if m.Labels != nil || m.Annotations != nil || m.ManagedFields != nil {
		t.Errorf("kept more than the identity: %+v", m.ObjectMeta)
	}
	if other, _ := keepIdentity("tombstone"); other != "tombstone" {
		t.Errorf("a non-metadata object was changed: %v", other)
	}
}
