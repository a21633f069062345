package pool

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"
)

// sourceFile is one of the package's non-test Go files, parsed.
type sourceFile struct {
	name string
	ast  *ast.File
}

// packageSources parses the package's non-test Go files, for the tests
// that hold the code itself to a rule (who ends requests, who touches the
// request table's maps, which fields are set after publication, which
// functions doc.go names).
func packageSources(t *testing.T) (*token.FileSet, []sourceFile) {
	t.Helper()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var files []sourceFile
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, sourceFile{name, f})
	}
	return fset, files
}

// exprString renders an identifier or a selector chain (b.reqs.in), "?"
// for anything else.
func exprString(x ast.Expr) string {
	switch v := x.(type) {
	case *ast.Ident:
		return v.Name
	case *ast.SelectorExpr:
		return exprString(v.X) + "." + v.Sel.Name
	}
	return "?"
}
