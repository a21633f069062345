package config

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"
)

// DiffResult is what a new config changes, server by server. `config
// check` prints it and a hot reload logs it. Remote (URL) entries are left
// out: the pool never runs them.
type DiffResult struct {
	Added     []string
	Removed   []string
	Changed   []Change
	Unchanged []string
	// Settings lists changed top-level settings, as paths such as
	// "http.listen" or "hangThreshold".
	Settings []string
}

// Change is one server whose entry changed.
type Change struct {
	Name string
	// Fields are the changed fields: "args", "env.API_KEY" (names only,
	// never values), "restart.window".
	Fields []string
	// Restarts says whether the change gives the server a new child: what
	// its child runs (command, args, env, cwd, sharing, resolve) changed,
	// with ${VAR} references expanded. The old child finishes what it has
	// in flight.
	Restarts bool
	// Stops says the server stops running: it was disabled, or a ${VAR} of
	// it is unset now. Its requests are refused, saying why, and its old
	// child finishes what it has in flight, then stops.
	Stops bool
}

// Diff compares two configs as the pool runs them (Effective: a
// setting written out at its default is no change), with ${VAR}
// references expanded from lookup as PoolServers expands them: a value
// rewritten to what it expanded to is no change. old may be nil
// (everything is added). Settings that an override replaces (`serve
// --http`) are to be replaced on both sides first (WithHTTPListen).
func Diff(old, new *File, lookup func(string) (string, bool)) DiffResult {
	if old == nil {
		old = &File{}
	}
	if new == nil {
		new = &File{}
	}
	old, new = old.Effective(), new.Effective()
	var d DiffResult
	for _, name := range pooled(new) {
		o, ok := old.Servers[name]
		if !ok || o.IsRemote() {
			d.Added = append(d.Added, name)
			continue
		}
		ro, rn := asRun(o, lookup), asRun(new.Servers[name], lookup)
		if !ValidName(name) { // held back, whatever its entry says
			ro.off, rn.off = true, true
		}
		fields := fieldDiff("", reflect.ValueOf(ro.entry), reflect.ValueOf(rn.entry))
		if len(fields) == 0 {
			d.Unchanged = append(d.Unchanged, name)
			continue
		}
		c := Change{Name: name, Fields: fields}
		switch {
		case rn.off:
			c.Stops = !ro.off
		case !ro.off:
			c.Restarts = !rn.sameProcess(ro)
		}
		d.Changed = append(d.Changed, c)
	}
	for _, name := range pooled(old) {
		if n, ok := new.Servers[name]; !ok || n.IsRemote() {
			d.Removed = append(d.Removed, name)
		}
	}
	if old.HangThreshold != new.HangThreshold {
		d.Settings = append(d.Settings, "hangThreshold")
	}
	if old.MaxInFlightPerSession != new.MaxInFlightPerSession {
		d.Settings = append(d.Settings, "maxInFlightPerSession")
	}
	if old.MaxInFlightMiBPerSession != new.MaxInFlightMiBPerSession {
		d.Settings = append(d.Settings, "maxInFlightMiBPerSession")
	}
	if old.MaxSubscriptionsPerSession != new.MaxSubscriptionsPerSession {
		d.Settings = append(d.Settings, "maxSubscriptionsPerSession")
	}
	if old.MaxChildrenPerServer != new.MaxChildrenPerServer {
		d.Settings = append(d.Settings, "maxChildrenPerServer")
	}
	if old.EvictSlowClientsAfter != new.EvictSlowClientsAfter {
		d.Settings = append(d.Settings, "evictSlowClientsAfter")
	}
	d.Settings = append(d.Settings, fieldDiff("http", reflect.ValueOf(old.HTTP), reflect.ValueOf(new.HTTP))...)
	d.Settings = append(d.Settings, fieldDiff("history", reflect.ValueOf(old.History), reflect.ValueOf(new.History))...)
	d.Settings = append(d.Settings, fieldDiff("autostart", reflect.ValueOf(old.Autostart), reflect.ValueOf(new.Autostart))...)
	return d
}

// WithHTTPListen is f with addr in place of its http.listen, as a pool
// started with `--http ADDR` runs it; f itself when addr is "".
func (f *File) WithHTTPListen(addr string) *File {
	if f == nil || addr == "" {
		return f
	}
	g := *f
	g.HTTP.Listen = addr
	return &g
}

// run is a server entry as the pool compares it on a reload
// (pool.ServerConfig: what it shows, what it runs, whether it runs).
type run struct {
	// entry is the entry with env and cwd expanded, cwd the directory the
	// server starts in, share and resolve by their meaning. Command and
	// args stay as written: the pool shows them so.
	entry Server
	line  []string // command and args expanded: what the child runs
	off   bool     // disabled, or not started for an unset ${VAR} (or a name clients cannot use: Diff)
}

