package plan

import (
	"flag"
	"fmt"
	"go/ast"
	"go/token"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/health"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/observe"
	"github.com/middleware-operator/middleware-operator/tests/gosource"
)

// seenKinds are the step kinds NextStep chose in this package's tests (nextStepSeen).
var seenKinds sync.Map

// nextStepSeen is NextStep, noting the kind it chose for the guard in TestMain.
func nextStepSeen(spec Desired, s observe.Snapshot, h health.Health) Step {
	step := NextStep(spec, s, h)
	seenKinds.Store(step.Kind, true)
	if step.Behind != nil { // a side step (coverage, announce) goes first
		seenKinds.Store(step.Behind.Kind, true)
	}
	return step
}

// TestMain runs the tests, then, when all of them ran (no -run), fails unless every step
// kind the package declares was chosen by NextStep in some table row: a new kind cannot
// land without a test that shows when the planner picks it.
func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if code == 0 && flag.Lookup("test.run").Value.String() == "" {
		kinds, err := declaredKinds(".")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		var missing []string
		for _, k := range kinds {
			if _, ok := seenKinds.Load(k); !ok {
				missing = append(missing, string(k))
			}
		}
		if len(missing) > 0 {
			fmt.Fprintf(os.Stderr, "FAIL: NextStep chose none of these step kinds in any test (add a table row that shows when): %s\n", strings.Join(missing, ", "))
			code = 1
		}
	}
	os.Exit(code)
}

// declaredKinds are the values of the StepKind constants in dir's non-test files.
func declaredKinds(dir string) ([]StepKind, error) {
	files, err := gosource.Parse(dir, false)
	if err != nil {
		return nil, err
	}
	var kinds []StepKind
	for _, file := range files {
		for _, d := range file.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "StepKind" {
					continue
				}
				for _, v := range vs.Values {
					if lit, ok := v.(*ast.BasicLit); ok {
						s, err := strconv.Unquote(lit.Value)
						if err != nil {
							return nil, err
						}
						kinds = append(kinds, StepKind(s))
					}
				}
			}
		}
	}
	slices.Sort(kinds)
	if len(kinds) < 20 {
		return nil, fmt.Errorf("found only %d StepKind constants: the guard's parser misses some", len(kinds))
	}
	return kinds, nil
}
