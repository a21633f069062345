package config

import (
	"fmt"
	"maps"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// Validate checks every value, with ${VAR} references resolved by lookup
// (os.LookupEnv for the running app). Its error is an *Error listing every
// problem.
func (f *File) Validate(lookup func(string) (string, bool)) error {
	var p problems
	f.validate(lookup, &p)
	return p.err()
}

// validate adds every problem of the values to p.
func (f *File) validate(lookup func(string) (string, bool), p *problems) {
	f.poolServers(lookup, p, nil)
	if f.HangThreshold != "" {
		parseDuration(p, "hangThreshold", f.HangThreshold)
	}
	if f.EvictSlowClientsAfter != "" {
		parseDuration(p, "evictSlowClientsAfter", f.EvictSlowClientsAfter)
	}
	if ie := f.Autostart.IdleExit; ie != "" && ie != "never" {
		parseDuration(p, "autostart.idleExit", ie, `use "never" to keep the pool running`)
	}
	if l := f.HTTP.Listen; l != "" {
		checkListen(p, "http.listen", l)
	}
	for i, o := range f.HTTP.AllowedOrigins {
		if u, err := url.Parse(o); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.TrimRight(u.Path, "/") != "" {
			p.add(fmt.Sprintf("http.allowedOrigins[%d]", i), "%q is not an origin (scheme://host[:port], e.g. \"http://localhost:5173\")", o)
		}
	}
	for _, c := range []struct {
		field string
		n     int
	}{
		{"history.retainDays", f.History.RetainDays},
		{"history.captureBytes", f.History.CaptureBytes},
		{"history.maxRows", f.History.MaxRows},
		{"maxInFlightPerSession", f.MaxInFlightPerSession},
		{"maxInFlightMiBPerSession", f.MaxInFlightMiBPerSession},
		{"maxSubscriptionsPerSession", f.MaxSubscriptionsPerSession},
		{"maxChildrenPerServer", f.MaxChildrenPerServer},
	} {
		if c.n < 0 {
			p.add(c.field, "%d is negative", c.n)
		}
	}
}

// PoolServers validates the servers and turns them into the pool's
// configs, with ${VAR} expanded from lookup. Remote entries are skipped.
// A server with a ${VAR} that lookup does not have, or a name clients
// cannot use, is disabled (NotStarted says why); the others run. Its
// error is an *Error listing every problem.
func (f *File) PoolServers(lookup func(string) (string, bool)) ([]pool.ServerConfig, error) {
	var p problems
	out := f.poolServers(lookup, &p, nil)
	if err := p.err(); err != nil {
		return nil, err
	}
	return out, nil
}

// NotStarted lists the servers PoolServers disables although their
// entries do not: a ${VAR} of theirs is not set in lookup's environment
// (each at the field, naming the variable and never a value), or their
// name is not one clients can use (saying what to name the entry). Such
// a server does not make the file invalid: a pool started at login often
// lacks the shell's exports, an entry copied from another client may have
// any name, and one of them must not stop every other server.
func (f *File) NotStarted(lookup func(string) (string, bool)) []Problem {
	by := f.NotStartedBy(lookup)
	var out []Problem
	for _, name := range slices.Sorted(maps.Keys(by)) {
		out = append(out, by[name]...)
	}
	return out
}

// NotStartedBy is NotStarted by server name. A server name may hold
// '.', so the name is not to be read back from a problem's field path.
func (f *File) NotStartedBy(lookup func(string) (string, bool)) map[string][]Problem {
	held := map[string][]Problem{}
	f.poolServers(lookup, &problems{}, held)
	return held
}

// ServerDir is the directory a server with cwd (expanded) starts in:
// cwd itself when absolute, a relative one taken from the user's home
// directory, and the home directory when it has none. So a server runs
// in the same place however the pool was started: from a menu, a shell,
// a systemd unit, or a client's `connect` in some project directory that
// may be gone by the time the server starts. Without a home directory
// (HOME unset, or naming none, as for some service accounts) cwd stays
// as it is: the pool's directory.
func ServerDir(cwd string) string {
	if filepath.IsAbs(cwd) {
		return cwd
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return cwd
	}
	if fi, err := os.Stat(home); err != nil || !fi.IsDir() {
		return cwd
	}
	return filepath.Join(home, cwd)
}

// poolServers adds the servers' problems to p, and to held (when not
// nil), by server, those of a server that would run but is held back: a
// ${VAR} lookup lacks, or a name clients cannot use. That server comes
// back disabled, saying why (NotStarted).
func (f *File) poolServers(lookup func(string) (string, bool), p *problems, held map[string][]Problem) []pool.ServerConfig {
	names := make([]string, 0, len(f.Servers))
	for n := range f.Servers {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []pool.ServerConfig
	for _, name := range names {
		s := f.Servers[name]
		at := "mcpServers." + name
		if s.IsRemote() {
			if s.URL == "" {
				p.add(at+".url", "missing (type %q is a remote server)", s.Type)
			}
			if s.Command != "" {
				p.add(at+".type", "%q is a remote server type, but the entry has a command; remove one of them", s.Type)
			}
			continue
		}
		if !validName.MatchString(name) {
			// Clients reach a server by its name: the entry is not run
			// under another one, but held back, saying what to name it,
			// while the others run. Its other fields wait for that name.
			c := pool.ServerConfig{Name: name, Disabled: true, Shown: append([]string{s.Command}, s.Args...)}
			if !s.Disabled {
				why := Problem{Field: at, Msg: fmt.Sprintf("the name may use letters, digits, '.', '_' and '-' only: rename the entry to %q", f.freeName(name))}
				c.NotStarted = why.String()
				if held != nil {
					held[name] = append(held[name], Problem{Field: at, Msg: why.Msg + "; the server is not started"})
				}
			}
			if name != "" { // the pool has no server without a name
				out = append(out, c)
			}
			continue
		}
		if t := strings.ToLower(s.Type); t != "" && t != "stdio" {
			p.add(at+".type", "%q is not \"stdio\", \"http\" or \"sse\"", s.Type)
		}
		if s.Command == "" {
			p.add(at+".command", "missing (a stdio server needs a command; a remote one needs url)")
			continue
		}
		c := pool.ServerConfig{Name: name, Disabled: s.Disabled, TrustAnnotations: s.TrustAnnotations}
		// A disabled entry may still wait for its values (an imported
		// server whose secret is not filled in yet): expansion problems
		// count only for servers that run.
		ep, miss := p, &problems{}
		if s.Disabled {
			ep = &problems{}
		}
		c.Command = expand(ep, miss, at+".command", s.Command, lookup, false)
		for i, a := range s.Args {
			c.Args = append(c.Args, expand(ep, miss, fmt.Sprintf("%s.args[%d]", at, i), a, lookup, false))
		}
		if len(s.Env) > 0 {
			c.Env = make(map[string]string, len(s.Env))
			keys := make([]string, 0, len(s.Env))
			for k := range s.Env {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				c.Env[k] = expand(ep, miss, at+".env."+k, s.Env[k], lookup, true)
			}
		}
		c.Cwd = ServerDir(expand(ep, miss, at+".cwd", s.Cwd, lookup, false))
		if len(miss.list) > 0 && !s.Disabled {
			c.Disabled = true
			why := make([]string, 0, len(miss.list))
			for _, m := range miss.list {
				why = append(why, m.String())
				if held != nil {
					held[name] = append(held[name], Problem{Field: m.Field, Msg: m.Msg + "; the server is not started"})
				}
			}
			c.NotStarted = strings.Join(why, "; ") // what its clients are told
		}
		c.Shown = append([]string{s.Command}, s.Args...)
		switch s.Share {
		case "", "shared":
			c.Share = pool.ShareShared
		case "session":
			c.Share = pool.ShareSession
		case "global":
			c.Share = pool.ShareGlobal
		default:
			p.add(at+".share", "%q is not \"shared\", \"session\" or \"global\"", s.Share)
		}
		switch s.IdleTimeout {
		case "":
		case "never":
			c.IdleTimeout = -1
		default:
			c.IdleTimeout = parseDuration(p, at+".idleTimeout", s.IdleTimeout, `use "never" to keep the child running`)
		}
		if s.RequestTimeout != "" {
			c.RequestTimeout = parseDuration(p, at+".requestTimeout", s.RequestTimeout)
		}
		if r := s.Restart; r != nil {
			if r.MaxRestarts < 0 {
				p.add(at+".restart.maxRestarts", "%d is negative", r.MaxRestarts)
			}
			var lo, hi time.Duration
			if r.Window != "" {
				parseDuration(p, at+".restart.window", r.Window)
			}
			if r.MinBackoff != "" {
				lo = parseDuration(p, at+".restart.minBackoff", r.MinBackoff)
			}
			if r.MaxBackoff != "" {
				hi = parseDuration(p, at+".restart.maxBackoff", r.MaxBackoff)
			}
			if lo > 0 && hi > 0 && lo > hi {
				p.add(at+".restart", "minBackoff %s is more than maxBackoff %s", r.MinBackoff, r.MaxBackoff)
			}
		}
		if pr, ok := f.RestartPolicy(name); ok {
			c.Restart = pr
		}
		out = append(out, c)
	}
	return out
}

var (
	validName        = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)
	invalidNameChars = regexp.MustCompile(`[^A-Za-z0-9._-]+`)
)

// ValidName says whether name can be a server name: it travels on command
// lines (`switchboard connect NAME`) and in URLs (/mcp/NAME).
func ValidName(name string) bool { return validName.MatchString(name) }

// NameFor is the server name for an entry another client names name, which
// may not be a valid one: name itself when it is, else name with each run
// of other characters made '-' and the ends trimmed ("My Server" is
// "My-Server"; "server" when nothing is left). import and setup name the
// entries they bring in so.
func NameFor(name string) string {
	if ValidName(name) {
		return name
	}
	s := strings.Trim(invalidNameChars.ReplaceAllString(name, "-"), "-")
	if s == "" {
		return "server"
	}
	return s
}

// freeName is the name to suggest for an entry whose name clients cannot
// use: NameFor's, numbered when another entry has that one already.
func (f *File) freeName(name string) string {
	base := NameFor(name)
	free := base
	for i := 2; ; i++ {
		if _, taken := f.Servers[free]; !taken {
			return free
		}
		free = fmt.Sprintf("%s-%d", base, i)
	}
}

// parseDuration reads a Go duration that must be positive; the problem
// suggests what the user probably meant.
func parseDuration(p *problems, at, s string, zeroHint ...string) time.Duration {
	d, err := time.ParseDuration(s)
	if err != nil {
		p.add(at, "%q is not a duration (try %q)", s, durationHint(s))
		return 0
	}
	if d <= 0 {
		msg := fmt.Sprintf("%q must be more than zero", s)
		if len(zeroHint) > 0 {
			msg += " (" + zeroHint[0] + ")"
		}
		p.add(at, "%s", msg)
		return 0
	}
	return d
}

var (
	durationWords = regexp.MustCompile(`(\d+(?:\.\d+)?)\s*([a-zµ]*)`)
	durationUnits = map[string]string{
		"": "s", "ns": "ns", "us": "us", "µs": "µs", "ms": "ms", "msec": "ms", "msecs": "ms",
		"millisecond": "ms", "milliseconds": "ms",
		"s": "s", "sec": "s", "secs": "s", "second": "s", "seconds": "s",
		"m": "m", "min": "m", "mins": "m", "minute": "m", "minutes": "m",
		"h": "h", "hr": "h", "hrs": "h", "hour": "h", "hours": "h",
	}
)

// durationHint turns what people write ("10 minutes", "1 hour 30 mins",
// "90") into Go's syntax ("10m", "1h30m", "90s").
func durationHint(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	var b strings.Builder
	rest := s
	for _, m := range durationWords.FindAllStringSubmatchIndex(s, -1) {
		num, unit := s[m[2]:m[3]], s[m[4]:m[5]]
		u, ok := durationUnits[unit]
		if !ok && (unit == "d" || unit == "day" || unit == "days") {
			if n, err := strconv.ParseFloat(num, 64); err == nil {
				num, u, ok = strconv.FormatFloat(n*24, 'f', -1, 64), "h", true
			}
		}
		if !ok {
			return "10m"
		}
		b.WriteString(num + u)
		rest = strings.Replace(rest, s[m[0]:m[1]], "", 1)
	}
	rest = strings.NewReplacer("and", "", ",", "", " ", "").Replace(rest)
	hint := b.String()
	if _, err := time.ParseDuration(hint); err != nil || rest != "" {
		return "10m"
	}
	return hint
}

// checkListen accepts loopback addresses only: the HTTP front door serves
// this machine's clients, over plain HTTP, so the bearer token would
// cross the network unencrypted, readable to anyone on the way.
func checkListen(p *problems, at, addr string) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		p.add(at, "%q is not host:port (try \"127.0.0.1:7777\")", addr)
		return
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		p.add(at, "%q: the port must be a number from 0 to 65535", addr)
		return
	}
	if host == "localhost" {
		return
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		p.add(at, "%q is not a loopback address; the front door serves this machine's clients over plain HTTP: its token would cross the network unencrypted (use 127.0.0.1 or [::1])", addr)
	}
}

