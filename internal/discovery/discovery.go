package discovery

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/klauspost/compress/gzip"
	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/version"

	"github.com/crdserver/crdserver/internal/aggregator"
	"github.com/crdserver/crdserver/internal/filters"
	"github.com/crdserver/crdserver/internal/registry"
	"github.com/crdserver/crdserver/internal/request"
	"github.com/crdserver/crdserver/internal/resource"
)

// Handler serves discovery.
type Handler struct {
	Registry *registry.Registry
	Version  version.Info
	// Aggregated, when set, are the groups of APIServices other servers
	// serve: listed beside this server's, and winning a group/version
	// both serve.
	Aggregated Aggregated

	// cache holds what was made of the latest Index: its groups, and the
	// aggregated documents as they were sent (gzipped too), so that
	// kubectl's discovery with thousands of CRDs only copies bytes.
	cache atomic.Pointer[indexCache]
}

// Aggregated gives discovery the groups other servers serve, and a
// generation that changes whenever they do.
type Aggregated interface {
	Groups(ctx context.Context) ([]aggregator.Group, uint64)
}

// indexCache is what discovery made of one Index (and one generation of
// the aggregated groups).
type indexCache struct {
	ix     *registry.Index
	aggGen uint64
	groups []*groupVersions
	mu     sync.Mutex
	docs   map[string]*document
}

// document is an aggregated discovery document as sent: its body in the
// representation asked for, gzipped once if big enough, and its ETag.
type document struct {
	body, gzipped []byte
	etag          string
}

// cached returns the cache of the current Index and aggregated groups.
func (h *Handler) cached(ctx context.Context) *indexCache {
	ix := h.Registry.Index()
	var agg []aggregator.Group
	var gen uint64
	if h.Aggregated != nil {
		agg, gen = h.Aggregated.Groups(ctx)
	}
	if c := h.cache.Load(); c != nil && c.ix == ix && c.aggGen == gen {
		return c
	}
	c := &indexCache{ix: ix, aggGen: gen, groups: withAggregated(groupsOf(ix), agg), docs: map[string]*document{}}
	h.cache.Store(c)
	return c
}

type groupVersions struct {
	name     string
	crd      bool
	versions []string // priority order
	// resources by version
	resources map[string][]*resource.Resource
	// agg are the versions other servers serve, as they list them.
	agg map[string]*apidiscoveryv2.APIVersionDiscovery
	// priority orders groups that are not built in (a CRD group's is
	// 1000, as kube-aggregator gives them).
	priority int32
}

// withAggregated adds the aggregated groups to groups (kube-aggregator's
// order: versions by versionPriority, then kube's version order; a local
// version counts as a CRD's, 100; groups not built in by priority, then
// name).
func withAggregated(groups []*groupVersions, agg []aggregator.Group) []*groupVersions {
	if len(agg) == 0 {
		return groups
	}
	byName := map[string]*groupVersions{}
	for _, g := range groups {
		byName[g.name] = g
	}
	for _, ag := range agg {
		g := byName[ag.Name]
		if g == nil {
			g = &groupVersions{name: ag.Name, crd: true, resources: map[string][]*resource.Resource{}, priority: 1000}
			byName[ag.Name] = g
			groups = append(groups, g)
		}
		g.priority = max(g.priority, ag.Priority)
		g.agg = map[string]*apidiscoveryv2.APIVersionDiscovery{}
		prio := map[string]int32{}
		for _, v := range g.versions {
			prio[v] = 100
		}
		for _, av := range ag.Versions {
			d := av.Discovery
			d.Version = av.Name
			g.agg[av.Name] = &d
			delete(g.resources, av.Name)
			prio[av.Name] = av.Priority
		}
		g.versions = g.versions[:0]
		for v := range prio {
			g.versions = append(g.versions, v)
		}
		sort.Slice(g.versions, func(i, j int) bool {
			a, b := g.versions[i], g.versions[j]
			if prio[a] != prio[b] {
				return prio[a] > prio[b]
			}
			return version.CompareKubeAwareVersionStrings(a, b) > 0
		})
	}
	sort.SliceStable(groups, func(i, j int) bool {
		a, b := groups[i], groups[j]
		if a.crd != b.crd {
			return !a.crd
		}
		if !a.crd {
			return false
		}
		if a.priority != b.priority {
			return a.priority > b.priority
		}
		return a.name < b.name
	})
	return groups
}

