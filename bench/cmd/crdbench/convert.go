package main

// crdbench convert: the CronTabs of the Kubernetes documentation, stored in
// v1beta1 (hostPort "host:port") and read as v1 (host, port), once through
// the example conversion webhook (examples/crontab-conversion), served by
// crdbench, and once with None conversion.

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"maps"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	certutil "k8s.io/client-go/util/cert"

	"github.com/crdserver/crdserver/examples/crontab-conversion/crontab"
)

const (
	webhookCRDName = "crontabs." + crontab.Group // crontabs.example.com
	noneGroup      = "none." + crontab.Group     // none.example.com
	noneCRDName    = "crontabs." + noneGroup
)

// webhookCounter serves the example's handler and counts what reaches it:
// calls, and objects per call (countReviewObjects, one pass over the body,
// timed apart from the handler).
type webhookCounter struct {
	h                               http.Handler
	mu                              sync.Mutex
	calls, objects, maxObjs, non200 int64
	busy, read, count               time.Duration // the handler, reading the body, the counting pass
	protos                          map[string]int
}

func newWebhookCounter(h http.Handler) *webhookCounter {
	return &webhookCounter{h: h, protos: map[string]int{}}
}

// statusRecorder remembers the status code the wrapped handler writes.
type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (s *statusRecorder) WriteHeader(code int) { s.code = code; s.ResponseWriter.WriteHeader(code) }

func (c *webhookCounter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	t0 := time.Now()
	body, err := io.ReadAll(r.Body)
	t1 := time.Now()
	n := int64(countReviewObjects(body))
	t2 := time.Now()
	rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
	if err != nil {
		http.Error(rec, err.Error(), http.StatusBadRequest)
	} else {
		r.Body = io.NopCloser(bytes.NewReader(body))
		c.h.ServeHTTP(rec, r)
	}
	busy := time.Since(t2)
	c.mu.Lock()
	defer c.mu.Unlock()
	if rec.code != http.StatusOK {
		c.non200++
	}
	if err != nil {
		return
	}
	c.calls, c.objects, c.maxObjs = c.calls+1, c.objects+n, max(c.maxObjs, n)
	c.busy, c.read, c.count = c.busy+busy, c.read+t1.Sub(t0), c.count+t2.Sub(t1)
	c.protos[r.Proto]++
}

// countReviewObjects counts the objects in request.objects of a
// ConversionReview in one pass over its JSON, without decoding it (a decode
// costs milliseconds per thousand objects; this, a fraction of one). It
// assumes well-formed JSON, where the last string read in an object before
// a '{' or '[' is that value's key.
func countReviewObjects(b []byte) int {
	var key [3]string // the key of the open value at depth 1 and 2
	depth, n, inObjs := 0, 0, false
	for i := 0; i < len(b); i++ {
		switch c := b[i]; c {
		case '"':
			j := i + 1
			for ; j < len(b) && b[j] != '"'; j++ {
				if b[j] == '\\' {
					j++
				}
			}
			if depth == 1 || depth == 2 {
				key[depth] = string(b[i+1 : min(j, len(b))])
			}
			i = j
		case '{', '[':
			depth++
			inObjs = inObjs || depth == 3 && c == '[' && key[1] == "request" && key[2] == "objects"
			if depth == 4 && inObjs && c == '{' {
				n++
			}
		case '}', ']':
			inObjs = inObjs && depth != 3
			depth--
		}
	}
	return n
}

// webhookCount is a snapshot of the counter.
type webhookCount struct {
	Calls   int64   `json:"calls"`
	Objects int64   `json:"objects"`
	BusyMs  float64 `json:"handler_ms"`
	ReadMs  float64 `json:"body_read_ms"`
	CountMs float64 `json:"counter_ms"`
	Non200  int64   `json:"non_200"`
}

func (c *webhookCounter) snapshot() webhookCount {
	c.mu.Lock()
	defer c.mu.Unlock()
	return webhookCount{c.calls, c.objects, ms(c.busy), ms(c.read), ms(c.count), c.non200}
}

func (a webhookCount) minus(b webhookCount) webhookCount {
	return webhookCount{a.Calls - b.Calls, a.Objects - b.Objects, math3(a.BusyMs - b.BusyMs), math3(a.ReadMs - b.ReadMs), math3(a.CountMs - b.CountMs), a.Non200 - b.Non200}
}

