// Package v1alpha1 contains the API types of the redis.middleware-operator.io/v1alpha1 group:
// RedisCluster, RedisBackup and RedisBackupSchedule.
// +kubebuilder:object:generate=true
// +groupName=redis.middleware-operator.io
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of this package's types.
	GroupVersion = schema.GroupVersion{Group: "redis.middleware-operator.io", Version: "v1alpha1"}

	// SchemeBuilder registers this package's types with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(func(s *runtime.Scheme) error {
		s.AddKnownTypes(GroupVersion, &RedisCluster{}, &RedisClusterList{}, &RedisBackup{}, &RedisBackupList{}, &RedisBackupSchedule{}, &RedisBackupScheduleList{})
		metav1.AddToGroupVersion(s, GroupVersion)
		return nil
	})

	// AddToScheme adds this package's types to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
