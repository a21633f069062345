package pool

import (
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool/jsonrpc"
)

// Every row of the error table makes a well-formed error: a code in a
// range JSON-RPC or MCP allows, a message its arguments fill, and for an
// error about a request, data saying whether it may have run exactly as
// the caller said, whether it may be sent again, and the server.
func TestErrorTable(t *testing.T) {
	args := map[poolError][]any{
		errTimeout:             {"srv", "tools/call", 2 * time.Second},
		errTimeoutRetired:      {"srv", "tools/call", 2 * time.Second, errServerRemoved},
		errChildDied:           {"srv", "exit status 3", "tools/call", "; last stderr: boom"},
		errChildStopped:        {"srv", errMadeRoom, "tools/call"},
		errServerFailed:        {"srv", 5, time.Minute, "exit status 3", ""},
		errServerStopped:       {"srv", errIdle, "tools/call"},
		errPoolRestarting:      {"srv", "tools/call"},
		errListenRestarted:     {"srv"},
		errCancelledByUser:     {"srv", "tools/call"},
		errAnswerTooLarge:      {"srv", 70 << 20, 64 << 20},
		errMissingCapability:   {"srv", "sampling"},
		errServerBusy:          {"srv", 65536},
		errHeldCallEnded:       nil,
		errQuestionsUnanswered: {"srv", 2 * time.Second},
		errQuestionRefused:     {"srv", "no"},
		errCannotAsk:           {"srv", "sampling/createMessage"},
		errNoStreamToAsk:       {"srv", "elicitation/create"},
		errCannotRetry:         nil,
		errTooManyRounds:       {"srv", 32},
		errUnaskedTask:         {"srv", "tools/call"},
		errClosedInputAsked:    {"srv"},
		errSessionBusy:         {8192},
		errSessionBytes:        {100, 200, 250},
		errSessionSubs:         {4096, 1, 4096},
		errStatelessBusy:       {"srv", 8192},
		errStatelessBytes:      {"srv", 100, 200, 250},
		errStatelessSubs:       {"srv", 4096, 1, 4096},
		errListenTooLarge:      {4095, 1024, 4096},
		errHeldForRoots:        {100, 200, 250},
		errHeldNotes:           {4096},
		errDuplicateID:         {[]byte(`"1"`)},
		errMessageTooLarge:     {64 << 20},
		errNotOurState:         nil,
		errUnknownState:        nil,
		errUnreadableHeld:      nil,
		errBadParams:           {"initialize", "unexpected end of JSON input"},
		errNotInitialized:      {"tools/list"},
		errParse:               {jsonrpc.ErrParse},
		errInvalid:             {jsonrpc.ErrInvalid},
		errServerUnavailable:   {"start srv: exec: not found"},
		errServerDisabled:      {`server is disabled: "srv"`},
		errNotConfigured:       {`no such server "srv" (it was removed from the config)`},
		errCannotStart:         {"srv", "working directory /x does not exist"},
		errStartTimeout:        {"srv", "1m0s", " (the last child: exit status 1)"},
		errServerGone:          {"srv", "removed from the configuration"},
		errRootsChildren:       {"srv", 32},
		errSessionChildren:     {"srv", 32},
		errNoLogging:           {"srv"},
		errNoTasks:             {"srv"},
		errNoClient:            {"sampling/createMessage"},
		errAskedClientLeft:     nil,
		errClientUndeclared:    {"sampling"},
		errAskedClosedInput:    nil,
		errAskAmbiguous:        {"srv", "elicitation/create"},
		errNotLocal:            {"evil.example:7777"},
		errOriginRefused:       {"http://localhost:3000"},
		errNoToken:             nil,
		errNotJSON:             nil,
		errTokenRevoked:        {errTokenRotated},
		errNoEndpoint:          nil,
		errNoServer:            {`no such server "srv" (no servers are configured)`},
		errShuttingDown:        {errPoolClosing},
		errSessionVersion:      {"1999-01-01", Modern, "2025-11-25, 2025-06-18"},
		errNeedsSessionID:      {"GET"},
		errUnknownSession:      nil,
		errMethodNotAllowed:    {"PUT"},
		errBodiesBusy:          {errBodyBudget},
		errReadBody:            {"unexpected EOF"},
		errBatch:               nil,
		errNoSession:           {errTooManySessions},
		errNoSessionID:         nil,
		errPostSessionEnded:    nil,
		errFellBehind:          {errSlowHTTPClient},
		errNoStreaming:         nil,
		errStreamOpen:          nil,
		errNoParamsMeta:        nil,
		errNoMeta:              nil,
		errMetaLacks:           {metaProtocolVersion},
		errRemovedMethod:       {"ping", Modern},
		errBadLogLevel:         {metaLogLevel, `"loud"`, "debug, info"},
		errUnsupportedVersion:  {"v999", Modern},
		errHeaderMissing:       {"Mcp-Method", "tools/call"},
		errHeaderMismatch:      {"Mcp-Method", "tools/list", "tools/call"},
		errParamAmbiguous:      {"arguments.a"},
		errParamNotInBody:      {"Mcp-Param-A", "1", "arguments.a"},
	}
	for kind := poolError(1); int(kind) < len(errorTable); kind++ {
		a, ok := args[kind]
		if !ok {
			t.Errorf("row %d has no sample arguments in this test", kind)
			continue
		}
		row := errorTable[kind]
		for _, ran := range []bool{false, true} {
			e := newError(kind, ran, "srv", a...)
			if e.Code != row.code || e.Code == 0 {
				t.Errorf("row %d: code %d", kind, e.Code)
			}
			if c := e.Code; !(c <= -32600 && c >= -32700) && !(c <= -32000 && c >= -32022) {
				t.Errorf("row %d: code %d is outside JSON-RPC's and MCP's ranges", kind, c)
			}
			if e.Message == "" || strings.Contains(e.Message, "%!") {
				t.Errorf("row %d: message %q", kind, e.Message)
			}
			if row.notRun != "" && (ran == (e.Message == mustFormat(row.notRun, a))) {
				t.Errorf("row %d, ran %v: message %q", kind, ran, e.Message)
			}
			if s := row.status; s != 0 && (s < 400 || s > 599 || http.StatusText(s) == "" || row.aboutRequest) {
				t.Errorf("row %d: HTTP status %d (about a request: %v)", kind, s, row.aboutRequest)
			}
			data, _ := e.Data.(map[string]any)
			if !row.aboutRequest {
				if data != nil {
					t.Errorf("row %d: data %v on an error about no request", kind, data)
				}
				continue
			}
			if data["mayHaveExecuted"] != ran || data["retryable"] != row.retryable || data["server"] != "srv" {
				t.Errorf("row %d, ran %v: data %v", kind, ran, data)
			}
		}
	}
	// Extra members join the data; they never replace what it says of the
	// request.
	e := newErrorData(errServerFailed, true, "srv", map[string]any{"state": StateFailed}, args[errServerFailed]...)
	if d := e.Data.(map[string]any); d["state"] != StateFailed || d["mayHaveExecuted"] != true {
		t.Errorf("extra data: %v", d)
	}
}

