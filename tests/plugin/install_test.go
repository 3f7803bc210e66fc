package plugin

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1api "github.com/middleware-operator/middleware-operator/api/apps/v1"
	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/backupstore"
	"github.com/middleware-operator/middleware-operator/internal/kubectlplugin"
	"github.com/middleware-operator/middleware-operator/tests/localcluster"
	"github.com/middleware-operator/middleware-operator/tests/redispods"
	"github.com/middleware-operator/middleware-operator/tests/redistest"
	"github.com/middleware-operator/middleware-operator/tests/testenv"
)

// The names config/default gives the operator.
const (
	installNamespace  = "middleware-operator-system"
	installDeployment = "middleware-operator-controller-manager"
)

// TestReleaseManifestsInstallRunAndRemove renders `make release-manifests` for an image of
// the user's, applies dist/install.yaml and dist/guard.yaml with kubectl to a local cluster
// of its own (the removal deletes the CRDs the suite's cluster needs), runs the operator as
// the Deployment's pod would (its args and environment, the token of its ServiceAccount,
// so with exactly the install's RBAC and the guard), and checks that each of the five kinds
// reconciles: an AppService Available, a CloudManager Ready, a RedisCluster Running, a
// RedisBackup Completed and a RedisBackupSchedule scheduled. Then it deletes the custom
// resources and the two files' objects, and checks that nothing of them is left.
func TestReleaseManifestsInstallRunAndRemove(t *testing.T) {
	ctx := t.Context()
	cluster, err := localcluster.Start(ctx, localcluster.Options{Nodes: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Stop()
	c, err := client.New(cluster.Config, client.Options{Scheme: kubectlplugin.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	kubectlOn := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(testenv.Tool(t, "kubectl"), args...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+cluster.Kubeconfig)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}

	dist := t.TempDir()
	const image = "registry.example.com/middleware-operator:v9.9.9"
	mk := exec.Command("make", "-o", "deploy-tools", "-o", "manifests", "release-manifests", "IMG="+image, "DIST="+dist)
	mk.Dir = testenv.RepoRoot()
	if out, err := mk.CombinedOutput(); err != nil {
		t.Fatalf("make release-manifests: %v\n%s", err, out)
	}
	install, guard := filepath.Join(dist, "install.yaml"), filepath.Join(dist, "guard.yaml")
	applied := time.Now()
	kubectlOn("apply", "--server-side", "-f", install, "-f", guard)
	t.Logf("kubectl apply of install.yaml and guard.yaml took %.1f s", time.Since(applied).Seconds())

	d := &appsv1.Deployment{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: installNamespace, Name: installDeployment}, d); err != nil {
		t.Fatal(err)
	}
	if got := d.Spec.Template.Spec.Containers[0].Image; got != image {
		t.Errorf("the installed operator's image is %q, want %q", got, image)
	}
	stop := runAsInstalled(t, cluster, c, d)
	defer stop()

	kubelet, err := redispods.Watching(cluster.Config, filepath.Join(cluster.Dir, "redis-data"), nil)
	if err != nil {
		t.Fatal(err)
	}
	kctx, cancel := context.WithCancel(context.Background())
	kubeletDone := make(chan struct{})
	go func() { kubelet.Run(kctx); close(kubeletDone) }()
	defer func() { cancel(); <-kubeletDone }()

	ns := "apps"
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"pod-security.kubernetes.io/enforce": "baseline"}}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "backup-credentials"}, Data: map[string][]byte{
			backupstore.StoreAccessKeyIDKey: []byte(store.AccessKey), backupstore.StoreSecretAccessKeyKey: []byte(store.SecretKey)}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "store-ca"}, Data: map[string][]byte{backupstore.StoreCAKey: store.CA}},
		&appsv1api.AppService{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: appsv1api.AppServiceSpec{Size: ptr.To[int32](2),
			Image: "nginx:1.27", Ports: []appsv1api.AppServicePort{{Port: 80, TargetPort: intstr.FromInt32(80)}}}},
		cloudManager(ns),
		redistest.NewCluster(ns, "cache", 6),
	}
	dest := redisv1alpha1.ObjectStore{Endpoint: store.Endpoint, Bucket: store.Bucket, Region: store.Region,
		CredentialsSecret: "backup-credentials", CASecret: "store-ca", Path: "install-test"}
	schedule := &redisv1alpha1.RedisBackupSchedule{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cache-hourly"},
		Spec: redisv1alpha1.RedisBackupScheduleSpec{Cluster: "cache", Schedule: "@every 1h", Destination: dest}}
	for _, o := range append(objs, schedule) {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, c, &appsv1api.AppService{}, ns, "web", func(o client.Object) (bool, string) {
		a := o.(*appsv1api.AppService)
		cond := meta.FindStatusCondition(a.Status.Conditions, appsv1api.ConditionAvailable)
		return cond != nil && cond.Status == metav1.ConditionTrue, fmt.Sprintf("conditions %v", a.Status.Conditions)
	})
	waitFor(t, c, &appsv1api.CloudManager{}, ns, "stack", func(o client.Object) (bool, string) {
		m := o.(*appsv1api.CloudManager)
		return m.Status.Phase == appsv1api.CloudManagerReady, fmt.Sprintf("phase %q, conditions %v", m.Status.Phase, m.Status.Conditions)
	})
	redistest.WaitShape(t, c, client.ObjectKey{Namespace: ns, Name: "cache"}, 3, 6)
	if err := c.Create(ctx, kubectlplugin.NewBackup(ns, "cache", "cache-now", dest)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, c, &redisv1alpha1.RedisBackup{}, ns, "cache-now", func(o client.Object) (bool, string) {
		b := o.(*redisv1alpha1.RedisBackup)
		return b.Status.Phase == redisv1alpha1.BackupCompleted, fmt.Sprintf("phase %q: %s", b.Status.Phase, b.Status.Reason)
	})
	waitFor(t, c, &redisv1alpha1.RedisBackupSchedule{}, ns, "cache-hourly", func(o client.Object) (bool, string) {
		s := o.(*redisv1alpha1.RedisBackupSchedule)
		return s.Status.NextScheduleTime != nil && s.Status.ObservedGeneration == s.Generation,
			fmt.Sprintf("next %v, conditions %v", s.Status.NextScheduleTime, s.Status.Conditions)
	})

	// Remove: the custom resources first, while the operator runs (their finalizers are its),
	// then the operator and every object of the two files.
	for _, o := range []client.Object{schedule, &redisv1alpha1.RedisBackup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cache-now"}}, objs[3], objs[4], objs[5]} {
		if err := c.Delete(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	for _, list := range []client.ObjectList{&appsv1api.AppServiceList{}, &appsv1api.CloudManagerList{}, &redisv1alpha1.RedisClusterList{},
		&redisv1alpha1.RedisBackupList{}, &redisv1alpha1.RedisBackupScheduleList{}} {
		testenv.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, string) {
			if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
				return false, err.Error()
			}
			return meta.LenList(list) == 0, fmt.Sprintf("%d %T left", meta.LenList(list), list)
		})
	}
	stop()
	removed := time.Now()
	kubectlOn("delete", "--wait=true", "--timeout=5m", "-f", install, "-f", guard)
	t.Logf("kubectl delete of the two files took %.1f s", time.Since(removed).Seconds())
	for _, kind := range []string{"crd", "clusterrole", "clusterrolebinding", "validatingadmissionpolicy", "validatingadmissionpolicybinding", "namespace"} {
		if out := kubectlOn("get", kind, "-o", "name"); strings.Contains(out, "middleware-operator") {
			t.Errorf("left after kubectl delete -f install.yaml -f guard.yaml:\n%s", out)
		}
	}
}

