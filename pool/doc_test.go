package pool

import (
	"go/ast"
	"os"
	"regexp"
	"testing"
)

// The routing table in doc.go names the functions that implement each
// rule: every name must be a function or method of this package, so that
// a rename or a removal cannot leave the table stale.
func TestRoutingTableNamesRealFunctions(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	_, files := packageSources(t)
	defined := map[string]bool{}
	for _, f := range files {
		for _, d := range f.ast.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok {
				continue
			}
			name := fn.Name.Name
			if fn.Recv != nil && len(fn.Recv.List) == 1 {
				typ := fn.Recv.List[0].Type
				if star, ok := typ.(*ast.StarExpr); ok {
					typ = star.X
				}
				if id, ok := typ.(*ast.Ident); ok {
					name = id.Name + "." + name
				}
			}
			defined[name] = true
		}
	}
	refs := regexp.MustCompile(`\[([A-Za-z]+(?:\.[A-Za-z]+)?)\]`).FindAllStringSubmatch(string(doc), -1)
	if len(refs) < 40 {
		t.Fatalf("the routing table names only %d functions", len(refs))
	}
	for _, r := range refs {
		if !defined[r[1]] {
			t.Errorf("doc.go names %s, which is not a function of package pool", r[1])
		}
	}
}
