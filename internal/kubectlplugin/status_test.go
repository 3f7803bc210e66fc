package kubectlplugin

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	appsv1api "github.com/middleware-operator/middleware-operator/api/apps/v1"
	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
)

var now = time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)

func ago(d time.Duration) metav1.Time { return metav1.NewTime(now.Add(-d)) }

// sixNodes is a formed cluster of 3 masters and 3 replicas; cache-4's link is down and
// cache-0 holds the slots of a scale-in in pieces.
func sixNodes() RedisClusterView {
	node := func(name, role, id, master, slots, host string, pct int32) redisv1alpha1.RedisNode {
		n := redisv1alpha1.RedisNode{Name: name, Type: role, NodeID: id, MasterNodeID: master, Slots: slots, Hostname: host,
			Instance: "10.0.0." + name[len(name)-1:] + ":6379", Status: corev1.ConditionTrue, MaxMemory: 256 << 20}
		if role == "master" {
			n.MemoryPercent = ptr.To(pct)
		}
		return n
	}
	nodes := []redisv1alpha1.RedisNode{
		node("cache-0", "master", "a", "a", "0-5460,10923-10930,11000,11002", "kwok-0", 12),
		node("cache-1", "master", "b", "b", "5461-10922", "kwok-1", 80),
		node("cache-2", "master", "c", "c", "10931-10999,11001,11003-16383", "kwok-2", 95),
		node("cache-3", "slave", "d", "a", "", "kwok-1", 0),
		node("cache-4", "slave", "e", "b", "", "kwok-2", 0),
		node("cache-5", "slave", "f", "c", "", "kwok-0", 0),
	}
	nodes[4].Status, nodes[4].Reason = corev1.ConditionFalse, "ReplicationDown"
	rc := &redisv1alpha1.RedisCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "cache", Generation: 4},
		Spec:       redisv1alpha1.RedisClusterSpec{Replicas: 6},
		Status: redisv1alpha1.RedisClusterStatus{ObservedGeneration: 4, Phase: redisv1alpha1.PhaseRunning, Masters: 3, ReadyReplicas: 5,
			SlotsAssigned: 16384, SlotsOK: 16384, Nodes: nodes,
			Memory: &redisv1alpha1.MemoryStatus{MaxMemory: 256 << 20, Policy: "noeviction", Source: redisv1alpha1.MaxMemoryFromLimit,
				FullestMaster: "cache-2", FullestMasterPercent: ptr.To[int32](95)},
			Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "ClusterOK", Message: "every slot served",
				LastTransitionTime: ago(3 * time.Hour)}}},
	}
	backup := &redisv1alpha1.RedisBackup{ObjectMeta: metav1.ObjectMeta{Name: "cache-nightly"},
		Status: redisv1alpha1.RedisBackupStatus{Phase: redisv1alpha1.BackupCompleted, CompletedAt: ptr.To(ago(5 * time.Hour)),
			Keys: 1000, Bytes: 1536, Location: "s3://b/cache-nightly"}}
	var events []corev1.Event
	for i := range 10 {
		events = append(events, corev1.Event{Type: corev1.EventTypeNormal, Reason: "Step" + string(rune('A'+i)),
			Message: "step", LastTimestamp: ago(time.Duration(10-i) * time.Minute)})
	}
	events[9].Type, events[9].Count = corev1.EventTypeWarning, 3
	return RedisClusterView{Cluster: rc, Zones: map[string]string{"kwok-0": "zone-a", "kwok-1": "zone-b"}, LastBackup: backup, Events: events}
}

// lineWith returns the line of text that starts (after indentation) with prefix.
func lineWith(t *testing.T, text, prefix string) string {
	t.Helper()
	for line := range strings.SplitSeq(text, "\n") {
		if fields := strings.Join(strings.Fields(line), " "); strings.HasPrefix(fields, prefix) {
			return fields
		}
	}
	t.Fatalf("no line starts with %q in:\n%s", prefix, text)
	return ""
}

// checkLines checks that each line of text starting with a key reads as its value (spaces
// collapsed).
func checkLines(t *testing.T, text string, want map[string]string) {
	t.Helper()
	for prefix, line := range want {
		if got := lineWith(t, text, prefix); got != line {
			t.Errorf("line %q:\n got %q\nwant %q", prefix, got, line)
		}
	}
}

func TestRenderRedisCluster(t *testing.T) {
	out := RenderRedisCluster(sixNodes(), Palette{}, now)
	checkLines(t, out, map[string]string{
		"RedisCluster":  "RedisCluster shop/cache phase Running 3 masters, 5/6 nodes ready slots 16384 assigned, 16384 ok",
		"Memory:":       "Memory: maxmemory 256.0Mi (from Limit, policy noeviction), fullest master cache-2 at 95%",
		"Last backup:":  "Last backup: cache-nightly, completed 5h ago (1000 keys, 1.5Ki) at s3://b/cache-nightly",
		"MASTER":        "MASTER SLOTS MEMORY KUBE NODE ZONE REPLICAS",
		"cache-0 0-":    "cache-0 0-5460,10923-10930,11000 +1 more (5471 slots) 12% of 256.0Mi kwok-0 zone-a cache-3 (in sync)",
		"cache-1 5461":  "cache-1 5461-10922 (5462 slots) 80% of 256.0Mi kwok-1 zone-b cache-4 (ReplicationDown)",
		"cache-2 10931": "cache-2 10931-10999,11001,11003-16383 (5451 slots) 95% of 256.0Mi kwok-2 - cache-5 (in sync)",
		"cache-4 slave": "cache-4 slave cache-1 10.0.0.4:6379 kwok-2 - False ReplicationDown",
		"Ready":         "Ready True ClusterOK 3h every slot served",
		"Events":        "Events (last 8)",
		"60s":           "60s Warning StepJ (x3) step",
	})
	if strings.Contains(out, "StepB") || !strings.Contains(out, "StepC") {
		t.Errorf("the screen should keep the 8 latest events, StepC to StepJ:\n%s", out)
	}
	if strings.Contains(out, "\x1b[") {
		t.Errorf("colour codes without a terminal:\n%s", out)
	}
	if coloured := RenderRedisCluster(sixNodes(), Palette{On: true}, now); !strings.Contains(coloured, "\x1b[31m95%\x1b[0m") {
		t.Errorf("a master at 95%% of maxmemory should be red on a terminal:\n%s", coloured)
	}
}

