package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"github.com/switchboard-mcp/switchboard/app/config/jsonedit"
)

// Problem is one thing wrong with a config, at a field path such as
// "mcpServers.memory.idleTimeout" (empty for the file as a whole).
type Problem struct {
	Field string
	Msg   string
}

func (p Problem) String() string {
	if p.Field == "" {
		return p.Msg
	}
	return p.Field + ": " + p.Msg
}

// Error lists every problem found in a config, so that one edit can fix
// them all instead of one per reload.
type Error struct {
	File     string // set by Load
	Problems []Problem
	// HistoryOff says the file, though it does not load, switches the
	// request history off: history.disabled reads true, free of problems
	// of its own. A running pool applies that at once (what a user turns
	// off for privacy must not wait for a typo elsewhere to be fixed);
	// nothing else of a broken file applies to it, and nothing that
	// records more (a pool that starts on it reads History instead).
	HistoryOff bool
	// History is the file's history settings when they read although the
	// file does not load: its JSON reads, and no problem is in its history
	// section (nor at the file as a whole, nor at a key that differs from
	// "history" in case only). A pool that starts on such a file, with no
	// other config to run, records as they say; nil when they are not
	// known, and nothing is recorded until a config loads.
	History *History
	// Unknown lists the fields Switchboard does not know (File.Unknown),
	// as far as the file reads: a misspelled field is often what is
	// wrong, and `config check` shows them with the problems.
	Unknown []string
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		b.WriteString(": ")
	}
	if len(e.Problems) == 1 {
		b.WriteString(e.Problems[0].String())
		return b.String()
	}
	fmt.Fprintf(&b, "%d problems: ", len(e.Problems))
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(p.String())
	}
	return b.String()
}

// problems gathers Problems while decoding and validating.
type problems struct{ list []Problem }

func (p *problems) add(field, format string, args ...any) {
	p.list = append(p.list, Problem{Field: field, Msg: fmt.Sprintf(format, args...)})
}

func (p *problems) err() error {
	if len(p.list) == 0 {
		return nil
	}
	return &Error{Problems: p.list}
}

// decodeFile reads the top level: known keys into the File, the rest into
// Extra.
func decodeFile(doc []byte, root *jsonedit.Value, p *problems) *File {
	f := &File{}
	if root.Kind != jsonedit.Object {
		p.add("", "the file must hold a JSON object ({...}), found a %s", root.Kind)
		return f
	}
	dupKeys("", doc, root.Members, p)
	hasServers := false
	for _, m := range root.Members {
		switch m.Key {
		case "mcpServers":
			hasServers = true
			if m.Value.Kind == jsonedit.Null {
				continue
			}
			if m.Value.Kind != jsonedit.Object {
				p.add("mcpServers", "expected an object of servers, found %s", article(m.Value.Kind))
				continue
			}
			f.Servers = make(map[string]Server, len(m.Value.Members))
			dupKeys("mcpServers", doc, m.Value.Members, p)
			for _, sm := range m.Value.Members {
				var s Server
				decodeStruct("mcpServers."+sm.Key, doc, sm.Value, &s, p)
				f.Servers[sm.Key] = s
			}
		case "http":
			decodeStruct("http", doc, m.Value, &f.HTTP, p)
		case "history":
			decodeStruct("history", doc, m.Value, &f.History, p)
		case "hangThreshold":
			decodeField("hangThreshold", doc, m.Value, reflect.ValueOf(&f.HangThreshold).Elem(), p)
		case "evictSlowClientsAfter":
			decodeField("evictSlowClientsAfter", doc, m.Value, reflect.ValueOf(&f.EvictSlowClientsAfter).Elem(), p)
		case "autostart":
			decodeStruct("autostart", doc, m.Value, &f.Autostart, p)
		case "maxInFlightPerSession":
			decodeField("maxInFlightPerSession", doc, m.Value, reflect.ValueOf(&f.MaxInFlightPerSession).Elem(), p)
		case "maxInFlightMiBPerSession":
			decodeField("maxInFlightMiBPerSession", doc, m.Value, reflect.ValueOf(&f.MaxInFlightMiBPerSession).Elem(), p)
		case "maxSubscriptionsPerSession":
			decodeField("maxSubscriptionsPerSession", doc, m.Value, reflect.ValueOf(&f.MaxSubscriptionsPerSession).Elem(), p)
		case "maxChildrenPerServer":
			decodeField("maxChildrenPerServer", doc, m.Value, reflect.ValueOf(&f.MaxChildrenPerServer).Elem(), p)
		case "servers":
			if m.Value.Kind == jsonedit.Object {
				// VS Code's mcp.json names its servers so; pasted here,
				// they would be kept unused and the pool would have none.
				p.add(m.Key, `VS Code's key: Switchboard's servers go under "mcpServers" (switchboard import --from vscode --file FILE converts a VS Code file)`)
				continue
			}
			fallthrough
		default:
			if k := foldMatch(m.Key, "mcpServers", "http", "history", "hangThreshold", "evictSlowClientsAfter", "autostart", "maxInFlightPerSession", "maxInFlightMiBPerSession",
				"maxSubscriptionsPerSession", "maxChildrenPerServer"); k != "" {
				p.add(m.Key, "unknown field; did you mean %q?", k)
				continue
			}
			if f.Extra == nil {
				f.Extra = map[string]json.RawMessage{}
			}
			f.Extra[m.Key] = bytes.Clone(m.Value.Raw(doc))
		}
	}
	if !hasServers {
		misspeltServers(root, f, p)
	}
	return f
}

