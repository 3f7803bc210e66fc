package resources_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/resources"
)

// TestRedisPodsMountNoTokenAndWriteOnlyTheirVolumes: the pods of a RedisCluster mount no
// ServiceAccount token (neither Redis nor the exporter calls the API server), and every
// container runs with a read-only root file system, without privilege escalation or
// capabilities. What stays writable is the data volume and the in-memory emptyDir the
// start script writes the password lines to; every other volume is a Secret or ConfigMap,
// which the kubelet mounts read-only. The local cluster runs pods as processes and enforces
// none of this: the fields are what is checked.
func TestRedisPodsMountNoTokenAndWriteOnlyTheirVolumes(t *testing.T) {
	cases := map[string]func(*redisv1alpha1.RedisCluster){
		"default": func(*redisv1alpha1.RedisCluster) {},
		"exporter, TLS with client certificates, ACL users": func(rc *redisv1alpha1.RedisCluster) {
			rc.Spec.Pod[0].MonitorImage = "oliver006/redis_exporter:v1.62.0"
			rc.Spec.TLS = &redisv1alpha1.TLSSpec{Enabled: true, RequireClientCertificates: true}
			rc.Spec.ACL = &redisv1alpha1.ACLSpec{Enabled: true, Users: []redisv1alpha1.ACLUser{
				{Name: "reader", Rules: "~* +@read", PasswordSecret: redisv1alpha1.SecretKeyRef{Name: "reader-pw"}},
			}}
		},
		"hostPath data": func(rc *redisv1alpha1.RedisCluster) {
			rc.Spec.Pod[0].Volumes = &redisv1alpha1.Volumes{Type: "hostPath", AllowHostPath: true}
		},
		"nfs data": func(rc *redisv1alpha1.RedisCluster) {
			rc.Spec.Pod[0].Volumes = &redisv1alpha1.Volumes{Type: "nfs", PersistentVolumeClaimName: "shared"}
		},
	}
	for name, edit := range cases {
		t.Run(name, func(t *testing.T) {
			rc := redisCluster(nil)
			edit(rc)
			spec := resources.RedisStatefulSet(rc, 6).Spec.Template.Spec
			if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
				t.Errorf("automountServiceAccountToken %v, want false", spec.AutomountServiceAccountToken)
			}
			volumes := map[string]corev1.Volume{}
			for _, v := range spec.Volumes {
				volumes[v.Name] = v
			}
			for _, c := range spec.Containers {
				s := c.SecurityContext
				if s == nil || !ptr.Deref(s.ReadOnlyRootFilesystem, false) || ptr.Deref(s.AllowPrivilegeEscalation, true) ||
					s.Capabilities == nil || len(s.Capabilities.Drop) != 1 || s.Capabilities.Drop[0] != "ALL" || len(s.Capabilities.Add) != 0 {
					t.Errorf("container %s: security context %+v, want a read-only root file system, no escalation, every capability dropped", c.Name, s)
				}
				for _, m := range c.VolumeMounts {
					v, ok := volumes[m.Name]
					switch {
					case m.ReadOnly || (ok && (v.Secret != nil || v.ConfigMap != nil || v.Projected != nil)):
					case c.Name == resources.RedisContainer && m.Name == resources.RedisDataVolume && m.MountPath == resources.RedisDataDir:
					case c.Name == resources.RedisContainer && m.Name == resources.RedisAuthVolume && m.MountPath == resources.RedisAuthDir &&
						ok && v.EmptyDir != nil && v.EmptyDir.Medium == corev1.StorageMediumMemory:
					default:
						t.Errorf("container %s writes to %s (volume %s, %+v): only the data volume and the in-memory auth directory may be writable",
							c.Name, m.MountPath, m.Name, v.VolumeSource)
					}
				}
			}
		})
	}
}
