package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// failure is the first failed request of a phase, as the server answered it.
type failure struct {
	Phase  string `json:"phase"`
	Method string `json:"method"`
	Path   string `json:"path"`
	Status int    `json:"status,omitempty"`
	Body   string `json:"body,omitempty"`
	Error  string `json:"error,omitempty"`
}

// phase summarizes one load phase.
type phase struct {
	Name        string   `json:"name"`
	Concurrency int      `json:"concurrency"`
	Requests    int      `json:"requests"`
	Errors      int      `json:"errors"`
	Aborted     bool     `json:"aborted,omitempty"`
	WallSec     float64  `json:"wall_seconds"`
	PerSecond   float64  `json:"requests_per_second"`
	MeanMs      float64  `json:"mean_ms"`
	P50Ms       float64  `json:"p50_ms"`
	P90Ms       float64  `json:"p90_ms"`
	P99Ms       float64  `json:"p99_ms"`
	MaxMs       float64  `json:"max_ms"`
	FirstMs     float64  `json:"first_ms"`
	FirstError  *failure `json:"first_error,omitempty"`
}

// listSample is one GET of the whole collection.
type listSample struct {
	Ms     float64 `json:"ms"`
	Items  int     `json:"items"`
	Bytes  int     `json:"bytes"`
	Status int     `json:"status"`
}

type loadResult struct {
	Server         string       `json:"server"`
	Collection     string       `json:"collection"`
	Protocol       string       `json:"protocol"`
	ClientCert     bool         `json:"client_cert"`
	CRD            string       `json:"crd"`
	EstablishedSec float64      `json:"established_wait_seconds"`
	SettleSec      float64      `json:"settle_seconds"`
	BodyBytes      int          `json:"create_body_bytes"`
	Phases         []phase      `json:"phases"`
	Lists          []listSample `json:"lists"`
	ListItems      int          `json:"list_items"`
	ListBytes      int          `json:"list_bytes"`
	ListMedianMs   float64      `json:"list_median_ms"`
	ListMinMs      float64      `json:"list_min_ms"`
	ListMaxMs      float64      `json:"list_max_ms"`
	Sample         string       `json:"first_created_object,omitempty"`
	ManagedFields  bool         `json:"objects_have_managed_fields"`
	RSSAfter       []procMem    `json:"rss_after_lists,omitempty"`
	RSSAfterMiB    float64      `json:"rss_after_lists_total_mib,omitempty"`
	Failures       []failure    `json:"failures,omitempty"`
	Error          string       `json:"error,omitempty"`
}

func (r *loadResult) phase(name string) *phase {
	for i := range r.Phases {
		if r.Phases[i].Name == name {
			return &r.Phases[i]
		}
	}
	return nil
}

type loader struct {
	client     *http.Client
	base, coll string
	apiVersion string
	kind       string
	proto      atomic.Value
	sample     []byte // the answer to the first create
	bodyBytes  int    // when set, bodies are padded to this size (see body)
}

// do sends one request and reads the whole answer.
func (l *loader) do(method, url string, body []byte) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := l.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	l.proto.Store(resp.Proto)
	return resp.StatusCode, b, err
}

// body is a Widget like the reference's crbench sends (about 170 bytes),
// padded to l.bodyBytes when that is larger with an annotation of
// pseudo-random hex digits (annotations are kept whatever the CRD's
// schema).
func (l *loader) body(name string, i int) []byte {
	md := map[string]any{"name": name, "labels": map[string]string{"bench": "crdbench"}}
	obj := map[string]any{
		"apiVersion": l.apiVersion, "kind": l.kind,
		"metadata": md,
		"spec":     map[string]any{"size": i % 100, "color": []string{"red", "green", "blue"}[i%3], "tags": []string{"x", "y"}},
	}
	b, _ := json.Marshal(obj)
	const padKey = "crdbench.example.com/pad"
	if pad := l.bodyBytes - len(b) - len(`,"annotations":{"`+padKey+`":""}`); pad > 0 {
		md["annotations"] = map[string]string{padKey: hexPad(i, pad)}
		b, _ = json.Marshal(obj)
	}
	return b
}