// misspeltServers reports each object under a key Switchboard does not
// know, in a file without "mcpServers": the servers under a misspelt key
// (a search and replace gone wrong) would otherwise load as no servers,
// and a reload would end every one of them with nothing said. A file
// meant to have none says "mcpServers": {}.
func misspeltServers(root *jsonedit.Value, f *File, p *problems) {
	for _, m := range root.Members {
		if _, kept := f.Extra[m.Key]; kept && m.Value.Kind == jsonedit.Object {
			p.add(m.Key, `unknown field, and the file has no "mcpServers": are the servers meant to be here? (a file with no servers says "mcpServers": {})`)
		}
	}
}

// decodeStruct decodes the object v into the struct ptr points to, one
// field at a time so that every bad field is reported. Keys the struct
// does not name go to its Extra field.
func decodeStruct(at string, doc []byte, v *jsonedit.Value, ptr any, p *problems) {
	if v.Kind == jsonedit.Null {
		return
	}
	if v.Kind != jsonedit.Object {
		p.add(at, "expected an object, found %s", article(v.Kind))
		return
	}
	sv := reflect.ValueOf(ptr).Elem()
	fields := jsonFields(sv.Type())
	var extra map[string]json.RawMessage
	dupKeys(at, doc, v.Members, p)
	for _, m := range v.Members {
		if i, ok := fields[m.Key]; ok {
			decodeField(at+"."+m.Key, doc, m.Value, sv.Field(i), p)
			continue
		}
		names := make([]string, 0, len(fields))
		for n := range fields {
			names = append(names, n)
		}
		sort.Strings(names)
		if k := foldMatch(m.Key, names...); k != "" {
			p.add(at+"."+m.Key, "unknown field; did you mean %q?", k)
			continue
		}
		if extra == nil {
			extra = map[string]json.RawMessage{}
		}
		extra[m.Key] = bytes.Clone(m.Value.Raw(doc))
	}
	if f := sv.FieldByName("Extra"); f.IsValid() && extra != nil {
		f.Set(reflect.ValueOf(extra))
	}
}

// decodeField decodes one value into a field of a kind the config uses.
func decodeField(at string, doc []byte, v *jsonedit.Value, f reflect.Value, p *problems) {
	if v.Kind == jsonedit.Null {
		return
	}
	raw := v.Raw(doc)
	switch f.Kind() {
	case reflect.String:
		if v.Kind != jsonedit.String {
			p.add(at, "expected a string, found %s%s", article(v.Kind), quoteHint(at, v, raw))
			return
		}
		var s string
		_ = json.Unmarshal(raw, &s)
		f.SetString(s)
	case reflect.Bool:
		if v.Kind != jsonedit.Bool {
			p.add(at, "expected true or false, found %s", article(v.Kind))
			return
		}
		f.SetBool(string(raw) == "true")
	case reflect.Int:
		var n int
		if v.Kind != jsonedit.Number || json.Unmarshal(raw, &n) != nil {
			p.add(at, "expected a whole number, found %s", article(v.Kind))
			return
		}
		f.SetInt(int64(n))
	case reflect.Slice: // []string
		if v.Kind != jsonedit.Array {
			p.add(at, "expected an array of strings, found %s", article(v.Kind))
			return
		}
		out := make([]string, len(v.Elems))
		for i, e := range v.Elems {
			decodeField(fmt.Sprintf("%s[%d]", at, i), doc, e, reflect.ValueOf(&out[i]).Elem(), p)
		}
		f.Set(reflect.ValueOf(out))
	case reflect.Map: // map[string]string: env, whose values are secrets
		if v.Kind != jsonedit.Object {
			p.add(at, "expected an object of strings, found %s", article(v.Kind))
			return
		}
		out := make(map[string]string, len(v.Members))
		for _, m := range v.Members {
			if m.Value.Kind == jsonedit.Number || m.Value.Kind == jsonedit.Bool {
				// A token written as a number: the problem goes to the
				// log and the history, so its hint must not echo it.
				p.add(at+"."+m.Key, "expected a string, found %s (write it as a string, in quotes)", article(m.Value.Kind))
				continue
			}
			var s string
			decodeField(at+"."+m.Key, doc, m.Value, reflect.ValueOf(&s).Elem(), p)
			out[m.Key] = s
		}
		f.Set(reflect.ValueOf(out))
	case reflect.Pointer: // *Restart, or *bool where "absent" differs from false
		nv := reflect.New(f.Type().Elem())
		if nv.Elem().Kind() == reflect.Struct {
			decodeStruct(at, doc, v, nv.Interface(), p)
		} else {
			decodeField(at, doc, v, nv.Elem(), p)
		}
		f.Set(nv)
	case reflect.Struct:
		decodeStruct(at, doc, v, f.Addr().Interface(), p)
	default:
		panic("config: no decoder for " + f.Type().String())
	}
}