// convSample is one GET of a whole collection, with what the webhook saw
// meanwhile.
type convSample struct {
	listSample
	Webhook webhookCount `json:"webhook"`
	Invalid string       `json:"invalid,omitempty"` // why the answer is wrong, if it is
}

// convList is the measured GETs of one collection in one version.
type convList struct {
	Name       string       `json:"name"`
	CRD        string       `json:"crd"`
	Conversion string       `json:"conversion"`
	Version    string       `json:"version"`
	Path       string       `json:"path"`
	Warmup     *convSample  `json:"warmup,omitempty"`
	Samples    []convSample `json:"samples"`
	MedianMs   float64      `json:"median_ms"`
	MinMs      float64      `json:"min_ms"`
	MaxMs      float64      `json:"max_ms"`
	Items      int          `json:"items"`
	Bytes      int          `json:"bytes"`
	// Webhook calls and objects per measured GET: the largest seen (all
	// GETs normally see the same).
	CallsPerList   int64   `json:"webhook_calls_per_list"`
	ObjectsPerList int64   `json:"webhook_objects_per_list"`
	WebhookMsMed   float64 `json:"webhook_handler_ms_median"`
	WebhookReadMed float64 `json:"webhook_body_read_ms_median"`
	CounterMsMed   float64 `json:"webhook_counter_ms_median"`
	HostPortKept   *bool   `json:"v1beta1_hostPort_in_answer,omitempty"`
}

type convertResult struct {
	Server         string                  `json:"server"`
	Protocol       string                  `json:"protocol"`
	ClientCert     bool                    `json:"client_cert"`
	N              int                     `json:"objects"`
	Concurrency    int                     `json:"concurrency"`
	ListsPerColl   int                     `json:"lists"`
	Warmup         bool                    `json:"warmup"`
	SettleSec      float64                 `json:"settle_seconds"`
	WebhookURL     string                  `json:"webhook_url"`
	WebhookServing string                  `json:"webhook_serving"`
	WebhookProtos  map[string]int          `json:"webhook_protocols,omitempty"`
	MaxObjsPerCall int64                   `json:"webhook_max_objects_per_call"`
	BodyBytes      int                     `json:"create_body_bytes"`
	SampleBody     string                  `json:"first_created_object,omitempty"`
	Phases         []phase                 `json:"phases"`
	PopulateHooks  map[string]webhookCount `json:"webhook_during_populate"`
	// From the CRDs' creation to the first GET: the creates, and whatever
	// the server converted meanwhile or just after.
	BeforeLists  *webhookCount `json:"webhook_before_lists,omitempty"`
	Lists        []convList    `json:"lists_by_collection"`
	RSSAfter     []procMem     `json:"rss_after_lists,omitempty"`
	RSSAfterMiB  float64       `json:"rss_after_lists_total_mib,omitempty"`
	Cleanup      string        `json:"cleanup,omitempty"`
	CleanupHooks *webhookCount `json:"webhook_during_cleanup,omitempty"`
	Failures     []failure     `json:"failures,omitempty"`
	Error        string        `json:"error,omitempty"`
}

func (r *convertResult) list(name string) *convList {
	return find(r.Lists, func(x *convList) bool { return x.Name == name })
}

// crontabCRD is the CronTab CRD of the Kubernetes documentation's
// conversion example: v1beta1 (storage) with hostPort, v1 with host and
// port, both served; conversion is None, or Webhook by url with caBundle.
func crontabCRD(group, webhookURL string, caPEM []byte) []byte {
	conv := `{"strategy":"None"}`
	if webhookURL != "" {
		conv = fmt.Sprintf(`{"strategy":"Webhook","webhook":{"clientConfig":{"url":%q,"caBundle":%q},"conversionReviewVersions":["v1"]}}`,
			webhookURL, base64.StdEncoding.EncodeToString(caPEM))
	}
	return crontabCRDOf(group, conv, `"hostPort":{"type":"string"}`, `"host":{"type":"string"},"port":{"type":"string"}`, "")
}

