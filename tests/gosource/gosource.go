// Package gosource parses a folder's Go files for tests that check the code against itself
// (the planner's step kinds, the controllers' cluster tests).
package gosource

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
)

// Parse parses the Go files of dir whose names keep accepts (all when keep is nil), in the
// order of their names.
func Parse(dir string, keep func(name string) bool) ([]*ast.File, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range names {
		if keep != nil && !keep(name) {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	return files, nil
}
