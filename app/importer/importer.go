// Package importer brings the MCP servers that Claude Desktop, Claude
// Code, Cursor or VS Code already run into Switchboard's config, and can
// point those clients at Switchboard instead (`switchboard connect NAME`).
//
// Both files belong to the user, so it edits them in place with package
// jsonedit: key order, formatting, comments and every field it does not
// know stay as they were. It never overwrites an entry: a name that
// exists with a different command is reported as a clash, an identical
// one is skipped.
package importer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard/app/config"
	"github.com/switchboard-mcp/switchboard/app/config/jsonedit"
	"github.com/switchboard-mcp/switchboard/app/home"
	"github.com/switchboard-mcp/switchboard/app/safefile"
)

// Options say what to import from where, into which config.
type Options struct {
	Client Client
	// File reads only this file instead of the client's known locations.
	File string
	// UserOnly leaves alone the project's files among the client's known
	// locations (.mcp.json, .cursor/mcp.json, .vscode/mcp.json in
	// Env.Cwd), which a repository may share: rewritten, they would hold
	// this machine's paths. They are not read, and Notes say so. A File is
	// read wherever it is (a project's rewritten gets a warning in Notes).
	UserOnly bool
	// Config is Switchboard's config file; it is created if missing.
	Config string
	Env    Env
	// DryRun computes and reports everything but writes nothing.
	DryRun bool
	// RewriteClient rewrites the client's file so that each server now in
	// Switchboard runs through `Connect connect NAME`, after a backup.
	RewriteClient bool
	// Connect is the command rewritten entries run. Default "switchboard"
	// (found on the client's PATH).
	Connect string
	// ConnectShim says Connect is the small `switchboard-connect` shim,
	// which takes the server's name alone: rewritten entries run
	// `Connect NAME`. Windows has no exec for `switchboard connect` to
	// become the shim, so there the entries name it directly.
	ConnectShim bool
	// ConnectEnv is the env rewritten entries pass to the shim, for what
	// a client's reduced environment lacks (the PATH a pool it starts
	// finds npx on). SWITCHBOARD_HOME, when set, is always passed, made
	// absolute against Env.Cwd unless ConnectEnv has it.
	ConnectEnv map[string]string
	// UpdateConnected brings the entries that already run through
	// Switchboard, for a server its config has, up to date (setup run
	// again after the binary moved): Connect and its arguments, and the
	// variables of ConnectEnv, replace theirs; every other field and
	// variable stays. Only entries whose env reaches the Switchboard home
	// ConnectEnv reaches are: one of another home stays as it is.
	UpdateConnected bool
	// Now stamps backups. Default time.Now.
	Now func() time.Time
}

// Outcome is what happened to one server entry of the client.
type Outcome string

// The outcomes.
const (
	Imported  Outcome = "imported"  // added to Switchboard's config
	Present   Outcome = "present"   // the same server is in Switchboard's config already
	Clash     Outcome = "clash"     // the name is taken by a different server; not imported
	Remote    Outcome = "remote"    // a URL server; Switchboard pools stdio servers only
	Connected Outcome = "connected" // already runs through switchboard connect
	Invalid   Outcome = "invalid"   // cannot be imported as it is
)

// Entry is one server entry of a client file and what became of it.
type Entry struct {
	File  string
	Where string // the entry's path in File: mcpServers.memory, projects["/p"].mcpServers.db
	Name  string // its name in the client
	// As is its name in Switchboard: where it was imported to, or the
	// existing server it matches.
	As      string
	Outcome Outcome
	// Disabled: imported with "disabled": true because some value needs
	// filling in by hand first (Notes say which).
	Disabled bool
	Reason   string
	Notes    []string
	// Rewritten: the client's entry now runs `switchboard connect As`.
	Rewritten bool
}

// Rewrite is one client file rewritten to run servers through Switchboard.
type Rewrite struct {
	File    string
	Backup  string
	Servers []string // the entries' paths in File
	// Entries are the entries rewritten, as Undo needs them: one for each
	// of Servers, in the same order.
	Entries []Rewritten `json:",omitempty"`
}

// Rewritten is one client entry a rewrite replaced.
type Rewritten struct {
	Keys  []string        // its keys from the top of the file: projects, /p, mcpServers, db
	Wrote json.RawMessage // the entry the rewrite put there
	// Updated: the entry ran through Switchboard already and the rewrite
	// brought it up to date (Options.UpdateConnected); undo puts back
	// what an earlier rewrite of it found, unless the entry was changed
	// between the two.
	Updated bool `json:",omitempty"`
}

// Result is everything an import did (or, in a dry run, would do).
type Result struct {
	Client        Client
	Config        string
	DryRun        bool
	RewriteClient bool
	Read          []string
	Entries       []Entry
	Added         []string // Switchboard names added
	ConfigWritten bool
	Rewrites      []Rewrite
	// ConfigProblems are problems Switchboard's config had before the
	// import; the import leaves them as they are.
	ConfigProblems []string
	Notes          []string
}