func TestRenderRedisClusterBeforeItForms(t *testing.T) {
	v := RedisClusterView{Cluster: &redisv1alpha1.RedisCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "new", Generation: 2},
		Spec:   redisv1alpha1.RedisClusterSpec{Replicas: 6},
		Status: redisv1alpha1.RedisClusterStatus{ObservedGeneration: 1, Reason: "waiting for 6 pods"}}}
	out := RenderRedisCluster(v, Palette{}, now)
	for _, want := range []string{"phase -", "Reason: waiting for 6 pods", "The status is of generation 1; the spec is at 2.",
		"Last backup: none completed", "none yet (no node has joined the cluster)", "Conditions\n  none yet", "Events (last 8)\n  none"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
}

func TestLastCompletedBackup(t *testing.T) {
	b := func(name, cluster string, phase redisv1alpha1.BackupPhase, done time.Duration) redisv1alpha1.RedisBackup {
		x := redisv1alpha1.RedisBackup{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: redisv1alpha1.RedisBackupSpec{Cluster: cluster},
			Status: redisv1alpha1.RedisBackupStatus{Phase: phase}}
		if done > 0 {
			x.Status.CompletedAt = ptr.To(ago(done))
		}
		return x
	}
	backups := []redisv1alpha1.RedisBackup{
		b("old", "cache", redisv1alpha1.BackupCompleted, 5*time.Hour),
		b("new", "cache", redisv1alpha1.BackupCompleted, time.Hour),
		b("other", "sessions", redisv1alpha1.BackupCompleted, time.Minute),
		b("running", "cache", redisv1alpha1.BackupRunning, 0),
		b("failed", "cache", redisv1alpha1.BackupFailed, time.Minute),
	}
	if got := LastCompletedBackup(backups, "cache"); got == nil || got.Name != "new" {
		t.Errorf("LastCompletedBackup = %v, want new", got)
	}
	if got := LastCompletedBackup(backups, "none"); got != nil {
		t.Errorf("LastCompletedBackup of a cluster without backups = %s", got.Name)
	}
}

func TestRenderAppServiceAndCloudManager(t *testing.T) {
	pod := func(name, node string, ready bool) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: ago(2 * time.Hour)},
			Spec:   corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "app"}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Ready: ready, RestartCount: 2}}}}
	}
	pods := []corev1.Pod{pod("web-b", "kwok-1", false), pod("web-a", "kwok-0", true)}
	zones := map[string]string{"kwok-0": "zone-a"}
	app := RenderAppService(AppServiceView{App: &appsv1api.AppService{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"},
		Spec:   appsv1api.AppServiceSpec{Image: "nginx:1.27", Size: ptr.To[int32](2)},
		Status: appsv1api.AppServiceStatus{Replicas: 2, ReadyReplicas: 1, AvailableReplicas: 1, UpdatedReplicas: 2}}, Workload: Workload{Pods: pods, Zones: zones}}, Palette{}, now)
	checkLines(t, app, map[string]string{
		"AppService": "AppService ns/web image nginx:1.27 size 2 ready 1, available 1, updated 2 of 2",
		"web-a":      "web-a Running 1/1 2 kwok-0 zone-a 2h",
		"web-b":      "web-b Running 0/1 2 kwok-1 - 2h",
	})
	if strings.Index(app, "web-a") > strings.Index(app, "web-b") {
		t.Errorf("pods not sorted by name:\n%s", app)
	}
	cm := &appsv1api.CloudManager{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "stack"},
		Status: appsv1api.CloudManagerStatus{Phase: "Deploying", Front: "2/2"}}
	cm.Spec.Front.Deployment = appsv1api.TierDeployment{Name: "front", Image: "nginx"}
	cm.Spec.Identity.Deployment = appsv1api.TierDeployment{Name: "keycloak", Image: "keycloak"}
	cm.Spec.DB.StatefulSet = appsv1api.DatabaseStatefulSet{Name: "db", Image: "mariadb"}
	out := RenderCloudManager(CloudManagerView{Manager: cm}, Palette{}, now)
	checkLines(t, out, map[string]string{
		"CloudManager": "CloudManager ns/stack phase Deploying",
		"front":        "front Deployment/front nginx 2/2",
		"identity":     "identity Deployment/keycloak keycloak -",
		"db":           "db StatefulSet/db mariadb -",
	})
}
