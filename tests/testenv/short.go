package testenv

import (
	"flag"
	"fmt"
	"go/ast"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/middleware-operator/middleware-operator/tests/gosource"
)

// RunUnitTestsWhenShort runs, under go test -short, only the tests of the package under
// test itself (its white-box tests, which need no cluster), without starting one: the tests
// of the external _test package in the same folder, which drive the local cluster, are
// skipped by name (-test.skip) and said so. It reports false, running nothing, without
// -short: TestMain then starts the cluster and runs every test.
func RunUnitTestsWhenShort(m *testing.M) (code int, ran bool) {
	if !flag.Parsed() {
		flag.Parse()
	}
	if !testing.Short() {
		return 0, false
	}
	skipped, err := skipClusterTests()
	if err != nil {
		fmt.Fprintln(os.Stderr, "-short:", err)
		return 1, true
	}
	fmt.Fprintf(os.Stderr, "-short: the local cluster is not started; the %d tests that need it are skipped\n", skipped)
	return m.Run(), true
}

// skipClusterTests adds the external test package's tests (externalTests) to -test.skip,
// and says how many.
func skipClusterTests() (int, error) {
	names, err := externalTests(".")
	if err != nil {
		return 0, err
	}
	skip := "^(" + strings.Join(names, "|") + ")$"
	if was := flag.Lookup("test.skip").Value.String(); was != "" {
		if strings.Contains(was, "/") {
			// go test splits a -skip on "/" into levels: the cluster tests' names would
			// then be matched against subtests only, and they would run without a cluster.
			return 0, fmt.Errorf("-skip %q names subtests; drop -short or the subtest part", was)
		}
		skip = was + "|" + skip
	}
	return len(names), flag.Set("test.skip", skip)
}

// externalTests names the Test functions of the _test package's files in dir, sorted.
func externalTests(dir string) ([]string, error) {
	files, err := gosource.Parse(dir, true)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, f := range files {
		if !strings.HasSuffix(f.Name.Name, "_test") {
			continue
		}
		for _, d := range f.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil && testName.MatchString(fn.Name.Name) {
				names = append(names, fn.Name.Name)
			}
		}
	}
	slices.Sort(names)
	return names, nil
}

// testName is what go test takes for a test function's name.
var testName = regexp.MustCompile(`^Test([^a-z].*)?$`)
