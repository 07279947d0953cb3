package aggregator

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"sync"
	"time"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/endpoints"
	"k8s.io/client-go/transport"
)

// RefreshInterval is how long what a backend's discovery listed is used
// before it is fetched again (kube-aggregator refetches when the
// APIService changes, and on a resync).
const RefreshInterval = 30 * time.Second

// fetchTimeout bounds one fetch of a backend's discovery, as
// kube-aggregator's does.
const fetchTimeout = 5 * time.Second

// maxDiscoveryBytes bounds a backend's discovery document.
const maxDiscoveryBytes = 16 << 20

// aggregatorUser is who the aggregator fetches discovery as.
const aggregatorUser = "system:kube-aggregator"

var aggregatorGroups = []string{"system:masters"}

// discoveryCache holds what each backend's discovery listed, by
// APIService name.
type discoveryCache struct {
	mu      sync.Mutex
	entries map[string]*discoveryEntry
	// gen changes whenever an entry does.
	gen uint64
}

type discoveryEntry struct {
	// key is the APIService state it was fetched for (its
	// resourceVersion and availability).
	key     string
	fetched time.Time
	// version is what the backend listed of the APIService's version;
	// stale says the fetch failed.
	version apidiscoveryv2.APIVersionDiscovery
}

// Group is an aggregated group: its APIServices with a service, each
// with what its backend's discovery lists.
type Group struct {
	Name string
	// Priority is the highest groupPriorityMinimum of its APIServices.
	Priority int32
	// Versions are in priority order.
	Versions []Version
}

// Version is one aggregated version of a group.
type Version struct {
	Name     string
	Priority int32
	// Discovery is what the backend lists (Freshness Stale when it could
	// not be fetched, with no resources).
	Discovery apidiscoveryv2.APIVersionDiscovery
}

// Groups returns the aggregated groups in priority order, each version
// with what its backend lists (fetched now where not known or older than
// RefreshInterval), and a generation that changes whenever the result
// does.
func (a *Aggregator) Groups(ctx context.Context) ([]Group, uint64) {
	services := a.Remote()
	a.refresh(ctx, services)
	a.disc.mu.Lock()
	defer a.disc.mu.Unlock()
	var out []Group
	for _, s := range services {
		spec := s.API.Spec
		if n := len(out); n == 0 || out[n-1].Name != spec.Group {
			out = append(out, Group{Name: spec.Group, Priority: spec.GroupPriorityMinimum})
		}
		g := &out[len(out)-1]
		g.Priority = max(g.Priority, spec.GroupPriorityMinimum)
		v := apidiscoveryv2.APIVersionDiscovery{Version: spec.Version, Freshness: apidiscoveryv2.DiscoveryFreshnessStale}
		if e := a.disc.entries[s.API.Name]; e != nil {
			v = e.version
		}
		g.Versions = append(g.Versions, Version{Name: spec.Version, Priority: spec.VersionPriority, Discovery: v})
	}
	return out, a.gen.Load()<<32 ^ a.disc.gen
}

// stateKey is what a discovery entry of s is valid for.
func stateKey(s *Service) string {
	return fmt.Sprintf("%s|%t", s.API.ResourceVersion, s.Available)
}

// refresh fetches the discovery of the services whose entry is missing,
// made for another state of the APIService, or old; at once, each bounded
// by fetchTimeout.
func (a *Aggregator) refresh(ctx context.Context, services []*Service) {
	now := time.Now()
	var due []*Service
	a.disc.mu.Lock()
	if a.disc.entries == nil {
		a.disc.entries = map[string]*discoveryEntry{}
	}
	names := map[string]bool{}
	for _, s := range services {
		names[s.API.Name] = true
		e := a.disc.entries[s.API.Name]
		if e == nil || e.key != stateKey(s) || now.Sub(e.fetched) > RefreshInterval {
			due = append(due, s)
		}
	}
	for name := range a.disc.entries {
		if !names[name] {
			delete(a.disc.entries, name)
			a.disc.gen++
		}
	}
	a.disc.mu.Unlock()
	if len(due) == 0 {
		return
	}
	var wg sync.WaitGroup
	for _, s := range due {
		wg.Go(func() {
			v := apidiscoveryv2.APIVersionDiscovery{Version: s.API.Spec.Version, Freshness: apidiscoveryv2.DiscoveryFreshnessStale}
			if s.Available {
				if got, err := a.fetchDiscovery(ctx, s); err == nil {
					v = got
					v.Freshness = apidiscoveryv2.DiscoveryFreshnessCurrent
				} else {
					a.o.Log.Debug("aggregator: fetching discovery", "apiservice", s.API.Name, "err", err)
				}
			}
			a.disc.mu.Lock()
			defer a.disc.mu.Unlock()
			old := a.disc.entries[s.API.Name]
			a.disc.entries[s.API.Name] = &discoveryEntry{key: stateKey(s), fetched: now, version: v}
			if old == nil || !equalJSON(old.version, v) {
				a.disc.gen++
			}
		})
	}
	wg.Wait()
}