// quoteHint suggests quoting a number or boolean where a string belongs
// (an args element of 8080). It shows the value only for those kinds; for
// a duration field a number gets a unit ("30s"), since "30" is no
// duration. An env value never comes here: it may be a secret, and its
// problem says to quote it without echoing it.
func quoteHint(at string, v *jsonedit.Value, raw []byte) string {
	switch {
	case v.Kind == jsonedit.Number && durationFields[at[strings.LastIndex(at, ".")+1:]]:
		return fmt.Sprintf(" (write \"%ss\")", raw)
	case v.Kind == jsonedit.Number || v.Kind == jsonedit.Bool:
		return fmt.Sprintf(" (write \"%s\")", raw)
	}
	return ""
}

// durationFields are the JSON names of the fields that hold a duration.
var durationFields = map[string]bool{"hangThreshold": true, "evictSlowClientsAfter": true, "idleTimeout": true,
	"requestTimeout": true, "window": true, "minBackoff": true, "maxBackoff": true, "idleExit": true}

// dupKeys reports each key members repeats: JSON lets the last one win
// silently, so a pasted second "memory" entry would replace the first.
func dupKeys(at string, doc []byte, members []jsonedit.Member, p *problems) {
	first := map[string]int{}
	for _, m := range members {
		off, ok := first[m.Key]
		if !ok {
			first[m.Key] = m.KeyStart
			continue
		}
		field := m.Key
		if at != "" {
			field = at + "." + m.Key
		}
		l1, _ := jsonedit.Position(doc, off)
		l2, _ := jsonedit.Position(doc, m.KeyStart)
		p.add(field, "defined twice (lines %d and %d); only the last would count: keep one", l1, l2)
	}
}

func article(k jsonedit.Kind) string {
	switch k {
	case jsonedit.Array, jsonedit.Object:
		return "an " + k.String()
	case jsonedit.Null:
		return "null"
	}
	return "a " + k.String()
}

// jsonFields maps the JSON names of a struct's fields to their indexes.
func jsonFields(t reflect.Type) map[string]int {
	out := map[string]int{}
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			out[name] = i
		}
	}
	return out
}

// foldMatch returns the known key that key spells with other letter case:
// encoding/json would have accepted it silently.
func foldMatch(key string, known ...string) string {
	for _, k := range known {
		if strings.EqualFold(k, key) {
			return k
		}
	}
	return ""
}

// UnmarshalJSON decodes like Decode: unknown keys land in Extra. It does
// not validate values.
func (f *File) UnmarshalJSON(data []byte) error {
	g, err := Decode(data)
	if err != nil {
		return err
	}
	*f = *g
	return nil
}

// MarshalJSON writes the known fields, then the unknown ones.
func (f File) MarshalJSON() ([]byte, error) {
	type plain File
	return withExtra(plain(f), f.Extra)
}

// MarshalJSON writes the known fields, then the unknown ones.
func (s Server) MarshalJSON() ([]byte, error) {
	type plain Server
	return withExtra(plain(s), s.Extra)
}

// MarshalJSON writes the known fields, then the unknown ones.
func (r Restart) MarshalJSON() ([]byte, error) {
	type plain Restart
	return withExtra(plain(r), r.Extra)
}

// MarshalJSON writes the known fields, then the unknown ones.
func (h HTTP) MarshalJSON() ([]byte, error) {
	type plain HTTP
	return withExtra(plain(h), h.Extra)
}

// MarshalJSON writes the known fields, then the unknown ones.
func (h History) MarshalJSON() ([]byte, error) {
	type plain History
	return withExtra(plain(h), h.Extra)
}

// MarshalJSON writes the known fields, then the unknown ones.
func (a Autostart) MarshalJSON() ([]byte, error) {
	type plain Autostart
	return withExtra(plain(a), a.Extra)
}

// withExtra encodes known (a struct) and appends extra's keys, sorted,
// that known does not already have.
func withExtra(known any, extra map[string]json.RawMessage) ([]byte, error) {
	b, err := json.Marshal(known)
	if err != nil || len(extra) == 0 {
		return b, err
	}
	var have map[string]json.RawMessage
	if err := json.Unmarshal(b, &have); err != nil {
		return nil, err
	}
	keys := make([]string, 0, len(extra))
	for k := range extra {
		if _, dup := have[k]; !dup {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	out := bytes.TrimSuffix(b, []byte("}"))
	for _, k := range keys {
		if len(out) > 1 {
			out = append(out, ',')
		}
		kb, _ := json.Marshal(k)
		out = append(out, kb...)
		out = append(out, ':')
		var c bytes.Buffer
		if err := json.Compact(&c, extra[k]); err != nil {
			return nil, fmt.Errorf("field %s: %w", k, err)
		}
		out = append(out, c.Bytes()...)
	}
	return append(out, '}'), nil
}
