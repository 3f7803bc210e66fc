package testenv

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestExternalTestsNamesOnlyTheClusterTests: -short skips the Test functions of the external
// _test package (they drive the local cluster) and keeps the white-box ones, helpers and
// methods aside.
func TestExternalTestsNamesOnlyTheClusterTests(t *testing.T) {
	dir := t.TempDir()
	for name, src := range map[string]string{
		"pure_test.go":    "package x\n\nimport \"testing\"\n\nfunc TestPure(t *testing.T) {}\n",
		"cluster_test.go": "package x_test\n\nimport \"testing\"\n\nfunc TestFormsACluster(t *testing.T) {}\nfunc Test_b(t *testing.T) {}\nfunc Testify() {}\nfunc helper() {}\ntype r struct{}\nfunc (r) TestNot(t *testing.T) {}\n",
		"x.go":            "package x\n\nfunc TestNotAFile() {}\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	got, err := externalTests(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"TestFormsACluster", "Test_b"}; !slices.Equal(got, want) {
		t.Fatalf("externalTests = %v, want %v", got, want)
	}
}
