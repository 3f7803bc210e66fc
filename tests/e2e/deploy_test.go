package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/middleware-operator/middleware-operator/internal/localcluster"
	"github.com/middleware-operator/middleware-operator/tests/testenv"
)

// TestMakeDeployAndUndeploy runs make deploy with an image of the user's and make undeploy
// against a local cluster of its own (undeploy deletes the CRDs, which the suite's cluster
// needs): the operator's Deployment appears with that image, goes again, and the working
// tree is as it was. The tools and the CRDs are the suite's already (make -o skips their
// targets, so a package running alongside never sees bin/ or config/crd rewritten).
func TestMakeDeployAndUndeploy(t *testing.T) {
	c, err := localcluster.Start(t.Context(), localcluster.Options{Nodes: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	before := gitStatus(t)
	run := func(args ...string) {
		t.Helper()
		defer func(start time.Time) {
			t.Logf("make %s took %.1f s", strings.Join(args, " "), time.Since(start).Seconds())
		}(time.Now())
		cmd := exec.Command("make", append([]string{"-o", "deploy-tools", "-o", "manifests"}, args...)...)
		cmd.Dir = testenv.RepoRoot()
		cmd.Env = append(os.Environ(), "KUBECONFIG="+c.Kubeconfig)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("make %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	kubectlOn := func(args ...string) (string, error) {
		defer func(start time.Time) {
			t.Logf("kubectl %s took %.1f s", strings.Join(args, " "), time.Since(start).Seconds())
		}(time.Now())
		cmd := exec.Command(testenv.Tool(t, "kubectl"), args...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+c.Kubeconfig)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	run("deploy", "IMG=example.com/x:v1")
	image, err := kubectlOn("get", "deployment", "-n", "middleware-operator-system", "middleware-operator-controller-manager",
		"-o", "jsonpath={.spec.template.spec.containers[0].image}")
	if err != nil || image != "example.com/x:v1" {
		t.Errorf("after make deploy the operator's image = %q (%v), want example.com/x:v1", image, err)
	}
	if after := gitStatus(t); after != before {
		t.Errorf("make deploy changed the working tree:\nbefore:\n%s\nafter:\n%s", before, after)
	}

	// config/default binds the namespaced rules in every namespace.
	const sa = "system:serviceaccount:middleware-operator-system:middleware-operator-controller-manager"
	if out, _ := kubectlOn("auth", "can-i", "get", "secrets", "-n", "default", "--as", sa); strings.TrimSpace(out) != "yes" {
		t.Errorf("after make deploy the operator may not read the Secrets of namespace default (%q): config/default watches all namespaces", out)
	}

	waitCRDStorage(t, kubectlOn)
	run("undeploy")
	if out, err := kubectlOn("get", "deployment", "-n", "middleware-operator-system", "middleware-operator-controller-manager"); err == nil {
		t.Errorf("the operator's Deployment is still there after make undeploy:\n%s", out)
	}
	if out, _ := kubectlOn("get", "crd", "-o", "name"); strings.Contains(out, "middleware-operator.io") {
		t.Errorf("CRDs left after make undeploy:\n%s", out)
	}
	if after := gitStatus(t); after != before {
		t.Errorf("make undeploy changed the working tree:\nbefore:\n%s\nafter:\n%s", before, after)
	}

	// The namespaced overlay (docs/installation.md): the operator watches its namespace and
	// may read no Secret outside it.
	rendered, err := exec.Command(testenv.Tool(t, "kustomize"), "build", filepath.Join(testenv.RepoRoot(), "config", "overlays", "namespaced")).Output()
	if err != nil {
		t.Fatalf("kustomize build config/overlays/namespaced: %v", err)
	}
	manifest := filepath.Join(t.TempDir(), "namespaced.yaml")
	if err := os.WriteFile(manifest, rendered, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := kubectlOn("apply", "--server-side", "-f", manifest); err != nil {
		t.Fatalf("kubectl apply of config/overlays/namespaced: %v\n%s", err, out)
	}
	for ns, want := range map[string]string{"default": "no", "middleware-operator-system": "yes"} {
		if out, _ := kubectlOn("auth", "can-i", "get", "secrets", "-n", ns, "--as", sa); strings.TrimSpace(out) != want {
			t.Errorf("namespaced overlay: may the operator read the Secrets of namespace %s? %q, want %s", ns, strings.TrimSpace(out), want)
		}
	}
	watch, err := kubectlOn("get", "deployment", "-n", "middleware-operator-system", "middleware-operator-controller-manager",
		"-o", `jsonpath={.spec.template.spec.containers[0].env[?(@.name=="WATCH_NAMESPACE")].valueFrom.fieldRef.fieldPath}`)
	if err != nil || watch != "metadata.namespace" {
		t.Errorf("namespaced overlay: WATCH_NAMESPACE from %q (%v), want metadata.namespace", watch, err)
	}
	waitCRDStorage(t, kubectlOn)
	if out, err := kubectlOn("delete", "--ignore-not-found", "-f", manifest); err != nil {
		t.Errorf("kubectl delete of config/overlays/namespaced: %v\n%s", err, out)
	}
}

// crdLists are the paths of the operator's kinds.
var crdLists = []string{
	"/apis/apps.middleware-operator.io/v1/appservices",
	"/apis/apps.middleware-operator.io/v1/cloudmanagers",
	"/apis/redis.middleware-operator.io/v1alpha1/redisclusters",
	"/apis/redis.middleware-operator.io/v1alpha1/redisbackups",
	"/apis/redis.middleware-operator.io/v1alpha1/redisbackupschedules",
}

// waitCRDStorage waits until the API server serves every kind of the operator from its
// watch cache (a watch from resourceVersion 0, which it refuses with "storage is
// (re)initializing" until then), as it does seconds after the CRDs are made. A
// CRD deleted before that makes the API server's CRD finalizer meet "storage is
// (re)initializing" and back off: in 1 run of 5 a delete then waited about 290 s. Users do
// not delete CRDs seconds after making them; the test did.
func waitCRDStorage(t *testing.T, kubectlOn func(args ...string) (string, error)) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for _, path := range crdLists {
		for {
			out, err := kubectlOn("get", "--raw", path+"?watch=true&resourceVersion=0&timeoutSeconds=1")
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the API server does not list %s from its cache after a minute: %v\n%s", path, err, out)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}

func gitStatus(t *testing.T) string {
	t.Helper()
	cmd := exec.Command("git", "status", "--porcelain")
	cmd.Dir = testenv.RepoRoot()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Skipf("not a git checkout: %v\n%s", err, out)
	}
	return string(out)
}
