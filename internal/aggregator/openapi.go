package aggregator

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"time"

	"k8s.io/kube-openapi/pkg/handler3"
)

// openapiCache holds the v3 paths each backend lists, by APIService
// name.
type openapiCache struct {
	mu      sync.Mutex
	entries map[string]*openapiEntry
	gen     uint64
}

type openapiEntry struct {
	key     string
	fetched time.Time
	// url is the serverRelativeURL the backend lists for the
	// APIService's group/version ("" when it lists none).
	url string
}

// V3Path is the path of an APIService's OpenAPI v3 document:
// apis/<group>/<version>.
func V3Path(group, version string) string { return "apis/" + group + "/" + version }

// V3Paths returns the OpenAPI v3 documents of the available APIServices
// with a service (path → serverRelativeURL, as their backends list them;
// the documents themselves are proxied), fetched now where not known or
// older than RefreshInterval, and a generation that changes whenever the
// result does.
func (a *Aggregator) V3Paths(ctx context.Context) (map[string]string, uint64) {
	services := a.Remote()
	now := time.Now()
	c := &a.openapi
	c.mu.Lock()
	if c.entries == nil {
		c.entries = map[string]*openapiEntry{}
	}
	var due []*Service
	names := map[string]bool{}
	for _, s := range services {
		names[s.API.Name] = true
		if e := c.entries[s.API.Name]; e == nil || e.key != stateKey(s) || now.Sub(e.fetched) > RefreshInterval {
			due = append(due, s)
		}
	}
	for name := range c.entries {
		if !names[name] {
			delete(c.entries, name)
			c.gen++
		}
	}
	c.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range due {
		wg.Go(func() {
			u := ""
			if s.Available {
				u = a.fetchV3URL(ctx, s)
			}
			c.mu.Lock()
			defer c.mu.Unlock()
			if old := c.entries[s.API.Name]; old == nil || old.url != u {
				c.gen++
			}
			c.entries[s.API.Name] = &openapiEntry{key: stateKey(s), fetched: now, url: u}
		})
	}
	wg.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]string{}
	for _, s := range services {
		if e := c.entries[s.API.Name]; e != nil && e.url != "" {
			out[V3Path(s.API.Spec.Group, s.API.Spec.Version)] = e.url
		}
	}
	return out, a.gen.Load()<<32 ^ c.gen
}

// fetchV3URL reads the backend's /openapi/v3 for the serverRelativeURL
// of the APIService's document ("" if it has none).
func (a *Aggregator) fetchV3URL(ctx context.Context, s *Service) string {
	ans, err := a.get(ctx, s, "/openapi/v3", "application/json")
	if err != nil || ans.code != http.StatusOK {
		return ""
	}
	var d handler3.OpenAPIV3Discovery
	if json.Unmarshal(ans.body, &d) != nil {
		return ""
	}
	p, ok := d.Paths[V3Path(s.API.Spec.Group, s.API.Spec.Version)]
	if !ok || !strings.HasPrefix(p.ServerRelativeURL, "/openapi/v3/") {
		return ""
	}
	return p.ServerRelativeURL
}

// ServeOpenAPI proxies a request for the OpenAPI v3 document of an
// APIService with a service (/openapi/v3/apis/<group>/<version>) to its
// backend, and reports true; false (nothing written) for any other path.
func (a *Aggregator) ServeOpenAPI(w http.ResponseWriter, r *http.Request) bool {
	rest, ok := strings.CutPrefix(r.URL.Path, "/openapi/v3/apis/")
	if !ok {
		return false
	}
	parts := strings.Split(rest, "/")
	if len(parts) != 2 {
		return false
	}
	s := a.Lookup(parts[0], parts[1])
	if s == nil || s.Local() {
		return false
	}
	a.proxy(w, r, s)
	return true
}