// Import reads the client's config and merges its stdio servers into
// Switchboard's. It writes Switchboard's config before any client file,
// and a client file only after its backup is on disk.
func Import(opts Options) (*Result, error) {
	if opts.Connect == "" {
		opts.Connect = "switchboard"
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Env.Lookup == nil {
		opts.Env.Lookup = func(string) (string, bool) { return "", false }
	}
	res := &Result{Client: opts.Client, Config: opts.Config, DryRun: opts.DryRun, RewriteClient: opts.RewriteClient}

	locs := []Location{locationOf(opts.File)}
	if opts.File == "" {
		locs = nil
		var seen []os.FileInfo
		var left []Location
		for _, l := range Locations(opts.Client, opts.Env) {
			fi, err := os.Stat(l.Path)
			// One file at two locations (~/.cursor/mcp.json is the
			// project's too when run from the home directory, a link) is
			// read once, as the first: read twice, its entries would
			// match themselves and its rewrite back up a rewritten file.
			if err != nil || slices.ContainsFunc(seen, func(s os.FileInfo) bool { return os.SameFile(s, fi) }) {
				continue
			}
			seen = append(seen, fi)
			if opts.UserOnly && opts.Env.shared(l) {
				left = append(left, l)
				continue
			}
			locs = append(locs, l)
		}
		if len(locs) == 0 {
			var looked []string
			for _, l := range Locations(opts.Client, opts.Env) {
				if !opts.UserOnly || !opts.Env.shared(l) {
					looked = append(looked, l.Path)
				}
			}
			if len(left) > 0 {
				return nil, fmt.Errorf("no %s config of your own found (looked in %s); %s is the project's own config, left alone: "+
					"rewritten, it would hold this machine's paths, and its repository may share it; name it with --file %s to point it at Switchboard all the same",
					opts.Client, strings.Join(looked, ", "), left[0].Path, left[0].Path)
			}
			return nil, fmt.Errorf("no %s config found (looked in %s); name one with --file", opts.Client, strings.Join(looked, ", "))
		}
		for _, l := range left {
			res.Notes = append(res.Notes, fmt.Sprintf("Left %s as it is: it is the project's own config (%s), which its repository may share, "+
				"and rewritten it would hold this machine's paths; name it with --file %s to point it at Switchboard all the same.", l.Path, l.Project, l.Path))
		}
	}

	sb, err := readSwitchboard(opts.Config, opts.Env)
	if err != nil {
		return nil, err
	}
	res.ConfigProblems = sb.problems

	var files []*clientFile
	for _, l := range locs {
		cf, err := readClientFile(opts.Client, l, opts.File != "")
		if err != nil {
			return nil, err
		}
		files = append(files, cf)
		res.Read = append(res.Read, l.Path)
		if len(cf.groups) == 0 {
			res.Notes = append(res.Notes, l.Path+": no servers")
		}
	}

	im := &importer{opts: opts, sb: sb, taken: map[string]*plan{}, own: map[string]bool{}}
	for _, cf := range files {
		for _, g := range cf.groups {
			for _, m := range g.obj.Members {
				if config.ValidName(m.Key) {
					im.own[m.Key] = true
				}
			}
		}
	}
	for _, cf := range files {
		for _, g := range cf.groups {
			for _, m := range g.obj.Members {
				p := im.plan(cf, g, m)
				cf.plans = append(cf.plans, p)
				res.Entries = append(res.Entries, p.entry)
			}
		}
	}
	for _, p := range im.added {
		res.Added = append(res.Added, p.entry.As)
	}

	// Switchboard's config first: a client must never point at a server
	// Switchboard does not have.
	if len(im.added) > 0 {
		out, err := sb.withServers(im.added)
		if err != nil {
			return nil, err
		}
		if !opts.DryRun {
			if err := config.DanglingLink(opts.Config); err != nil {
				return nil, fmt.Errorf("write the config: %w", err)
			}
			if err := os.MkdirAll(filepath.Dir(opts.Config), 0o700); err != nil {
				return nil, fmt.Errorf("create the config dir: %w", err)
			}
			if err := im.writeSwitchboard(out); err != nil {
				return nil, err
			}
			res.ConfigWritten = true
		}
	}

	if opts.RewriteClient {
		for _, cf := range files {
			rw, err := im.rewrite(cf)
			if err != nil {
				return res, err
			}
			if rw != nil {
				res.Rewrites = append(res.Rewrites, *rw)
				if opts.Env.shared(cf.loc) {
					hold, is := "hold", "is"
					if opts.DryRun {
						hold, is = "would hold", "would be"
					}
					res.Notes = append(res.Notes, fmt.Sprintf("Warning: %s is the project's own config (%s), which its repository may share: "+
						"its rewritten entries %s this machine's paths (the switchboard binary, PATH, where Switchboard's files are), and its backup %s beside it: "+
						"keep both out of commits.", cf.loc.Path, cf.loc.Project, hold, is))
				}
			}
		}
		// Entries were copied into res before the rewrite marked them.
		i := 0
		for _, cf := range files {
			for _, p := range cf.plans {
				res.Entries[i].Rewritten, res.Entries[i].Reason = p.entry.Rewritten, p.entry.Reason
				i++
			}
		}
		if opts.Client == ClaudeCode && len(res.Rewrites) > 0 {
			res.Notes = append(res.Notes, "Claude Code rewrites ~/.claude.json while it runs: quit it before setup or import --rewrite-client edits the file, and restart running sessions so they read the new entries.")
		}
	}
	return res, nil
}

// switchboardFile is Switchboard's config as read before the import.
type switchboardFile struct {
	path     string
	doc      []byte
	exists   bool
	file     *config.File
	problems []string
	lookup   func(string) (string, bool)
}

func readSwitchboard(path string, env Env) (*switchboardFile, error) {
	doc, err := config.ReadFile(path)
	exists := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("read Switchboard's config: %w", err)
	}
	return parseSwitchboard(path, doc, exists, env.Lookup)
}

