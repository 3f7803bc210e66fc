package plugin

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1api "github.com/middleware-operator/middleware-operator/api/apps/v1"
	"github.com/middleware-operator/middleware-operator/internal/backupstore"
	"github.com/middleware-operator/middleware-operator/internal/kubectlplugin"
	"github.com/middleware-operator/middleware-operator/tests/redistest"
)

// Known secrets the test plants, to look for in the report.
const (
	redisPassword = "plugin-e2e-redis-password-7f3a"
	rootPassword  = "plugin-e2e-mariadb-root-91c2"
)

// TestPluginStatusBackupRestoreReport runs the plugin as a user does against a formed
// RedisCluster whose password the test chose: status shows its masters with their slots,
// replicas in sync and zones; backup --wait takes a backup to the object store (then a
// second one to the same destination, copied from the first); status shows it; restore
// prints the restoring RedisCluster and --apply creates one that forms; status works for an
// AppService and a CloudManager; and report writes an archive with the objects and the
// operator's Lease in which neither the Redis password, the store's secret key nor the
// CloudManager's rootPass appears, in clear or in base64.
func TestPluginStatusBackupRestoreReport(t *testing.T) {
	c := env.Client
	ns := env.NamespaceAt(t, "baseline")
	for _, s := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cache-auth"}, Data: map[string][]byte{"password": []byte(redisPassword)}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "backup-credentials"}, Data: map[string][]byte{
			backupstore.StoreAccessKeyIDKey: []byte(store.AccessKey), backupstore.StoreSecretAccessKeyKey: []byte(store.SecretKey)}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "store-ca"}, Data: map[string][]byte{backupstore.StoreCAKey: store.CA}},
	} {
		if err := c.Create(t.Context(), s); err != nil {
			t.Fatal(err)
		}
	}
	rc := redistest.NewCluster(ns, "cache", 6)
	rc.Spec.PasswordSecret = "cache-auth"
	if err := c.Create(t.Context(), rc); err != nil {
		t.Fatal(err)
	}
	redistest.WaitShape(t, c, client.ObjectKeyFromObject(rc), 3, 6)

	status := plugin(t, "-n", ns, "status", "rc", "cache")
	t.Logf("status:\n%s", status)
	for _, want := range []string{"RedisCluster " + ns + "/cache  phase Running  3 masters, 6/6 nodes ready  slots 16384 assigned, 16384 ok",
		"Last backup: none completed", "Conditions", "Events (last 8)"} {
		if !strings.Contains(status, want) {
			t.Errorf("status lacks %q", want)
		}
	}
	if got := regexp.MustCompile(`(?m)^  cache-\d  \d[-\d,]* \(\d+ slots\)`).FindAllString(status, -1); len(got) != 3 {
		t.Errorf("status shows %d masters with slot ranges, want 3: %q", len(got), got)
	}
	if n := strings.Count(status, "(in sync)"); n != 3 {
		t.Errorf("status shows %d replicas in sync, want 3", n)
	}
	if !regexp.MustCompile(`(?m)^  cache-\d  slave   cache-\d  \S+:\d+  \S+  +\S*zone\S*  True`).MatchString(status) {
		t.Errorf("status shows no replica with its master, address, kube node, zone and True")
	}
	if strings.Contains(status, "\x1b[") {
		t.Errorf("status coloured its output though stdout is not a terminal")
	}

	out := plugin(t, "-n", ns, "backup", "cache", "--name", "cache-b1", "--wait", "--timeout", "2m",
		"--endpoint", store.Endpoint, "--bucket", store.Bucket, "--region", store.Region,
		"--credentials-secret", "backup-credentials", "--ca-secret", "store-ca")
	if !strings.Contains(out, "RedisBackup cache-b1: Completed") || !regexp.MustCompile(`at s3://`+store.Bucket+`/\S+/cache-b1\n`).MatchString(out) {
		t.Errorf("backup --wait:\n%s", out)
	}
	out, errOut, err := pluginErr("-n", ns, "backup", "cache", "--wait", "--timeout", "2m")
	if err != nil || !strings.Contains(errOut, "destination copied from RedisBackup/cache-b1") || !strings.Contains(out, ": Completed") {
		t.Errorf("a backup without destination flags: %v\n%s%s", err, out, errOut)
	}
	if status := plugin(t, "-n", ns, "status", "rediscluster", "cache"); !regexp.MustCompile(`Last backup: cache-\S+, completed \d+s ago`).MatchString(status) {
		t.Errorf("status after the backups shows no last backup:\n%s", status)
	}

	printed := plugin(t, "-n", ns, "restore", "cache-b1", "--to", "cache-restored")
	for _, want := range []string{"kind: RedisCluster", "name: cache-restored", "replicas: 6", "replicasPerMaster: 1", "backup: cache-b1"} {
		if !strings.Contains(printed, want) {
			t.Errorf("restore printed no %q:\n%s", want, printed)
		}
	}
	elsewhere := plugin(t, "-n", ns, "restore", "cache-b1", "--to", "cache", "--to-namespace", "staging")
	if !strings.Contains(elsewhere, "path: "+ns+"/cache/cache-b1\n") || !strings.Contains(elsewhere, "credentialsSecret: backup-credentials") {
		t.Errorf("restore into another namespace names no folder:\n%s", elsewhere)
	}
	plugin(t, "-n", ns, "restore", "cache-b1", "--to", "cache-restored", "--apply")
	redistest.WaitShape(t, c, client.ObjectKey{Namespace: ns, Name: "cache-restored"}, 3, 6)

	app := &appsv1api.AppService{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: appsv1api.AppServiceSpec{Size: ptr.To[int32](2), Image: "nginx:1.27",
			Ports: []appsv1api.AppServicePort{{Port: 80, TargetPort: intstr.FromInt32(80)}}}}
	cm := &appsv1api.CloudManager{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "stack"}}
	cm.Spec.Front.Deployment = appsv1api.TierDeployment{Name: "front", Image: "nginx:1.27"}
	cm.Spec.Identity.Deployment = appsv1api.TierDeployment{Name: "identity", Image: "busybox:1.36"}
	cm.Spec.DB.StatefulSet = appsv1api.DatabaseStatefulSet{Name: "db", Image: "mariadb:10.11",
		Storage: appsv1api.DatabaseStorage{Size: "1Gi"}}
	cm.Spec.DB.RootPass = rootPassword
	for _, o := range []client.Object{app, cm} {
		if err := c.Create(t.Context(), o); err != nil {
			t.Fatal(err)
		}
	}
	if out := plugin(t, "-n", ns, "status", "app", "web"); !strings.Contains(out, "AppService "+ns+"/web  image nginx:1.27  size 2") || !strings.Contains(out, "Pods") {
		t.Errorf("status app:\n%s", out)
	}
	if out := plugin(t, "-n", ns, "status", "cm", "stack"); !strings.Contains(out, "CloudManager "+ns+"/stack") ||
		!strings.Contains(out, "front     Deployment/front") || !strings.Contains(out, "db        StatefulSet/db") {
		t.Errorf("status cm:\n%s", out)
	}

	archive := filepath.Join(t.TempDir(), "report.tar.gz")
	plugin(t, "-n", ns, "report", "-o", archive)
	files := untar(t, archive)
	for _, name := range []string{"report/README.txt", "report/operator/lease.yaml", "report/" + ns + "/events.txt",
		"report/" + ns + "/rediscluster/cache.yaml", "report/" + ns + "/rediscluster/cache-restored.yaml", "report/" + ns + "/redisbackup/cache-b1.yaml",
		"report/" + ns + "/appservice/web.yaml", "report/" + ns + "/cloudmanager/stack.yaml", "report/" + ns + "/statefulset/cache.yaml",
		"report/" + ns + "/secret/cache-restored-password.yaml"} {
		if _, ok := files[name]; !ok {
			t.Errorf("the report lacks %s", name)
		}
	}
	if readme := files["report/README.txt"]; !strings.Contains(readme, "operator: the leader") {
		t.Errorf("the README does not say where the leader is:\n%s", readme)
	}
	if !strings.Contains(files["report/"+ns+"/events.txt"], "RedisBackup/cache-b1") {
		t.Errorf("the report's events lack the backup's:\n%s", files["report/"+ns+"/events.txt"])
	}
	restoredPassword := secretValue(t, ns, "cache-restored-password", "password")
	secrets := []string{redisPassword, store.SecretKey, rootPassword, restoredPassword}
	for _, s := range secrets {
		secrets = append(secrets, base64.StdEncoding.EncodeToString([]byte(s)))
	}
	for name, body := range files {
		for _, s := range secrets {
			if strings.Contains(body, s) {
				t.Errorf("the report's %s holds a secret value (%d bytes)", name, len(s))
			}
		}
	}
	if !t.Failed() {
		t.Logf("the report holds %d files, none with any of %d secret values", len(files), len(secrets))
	}

	one := filepath.Join(t.TempDir(), "one.tar.gz")
	plugin(t, "-n", ns, "report", "cache", "-o", one)
	for name := range untar(t, one) {
		if strings.Contains(name, "appservice/") || strings.Contains(name, "cache-restored") {
			t.Errorf("a report of cache holds %s", name)
		}
	}
}

// secretValue reads one value of a Secret.
func secretValue(t *testing.T, ns, name, key string) string {
	t.Helper()
	s := &corev1.Secret{}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
		t.Fatal(err)
	}
	if len(s.Data[key]) == 0 {
		t.Fatalf("Secret %s has no %s", name, key)
	}
	return string(s.Data[key])
}

// untar reads the report in file.
func untar(t *testing.T, file string) map[string]string {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	files, err := kubectlplugin.ReadReport(f)
	if err != nil {
		t.Fatal(err)
	}
	return files
}
