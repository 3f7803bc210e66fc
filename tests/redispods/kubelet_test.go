package redispods

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/resources"
)

const (
	testNamespace = "ns"
	testPod       = "kt-0"
	testIP        = "127.1.200.7"
	testPassword  = "kubelet-test-password"
)

// startKubelet runs a Kubelet over a fake API holding one Running pod built from the
// operator's StatefulSet template, until the test ends.
func startKubelet(t *testing.T) (*Kubelet, client.Client, *redisv1alpha1.RedisCluster) {
	t.Helper()
	return startKubeletWith(t, corev1.ResourceRequirements{}, "port 6379\ncluster-enabled yes\n"+
		"cluster-config-file nodes.conf\ndir /data\nappendonly no\n")
}

// startKubeletWith is startKubelet with the redis container's resources and the generated
// redis.conf conf.
func startKubeletWith(t *testing.T, res corev1.ResourceRequirements, conf string) (*Kubelet, client.Client, *redisv1alpha1.RedisCluster) {
	t.Helper()
	return startKubeletFor(t, res, conf, nil)
}

// startKubeletFor is startKubeletWith with rc changed by edit, and objects besides the pod,
// its redis.conf and its password Secret.
func startKubeletFor(t *testing.T, res corev1.ResourceRequirements, conf string, edit func(*redisv1alpha1.RedisCluster) []client.Object) (*Kubelet, client.Client, *redisv1alpha1.RedisCluster) {
	t.Helper()
	for _, bin := range []string{"redis-server", "unshare", "mount"} {
		if _, err := exec.LookPath(bin); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s is needed by this test (make setup installs it): %v", bin, err)
			}
			t.Skipf("%s not found: %v", bin, err)
		}
	}
	rc := &redisv1alpha1.RedisCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "kt", Namespace: testNamespace},
		Spec:       redisv1alpha1.RedisClusterSpec{Replicas: 6, Pod: []redisv1alpha1.PodSpec{{Resources: res}}},
	}
	var objects []client.Object
	if edit != nil {
		objects = edit(rc)
	}
	template := resources.RedisStatefulSet(rc, 1).Spec.Template
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: testPod, Namespace: testNamespace, UID: "uid-kt-0",
			Labels: template.Labels, Annotations: template.Annotations,
		},
		Spec: *template.Spec.DeepCopy(),
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: testIP,
			ContainerStatuses: []corev1.ContainerStatus{{Name: resources.RedisContainer, Ready: true}}},
	}
	// The StatefulSet controller adds the claim of the volumeClaimTemplate.
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: resources.RedisDataVolume, VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: resources.RedisDataVolume + "-" + testPod},
	}})
	config := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: resources.RedisConfigMapName(rc), Namespace: testNamespace},
		Data:       map[string]string{resources.RedisConfigFile: conf},
	}
	c := fake.NewClientBuilder().WithObjects(append(objects, pod, config, resources.RedisPasswordSecret(rc, testPassword))...).
		WithStatusSubresource(&corev1.Pod{}).Build()

	k := New(c, t.TempDir(), t.Logf)
	k.Probes = true
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { k.Run(ctx); close(done) }()
	t.Cleanup(func() { // before the TempDir cleanup, which was registered first
		cancel()
		<-done
		if t.Failed() {
			t.Logf("log of %s:\n%s", testPod, k.Log(testNamespace, testPod))
		}
	})
	return k, c, rc
}

func ping(rdb *redis.Client) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return rdb.Ping(ctx).Err()
}

