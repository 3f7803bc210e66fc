package plan

import (
	"go/ast"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/middleware-operator/middleware-operator/tests/gosource"
)

// TestEveryStepKindIsExpectedByATableRow: each StepKind the package declares is the step
// some planner test expects (want: StepX, or a check of a step's Kind against it), so a
// new kind cannot land without a row that shows when the planner chooses it.
func TestEveryStepKindIsExpectedByATableRow(t *testing.T) {
	files, err := gosource.Parse(".", false)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, f := range files {
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, s := range g.Specs {
				v := s.(*ast.ValueSpec)
				if id, ok := v.Type.(*ast.Ident); ok && id.Name == "StepKind" {
					for _, n := range v.Names {
						kinds = append(kinds, n.Name)
					}
				}
			}
		}
	}
	if len(kinds) < 30 {
		t.Fatalf("found %d StepKind constants, want every one (the parse missed them)", len(kinds))
	}
	tests, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	var src []byte
	for _, name := range tests {
		if name == "stepkinds_test.go" {
			continue
		}
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		src = append(src, b...)
	}
	for _, k := range kinds {
		expected := regexp.MustCompile(`(want[A-Za-z]*:\s*|Kind [!=]= )` + regexp.QuoteMeta(k) + `\b`)
		if !expected.Match(src) {
			t.Errorf("no planner test expects %s: add a table row whose want is %s", k, k)
		}
	}
	t.Logf("%d step kinds, each expected by a row", len(kinds))
}