// crontabCRDOf is the CronTab CRD with conversion conv, the schemas of the
// fields of v1beta1 and of v1 beside spec, and more of v1's root schema.
func crontabCRDOf(group, conv, betaFields, v1Fields, v1Root string) []byte {
	version := func(name string, storage bool, fields, root string) string {
		return fmt.Sprintf(`{"name":%q,"served":true,"storage":%v,"schema":{"openAPIV3Schema":{"type":"object","properties":{"spec":{"type":"object",`+
			`"properties":{"cronSpec":{"type":"string"},"image":{"type":"string"},"replicas":{"type":"integer"}}},%s}%s}}}`, name, storage, fields, root)
	}
	return fmt.Appendf(nil, `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"crontabs.%s"},`+
		`"spec":{"group":%q,"scope":"Namespaced","names":{"plural":"crontabs","singular":"crontab","kind":"CronTab","listKind":"CronTabList"},`+
		`"versions":[%s,%s],"conversion":%s}}`, group, group, version("v1beta1", true, betaFields, ""), version("v1", false, v1Fields, v1Root), conv)
}

// crontabHostPort is object i's hostPort (v1beta1), or host and port (v1).
func crontabHostPort(i int) (string, string) {
	return fmt.Sprintf("host-%05d.example.com", i), strconv.Itoa(8000 + i%1000)
}

// crontabName is the name of CronTab i: crontab-00042.
func crontabName(i int) string { return "crontab-" + strconv.Itoa(100000 + i)[1:] }

func crontabBody(group string, name string, i int) []byte {
	host, port := crontabHostPort(i)
	return fmt.Appendf(nil, `{"apiVersion":"%s/v1beta1","kind":"CronTab","metadata":{"labels":{"bench":"crdbench"},"name":%q},`+
		`"hostPort":%q,"spec":{"cronSpec":"*/5 * * * *","image":"my-awesome-cron-image","replicas":%d}}`, group, name, net.JoinHostPort(host, port), 1+i%3)
}

// checkCronTabs checks a list answer: n items, all in apiVersion want, and,
// for v1 through the webhook, host and port converted from each object's
// hostPort. It reports whether a v1 answer still carries hostPort.
func checkCronTabs(body []byte, n int, prefix, want string, webhookV1 bool) (hostPortKept bool, problem string) {
	var list struct {
		APIVersion, Kind string
		Items            []struct {
			APIVersion, Kind     string
			Metadata             struct{ Name string }
			HostPort, Host, Port *string
		}
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return false, "decode: " + err.Error()
	}
	if list.Kind != "CronTabList" || list.APIVersion != want {
		return false, fmt.Sprintf("list is %s %s, want %s CronTabList", list.APIVersion, list.Kind, want)
	}
	if len(list.Items) != n {
		return false, fmt.Sprintf("%d items, want %d", len(list.Items), n)
	}
	bad, first := 0, ""
	for _, it := range list.Items {
		i, err := strconv.Atoi(strings.TrimPrefix(it.Metadata.Name, prefix))
		host, port := crontabHostPort(i)
		why := ""
		switch {
		case err != nil || !strings.HasPrefix(it.Metadata.Name, prefix):
			why = "unexpected name"
		case it.APIVersion != want || it.Kind != "CronTab":
			why = fmt.Sprintf("item is %s %s", it.APIVersion, it.Kind)
		case strings.HasSuffix(want, "/v1beta1") && (it.HostPort == nil || *it.HostPort != net.JoinHostPort(host, port)):
			why = "hostPort missing or wrong"
		case strings.HasSuffix(want, "/v1beta1") || !webhookV1:
		case it.Host == nil || it.Port == nil || *it.Host != host || *it.Port != port:
			why = "host/port missing or wrong"
		case it.HostPort != nil:
			why = "v1 item still has hostPort"
		}
		hostPortKept = hostPortKept || it.HostPort != nil
		if why != "" {
			if bad++; first == "" {
				first = it.Metadata.Name + ": " + why
			}
		}
	}
	if bad > 0 {
		return hostPortKept, fmt.Sprintf("%d of %d items wrong; first: %s", bad, n, first)
	}
	return hostPortKept, ""
}