// eventually polls cond every 100ms until it holds or timeout passes.
func eventually(timeout time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

func TestKubeletRunsTheContainerSpec(t *testing.T) {
	k, _, _ := startKubelet(t)
	rdb := redis.NewClient(&redis.Options{Addr: testIP + ":6379", Password: testPassword, MaxRetries: -1, DialTimeout: 500 * time.Millisecond})
	defer func() { _ = rdb.Close() }()

	start := time.Now()
	if !eventually(15*time.Second, func() bool { return ping(rdb) == nil }) {
		t.Fatalf("no PING answer at %s with the password: %v", testIP, ping(rdb))
	}
	t.Logf("answered after %v", time.Since(start).Round(time.Millisecond))
	if addr := k.Addr(testNamespace, testPod); addr != testIP+":6379" {
		t.Errorf("Addr %q, want %s:6379", addr, testIP)
	}
	nodes := filepath.Join(k.DataDir(testNamespace, testPod), "nodes.conf")
	if !eventually(5*time.Second, func() bool { _, err := os.Stat(nodes); return err == nil }) {
		t.Errorf("%s did not appear: /data is not the pod's data directory", nodes)
	}
	if _, err := os.Stat(filepath.Join(k.podDir(testNamespace, testPod), resources.RedisMembersVolume)); err != nil {
		t.Errorf("optional members volume with no ConfigMap: %v, want an empty directory", err)
	}
}

func TestKubeletLoseDataOfAMemberWaitsForRelease(t *testing.T) {
	k, c, rc := startKubelet(t)
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: testIP + ":6379", Password: testPassword, MaxRetries: -1, DialTimeout: 500 * time.Millisecond})
	defer func() { _ = rdb.Close() }()
	if !eventually(15*time.Second, func() bool { return ping(rdb) == nil }) {
		t.Fatalf("no PING answer: %v", ping(rdb))
	}
	oldID, err := rdb.ClusterMyID(ctx).Result()
	if err != nil {
		t.Fatalf("CLUSTER MYID: %v", err)
	}

	// The operator records the pod as a member; the kubelet updates the volume.
	members := resources.RedisMembersConfigMap(rc, map[string]string{testPod: oldID})
	if err := c.Create(ctx, members); err != nil {
		t.Fatal(err)
	}
	memberFile := filepath.Join(k.podDir(testNamespace, testPod), resources.RedisMembersVolume, testPod)
	if !eventually(5*time.Second, func() bool { b, _ := os.ReadFile(memberFile); return string(b) == oldID }) {
		t.Fatalf("%s was not written from the members ConfigMap", memberFile)
	}

	lost := time.Now()
	if err := k.LoseData(testNamespace, testPod); err != nil {
		t.Fatalf("LoseData: %v", err)
	}
	if entries, err := os.ReadDir(k.DataDir(testNamespace, testPod)); err != nil || len(entries) != 0 {
		t.Fatalf("data directory after LoseData: %v entries, %v", len(entries), err)
	}
	// Restarted after RestartDelay, the container must not serve at the pod's address.
	const guard = "has no cluster state"
	for time.Since(lost) < RestartDelay+4*time.Second {
		if err := ping(rdb); err == nil {
			t.Fatalf("a recorded member with lost data answers %v after LoseData", time.Since(lost).Round(time.Millisecond))
		}
		time.Sleep(200 * time.Millisecond)
	}
	if log := k.Log(testNamespace, testPod); !strings.Contains(log, guard) || !strings.Contains(log, oldID) {
		t.Fatalf("log lacks the guard message %q with node id %s:\n%s", guard, oldID, log)
	}

	// The operator releases the pod: it starts as a fresh node.
	members.Data = map[string]string{}
	if err := c.Update(ctx, members); err != nil {
		t.Fatal(err)
	}
	released := time.Now()
	if !eventually(5*time.Second, func() bool { return ping(rdb) == nil }) {
		t.Fatalf("no PING answer 5s after the release: %v", ping(rdb))
	}
	t.Logf("answered %v after the release", time.Since(released).Round(time.Millisecond))
	newID, err := rdb.ClusterMyID(ctx).Result()
	if err != nil || newID == oldID {
		t.Errorf("node id after the release %q (%v), want a fresh one, not %s", newID, err, oldID)
	}
}

// TestKubeletRunsTheReadinessProbe: the pod's Ready condition follows the readiness probe of
// the spec the operator builds, run in the container's file system: not Ready while the
// node is alone (not in a cluster), Ready once it knows another node, not Ready once its
// container has crashed.
func TestKubeletRunsTheReadinessProbe(t *testing.T) {
	k, c, _ := startKubelet(t)
	ready := func() (corev1.ConditionStatus, string) {
		pod := &corev1.Pod{}
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: testNamespace, Name: testPod}, pod); err != nil {
			t.Fatal(err)
		}
		for _, cond := range pod.Status.Conditions {
			if cond.Type == corev1.PodReady {
				return cond.Status, cond.Message
			}
		}
		return "", ""
	}
	rdb := redis.NewClient(&redis.Options{Addr: testIP + ":6379", Password: testPassword})
	defer func() { _ = rdb.Close() }()
	if !eventually(15*time.Second, func() bool { return ping(rdb) == nil }) {
		t.Fatal("redis-server never answered")
	}
	time.Sleep(6 * time.Second) // one probe period (5 s) after the server answers
	if s, msg := ready(); s != corev1.ConditionFalse || !strings.Contains(msg, "[redis]") {
		t.Fatalf("a node alone, not in a cluster: Ready %q (%s), want False naming the redis container", s, msg)
	}
	// A node it is introduced to counts as known (in handshake) for the node timeout.
	if err := rdb.Do(context.Background(), "CLUSTER", "MEET", "127.1.200.8", "6379").Err(); err != nil {
		t.Fatal(err)
	}
	if !eventually(15*time.Second, func() bool { s, _ := ready(); return s == corev1.ConditionTrue }) {
		s, msg := ready()
		t.Fatalf("a node that knows another: Ready %q (%s), want True", s, msg)
	}
	if err := k.Crash(testNamespace, testPod); err != nil {
		t.Fatal(err)
	}
	if !eventually(RestartDelay, func() bool { s, _ := ready(); return s == corev1.ConditionFalse }) {
		t.Fatal("the pod stayed Ready after its container crashed")
	}
}