// parseSwitchboard reads doc, Switchboard's config at path (a starter
// one when it does not exist).
func parseSwitchboard(path string, doc []byte, exists bool, lookup func(string) (string, bool)) (*switchboardFile, error) {
	sb := &switchboardFile{path: path, lookup: lookup, doc: doc, exists: exists}
	if !exists {
		sb.doc = []byte("{\n  \"mcpServers\": {}\n}\n")
	}
	f, err := config.Decode(sb.doc)
	if err != nil {
		return nil, fmt.Errorf("cannot read Switchboard's config %s (fix it first): %w", path, err)
	}
	sb.file = f
	sb.problems = problemList(f.Validate(lookup))
	return sb, nil
}

// writeSwitchboard writes out, Switchboard's config with the imported
// servers added, over the config as read. Something else may write the
// config meanwhile (the user's editor, the dashboard): then the servers
// are added to the config as it is now, as long as their names are still
// free there.
func (im *importer) writeSwitchboard(out []byte) error {
	return config.EditPrivateFile(im.sb.path, config.MaxFileBytes, func(cur []byte, exists bool) ([]byte, error) {
		edited := out
		if exists != im.sb.exists || exists && !bytes.Equal(cur, im.sb.doc) {
			now, err := parseSwitchboard(im.sb.path, cur, exists, im.sb.lookup)
			if err != nil {
				return nil, err
			}
			for _, p := range im.added {
				if _, ok := now.file.Servers[p.entry.As]; ok {
					return nil, fmt.Errorf("%s: a server %q was added to it while it was being edited; nothing written (run this again)", im.sb.path, p.entry.As)
				}
			}
			if edited, err = now.withServers(im.added); err != nil {
				return nil, err
			}
		}
		if testHookEdited != nil {
			testHookEdited(im.sb.path)
		}
		return edited, nil
	})
}

func problemList(err error) []string {
	var e *config.Error
	if !errors.As(err, &e) {
		if err != nil {
			return []string{err.Error()}
		}
		return nil
	}
	var out []string
	for _, p := range e.Problems {
		out = append(out, p.String())
	}
	return out
}

// withServers returns Switchboard's config with the planned entries
// added at the end of mcpServers, checked to be no less valid than
// before.
func (sb *switchboardFile) withServers(add []*plan) ([]byte, error) {
	doc := sb.doc
	for _, p := range add {
		std := jsonedit.Standardize(doc)
		root, err := jsonedit.Parse(std)
		if err != nil {
			return nil, err
		}
		var e jsonedit.Edit
		switch servers := root.Get("mcpServers"); {
		case servers == nil:
			e, err = jsonedit.Insert(doc, std, root, "mcpServers", jsonedit.ObjectOf(jsonedit.KV{Key: p.entry.As, Value: p.value}))
		case servers.Kind == jsonedit.Object:
			e, err = jsonedit.Insert(doc, std, servers, p.entry.As, p.value)
		default:
			return nil, fmt.Errorf("%s: mcpServers is not an object", sb.path)
		}
		if err != nil {
			return nil, err
		}
		if doc, err = jsonedit.Apply(doc, e); err != nil {
			return nil, err
		}
	}
	f, err := config.Decode(doc)
	if err != nil {
		return nil, fmt.Errorf("the merged config does not decode (a bug; nothing was written): %w", err)
	}
	var fresh []string
	for _, p := range problemList(f.Validate(sb.lookup)) {
		if !slices.Contains(sb.problems, p) {
			fresh = append(fresh, p)
		}
	}
	if len(fresh) > 0 {
		return nil, fmt.Errorf("the merged config would not be valid (nothing was written): %s", strings.Join(fresh, "; "))
	}
	return doc, nil
}

// clientFile is one client config file and the servers found in it.
type clientFile struct {
	client   Client
	loc      Location
	doc, std []byte
	groups   []group
	inputs   map[string]vsInput
	plans    []*plan
}

// group is one object of servers in a client file: Claude Code keeps one
// per project besides the user's own.
type group struct {
	where   string
	keys    []string // where, as keys from the top of the file
	obj     *jsonedit.Value
	project string
}

// vsInput is one of VS Code's "inputs": a value VS Code prompts for.
type vsInput struct {
	ID          string `json:"id"`
	Type        string `json:"type"`
	Description string `json:"description"`
	Password    bool   `json:"password"`
}

// readClientFile reads the client's file at loc. A file without a servers
// object (VS Code's settings.json without "mcp", a Claude Desktop file of
// preferences only) has no servers to import, which is an error only when
// the user named it (named).
func readClientFile(c Client, loc Location, named bool) (*clientFile, error) {
	doc, err := safefile.Read(loc.Path, maxClientFileBytes)
	if err != nil {
		return nil, fmt.Errorf("read %s config: %w", c, err)
	}
	cf := &clientFile{client: c, loc: loc, doc: doc, std: jsonedit.Standardize(doc)}
	root, err := jsonedit.Parse(cf.std)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", loc.Path, err)
	}
	if root.Kind != jsonedit.Object {
		return nil, fmt.Errorf("%s: expected a JSON object, found a %s", loc.Path, root.Kind)
	}
	add := func(where string, keys []string, obj *jsonedit.Value, project string) {
		if obj != nil && obj.Kind == jsonedit.Object {
			cf.groups = append(cf.groups, group{where: where, keys: keys, obj: obj, project: project})
		}
	}
	switch c {
	case VSCode:
		add("servers", []string{"servers"}, root.Get("servers"), loc.Project)
		add("mcp.servers", []string{"mcp", "servers"}, root.Get("mcp").Get("servers"), loc.Project)
		for _, in := range []*jsonedit.Value{root.Get("inputs"), root.Get("mcp").Get("inputs")} {
			if in == nil {
				continue
			}
			var list []vsInput
			if json.Unmarshal(in.Raw(cf.std), &list) == nil {
				if cf.inputs == nil {
					cf.inputs = map[string]vsInput{}
				}
				for _, i := range list {
					cf.inputs[i.ID] = i
				}
			}
		}
	case ClaudeCode:
		add("mcpServers", []string{"mcpServers"}, root.Get("mcpServers"), loc.Project)
		if projects := root.Get("projects"); projects != nil && projects.Kind == jsonedit.Object {
			for _, m := range projects.Members {
				k, _ := json.Marshal(m.Key)
				add(fmt.Sprintf("projects[%s].mcpServers", k), []string{"projects", m.Key, "mcpServers"}, m.Value.Get("mcpServers"), m.Key)
			}
		}
	default:
		add("mcpServers", []string{"mcpServers"}, root.Get("mcpServers"), loc.Project)
	}
	if len(cf.groups) == 0 && c != ClaudeCode && named {
		key := "mcpServers"
		if c == VSCode {
			key = "servers"
		}
		return nil, fmt.Errorf("%s: no %q object: is this a %s config?", loc.Path, key, c)
	}
	return cf, nil
}

