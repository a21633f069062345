package npx

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha1"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
)

// fakeRegistry is an npm registry serving packages made by the test: a
// packument per name (its versions, the last added one tagged latest)
// and their tarballs. It records what was asked of it.
type fakeRegistry struct {
	srv *httptest.Server

	mu       sync.Mutex
	versions map[string][]map[string]any // name -> package.json of each version, with dist
	tarballs map[string][]byte           // tarball path -> bytes
	asked    []string                    // paths, unescaped
}

func newFakeRegistry(t *testing.T) *fakeRegistry {
	r := &fakeRegistry{versions: map[string][]map[string]any{}, tarballs: map[string][]byte{}}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

// URL is the registry as npm's registry setting names it.
func (r *fakeRegistry) URL() string { return r.srv.URL + "/" }

// add publishes a version: manifest is its package.json (name, version,
// bin, dependencies), files its other files.
func (r *fakeRegistry) add(t *testing.T, manifest map[string]any, files map[string]string) {
	t.Helper()
	name, version := manifest["name"].(string), manifest["version"].(string)
	pj, err := json.Marshal(manifest)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	entries := map[string]string{"package.json": string(pj)}
	for k, v := range files {
		entries[k] = v
	}
	for _, path := range slices.Sorted(func(yield func(string) bool) {
		for k := range entries {
			if !yield(k) {
				return
			}
		}
	}) {
		body := entries[path]
		if err := tw.WriteHeader(&tar.Header{Name: "package/" + path, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
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
	tgz := buf.Bytes()
	file := "/-/" + strings.ReplaceAll(name, "/", "-") + "-" + version + ".tgz"
	sha := sha1.Sum(tgz)
	sum := sha512.Sum512(tgz)
	v := map[string]any{"_id": name + "@" + version}
	for k, val := range manifest {
		v[k] = val
	}
	v["dist"] = map[string]any{
		"tarball":   r.srv.URL + file,
		"shasum":    hex.EncodeToString(sha[:]),
		"integrity": "sha512-" + base64.StdEncoding.EncodeToString(sum[:]),
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.versions[name] = append(r.versions[name], v)
	r.tarballs[file] = tgz
}

// askedFor reports whether a packument or tarball of name was asked for.
func (r *fakeRegistry) askedFor(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.ContainsFunc(r.asked, func(p string) bool {
		return p == "/"+name || strings.HasPrefix(p, "/-/"+strings.ReplaceAll(name, "/", "-")+"-")
	})
}

func (r *fakeRegistry) serve(w http.ResponseWriter, req *http.Request) {
	path, err := url.PathUnescape(req.URL.EscapedPath())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	r.asked = append(r.asked, path)
	tgz, isTarball := r.tarballs[path]
	versions := r.versions[strings.TrimPrefix(path, "/")]
	var doc map[string]any
	if len(versions) > 0 {
		all := map[string]any{}
		for _, v := range versions {
			all[v["version"].(string)] = v
		}
		doc = map[string]any{"name": versions[0]["name"], "dist-tags": map[string]any{"latest": versions[len(versions)-1]["version"]}, "versions": all}
	}
	r.mu.Unlock()
	switch {
	case isTarball:
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write(tgz)
	case doc != nil:
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(doc)
	default:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte(`{"error":"Not found"}`))
	}
}
