package pool

import (
	"go/ast"
	"maps"
	"slices"
	"strings"
	"testing"
)

// A legacy HTTP session's GET stream routes each message by what its
// maker told of it (outFacts), never by parsing the message again (doc.go:
// "nothing is parsed again"). The stream's code is toStream and
// httpFront.listen, and every method of httpSession they reach; none of
// it calls jsonrpc.Parse or ParseStrict, but on a line the same function
// has just built with a jsonrpc.Append* call (refuse parses the error it
// answers in the client's place, for the asker to take as the client's
// answer: it reads nothing of a stream line).
func TestStreamRoutesWithoutParsing(t *testing.T) {
	fset, files := packageSources(t)
	methods := map[string]*ast.FuncDecl{} // httpSession's, by name
	var listen *ast.FuncDecl
	for _, f := range files {
		for _, d := range f.ast.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv == nil || fn.Body == nil {
				continue
			}
			switch recv := recvType(fn); {
			case recv == "httpSession":
				methods[fn.Name.Name] = fn
			case recv == "httpFront" && fn.Name.Name == "listen":
				listen = fn
			}
		}
	}
	if methods["toStream"] == nil || listen == nil {
		t.Fatalf("toStream (%v) or httpFront.listen (%v) is not found", methods["toStream"] != nil, listen != nil)
	}
	reached := map[string]bool{}
	todo := []*ast.FuncDecl{methods["toStream"], listen}
	for len(todo) > 0 {
		fn := todo[0]
		todo = todo[1:]
		for _, p := range parsesOfStreamLines(fn) {
			t.Errorf("%s: %s calls %s: the stream routes by what the message's maker told (outFacts), not by parsing it again",
				fset.Position(p.at), fn.Name.Name, p.what)
		}
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == "hs" && methods[sel.Sel.Name] != nil && !reached[sel.Sel.Name] {
				reached[sel.Sel.Name] = true
				todo = append(todo, methods[sel.Sel.Name])
			}
			return true
		})
	}
	for _, want := range []string{"refuse", "dropUnwrittenLocked", "keepAsked", "next", "putBack", "endStream"} {
		if !reached[want] {
			t.Errorf("the walk from toStream and listen did not reach httpSession.%s: it reached %v", want, slices.Sorted(maps.Keys(reached)))
		}
	}
}

// recvType is the name of fn's receiver type, pointer or not.
func recvType(fn *ast.FuncDecl) string {
	x := fn.Recv.List[0].Type
	if star, ok := x.(*ast.StarExpr); ok {
		x = star.X
	}
	if id, ok := x.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

// parsesOfStreamLines are fn's calls of jsonrpc.Parse or ParseStrict but
// on a variable fn assigned from a jsonrpc.Append* call (a message fn
// built itself).
func parsesOfStreamLines(fn *ast.FuncDecl) []inlineRewrite {
	built := map[string]bool{}
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		if as, ok := n.(*ast.AssignStmt); ok && len(as.Lhs) == len(as.Rhs) {
			for i, r := range as.Rhs {
				call, ok := r.(*ast.CallExpr)
				id, isID := as.Lhs[i].(*ast.Ident)
				if ok && isID && strings.HasPrefix(calleeName(call), "jsonrpc.Append") {
					built[id.Name] = true
				}
			}
		}
		return true
	})
	var found []inlineRewrite
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		switch name := calleeName(call); name {
		case "jsonrpc.Parse", "jsonrpc.ParseStrict":
			if id, ok := call.Args[0].(*ast.Ident); ok && built[id.Name] {
				return true
			}
			found = append(found, inlineRewrite{call.Pos(), name + "(" + exprString(call.Args[0]) + ")"})
		}
		return true
	})
	return found
}