// plan is the decision about one client entry.
type plan struct {
	entry  Entry
	value  []byte        // the Switchboard entry to add (Imported only)
	server config.Server // value, decoded
	member jsonedit.Member
	keys   []string // the entry's keys from the top of the file
	// connect: the client entry may be rewritten to connect to entry.As.
	connect bool
	// update: the entry connects to entry.As already; it may be brought
	// up to date (Options.UpdateConnected).
	update bool
}

type importer struct {
	opts  Options
	sb    *switchboardFile
	taken map[string]*plan // Switchboard names claimed by this import
	added []*plan
	// own are the client entries' names Switchboard can use as they are:
	// an entry renamed for Switchboard is not given one of them.
	own map[string]bool
}

// clientEntry is the part of a client's entry that says how to start it.
type clientEntry struct {
	Command string            `json:"command"`
	Args    []string          `json:"args"`
	Env     map[string]string `json:"env"`
	Cwd     string            `json:"cwd"`
	Type    string            `json:"type"`
	URL     string            `json:"url"`
	EnvFile string            `json:"envFile"`
}

func (im *importer) plan(cf *clientFile, g group, m jsonedit.Member) *plan {
	p := &plan{member: m, keys: append(slices.Clone(g.keys), m.Key), entry: Entry{File: cf.loc.Path, Where: g.where + pathKey(m.Key), Name: m.Key}}
	e := &p.entry
	raw := m.Value.Raw(cf.std)
	if m.Value.Kind != jsonedit.Object {
		e.Outcome, e.Reason = Invalid, "not an object"
		return p
	}
	var ce clientEntry
	if err := json.Unmarshal(raw, &ce); err != nil {
		e.Outcome, e.Reason = Invalid, "cannot read it: "+strings.TrimPrefix(err.Error(), "json: ")
		return p
	}
	if isRemote(ce) {
		e.Outcome = Remote
		e.Reason = "remote (URL) server"
		if u := safeURL(ce.URL); u != "" {
			e.Reason += " at " + u
		}
		e.Reason += "; Switchboard pools stdio servers only, so the client keeps connecting to it directly"
		return p
	}
	if ce.Command == "" {
		e.Outcome, e.Reason = Invalid, "no command"
		return p
	}
	if as, ok := im.connected(ce); ok {
		e.Outcome, e.As, e.Reason = Connected, as, "already runs through switchboard connect "+as
		if !im.opts.UpdateConnected {
			return p
		}
		if other := im.otherHome(ce.Env); other != "" {
			e.Reason += "; " + other
		} else if s, ok := im.sb.file.Servers[as]; ok && !s.IsRemote() {
			p.update = true
		}
		return p
	}

	name := m.Key
	renamed := !config.ValidName(name)
	if renamed {
		name = config.NameFor(name)
	}
	e.As = name

	// Build the Switchboard entry: the client's members in their order,
	// launch values with references resolved, other fields kept as they
	// are.
	r := &resolver{env: im.opts.Env, project: g.project, inputs: cf.inputs}
	var kv []jsonedit.KV
	hasCwd, hasDisabled := false, false
	for _, mm := range m.Value.Members {
		switch mm.Key {
		case "command":
			kv = append(kv, jsonedit.KV{Key: "command", Value: marshal(r.resolve("command", ce.Command))})
		case "args":
			args := make([]string, len(ce.Args))
			for i, a := range ce.Args {
				args[i] = r.resolve(fmt.Sprintf("args[%d]", i), a)
			}
			kv = append(kv, jsonedit.KV{Key: "args", Value: marshal(args)})
		case "env":
			var env []jsonedit.KV
			if mm.Value.Kind == jsonedit.Object {
				for _, em := range mm.Value.Members {
					env = append(env, jsonedit.KV{Key: em.Key, Value: marshal(r.resolve("env."+em.Key, ce.Env[em.Key]))})
				}
			}
			kv = append(kv, jsonedit.KV{Key: "env", Value: jsonedit.ObjectOf(env...)})
		case "cwd":
			hasCwd = true
			kv = append(kv, jsonedit.KV{Key: "cwd", Value: marshal(r.resolve("cwd", ce.Cwd))})
		case "type":
			// "stdio": the default in Switchboard's config.
		case "disabled":
			hasDisabled = true
			kv = append(kv, jsonedit.KV{Key: "disabled", Value: compact(mm.Value.Raw(cf.std))})
		default:
			if mm.Key == "envFile" {
				// Run without the file's variables, the server would
				// miss its secrets: like a ${input:}, a value to fill in.
				r.needs = append(r.needs, "envFile: Switchboard does not read it: copy its variables into env and remove envFile")
			}
			kv = append(kv, jsonedit.KV{Key: mm.Key, Value: compact(mm.Value.Raw(cf.std))})
		}
	}
	switch {
	case hasCwd || !relativePaths(ce, g.project):
	case g.project != "":
		kv = append(kv, jsonedit.KV{Key: "cwd", Value: marshal(g.project)})
		e.Notes = append(e.Notes, "cwd set to the project directory, which its relative paths need")
	default:
		e.Notes = append(e.Notes, "it names relative paths: set cwd to the directory the client started it in")
	}
	if len(r.needs) > 0 {
		e.Disabled = true
		e.Notes = append(e.Notes, r.needs...)
		e.Notes = append(e.Notes, `fill these in, then set "disabled" to false`)
		if hasDisabled {
			for i := range kv {
				if kv[i].Key == "disabled" {
					kv[i].Value = []byte("true")
				}
			}
		} else {
			kv = append(kv, jsonedit.KV{Key: "disabled", Value: []byte("true")})
		}
	}
	p.value = jsonedit.ObjectOf(kv...)

	// The entry must be valid in Switchboard's config on its own.
	wrapped := jsonedit.ObjectOf(jsonedit.KV{Key: "mcpServers", Value: jsonedit.ObjectOf(jsonedit.KV{Key: name, Value: p.value})})
	f, err := config.Decode(wrapped)
	if err == nil {
		err = f.Validate(im.opts.Env.Lookup)
	}
	if err != nil {
		e.Outcome, e.Reason = Invalid, strings.Join(problemList(err), "; ")
		return p
	}
	p.server = f.Servers[name]
	if renamed {
		name = im.freeName(name, p.server)
		e.As = name
		e.Notes = append(e.Notes, fmt.Sprintf("named %q in Switchboard (names use letters, digits, '.', '_' and '-')", name))
	}

	// Notes about how it would be imported matter only if it is.
	defer func() {
		if e.Outcome != Imported {
			e.Notes = nil
		}
	}()
	// An entry with envFile stays as it is in the client: Switchboard
	// would start it without the file's variables.
	defer func() {
		if ce.EnvFile != "" {
			p.connect = false
		}
	}()
	if ex, ok := im.sb.file.Servers[name]; ok {
		if diff := launchDiff(ex, p.server); len(diff) == 0 {
			e.Outcome, e.Reason, p.connect = Present, "already in Switchboard's config", !ex.Disabled
		} else {
			e.Outcome, e.Reason = Clash, fmt.Sprintf("Switchboard's config has a different %q (%s differ); not imported: rename one of them and import again", name, strings.Join(diff, ", "))
		}
		return p
	}
	if prev, ok := im.taken[name]; ok {
		if diff := launchDiff(prev.server, p.server); len(diff) == 0 {
			e.Outcome, e.Reason, p.connect = Present, "same as "+prev.entry.Where+" in "+prev.entry.File, prev.connect
		} else {
			e.Outcome, e.Reason = Clash, fmt.Sprintf("%s in %s has the name %q with different %s; not imported: rename one of them and import again", prev.entry.Where, prev.entry.File, name, strings.Join(diff, ", "))
		}
		return p
	}
	for _, other := range slices.Sorted(maps.Keys(im.sb.file.Servers)) {
		if ex := im.sb.file.Servers[other]; !ex.IsRemote() && len(launchDiff(ex, p.server)) == 0 {
			e.Outcome, e.As, e.Reason, p.connect = Present, other, fmt.Sprintf("same server as %q in Switchboard's config", other), !ex.Disabled
			return p
		}
	}
	e.Outcome, p.connect = Imported, !e.Disabled
	e.Reason = describe(p.server)
	im.taken[name] = p
	im.added = append(im.added, p)
	return p
}

