package resources_test

import (
	"strings"
	"testing"

	"github.com/middleware-operator/middleware-operator/internal/resources"
)

// TestRedisConfProtectedMode: protected-mode is on and stays on whatever the user's
// ConfigMap says (the operator's settings come last and win), and it can refuse no one
// because both start scripts give the default user a password.
func TestRedisConfProtectedMode(t *testing.T) {
	conf := resources.RedisConf("protected-mode no\nmaxmemory 1gb", "")
	if last := strings.LastIndex(conf, "protected-mode "); last < 0 || !strings.HasPrefix(conf[last:], "protected-mode yes\n") {
		t.Errorf("the last protected-mode directive is not yes:\n%s", conf)
	}
	if !strings.Contains(resources.RedisStartScript, "requirepass") {
		t.Error("the start script without ACL users sets no requirepass: protected mode would refuse every other host")
	}
	if !strings.Contains(resources.RedisACLStartScript, `user default on ">`) {
		t.Error("the ACL start script gives the default user no password: protected mode would refuse every other host")
	}
}

// TestRedisConfFullCoverage: the nodes keep serving the covered slots by default, the
// user's redis.conf can ask for all-or-nothing, and what the nodes get is read back from the
// generated file.
func TestRedisConfFullCoverage(t *testing.T) {
	for _, tc := range []struct{ userConf, want string }{
		{"", "no"},
		{"maxmemory 1gb", "no"},
		{"cluster-require-full-coverage yes", "yes"},
		{"Cluster-Require-Full-Coverage YES", "yes"},
		{"cluster-require-full-coverage yes\ncluster-require-full-coverage no", "no"},
		{"cluster-require-full-coverage maybe", "no"},
	} {
		conf := resources.RedisConf(tc.userConf, "")
		if got := resources.RedisFullCoverageOf(conf); got != tc.want {
			t.Errorf("user conf %q: the nodes get cluster-require-full-coverage %q, want %q\n%s", tc.userConf, got, tc.want, conf)
		}
	}
}

// TestRedisConfSnapshots: the nodes take no periodic RDB snapshot (a restart loads the AOF)
// unless the user's redis.conf sets save points, which then stand.
func TestRedisConfSnapshots(t *testing.T) {
	if conf := resources.RedisConf("maxmemory 1gb", ""); !strings.Contains(conf, "\nsave \"\"\n") || !strings.Contains(conf, "\nappendonly yes\n") {
		t.Errorf("without the user's save points the nodes should keep the AOF and snapshot nothing:\n%s", conf)
	}
	if conf := resources.RedisConf("save 900 1", ""); strings.Contains(conf, `save ""`) || !strings.Contains(conf, "save 900 1\n") {
		t.Errorf("the user's save points are cleared:\n%s", conf)
	}
}

// TestRedisConfAOFSync: the AOF is synced once a second unless the user's redis.conf sets
// its own policy, which then stands (it comes first, and a later directive would win).
func TestRedisConfAOFSync(t *testing.T) {
	if conf := resources.RedisConf("maxmemory 1gb", ""); !strings.Contains(conf, "\nappendfsync everysec\n") {
		t.Errorf("without the user's policy the nodes should sync the AOF every second:\n%s", conf)
	}
	if conf := resources.RedisConf("appendfsync always", ""); strings.Contains(conf, "everysec") || !strings.Contains(conf, "appendfsync always\n") {
		t.Errorf("the user's appendfsync always is overridden:\n%s", conf)
	}
}