// cloudManager is a CloudManager of three small tiers with a generated root password.
func cloudManager(ns string) *appsv1api.CloudManager {
	m := &appsv1api.CloudManager{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "stack"}}
	m.Spec.Front.Deployment = appsv1api.TierDeployment{Name: "front", Image: "nginx:1.27"}
	m.Spec.Identity.Deployment = appsv1api.TierDeployment{Name: "identity", Image: "busybox:1.36"}
	m.Spec.DB.StatefulSet = appsv1api.DatabaseStatefulSet{Name: "db", Image: "mariadb:10.11", Storage: appsv1api.DatabaseStorage{Size: "1Gi"}}
	return m
}

// waitFor waits up to 2 minutes until done says the object ns/name is as wanted.
func waitFor(t *testing.T, c client.Client, obj client.Object, ns, name string, done func(client.Object) (bool, string)) {
	t.Helper()
	testenv.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, string) {
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, obj); err != nil {
			return false, err.Error()
		}
		ok, msg := done(obj)
		return ok, fmt.Sprintf("%T %s: %s", obj, name, msg)
	})
}

// runAsInstalled runs the operator binary as the installed Deployment's pod: its args (the
// listening addresses moved to free loopback ports), its environment resolved from the
// downward API as the kubelet would, and the token of its ServiceAccount. It returns once the
// operator is ready, and a function that stops it.
func runAsInstalled(t *testing.T, cluster *localcluster.Cluster, c client.Client, d *appsv1.Deployment) func() {
	t.Helper()
	pod := &corev1.Pod{}
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		pods := &corev1.PodList{}
		if err := c.List(ctx, pods, client.InNamespace(d.Namespace), client.MatchingLabels(d.Spec.Selector.MatchLabels)); err != nil {
			return false, err.Error()
		}
		if len(pods.Items) == 0 {
			return false, "no pod of the operator's Deployment yet"
		}
		*pod = pods.Items[0]
		return true, ""
	})
	container := d.Spec.Template.Spec.Containers[0]
	env := []string{}
	for _, e := range container.Env {
		value := e.Value
		if f := e.ValueFrom; f != nil && f.FieldRef != nil {
			switch path := f.FieldRef.FieldPath; {
			case path == "metadata.namespace":
				value = pod.Namespace
			case strings.HasPrefix(path, "metadata.annotations['"):
				value = pod.Annotations[strings.TrimSuffix(strings.TrimPrefix(path, "metadata.annotations['"), "']")]
			default:
				t.Fatalf("the operator's env %s comes from %s, which this test does not resolve", e.Name, path)
			}
		}
		env = append(env, e.Name+"="+value)
	}
	ports := testenv.FreePorts(t, 2)
	var args []string
	for _, a := range container.Args {
		switch {
		case strings.HasPrefix(a, "--metrics-bind-address="):
			a = "--metrics-bind-address=127.0.0.1:" + strconv.Itoa(ports[0])
		case strings.HasPrefix(a, "--health-probe-bind-address="):
			a = "--health-probe-bind-address=127.0.0.1:" + strconv.Itoa(ports[1])
		}
		args = append(args, a)
	}
	cs, err := cluster.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(d.Namespace).CreateToken(t.Context(), d.Spec.Template.Spec.ServiceAccountName,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(cluster.Dir, "operator.kubeconfig")
	if err := cluster.WriteKubeconfig(kubeconfig, tr.Status.Token); err != nil {
		t.Fatal(err)
	}
	// In a pod the kubeconfig and the leader election namespace come from the mounted token.
	args = append(args, "--kubeconfig="+kubeconfig, "--leader-election-namespace="+d.Namespace)
	log, err := os.Create(filepath.Join(cluster.Dir, "installed-operator.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(operatorBin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := testenv.StopProcess(cmd, log)
	t.Cleanup(func() {
		if t.Failed() {
			data, _ := os.ReadFile(log.Name())
			t.Logf("the installed operator's log (last 8 KiB):\n%s", data[max(0, len(data)-8192):])
		}
	})
	// Alone the guard is active a few seconds after the start; beside three other packages'
	// clusters on 2 cores one CI run saw no line at all in the first minute, so the wait is
	// three minutes and a failure says whether the process ran and how much CPU it got.
	started := time.Now()
	testenv.Eventually(t, 3*time.Minute, func(ctx context.Context) (bool, string) {
		data, _ := os.ReadFile(log.Name())
		return strings.Contains(string(data), "admission guard active"),
			fmt.Sprintf("the operator's log does not say admission guard active yet (%d bytes logged; %s)", len(data), processState(cmd.Process.Pid))
	})
	t.Logf("the installed operator's guard was active %.1f s after its start", time.Since(started).Seconds())
	return func() {
		if !stopped {
			stopped = true
			stop()
		}
	}
}

// processState is a process's state and CPU time so far from /proc/<pid>/stat, or why it
// cannot be read (the process is gone).
func processState(pid int) string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "process gone: " + err.Error()
	}
	// Fields after the command's closing parenthesis: state is the 1st, utime and stime the 12th and 13th (clock ticks).
	fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	if len(fields) < 13 {
		return "unreadable stat: " + string(data)
	}
	return fmt.Sprintf("process state %s, %s+%s ticks of CPU", fields[0], fields[11], fields[12])
}