// groups returns the served groups in discovery order: the core group, the
// built-in groups, then CRD groups by name. Versions are in priority order.
func (h *Handler) groups(ctx context.Context) []*groupVersions { return h.cached(ctx).groups }

func groupsOf(ix *registry.Index) []*groupVersions {
	byName := map[string]*groupVersions{}
	var order []*groupVersions
	for _, res := range ix.Resources {
		if !ix.Discoverable[res] {
			continue
		}
		g := byName[res.Group]
		if g == nil {
			g = &groupVersions{name: res.Group, crd: !ix.Builtin[res], resources: map[string][]*resource.Resource{}, priority: 1000}
			byName[res.Group] = g
			order = append(order, g)
		}
		for _, v := range res.Versions {
			if _, ok := g.resources[v.Name]; !ok {
				g.versions = append(g.versions, v.Name)
			}
			g.resources[v.Name] = append(g.resources[v.Name], res)
		}
	}
	for _, g := range order {
		resource.SortVersions(g.versions)
		for _, rs := range g.resources {
			sort.SliceStable(rs, func(i, j int) bool { return rs[i].Plural < rs[j].Plural })
		}
	}
	sort.SliceStable(order, func(i, j int) bool {
		a, b := order[i], order[j]
		if a.crd != b.crd {
			return !a.crd
		}
		return a.crd && a.name < b.name
	})
	return order
}

func (h *Handler) group(ctx context.Context, name string) *groupVersions {
	for _, g := range h.groups(ctx) {
		if g.name == name {
			return g
		}
	}
	return nil
}

func gv(group, v string) string {
	if group == "" {
		return v
	}
	return group + "/" + v
}

var aggregatedOffer = request.Offer{Transforms: map[request.As][]string{
	request.AsAPIGroupDiscoveryList: {"apidiscovery.k8s.io/v2", "apidiscovery.k8s.io/v2beta1"},
}}

// ServeHTTP answers /api, /apis and the paths below them that are not
// resources. It returns false when the path is not a discovery path.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) bool {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	switch {
	case len(parts) == 1 && parts[0] == "api":
		t, err := request.Negotiate(r, aggregatedOffer)
		if err != nil {
			request.WriteError(w, r, err)
			return true
		}
		if t.As == request.AsAPIGroupDiscoveryList {
			h.writeAggregated(w, r, t, true)
			return true
		}
		request.WriteObject(w, r, http.StatusOK, t, &metav1.APIVersions{
			TypeMeta:                   metav1.TypeMeta{Kind: "APIVersions"},
			Versions:                   []string{"v1"},
			ServerAddressByClientCIDRs: serverAddresses(r),
		})
		return true
	case len(parts) == 2 && parts[0] == "api":
		if parts[1] != "v1" {
			return false
		}
		h.writeResourceList(w, r, "", "v1")
		return true
	case len(parts) == 1 && parts[0] == "apis":
		t, err := request.Negotiate(r, aggregatedOffer)
		if err != nil {
			request.WriteError(w, r, err)
			return true
		}
		if t.As == request.AsAPIGroupDiscoveryList {
			h.writeAggregated(w, r, t, false)
			return true
		}
		list := &metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}, Groups: []metav1.APIGroup{}}
		for _, g := range h.groups(r.Context()) {
			if g.name != "" {
				ag := apiGroup(g)
				ag.ServerAddressByClientCIDRs = serverAddresses(r)
				list.Groups = append(list.Groups, ag)
			}
		}
		request.WriteObject(w, r, http.StatusOK, t, list)
		return true
	case len(parts) == 2 && parts[0] == "apis":
		g := h.group(r.Context(), parts[1])
		if g == nil || g.name == "" {
			return false
		}
		t, err := request.Negotiate(r, request.Offer{})
		if err != nil {
			request.WriteError(w, r, err)
			return true
		}
		ag := apiGroup(g)
		ag.TypeMeta = metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"}
		ag.ServerAddressByClientCIDRs = serverAddresses(r)
		request.WriteObject(w, r, http.StatusOK, t, &ag)
		return true
	case len(parts) == 3 && parts[0] == "apis":
		if parts[1] == "" {
			return false
		}
		return h.writeResourceList(w, r, parts[1], parts[2])
	}
	return false
}

