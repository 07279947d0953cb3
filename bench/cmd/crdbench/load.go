package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

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
	return find(r.Phases, func(x *phase) bool { return x.Name == name })
}

// loader is the load workload's client: one collection of one custom
// resource.
type loader struct {
	*client
	coll       string
	apiVersion string
	kind       string
	bodyBytes  int // when set, bodies are padded to this size (see body)
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

// list GETs the whole collection once (no limit), retrying 429s.
func (l *loader) list() (listSample, *failure) {
	for attempt := 0; ; attempt++ {
		t0 := time.Now()
		code, b, err := l.do(context.Background(), http.MethodGet, l.coll, nil)
		s := listSample{Ms: ms(time.Since(t0)), Bytes: len(b), Status: code}
		if err == nil && code == http.StatusTooManyRequests && attempt < 10 {
			time.Sleep(time.Second)
			continue
		}
		var items struct{ Items []json.RawMessage }
		if err == nil && code == http.StatusOK {
			if err = json.Unmarshal(b, &items); err != nil {
				return s, l.fail("list", http.MethodGet, l.coll, code, nil, fmt.Errorf("decode: %w", err))
			}
		}
		if err != nil || code != http.StatusOK {
			return s, l.fail("list", http.MethodGet, l.coll, code, b, err)
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
	if *n < 1 || *n > 100000 || *listN < 0 || *listN > 100000 || *lists < 1 || *conc < 1 || *conc > 64 || *rounds < 1 || *rounds > 10 {
		return errors.New("need 1 <= -n <= 100000, 0 <= -list-n <= 100000, -lists >= 1, 1 <= -concurrency <= 64, 1 <= -rounds <= 10")
	}
	c, err := connect(*server, t, *conc)
	if err != nil {
		return err
	}
	base, ctx := c.base, context.Background()
	coll := base + map[bool]string{true: "/apis/", false: "/api/"}[strings.Contains(*apiVersion, "/")] + *apiVersion
	if *namespace != "" {
		coll += "/namespaces/" + *namespace
	}
	coll += "/" + *resource
	l := &loader{client: c, coll: coll, apiVersion: *apiVersion, kind: *kind, bodyBytes: *bodyBytes}
	res := &loadResult{Server: base, Collection: strings.TrimPrefix(coll, base), ClientCert: t.cert != "", CRD: *crd, SettleSec: settle.Seconds()}
	res.BodyBytes = len(l.body(*prefix+"c-00000", 0))
	var sample []byte // the answer to the first create
	finish := func(err error) error {
		res.Protocol = c.protocol()
		if sample != nil {
			res.Sample = truncate(sample, 4000)
			var obj struct {
				Metadata struct {
					ManagedFields []json.RawMessage `json:"managedFields"`
				} `json:"metadata"`
			}
			_ = json.Unmarshal(sample, &obj)
			res.ManagedFields = len(obj.Metadata.ManagedFields) > 0
		}
		res.Failures = append(res.Failures, firstError(res.Phases...)...)
		return done(*jsonOut, res, &res.Error, res.Failures, err)
	}

	if *crd != "" {
		t0 := time.Now()
		if err := c.waitEstablished(ctx, *crd, *waitFor); err != nil {
			// Show what a create gets from the server in this state.
			code, b, derr := c.do(ctx, http.MethodPost, coll, l.body(*prefix+"probe", 0))
			res.Failures = append(res.Failures, *c.fail("wait-established", http.MethodPost, coll, code, b, derr))
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
		kind := map[bool]string{true: "c" + strconv.Itoa(r), false: "c"}[*rounds > 1]
		log.Printf("round %d of %d: %d sequential creates and deletes", r, *rounds, *n)
		cr := c.phase(ctx, "create", *n, 1, 0, func(i int) request {
			return request{http.MethodPost, coll, l.body(name(kind, i), i), created}
		}, func(i int, _ bool, b []byte) {
			if i == 0 {
				sample = b
			}
		})
		d := c.phase(ctx, "delete", *n, 1, 0, func(i int) request {
			return request{http.MethodDelete, coll + "/" + name(kind, i), nil, deleted}
		}, nil)
		creates, deletes = append(creates, cr), append(deletes, d)
		if cr.Aborted || d.Aborted {
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
	pop := c.phase(ctx, "populate", *listN, *conc, 0, func(i int) request {
		return request{http.MethodPost, coll, bodies[i], []int{http.StatusCreated, http.StatusConflict}}
	}, nil)
	res.Phases = append(res.Phases, pop)
	if pop.Aborted {
		return finish(nil)
	}

	var ds []float64
	for i := 0; i < *lists; i++ {
		s, f := l.list()
		if res.Lists = append(res.Lists, s); f != nil {
			res.Failures = append(res.Failures, *f)
			break
		}
		ds, res.ListItems, res.ListBytes = append(ds, s.Ms), s.Items, s.Bytes
	}
	if len(ds) > 0 {
		res.ListMedianMs, res.ListMinMs, res.ListMaxMs = median(ds), slices.Min(ds), slices.Max(ds)
		if res.ListItems < *listN {
			res.Failures = append(res.Failures, failure{Phase: "list", Method: http.MethodGet, Path: res.Collection, Status: 200,
				Error: fmt.Sprintf("list returned %d items, want at least %d", res.ListItems, *listN)})
		}
	}

	res.RSSAfter, res.RSSAfterMiB = readRSS(rssPIDs)

	if *cleanup {
		res.Phases = append(res.Phases, c.phase(ctx, "cleanup", *listN, *conc, 0, func(i int) request {
			return request{http.MethodDelete, coll + "/" + name("l", i), nil, append(deleted, http.StatusNotFound)}
		}, nil))
	}
	return finish(nil)
}
