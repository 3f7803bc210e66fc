package resources_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/resources"
)

// memoryCluster is a cluster whose redis container has the memory limit limit ("" for
// none) and spec.memory mem.
func memoryCluster(limit string, mem *redisv1alpha1.MemorySpec) *redisv1alpha1.RedisCluster {
	rc := redisCluster(nil)
	rc.Spec.Memory = mem
	if limit != "" {
		rc.Spec.Pod = []redisv1alpha1.PodSpec{{Resources: corev1.ResourceRequirements{
			Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(limit)},
		}}}
	}
	return rc
}

func TestRedisMemoryConf(t *testing.T) {
	mi := int64(1 << 20)
	for name, tc := range map[string]struct {
		rc       *redisv1alpha1.RedisCluster
		userConf string
		want     resources.RedisMemory
		// lines must be in the generated redis.conf, absent must not.
		lines, absent []string
	}{
		"no limit, no spec: no maxmemory, noeviction": {
			rc:     memoryCluster("", nil),
			want:   resources.RedisMemory{Policy: "noeviction", Source: redisv1alpha1.MaxMemoryNone, Known: true},
			lines:  []string{"maxmemory-policy noeviction", "oom-score-adj yes"},
			absent: []string{"maxmemory "},
		},
		"a limit: the default share": {
			rc:    memoryCluster("1000Mi", nil),
			want:  resources.RedisMemory{MaxMemory: 450 * mi, Policy: "noeviction", Source: redisv1alpha1.MaxMemoryFromLimit, Known: true},
			lines: []string{"maxmemory 471859200", "maxmemory-policy noeviction"},
		},
		"a limit and a share": {
			rc:    memoryCluster("1000Mi", &redisv1alpha1.MemorySpec{MaxMemoryPercent: ptr.To[int32](80), Policy: "allkeys-lru"}),
			want:  resources.RedisMemory{MaxMemory: 800 * mi, Policy: "allkeys-lru", Source: redisv1alpha1.MaxMemoryFromLimit, Known: true},
			lines: []string{"maxmemory 838860800", "maxmemory-policy allkeys-lru"},
		},
		"a value wins over the limit": {
			rc:    memoryCluster("1Gi", &redisv1alpha1.MemorySpec{MaxMemory: ptr.To(resource.MustParse("300Mi"))}),
			want:  resources.RedisMemory{MaxMemory: 300 * mi, Policy: "noeviction", Source: redisv1alpha1.MaxMemoryFromSpec, Known: true},
			lines: []string{"maxmemory 314572800"},
		},
		"a value without a limit": {
			rc:   memoryCluster("", &redisv1alpha1.MemorySpec{MaxMemory: ptr.To(resource.MustParse("64Mi"))}),
			want: resources.RedisMemory{MaxMemory: 64 * mi, Policy: "noeviction", Source: redisv1alpha1.MaxMemoryFromSpec, Known: true},
		},
		"the user's redis.conf wins": {
			rc:       memoryCluster("1Gi", &redisv1alpha1.MemorySpec{MaxMemoryPercent: ptr.To[int32](60)}),
			userConf: "maxmemory 100mb\nMaxmemory-Policy ALLKEYS-LFU\n",
			want:     resources.RedisMemory{MaxMemory: 100 * mi, Policy: "allkeys-lfu", Source: redisv1alpha1.MaxMemoryFromUserConfig, Known: true},
			absent:   []string{"maxmemory 6", "maxmemory-policy noeviction"},
		},
		"the user's maxmemory only: the spec's policy": {
			rc:       memoryCluster("1Gi", &redisv1alpha1.MemorySpec{Policy: "volatile-ttl"}),
			userConf: "maxmemory 2gb",
			want:     resources.RedisMemory{MaxMemory: 2 << 30, Policy: "volatile-ttl", Source: redisv1alpha1.MaxMemoryFromUserConfig, Known: true},
			lines:    []string{"maxmemory-policy volatile-ttl"},
		},
		"an unreadable user maxmemory is not acted on": {
			rc:       memoryCluster("1Gi", nil),
			userConf: "maxmemory lots",
			want:     resources.RedisMemory{Policy: "noeviction", Source: redisv1alpha1.MaxMemoryFromUserConfig},
		},
	} {
		t.Run(name, func(t *testing.T) {
			conf := resources.RedisConfigMap(tc.rc, tc.userConf).Data[resources.RedisConfigFile]
			if got := resources.RedisMemoryOf(tc.rc, conf); got != tc.want {
				t.Errorf("resources.RedisMemoryOf = %+v, want %+v\n%s", got, tc.want, conf)
			}
			for _, l := range tc.lines {
				if !strings.Contains(conf, "\n"+l+"\n") {
					t.Errorf("redis.conf lacks %q:\n%s", l, conf)
				}
			}
			for _, l := range tc.absent {
				if strings.Contains(conf, "\n"+l) {
					t.Errorf("redis.conf has %q:\n%s", l, conf)
				}
			}
		})
	}
}

func TestRedisMemoryBytes(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "1024": 1024, "1k": 1000, "1KB": 1024, "3mb": 3 << 20, "2m": 2000000, "1gb": 1 << 30, "5G": 5000000000, "7b": 7} {
		if got, err := resources.RedisMemoryBytes(in); err != nil || got != want {
			t.Errorf("resources.RedisMemoryBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-1", "lots", "1tb", "1.5gb"} {
		if _, err := resources.RedisMemoryBytes(in); err == nil || !strings.Contains(err.Error(), "700mb") {
			t.Errorf("resources.RedisMemoryBytes(%q): want an error naming an example, got %v", in, err)
		}
	}
}
