package redis

import (
	"go/ast"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/middleware-operator/middleware-operator/tests/gosource"
)

// TestForgetClusterForgetsEveryMemory: every field of RedisClusterReconciler whose type
// can forget a cluster (a Forget, forget or Stop method of a types.NamespacedName: a
// per-cluster memory) is
// reached by forgetCluster, directly or through an accessor it calls (certKeeper,
// backgroundLoads). A memory added without its forget would keep every deleted cluster's
// entry for the life of the process, as the nodes' counts and the stale-status guard did.
func TestForgetClusterForgetsEveryMemory(t *testing.T) {
	files, err := gosource.Parse(".", false)
	if err != nil {
		t.Fatal(err)
	}
	fields := map[string]ast.Expr{} // unexported field -> type
	methods := map[string]*ast.FuncDecl{}
	imports := map[string]string{} // package name -> import path
	for _, f := range files {
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			name := filepath.Base(path)
			if imp.Name != nil {
				name = imp.Name.Name
			}
			imports[name] = path
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv != nil && receiverName(d.Recv.List[0].Type) == "RedisClusterReconciler" {
					methods[d.Name.Name] = d
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					ts, ok := s.(*ast.TypeSpec)
					if !ok || ts.Name.Name != "RedisClusterReconciler" {
						continue
					}
					for _, fl := range ts.Type.(*ast.StructType).Fields.List {
						for _, n := range fl.Names {
							if !n.IsExported() {
								fields[n.Name] = fl.Type
							}
						}
					}
				}
			}
		}
	}
	forget := methods["forgetCluster"]
	if forget == nil || len(fields) < 10 {
		t.Fatalf("forgetCluster %v, %d unexported fields: the parse missed them", forget != nil, len(fields))
	}
	reached := fieldsOf(forget)
	for m := range reached {
		if accessor := methods[m]; accessor != nil { // r.certKeeper().Forget(key) reaches r.certs
			for f := range fieldsOf(accessor) {
				reached[f] = true
			}
		}
	}
	memories := 0
	for name, typ := range fields {
		pkg, typeName := ".", receiverName(typ)
		if sel, ok := stripPointer(typ).(*ast.SelectorExpr); ok {
			path, ok := imports[sel.X.(*ast.Ident).Name]
			rel, inModule := strings.CutPrefix(path, "github.com/middleware-operator/middleware-operator/")
			if !ok || !inModule {
				continue // the standard library's or another module's: no memory of clusters
			}
			pkg, typeName = filepath.Join("..", "..", rel), sel.Sel.Name
		}
		if !canForget(t, pkg, typeName) {
			continue
		}
		memories++
		if !reached[name] {
			t.Errorf("field %s (%s) keeps something per cluster (it can forget one) but forgetCluster never forgets it", name, typeName)
		}
	}
	t.Logf("%d per-cluster memories, each forgotten with the cluster", memories)
	if memories < 10 {
		t.Errorf("%d per-cluster memories found, want the reconciler's dozen or more: the search is broken", memories)
	}
}

// fieldsOf are the names selected on the receiver r in fn's body (fields and methods).
func fieldsOf(fn *ast.FuncDecl) map[string]bool {
	out := map[string]bool{}
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if id, ok := sel.X.(*ast.Ident); ok && id.Name == "r" {
				out[sel.Sel.Name] = true
			}
		}
		return true
	})
	return out
}

// canForget reports whether the type typeName of the package in dir has a method Forget,
// forget or Stop of a cluster's key (one types.NamespacedName).
func canForget(t *testing.T, dir, typeName string) bool {
	t.Helper()
	files, err := gosource.Parse(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv == nil || receiverName(fd.Recv.List[0].Type) != typeName ||
				(fd.Name.Name != "Forget" && fd.Name.Name != "forget" && fd.Name.Name != "Stop") {
				continue
			}
			if params := fd.Type.Params.List; len(params) == 1 && len(params[0].Names) <= 1 {
				if sel, ok := params[0].Type.(*ast.SelectorExpr); ok && sel.Sel.Name == "NamespacedName" {
					return true
				}
			}
		}
	}
	return false
}

// stripPointer is typ without a leading *.
func stripPointer(typ ast.Expr) ast.Expr {
	if star, ok := typ.(*ast.StarExpr); ok {
		return star.X
	}
	return typ
}

// receiverName is the name of a local type expression (T or *T), "" for others.
func receiverName(typ ast.Expr) string {
	if id, ok := stripPointer(typ).(*ast.Ident); ok {
		return id.Name
	}
	return ""
}