// freeName is the name for an entry renamed for Switchboard (base, from
// config.NameFor) that starts srv: base, or base-2, base-3… past the names
// another server has, in Switchboard's config or this import, and the
// client entries' own. A name whose server starts the same process is
// the entry's: imported again, it is found there.
func (im *importer) freeName(base string, srv config.Server) string {
	for i := 1; ; i++ {
		name := base
		if i > 1 {
			name = fmt.Sprintf("%s-%d", base, i)
		}
		if ex, ok := im.sb.file.Servers[name]; ok {
			if len(launchDiff(ex, srv)) == 0 {
				return name
			}
			continue
		}
		if prev, ok := im.taken[name]; ok {
			if len(launchDiff(prev.server, srv)) == 0 {
				return name
			}
			continue
		}
		if !im.own[name] {
			return name
		}
	}
}

// launchDiff names the fields that make two entries start different
// processes.
func launchDiff(a, b config.Server) []string {
	var out []string
	if a.Command != b.Command {
		out = append(out, "command")
	}
	if !slices.Equal(a.Args, b.Args) {
		out = append(out, "args")
	}
	if len(a.Env) != len(b.Env) || !maps.Equal(a.Env, b.Env) {
		out = append(out, "env")
	}
	if a.Cwd != b.Cwd {
		out = append(out, "cwd")
	}
	return out
}