// An error that quotes a stop reason after which the server takes no
// requests (removed, disabled) says it is not retryable, whatever its
// row says; other reasons leave the row's word.
func TestFinalStopIsNotRetryable(t *testing.T) {
	for _, tc := range []struct {
		kind      poolError
		args      []any
		retryable bool
	}{
		{errServerGone, []any{"srv", errServerRemoved}, false},
		{errServerStopped, []any{"srv", errServerRemoved, "tools/call"}, false},
		{errChildStopped, []any{"srv", disabledStop(ServerConfig{Name: "srv", Disabled: true}), "tools/call"}, false},
		{errChildStopped, []any{"srv", disabledStop(ServerConfig{Name: "srv", Disabled: true, NotStarted: "no K"}), "tools/call"}, false},
		{errServerGone, []any{"srv", errIdle}, true},
		{errChildStopped, []any{"srv", errConfigChanged, "tools/call"}, true},
	} {
		e := newError(tc.kind, false, "srv", tc.args...)
		if d := e.Data.(map[string]any); d["retryable"] != tc.retryable {
			t.Errorf("%s: retryable %v, want %v", e.Message, d["retryable"], tc.retryable)
		}
	}
}

// A server disabled, held back or removed refuses a request with an
// error that says, in its data, that it did not run and cannot be sent
// again with success, and names the server; other failures to reach a
// child keep their word and name it too.
func TestAsRPCErrorSaysWhetherToRetry(t *testing.T) {
	for _, tc := range []struct {
		err       error
		msg       string
		retryable bool
	}{
		{disabledError(ServerConfig{Name: "srv", Disabled: true}), `server is disabled: "srv"`, false},
		{disabledError(ServerConfig{Name: "srv", Disabled: true, NotStarted: "mcpServers.srv.env.K: environment variable K is not set"}),
			`server "srv" is not started: mcpServers.srv.env.K: environment variable K is not set`, false},
		{removedError("srv"), `no such server "srv" (it was removed from the config)`, false},
		{fmt.Errorf("server %q is not running", "srv"), `server "srv" is not running`, true},
	} {
		e := asRPCError(tc.err, "srv")
		d, _ := e.Data.(map[string]any)
		if e.Message != tc.msg || e.Code != jsonrpc.CodeBackendUnavailable ||
			d["retryable"] != tc.retryable || d["mayHaveExecuted"] != false || d["server"] != "srv" {
			t.Errorf("%v: %d %q %v", tc.err, e.Code, e.Message, d)
		}
	}
}