func apiGroup(g *groupVersions) metav1.APIGroup {
	ag := metav1.APIGroup{Name: g.name}
	for _, v := range g.versions {
		ag.Versions = append(ag.Versions, metav1.GroupVersionForDiscovery{GroupVersion: gv(g.name, v), Version: v})
	}
	ag.PreferredVersion = ag.Versions[0]
	return ag
}

func serverAddresses(r *http.Request) []metav1.ServerAddressByClientCIDR {
	host := r.Host
	if host == "" {
		return nil
	}
	if _, _, err := net.SplitHostPort(host); err != nil {
		return nil
	}
	return []metav1.ServerAddressByClientCIDR{{ClientCIDR: "0.0.0.0/0", ServerAddress: host}}
}

// StorageVersionHash identifies a resource's storage version, as Kubernetes
// publishes it: the first 8 bytes of the SHA-256 of group/version/kind.
func StorageVersionHash(group, version, kind string) string {
	sum := sha256.Sum256([]byte(group + "/" + version + "/" + kind))
	return base64.StdEncoding.EncodeToString(sum[:8])
}

func (h *Handler) writeResourceList(w http.ResponseWriter, r *http.Request, group, ver string) bool {
	g := h.group(r.Context(), group)
	if g == nil || len(g.resources[ver]) == 0 {
		return false
	}
	t, err := request.Negotiate(r, request.Offer{})
	if err != nil {
		request.WriteError(w, r, err)
		return true
	}
	list := &metav1.APIResourceList{
		TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
		GroupVersion: gv(group, ver),
		APIResources: []metav1.APIResource{},
	}
	for _, res := range g.resources[ver] {
		list.APIResources = append(list.APIResources, metav1.APIResource{
			Name:               res.Plural,
			SingularName:       res.Singular,
			Namespaced:         res.Namespaced,
			Kind:               res.Kind,
			Verbs:              res.Verbs,
			ShortNames:         res.ShortNames,
			Categories:         res.Categories,
			StorageVersionHash: StorageVersionHash(res.Group, res.StorageVersion, res.Kind),
		})
		for _, sub := range subresources(res, ver) {
			kind := res.Kind
			if sub.kind != "" {
				kind = sub.kind
			}
			list.APIResources = append(list.APIResources, metav1.APIResource{
				Name:       res.Plural + "/" + sub.name,
				Namespaced: res.Namespaced,
				Group:      sub.group,
				Version:    sub.version,
				Kind:       kind,
				Verbs:      sub.verbs,
			})
		}
	}
	request.WriteObject(w, r, http.StatusOK, t, list)
	return true
}

type subresource struct {
	name  string
	verbs []string
	// group, version and kind of what it serves, when not the resource's.
	group, version, kind string
}

func subresources(res *resource.Resource, ver string) []subresource {
	var out []subresource
	v := res.Version(ver)
	if v != nil && v.Status {
		out = append(out, subresource{name: "status", verbs: []string{"get", "patch", "update"}})
	}
	if v != nil && v.Scale != nil {
		out = append(out, subresource{name: "scale", verbs: []string{"get", "patch", "update"}, group: "autoscaling", version: "v1", kind: "Scale"})
	}
	if _, ok := res.Strategy.(resource.FinalizeStrategy); ok {
		out = append(out, subresource{name: "finalize", verbs: []string{"update"}})
	}
	for _, s := range res.Subresources {
		out = append(out, subresource{name: s.Name, verbs: s.Verbs, group: s.Group, version: s.Version, kind: s.Kind})
	}
	return out
}

