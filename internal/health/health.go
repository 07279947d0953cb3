package health

import (
	"bytes"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"strings"
)

// Check is one named health check.
type Check struct {
	Name  string
	Check func(r *http.Request) error
}

// Endpoint is one of /livez, /readyz, /healthz with its checks.
type Endpoint struct {
	Name   string // "livez", "readyz", "healthz"
	Checks []Check
	Log    *slog.Logger
}

// Ping is the check that always passes.
var Ping = Check{Name: "ping", Check: func(*http.Request) error { return nil }}

// ServeHTTP answers /<name> and /<name>/<check>.
func (e *Endpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	sub := strings.TrimPrefix(strings.TrimPrefix(r.URL.Path, "/"+e.Name), "/")
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-cache, private")
	checks := e.Checks
	if len(checks) == 0 {
		checks = []Check{Ping}
	}
	if sub != "" {
		for _, c := range checks {
			if c.Name == sub {
				if err := c.Check(r); err != nil {
					w.WriteHeader(http.StatusInternalServerError)
					fmt.Fprintf(w, "internal server error: %v\n", err)
					return
				}
				fmt.Fprint(w, "ok")
				return
			}
		}
		http.NotFound(w, r)
		return
	}
	q := r.URL.Query()
	excluded := map[string]bool{}
	for _, x := range q["exclude"] {
		for _, n := range strings.Split(x, ",") {
			if n = strings.TrimSpace(n); n != "" {
				excluded[n] = true
			}
		}
	}
	var out bytes.Buffer
	failed := false
	for _, c := range checks {
		if excluded[c.Name] {
			fmt.Fprintf(&out, "[+]%s excluded: ok\n", c.Name)
			delete(excluded, c.Name)
			continue
		}
		if err := c.Check(r); err != nil {
			failed = true
			fmt.Fprintf(&out, "[-]%s failed: reason withheld\n", c.Name)
			if e.Log != nil {
				e.Log.Info(e.Name+" check failed", "check", c.Name, "err", err)
			}
			continue
		}
		fmt.Fprintf(&out, "[+]%s ok\n", c.Name)
	}
	if len(excluded) > 0 {
		var names []string
		for n := range excluded {
			names = append(names, fmt.Sprintf("%q", n))
		}
		sort.Strings(names)
		fmt.Fprintf(&out, "warn: some health checks cannot be excluded: no matches for %s\n", strings.Join(names, ","))
	}
	if failed {
		fmt.Fprintf(&out, "%s check failed\n", e.Name)
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write(out.Bytes())
		return
	}
	if _, verbose := q["verbose"]; verbose {
		fmt.Fprintf(&out, "%s check passed\n", e.Name)
		_, _ = w.Write(out.Bytes())
		return
	}
	fmt.Fprint(w, "ok")
}
