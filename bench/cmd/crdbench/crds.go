package main

// crdbench crds: a whole provider's CRDs installed, used once each,
// re-applied and deleted, with the server's memory at each step.

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/crdserver/crdserver/internal/fixtures"
)

// corpusCRD is one CRD of the corpus.
type corpusCRD struct {
	Name, Group, Plural, Kind string
	Namespaced                bool
	// Version is the version objects are created in: the storage one.
	Version string
	// Versions are the names of the versions that have a schema.
	Versions []string
	// Body is the CRD as JSON, decoded.
	Body map[string]any
}

// readCorpus reads the CRDs of a .tar.zst (one CRD a YAML file), sorted by
// file name; limit > 0 keeps the first limit.
func readCorpus(file string, limit int) ([]corpusCRD, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	files, err := fixtures.Files(f)
	if err != nil {
		return nil, err
	}
	if limit > 0 && limit < len(files) {
		files = files[:limit]
	}
	out := make([]corpusCRD, 0, len(files))
	for _, nf := range files {
		j, err := yaml.YAMLToJSON(nf.Data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", nf.Name, err)
		}
		var body map[string]any
		if err := json.Unmarshal(j, &body); err != nil {
			return nil, fmt.Errorf("%s: %w", nf.Name, err)
		}
		var crd struct {
			Metadata struct{ Name string }
			Spec     struct {
				Group, Scope string
				Names        struct{ Plural, Kind string }
				Versions     []struct {
					Name    string
					Storage bool
				}
			}
		}
		if err := json.Unmarshal(j, &crd); err != nil {
			return nil, fmt.Errorf("%s: %w", nf.Name, err)
		}
		c := corpusCRD{Name: crd.Metadata.Name, Group: crd.Spec.Group, Plural: crd.Spec.Names.Plural, Kind: crd.Spec.Names.Kind,
			Namespaced: crd.Spec.Scope == "Namespaced", Body: body}
		for _, v := range crd.Spec.Versions {
			c.Versions = append(c.Versions, v.Name)
			if v.Storage {
				c.Version = v.Name
			}
		}
		if c.Name == "" || c.Version == "" {
			return nil, fmt.Errorf("%s: not a CRD with a storage version", nf.Name)
		}
		out = append(out, c)
	}
	return out, nil
}

// collection is the path of a CRD's objects in its version (in default
// when namespaced).
func (c corpusCRD) collection() string {
	if c.Namespaced {
		return "/apis/" + c.Group + "/" + c.Version + "/namespaces/default/" + c.Plural
	}
	return "/apis/" + c.Group + "/" + c.Version + "/" + c.Plural
}

// object is a minimal valid object of the CRD: every required field with
// the least value its schema allows. Managed resources of Crossplane
// providers need their parameters only when they manage the external
// resource, so the object only observes it (managementPolicies).
func (c corpusCRD) object(name string) []byte {
	md := map[string]any{"name": name}
	if c.Namespaced {
		md["namespace"] = "default"
	}
	obj := map[string]any{}
	if root := c.schema(); root != nil {
		obj, _ = minimalValue(root, 0).(map[string]any)
		props, _ := root["properties"].(map[string]any)
		if spec, ok := props["spec"].(map[string]any); ok {
			sv, _ := obj["spec"].(map[string]any)
			if sv == nil {
				sv, _ = minimalValue(spec, 1).(map[string]any)
			}
			sp, _ := spec["properties"].(map[string]any)
			if _, ok := sp["managementPolicies"]; ok {
				sv["managementPolicies"] = []string{"Observe"}
			}
			if _, ok := sp["forProvider"]; ok && sv["forProvider"] == nil {
				sv["forProvider"] = map[string]any{}
			}
			obj["spec"] = sv
		}
	}
	obj["apiVersion"], obj["kind"], obj["metadata"] = c.Group+"/"+c.Version, c.Kind, md
	b, _ := json.Marshal(obj)
	return b
}

// schema is the openAPIV3Schema of the CRD's storage version.
func (c corpusCRD) schema() map[string]any {
	spec, _ := c.Body["spec"].(map[string]any)
	versions, _ := spec["versions"].([]any)
	for _, v := range versions {
		vm, _ := v.(map[string]any)
		if vm["name"] != c.Version {
			continue
		}
		sch, _ := vm["schema"].(map[string]any)
		root, _ := sch["openAPIV3Schema"].(map[string]any)
		return root
	}
	return nil
}

// minimalValue is the least value of a schema: an object of its required
// properties, the first enum value, the minimum, an empty list.
func minimalValue(s map[string]any, depth int) any {
	if enum, ok := s["enum"].([]any); ok && len(enum) > 0 {
		return enum[0]
	}
	switch s["type"] {
	case "object":
		out := map[string]any{}
		props, _ := s["properties"].(map[string]any)
		req, _ := s["required"].([]any)
		for _, r := range req {
			name, _ := r.(string)
			if depth == 0 && (name == "apiVersion" || name == "kind" || name == "metadata") {
				continue
			}
			if p, ok := props[name].(map[string]any); ok && depth < 20 {
				out[name] = minimalValue(p, depth+1)
			}
		}
		return out
	case "array":
		return []any{}
	case "integer", "number":
		if m, ok := s["minimum"].(float64); ok && m > 0 {
			return m
		}
		return 1
	case "boolean":
		return false
	case "string":
		if n, ok := s["minLength"].(float64); ok && n > 1 {
			return strings.Repeat("x", int(n))
		}
		return "x"
	}
	return map[string]any{}
}

