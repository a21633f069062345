// Package npxtest serves a fake npm registry for tests that run the real
// npm against it: packages published from files in memory, a `latest` tag
// that can be moved, tarball downloads that can be held, as a slow network
// holds them, and a record of what was asked for.
package npxtest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha1"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
)

// Server is a minimal MCP server, for a package's files: it answers
// initialize with its package's name and version as serverInfo, and the
// tool "version" with its version.
const Server = `#!/usr/bin/env node
const pkg = require('./package.json');
const send = (m) => process.stdout.write(JSON.stringify(m) + '\n');
require('readline').createInterface({ input: process.stdin }).on('line', (l) => {
  let m; try { m = JSON.parse(l); } catch { return; }
  if (m.id === undefined) return;
  if (m.method === 'initialize') return send({ jsonrpc: '2.0', id: m.id, result: { protocolVersion: m.params.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: pkg.name, version: pkg.version } } });
  if (m.method === 'tools/list') return send({ jsonrpc: '2.0', id: m.id, result: { tools: [{ name: 'version', inputSchema: { type: 'object' } }] } });
  if (m.method === 'tools/call') return send({ jsonrpc: '2.0', id: m.id, result: { content: [{ type: 'text', text: pkg.version }] } });
  send({ jsonrpc: '2.0', id: m.id, error: { code: -32601, message: 'method not found' } });
});
`

// Registry is a fake npm registry on a local port.
type Registry struct {
	srv *httptest.Server

	mu       sync.Mutex
	packages map[string]*pkg
	asked    []string      // paths asked for, unescaped
	hold     chan struct{} // non-nil: tarball downloads wait for it to close
	waiting  chan struct{} // closed when a held download arrives
}

// tarballs is where tarball paths start: tarballs + "NAME@VERSION.tgz".
const tarballs = "/-/tarballs/"

type pkg struct {
	latest   string
	versions map[string]version
}

type version struct {
	manifest map[string]any // package.json, with dist
	tarball  []byte
}

// NewRegistry starts a registry that stops with the test.
func NewRegistry(t testing.TB) *Registry {
	r := &Registry{packages: map[string]*pkg{}}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(func() {
		r.Release()
		r.srv.Close()
	})
	return r
}

// URL is the registry's address, for npm's registry setting.
func (r *Registry) URL() string { return r.srv.URL + "/" }

// Env is the environment that points npm at the registry, with cache as
// npm's cache (never the user's own) and npm's chatter off.
func (r *Registry) Env(cache string) map[string]string {
	return map[string]string{
		"npm_config_registry":        r.URL(),
		"npm_config_cache":           cache,
		"npm_config_update_notifier": "false",
		"npm_config_audit":           "false",
		"npm_config_fund":            "false",
	}
}

// Publish adds name@ver with files (paths under the package, package.json
// among them) and makes it latest.
func (r *Registry) Publish(t testing.TB, name, ver string, files map[string]string) {
	t.Helper()
	var manifest map[string]any
	if err := json.Unmarshal([]byte(files["package.json"]), &manifest); err != nil {
		t.Fatalf("%s@%s: package.json: %v", name, ver, err)
	}
	if manifest["name"] != name || manifest["version"] != ver {
		t.Fatalf("%s@%s: package.json is that of %v@%v", name, ver, manifest["name"], manifest["version"])
	}
	r.publish(t, manifest, files)
}

// PublishManifest adds the version manifest (its package.json: name,
// version, bin, dependencies) describes, with files as its other files,
// and makes it latest.
func (r *Registry) PublishManifest(t testing.TB, manifest map[string]any, files map[string]string) {
	t.Helper()
	pj, err := json.Marshal(manifest)
	if err != nil {
		t.Fatal(err)
	}
	all := maps.Clone(files)
	if all == nil {
		all = map[string]string{}
	}
	all["package.json"] = string(pj)
	r.publish(t, maps.Clone(manifest), all)
}