// populate creates n CronTabs (crontab-00000…) of group in v1beta1 in the
// collection at url, with conc workers.
func populate(ctx context.Context, c *client, label, group, url string, n, conc int) phase {
	bodies := make([][]byte, n)
	for i := range bodies {
		bodies[i] = crontabBody(group, crontabName(i), i)
	}
	log.Printf("%s: %d creates in %s with %d workers", label, n, strings.TrimPrefix(url, c.base), conc)
	return c.phase(ctx, label, n, conc, 0, func(i int) request {
		return request{http.MethodPost, url, bodies[i], []int{http.StatusCreated}}
	}, nil)
}

// getCronTabs is one timed GET of the n CronTabs at url, wanted in
// apiVersion (checked with checkCronTabs), with what the webhook saw
// meanwhile; a failure is named after phaseName.
func getCronTabs(ctx context.Context, c *client, hook *webhookCounter, phaseName, url, apiVersion string, n int, webhookV1 bool) (convSample, bool, *failure) {
	before := hook.snapshot()
	t0 := time.Now()
	code, b, err := c.do(ctx, http.MethodGet, url, nil)
	s := convSample{listSample: listSample{Ms: ms(time.Since(t0)), Bytes: len(b), Status: code}}
	s.Webhook = hook.snapshot().minus(before)
	if err != nil || code != http.StatusOK {
		f := c.fail(phaseName, http.MethodGet, url, code, b, err)
		f.Body += fmt.Sprintf(" [webhook during this GET: %d calls, %d objects, %d non-200]", s.Webhook.Calls, s.Webhook.Objects, s.Webhook.Non200)
		return s, false, f
	}
	kept, problem := checkCronTabs(b, n, "crontab-", apiVersion, webhookV1)
	var items struct{ Items []json.RawMessage }
	_ = json.Unmarshal(b, &items)
	s.Items = len(items.Items)
	if s.Invalid = problem; problem != "" {
		return s, kept, &failure{Phase: phaseName, Method: http.MethodGet, Path: strings.TrimPrefix(url, c.base), Status: code,
			Error: "wrong answer: " + problem, Body: truncate(b, 500)}
	}
	return s, kept, nil
}