// reapplied is the CRD with a changed description at the root of every
// version's schema, as a provider upgrade changes every schema, at
// resourceVersion rv.
func (c corpusCRD) reapplied(rv, mark string) []byte {
	body := deepCopyJSON(c.Body).(map[string]any)
	md, _ := body["metadata"].(map[string]any)
	md["resourceVersion"] = rv
	spec, _ := body["spec"].(map[string]any)
	versions, _ := spec["versions"].([]any)
	for _, v := range versions {
		vm, _ := v.(map[string]any)
		sch, _ := vm["schema"].(map[string]any)
		root, _ := sch["openAPIV3Schema"].(map[string]any)
		if root != nil {
			d, _ := root["description"].(string)
			root["description"] = d + " (" + mark + ")"
		}
	}
	b, _ := json.Marshal(body)
	return b
}

func deepCopyJSON(v any) any {
	switch v := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(v))
		for k, x := range v {
			m[k] = deepCopyJSON(x)
		}
		return m
	case []any:
		s := make([]any, len(v))
		for i, x := range v {
			s[i] = deepCopyJSON(x)
		}
		return s
	}
	return v
}

// crdState is what the CRD watch knows of one CRD.
type crdState struct {
	rv          string
	generation  int64
	established bool
}

// crdWatch follows every CRD through one watch (resumed when it ends).
type crdWatch struct {
	l       *client
	mu      sync.Mutex
	crds    map[string]crdState
	changed chan struct{} // closed and replaced on every event
	events  atomic.Int64
}

func newCRDWatch(l *client) *crdWatch {
	return &crdWatch{l: l, crds: map[string]crdState{}, changed: make(chan struct{})}
}

// run lists the CRDs, then watches them until ctx ends.
func (w *crdWatch) run(ctx context.Context, ready chan<- error) {
	base := w.l.base + "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
	code, b, err := w.l.do(context.Background(), http.MethodGet, base, nil)
	if err == nil && code != http.StatusOK {
		err = fmt.Errorf("listing CRDs: HTTP %d: %s", code, truncate(b, 500))
	}
	var list struct {
		Metadata struct{ ResourceVersion string }
		Items    []json.RawMessage
	}
	if err == nil {
		err = json.Unmarshal(b, &list)
	}
	if err != nil {
		ready <- err
		return
	}
	for _, it := range list.Items {
		w.apply("ADDED", it)
	}
	rv := list.Metadata.ResourceVersion
	ready <- nil
	for ctx.Err() == nil {
		resp, err := w.l.send(ctx, http.MethodGet, base+"?watch=1&allowWatchBookmarks=true&resourceVersion="+rv, nil)
		if err != nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		dec := json.NewDecoder(resp.Body)
		for {
			var ev struct {
				Type   string
				Object json.RawMessage
			}
			if err := dec.Decode(&ev); err != nil {
				break
			}
			if r := w.apply(ev.Type, ev.Object); r != "" {
				rv = r
			}
		}
		resp.Body.Close()
	}
}

// apply records one event and returns its resourceVersion.
func (w *crdWatch) apply(typ string, raw json.RawMessage) string {
	var o struct {
		Metadata struct {
			Name, ResourceVersion string
			Generation            int64
		}
		Status struct {
			Conditions []struct{ Type, Status string }
		}
	}
	if json.Unmarshal(raw, &o) != nil {
		return ""
	}
	if typ == "BOOKMARK" || typ == "ERROR" {
		return o.Metadata.ResourceVersion
	}
	w.mu.Lock()
	if typ == "DELETED" {
		delete(w.crds, o.Metadata.Name)
	} else {
		st := crdState{rv: o.Metadata.ResourceVersion, generation: o.Metadata.Generation}
		for _, c := range o.Status.Conditions {
			if c.Type == "Established" && c.Status == "True" {
				st.established = true
			}
		}
		w.crds[o.Metadata.Name] = st
	}
	close(w.changed)
	w.changed = make(chan struct{})
	w.mu.Unlock()
	w.events.Add(1)
	return o.Metadata.ResourceVersion
}

// wait waits until ok holds of the CRDs the watch knows, or timeout.
func (w *crdWatch) wait(timeout time.Duration, ok func(map[string]crdState) bool) bool {
	deadline := time.After(timeout)
	for {
		w.mu.Lock()
		done, ch := ok(w.crds), w.changed
		w.mu.Unlock()
		if done {
			return true
		}
		select {
		case <-ch:
		case <-deadline:
			return false
		}
	}
}

func (w *crdWatch) get(name string) crdState {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.crds[name]
}

// rssSampler reads the VmRSS of processes every interval and keeps the
// highest sum.
type rssSampler struct {
	pids namedPIDs
	peak atomic.Uint64 // MiB × 1000
	stop chan struct{}
	done chan struct{}
}

