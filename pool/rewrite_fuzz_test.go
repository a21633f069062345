package pool

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"testing"

	"github.com/switchboard-mcp/switchboard/pool/jsonrpc"
)

// FuzzRewriteRequest: whatever request a client sends that the pool
// accepts, and whatever _meta the pool adds, the child gets valid JSON
// with each key once in the envelope, params and params._meta, the pool
// id and token, the pool's _meta members as the pool set them, and every
// other member of the client's as it was.
func FuzzRewriteRequest(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","_meta":null}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","_meta":[1]}}`,
		`{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"_meta":{"progressToken":"p","io.modelcontextprotocol/clientCapabilities":{"sampling":{}}},"name":"t"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/logLevel":"debug","a":{"b":1}}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol\/protocolVersion":"x"}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"x","params":[1,{"_meta":null}]}`,
	} {
		for which := range uint8(4) {
			f.Add([]byte(s), which)
		}
	}
	const pv, cc, ci, ll = `"io.modelcontextprotocol/protocolVersion":"2026-07-28"`, `"io.modelcontextprotocol/clientCapabilities":{"roots":{}}`,
		`"io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"}`, `"io.modelcontextprotocol/logLevel":"info"`
	metas := [][]byte{nil, []byte(pv), []byte(pv + "," + cc + "," + ci), []byte(pv + "," + cc + "," + ci + "," + ll)}
	f.Fuzz(func(t *testing.T, line []byte, which uint8) {
		msg, err := jsonrpc.Parse(line)
		if err != nil || jsonrpc.Strict(&msg) != nil || msg.Kind != jsonrpc.KindRequest {
			return
		}
		meta := metas[int(which)%len(metas)]
		in := rewriteRequest(&msg, 10, meta)
		if !json.Valid(in.line) {
			t.Fatalf("invalid JSON: %s", in.line)
		}
		if err := duplicateKey(in.line); err != nil {
			t.Fatalf("%v: %s", err, in.line)
		}
		sent, got := objectOf(t, line), objectOf(t, in.line)
		if string(got["id"]) != "10" {
			t.Fatalf("id %s", got["id"])
		}
		wantParams := sent["params"] != nil || meta != nil
		if len(got) != len(sent)+boolInt(sent["params"] == nil && wantParams) {
			t.Fatalf("members %d, sent %d: %s", len(got), len(sent), in.line)
		}
		for k, v := range sent {
			if k != "id" && k != "params" && !bytes.Equal(got[k], v) {
				t.Fatalf("%s: %s, sent %s", k, got[k], v)
			}
		}
		if !wantParams {
			return
		}
		if sent["params"] != nil && sent["params"][0] != '{' {
			if !bytes.Equal(got["params"], sent["params"]) {
				t.Fatalf("params %s, sent %s", got["params"], sent["params"])
			}
			return
		}
		sentParams, gotParams := map[string]json.RawMessage{}, objectOf(t, got["params"])
		if sent["params"] != nil {
			sentParams = objectOf(t, sent["params"])
		}
		if len(gotParams) != len(sentParams)+boolInt(sentParams["_meta"] == nil && meta != nil) {
			t.Fatalf("params members %d, sent %d: %s", len(gotParams), len(sentParams), in.line)
		}
		for k, v := range sentParams {
			if k != "_meta" && !bytes.Equal(gotParams[k], v) {
				t.Fatalf("params.%s: %s, sent %s", k, gotParams[k], v)
			}
		}
		sentMeta := map[string]json.RawMessage{}
		if m := sentParams["_meta"]; m != nil && m[0] == '{' {
			sentMeta = objectOf(t, m)
		} else if meta == nil {
			if !bytes.Equal(gotParams["_meta"], m) {
				t.Fatalf("_meta %s, sent %s", gotParams["_meta"], m)
			}
			return
		}
		want := map[string]json.RawMessage{}
		for k, v := range sentMeta {
			want[k] = v
		}
		if _, ok := sentMeta["progressToken"]; ok {
			want["progressToken"] = json.RawMessage("10")
		}
		if meta != nil {
			for k, v := range objectOf(t, append(append([]byte{'{'}, meta...), '}')) {
				want[k] = v
			}
		}
		gotMeta := objectOf(t, gotParams["_meta"])
		if len(gotMeta) != len(want) {
			t.Fatalf("_meta %s, want %d members", gotParams["_meta"], len(want))
		}
		for k, v := range want {
			if !bytes.Equal(gotMeta[k], v) {
				t.Fatalf("_meta.%s: %s, want %s", k, gotMeta[k], v)
			}
		}
	})
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// objectOf is the members of the JSON object b, each value as written.
func objectOf(t *testing.T, b []byte) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil || m == nil {
		t.Fatalf("not an object (%v): %s", err, b)
	}
	return m
}

// duplicateKey reports a key written twice in the envelope of the JSON
// message line, its params or its params._meta: the levels the pool
// reads and rewrites.
func duplicateKey(line []byte) error {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	var walk func(path string) error
	walk = func(path string) error {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		switch t {
		case json.Delim('['):
			for dec.More() {
				if err := walk(path + "[]"); err != nil {
					return err
				}
			}
			_, err = dec.Token()
			return err
		case json.Delim('{'):
			seen := map[string]bool{}
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return err
				}
				key := k.(string)
				if seen[key] && (path == "" || path == ".params" || path == ".params._meta") {
					return fmt.Errorf("duplicate key %q in %q", key, path)
				}
				seen[key] = true
				if err := walk(path + "." + key); err != nil {
					return err
				}
			}
			_, err = dec.Token()
			return err
		}
		return nil
	}
	if err := walk(""); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("after the message: %v", err)
	}
	return nil
}

// FuzzCapabilityViews: whatever capabilities a child (or a client)
// writes, each view is JSON when they are, takes out every member it
// must, however its key is written, and keeps every other member as it
// was written; capabilities that are not an object stay as they are.
func FuzzCapabilityViews(f *testing.F) {
	for _, s := range []string{
		`{"tools":{"listChanged":true},"logging":{},"experimental":{"n":"<a&b> caf\u00e9"}}`,
		`{ "resources" : { "subscribe" : true , "listChanged":true }, "prompts":{"listChanged":false,"x":1} }`,
		`{"tasks":{"list":{}},"extensions":{"io.modelcontextprotocol/tasks":{},"x/y":{}},"extensions":{"io.modelcontextprotocol/t\u0061sks":1}}`,
		`{"l\u006fgging":{},"logging":null,"tools":true}`,
		`null`, `[{"logging":{}}]`, `{"tools":`, `"x"`, ``,
	} {
		f.Add([]byte(s))
	}
	type view struct {
		see  func([]byte) []byte
		gone func(in, out map[string]json.RawMessage) error // what must be out of out
		kept []string                                       // the members of in kept as written
	}
	lacks := func(obj json.RawMessage, keys ...string) error {
		var m map[string]json.RawMessage
		if json.Unmarshal(obj, &m) != nil {
			return nil // not an object: not the view's to edit
		}
		for _, k := range keys {
			if _, ok := m[k]; ok {
				return fmt.Errorf("%s kept in %s", k, obj)
			}
		}
		return nil
	}
	views := map[string]view{
		"legacy": {func(b []byte) []byte { return legacyView(b) }, func(_, out map[string]json.RawMessage) error {
			for _, k := range []string{"tools", "prompts", "resources"} {
				if err := lacks(out[k], "listChanged", "subscribe"); err != nil {
					return err
				}
			}
			return nil
		}, []string{"logging", "experimental", "tasks", "extensions"}},
		"unlogged": {func(b []byte) []byte { return unloggedView(b) }, func(_, out map[string]json.RawMessage) error {
			return lacks(mustJSON(out), "logging")
		}, []string{"tools", "prompts", "resources", "experimental", "tasks", "extensions"}},
		"untasked": {untaskedCaps, func(_, out map[string]json.RawMessage) error {
			if err := lacks(mustJSON(out), "tasks"); err != nil {
				return err
			}
			return lacks(out["extensions"], tasksExtension)
		}, []string{"tools", "prompts", "resources", "experimental", "logging"}},
	}
	f.Fuzz(func(t *testing.T, caps []byte) {
		in := bytes.Clone(caps)
		var inMap map[string]json.RawMessage
		object := jsonrpc.Valid(caps) && json.Unmarshal(caps, &inMap) == nil && inMap != nil // JSON as the pool reads it
		for name, v := range views {
			out := v.see(caps)
			switch {
			case !bytes.Equal(caps, in):
				t.Fatalf("%s: the input was changed", name)
			case !object:
				if !bytes.Equal(out, caps) {
					t.Fatalf("%s: %q is not an object, made %q", name, caps, out)
				}
				continue
			case !json.Valid(out):
				t.Fatalf("%s: invalid JSON %s of %s", name, out, caps)
			}
			var outMap map[string]json.RawMessage
			if json.Unmarshal(out, &outMap) != nil || outMap == nil {
				t.Fatalf("%s: not an object: %s", name, out)
			}
			if err := v.gone(inMap, outMap); err != nil {
				t.Fatalf("%s: %v: %s of %s", name, err, out, caps)
			}
			for _, k := range v.kept {
				if !bytes.Equal(inMap[k], outMap[k]) {
					t.Fatalf("%s: %s changed: %s, was %s", name, k, outMap[k], inMap[k])
				}
			}
		}
	})
}

func mustJSON(m map[string]json.RawMessage) json.RawMessage {
	b, _ := json.Marshal(m)
	return b
}

// FuzzAssembledResults: the results the pool builds around a child's
// pieces are JSON whatever the pieces, and hold each piece that is JSON
// as it was written.
func FuzzAssembledResults(f *testing.F) {
	f.Add([]byte(`{"tools":{}, "a":"<&>"}`), []byte(`{"name":"s"}`), "hi <b>", []byte(`"<L&1>"`))
	f.Add([]byte(`{"tools"`), []byte(``), "", []byte(`1.0`))
	f.Add([]byte(`null`), []byte(`[`), "\u2028\x00\xff", []byte(`"\u0041"`))
	f.Fuzz(func(t *testing.T, caps, info []byte, text string, piece []byte) {
		for name, out := range map[string][]byte{
			"initialize":     initializeResultJSON("2025-11-25", caps, info, text),
			"discover":       discoverResultJSON([]string{Modern}, 0, text, caps, info, text),
			"input required": inputRequiredResult(text, piece, text, serverInfoMember(info)),
			"tagged":         taggedParams(caps, []byte(`"L"`)),
		} {
			if !json.Valid(out) {
				t.Fatalf("%s: invalid JSON %q", name, out)
			}
		}
		if jsonrpc.Valid(caps) && !bytes.Contains(initializeResultJSON("x", caps, info, text), caps) {
			t.Fatalf("the capabilities %q changed", caps)
		}
		if jsonrpc.Valid(piece) && !bytes.Contains(inputRequiredResult("k", piece, "s", nil), piece) {
			t.Fatalf("the question %q changed", piece)
		}
	})
}