// describe says what an imported server runs without showing argument
// or environment values, which may be secrets.
func describe(s config.Server) string {
	d := filepath.Base(strings.ReplaceAll(s.Command, `\`, "/"))
	switch len(s.Args) {
	case 0:
	case 1:
		d += ", 1 arg"
	default:
		d += fmt.Sprintf(", %d args", len(s.Args))
	}
	if len(s.Env) > 0 {
		d += ", env " + strings.Join(slices.Sorted(maps.Keys(s.Env)), " ")
	}
	if s.Disabled {
		d += ", disabled"
	}
	return d
}

// relativePaths says whether a project's entry names a file relative to
// the project (node build/index.js, ./run.sh, and python3 server.py when
// the project directory has server.py): the client starts it in the
// project directory, so Switchboard must too. Package names (@scope/pkg),
// flags, URLs and other bare words are not paths; a bare command is
// looked up on PATH.
func relativePaths(ce clientEntry, project string) bool {
	for i, a := range append([]string{ce.Command}, ce.Args...) {
		if a == "" || a[0] == '-' || a[0] == '@' || a[0] == '$' || strings.Contains(a, "://") || filepath.IsAbs(a) || strings.HasPrefix(a, "/") {
			continue
		}
		if a == "." || a == ".." || strings.HasPrefix(a, "./") || strings.HasPrefix(a, "../") || strings.HasPrefix(a, `.\`) ||
			strings.ContainsAny(a, `/\`) {
			return true
		}
		if i > 0 && project != "" {
			if _, err := os.Stat(filepath.Join(project, a)); err == nil {
				return true
			}
		}
	}
	return false
}

func isRemote(ce clientEntry) bool {
	switch strings.ToLower(ce.Type) {
	case "http", "sse", "streamable-http", "streamablehttp", "ws", "websocket":
		return true
	}
	return ce.Command == "" && ce.URL != ""
}

// safeURL shows a URL without credentials or query (tokens often ride
// there).
func safeURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return ""
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return u.String()
}

func pathKey(k string) string {
	if config.ValidName(k) && !strings.Contains(k, ".") {
		return "." + k
	}
	b, _ := json.Marshal(k)
	return "[" + string(b) + "]"
}

func marshal(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

func compact(raw []byte) []byte {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return raw
	}
	return b.Bytes()
}

// resolver turns the clients' ${...} references into what Switchboard's
// config understands, and collects the ones nobody can fill in here.
type resolver struct {
	env     Env
	project string
	inputs  map[string]vsInput
	needs   []string
}

var (
	anyRef = regexp.MustCompile(`\$\{([^}]*)\}`)
	envRef = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*)(:-.*)?$`)
)

