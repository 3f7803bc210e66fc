package resources

import (
	"k8s.io/apimachinery/pkg/api/resource"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
)

// RedisDefaultVolumeSize is each pod's claim size when spec.pod[0].volumes.size is not set.
const RedisDefaultVolumeSize = "1Gi"

// RedisVolumeSize is the size of each pod's claim (spec.pod[0].volumes.size, 1Gi by
// default); ok is false when the pods have no claims of their own (volume type hostPath or
// nfs).
func RedisVolumeSize(rc *redisv1alpha1.RedisCluster) (size resource.Quantity, ok bool) {
	pod := RedisPodSpec(rc)
	if redisVolumeType(pod) != "pvc" {
		return resource.Quantity{}, false
	}
	if pod.Volumes != nil && pod.Volumes.Size != nil {
		return *pod.Volumes.Size, true
	}
	return resource.MustParse(RedisDefaultVolumeSize), true
}
