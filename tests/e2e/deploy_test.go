package e2e

import (
	"os"
	"os/exec"
	"strings"
	"testing"

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
		cmd := exec.Command("make", append([]string{"-o", "deploy-tools", "-o", "manifests"}, args...)...)
		cmd.Dir = testenv.RepoRoot()
		cmd.Env = append(os.Environ(), "KUBECONFIG="+c.Kubeconfig)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("make %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	kubectlOn := func(args ...string) (string, error) {
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