// publish adds manifest's version with files, package.json among them.
func (r *Registry) publish(t testing.TB, manifest map[string]any, files map[string]string) {
	t.Helper()
	name, _ := manifest["name"].(string)
	ver, _ := manifest["version"].(string)
	if name == "" || ver == "" {
		t.Fatalf("package.json has no name or version: %v", manifest)
	}
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, path := range slices.Sorted(maps.Keys(files)) {
		body := files[path]
		mode := int64(0o644)
		if strings.HasPrefix(body, "#!") {
			mode = 0o755
		}
		if err := tw.WriteHeader(&tar.Header{Name: "package/" + path, Mode: mode, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	sum512, sum1 := sha512.Sum512(buf.Bytes()), sha1.Sum(buf.Bytes())
	manifest["_id"] = name + "@" + ver
	manifest["dist"] = map[string]any{
		"tarball":   r.srv.URL + tarballs + url.PathEscape(name+"@"+ver) + ".tgz",
		"integrity": "sha512-" + base64.StdEncoding.EncodeToString(sum512[:]),
		"shasum":    hex.EncodeToString(sum1[:]),
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.packages[name]
	if p == nil {
		p = &pkg{versions: map[string]version{}}
		r.packages[name] = p
	}
	p.versions[ver] = version{manifest: manifest, tarball: buf.Bytes()}
	p.latest = ver
}

// AskedFor reports whether name's packument or one of its tarballs was
// asked for.
func (r *Registry) AskedFor(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.ContainsFunc(r.asked, func(path string) bool {
		return path == "/"+name || strings.HasPrefix(path, tarballs+name+"@")
	})
}

// SetLatest moves name's latest tag to ver.
func (r *Registry) SetLatest(name, ver string) {
	r.mu.Lock()
	r.packages[name].latest = ver
	r.mu.Unlock()
}

// Hold makes tarball downloads wait until Release; the channel it returns
// is closed when the first held download has arrived.
func (r *Registry) Hold() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hold, r.waiting = make(chan struct{}), make(chan struct{})
	return r.waiting
}

// Release lets held downloads go on.
func (r *Registry) Release() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.hold != nil {
		close(r.hold)
		r.hold = nil
	}
}

func (r *Registry) serve(w http.ResponseWriter, req *http.Request) {
	path, err := url.PathUnescape(req.URL.EscapedPath())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	r.asked = append(r.asked, path)
	r.mu.Unlock()
	if id, ok := strings.CutPrefix(path, tarballs); ok {
		r.mu.Lock()
		hold, waiting := r.hold, r.waiting
		if hold != nil {
			select {
			case <-waiting:
			default:
				close(waiting)
			}
		}
		r.mu.Unlock()
		if hold != nil {
			select {
			case <-hold:
			case <-req.Context().Done():
				return
			}
		}
		id = strings.TrimSuffix(id, ".tgz")
		at := strings.LastIndexByte(id, '@')
		if at <= 0 {
			http.NotFound(w, req)
			return
		}
		r.mu.Lock()
		var body []byte
		if p := r.packages[id[:at]]; p != nil {
			body = p.versions[id[at+1:]].tarball
		}
		r.mu.Unlock()
		if body == nil {
			http.NotFound(w, req)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write(body)
		return
	}
	name := strings.TrimPrefix(path, "/")
	r.mu.Lock()
	p := r.packages[name]
	var doc []byte
	if p != nil {
		versions := map[string]any{}
		for v, ver := range p.versions {
			versions[v] = ver.manifest
		}
		doc, _ = json.Marshal(map[string]any{"name": name, "dist-tags": map[string]string{"latest": p.latest}, "versions": versions})
	}
	r.mu.Unlock()
	if doc == nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte(`{"error":"Not found"}`))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(doc)
}

// NeedNPM skips the test unless SWITCHBOARD_NPX is set and npm and node
// are on PATH.
func NeedNPM(t testing.TB) {
	t.Helper()
	if os.Getenv("SWITCHBOARD_NPX") == "" {
		t.Skip("SWITCHBOARD_NPX is not set")
	}
	for _, tool := range []string{"npm", "node"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skip(tool + " not found")
		}
	}
}
