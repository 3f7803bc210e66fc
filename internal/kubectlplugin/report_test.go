package kubectlplugin

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/objectlabels"
)

// untar reads a report from data.
func untar(t *testing.T, data []byte) map[string]string {
	t.Helper()
	files, err := ReadReport(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func TestWriteReport(t *testing.T) {
	labels := objectlabels.ObjectLabels(objectlabels.RedisClusterKind, "cache")
	otherLabels := objectlabels.ObjectLabels(objectlabels.RedisClusterKind, "sessions")
	const password = "known-redis-password"
	objs := []client.Object{
		&redisv1alpha1.RedisCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "cache"}, Spec: redisv1alpha1.RedisClusterSpec{Replicas: 6}},
		&redisv1alpha1.RedisCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "sessions"}, Spec: redisv1alpha1.RedisClusterSpec{Replicas: 6}},
		&redisv1alpha1.RedisBackup{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "cache-nightly"}, Spec: redisv1alpha1.RedisBackupSpec{Cluster: "cache"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "cache-password", Labels: labels},
			Data: map[string][]byte{"password": []byte(password)}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "sessions-password", Labels: otherLabels},
			Data: map[string][]byte{"password": []byte("other")}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "cache-config", Labels: labels},
			Data: map[string]string{"redis.conf": "maxmemory 1gb\nmasterauth " + password + "\n"}},
		&corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "e1"}, InvolvedObject: corev1.ObjectReference{Kind: "RedisCluster", Name: "cache"},
			Type: "Normal", Reason: "ClusterCreated", Message: "formed", LastTimestamp: metav1.NewTime(now)},
		&corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "e2"}, InvolvedObject: corev1.ObjectReference{Kind: "RedisCluster", Name: "sessions"},
			Type: "Normal", Reason: "ClusterCreated", Message: "formed"},
		&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "mwo-system", Name: DefaultLeaseName},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("controller-manager-abc_0f1e")}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "mwo-system", Name: "controller-manager-abc"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "kube-rbac-proxy"}, {Name: "manager"}}}},
	}
	c := fake.NewClientBuilder().WithScheme(Scheme()).WithObjects(objs...).Build()
	var asked string
	logs := func(_ context.Context, ns, pod, container string, lines int64) ([]byte, error) {
		asked = strings.Join([]string{ns, pod, container}, "/")
		return []byte("INFO reconciled cache\n"), nil
	}
	var buf bytes.Buffer
	if _, err := WriteReport(t.Context(), c, ReportOptions{Namespace: "shop", Name: "cache", LogLines: 100, Logs: logs, Now: now}, &buf); err != nil {
		t.Fatal(err)
	}
	files := untar(t, buf.Bytes())
	for _, name := range []string{"report/shop/rediscluster/cache.yaml", "report/shop/redisbackup/cache-nightly.yaml",
		"report/shop/secret/cache-password.yaml", "report/shop/configmap/cache-config.yaml", "report/shop/events.txt",
		"report/operator/lease.yaml", "report/operator/controller-manager-abc.log", "report/README.txt"} {
		if _, ok := files[name]; !ok {
			t.Errorf("the archive lacks %s; it has %v", name, keys(files))
		}
	}
	for name := range files {
		if strings.Contains(name, "sessions") {
			t.Errorf("a report of cache holds %s", name)
		}
	}
	if asked != "mwo-system/controller-manager-abc/manager" {
		t.Errorf("the log read was of %q, want the leader's manager container", asked)
	}
	if ev := files["report/shop/events.txt"]; !strings.Contains(ev, "RedisCluster/cache  ClusterCreated  formed") || strings.Contains(ev, "sessions") {
		t.Errorf("events.txt:\n%s", ev)
	}
	if s := files["report/shop/secret/cache-password.yaml"]; !strings.Contains(s, "password: <redacted 20 bytes>") {
		t.Errorf("the Secret's data is not redacted as expected:\n%s", s)
	}
	for name, body := range files {
		if strings.Contains(body, password) || strings.Contains(body, "a25vd24tcmVkaXMtcGFzc3dvcmQ=") {
			t.Errorf("%s holds the password:\n%s", name, body)
		}
	}
}

func TestWriteReportWithoutAPodLeader(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(Scheme()).WithObjects(
		&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: DefaultLeaseName},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("laptop_0f1e")}}).Build()
	var buf bytes.Buffer
	if _, err := WriteReport(t.Context(), c, ReportOptions{Namespace: "shop", Now: now}, &buf); err != nil {
		t.Fatal(err)
	}
	if readme := untar(t, buf.Bytes())["report/README.txt"]; !strings.Contains(readme, `the leader "laptop_0f1e" is not a pod of namespace default`) {
		t.Errorf("README.txt should say why the log is missing:\n%s", readme)
	}
}

func TestWaitBackup(t *testing.T) {
	b := &redisv1alpha1.RedisBackup{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "b"}, Spec: redisv1alpha1.RedisBackupSpec{Cluster: "cache"}}
	for name, tc := range map[string]struct {
		final   redisv1alpha1.BackupPhase
		timeout time.Duration
		wantErr string
	}{
		"completed": {redisv1alpha1.BackupCompleted, 5 * time.Second, ""},
		"failed":    {redisv1alpha1.BackupFailed, 5 * time.Second, "RedisBackup b failed: the store refused"},
		"too long":  {redisv1alpha1.BackupRunning, 300 * time.Millisecond, "RedisBackup b is Running after 300ms, not Completed"},
	} {
		t.Run(name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(Scheme()).WithObjects(b.DeepCopy()).WithStatusSubresource(b).Build()
			go func() {
				time.Sleep(100 * time.Millisecond)
				got := &redisv1alpha1.RedisBackup{}
				_ = c.Get(context.Background(), client.ObjectKeyFromObject(b), got)
				got.Status.Phase, got.Status.Reason = tc.final, "the store refused"
				_ = c.Status().Update(context.Background(), got)
			}()
			var progress bytes.Buffer
			_, err := WaitBackup(t.Context(), c, client.ObjectKeyFromObject(b), 20*time.Millisecond, tc.timeout, &progress)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("WaitBackup = %v, want %q", err, tc.wantErr)
			}
			if !strings.Contains(progress.String(), "RedisBackup b: "+string(tc.final)) {
				t.Errorf("progress did not show the phase %s:\n%s", tc.final, progress.String())
			}
		})
	}
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