func runConvert(args []string) error {
	fs := flag.NewFlagSet("convert", flag.ExitOnError)
	var t tlsFlags
	t.register(fs)
	var (
		server    = fs.String("server", "", "API server base URL, http:// or https:// (loopback only)")
		namespace = fs.String("namespace", "default", "namespace of the objects")
		n         = fs.Int("n", 10000, "objects created in v1beta1 in each of the two CRDs")
		lists     = fs.Int("lists", 7, "measured GETs of each collection; median and min reported")
		warmup    = fs.Bool("warmup", true, "one unmeasured GET of each collection first (recorded apart)")
		conc      = fs.Int("concurrency", 8, "workers for the creates")
		settle    = fs.Duration("settle", 0, "pause after Established before the creates (the reference needs 2s)")
		waitFor   = fs.Duration("wait", 60*time.Second, "how long to wait for the CRDs to be Established")
		cleanup   = fs.Bool("cleanup", false, "delete the two CRDs (and so their objects) afterwards, if this run created them")
		jsonOut   = fs.String("json", "", "write the results as JSON to this file")
		rssPIDs   namedPIDs
	)
	fs.Var(&rssPIDs, "rss-pid", "name=PID of a server process whose VmRSS is read right after the lists (repeatable)")
	_ = fs.Parse(args)
	if err := checkFlags([]bound{{*n < 1 || *n > 100000 || *lists < 1 || *conc < 1 || *conc > 64, "1 <= -n <= 100000, -lists >= 1, 1 <= -concurrency <= 64"}}); err != nil {
		return err
	}
	l, err := connect(*server, t, *conc)
	if err != nil {
		return err
	}
	base, ctx := l.base, context.Background()
	res := &convertResult{Server: base, ClientCert: t.cert != "", N: *n, Concurrency: *conc, ListsPerColl: *lists,
		Warmup: *warmup, SettleSec: settle.Seconds(), PopulateHooks: map[string]webhookCount{}}
	hook, hookURL, certPEM, hsrv, err := serveCronTabWebhook()
	if err != nil {
		return err
	}
	defer hsrv.Close()
	res.WebhookURL = hookURL
	res.WebhookServing = "in crdbench's own process: the example's handler crontab.NewScheme() " +
		"(examples/crontab-conversion/crontab) served with net/http over TLS (self-signed cert for 127.0.0.1, in caBundle), " +
		"wrapped by a counter that reads each request body and counts request.objects in one pass without decoding " +
		"(its own time is measured apart: counter_ms)"
	res.BodyBytes = len(crontabBody(crontab.Group, crontabName(0), 0))
	log.Printf("conversion webhook on %s", res.WebhookURL)

	var created []string
	finish := func(err error) error {
		if *cleanup && len(created) > 0 {
			before := hook.snapshot()
			var notes []string
			for _, name := range created {
				notes = append(notes, l.deleteAndWait("CRD "+name, base+crdPath+"/"+name, 10*time.Minute))
			}
			res.Cleanup = strings.Join(notes, "; ")
			h := hook.snapshot().minus(before)
			res.CleanupHooks = &h
		}
		res.Protocol = l.protocol()
		hook.mu.Lock()
		res.WebhookProtos, res.MaxObjsPerCall = maps.Clone(hook.protos), hook.maxObjs
		hook.mu.Unlock()
		res.Failures = append(res.Failures, firstError(res.Phases...)...)
		return done(*jsonOut, res, &res.Error, res.Failures, err)
	}

	// The two CRDs. An existing one is not touched: it may be someone else's.
	type crd struct{ name, group, hookURL, label string }
	crds := []crd{{webhookCRDName, crontab.Group, hookURL, "webhook"}, {noneCRDName, noneGroup, "", "none"}}
	for _, c := range crds {
		if f, err := l.create(ctx, "create-crd", "CRD "+c.name, base+crdPath, crontabCRD(c.group, c.hookURL, certPEM)); err != nil {
			res.Failures = append(res.Failures, *f)
			return finish(err)
		}
		created = append(created, c.name)
	}
	for _, c := range crds {
		if err := l.waitEstablished(ctx, c.name, *waitFor); err != nil {
			return finish(err)
		}
	}
	time.Sleep(*settle)
	ns := ""
	if *namespace != "" {
		ns = "/namespaces/" + *namespace
	}
	coll := func(group, version string) string { return base + "/apis/" + group + "/" + version + ns + "/crontabs" }

	// n objects in v1beta1 in each CRD, counting webhook calls.
	for _, c := range crds {
		label := "populate-" + c.label
		before := hook.snapshot()
		p := populate(ctx, l, label, c.group, coll(c.group, "v1beta1"), *n, *conc)
		res.PopulateHooks[label] = hook.snapshot().minus(before)
		res.Phases = append(res.Phases, p)
		if c.hookURL != "" {
			if code, b, err := l.do(ctx, http.MethodGet, coll(c.group, "v1beta1")+"/"+crontabName(0), nil); err == nil && code == http.StatusOK {
				res.SampleBody = truncate(b, 2000)
			}
		}
		if p.Errors > 0 {
			return finish(fmt.Errorf("%s: %d of %d creates failed", label, p.Errors, p.Requests))
		}
	}

	// The lists, interleaved round by round so that noise hits all alike.
	for _, v := range []string{"v1", "v1beta1"} {
		for _, c := range crds {
			res.Lists = append(res.Lists, convList{Name: c.label + "-" + v, CRD: c.name, Conversion: map[bool]string{true: "Webhook", false: "None"}[c.hookURL != ""],
				Version: v, Path: coll(c.group, v)})
		}
	}
	one := func(cl *convList) (convSample, bool) {
		group := map[bool]string{true: crontab.Group, false: noneGroup}[cl.Conversion == "Webhook"]
		s, kept, f := getCronTabs(ctx, l, hook, "list "+cl.Name, cl.Path, group+"/"+cl.Version, *n, cl.Name == "webhook-v1")
		if cl.Version == "v1" && s.Status == http.StatusOK {
			cl.HostPortKept = &kept
		}
		if f != nil {
			res.Failures = append(res.Failures, *f)
		}
		return s, f == nil
	}
	before := hook.snapshot()
	res.BeforeLists = &before
	for i := range res.Lists {
		if *warmup {
			s, ok := one(&res.Lists[i])
			if res.Lists[i].Warmup = &s; !ok {
				return finish(fmt.Errorf("warm-up GET of %s failed", res.Lists[i].Name))
			}
		}
	}
	log.Printf("%d rounds of lists (%d collections)", *lists, len(res.Lists))
	failed := map[string]bool{}
	for range *lists {
		for i := range res.Lists {
			if cl := &res.Lists[i]; !failed[cl.Name] {
				s, ok := one(cl)
				cl.Samples, failed[cl.Name] = append(cl.Samples, s), !ok
			}
		}
	}
	for i := range res.Lists {
		cl := &res.Lists[i]
		if failed[cl.Name] {
			continue
		}
		var ds, hs, rs, cs []float64
		for _, s := range cl.Samples {
			ds, hs, rs, cs = append(ds, s.Ms), append(hs, s.Webhook.BusyMs), append(rs, s.Webhook.ReadMs), append(cs, s.Webhook.CountMs)
			cl.CallsPerList, cl.ObjectsPerList = max(cl.CallsPerList, s.Webhook.Calls), max(cl.ObjectsPerList, s.Webhook.Objects)
			cl.Items, cl.Bytes = s.Items, s.Bytes
		}
		cl.MedianMs, cl.MinMs, cl.MaxMs = median(ds), slices.Min(ds), slices.Max(ds)
		cl.WebhookMsMed, cl.WebhookReadMed, cl.CounterMsMed = median(hs), median(rs), median(cs)
	}
	res.RSSAfter, res.RSSAfterMiB = readRSS(rssPIDs)
	return finish(nil)
}

