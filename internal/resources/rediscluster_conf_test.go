package resources_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/resources"
	"github.com/middleware-operator/middleware-operator/tests/redistest"
	"github.com/middleware-operator/middleware-operator/tests/testenv"
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

// TestRedisConfReplicaSync: a master starts its replicas' full sync once all
// replicasPerMaster of them ask, not after repl-diskless-sync-delay; nothing without
// replicas; a user redis.conf's value stands.
func TestRedisConfReplicaSync(t *testing.T) {
	for _, tc := range []struct {
		name      string
		perMaster int32
		userConf  string
		want      string // the last repl-diskless-sync-max-replicas line, "" for none
	}{
		{"one replica each", 1, "", "repl-diskless-sync-max-replicas 1"},
		{"two replicas each", 2, "maxmemory 1gb", "repl-diskless-sync-max-replicas 2"},
		{"no replicas", 0, "", ""},
		{"the user's value", 2, "repl-diskless-sync-max-replicas 5", "repl-diskless-sync-max-replicas 5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := redistest.NewCluster("ns", "rc", 3*(1+tc.perMaster))
			rc.Spec.ReplicasPerMaster = &tc.perMaster
			conf := resources.RedisConfigMap(rc, tc.userConf).Data[resources.RedisConfigFile]
			got := ""
			for line := range strings.Lines(conf) {
				if strings.HasPrefix(line, "repl-diskless-sync-max-replicas ") {
					got = strings.TrimSpace(line)
				}
			}
			if got != tc.want {
				t.Errorf("repl-diskless-sync-max-replicas: got %q, want %q\n%s", got, tc.want, conf)
			}
		})
	}
}

// openingUserConf is a user redis.conf that tries to open what RedisLockdownConf closes,
// in the spellings Redis accepts (any case, quoted, local for loopback clients only).
const openingUserConf = "enable-debug-command yes\nENABLE-MODULE-COMMAND \"yes\"\nenable-protected-configs local\nmaxmemory 100mb\n"

// TestRedisConfLockdownComesLast: whatever the user's redis.conf says, and with TLS, ACL
// users or memory settings, the generated redis.conf ends with enable-debug-command,
// enable-module-command and enable-protected-configs set to no, so Redis, which keeps the
// last value of a directive, runs with them closed.
func TestRedisConfLockdownComesLast(t *testing.T) {
	want := []string{"enable-debug-command no", "enable-module-command no", "enable-protected-configs no"}
	for name, tc := range map[string]struct {
		userConf string
		edit     func(*redisv1alpha1.RedisCluster)
	}{
		"no user configuration":                {},
		"a user configuration that opens them": {userConf: openingUserConf},
		"with TLS and ACL users": {userConf: openingUserConf, edit: func(rc *redisv1alpha1.RedisCluster) {
			rc.Spec.TLS = &redisv1alpha1.TLSSpec{Enabled: true}
			rc.Spec.ACL = &redisv1alpha1.ACLSpec{Enabled: true}
		}},
		"with a memory limit": {userConf: "enable-debug-command yes", edit: func(rc *redisv1alpha1.RedisCluster) {
			rc.Spec.Pod[0].Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}
		}},
	} {
		t.Run(name, func(t *testing.T) {
			rc := redisCluster(nil)
			if tc.edit != nil {
				tc.edit(rc)
			}
			conf := resources.RedisConfigMap(rc, tc.userConf).Data[resources.RedisConfigFile]
			var directives []string
			for line := range strings.Lines(conf) {
				if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
					directives = append(directives, line)
				}
			}
			if len(directives) < 3 || !slices.Equal(directives[len(directives)-3:], want) {
				t.Errorf("the generated redis.conf does not end with %q:\n%s", want, conf)
			}
		})
	}
}

// TestRedisConfLockdownOnARealServer runs redis-server with the generated redis.conf of a
// cluster whose user configuration opens DEBUG, MODULE and the protected configs: each is
// refused, even from loopback, as a client or the operator would meet it.
func TestRedisConfLockdownOnARealServer(t *testing.T) {
	real := redisServerBinary(t)
	dir, ports := t.TempDir(), testenv.FreePorts(t, 2)
	port := strconv.Itoa(ports[0])
	conf := resources.RedisConfigMap(redisCluster(nil), openingUserConf).Data[resources.RedisConfigFile]
	// A cluster bus port of its own: left to Redis it is port + 10000, in the kernel's
	// ephemeral range, where another test's connection may hold it (a CI run lost it so).
	conf = strings.Replace(conf, "\nport 6379\n", "\nport "+port+"\ncluster-port "+strconv.Itoa(ports[1])+"\n", 1)
	conf = strings.Replace(conf, "\ndir /data\n", "\ndir "+dir+"\n", 1)
	if err := os.WriteFile(filepath.Join(dir, "redis.conf"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(real, filepath.Join(dir, "redis.conf"))
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	c := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:" + port, Protocol: 2, MaxRetries: -1, DisableIdentity: true})
	t.Cleanup(func() { _ = c.Close() })
	testenv.Eventually(t, 10*time.Second, func(ctx context.Context) (bool, string) {
		err := c.Ping(ctx).Err()
		return err == nil, fmt.Sprintf("redis-server with the generated redis.conf does not answer: %v", err)
	})
	redistest.CheckLockedDown(t, c, "redis-server with the generated redis.conf")
	// A setting of the lockdown cannot be turned back on at run time either.
	if err := c.Do(t.Context(), "CONFIG", "SET", "enable-debug-command", "yes").Err(); err == nil || !strings.Contains(err.Error(), "immutable config") {
		t.Errorf("CONFIG SET enable-debug-command yes: %v, want a refusal saying %q", err, "immutable config")
	}
}