func sampleRSS(pids namedPIDs, every time.Duration) *rssSampler {
	s := &rssSampler{pids: pids, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			if v := uint64(sumRSS(pids) * 1000); v > s.peak.Load() {
				s.peak.Store(v)
			}
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

func (s *rssSampler) end() float64 {
	close(s.stop)
	<-s.done
	return float64(s.peak.Load()) / 1000
}

func sumRSS(pids namedPIDs) float64 {
	_, sum := readRSS(pids)
	return sum
}

// crdsResult is everything one crds run measured.
type crdsResult struct {
	Server      string  `json:"server"`
	Corpus      string  `json:"corpus"`
	CRDs        int     `json:"crds"`
	Concurrency int     `json:"concurrency"`
	Load        string  `json:"loadavg_start"`
	LoadEnd     string  `json:"loadavg_end"`
	SettleSec   float64 `json:"settle_seconds"`

	RSSEmptyMiB float64   `json:"rss_empty_mib"`
	RSSEmpty    []procMem `json:"rss_empty"`

	// Install: from the first create until the watch saw every CRD
	// Established.
	CreatesSec      float64   `json:"creates_seconds"`
	EstablishedSec  float64   `json:"all_established_seconds"`
	Established     int       `json:"established"`
	CreateErrors    int       `json:"create_errors"`
	CreateFailure   *failure  `json:"create_failure,omitempty"`
	RSSPeakMiB      float64   `json:"rss_peak_install_mib"`
	RSSInstalledMiB float64   `json:"rss_installed_mib"`
	RSSInstalled    []procMem `json:"rss_installed"`
	KiBPerCRD       float64   `json:"kib_per_unused_crd"`

	// Discovery and OpenAPI with every CRD installed.
	DiscoveryColdMs  float64      `json:"aggregated_discovery_cold_ms"`
	DiscoveryMs      float64      `json:"aggregated_discovery_median_ms"`
	DiscoveryBytes   int          `json:"aggregated_discovery_bytes"`
	DiscoveryGroups  int          `json:"aggregated_discovery_groups"`
	OpenAPIRootMs    float64      `json:"openapi_v3_root_ms"`
	OpenAPIColdMs    float64      `json:"openapi_v3_gv_cold_median_ms"`
	OpenAPIColdP90Ms float64      `json:"openapi_v3_gv_cold_p90_ms"`
	OpenAPIColdMaxMs float64      `json:"openapi_v3_gv_cold_max_ms"`
	OpenAPIColdCount int          `json:"openapi_v3_gv_cold_count"`
	OpenAPIColdBytes int          `json:"openapi_v3_gv_cold_median_bytes"`
	OpenAPIV2Ms      float64      `json:"openapi_v2_ms,omitempty"`
	OpenAPIV2Bytes   int          `json:"openapi_v2_bytes,omitempty"`
	RSSAfterV2MiB    float64      `json:"rss_after_openapi_v2_mib,omitempty"`
	OpenAPIV2Failure string       `json:"openapi_v2_failure,omitempty"`
	Kubectl          []kubectlRun `json:"kubectl,omitempty"`

	// First use: one dry-run create of every CRD, one after another.
	First         phase     `json:"first_requests"`
	RSSUsedMiB    float64   `json:"rss_after_first_requests_mib"`
	RSSUsed       []procMem `json:"rss_after_first_requests"`
	RSSPeakUseMiB float64   `json:"rss_peak_first_requests_mib"`

	// Re-apply: every CRD updated with a changed description.
	ReapplySec        float64  `json:"reapply_writes_seconds"`
	ReappliedSec      float64  `json:"reapply_all_established_seconds"`
	ReapplyErrors     int      `json:"reapply_errors"`
	ReapplyFailure    *failure `json:"reapply_failure,omitempty"`
	ReapplyServedSec  float64  `json:"reapply_new_schema_served_seconds"`
	ReapplyServedOK   bool     `json:"reapply_new_schema_served"`
	RSSPeakReapplyMiB float64  `json:"rss_peak_reapply_mib"`
	RSSReappliedMiB   float64  `json:"rss_reapplied_mib"`
	Watches           int      `json:"watches"`
	WatchesEnded      int      `json:"watches_ended"`
	WatchesHeard      int      `json:"watches_heard_create"`

	// Delete: every CRD deleted, until the watch saw all go.
	DeleteSec     float64  `json:"delete_seconds"`
	DeletedAll    bool     `json:"deleted_all"`
	DeleteErrors  int      `json:"delete_errors"`
	DeleteFailure *failure `json:"delete_failure,omitempty"`
	RSSEndMiB     float64  `json:"rss_end_mib"`

	Error string `json:"error,omitempty"`
}

// kubectlRun is one kubectl command run with every CRD installed.
type kubectlRun struct {
	Args   []string `json:"args"`
	Ms     float64  `json:"ms"`
	OK     bool     `json:"ok"`
	Output string   `json:"output"`
}

func runCRDs(args []string) error {
	fs := flag.NewFlagSet("crds", flag.ExitOnError)
	var t tlsFlags
	t.register(fs)
	var (
		server      = fs.String("server", "", "API server base URL (loopback only)")
		corpus      = fs.String("corpus", "/work/shared/corpora/provider-upjet-azure-crds.tar.zst", "the CRDs, a .tar.zst of YAML files")
		limit       = fs.Int("limit", 0, "install only the first N CRDs by file name (0: all)")
		conc        = fs.Int("concurrency", 4, "CRDs created (re-applied, deleted) at a time")
		settle      = fs.Duration("settle", 10*time.Second, "wait before reading memory after a phase")
		timeout     = fs.Duration("timeout", 15*time.Minute, "longest wait for all CRDs to be Established (or deleted)")
		first       = fs.Int("first", 0, "CRDs given a first request (0: all)")
		discoveries = fs.Int("discoveries", 5, "aggregated discovery GETs after the cold one")
		openapiGVs  = fs.Int("openapi-gvs", 0, "group/versions whose OpenAPI v3 document is fetched cold, in a random order (0: every one of the corpus)")
		v2          = fs.Bool("openapi-v2", true, "fetch /openapi/v2 once, after the first requests")
		watches     = fs.Int("watches", 20, "custom resource watches kept open through the re-apply")
		reapply     = fs.Bool("reapply", true, "re-apply every CRD with a changed description")
		deleteAll   = fs.Bool("delete", true, "delete every CRD at the end (false: leave them installed)")
		kubectl     = fs.String("kubectl", "", "kubectl to run api-resources, explain and create with (empty: none)")
		kubeconfig  = fs.String("kubeconfig", "", "kubeconfig for kubectl")
		jsonOut     = fs.String("json", "", "write the results as JSON to this file")
		rssPIDs     namedPIDs
	)
	fs.Var(&rssPIDs, "rss-pid", "name=PID of a server process whose VmRSS is read (repeatable)")
	_ = fs.Parse(args)
	l, err := connect(*server, t, 8)
	if err != nil {
		return err
	}
	l.hc.Timeout = 5 * time.Minute
	crds, err := readCorpus(*corpus, *limit)
	if err != nil {
		return err
	}
	r := &crdsResult{Server: l.base, Corpus: *corpus, CRDs: len(crds), Concurrency: *conc, Load: loadavg(), SettleSec: settle.Seconds()}
	err = r.run(l, crds, crdsOptions{
		conc: *conc, settle: *settle, timeout: *timeout, first: *first, discoveries: *discoveries, openapiGVs: *openapiGVs,
		v2: *v2, watches: *watches, reapply: *reapply, deleteAll: *deleteAll, kubectl: *kubectl, kubeconfig: *kubeconfig, rss: rssPIDs,
	})
	r.LoadEnd = loadavg()
	return done(*jsonOut, r, &r.Error, nil, err)
}

type crdsOptions struct {
	conc                int
	settle, timeout     time.Duration
	first               int
	discoveries         int
	openapiGVs          int
	v2                  bool
	watches             int
	reapply, deleteAll  bool
	kubectl, kubeconfig string
	rss                 namedPIDs
}

// each calls f for every CRD, conc at a time, with run; it counts the
// failures and returns the first.
func each(ctx context.Context, crds []corpusCRD, conc int, f func(c corpusCRD) *failure) (int, *failure) {
	p := run(ctx, "", len(crds), conc, 0, 0, func(_ context.Context, i int) (time.Duration, *failure) { return 0, f(crds[i]) })
	return p.Errors, p.FirstError
}

func (r *crdsResult) run(l *client, crds []corpusCRD, o crdsOptions) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := newCRDWatch(l)
	ready := make(chan error, 1)
	go w.run(ctx, ready)
	if err := <-ready; err != nil {
		return err
	}
	for _, c := range crds {
		if _, ok := w.crds[c.Name]; ok {
			return fmt.Errorf("CRD %s exists already: crds needs a server without the corpus", c.Name)
		}
	}
	r.RSSEmpty, r.RSSEmptyMiB = readRSS(o.rss)

	// Install.
	fmt.Fprintf(os.Stderr, "crds: creating %d CRDs, %d at a time\n", len(crds), o.conc)
	peak := sampleRSS(o.rss, 250*time.Millisecond)
	t0 := time.Now()
	r.CreateErrors, r.CreateFailure = each(ctx, crds, o.conc, func(c corpusCRD) *failure {
		b, _ := json.Marshal(c.Body)
		code, out, err := l.do(context.Background(), http.MethodPost, l.base+crdPath, b)
		if err != nil || code != http.StatusCreated {
			return l.fail("create", http.MethodPost, l.base+crdPath, code, out, err)
		}
		return nil
	})
	r.CreatesSec = time.Since(t0).Seconds()
	allEstablished := func(m map[string]crdState) bool {
		for _, c := range crds {
			if !m[c.Name].established {
				return false
			}
		}
		return true
	}
	ok := w.wait(o.timeout, allEstablished)
	r.EstablishedSec = time.Since(t0).Seconds()
	r.RSSPeakMiB = peak.end()
	for _, c := range crds {
		if w.get(c.Name).established {
			r.Established++
		}
	}
	if !ok {
		return fmt.Errorf("%d of %d CRDs Established after %v", r.Established, len(crds), o.timeout)
	}
	fmt.Fprintf(os.Stderr, "crds: all Established after %.1f s; settling %v\n", r.EstablishedSec, o.settle)
	time.Sleep(o.settle)
	r.RSSInstalled, r.RSSInstalledMiB = readRSS(o.rss)
	r.KiBPerCRD = (r.RSSInstalledMiB - r.RSSEmptyMiB) * 1024 / float64(len(crds))

	// Discovery and OpenAPI.
	if err := r.discovery(l, o.discoveries); err != nil {
		return err
	}
	if err := r.openapiV3(l, crds, o.openapiGVs); err != nil {
		return err
	}
	if o.kubectl != "" {
		r.runKubectl(o, crds)
	}

	// First requests.
	use := crds
	if o.first > 0 && o.first < len(use) {
		use = use[:o.first]
	}
	fmt.Fprintf(os.Stderr, "crds: a first request to %d CRDs\n", len(use))
	peak = sampleRSS(o.rss, 250*time.Millisecond)
	r.First = l.phase(ctx, "first-request", len(use), 1, 0, func(i int) request {
		c := use[i]
		return request{http.MethodPost, l.base + c.collection() + "?dryRun=All", c.object("crdbench-first"), []int{http.StatusCreated}}
	}, nil)
	r.RSSPeakUseMiB = peak.end()
	time.Sleep(o.settle)
	r.RSSUsed, r.RSSUsedMiB = readRSS(o.rss)
	if o.v2 {
		t := time.Now()
		code, b, err := l.do(context.Background(), http.MethodGet, l.base+"/openapi/v2", nil)
		r.OpenAPIV2Ms = ms(time.Since(t))
		r.OpenAPIV2Bytes = len(b)
		if err != nil || code != http.StatusOK {
			r.OpenAPIV2Failure = fmt.Sprintf("HTTP %d %v %s", code, err, truncate(b, 300))
		}
		r.RSSAfterV2MiB = sumRSS(o.rss)
	}

	// Re-apply.
	if o.reapply {
		if err := r.reapplyAll(ctx, l, w, crds, o); err != nil {
			return err
		}
	}

	// Delete.
	if !o.deleteAll {
		return nil
	}
	fmt.Fprintf(os.Stderr, "crds: deleting %d CRDs\n", len(crds))
	t0 = time.Now()
	r.DeleteErrors, r.DeleteFailure = each(ctx, crds, o.conc, func(c corpusCRD) *failure {
		u := l.base + crdPath + "/" + c.Name
		code, out, err := l.do(context.Background(), http.MethodDelete, u, nil)
		if err != nil || (code != http.StatusOK && code != http.StatusAccepted) {
			return l.fail("delete", http.MethodDelete, u, code, out, err)
		}
		return nil
	})
	r.DeletedAll = w.wait(o.timeout, func(m map[string]crdState) bool {
		for _, c := range crds {
			if _, ok := m[c.Name]; ok {
				return false
			}
		}
		return true
	})
	r.DeleteSec = time.Since(t0).Seconds()
	time.Sleep(o.settle)
	r.RSSEndMiB = sumRSS(o.rss)
	return nil
}

// aggregatedAccept asks for aggregated discovery, as kubectl does.
const aggregatedAccept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"

func (r *crdsResult) discovery(l *client, n int) error {
	var times []float64
	for i := 0; i <= n; i++ {
		code, b, d, err := l.get(l.base+"/apis", aggregatedAccept)
		if err != nil || code != http.StatusOK {
			return fmt.Errorf("aggregated discovery: HTTP %d %v %s", code, err, truncate(b, 300))
		}
		if i == 0 {
			r.DiscoveryColdMs = ms(d)
			var list struct{ Items []json.RawMessage }
			_ = json.Unmarshal(b, &list)
			r.DiscoveryBytes, r.DiscoveryGroups = len(b), len(list.Items)
			continue
		}
		times = append(times, ms(d))
	}
	r.DiscoveryMs = median(times)
	return nil
}

// openapiV3 fetches the root, then n group/versions of the corpus (0: all
// of them), each for the first time, in a random order.
func (r *crdsResult) openapiV3(l *client, crds []corpusCRD, n int) error {
	code, b, d, err := l.get(l.base+"/openapi/v3", "application/json")
	if err != nil || code != http.StatusOK {
		return fmt.Errorf("/openapi/v3: HTTP %d %v %s", code, err, truncate(b, 300))
	}
	r.OpenAPIRootMs = ms(d)
	var root struct {
		Paths map[string]struct {
			ServerRelativeURL string `json:"serverRelativeURL"`
		}
	}
	if err := json.Unmarshal(b, &root); err != nil {
		return err
	}
	seen := map[string]bool{}
	var gvs []string
	for _, c := range crds {
		p := "apis/" + c.Group + "/" + c.Version
		if !seen[p] {
			seen[p] = true
			gvs = append(gvs, p)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	rng.Shuffle(len(gvs), func(i, j int) { gvs[i], gvs[j] = gvs[j], gvs[i] })
	if n > 0 && n < len(gvs) {
		gvs = gvs[:n]
	}
	var times, sizes []float64
	for _, p := range gvs {
		entry, ok := root.Paths[p]
		if !ok {
			return fmt.Errorf("/openapi/v3 lists no %s", p)
		}
		code, b, d, err := l.get(l.base+entry.ServerRelativeURL, "application/json")
		if err != nil || code != http.StatusOK {
			return fmt.Errorf("%s: HTTP %d %v %s", entry.ServerRelativeURL, code, err, truncate(b, 300))
		}
		times = append(times, ms(d))
		sizes = append(sizes, float64(len(b)))
	}
	r.OpenAPIColdCount = len(times)
	r.OpenAPIColdMs = median(times)
	sorted := slices.Sorted(slices.Values(times))
	r.OpenAPIColdP90Ms = sorted[min(len(sorted)-1, int(0.9*float64(len(sorted))))]
	r.OpenAPIColdMaxMs = slices.Max(times)
	r.OpenAPIColdBytes = int(median(sizes))
	return nil
}

// runKubectl runs api-resources, explain and a create of a corpus kind.
func (r *crdsResult) runKubectl(o crdsOptions, crds []corpusCRD) {
	c := crds[len(crds)/2]
	tmp, err := os.CreateTemp("", "crdbench-object-*.json")
	if err == nil {
		_, _ = tmp.Write(c.object("crdbench-kubectl"))
		tmp.Close()
		defer os.Remove(tmp.Name())
	}
	cache, _ := os.MkdirTemp("", "crdbench-kubectl-cache-")
	defer os.RemoveAll(cache)
	for _, args := range [][]string{
		{"api-resources", "--api-group", c.Group},
		{"explain", c.Plural + ".spec.forProvider", "--api-version", c.Group + "/" + c.Version},
		{"create", "-f", tmp.Name()},
		{"get", c.Plural + "." + c.Group, "-A"},
		{"delete", "-f", tmp.Name()},
	} {
		full := append([]string{"--kubeconfig", o.kubeconfig, "--cache-dir", cache}, args...)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		t := time.Now()
		out, err := exec.CommandContext(ctx, o.kubectl, full...).CombinedOutput()
		cancel()
		r.Kubectl = append(r.Kubectl, kubectlRun{Args: args, Ms: ms(time.Since(t)), OK: err == nil, Output: truncate(bytes.TrimSpace(out), 400)})
	}
}

// reapplyAll keeps watches open on some CRDs' objects, updates every CRD
// with a changed description, and checks that the watches live on.
func (r *crdsResult) reapplyAll(ctx context.Context, l *client, w *crdWatch, crds []corpusCRD, o crdsOptions) error {
	type openWatch struct {
		c     corpusCRD
		ended atomic.Bool
		heard atomic.Bool
	}
	var open []*openWatch
	step := max(1, len(crds)/max(1, o.watches))
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	for i := 0; i < len(crds) && len(open) < o.watches; i += step {
		ow := &openWatch{c: crds[i]}
		code, b, _, err := l.get(l.base+ow.c.collection(), "application/json")
		if err != nil || code != http.StatusOK {
			return fmt.Errorf("listing %s: HTTP %d %v %s", ow.c.collection(), code, err, truncate(b, 300))
		}
		var list struct {
			Metadata struct{ ResourceVersion string }
		}
		_ = json.Unmarshal(b, &list)
		resp, err := l.send(wctx, http.MethodGet, l.base+ow.c.collection()+"?watch=1&resourceVersion="+list.Metadata.ResourceVersion, nil)
		if err != nil {
			return fmt.Errorf("watching %s: %v", ow.c.collection(), err)
		}
		if resp.StatusCode != http.StatusOK {
			_ = resp.Body.Close()
			return fmt.Errorf("watching %s: HTTP %d", ow.c.collection(), resp.StatusCode)
		}
		go func(body io.ReadCloser) {
			defer body.Close()
			dec := json.NewDecoder(body)
			for {
				var ev struct{ Type string }
				if err := dec.Decode(&ev); err != nil {
					if wctx.Err() == nil {
						ow.ended.Store(true)
					}
					return
				}
				if ev.Type == "ADDED" {
					ow.heard.Store(true)
				}
			}
		}(resp.Body)
		open = append(open, ow)
	}
	r.Watches = len(open)
	mark := fmt.Sprintf("re-applied %d", time.Now().Unix())
	gens := map[string]int64{}
	for _, c := range crds {
		gens[c.Name] = w.get(c.Name).generation
	}
	fmt.Fprintf(os.Stderr, "crds: re-applying %d CRDs, %d at a time, %d watches open\n", len(crds), o.conc, len(open))
	peak := sampleRSS(o.rss, 250*time.Millisecond)
	t0 := time.Now()
	r.ReapplyErrors, r.ReapplyFailure = each(ctx, crds, o.conc, func(c corpusCRD) *failure {
		u := l.base + crdPath + "/" + c.Name
		var code int
		var out []byte
		var err error
		for attempt := 0; attempt < 5; attempt++ {
			code, out, err = l.do(context.Background(), http.MethodPut, u, c.reapplied(w.get(c.Name).rv, mark))
			if err != nil || code != http.StatusConflict {
				break
			}
			// The names controller wrote status meanwhile: the latest
			// resourceVersion comes with the watch.
			time.Sleep(50 * time.Millisecond)
		}
		if err != nil || code != http.StatusOK {
			return l.fail("reapply", http.MethodPut, u, code, out, err)
		}
		return nil
	})
	r.ReapplySec = time.Since(t0).Seconds()
	ok := w.wait(o.timeout, func(m map[string]crdState) bool {
		for _, c := range crds {
			if st := m[c.Name]; !st.established || st.generation <= gens[c.Name] {
				return false
			}
		}
		return true
	})
	r.ReappliedSec = time.Since(t0).Seconds()
	if !ok {
		return fmt.Errorf("re-applied CRDs not all Established at a new generation after %v", o.timeout)
	}
	// The new schema is what the server publishes: the last CRD's
	// document has the new description.
	last := crds[len(crds)-1]
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		code, b, _, err := l.get(l.base+"/openapi/v3/apis/"+last.Group+"/"+last.Version, "application/json")
		if err == nil && code == http.StatusOK && bytes.Contains(b, []byte(mark)) {
			r.ReapplyServedOK = true
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	r.ReapplyServedSec = time.Since(t0).Seconds()
	r.RSSPeakReapplyMiB = peak.end()
	// Every watch still delivers.
	for _, ow := range open {
		u := l.base + ow.c.collection()
		if code, out, err := l.do(context.Background(), http.MethodPost, u, ow.c.object("crdbench-watched")); err != nil || code != http.StatusCreated {
			return fmt.Errorf("creating in %s: HTTP %d %v %s", u, code, err, truncate(out, 300))
		}
	}
	deadline = time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		heard := 0
		for _, ow := range open {
			if ow.heard.Load() {
				heard++
			}
		}
		r.WatchesHeard = heard
		if heard == len(open) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, ow := range open {
		if ow.ended.Load() {
			r.WatchesEnded++
		}
	}
	time.Sleep(o.settle)
	r.RSSReappliedMiB = sumRSS(o.rss)
	return nil
}

// crdsReport writes the section "Thousands of CRDs" from crds-*.json:
// crdserver with the whole corpus in rounds (each figure the median, with
// the rounds beside it), then crdserver and kube-apiserver with the same
// subset.
func crdsReport(dir string, p func(string, ...any)) (fails []string) {
	files, _ := filepath.Glob(filepath.Join(dir, "crds-crdserver-[0-9]*.json"))
	slices.Sort(files)
	var rounds []*crdsResult
	for _, f := range files {
		var r crdsResult
		if err := readJSON(f, &r); err == nil {
			rounds = append(rounds, &r)
		}
	}
	var sub, kube *crdsResult
	for name, dst := range map[string]**crdsResult{"crds-crdserver-subset.json": &sub, "crds-kube-subset.json": &kube} {
		var r crdsResult
		if err := readJSON(filepath.Join(dir, name), &r); err == nil {
			*dst = &r
		}
	}
	if len(rounds) == 0 && sub == nil {
		return nil
	}
	p("## Thousands of CRDs\n\n")
	p("`crdbench crds` (bench/crds.sh): the CRDs of a real Crossplane provider (`%s`), created 4 at a time through the API "+
		"as JSON until a CRD watch has seen every one Established; memory (VmRSS of every process of the server) before, "+
		"at its peak while installing and %s after; aggregated discovery and the OpenAPI v3 document of every group/version of the corpus, in a random order, each "+
		"fetched for the first time; kubectl; one dry-run create of a minimal object of every CRD, one after another "+
		"(each CRD's first request); `/openapi/v2`; every CRD re-applied (PUT) with a changed description in every schema, "+
		"20 watches of custom resources open meanwhile (each then hears a create); every CRD deleted.\n\n",
		firstCorpus(rounds, sub), firstSettle(rounds, sub))
	if len(rounds) > 0 {
		p("crdserver with all %s CRDs, %d rounds (a fresh server each), the median and every round:\n\n", commas(rounds[0].CRDs), len(rounds))
		t := newTable("what", "median", "rounds", "target")
		row := func(what string, f func(*crdsResult) float64, prec int, unit, target string, ok func(float64) bool) {
			var vs []string
			var xs []float64
			for _, r := range rounds {
				x := f(r)
				xs = append(xs, x)
				vs = append(vs, fmt.Sprintf("%.*f", prec, x))
			}
			m := median(xs)
			mark := ""
			if ok != nil {
				mark = " ✓"
				if !ok(m) {
					mark = " ✗"
					fails = append(fails, fmt.Sprintf("thousands of CRDs: %s %.*f%s, target %s", what, prec, m, unit, target))
				}
			}
			t.row(what, fmt.Sprintf("%.*f%s", prec, m, unit), strings.Join(vs, ", "), target+mark)
		}
		le := func(limit float64) func(float64) bool { return func(x float64) bool { return x <= limit } }
		row("all Established, created 4 at a time (from the first create)", func(r *crdsResult) float64 { return r.EstablishedSec }, 1, " s", "≤ 20 s", le(20))
		row("memory empty", func(r *crdsResult) float64 { return r.RSSEmptyMiB }, 1, " MiB", "", nil)
		row("memory after all are installed, idle", func(r *crdsResult) float64 { return r.RSSInstalledMiB }, 1, " MiB", "≤ 400 MiB", le(400))
		row("memory per CRD never used (above the empty server)", func(r *crdsResult) float64 { return r.KiBPerCRD }, 0, " KiB", "≤ 150 KiB", le(150))
		row("memory at its peak while installing", func(r *crdsResult) float64 { return r.RSSPeakMiB }, 1, " MiB", "", nil)
		row("first request to each CRD (dry-run create), p50", func(r *crdsResult) float64 { return r.First.P50Ms }, 1, " ms", "", nil)
		row("first request to each CRD (dry-run create), p99", func(r *crdsResult) float64 { return r.First.P99Ms }, 1, " ms", "≤ 50 ms", le(50))
		row("memory after a request to every CRD (the budget at work)", func(r *crdsResult) float64 { return r.RSSUsedMiB }, 1, " MiB", "≤ 800 MiB", le(800))
		row("aggregated discovery (median of 5 after the first)", func(r *crdsResult) float64 { return r.DiscoveryMs }, 1, " ms", "≤ 20 ms", le(20))
		row("one group/version's OpenAPI v3 document, cold (the median of every group/version of the corpus, each fetched once)", func(r *crdsResult) float64 { return r.OpenAPIColdMs }, 1, " ms", "≤ 50 ms", le(50))
		row("… p90 of those", func(r *crdsResult) float64 { return r.OpenAPIColdP90Ms }, 1, " ms", "", nil)
		row("… the slowest (the group/versions with the most CRDs)", func(r *crdsResult) float64 { return r.OpenAPIColdMaxMs }, 1, " ms", "", nil)
		row("/openapi/v2, cold", func(r *crdsResult) float64 { return r.OpenAPIV2Ms / 1000 }, 1, " s", "", nil)
		row("memory after /openapi/v2", func(r *crdsResult) float64 { return r.RSSAfterV2MiB }, 1, " MiB", "", nil)
		row("re-applying all with a changed description: all Established again", func(r *crdsResult) float64 { return r.ReappliedSec }, 1, " s", "≤ 30 s", le(30))
		row("… custom resource watches ended meanwhile", func(r *crdsResult) float64 { return float64(r.WatchesEnded) }, 0, "", "0", func(x float64) bool { return x == 0 })
		row("deleting all (empty)", func(r *crdsResult) float64 { return r.DeleteSec }, 1, " s", "≤ 30 s", le(30))
		p("%s\n", t)
		for _, k := range rounds[len(rounds)-1].Kubectl {
			p("- `kubectl %s` (last round, all installed): %s in %.0f ms — `%s`\n", strings.Join(k.Args, " "), okText(k.OK), k.Ms, strings.ReplaceAll(truncate([]byte(k.Output), 160), "\n", " | "))
			if !k.OK {
				fails = append(fails, "thousands of CRDs: kubectl "+strings.Join(k.Args, " ")+" failed")
			}
		}
		for _, r := range rounds {
			if r.Error != "" || r.CreateErrors > 0 || r.First.Errors > 0 || r.ReapplyErrors > 0 || r.DeleteErrors > 0 {
				fails = append(fails, fmt.Sprintf("thousands of CRDs: a round had errors: %s (creates %d, first requests %d, re-applies %d, deletes %d)",
					r.Error, r.CreateErrors, r.First.Errors, r.ReapplyErrors, r.DeleteErrors))
			}
		}
		p("\n")
	}
	if sub != nil && kube != nil {
		p("The first %s of them on crdserver and on kube-apiserver v1.37.2 (its etcd and kube-controller-manager counted; one run each):\n\n", commas(sub.CRDs))
		t := newTable("what", "crdserver", "kube-apiserver", "ratio", "target")
		cmp := func(what string, c, k float64, prec int, unit, target string, limit float64) {
			r := c / k
			mark := ""
			if limit > 0 {
				mark = " ✓"
				if r > limit {
					mark = " ✗"
					fails = append(fails, fmt.Sprintf("thousands of CRDs against kube-apiserver: %s %.2f×, target %s", what, r, target))
				}
			}
			t.row(what, fmt.Sprintf("%.*f%s", prec, c, unit), fmt.Sprintf("%.*f%s", prec, k, unit), fmt.Sprintf("%.2f×", r), target+mark)
		}
		cmp("all Established", sub.EstablishedSec, kube.EstablishedSec, 1, " s", "≤ 0.25×", 0.25)
		cmp("memory per CRD (above the empty server)", sub.KiBPerCRD, kube.KiBPerCRD, 0, " KiB", "≤ 0.05×", 0.05)
		cmp("memory empty", sub.RSSEmptyMiB, kube.RSSEmptyMiB, 1, " MiB", "", 0)
		cmp("memory installed, idle", sub.RSSInstalledMiB, kube.RSSInstalledMiB, 1, " MiB", "", 0)
		cmp("first request to each CRD, p99", sub.First.P99Ms, kube.First.P99Ms, 1, " ms", "", 0)
		cmp("memory after a request to every CRD", sub.RSSUsedMiB, kube.RSSUsedMiB, 1, " MiB", "", 0)
		cmp("aggregated discovery", sub.DiscoveryMs, kube.DiscoveryMs, 1, " ms", "", 0)
		cmp("OpenAPI v3 group/version, cold (median of every group/version)", sub.OpenAPIColdMs, kube.OpenAPIColdMs, 1, " ms", "", 0)
		cmp("… the slowest", sub.OpenAPIColdMaxMs, kube.OpenAPIColdMaxMs, 1, " ms", "", 0)
		cmp("/openapi/v2", sub.OpenAPIV2Ms, kube.OpenAPIV2Ms, 0, " ms", "", 0)
		cmp("re-applying all: all Established again", sub.ReappliedSec, kube.ReappliedSec, 1, " s", "", 0)
		t.row("… custom resource watches ended meanwhile", fmt.Sprintf("%d of %d", sub.WatchesEnded, sub.Watches), fmt.Sprintf("%d of %d", kube.WatchesEnded, kube.Watches), nil, nil)
		cmp("deleting all", sub.DeleteSec, kube.DeleteSec, 1, " s", "", 0)
		p("%s\nLoad at the start and end: crdserver %s → %s; kube-apiserver %s → %s.\n\n", t, sub.Load, sub.LoadEnd, kube.Load, kube.LoadEnd)
	}
	return fails
}

func okText(ok bool) string {
	if ok {
		return "ok"
	}
	return "failed"
}

func firstCorpus(rounds []*crdsResult, sub *crdsResult) string {
	if len(rounds) > 0 {
		return filepath.Base(rounds[0].Corpus)
	}
	return filepath.Base(sub.Corpus)
}

func firstSettle(rounds []*crdsResult, sub *crdsResult) string {
	s := 0.0
	if len(rounds) > 0 {
		s = rounds[0].SettleSec
	} else {
		s = sub.SettleSec
	}
	return fmt.Sprintf("%.0f s", s)
}