// TestKubeletHoldsADeletedPodUntilItsProcessStopped: as with a real kubelet, a deleted
// pod's object goes away only after its process stopped, so no successor can be given its
// address while the old process still answers there.
func TestKubeletHoldsADeletedPodUntilItsProcessStopped(t *testing.T) {
	_, c, _ := startKubelet(t)
	rdb := redis.NewClient(&redis.Options{Addr: testIP + ":6379", Password: testPassword, MaxRetries: -1, DialTimeout: 500 * time.Millisecond})
	defer func() { _ = rdb.Close() }()
	if !eventually(15*time.Second, func() bool { return ping(rdb) == nil }) {
		t.Fatalf("no PING answer at %s: %v", testIP, ping(rdb))
	}
	pod := &corev1.Pod{}
	key := client.ObjectKey{Namespace: testNamespace, Name: testPod}
	if err := c.Get(t.Context(), key, pod); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(pod.Finalizers, Finalizer) {
		t.Fatalf("finalizers %v of a running pod, want %s", pod.Finalizers, Finalizer)
	}
	if err := c.Delete(t.Context(), pod); err != nil {
		t.Fatal(err)
	}
	if !eventually(15*time.Second, func() bool { return apierrors.IsNotFound(c.Get(t.Context(), key, &corev1.Pod{})) }) {
		t.Fatal("the deleted pod was never released")
	}
	if err := ping(rdb); err == nil {
		t.Error("the pod's object is gone while its redis-server still answers")
	}
}

// TestKubeletMountsProjectedSecrets runs a pod with ACL users, one of them from
// spec.acl.users: the users' passwords come from a projected volume of their Secrets, and
// each user logs in with its own.
func TestKubeletMountsProjectedSecrets(t *testing.T) {
	k, c, _ := startKubeletFor(t, corev1.ResourceRequirements{}, "port 6379\ndir /data\nappendonly no\n", func(rc *redisv1alpha1.RedisCluster) []client.Object {
		rc.Spec.ACL = &redisv1alpha1.ACLSpec{Enabled: true, Users: []redisv1alpha1.ACLUser{
			{Name: "reader", Rules: "~* +@read +ping", PasswordSecret: redisv1alpha1.SecretKeyRef{Name: "reader-pw", Key: "pw"}},
		}}
		return []client.Object{resources.RedisUsersSecret(rc, "op-pw", "ex-pw"),
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "reader-pw", Namespace: testNamespace}, Data: map[string][]byte{"pw": []byte("reader-password\n")}}}
	})
	for user, pw := range map[string]string{"": testPassword, "reader": "reader-password", resources.RedisOperatorUser: "op-pw"} {
		rdb := redis.NewClient(&redis.Options{Addr: testIP + ":6379", Username: user, Password: pw, MaxRetries: -1, DialTimeout: 500 * time.Millisecond})
		defer func() { _ = rdb.Close() }()
		if !eventually(15*time.Second, func() bool { return ping(rdb) == nil }) {
			t.Errorf("user %q: no PING answer: %v", user, ping(rdb))
		}
	}
	// A changed Secret reaches the volume's files, as a kubelet refreshes Secret volumes.
	secret := &corev1.Secret{}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: testNamespace, Name: "reader-pw"}, secret); err != nil {
		t.Fatal(err)
	}
	secret.Data["pw"] = []byte("rotated-password\n")
	if err := c.Update(t.Context(), secret); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(k.podDir(testNamespace, testPod), resources.RedisACLUsersVolume)
	holds := func() bool {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if b, _ := os.ReadFile(filepath.Join(dir, e.Name())); string(b) == "rotated-password\n" {
				return true
			}
		}
		return false
	}
	if !eventually(5*time.Second, holds) {
		t.Errorf("no file of %s holds the Secret's new value 5 s after its update", dir)
	}
}

// TestWrittenVolumesRewritesOnlyWhatChanged: a directory is written again when its version
// changes or it is gone, and not otherwise.
func TestWrittenVolumesRewritesOnlyWhatChanged(t *testing.T) {
	var w writtenVolumes
	dir := filepath.Join(t.TempDir(), "vol")
	file := filepath.Join(dir, "f")
	read := func() string { b, _ := os.ReadFile(file); return string(b) }
	step := func(version, content, want string) {
		t.Helper()
		if err := w.write(dir, version, func() map[string][]byte { return map[string][]byte{"f": []byte(content)} }); err != nil {
			t.Fatal(err)
		}
		if got := read(); got != want {
			t.Errorf("after writing %q at version %s the file holds %q, want %q", content, version, got, want)
		}
	}
	step("v1", "one", "one")
	if err := os.WriteFile(file, []byte("edited"), 0o600); err != nil {
		t.Fatal(err)
	}
	step("v1", "one", "edited") // same version: not compared, not written
	step("v2", "two", "two")
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	step("v2", "two", "two") // gone: written again
}
