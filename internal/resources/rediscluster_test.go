package resources_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/resources"
)

func redisCluster(volumes *redisv1alpha1.Volumes) *redisv1alpha1.RedisCluster {
	return &redisv1alpha1.RedisCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: "ns"},
		Spec: redisv1alpha1.RedisClusterSpec{
			Replicas: 6,
			Pod:      []redisv1alpha1.PodSpec{{Volumes: volumes}},
		},
	}
}

func TestRedisStatefulSetRedisContainer(t *testing.T) {
	cases := map[string]struct {
		volumes        *redisv1alpha1.Volumes
		dataSubPathExp string
		dataVolume     bool // the data volume is in the pod template, not a claim template
	}{
		"pvc (default)": {},
		"hostPath":      {volumes: &redisv1alpha1.Volumes{Type: "hostPath"}, dataSubPathExp: "$(POD_NAME)", dataVolume: true},
		"nfs":           {volumes: &redisv1alpha1.Volumes{Type: "nfs", PersistentVolumeClaimName: "shared"}, dataSubPathExp: "$(POD_NAME)", dataVolume: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			sts := resources.RedisStatefulSet(redisCluster(tc.volumes), 6)
			spec := sts.Spec.Template.Spec
			c := spec.Containers[0]
			if c.Name != resources.RedisContainer {
				t.Fatalf("first container %q, want %q", c.Name, resources.RedisContainer)
			}
			if want := []string{"sh", "-c", resources.RedisStartScript, "redis-server"}; !reflect.DeepEqual(c.Command, want) {
				t.Errorf("command %q, want %q", c.Command, want)
			}
			wantArgs := []string{
				"/etc/redis/redis.conf",
				"--cluster-announce-ip", "$(POD_IP)",
				"--requirepass", "$(REDIS_PASSWORD)",
				"--masterauth", "$(REDIS_PASSWORD)",
			}
			if !reflect.DeepEqual(c.Args, wantArgs) {
				t.Errorf("args %q, want %q", c.Args, wantArgs)
			}
			wantMounts := []corev1.VolumeMount{
				{Name: "config", MountPath: "/etc/redis"},
				{Name: "data", MountPath: "/data", SubPathExpr: tc.dataSubPathExp},
				{Name: "members", MountPath: "/etc/redis-members", ReadOnly: true},
			}
			if !reflect.DeepEqual(c.VolumeMounts, wantMounts) {
				t.Errorf("mounts %+v, want %+v", c.VolumeMounts, wantMounts)
			}
			if !hasEnvFieldRef(c.Env, "POD_NAME", "metadata.name") {
				t.Errorf("env %+v lacks POD_NAME from metadata.name, which the start script reads", c.Env)
			}

			volumes := map[string]corev1.Volume{}
			for _, v := range spec.Volumes {
				volumes[v.Name] = v
			}
			wantMembers := corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: "cache-members"}, Optional: ptr.To(true),
			}}
			if got := volumes["members"].VolumeSource; !reflect.DeepEqual(got, wantMembers) {
				t.Errorf("members volume %+v, want %+v", got, wantMembers)
			}
			if got := volumes["config"].ConfigMap; got == nil || got.Name != "cache-config" {
				t.Errorf("config volume %+v, want ConfigMap cache-config", volumes["config"])
			}
			if _, ok := volumes["data"]; ok != tc.dataVolume {
				t.Errorf("data volume in the template: %v, want %v", ok, tc.dataVolume)
			}
			if claims := len(sts.Spec.VolumeClaimTemplates); (claims == 1) == tc.dataVolume {
				t.Errorf("%d volume claim templates with data volume in the template %v", claims, tc.dataVolume)
			}
		})
	}
}

func hasEnvFieldRef(env []corev1.EnvVar, name, path string) bool {
	for _, e := range env {
		if e.Name == name && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == path {
			return true
		}
	}
	return false
}

func TestRedisStartScript(t *testing.T) {
	// Behaviour is covered by internal/redispods, which runs the script; here, what the kubelet
	// and the operator rely on.
	for _, want := range []string{
		`member="/etc/redis-members/$POD_NAME"`,
		`[ ! -s /data/nodes.conf ]`,
		"has no cluster state",
		`exec redis-server "$@"`,
	} {
		if script := resources.RedisStartScript; !strings.Contains(script, want) {
			t.Errorf("RedisStartScript lacks %q:\n%s", want, resources.RedisStartScript)
		}
	}
	// The kubelet expands $(VAR) and turns $$ into $ in a command.
	for _, bad := range []string{"$(", "$$"} {
		if script := resources.RedisStartScript; strings.Contains(script, bad) {
			t.Errorf("RedisStartScript contains %q, which the kubelet would expand", bad)
		}
	}
}

func TestRedisMembersConfigMap(t *testing.T) {
	rc := redisCluster(nil)
	members := map[string]string{"cache-0": "0123abcd", "cache-1": "4567ef01"}
	cm := resources.RedisMembersConfigMap(rc, members)
	if cm.Name != "cache-members" || cm.Name != resources.RedisMembersConfigMapName(rc) || cm.Namespace != "ns" {
		t.Errorf("name %s/%s, want ns/cache-members", cm.Namespace, cm.Name)
	}
	if !reflect.DeepEqual(cm.Data, members) {
		t.Errorf("data %v, want %v", cm.Data, members)
	}
	if want := resources.RedisConfigMap(rc, "").Labels; !reflect.DeepEqual(cm.Labels, want) {
		t.Errorf("labels %v, want %v (those of the other children)", cm.Labels, want)
	}
}

// TestRedisReadinessScript runs the probe with sh against a stand-in redis-cli that prints
// what a real one prints for each state of a node.
func TestRedisReadinessScript(t *testing.T) {
	cases := map[string]struct {
		cluster, replication string
		ready                bool
	}{
		"a master in a cluster":               {"cluster_state:ok\r\ncluster_known_nodes:6\r\n", "# Replication\r\nrole:master\r\nconnected_slaves:1\r\n", true},
		"a fresh node that knows only itself": {"cluster_state:fail\r\ncluster_known_nodes:1\r\n", "role:master\r\n", false},
		"a replica with its link up":          {"cluster_known_nodes:12\r\n", "role:slave\r\nmaster_link_status:up\r\nmaster_sync_in_progress:0\r\n", true},
		"a replica in its first full sync":    {"cluster_known_nodes:6\r\n", "role:slave\r\nmaster_link_status:down\r\nmaster_sync_in_progress:1\r\n", false},
		"a replica whose master is gone":      {"cluster_known_nodes:6\r\n", "role:slave\r\nmaster_link_status:down\r\nmaster_sync_in_progress:0\r\n", false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			fake := "#!/bin/sh\n[ \"$REDISCLI_AUTH\" = secret ] || { echo NOAUTH; exit 1; }\n" +
				"case \"$*\" in *cluster*) printf '" + tc.cluster + "';; *replication*) printf '" + tc.replication + "';; esac\n"
			if err := os.WriteFile(filepath.Join(dir, "redis-cli"), []byte(fake), 0o755); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("sh", "-c", resources.RedisReadinessScript)
			cmd.Env = []string{"PATH=" + dir + ":/usr/bin:/bin", "REDIS_PASSWORD=secret"}
			out, err := cmd.CombinedOutput()
			if (err == nil) != tc.ready {
				t.Errorf("ready = %v (%v, %s), want %v", err == nil, err, out, tc.ready)
			}
		})
	}
}
