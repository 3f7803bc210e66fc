package run

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/middleware-operator/middleware-operator/tests/docs"
)

// localRecipeHeading is the section of a page whose first sh block is its local recipe.
const localRecipeHeading = "## Try it on the local cluster"

// localRecipe is the first sh block after localRecipeHeading in page (relative to root).
func localRecipe(t *testing.T, root, page string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, page))
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	at := strings.Index(text, localRecipeHeading)
	if at < 0 {
		t.Fatalf("%s has no section %q", page, localRecipeHeading)
	}
	line := strings.Count(text[:at], "\n") + 1
	for _, b := range docs.Blocks(text) {
		if b.Line > line && b.Lang == "sh" {
			return b.Text
		}
	}
	t.Fatalf("%s has no sh block after %q", page, localRecipeHeading)
	return ""
}

// runRecipe runs page's local recipe with bash, as a reader who copied it into a terminal
// of make run's machine would: HOME whose .cache is make run's cache, KUBECONFIG and PATH
// as make run says. It fails the test with the recipe's output when a line fails.
func runRecipe(t *testing.T, root, page, cache, kubeconfig string) {
	t.Helper()
	home := t.TempDir()
	if err := os.Symlink(cache, filepath.Join(home, ".cache")); err != nil {
		t.Fatal(err)
	}
	recipe := localRecipe(t, root, page)
	cmd := exec.CommandContext(t.Context(), "bash", "-euo", "pipefail", "-c", recipe)
	cmd.Dir = home
	cmd.Env = append(withoutVar(withoutVar(withoutVar(os.Environ(), "KUBECONFIG"), "HOME"), "PATH"),
		"HOME="+home, "KUBECONFIG="+kubeconfig, "PATH="+filepath.Join(root, "bin")+":"+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s's local recipe, run as written, failed: %v\n--- recipe\n%s\n--- output\n%s", page, err, recipe, out)
	}
	t.Logf("%s's local recipe:\n%s", page, out)
}