// medianRound is the phase with the median req/s of rounds (of an even
// number, the slower of the middle two), an aborted or failed one if any
// round was: a figure is only reported when every round succeeded.
func medianRound(rounds []phase) phase {
	for _, p := range rounds {
		if p.Aborted || p.Errors > 0 {
			return p
		}
	}
	sorted := slices.Clone(rounds)
	slices.SortFunc(sorted, func(a, b phase) int { return cmp.Compare(a.PerSecond, b.PerSecond) })
	return sorted[(len(sorted)-1)/2]
}

// run sends n requests (req(i) gives method, url, body and the wanted
// status codes) over conc workers and summarizes them. A phase whose first
// 10 requests all fail is aborted: the server cannot do it at all.
func (l *loader) run(name string, n, conc int, req func(i int) (string, string, []byte, []int)) phase {
	lat := make([]time.Duration, n)
	done := make([]bool, n)
	var (
		mu      sync.Mutex
		errs    int
		okCount int
		first   *failure
		aborted atomic.Bool
		next    atomic.Int64
		wg      sync.WaitGroup
	)
	start := time.Now()
	for w := 0; w < conc; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !aborted.Load() {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				method, url, body, want := req(i)
				t0 := time.Now()
				code, b, err := l.do(method, url, body)
				d := time.Since(t0)
				mu.Lock()
				lat[i], done[i] = d, true
				if name == "create" && i == 0 {
					l.sample = b
				}
				if err != nil || !slices.Contains(want, code) {
					errs++
					if first == nil {
						first = &failure{Phase: name, Method: method, Path: strings.TrimPrefix(url, l.base), Status: code, Body: truncate(b, 2000)}
						if err != nil {
							first.Error = err.Error()
						}
					}
					if okCount == 0 && errs >= 10 {
						aborted.Store(true)
					}
				} else {
					okCount++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	var got []time.Duration
	for i := range lat {
		if done[i] {
			got = append(got, lat[i])
		}
	}
	p := summarize(name, got, wall)
	p.Concurrency, p.Errors, p.Aborted, p.FirstError = conc, errs, aborted.Load(), first
	return p
}

// percentile is the nearest-rank percentile of sorted durations.
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	k := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(k, len(sorted)-1))]
}

func ms(d time.Duration) float64 { return math.Round(float64(d.Microseconds())) / 1000 }

func summarize(name string, lat []time.Duration, wall time.Duration) phase {
	p := phase{Name: name, Requests: len(lat), WallSec: wall.Seconds()}
	if len(lat) == 0 {
		return p
	}
	p.FirstMs = ms(lat[0])
	s := slices.Clone(lat)
	slices.Sort(s)
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	p.PerSecond = float64(len(s)) / wall.Seconds()
	p.MeanMs = ms(sum / time.Duration(len(s)))
	p.P50Ms, p.P90Ms, p.P99Ms, p.MaxMs = ms(percentile(s, 0.50)), ms(percentile(s, 0.90)), ms(percentile(s, 0.99)), ms(s[len(s)-1])
	return p
}

