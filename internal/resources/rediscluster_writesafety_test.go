package resources

import (
	"strings"
	"testing"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
)

// TestRedisWriteSafety: Strict writes min-replicas-to-write 1 and the lag after the user's
// redis.conf (so it wins), Default writes nothing and turns the setting off unless the
// user's redis.conf sets it.
func TestRedisWriteSafety(t *testing.T) {
	for name, tc := range map[string]struct {
		mode     redisv1alpha1.WriteSafety
		userConf string
		wantConf bool
		want     RedisWriteSafety
	}{
		"unset is Redis's behaviour":             {want: RedisWriteSafety{MaxLag: 10, Managed: true}},
		"Default":                                {mode: redisv1alpha1.WriteSafetyDefault, want: RedisWriteSafety{MaxLag: 10, Managed: true}},
		"Default leaves the user's line":         {mode: redisv1alpha1.WriteSafetyDefault, userConf: "min-replicas-to-write 2\n", want: RedisWriteSafety{}},
		"Default leaves the user's old name":     {userConf: "min-slaves-to-write 1\n", want: RedisWriteSafety{}},
		"Strict":                                 {mode: redisv1alpha1.WriteSafetyStrict, wantConf: true, want: RedisWriteSafety{MinReplicas: 1, MaxLag: RedisStrictMaxLag, Managed: true}},
		"Strict wins over the user's redis.conf": {mode: redisv1alpha1.WriteSafetyStrict, userConf: "min-replicas-to-write 0\nmin-replicas-max-lag 60\n", wantConf: true, want: RedisWriteSafety{MinReplicas: 1, MaxLag: RedisStrictMaxLag, Managed: true}},
	} {
		t.Run(name, func(t *testing.T) {
			rc := &redisv1alpha1.RedisCluster{Spec: redisv1alpha1.RedisClusterSpec{WriteSafety: tc.mode}}
			conf := RedisConfigMap(rc, tc.userConf).Data[RedisConfigFile]
			if got := RedisWriteSafetyOf(rc, conf); got != tc.want {
				t.Errorf("RedisWriteSafetyOf = %+v, want %+v", got, tc.want)
			}
			_, managed, _ := strings.Cut(conf, managedConfHeader)
			has := strings.Contains(managed, "min-replicas-to-write 1\nmin-replicas-max-lag 2\n")
			if has != tc.wantConf {
				t.Errorf("the managed redis.conf sets min-replicas: %v, want %v:\n%s", has, tc.wantConf, managed)
			}
			if last, _ := confDirective(conf, "min-replicas-to-write"); tc.wantConf && last != "1" {
				t.Errorf("the last min-replicas-to-write is %q, want 1", last)
			}
		})
	}
}