// serveCronTabWebhook serves the example CronTab conversion webhook
// (crontab.NewScheme()) behind a webhookCounter with serveTLS. It returns
// the counter, the webhook's URL (path /convert), the PEM to give as
// caBundle and the server, to Close when done.
func serveCronTabWebhook() (*webhookCounter, string, []byte, *http.Server, error) {
	hook := newWebhookCounter(crontab.NewScheme())
	base, caPEM, srv, err := serveTLS("crdbench-crontab-conversion", hook)
	return hook, base + "/convert", caPEM, srv, err
}

// serveTLS serves h on a free loopback port over TLS (HTTP/2) with a
// self-signed certificate for 127.0.0.1 and ::1. It returns the server's
// https:// URL, the PEM that trusts it (a caBundle) and the server.
func serveTLS(name string, h http.Handler) (string, []byte, *http.Server, error) {
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey(name, []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1")}, nil)
	if err != nil {
		return "", nil, nil, err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return "", nil, nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, ErrorLog: log.New(io.Discard, "", 0)}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	return "https://" + ln.Addr().String(), certPEM, srv, nil
}

// convSide is the conversion benchmark of one server (convert-NAME.json).
type convSide sideOf[convertResult]

// listVal is a figure of one measured collection, or why there is none.
func (s convSide) listVal(name string, f func(*convList) float64, prec int, unit string) val {
	return s.with(func(r *convertResult) val {
		cl := r.list(name)
		switch {
		case cl == nil:
			return none("not reached")
		case slices.ContainsFunc(r.Failures, func(f failure) bool { return f.Phase == "list "+name }):
			return none("**failed** (see Failures)")
		case len(cl.Samples) == 0:
			return none("not reached")
		}
		return num(f(cl), prec, unit)
	})
}

func medianMs(c *convList) float64 { return c.MedianMs }

// ratioVal is webhook-v1 ÷ none-v1 (medians).
func (s convSide) ratioVal() val {
	w, n := s.listVal("webhook-v1", medianMs, 1, ""), s.listVal("none-v1", medianMs, 1, "")
	switch {
	case !w.ok:
		return w
	case !n.ok || n.v == 0:
		return n
	}
	return num(w.v/n.v, 2, "×")
}

// with is f of the result, or why there is none.
func (s convSide) with(f func(*convertResult) val) val {
	if s.res == nil {
		return none(s.why)
	}
	return f(s.res)
}

// hookCalls is a count of webhook calls with its objects.
func hookCalls(h *webhookCount, why string) val {
	if h == nil {
		return none(why)
	}
	return val{v: float64(h.Calls), ok: true, unit: fmt.Sprintf(" (%s objects)", commas(int(h.Objects)))}
}

// convertFigs are the rows of the webhook conversion table.
func convertFigs(n int) []fig[convSide] {
	var fs []fig[convSide]
	// add is a row; one with a unit (a time, size or rate) has the ratio of the two.
	add := func(metric, unit string, cell func(convSide) val) {
		fs = append(fs, fig[convSide]{metric, cell, map[bool]func(a, b val) string{true: ratio}[unit != ""]})
	}
	coll := func(metric, name string, f func(*convList) float64, prec int, unit string) {
		add(metric, unit, func(s convSide) val { return s.listVal(name, f, prec, unit) })
	}
	with := func(metric string, f func(*convertResult) val) {
		add(metric, "", func(s convSide) val { return s.with(f) })
	}
	coll(fmt.Sprintf("list of %s, stored v1beta1, read as **v1 through the webhook**: median", commas(n)), "webhook-v1", medianMs, 1, " ms")
	coll("… min", "webhook-v1", func(c *convList) float64 { return c.MinMs }, 1, " ms")
	coll("… max", "webhook-v1", func(c *convList) float64 { return c.MaxMs }, 1, " ms")
	coll("… **webhook calls** per GET (most seen in one GET)", "webhook-v1", func(c *convList) float64 { return float64(c.CallsPerList) }, 0, "")
	coll("… objects sent to the webhook per GET", "webhook-v1", func(c *convList) float64 { return float64(c.ObjectsPerList) }, 0, "")
	coll("… time inside the example webhook's handler per GET, median (its decode, conversion and encode; in crdbench)", "webhook-v1",
		func(c *convList) float64 { return c.WebhookMsMed }, 1, " ms")
	coll("… reading the ConversionReview bodies in the webhook per GET, median", "webhook-v1", func(c *convList) float64 { return c.WebhookReadMed }, 1, " ms")
	coll("… the counter's own time per GET, median (in the list time, not the handler's)", "webhook-v1", func(c *convList) float64 { return c.CounterMsMed }, 2, " ms")
	coll("… the rest of each GET (list time − handler − body read − counter), median: the server's own work, TLS, transfer", "webhook-v1", func(c *convList) float64 {
		var rest []float64
		for _, s := range c.Samples {
			rest = append(rest, s.Ms-s.Webhook.BusyMs-s.Webhook.ReadMs-s.Webhook.CountMs)
		}
		return median(rest)
	}, 1, " ms")
	coll("… items returned, all checked (v1, `host`/`port` converted from each object's `hostPort`)", "webhook-v1", func(c *convList) float64 { return float64(c.Items) }, 0, "")
	coll("… response size", "webhook-v1", func(c *convList) float64 { return float64(c.Bytes) / 1e6 }, 2, " MB")
	with("first GET through the webhook (warm-up, not in the median: opens the webhook connection)", func(r *convertResult) val {
		if cl := r.list("webhook-v1"); cl != nil && cl.Warmup != nil && cl.Warmup.Status == 200 {
			return val{v: cl.Warmup.Ms, ok: true, prec: 1, unit: fmt.Sprintf(" ms, %d calls", cl.Warmup.Webhook.Calls)}
		}
		return none("not measured")
	})
	coll(fmt.Sprintf("same list, **None conversion** (`%s`, read as v1): median", noneCRDName), "none-v1", medianMs, 1, " ms")
	coll("… min", "none-v1", func(c *convList) float64 { return c.MinMs }, 1, " ms")
	add("**webhook ÷ None** (medians)", "", convSide.ratioVal)
	coll("same list in the storage version v1beta1, no conversion (Webhook CRD): median", "webhook-v1beta1", medianMs, 1, " ms")
	coll("same list in v1beta1 (None CRD): median", "none-v1beta1", medianMs, 1, " ms")
	with("webhook calls while creating the objects in v1beta1 (Webhook CRD's creates)", func(r *convertResult) val {
		if h, ok := r.PopulateHooks["populate-webhook"]; ok {
			return hookCalls(&h, "")
		}
		return none("not reached")
	})
	with("webhook calls from the CRDs' creation to the first GET (both CRDs' creates and any conversion trailing them)",
		func(r *convertResult) val { return hookCalls(r.BeforeLists, "not reached") })
	with("webhook calls while deleting the two CRDs afterwards (`-cleanup`, reference only)",
		func(r *convertResult) val { return hookCalls(r.CleanupHooks, "not run (no -cleanup)") })
	with("largest ConversionReview of the run (objects)", func(r *convertResult) val { return num(float64(r.MaxObjsPerCall), 0, "") })
	with("(setup) create body, v1beta1 CronTab", func(r *convertResult) val { return num(float64(r.BodyBytes), 0, " B") })
	for _, x := range [][2]string{{"Webhook", "webhook"}, {"None", "none"}} {
		add("(setup) creates with the "+x[0]+" CRD: req/s", "req/s", func(s convSide) val {
			return s.with(func(r *convertResult) val {
				p := find(r.Phases, func(p *phase) bool { return p.Name == "populate-"+x[1] })
				switch {
				case p == nil:
					return none("not reached")
				case p.Errors > 0:
					return none(fmt.Sprintf("**failed** (%d/%d errors)", p.Errors, p.Requests))
				}
				return num(p.PerSecond, 1, "")
			})
		})
	}
	add("(not a target) RSS right after the lists, both CRDs' objects stored (reference: apiserver + etcd)", " MiB", func(s convSide) val {
		return s.with(func(r *convertResult) val {
			if len(r.RSSAfter) == 0 {
				return none("not measured")
			}
			return num(r.RSSAfterMiB, 1, " MiB")
		})
	})
	with("(fidelity, not a target) a None-converted v1 answer still carries the v1beta1-only field `hostPort`", func(r *convertResult) val {
		if cl := r.list("none-v1"); cl != nil && cl.HostPortKept != nil {
			return label(map[bool]string{true: "yes (kept)", false: "no (pruned)"}[*cl.HostPortKept])
		}
		return label("not measured")
	})
	return fs
}

// convertReport writes the webhook conversion section and returns its rows
// for the Targets table and its failures.
func convertReport(dir string, p func(string, ...any)) (targets [][]string, fails []string) {
	c, r := convSide(readSide[convertResult](dir, "convert-crdserver.json")), convSide(readSide[convertResult](dir, "convert-reference.json"))
	if c.res == nil && r.res == nil {
		return nil, nil
	}
	first := cmp.Or(c.res, r.res)
	n := first.N
	p("## Webhook conversion\n\n")
	p("The CronTabs of the Kubernetes documentation: %s objects stored in v1beta1 (`hostPort`) read as v1 (`host`, `port`) through the example webhook "+
		"(`examples/crontab-conversion`, url + caBundle, `conversionReviewVersions: [v1]`), beside a CRD with None conversion. "+
		"Each figure is over %d plain GETs of the whole collection, the four collections in turn, after one unmeasured GET of each. "+
		"The two servers call the webhook at different times (\"while creating\" against \"per GET\"), so their lists through it are not the same work.\n\n",
		commas(n), first.ListsPerColl)
	t := newTable("metric", "crdserver", "reference", "ratio")
	figs(t, convertFigs(n), c, r)
	p("%s\n", t)

	// Targets (crdserver).
	met := func(v val, ok func(float64) bool) string {
		if !v.ok {
			return "not measured"
		}
		return yesNo(ok(v.v))
	}
	calls := c.listVal("webhook-v1", func(c *convList) float64 { return float64(c.CallsPerList) }, 0, " calls")
	rv := c.ratioVal()
	m := rv.String()
	if rv.ok {
		m = fmt.Sprintf("%s vs %s (%s)", c.listVal("webhook-v1", medianMs, 1, " ms"), c.listVal("none-v1", medianMs, 1, " ms"), rv)
	}
	targets = [][]string{
		{fmt.Sprintf("webhook conversion: at most 10 webhook calls for a list of %s objects", commas(n)), calls.String(), met(calls, func(x float64) bool { return x <= 10 })},
		{fmt.Sprintf("webhook conversion within 2× the None-conversion time (list of %s, medians)", commas(n)), m, met(rv, func(x float64) bool { return x <= 2 })},
	}
	for i, s := range []convSide{c, r} {
		if s.res != nil {
			fails = append(fails, workloadFailures([]string{"crdserver", "reference"}[i], "webhook conversion", s.res.Error, s.res.Failures)...)
		}
	}
	return targets, fails
}