// asRun is s as the pool runs it, its ${VAR}s expanded from lookup by the
// config's one expander. A value with an unset variable stays as written:
// its server is not started, and what it waits for is the reference.
func asRun(s Server, lookup func(string) (string, bool)) run {
	r := run{entry: s, off: s.Disabled}
	exp := func(v string) string {
		out, missing := substitute(v, lookup)
		if len(missing) > 0 {
			r.off = true
			return v
		}
		return out
	}
	r.line = append(r.line, exp(s.Command))
	for _, a := range s.Args {
		r.line = append(r.line, exp(a))
	}
	if len(s.Env) > 0 {
		r.entry.Env = make(map[string]string, len(s.Env))
		for k, v := range s.Env {
			r.entry.Env[k] = exp(v)
		}
	}
	r.entry.Cwd = ServerDir(exp(s.Cwd))
	if s.Share == "" {
		r.entry.Share = "shared"
	}
	if strings.EqualFold(s.Type, "stdio") {
		r.entry.Type = "" // the default: what a command runs over
	}
	if s.Resolve != nil && *s.Resolve {
		r.entry.Resolve = nil // the default
	}
	e := effectiveServer(s)
	r.entry.IdleTimeout, r.entry.RequestTimeout, r.entry.Restart = e.IdleTimeout, e.RequestTimeout, e.Restart
	return r
}

// sameDuration is a duration setting as the pool reads it: "1m" and
// "60s" are one value. What does not parse (empty, "never", a mistake)
// stays as written.
func sameDuration(v string) string {
	if d, err := time.ParseDuration(v); err == nil {
		return d.String()
	}
	return v
}

// sameProcess reports whether r and o start the same child: the pool
// then keeps the running one.
func (r run) sameProcess(o run) bool {
	return slices.Equal(r.line, o.line) && maps.Equal(r.entry.Env, o.entry.Env) && r.entry.Cwd == o.entry.Cwd &&
		r.entry.Share == o.entry.Share && (r.entry.Resolve == nil) == (o.entry.Resolve == nil)
}

// pooled lists the stdio servers of f, sorted.
func pooled(f *File) []string {
	var out []string
	for name, s := range f.Servers {
		if !s.IsRemote() {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// fieldDiff lists the JSON paths at which two structs of the same type
// differ. Unknown fields (Extra) do not count: Switchboard ignores them.
// An empty list or object is the same as none (maps compare key by key).
func fieldDiff(prefix string, a, b reflect.Value) []string {
	var out []string
	t := a.Type()
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		path := join(prefix, name)
		fa, fb := a.Field(i), b.Field(i)
		switch fa.Kind() {
		case reflect.Map:
			keys := map[string]bool{}
			for _, k := range fa.MapKeys() {
				keys[k.String()] = true
			}
			for _, k := range fb.MapKeys() {
				keys[k.String()] = true
			}
			var changed []string
			for k := range keys {
				va, vb := fa.MapIndex(reflect.ValueOf(k)), fb.MapIndex(reflect.ValueOf(k))
				if va.IsValid() != vb.IsValid() || (va.IsValid() && va.Interface() != vb.Interface()) {
					changed = append(changed, path+"."+k)
				}
			}
			sort.Strings(changed)
			out = append(out, changed...)
		case reflect.Pointer:
			if t.Field(i).Type.Elem().Kind() != reflect.Struct {
				if fa.IsNil() != fb.IsNil() || (!fa.IsNil() && !reflect.DeepEqual(fa.Elem().Interface(), fb.Elem().Interface())) {
					out = append(out, path)
				}
				continue
			}
			za, zb := reflect.New(t.Field(i).Type.Elem()).Elem(), reflect.New(t.Field(i).Type.Elem()).Elem()
			if !fa.IsNil() {
				za = fa.Elem()
			}
			if !fb.IsNil() {
				zb = fb.Elem()
			}
			out = append(out, fieldDiff(path, za, zb)...)
		case reflect.Slice:
			// Empty is none: the pool reads "args": [] as no args, and
			// the running config as GET /v1/config sends it leaves it out.
			if (fa.Len() > 0 || fb.Len() > 0) && !reflect.DeepEqual(fa.Interface(), fb.Interface()) {
				out = append(out, path)
			}
		default:
			if !reflect.DeepEqual(fa.Interface(), fb.Interface()) {
				out = append(out, path)
			}
		}
	}
	return out
}

// Empty says whether the diff changes nothing.
func (d DiffResult) Empty() bool {
	return len(d.Added)+len(d.Removed)+len(d.Changed)+len(d.Settings) == 0
}

// String is the one-line summary a reload logs: "added: a; removed: b;
// changed: c (args, env.KEY; new child), d (disabled; requests refused,
// in-flight ones finish); unchanged: 2".
func (d DiffResult) String() string {
	var parts []string
	if len(d.Added) > 0 {
		parts = append(parts, "added: "+strings.Join(d.Added, ", "))
	}
	if len(d.Removed) > 0 {
		parts = append(parts, "removed: "+strings.Join(d.Removed, ", "))
	}
	if len(d.Changed) > 0 {
		var cs []string
		for _, c := range d.Changed {
			cs = append(cs, c.String())
		}
		parts = append(parts, "changed: "+strings.Join(cs, ", "))
	}
	if len(d.Settings) > 0 {
		parts = append(parts, "settings: "+strings.Join(d.Settings, ", "))
	}
	parts = append(parts, fmt.Sprintf("unchanged: %d", len(d.Unchanged)))
	return strings.Join(parts, "; ")
}

func (c Change) String() string {
	s := c.Name + " (" + strings.Join(c.Fields, ", ")
	switch {
	case c.Restarts:
		s += "; new child"
	case c.Stops:
		s += "; requests refused, in-flight ones finish"
	}
	return s + ")"
}