// waitEstablished polls the CRD until its Established condition is True.
func (l *loader) waitEstablished(name string, timeout time.Duration) error {
	u := l.base + "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/" + name
	deadline := time.Now().Add(timeout)
	var last string
	for {
		code, b, err := l.do(http.MethodGet, u, nil)
		switch {
		case err != nil:
			last = err.Error()
		case code != http.StatusOK:
			last = fmt.Sprintf("GET %s: HTTP %d: %s", strings.TrimPrefix(u, l.base), code, truncate(b, 1000))
		default:
			var crd struct {
				Status json.RawMessage `json:"status"`
			}
			_ = json.Unmarshal(b, &crd)
			var st struct {
				Conditions []struct{ Type, Status string } `json:"conditions"`
			}
			_ = json.Unmarshal(crd.Status, &st)
			for _, c := range st.Conditions {
				if c.Type == "Established" && c.Status == "True" {
					return nil
				}
			}
			last = "status " + truncate(crd.Status, 1000)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("CRD %s not Established after %v; last answer: %s", name, timeout, last)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// list GETs the whole collection once (no limit), retrying 429s.
func (l *loader) list() (listSample, *failure) {
	for attempt := 0; ; attempt++ {
		t0 := time.Now()
		code, b, err := l.do(http.MethodGet, l.coll, nil)
		d := time.Since(t0)
		if err == nil && code == http.StatusTooManyRequests && attempt < 10 {
			time.Sleep(time.Second)
			continue
		}
		s := listSample{Ms: ms(d), Bytes: len(b), Status: code}
		if err != nil || code != http.StatusOK {
			f := &failure{Phase: "list", Method: http.MethodGet, Path: strings.TrimPrefix(l.coll, l.base), Status: code, Body: truncate(b, 2000)}
			if err != nil {
				f.Error = err.Error()
			}
			return s, f
		}
		var items struct{ Items []json.RawMessage }
		if err := json.Unmarshal(b, &items); err != nil {
			return s, &failure{Phase: "list", Method: http.MethodGet, Path: strings.TrimPrefix(l.coll, l.base), Status: code, Error: "decode: " + err.Error()}
		}
		s.Items = len(items.Items)
		return s, nil
	}
}

func runLoad(args []string) error {
	fs := flag.NewFlagSet("load", flag.ExitOnError)
	var t tlsFlags
	t.register(fs)
	var (
		server     = fs.String("server", "", "API server base URL, http:// or https:// (loopback only)")
		apiVersion = fs.String("api-version", "peer.example.com/v1", "group/version of the custom resource")
		kind       = fs.String("kind", "Widget", "kind of the custom resource")
		resource   = fs.String("resource", "widgets", "plural resource name")
		namespace  = fs.String("namespace", "default", "namespace of the objects")
		crd        = fs.String("crd", "widgets.peer.example.com", "CRD to wait for (Established) first; empty: do not wait")
		bodyBytes  = fs.Int("body-bytes", 0, "pad each create body to this many bytes with an annotation (0: the Widget alone, about 170 bytes)")
		waitFor    = fs.Duration("wait", 30*time.Second, "how long to wait for the CRD to be Established")
		settle     = fs.Duration("settle", 0, "pause after Established before measuring (the reference needs 2s)")
		n          = fs.Int("n", 1000, "sequential creates, then sequential deletes of the same objects")
		rounds     = fs.Int("rounds", 1, "rounds of the n sequential creates and deletes; the phases create and delete are the round with the median req/s of each, create-K and delete-K every round")
		listN      = fs.Int("list-n", 10000, "objects created (concurrently) before the measured lists; 0 skips the lists")
		lists      = fs.Int("lists", 5, "measured GETs of the whole collection; the median is reported")
		conc       = fs.Int("concurrency", 8, "workers for creating (and cleaning up) the list-n objects")
		prefix     = fs.String("prefix", "crdbench-", "object name prefix")
		cleanup    = fs.Bool("cleanup", false, "delete the list-n objects afterwards (concurrently)")
		jsonOut    = fs.String("json", "", "write the results as JSON to this file")
		rssPIDs    namedPIDs
	)
	fs.Var(&rssPIDs, "rss-pid", "name=PID of a server process whose VmRSS is read right after the lists (repeatable)")
	_ = fs.Parse(args)
	u, err := checkLoopback(*server)
	if err != nil {
		return err
	}
	if *n < 1 || *n > 100000 || *listN < 0 || *listN > 100000 || *lists < 1 || *conc < 1 || *conc > 64 || *rounds < 1 || *rounds > 10 {
		return errors.New("need 1 <= -n <= 100000, 0 <= -list-n <= 100000, -lists >= 1, 1 <= -concurrency <= 64, 1 <= -rounds <= 10")
	}
	client, err := newClient(u, t, *conc)
	if err != nil {
		return err
	}
	base := strings.TrimRight(*server, "/")
	gv := "/apis/" + *apiVersion
	if !strings.Contains(*apiVersion, "/") {
		gv = "/api/" + *apiVersion
	}
	coll := base + gv
	if *namespace != "" {
		coll += "/namespaces/" + *namespace
	}
	coll += "/" + *resource
	l := &loader{client: client, base: base, coll: coll, apiVersion: *apiVersion, kind: *kind, bodyBytes: *bodyBytes}
	res := &loadResult{Server: base, Collection: strings.TrimPrefix(coll, base), ClientCert: t.cert != "", CRD: *crd, SettleSec: settle.Seconds()}
	res.BodyBytes = len(l.body(*prefix+"c-00000", 0))
	finish := func(err error) error {
		if p, ok := l.proto.Load().(string); ok {
			res.Protocol = p
		}
		if err != nil {
			res.Error = err.Error()
		}
		if l.sample != nil {
			res.Sample = truncate(l.sample, 4000)
			var obj struct {
				Metadata struct {
					ManagedFields []json.RawMessage `json:"managedFields"`
				} `json:"metadata"`
			}
			_ = json.Unmarshal(l.sample, &obj)
			res.ManagedFields = len(obj.Metadata.ManagedFields) > 0
		}
		for _, p := range res.Phases {
			if p.FirstError != nil {
				res.Failures = append(res.Failures, *p.FirstError)
			}
		}
		printLoad(res)
		if *jsonOut != "" {
			if werr := writeJSON(*jsonOut, res); werr != nil {
				return werr
			}
		}
		if err == nil && len(res.Failures) > 0 {
			err = fmt.Errorf("%d phase(s) had failed requests", len(res.Failures))
		}
		return err
	}

	if *crd != "" {
		t0 := time.Now()
		if err := l.waitEstablished(*crd, *waitFor); err != nil {
			// Show what a create gets from the server in this state.
			code, b, derr := l.do(http.MethodPost, coll, l.body(*prefix+"probe", 0))
			f := failure{Phase: "wait-established", Method: http.MethodPost, Path: res.Collection, Status: code, Body: truncate(b, 2000)}
			if derr != nil {
				f.Error = derr.Error()
			}
			res.Failures = append(res.Failures, f)
			return finish(err)
		}
		res.EstablishedSec = time.Since(t0).Seconds()
		log.Printf("CRD %s Established after %.3fs; settling %v", *crd, res.EstablishedSec, *settle)
		time.Sleep(*settle)
	}

	name := func(kind string, i int) string { return *prefix + kind + "-" + strconv.Itoa(100000 + i)[1:] }
	created := []int{http.StatusCreated}
	deleted := []int{http.StatusOK, http.StatusAccepted}

	var creates, deletes []phase
	for r := 1; r <= *rounds; r++ {
		kind := "c"
		if *rounds > 1 {
			kind = "c" + strconv.Itoa(r)
		}
		log.Printf("round %d of %d: %d sequential creates", r, *rounds, *n)
		c := l.run("create", *n, 1, func(i int) (string, string, []byte, []int) {
			return http.MethodPost, coll, l.body(name(kind, i), i), created
		})
		log.Printf("round %d of %d: %d sequential deletes", r, *rounds, *n)
		d := l.run("delete", *n, 1, func(i int) (string, string, []byte, []int) {
			return http.MethodDelete, coll + "/" + name(kind, i), nil, deleted
		})
		creates, deletes = append(creates, c), append(deletes, d)
		if c.Aborted || d.Aborted {
			break
		}
	}
	res.Phases = append(res.Phases, medianRound(creates), medianRound(deletes))
	if len(creates) > 1 {
		for i := range creates {
			creates[i].Name = fmt.Sprintf("create-%d", i+1)
			deletes[i].Name = fmt.Sprintf("delete-%d", i+1)
			res.Phases = append(res.Phases, creates[i], deletes[i])
		}
	}
	if *listN == 0 {
		return finish(nil)
	}

	bodies := make([][]byte, *listN)
	for i := range bodies {
		bodies[i] = l.body(name("l", i), i)
	}
	log.Printf("%d creates with %d workers", *listN, *conc)
	pop := l.run("populate", *listN, *conc, func(i int) (string, string, []byte, []int) {
		return http.MethodPost, coll, bodies[i], []int{http.StatusCreated, http.StatusConflict}
	})
	res.Phases = append(res.Phases, pop)
	if pop.Aborted {
		return finish(nil)
	}

	log.Printf("%d lists of the whole collection", *lists)
	var ds []float64
	for i := 0; i < *lists; i++ {
		s, f := l.list()
		res.Lists = append(res.Lists, s)
		if f != nil {
			res.Failures = append(res.Failures, *f)
			break
		}
		ds = append(ds, s.Ms)
		res.ListItems, res.ListBytes = s.Items, s.Bytes
	}
	if len(ds) > 0 {
		slices.Sort(ds)
		res.ListMinMs, res.ListMaxMs = ds[0], ds[len(ds)-1]
		res.ListMedianMs = ds[len(ds)/2]
		if len(ds)%2 == 0 {
			res.ListMedianMs = (ds[len(ds)/2-1] + ds[len(ds)/2]) / 2
		}
		if res.ListItems < *listN {
			res.Failures = append(res.Failures, failure{Phase: "list", Method: http.MethodGet, Path: res.Collection, Status: 200,
				Error: fmt.Sprintf("list returned %d items, want at least %d", res.ListItems, *listN)})
		}
	}

	for _, p := range rssPIDs {
		m := readMem(p.name, p.pid)
		res.RSSAfter = append(res.RSSAfter, m)
		res.RSSAfterMiB += m.VMRSSMiB
	}

	if *cleanup {
		log.Printf("cleanup: deleting %d objects with %d workers", *listN, *conc)
		res.Phases = append(res.Phases, l.run("cleanup", *listN, *conc, func(i int) (string, string, []byte, []int) {
			return http.MethodDelete, coll + "/" + name("l", i), nil, append(deleted, http.StatusNotFound)
		}))
	}
	return finish(nil)
}

func printLoad(r *loadResult) {
	fmt.Printf("server %s  collection %s  protocol %s  client-cert %v  body %d bytes\n", r.Server, r.Collection, r.Protocol, r.ClientCert, r.BodyBytes)
	fmt.Printf("%-9s %4s %6s %6s %9s %9s %8s %8s %8s %8s %8s\n", "phase", "conc", "reqs", "errors", "wall_s", "req/s", "mean_ms", "p50_ms", "p90_ms", "p99_ms", "max_ms")
	for _, p := range r.Phases {
		fmt.Printf("%-9s %4d %6d %6d %9.3f %9.1f %8.2f %8.2f %8.2f %8.2f %8.2f\n", p.Name, p.Concurrency, p.Requests, p.Errors, p.WallSec, p.PerSecond, p.MeanMs, p.P50Ms, p.P90Ms, p.P99Ms, p.MaxMs)
	}
	for i, s := range r.Lists {
		fmt.Printf("list %d: %.2f ms, %d items, %d bytes, HTTP %d\n", i+1, s.Ms, s.Items, s.Bytes, s.Status)
	}
	for _, m := range r.RSSAfter {
		fmt.Printf("after the lists: %s pid %d VmRSS %.1f MiB\n", m.Name, m.PID, m.VMRSSMiB)
	}
	if len(r.Lists) > 0 {
		fmt.Printf("list median %.2f ms (min %.2f, max %.2f)\n", r.ListMedianMs, r.ListMinMs, r.ListMaxMs)
	}
	for _, f := range r.Failures {
		fmt.Printf("FAILED %s: %s %s -> HTTP %d %s %s\n", f.Phase, f.Method, f.Path, f.Status, f.Error, strings.Join(strings.Fields(f.Body), " "))
	}
	if r.Error != "" {
		fmt.Printf("ERROR: %s\n", r.Error)
	}
}
