package control

import (
	"embed"
	"io/fs"
	"net/http"
)

// The dashboard: a page and its script, embedded, loading nothing from
// anywhere else, so that it works offline and from a machine with no
// access to the internet.
//
//go:embed ui
var uiFiles embed.FS

// uiHandler serves the dashboard: / is ui/index.html, /ui/ its files.
func uiHandler() http.Handler {
	sub, _ := fs.Sub(uiFiles, "ui")
	files := http.FileServerFS(sub)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", uiCSP)
		if r.URL.Path == "/" {
			http.ServeFileFS(w, r, sub, "index.html")
			return
		}
		http.StripPrefix("/ui/", files).ServeHTTP(w, r)
	})
}

// UIFiles are the dashboard's files (index.html, api.js, app.js,
// style.css): netjam proxy's dashboard takes its style and api.js, the
// script the two dashboards share (the token form, api()), from them.
func UIFiles() fs.FS {
	sub, _ := fs.Sub(uiFiles, "ui")
	return sub
}
