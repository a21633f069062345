package pool

import (
	"go/ast"
	"go/token"
	"strings"
	"testing"
)

// A struct is complete before it is shared. These fields are set where
// their struct is made, before any other goroutine can reach it, and
// never assigned after: the session's transport (newSession, from the
// front door's sessionSetup, the callbacks of a transport made with the
// session among them: sessionSetup.bind, before the session joins its
// server), a request's timer (register, under the
// request table's lock, before anyone can end the request and stop it),
// a round of questions' timer (armed once the round is registered, so
// that its end finds every question to take back, and so set and read
// only under the round's lock), a session's timer for its held requests
// (made by the first it holds, under the session's lock, as it is read).
// An assignment anywhere else is a field set after publication: a data
// race waiting for a schedule.
func TestFieldsSetBeforePublication(t *testing.T) {
	// field -> the functions that may assign it (by "file:func").
	allowed := map[string][]string{
		"closeConn": nil, "attached": nil, "hb": nil, "ledger": nil, "keepState": nil, "receiver": {"session.go:newSession"}, "resumed": nil,
		"sink": {"session.go:newSession"}, "stateless": {"exchange.go:newStatelessExchange"}, "out": {"session.go:newSession"},
		"timer": {"requests.go:register", "inputbridge.go:askLegacyClient", "roots.go:armHeldLocked"},
	}
	fset, files := packageSources(t)
	for _, f := range files {
		name := f.name
		for _, d := range f.ast.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			where := name + ":" + fn.Name.Name
			var locked, unlocked token.Pos // the last x.mu.Lock and x.mu.Unlock seen
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				if call, ok := n.(*ast.CallExpr); ok {
					if sel, ok := call.Fun.(*ast.SelectorExpr); ok && strings.HasSuffix(exprString(sel.X), ".mu") {
						switch sel.Sel.Name {
						case "Lock":
							locked = call.Pos()
						case "Unlock":
							unlocked = call.Pos()
						}
					}
				}
				as, ok := n.(*ast.AssignStmt)
				if !ok {
					return true
				}
				for _, lhs := range as.Lhs {
					sel, ok := lhs.(*ast.SelectorExpr)
					if !ok {
						continue
					}
					fns, watched := allowed[sel.Sel.Name]
					if !watched || exprString(sel.X) == "setup" { // a sessionSetup is not shared yet
						continue
					}
					permitted := false
					for _, a := range fns {
						permitted = permitted || a == where
					}
					if !permitted {
						t.Errorf("%s: %s.%s is assigned in %s, after its struct may be shared", fset.Position(as.Pos()),
							exprString(sel.X), sel.Sel.Name, where)
					}
					if where == "inputbridge.go:askLegacyClient" && (locked == 0 || unlocked > locked) {
						t.Errorf("%s: the round's timer is set outside the round's lock", fset.Position(as.Pos()))
					}
				}
				return true
			})
		}
	}
}
