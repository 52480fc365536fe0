// Package static serves Accord's own CSS and JavaScript and the vendored
// browser libraries, embedded in the binary under content-hashed URLs
// (/static/css/app.3f9a1c2b.css) with long cache lifetimes: a changed file
// gets a new URL, so browsers never run stale code.
package static

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"sync"
)

//go:embed css js img vendor
var files embed.FS

// Prefix is where the files are mounted.
const Prefix = "/static/"

type asset struct {
	name string // path inside the embed FS
}

// assetIndex maps names to content-hashed names and back.
type assetIndex struct {
	hashedByName map[string]string // "js/charts.js" → "js/charts.1a2b3c4d.js"
	nameByHashed map[string]asset
}

// index hashes the files on first use, not at start: the same binary runs
// as the probe on lab hosts, hundreds of times a test run, and never
// serves a page there (hashing the 1 MB of vendored JavaScript took 10 to
// 20 ms at every start).
var index = sync.OnceValue(func() assetIndex {
	ix := assetIndex{hashedByName: map[string]string{}, nameByHashed: map[string]asset{}}
	_ = fs.WalkDir(files, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, readErr := files.ReadFile(p)
		if readErr != nil {
			return readErr
		}
		sum := sha256.Sum256(body)
		ext := path.Ext(p)
		hashed := strings.TrimSuffix(p, ext) + "." + hex.EncodeToString(sum[:4]) + ext
		ix.hashedByName[p] = hashed
		ix.nameByHashed[hashed] = asset{name: p}
		return nil
	})
	return ix
})

// URL returns the content-hashed URL of a file ("js/charts.js"). An unknown
// name (a missing vendored file when `make assets` was not run) still gets a
// URL, which answers 404, so the page shows the problem in the console.
func URL(name string) string {
	if hashed, ok := index().hashedByName[name]; ok {
		return Prefix + hashed
	}
	return Prefix + name
}

// Has reports whether name is embedded (used by readiness checks and tests).
func Has(name string) bool {
	_, ok := index().hashedByName[name]
	return ok
}

// Handler serves hashed URLs with immutable caching, and plain names with
// a short cache (for tools that link them directly).
func Handler() http.Handler {
	fileServer := http.FileServer(http.FS(files))
	ix := index()
	return http.StripPrefix(Prefix, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a, ok := ix.nameByHashed[r.URL.Path]; ok {
			w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
			r2 := r.Clone(r.Context())
			r2.URL.Path = "/" + a.name
			fileServer.ServeHTTP(w, r2)
			return
		}
		if _, ok := ix.hashedByName[r.URL.Path]; !ok || strings.HasSuffix(r.URL.Path, "/") {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Cache-Control", "public, max-age=300")
		r2 := r.Clone(r.Context())
		r2.URL.Path = "/" + r.URL.Path
		fileServer.ServeHTTP(w, r2)
	}))
}
