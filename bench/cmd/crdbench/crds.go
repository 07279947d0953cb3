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
	Version                   string         // the storage version, objects are created in
	Body                      map[string]any // the CRD as JSON, decoded
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
		var body map[string]any
		j, err := yaml.YAMLToJSON(nf.Data)
		if err == nil {
			err = json.Unmarshal(j, &body)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", nf.Name, err)
		}
		str := func(keys ...string) string { s, _ := jsonPath(body, keys...).(string); return s }
		c := corpusCRD{Name: str("metadata", "name"), Group: str("spec", "group"), Plural: str("spec", "names", "plural"),
			Kind: str("spec", "names", "kind"), Namespaced: str("spec", "scope") == "Namespaced", Body: body}
		versions, _ := jsonPath(body, "spec", "versions").([]any)
		for _, v := range versions {
			if jsonPath(v, "storage") == true {
				c.Version, _ = jsonPath(v, "name").(string)
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
	if root, _ := jsonPath(crdVersion(c.Body, c.Version), "schema", "openAPIV3Schema").(map[string]any); root != nil {
		obj, _ = minimalValue(root, 0).(map[string]any)
		if spec, ok := jsonPath(root, "properties", "spec").(map[string]any); ok {
			sv, _ := obj["spec"].(map[string]any)
			if sv == nil {
				sv, _ = minimalValue(spec, 1).(map[string]any)
			}
			if jsonPath(spec, "properties", "managementPolicies") != nil {
				sv["managementPolicies"] = []string{"Observe"}
			}
			if jsonPath(spec, "properties", "forProvider") != nil && sv["forProvider"] == nil {
				sv["forProvider"] = map[string]any{}
			}
			obj["spec"] = sv
		}
	}
	obj["apiVersion"], obj["kind"], obj["metadata"] = c.Group+"/"+c.Version, c.Kind, md
	b, _ := json.Marshal(obj)
	return b
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
		req, _ := s["required"].([]any)
		for _, r := range req {
			name, _ := r.(string)
			if depth == 0 && (name == "apiVersion" || name == "kind" || name == "metadata") {
				continue
			}
			if p, ok := jsonPath(s, "properties", name).(map[string]any); ok && depth < 20 {
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

// reapplied is the CRD at resourceVersion rv with a changed description at
// the root of every version's schema, as a provider upgrade changes every
// schema.
func (c corpusCRD) reapplied(rv, mark string) []byte {
	var body map[string]any
	b, _ := json.Marshal(c.Body)
	_ = json.Unmarshal(b, &body)
	body["metadata"].(map[string]any)["resourceVersion"] = rv
	versions, _ := jsonPath(body, "spec", "versions").([]any)
	for _, v := range versions {
		if root, _ := jsonPath(v, "schema", "openAPIV3Schema").(map[string]any); root != nil {
			d, _ := root["description"].(string)
			root["description"] = d + " (" + mark + ")"
		}
	}
	b, _ = json.Marshal(body)
	return b
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
}

// run lists the CRDs, then watches them until ctx ends.
func (w *crdWatch) run(ctx context.Context, ready chan<- error) {
	var list struct {
		Metadata struct{ ResourceVersion string }
		Items    []json.RawMessage
	}
	b, _, err := w.l.getOK("listing CRDs", w.l.base+crdPath, "application/json")
	if err == nil {
		err = json.Unmarshal(b, &list)
	}
	if ready <- err; err != nil {
		return
	}
	for _, it := range list.Items {
		w.apply("ADDED", it)
	}
	rv := list.Metadata.ResourceVersion
	for ctx.Err() == nil {
		resp, err := w.l.send(ctx, http.MethodGet, w.l.base+crdPath+"?watch=1&allowWatchBookmarks=true&resourceVersion="+rv, nil)
		if err != nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		for dec := json.NewDecoder(resp.Body); ; {
			var ev struct {
				Type   string
				Object json.RawMessage
			}
			if dec.Decode(&ev) != nil {
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
	if json.Unmarshal(raw, &o) != nil || typ == "BOOKMARK" || typ == "ERROR" {
		return o.Metadata.ResourceVersion
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if typ == "DELETED" {
		delete(w.crds, o.Metadata.Name)
	} else {
		w.crds[o.Metadata.Name] = crdState{rv: o.Metadata.ResourceVersion, generation: o.Metadata.Generation,
			established: slices.Contains(o.Status.Conditions, struct{ Type, Status string }{"Established", "True"})}
	}
	close(w.changed)
	w.changed = make(chan struct{})
	return o.Metadata.ResourceVersion
}

// wait waits until ok holds of every CRD of crds, or timeout.
func (w *crdWatch) wait(timeout time.Duration, crds []corpusCRD, ok func(c corpusCRD, st crdState, known bool) bool) bool {
	deadline := time.After(timeout)
	for {
		w.mu.Lock()
		done := !slices.ContainsFunc(crds, func(c corpusCRD) bool { st, known := w.crds[c.Name]; return !ok(c, st, known) })
		ch := w.changed
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

// sampleRSS reads the VmRSS of processes every interval until the
// function it returns is called, which returns the highest sum.
func sampleRSS(pids namedPIDs, every time.Duration) func() float64 {
	stop, done := make(chan struct{}), make(chan float64)
	go func() {
		peak := 0.0
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			peak = max(peak, sumRSS(pids))
			select {
			case <-stop:
				done <- peak
				return
			case <-t.C:
			}
		}
	}()
	return func() float64 { close(stop); return <-done }
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

type crdsOptions struct {
	conc, first, discoveries, openapiGVs, watches int
	settle, timeout                               time.Duration
	v2, reapply, deleteAll                        bool
	kubectl, kubeconfig                           string
	rss                                           namedPIDs
}

func runCRDs(args []string) error {
	fs := flag.NewFlagSet("crds", flag.ExitOnError)
	var t tlsFlags
	t.register(fs)
	var o crdsOptions
	server := fs.String("server", "", "API server base URL (loopback only)")
	corpus := fs.String("corpus", "/work/shared/corpora/provider-upjet-azure-crds.tar.zst", "the CRDs, a .tar.zst of YAML files")
	limit := fs.Int("limit", 0, "install only the first N CRDs by file name (0: all)")
	jsonOut := fs.String("json", "", "write the results as JSON to this file")
	fs.IntVar(&o.conc, "concurrency", 4, "CRDs created (re-applied, deleted) at a time")
	fs.DurationVar(&o.settle, "settle", 10*time.Second, "wait before reading memory after a phase")
	fs.DurationVar(&o.timeout, "timeout", 15*time.Minute, "longest wait for all CRDs to be Established (or deleted)")
	fs.IntVar(&o.first, "first", 0, "CRDs given a first request (0: all)")
	fs.IntVar(&o.discoveries, "discoveries", 5, "aggregated discovery GETs after the cold one")
	fs.IntVar(&o.openapiGVs, "openapi-gvs", 0, "group/versions whose OpenAPI v3 document is fetched cold, in a random order (0: every one of the corpus)")
	fs.BoolVar(&o.v2, "openapi-v2", true, "fetch /openapi/v2 once, after the first requests")
	fs.IntVar(&o.watches, "watches", 20, "custom resource watches kept open through the re-apply")
	fs.BoolVar(&o.reapply, "reapply", true, "re-apply every CRD with a changed description")
	fs.BoolVar(&o.deleteAll, "delete", true, "delete every CRD at the end (false: leave them installed)")
	fs.StringVar(&o.kubectl, "kubectl", "", "kubectl to run api-resources, explain and create with (empty: none)")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig for kubectl")
	fs.Var(&o.rss, "rss-pid", "name=PID of a server process whose VmRSS is read (repeatable)")
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
	r := &crdsResult{Server: l.base, Corpus: *corpus, CRDs: len(crds), Concurrency: o.conc, Load: loadavg(), SettleSec: o.settle.Seconds()}
	err = r.run(l, crds, o)
	r.LoadEnd = loadavg()
	return done(*jsonOut, r, &r.Error, nil, err)
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
	w := &crdWatch{l: l, crds: map[string]crdState{}, changed: make(chan struct{})}
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

	fmt.Fprintf(os.Stderr, "crds: creating %d CRDs, %d at a time\n", len(crds), o.conc)
	peak := sampleRSS(o.rss, 250*time.Millisecond)
	t0 := time.Now()
	r.CreateErrors, r.CreateFailure = each(ctx, crds, o.conc, func(c corpusCRD) *failure {
		b, _ := json.Marshal(c.Body)
		return l.expect("create", http.MethodPost, l.base+crdPath, b, http.StatusCreated)
	})
	r.CreatesSec = time.Since(t0).Seconds()
	ok := w.wait(o.timeout, crds, func(_ corpusCRD, st crdState, _ bool) bool { return st.established })
	r.EstablishedSec = time.Since(t0).Seconds()
	r.RSSPeakMiB = peak()
	for _, c := range crds {
		if w.get(c.Name).established {
			r.Established++
		}
	}
	if !ok {
		return fmt.Errorf("%d of %d CRDs Established after %v", r.Established, len(crds), o.timeout)
	}
	time.Sleep(o.settle)
	r.RSSInstalled, r.RSSInstalledMiB = readRSS(o.rss)
	r.KiBPerCRD = (r.RSSInstalledMiB - r.RSSEmptyMiB) * 1024 / float64(len(crds))

	if err := r.discovery(l, o.discoveries); err != nil {
		return err
	}
	if err := r.openapiV3(l, crds, o.openapiGVs); err != nil {
		return err
	}
	if o.kubectl != "" {
		r.runKubectl(o, crds)
	}

	use := crds
	if o.first > 0 && o.first < len(use) {
		use = use[:o.first]
	}
	fmt.Fprintf(os.Stderr, "crds: a first request to %d CRDs\n", len(use))
	peak = sampleRSS(o.rss, 250*time.Millisecond)
	r.First = l.phase(ctx, "first-request", len(use), 1, 0, func(i int) request {
		return request{http.MethodPost, l.base + use[i].collection() + "?dryRun=All", use[i].object("crdbench-first"), []int{http.StatusCreated}}
	}, nil)
	r.RSSPeakUseMiB = peak()
	time.Sleep(o.settle)
	r.RSSUsed, r.RSSUsedMiB = readRSS(o.rss)
	if o.v2 {
		b, d, err := l.getOK("/openapi/v2", l.base+"/openapi/v2", "application/json")
		r.OpenAPIV2Ms, r.OpenAPIV2Bytes = ms(d), len(b)
		if err != nil {
			r.OpenAPIV2Failure = strings.TrimPrefix(err.Error(), "/openapi/v2: ")
		}
		r.RSSAfterV2MiB = sumRSS(o.rss)
	}

	if o.reapply {
		if err := r.reapplyAll(ctx, l, w, crds, o); err != nil {
			return err
		}
	}
	if !o.deleteAll {
		return nil
	}
	fmt.Fprintf(os.Stderr, "crds: deleting %d CRDs\n", len(crds))
	t0 = time.Now()
	r.DeleteErrors, r.DeleteFailure = each(ctx, crds, o.conc, func(c corpusCRD) *failure {
		return l.expect("delete", http.MethodDelete, l.base+crdPath+"/"+c.Name, nil, http.StatusOK, http.StatusAccepted)
	})
	r.DeletedAll = w.wait(o.timeout, crds, func(_ corpusCRD, _ crdState, known bool) bool { return !known })
	r.DeleteSec = time.Since(t0).Seconds()
	time.Sleep(o.settle)
	r.RSSEndMiB = sumRSS(o.rss)
	return nil
}

// aggregatedAccept asks for aggregated discovery, as kubectl does.
const aggregatedAccept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"

// discovery times a first aggregated discovery, then the median of n more.
func (r *crdsResult) discovery(l *client, n int) error {
	var times []float64
	for i := 0; i <= n; i++ {
		b, d, err := l.getOK("aggregated discovery", l.base+"/apis", aggregatedAccept)
		if err != nil {
			return err
		}
		if i > 0 {
			times = append(times, ms(d))
			continue
		}
		var list struct{ Items []json.RawMessage }
		_ = json.Unmarshal(b, &list)
		r.DiscoveryColdMs, r.DiscoveryBytes, r.DiscoveryGroups = ms(d), len(b), len(list.Items)
	}
	r.DiscoveryMs = median(times)
	return nil
}

// openapiV3 fetches the root, then n group/versions of the corpus (0: all
// of them), each for the first time, in a random order.
func (r *crdsResult) openapiV3(l *client, crds []corpusCRD, n int) error {
	b, d, err := l.getOK("/openapi/v3", l.base+"/openapi/v3", "application/json")
	if err != nil {
		return err
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
	var gvs []string
	for _, c := range crds {
		if p := "apis/" + c.Group + "/" + c.Version; !slices.Contains(gvs, p) {
			gvs = append(gvs, p)
		}
	}
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(gvs), func(i, j int) { gvs[i], gvs[j] = gvs[j], gvs[i] })
	if n > 0 && n < len(gvs) {
		gvs = gvs[:n]
	}
	var times, sizes []float64
	for _, p := range gvs {
		entry, ok := root.Paths[p]
		if !ok {
			return fmt.Errorf("/openapi/v3 lists no %s", p)
		}
		b, d, err := l.getOK(entry.ServerRelativeURL, l.base+entry.ServerRelativeURL, "application/json")
		if err != nil {
			return err
		}
		times, sizes = append(times, ms(d)), append(sizes, float64(len(b)))
	}
	sorted := slices.Sorted(slices.Values(times))
	r.OpenAPIColdCount, r.OpenAPIColdMs, r.OpenAPIColdBytes = len(times), median(times), int(median(sizes))
	r.OpenAPIColdP90Ms, r.OpenAPIColdMaxMs = sorted[min(len(sorted)-1, int(0.9*float64(len(sorted))))], slices.Max(times)
	return nil
}

// runKubectl runs api-resources, explain, create, get and delete of a
// corpus kind.
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
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		t := time.Now()
		out, err := exec.CommandContext(ctx, o.kubectl, append([]string{"--kubeconfig", o.kubeconfig, "--cache-dir", cache}, args...)...).CombinedOutput()
		cancel()
		r.Kubectl = append(r.Kubectl, kubectlRun{Args: args, Ms: ms(time.Since(t)), OK: err == nil, Output: truncate(bytes.TrimSpace(out), 400)})
	}
}

// reapplyAll keeps watches open on some CRDs' objects, updates every CRD
// with a changed description, and checks that the watches live on.
func (r *crdsResult) reapplyAll(ctx context.Context, l *client, w *crdWatch, crds []corpusCRD, o crdsOptions) error {
	type openWatch struct {
		c            corpusCRD
		ended, heard atomic.Bool
	}
	var open []*openWatch
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	for i := 0; i < len(crds) && len(open) < o.watches; i += max(1, len(crds)/max(1, o.watches)) {
		ow := &openWatch{c: crds[i]}
		u := l.base + ow.c.collection()
		b, _, err := l.getOK("listing "+ow.c.collection(), u, "application/json")
		if err != nil {
			return err
		}
		var list struct {
			Metadata struct{ ResourceVersion string }
		}
		_ = json.Unmarshal(b, &list)
		resp, err := l.send(wctx, http.MethodGet, u+"?watch=1&resourceVersion="+list.Metadata.ResourceVersion, nil)
		if err == nil && resp.StatusCode != http.StatusOK {
			_ = resp.Body.Close()
			err = fmt.Errorf("HTTP %d", resp.StatusCode)
		}
		if err != nil {
			return fmt.Errorf("watching %s: %v", ow.c.collection(), err)
		}
		go func(body io.ReadCloser) {
			defer body.Close()
			for dec := json.NewDecoder(body); ; {
				var ev struct{ Type string }
				if err := dec.Decode(&ev); err != nil {
					ow.ended.Store(wctx.Err() == nil)
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
		var f *failure
		// A 409: the names controller wrote status meanwhile, the latest
		// resourceVersion comes with the watch.
		for attempt := 0; attempt < 5; attempt++ {
			if f = l.expect("reapply", http.MethodPut, l.base+crdPath+"/"+c.Name, c.reapplied(w.get(c.Name).rv, mark), http.StatusOK); f == nil || f.Status != http.StatusConflict {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		return f
	})
	r.ReapplySec = time.Since(t0).Seconds()
	ok := w.wait(o.timeout, crds, func(c corpusCRD, st crdState, _ bool) bool { return st.established && st.generation > gens[c.Name] })
	r.ReappliedSec = time.Since(t0).Seconds()
	if !ok {
		return fmt.Errorf("re-applied CRDs not all Established at a new generation after %v", o.timeout)
	}
	// The new schema is what the server publishes: the last CRD's
	// document has the new description.
	last := crds[len(crds)-1]
	r.ReapplyServedOK = pollUntil(2*time.Minute, 200*time.Millisecond, func() bool {
		b, _, err := l.getOK("", l.base+"/openapi/v3/apis/"+last.Group+"/"+last.Version, "application/json")
		return err == nil && bytes.Contains(b, []byte(mark))
	})
	r.ReapplyServedSec = time.Since(t0).Seconds()
	r.RSSPeakReapplyMiB = peak()
	// Every watch still delivers.
	for _, ow := range open {
		if f := l.expect("", http.MethodPost, l.base+ow.c.collection(), ow.c.object("crdbench-watched"), http.StatusCreated); f != nil {
			return fmt.Errorf("creating in %s: HTTP %d %s %s", f.Path, f.Status, f.Error, f.Body)
		}
	}
	pollUntil(30*time.Second, 50*time.Millisecond, func() bool {
		r.WatchesHeard = 0
		for _, ow := range open {
			if ow.heard.Load() {
				r.WatchesHeard++
			}
		}
		return r.WatchesHeard == len(open)
	})
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
		if r := readSide[crdsResult]("", f).res; r != nil {
			rounds = append(rounds, r)
		}
	}
	sub, kube := readSide[crdsResult](dir, "crds-crdserver-subset.json").res, readSide[crdsResult](dir, "crds-kube-subset.json").res
	if len(rounds) == 0 && sub == nil {
		return nil
	}
	first := append(slices.Clip(rounds), sub)[0]
	p("## Thousands of CRDs\n\n")
	p("`crdbench crds` (bench/crds.sh): the CRDs of a real Crossplane provider (`%s`), created 4 at a time through the API "+
		"as JSON until a CRD watch has seen every one Established; memory (VmRSS of every process of the server) before, "+
		"at its peak while installing and %s after; aggregated discovery and the OpenAPI v3 document of every group/version of the corpus, in a random order, each "+
		"fetched for the first time; kubectl; one dry-run create of a minimal object of every CRD, one after another "+
		"(each CRD's first request); `/openapi/v2`; every CRD re-applied (PUT) with a changed description in every schema, "+
		"20 watches of custom resources open meanwhile (each then hears a create); every CRD deleted.\n\n",
		filepath.Base(first.Corpus), fmt.Sprintf("%.0f s", first.SettleSec))
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
			p("- `kubectl %s` (last round, all installed): %s in %.0f ms — `%s`\n", strings.Join(k.Args, " "), map[bool]string{true: "ok", false: "failed"}[k.OK], k.Ms, strings.ReplaceAll(truncate([]byte(k.Output), 160), "\n", " | "))
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