func (r *resolver) resolve(field, s string) string {
	return anyRef.ReplaceAllStringFunc(s, func(ref string) string {
		inner := ref[2 : len(ref)-1]
		need := func(why string) string {
			r.needs = append(r.needs, field+": "+why)
			return ref
		}
		switch {
		case inner == "userHome":
			return r.env.Home
		case inner == "workspaceFolder":
			if r.project == "" {
				return need(ref + " has no project here")
			}
			return r.project
		case inner == "workspaceFolderBasename":
			if r.project == "" {
				return need(ref + " has no project here")
			}
			return filepath.Base(r.project)
		case inner == "pathSeparator" || inner == "/":
			if r.env.GOOS == "windows" {
				return `\`
			}
			return "/"
		case strings.HasPrefix(inner, "input:"):
			id := strings.TrimPrefix(inner, "input:")
			why := fmt.Sprintf("needs a value for VS Code input %q", id)
			if in, ok := r.inputs[id]; ok {
				var about []string
				if in.Description != "" {
					about = append(about, in.Description)
				}
				if in.Password {
					about = append(about, "secret")
				}
				if len(about) > 0 {
					why += " (" + strings.Join(about, "; ") + ")"
				}
			}
			return need(why)
		case strings.HasPrefix(inner, "env:"):
			name := strings.TrimPrefix(inner, "env:")
			if _, ok := r.env.Lookup(name); !ok {
				r.needs = append(r.needs, fmt.Sprintf("%s: environment variable %s is not set here; set it where Switchboard runs", field, name))
			}
			return "${" + name + "}"
		}
		if m := envRef.FindStringSubmatch(inner); m != nil {
			if _, ok := r.env.Lookup(m[1]); !ok && m[2] == "" {
				r.needs = append(r.needs, fmt.Sprintf("%s: environment variable %s is not set here; set it where Switchboard runs", field, m[1]))
			}
			return ref
		}
		return need(ref + " is not something Switchboard can fill in")
	})
}

// rewrite points the client's entries at Switchboard, after writing a
// backup of the file next to it. The client may write its file while
// Switchboard edits it (Claude Code rewrites ~/.claude.json while it
// runs): the edit is made on the file as it is when written
// (config.EditFile), each entry replaced only if it is still as planned.
func (im *importer) rewrite(cf *clientFile) (*Rewrite, error) {
	var changes []entryChange
	var names []string
	var entries []Rewritten
	for _, p := range cf.plans {
		var value []byte
		switch {
		case p.connect:
			value = im.connectEntry(cf, p)
		case p.update:
			if value = im.updatedEntry(cf, p); value == nil {
				continue
			}
			p.entry.Reason += "; brought up to date with the command and environment setup writes now"
		default:
			continue
		}
		changes = append(changes, entryChange{keys: p.keys, where: p.entry.Where, was: p.member.Value.Raw(cf.std), value: value})
		names = append(names, p.entry.Where)
		entries = append(entries, Rewritten{Keys: p.keys, Wrote: value, Updated: p.update})
		p.entry.Rewritten = true
	}
	if len(changes) == 0 {
		return nil, nil
	}
	// Computed now, so that a file the rewrite cannot edit fails a dry
	// run too.
	if _, err := applyChanges(cf.loc.Path, cf.doc, changes); err != nil {
		return nil, err
	}
	rw := &Rewrite{File: cf.loc.Path, Servers: names, Entries: entries, Backup: backupName(cf.loc.Path, "switchboard", im.opts.Now())}
	if im.opts.DryRun {
		return rw, nil
	}
	rw.Backup = ""
	err := config.EditFile(cf.loc.Path, maxClientFileBytes, 0o600, func(cur []byte, exists bool) ([]byte, error) {
		if !exists {
			return nil, fmt.Errorf("%s was removed while it was being edited; nothing written", cf.loc.Path)
		}
		out, err := applyChanges(cf.loc.Path, cur, changes)
		if err != nil {
			return nil, err
		}
		if err := dropBackup(&rw.Backup); err != nil {
			return nil, err
		}
		if rw.Backup, err = writeBackup(cf.loc.Path, "switchboard", cur, im.opts.Now()); err != nil {
			return nil, err
		}
		if testHookEdited != nil {
			testHookEdited(cf.loc.Path)
		}
		return out, nil
	})
	if err != nil {
		for _, p := range cf.plans {
			p.entry.Rewritten = false
		}
		_ = dropBackup(&rw.Backup)
		return nil, clientBusy(string(im.opts.Client), err)
	}
	return rw, nil
}

// maxClientFileBytes bounds a client's file: Claude Code's ~/.claude.json
// keeps every project's history and grows to megabytes.
const maxClientFileBytes = 256 << 20

// testHookEdited, when set, runs once an edit of a file (a client's, or
// Switchboard's config) has its new content and backup, before the file
// is replaced.
var testHookEdited func(path string)

// clientBusy adds to err, when the client's file kept changing under the
// edit, that the client is the likely writer.
func clientBusy(client string, err error) error {
	if errors.Is(err, config.ErrChanged) {
		return fmt.Errorf("%w (is %s running? quit it first, then run this again)", err, client)
	}
	return err
}

// dropBackup removes the backup *name made for an edit that did not
// land, if any.
func dropBackup(name *string) error {
	if *name == "" {
		return nil
	}
	if err := os.Remove(*name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove the unused backup: %w", err)
	}
	*name = ""
	return nil
}

// entryChange is the replacement of one client entry.
type entryChange struct {
	keys  []string
	where string
	was   []byte // the entry as planned from, standardized
	value []byte // what replaces it
}

// applyChanges makes changes in doc, the client's file as it is now:
// each entry must still be the one planned from (the same JSON, however
// laid out), or be what the change writes already.
func applyChanges(path string, doc []byte, changes []entryChange) ([]byte, error) {
	cur := &jsonDoc{doc: doc, std: jsonedit.Standardize(doc)}
	var err error
	if cur.root, err = jsonedit.Parse(cur.std); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var edits []jsonedit.Edit
	for _, c := range changes {
		v := cur.at(c.keys)
		switch {
		case v != nil && sameJSON(v.Raw(cur.std), c.value):
			continue
		case v == nil || !sameJSON(v.Raw(cur.std), c.was):
			return nil, fmt.Errorf("%s: %s %w (run this again)", path, c.where, config.ErrChanged)
		}
		e, err := jsonedit.Replace(cur.std, v, c.value)
		if err != nil {
			return nil, err
		}
		edits = append(edits, e)
	}
	return jsonedit.Apply(doc, edits...)
}

// connected reports whether the client's entry already runs a server
// through Switchboard, and which: `switchboard connect NAME`, or the
// shim's `switchboard-connect NAME`.
func (im *importer) connected(ce clientEntry) (string, bool) {
	base := strings.TrimSuffix(filepath.Base(strings.ReplaceAll(ce.Command, `\`, "/")), ".exe")
	switch {
	case (base == "switchboard" || ce.Command == im.opts.Connect && !im.opts.ConnectShim) && len(ce.Args) >= 2 && ce.Args[0] == "connect":
		return ce.Args[1], true
	case (base == "switchboard-connect" || ce.Command == im.opts.Connect && im.opts.ConnectShim) && len(ce.Args) == 1:
		return ce.Args[0], true
	}
	return "", false
}

// connectArgs are the arguments of Connect that reach server name.
func (im *importer) connectArgs(name string) []string {
	if im.opts.ConnectShim {
		return []string{name}
	}
	return []string{"connect", name}
}

// connectEntry is the client entry that runs the server through
// Switchboard: command and args replaced, env and cwd dropped
// (Switchboard starts the server with them now), every other field kept.
// Entries with envFile are never rewritten (plan).
func (im *importer) connectEntry(cf *clientFile, p *plan) []byte {
	launch := []jsonedit.KV{
		{Key: "command", Value: marshal(im.opts.Connect)},
		{Key: "args", Value: marshal(im.connectArgs(p.entry.As))},
	}
	if env := im.connectEnv(); len(env) > 0 {
		var kv []jsonedit.KV
		for _, k := range slices.Sorted(maps.Keys(env)) {
			kv = append(kv, jsonedit.KV{Key: k, Value: marshal(env[k])})
		}
		launch = append(launch, jsonedit.KV{Key: "env", Value: jsonedit.ObjectOf(kv...)})
	}
	var kv []jsonedit.KV
	placed := false
	for _, m := range p.member.Value.Members {
		switch m.Key {
		case "command":
			if !placed {
				kv, placed = append(kv, launch...), true
			}
		case "args", "env", "cwd":
		default:
			kv = append(kv, jsonedit.KV{Key: m.Key, Value: compact(m.Value.Raw(cf.std))})
		}
	}
	if !placed {
		kv = append(launch, kv...)
	}
	return jsonedit.ObjectOf(kv...)
}

// connectEnv is the env rewritten entries pass to the shim. It must find
// the same pool the import wrote to, from the client's working
// directory: ConnectEnv's SWITCHBOARD_HOME (Setup makes it absolute),
// else ours, made absolute.
func (im *importer) connectEnv() map[string]string {
	env := maps.Clone(im.opts.ConnectEnv)
	if home := im.opts.Env.get("SWITCHBOARD_HOME"); home != "" && env["SWITCHBOARD_HOME"] == "" {
		if !filepath.IsAbs(home) && im.opts.Env.Cwd != "" {
			home = filepath.Join(im.opts.Env.Cwd, home)
		}
		if env == nil {
			env = map[string]string{}
		}
		env["SWITCHBOARD_HOME"] = home
	}
	return env
}

// homeOf is where the `switchboard connect` of an entry with env finds
// Switchboard's files: run by a client started from the desktop, with
// this user's home directory and, of what places the files, only what
// the entry's env sets (setup pins that into each entry, home.Env).
func (im *importer) homeOf(env map[string]string) (home.Paths, error) {
	return home.ResolveIn(im.opts.Env.GOOS, func(k string) string {
		if v, ok := env[k]; ok {
			return v
		}
		switch k {
		case "SWITCHBOARD_HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME":
			return ""
		case "HOME", "USERPROFILE":
			if v := im.opts.Env.get(k); v != "" {
				return v
			}
			return im.opts.Env.Home
		}
		return im.opts.Env.get(k)
	})
}

// otherHome says, when an entry that runs through Switchboard with env
// reaches another Switchboard home than the one rewritten entries reach
// (connectEnv's), that it stays as it is, and which home that is: its
// clients keep their pool. Empty when it reaches this one.
func (im *importer) otherHome(env map[string]string) string {
	ours, err := im.homeOf(im.connectEnv())
	if err != nil {
		return fmt.Sprintf("left as it is: cannot tell which Switchboard home setup is for (%v)", err)
	}
	theirs, err := im.homeOf(env)
	switch {
	case err != nil:
		return fmt.Sprintf("left as it is: cannot tell which Switchboard home its env reaches (%v)", err)
	case theirs != ours:
		return fmt.Sprintf("it reaches another Switchboard home (config %s), so it is left as it is", theirs.Config)
	}
	return ""
}

// updatedEntry is p's entry, which runs through Switchboard already (an
// earlier setup's, perhaps with a version's path that is gone since),
// running Connect with the variables of connectEnv instead; the user's
// other fields and variables stay as they are. Nil when it has them
// already.
func (im *importer) updatedEntry(cf *clientFile, p *plan) []byte {
	env := im.connectEnv()
	var kv []jsonedit.KV
	hasEnv := false
	for _, m := range p.member.Value.Members {
		switch {
		case m.Key == "command":
			kv = append(kv, jsonedit.KV{Key: "command", Value: marshal(im.opts.Connect)})
		case m.Key == "args":
			kv = append(kv, jsonedit.KV{Key: "args", Value: marshal(im.connectArgs(p.entry.As))})
		case m.Key == "env" && m.Value.Kind == jsonedit.Object:
			hasEnv = true
			var vars []jsonedit.KV
			for _, em := range m.Value.Members {
				if _, ours := env[em.Key]; !ours {
					vars = append(vars, jsonedit.KV{Key: em.Key, Value: compact(em.Value.Raw(cf.std))})
				}
			}
			for _, k := range slices.Sorted(maps.Keys(env)) {
				vars = append(vars, jsonedit.KV{Key: k, Value: marshal(env[k])})
			}
			kv = append(kv, jsonedit.KV{Key: "env", Value: jsonedit.ObjectOf(vars...)})
		default:
			kv = append(kv, jsonedit.KV{Key: m.Key, Value: compact(m.Value.Raw(cf.std))})
		}
	}
	if !hasEnv && len(env) > 0 {
		var vars []jsonedit.KV
		for _, k := range slices.Sorted(maps.Keys(env)) {
			vars = append(vars, jsonedit.KV{Key: k, Value: marshal(env[k])})
		}
		kv = append(kv, jsonedit.KV{Key: "env", Value: jsonedit.ObjectOf(vars...)})
	}
	value := jsonedit.ObjectOf(kv...)
	if sameJSON(value, p.member.Value.Raw(cf.std)) {
		return nil
	}
	return value
}

// sameJSON says whether a and b hold the same JSON value, however laid
// out.
func sameJSON(a, b []byte) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}

// backupName is where a copy of path made at now goes: tag says by what
// (switchboard: before a rewrite; switchboard-undone: before an undo).
func backupName(path, tag string, now time.Time) string {
	return path + "." + tag + "-" + now.Format("20060102-150405") + ".bak"
}

// writeBackup copies the client file's bytes next to it, never over an
// earlier backup, with the file's mode.
func writeBackup(path, tag string, doc []byte, now time.Time) (string, error) {
	mode := fs.FileMode(0o600)
	if fi, err := os.Stat(path); err == nil {
		mode = fi.Mode().Perm()
	}
	name := backupName(path, tag, now)
	for i := 1; ; i++ {
		f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
		if errors.Is(err, fs.ErrExist) && i < 100 {
			name = strings.TrimSuffix(backupName(path, tag, now), ".bak") + fmt.Sprintf("-%d.bak", i)
			continue
		}
		if err != nil {
			return "", fmt.Errorf("back up %s: %w", path, err)
		}
		_, werr := f.Write(doc)
		serr := f.Sync()
		cerr := f.Close()
		if err := errors.Join(werr, serr, cerr); err != nil {
			os.Remove(name)
			return "", fmt.Errorf("back up %s: %w", path, err)
		}
		return name, nil
	}
}
