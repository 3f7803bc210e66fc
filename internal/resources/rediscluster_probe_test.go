package resources_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/middleware-operator/middleware-operator/internal/resources"
	"github.com/middleware-operator/middleware-operator/tests/testenv"
	"github.com/middleware-operator/middleware-operator/tests/testredis"
)

// TestRedisReadinessProbeKeepsThePasswordOutOfEveryEnvironment runs the readiness probe
// against a real cluster node (it knows a second node, so the probe passes only if redis-cli
// logged in) through a redis-cli wrapper that records the environment and the arguments it
// execs the real redis-cli with: the password is in neither.
func TestRedisReadinessProbeKeepsThePasswordOutOfEveryEnvironment(t *testing.T) {
	const password = "probe-pw-5e1c0d"
	opts := goredis.Options{Password: password, Protocol: 2, DisableIdentity: true}
	// The nodes' own arguments hold the password: only redis-cli's are checked below.
	auth := []string{"--requirepass", password, "--masterauth", password}
	var nodes []*testredis.Server
	for range 2 {
		dir := t.TempDir()
		nodes = append(nodes, testredis.Start(t, dir, opts, append(testredis.ClusterArgs(t, dir), auth...)...))
	}
	host, port, _ := strings.Cut(nodes[1].Addr, ":")
	if err := nodes[0].Client.ClusterMeet(t.Context(), host, port).Err(); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, func(ctx context.Context) (bool, string) {
		info, err := nodes[0].Client.ClusterInfo(ctx).Result()
		return err == nil && strings.Contains(info, "cluster_known_nodes:2"), fmt.Sprintf("the nodes have not met: %v %s", err, info)
	})
	realCLI, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Fatalf("redis-cli is installed with redis-server: %v", err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "password"), []byte(password+"\n"), 0o400); err != nil {
		t.Fatal(err)
	}
	wrapper := "#!/bin/sh\ncat /proc/$$/environ > " + dir + "/env.$$\nprintf '%s\\n' \"$@\" > " + dir + "/args.$$\nexec " + realCLI + " \"$@\"\n"
	if err := os.WriteFile(filepath.Join(dir, "redis-cli"), []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	c := resources.RedisStatefulSet(redisCluster(nil), 6).Spec.Template.Spec.Containers[0]
	script := c.ReadinessProbe.Exec.Command[2]
	script = strings.ReplaceAll(script, resources.RedisPasswordFile, dir+"/password")
	_, port, _ = strings.Cut(nodes[0].Addr, ":")
	script = strings.ReplaceAll(script, "-p 6379", "-p "+port)
	probe := exec.Command(c.ReadinessProbe.Exec.Command[0], c.ReadinessProbe.Exec.Command[1], script)
	probe.Env = []string{"PATH=" + dir + ":/usr/bin:/bin", "POD_NAME=cache-0", "POD_IP=127.0.0.1"}
	if out, err := probe.CombinedOutput(); err != nil {
		t.Fatalf("the probe fails against a node in a cluster: %v: %s", err, out)
	}
	runs := 0
	for _, kind := range []string{"env", "args"} {
		files, _ := filepath.Glob(filepath.Join(dir, kind+".*"))
		if kind == "env" {
			runs = len(files)
		}
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(data), password) {
				t.Errorf("the password is in the %s redis-cli ran with (%s)", map[string]string{"env": "environment", "args": "arguments"}[kind], f)
			}
		}
	}
	if runs != 2 {
		t.Errorf("redis-cli ran %d times, want 2 (CLUSTER INFO and INFO replication): the check above proved nothing", runs)
	}
}
