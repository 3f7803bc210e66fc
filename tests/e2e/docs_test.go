package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/middleware-operator/middleware-operator/tests/docs"
	"github.com/middleware-operator/middleware-operator/tests/testenv"
)

// notServed are the API groups of documentation examples the e2e cluster does not serve:
// OLM's (tests/olm installs OLM), cert-manager's (the RedisCluster suite installs it) and
// kustomize's (not an API object).
var notServed = []string{"operators.coreos.com/", "cert-manager.io/", "kustomize.config.k8s.io/"}

// TestDocsExamplesPassServerSideDryRun creates every YAML example of README.md and docs/
// with a server-side dry run: the API server validates it against the installed CRDs (their
// OpenAPI schemas and CEL rules) and the built-in kinds, as a user applying it would see.
func TestDocsExamplesPassServerSideDryRun(t *testing.T) {
	examples, err := docs.Examples(testenv.RepoRoot())
	if err != nil {
		t.Fatal(err)
	}
	ns := env.Namespace(t)
	dir := t.TempDir()
	tried := 0
	for i, e := range examples {
		if served(e.APIVersion) {
			file := filepath.Join(dir, strconv.Itoa(i)+"-"+strings.ToLower(e.Kind)+".yaml")
			if err := os.WriteFile(file, e.Data, 0o600); err != nil {
				t.Fatal(err)
			}
			tried++
			if out, err := kubectlErr("create", "--dry-run=server", "-n", ns, "-f", file); err != nil {
				t.Errorf("%s: the API server refuses it: %v\n%s", e, err, out)
			}
		}
	}
	if tried < 10 {
		t.Errorf("only %d examples dry-run", tried)
	}
}

func served(apiVersion string) bool {
	for _, g := range notServed {
		if strings.HasPrefix(apiVersion, g) {
			return false
		}
	}
	return true
}