// vsCodeVars are VS Code's own variables, which look like ${VAR} but no
// environment sets: unset, they are a mistake in the file (the entry was
// copied from VS Code), not a variable the pool's environment lacks.
var vsCodeVars = map[string]bool{"workspaceFolder": true, "workspaceFolderBasename": true, "userHome": true,
	"pathSeparator": true, "file": true, "cwd": true}

var (
	varRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(:-([^}]*))?\}`)
	anyRef = regexp.MustCompile(`\$\{[^}]*\}`)
)

// expand replaces ${VAR} (and ${VAR:-default}) from the environment. An
// unset variable without a default is added to miss, naming the field and
// the variable, never the value: it keeps its server from starting, not
// the file from loading. Other ${...} forms (VS Code's ${input:id},
// ${env:NAME}, ${workspaceFolder}) are problems in p: nothing would ever
// fill them in. A secret field's (env's) malformed ${...} is not quoted:
// what it holds may be the value itself, pasted between the braces.
func expand(p, miss *problems, at, s string, lookup func(string) (string, bool), secret bool) string {
	if !strings.Contains(s, "${") {
		return s
	}
	out, missing := substitute(s, lookup)
	for _, ref := range anyRef.FindAllString(varRef.ReplaceAllString(s, ""), -1) {
		inner := ref[2 : len(ref)-1]
		switch {
		case strings.HasPrefix(inner, "input:"):
			p.add(at, "%s is a VS Code input; write its value or a ${VAR} reference here", ref)
		case strings.HasPrefix(inner, "env:"):
			p.add(at, "write ${%s} instead of %s", strings.TrimPrefix(inner, "env:"), ref)
		case secret:
			p.add(at, "a ${...} that is not a ${VAR} or ${VAR:-default} reference")
		default:
			p.add(at, "%s is not a ${VAR} or ${VAR:-default} reference", ref)
		}
	}
	var unset []string
	for _, v := range missing {
		if vsCodeVars[v] {
			p.add(at, "environment variable %s is not set", v)
			continue
		}
		unset = append(unset, v)
	}
	if len(unset) > 0 {
		miss.add(at, "environment variable %s is not set", strings.Join(unset, ", "))
	}
	return out
}

// ExpandVars expands ${VAR} and ${VAR:-default} the way the config does,
// with "" for an unset variable and no problems reported: for readers
// that only compare (leak detection matching command lines).
func ExpandVars(s string, lookup func(string) (string, bool)) string {
	if !strings.Contains(s, "${") {
		return s
	}
	out, _ := substitute(s, lookup)
	return out
}

// substitute is the one ${VAR} expander: it returns s expanded and the
// variables that were unset without a default (expanded to ""). As in the
// shell, ${VAR:-default} gives the default when VAR is unset or empty.
func substitute(s string, lookup func(string) (string, bool)) (string, []string) {
	var missing []string
	out := varRef.ReplaceAllStringFunc(s, func(m string) string {
		sub := varRef.FindStringSubmatch(m)
		v, ok := lookup(sub[1])
		switch {
		case sub[2] != "" && v == "":
			return sub[3]
		case ok:
			return v
		}
		missing = append(missing, sub[1])
		return ""
	})
	return out, missing
}