func equalJSON(x, y any) bool {
	a, err1 := json.Marshal(x)
	b, err2 := json.Marshal(y)
	return err1 == nil && err2 == nil && string(a) == string(b)
}

// get calls the backend of s as the aggregator (system:kube-aggregator,
// system:masters), bounded by fetchTimeout.
func (a *Aggregator) get(ctx context.Context, s *Service, path, accept string) (*answer, error) {
	if s.transportErr != nil {
		return nil, s.transportErr
	}
	loc, err := a.Resolve(s.API.Spec.Service)
	if err != nil {
		return nil, err
	}
	loc.Path = path
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, loc.String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", accept)
	transport.SetAuthProxyHeaders(req, aggregatorUser, "", aggregatorGroups, nil)
	resp, err := (&http.Client{Transport: s.transport, CheckRedirect: noRedirect}).Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxDiscoveryBytes))
	return &answer{code: resp.StatusCode, contentType: resp.Header.Get("Content-Type"), body: body}, err
}

// answer is a backend's answer to the aggregator's GET.
type answer struct {
	code        int
	contentType string
	body        []byte
}

func noRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

const acceptV2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"

// fetchDiscovery reads what the backend of s serves of its group/version:
// from its aggregated discovery (/apis), or else from its
// /apis/<group>/<version>, as kube-aggregator does.
func (a *Aggregator) fetchDiscovery(ctx context.Context, s *Service) (apidiscoveryv2.APIVersionDiscovery, error) {
	gv := s.GroupVersion()
	ans, err := a.get(ctx, s, "/apis", acceptV2)
	if err != nil {
		return apidiscoveryv2.APIVersionDiscovery{}, err
	}
	if ans.code == http.StatusOK && isV2(ans.contentType) {
		list := &apidiscoveryv2.APIGroupDiscoveryList{}
		if err := json.Unmarshal(ans.body, list); err != nil {
			return apidiscoveryv2.APIVersionDiscovery{}, err
		}
		for _, g := range list.Items {
			if g.Name != gv.Group {
				continue
			}
			for _, v := range g.Versions {
				if v.Version == gv.Version {
					for i := range v.Resources {
						if v.Resources[i].ResponseKind == nil {
							v.Resources[i].ResponseKind = &metav1.GroupVersionKind{}
						}
						for j := range v.Resources[i].Subresources {
							if v.Resources[i].Subresources[j].ResponseKind == nil {
								v.Resources[i].Subresources[j].ResponseKind = &metav1.GroupVersionKind{}
							}
						}
					}
					return v, nil
				}
			}
		}
		return apidiscoveryv2.APIVersionDiscovery{Version: gv.Version}, nil
	}
	path := "/apis/" + gv.Group + "/" + gv.Version
	ans, err = a.get(ctx, s, path, "application/json")
	if err != nil {
		return apidiscoveryv2.APIVersionDiscovery{}, err
	}
	if ans.code != http.StatusOK {
		return apidiscoveryv2.APIVersionDiscovery{}, fmt.Errorf("failed to download legacy discovery for %s: %s", path, ans.body)
	}
	list := &metav1.APIResourceList{}
	if err := json.Unmarshal(ans.body, list); err != nil {
		return apidiscoveryv2.APIVersionDiscovery{}, err
	}
	resources, err := endpoints.ConvertGroupVersionIntoToDiscovery(list.APIResources)
	if err != nil {
		return apidiscoveryv2.APIVersionDiscovery{}, err
	}
	return apidiscoveryv2.APIVersionDiscovery{Version: gv.Version, Resources: resources}, nil
}

// isV2 says a Content-Type is aggregated discovery v2.
func isV2(contentType string) bool {
	_, params, err := mime.ParseMediaType(contentType)
	return err == nil && params["g"] == "apidiscovery.k8s.io" && params["v"] == "v2" && params["as"] == "APIGroupDiscoveryList"
}