func (h *Handler) writeAggregated(w http.ResponseWriter, r *http.Request, t request.Target, core bool) {
	c := h.cached(r.Context())
	key := fmt.Sprintf("%t|%s", core, t.ContentType())
	c.mu.Lock()
	doc := c.docs[key]
	if doc == nil {
		var err error
		if doc, err = aggregated(c.groups, t, core); err != nil {
			c.mu.Unlock()
			request.WriteError(w, r, err)
			return
		}
		c.docs[key] = doc
	}
	c.mu.Unlock()
	w.Header().Set("Vary", "Accept")
	w.Header().Set("ETag", doc.etag)
	w.Header().Set("Cache-Control", "public")
	if r.Header.Get("If-None-Match") == doc.etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h2 := w.Header()
	h2.Set("Content-Type", t.ContentType())
	body := doc.body
	if doc.gzipped != nil && filters.AcceptsGzip(r) {
		body = doc.gzipped
		h2.Set("Content-Encoding", "gzip")
		h2.Add("Vary", "Accept-Encoding")
	}
	h2.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}

// aggregated makes the aggregated discovery document of the core group
// (or of the others) in the representation t.
func aggregated(groups []*groupVersions, t request.Target, core bool) (*document, error) {
	list := &apidiscoveryv2.APIGroupDiscoveryList{
		TypeMeta: metav1.TypeMeta{Kind: "APIGroupDiscoveryList", APIVersion: t.Group + "/" + t.Version},
		Items:    []apidiscoveryv2.APIGroupDiscovery{},
	}
	for _, g := range groups {
		if (g.name == "") != core {
			continue
		}
		item := apidiscoveryv2.APIGroupDiscovery{ObjectMeta: metav1.ObjectMeta{Name: g.name}}
		for _, v := range g.versions {
			if d := g.agg[v]; d != nil {
				item.Versions = append(item.Versions, *d)
				continue
			}
			vd := apidiscoveryv2.APIVersionDiscovery{Version: v, Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent, Resources: []apidiscoveryv2.APIResourceDiscovery{}}
			for _, res := range g.resources[v] {
				scope := apidiscoveryv2.ScopeCluster
				if res.Namespaced {
					scope = apidiscoveryv2.ScopeNamespace
				}
				rd := apidiscoveryv2.APIResourceDiscovery{
					Resource:         res.Plural,
					ResponseKind:     &metav1.GroupVersionKind{Group: res.Group, Version: v, Kind: res.Kind},
					Scope:            scope,
					SingularResource: res.Singular,
					Verbs:            res.Verbs,
					ShortNames:       res.ShortNames,
					Categories:       res.Categories,
				}
				for _, sub := range subresources(res, v) {
					rk := &metav1.GroupVersionKind{Group: res.Group, Version: v, Kind: res.Kind}
					if sub.kind != "" {
						rk = &metav1.GroupVersionKind{Group: sub.group, Version: sub.version, Kind: sub.kind}
					}
					rd.Subresources = append(rd.Subresources, apidiscoveryv2.APISubresourceDiscovery{
						Subresource:  sub.name,
						ResponseKind: rk,
						Verbs:        sub.verbs,
					})
				}
				vd.Resources = append(vd.Resources, rd)
			}
			item.Versions = append(item.Versions, vd)
		}
		list.Items = append(list.Items, item)
	}
	body, err := json.Marshal(list)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(body)
	doc := &document{etag: `"` + hex.EncodeToString(sum[:]) + `"`}
	if doc.body, err = request.Encode(t, body); err != nil {
		return nil, err
	}
	if len(doc.body) >= filters.GzipThreshold {
		var buf bytes.Buffer
		gz := gzip.NewWriter(&buf)
		_, _ = gz.Write(doc.body)
		if gz.Close() == nil {
			doc.gzipped = buf.Bytes()
		}
	}
	return doc, nil
}

// ServeVersion answers /version.
func (h *Handler) ServeVersion(w http.ResponseWriter, r *http.Request) {
	t, err := request.Negotiate(r, request.Offer{})
	if err != nil {
		request.WriteError(w, r, err)
		return
	}
	request.WriteObject(w, r, http.StatusOK, t, h.Version)
}