func mustFormat(format string, args []any) string { return fmt.Sprintf(format, args...) }

// Every error the pool answers is built from the table: outside
// errors.go no code builds a jsonrpc.Error of its own, hands a JSON-RPC
// code (a jsonrpc.Code* constant, one of the package's code* constants,
// or a literal from -32768 to -32000) to a call, or writes one as a
// literal. Reading a code (a comparison, a case) is not building one.
func TestErrorsComeFromTheTable(t *testing.T) {
	fset, files := packageSources(t)
	if !slices.ContainsFunc(files, func(f sourceFile) bool { return f.name == "errors.go" }) {
		t.Fatalf("errors.go is not among the %d files read", len(files))
	}
	codes := map[string]bool{} // the package's own code constants
	for _, f := range files {
		for _, d := range f.ast.Decls {
			if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.CONST {
				for _, spec := range g.Specs {
					vs := spec.(*ast.ValueSpec)
					for i, v := range vs.Values {
						if isCodeLiteral(v) {
							codes[vs.Names[i].Name] = true
						}
					}
				}
			}
		}
	}
	isCode := func(e ast.Expr) bool {
		switch e := ast.Unparen(e).(type) {
		case *ast.SelectorExpr:
			x, ok := e.X.(*ast.Ident)
			return ok && x.Name == "jsonrpc" && strings.HasPrefix(e.Sel.Name, "Code")
		case *ast.Ident:
			return codes[e.Name]
		}
		return isCodeLiteral(e)
	}
	for _, f := range files {
		if f.name == "errors.go" {
			continue
		}
		ast.Inspect(f.ast, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.GenDecl:
				return n.Tok != token.CONST // declaring a code builds no error
			case *ast.CompositeLit:
				if isJSONRPCError(n.Type) {
					t.Errorf("%s builds a jsonrpc.Error of its own: name a row of errors.go's table", fset.Position(n.Pos()))
				}
			case *ast.CallExpr:
				for _, arg := range n.Args {
					if isCode(arg) {
						t.Errorf("%s passes a JSON-RPC code to %s: name a row of errors.go's table", fset.Position(arg.Pos()), types.ExprString(n.Fun))
					}
				}
			case *ast.UnaryExpr:
				if isCodeLiteral(n) {
					t.Errorf("%s writes JSON-RPC code %s: name a row of errors.go's table, or a constant", fset.Position(n.Pos()), types.ExprString(n))
				}
			}
			return true
		})
	}
}

// isJSONRPCError reports whether e names the type jsonrpc.Error.
func isJSONRPCError(e ast.Expr) bool {
	sel, ok := e.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	x, ok := sel.X.(*ast.Ident)
	return ok && x.Name == "jsonrpc" && sel.Sel.Name == "Error"
}

// isCodeLiteral reports whether e is a literal JSON-RPC error code: an
// integer from -32768 to -32000 (JSON-RPC's reserved range).
func isCodeLiteral(e ast.Expr) bool {
	u, ok := ast.Unparen(e).(*ast.UnaryExpr)
	if !ok || u.Op != token.SUB {
		return false
	}
	lit, ok := ast.Unparen(u.X).(*ast.BasicLit)
	if !ok || lit.Kind != token.INT {
		return false
	}
	v, err := strconv.ParseInt(lit.Value, 0, 64)
	return err == nil && v >= 32000 && v <= 32768
}
