// Package v1 contains the API types of the apps.middleware-operator.io/v1 group: AppService
// and CloudManager.
// +kubebuilder:object:generate=true
// +groupName=apps.middleware-operator.io
package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of this package's types.
	GroupVersion = schema.GroupVersion{Group: "apps.middleware-operator.io", Version: "v1"}

	// SchemeBuilder registers this package's types with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(func(s *runtime.Scheme) error {
		s.AddKnownTypes(GroupVersion, knownTypes...)
		metav1.AddToGroupVersion(s, GroupVersion)
		return nil
	})

	// AddToScheme adds this package's types to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme

	knownTypes []runtime.Object
)

// register adds types to the ones AddToScheme registers; each type's file calls it.
func register(objs ...runtime.Object) { knownTypes = append(knownTypes, objs...) }
