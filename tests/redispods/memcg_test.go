package redispods

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/middleware-operator/middleware-operator/internal/resources"
)

// memoryLimit is a small limit for the fill tests: a writer fills it in a second.
const memoryLimit = 64 << 20

// limited starts a Kubelet whose pod's redis container has the memory limit memoryLimit and
// the redis.conf conf; it skips the test where memory cgroups are unavailable.
func limited(t *testing.T, conf string) (client.Client, *redis.Client) {
	t.Helper()
	if _, err := newMemoryCgroups(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("memory cgroups are unavailable here, and CI must show memory limits hold: %v", err)
		}
		t.Skipf("memory cgroups are unavailable here: %v", err)
	}
	res := corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: *resource.NewQuantity(memoryLimit, resource.BinarySI)}}
	_, c, _ := startKubeletWith(t, res, "port 6379\ndir /data\nappendonly no\nsave \"\"\n"+conf)
	rdb := redis.NewClient(&redis.Options{Addr: testIP + ":6379", Password: testPassword, MaxRetries: -1, DialTimeout: 500 * time.Millisecond})
	t.Cleanup(func() { _ = rdb.Close() })
	if !eventually(15*time.Second, func() bool { return ping(rdb) == nil }) {
		t.Fatalf("no PING answer: %v", ping(rdb))
	}
	return c, rdb
}

// fill writes 1 MiB values until a write fails or 4 times the limit is written; it returns
// how many were acknowledged and the error that stopped it.
func fill(rdb *redis.Client) (int, error) {
	value := strings.Repeat("x", 1<<20)
	for i := range 4 * memoryLimit >> 20 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := rdb.Set(ctx, fmt.Sprintf("k%d", i), value, 0).Err()
		cancel()
		if err != nil {
			return i, err
		}
	}
	return 4 * memoryLimit >> 20, nil
}

// redisStatus is the pod's redis container status.
func redisStatus(t *testing.T, c client.Client) corev1.ContainerStatus {
	t.Helper()
	pod := &corev1.Pod{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: testNamespace, Name: testPod}, pod); err != nil {
		t.Fatal(err)
	}
	for _, s := range pod.Status.ContainerStatuses {
		if s.Name == resources.RedisContainer {
			return s
		}
	}
	return corev1.ContainerStatus{}
}

// TestKubeletKillsAContainerOverItsMemoryLimit shows the fault maxmemory prevents: without
// it, a writer fills the node until the kernel kills it at its container's memory limit,
// and the kubelet reports OOMKilled in the container's last state and restarts it.
func TestKubeletKillsAContainerOverItsMemoryLimit(t *testing.T) {
	c, rdb := limited(t, "")
	written, err := fill(rdb)
	t.Logf("the writer stopped after %d MiB acknowledged: %v", written, err)
	if err == nil || strings.Contains(err.Error(), "OOM") {
		t.Fatalf("the writer stopped with %v, want the node killed", err)
	}
	var status corev1.ContainerStatus
	if !eventually(15*time.Second, func() bool { status = redisStatus(t, c); return status.RestartCount == 1 }) {
		t.Fatalf("container status %+v, want a restart", status)
	}
	last := status.LastTerminationState.Terminated
	if last == nil || last.Reason != "OOMKilled" || last.ExitCode != 137 {
		t.Errorf("last state %+v, want OOMKilled with exit code 137", status.LastTerminationState)
	}
	if !eventually(15*time.Second, func() bool { return ping(rdb) == nil }) {
		t.Errorf("the node did not come back: %v", ping(rdb))
	}
}

// TestKubeletMaxmemoryKeepsTheContainerAlive: the same writer against a node with the
// maxmemory the operator sets (45% of the limit, noeviction) gets OOM errors from Redis;
// the container is never killed.
func TestKubeletMaxmemoryKeepsTheContainerAlive(t *testing.T) {
	conf := fmt.Sprintf("maxmemory %d\nmaxmemory-policy noeviction\n", memoryLimit*resources.DefaultMaxMemoryPercent/100)
	c, rdb := limited(t, conf)
	run, err := rdb.Info(context.Background(), "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	written, err := fill(rdb)
	t.Logf("the writer stopped after %d MiB acknowledged: %v", written, err)
	if err == nil || !strings.Contains(err.Error(), "OOM command not allowed") {
		t.Fatalf("the writer stopped with %v, want Redis's OOM error", err)
	}
	for i := range written { // every acknowledged write reads back
		if n, err := rdb.StrLen(context.Background(), fmt.Sprintf("k%d", i)).Result(); err != nil || n != 1<<20 {
			t.Fatalf("key k%d: %d bytes, %v", i, n, err)
		}
	}
	time.Sleep(time.Second)
	after, err := rdb.Info(context.Background(), "server").Result()
	if err != nil || parseRunID(after) != parseRunID(run) {
		t.Errorf("the node restarted (run_id %s, then %s, %v)", parseRunID(run), parseRunID(after), err)
	}
	if s := redisStatus(t, c); s.RestartCount != 0 || s.LastTerminationState.Terminated != nil {
		t.Errorf("container status %+v, want no restart", s)
	}
}

func parseRunID(info string) string {
	for line := range strings.Lines(info) {
		if id, ok := strings.CutPrefix(strings.TrimSpace(line), "run_id:"); ok {
			return id
		}
	}
	return ""
}
