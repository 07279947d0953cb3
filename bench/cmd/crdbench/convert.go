package main

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
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
	"sync/atomic"
	"time"

	certutil "k8s.io/client-go/util/cert"

	"github.com/crdserver/crdserver/examples/crontab-conversion/crontab"
)

// The conversion benchmark: CronTabs of the Kubernetes
// documentation, stored in v1beta1 (hostPort "host:port") and read as v1
// (host, port), once through the example conversion webhook
// (examples/crontab-conversion) and once with None conversion.

const (
	webhookCRDName = "crontabs." + crontab.Group // crontabs.example.com
	noneGroup      = "none." + crontab.Group     // none.example.com
	noneCRDName    = "crontabs." + noneGroup
)

// webhookCounter serves the example's handler (crontab.NewScheme()) and
// counts what reaches it: calls, and objects per call (countReviewObjects,
// one pass over the body; that time is measured apart and not counted as
// the handler's).
type webhookCounter struct {
	h       http.Handler
	calls   atomic.Int64
	objects atomic.Int64
	maxObjs atomic.Int64
	busyNs  atomic.Int64 // the example's handler
	readNs  atomic.Int64 // reading the request body
	countNs atomic.Int64 // the counter's own decode
	non200  atomic.Int64
	protoMu sync.Mutex
	protos  map[string]int
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
	if err != nil {
		c.non200.Add(1)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	t1 := time.Now()
	c.readNs.Add(int64(t1.Sub(t0)))
	n := int64(countReviewObjects(body))
	c.calls.Add(1)
	c.objects.Add(n)
	for {
		m := c.maxObjs.Load()
		if n <= m || c.maxObjs.CompareAndSwap(m, n) {
			break
		}
	}
	c.protoMu.Lock()
	c.protos[r.Proto]++
	c.protoMu.Unlock()
	t2 := time.Now()
	c.countNs.Add(int64(t2.Sub(t1)))
	r.Body = io.NopCloser(bytes.NewReader(body))
	rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
	c.h.ServeHTTP(rec, r)
	if rec.code != http.StatusOK {
		c.non200.Add(1)
	}
	c.busyNs.Add(int64(time.Since(t2)))
}

// countReviewObjects counts the objects in request.objects of a
// ConversionReview in one pass over its JSON, without decoding it (a decode
// costs milliseconds per thousand objects; this, a fraction of one). It
// assumes well-formed JSON: the handler decodes the review anyway.
func countReviewObjects(b []byte) int {
	var (
		depth   int
		key     [3][]byte // the last key read at depth 1 and 2
		inObjs  bool      // inside the array request.objects (depth 3)
		n       int
		request = []byte("request")
		objects = []byte("objects")
	)
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '"':
			// The closing quote: the next one not escaped by an odd run of
			// backslashes.
			j := i + 1
			for {
				k := bytes.IndexByte(b[j:], '"')
				if k < 0 {
					return n
				}
				j += k
				bs := 0
				for bs < j-i-1 && b[j-1-bs] == '\\' {
					bs++
				}
				if bs%2 == 0 {
					break
				}
				j++
			}
			if depth == 1 || depth == 2 {
				k := j + 1
				for k < len(b) && (b[k] == ' ' || b[k] == '\t' || b[k] == '\n' || b[k] == '\r') {
					k++
				}
				if k < len(b) && b[k] == ':' {
					key[depth] = b[i+1 : j]
				}
			}
			i = j
		case '{', '[':
			depth++
			if depth == 3 && b[i] == '[' && bytes.Equal(key[1], request) && bytes.Equal(key[2], objects) {
				inObjs = true
			}
			if depth == 4 && inObjs && b[i] == '{' {
				n++
			}
		case '}', ']':
			if depth == 3 {
				inObjs = false
			}
			if depth == 2 {
				key[2] = nil
			}
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
	return webhookCount{Calls: c.calls.Load(), Objects: c.objects.Load(), BusyMs: ms(time.Duration(c.busyNs.Load())), ReadMs: ms(time.Duration(c.readNs.Load())), CountMs: ms(time.Duration(c.countNs.Load())), Non200: c.non200.Load()}
}

func (a webhookCount) minus(b webhookCount) webhookCount {
	return webhookCount{Calls: a.Calls - b.Calls, Objects: a.Objects - b.Objects, BusyMs: math3(a.BusyMs - b.BusyMs), ReadMs: math3(a.ReadMs - b.ReadMs), CountMs: math3(a.CountMs - b.CountMs), Non200: a.Non200 - b.Non200}
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
	spec := map[string]any{"type": "object", "properties": map[string]any{
		"cronSpec": map[string]any{"type": "string"},
		"image":    map[string]any{"type": "string"},
		"replicas": map[string]any{"type": "integer"},
	}}
	version := func(name string, storage bool, fields ...string) map[string]any {
		props := map[string]any{"spec": spec}
		for _, f := range fields {
			props[f] = map[string]any{"type": "string"}
		}
		return map[string]any{"name": name, "served": true, "storage": storage,
			"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "properties": props}}}
	}
	conv := map[string]any{"strategy": "None"}
	if webhookURL != "" {
		conv = map[string]any{"strategy": "Webhook", "webhook": map[string]any{
			"clientConfig":             map[string]any{"url": webhookURL, "caBundle": base64.StdEncoding.EncodeToString(caPEM)},
			"conversionReviewVersions": []string{"v1"},
		}}
	}
	crd := map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "crontabs." + group},
		"spec": map[string]any{
			"group": group, "scope": "Namespaced",
			"names":      map[string]any{"plural": "crontabs", "singular": "crontab", "kind": "CronTab", "listKind": "CronTabList"},
			"versions":   []any{version("v1beta1", true, "hostPort"), version("v1", false, "host", "port")},
			"conversion": conv,
		},
	}
	b, _ := json.Marshal(crd)
	return b
}

// crontabHostPort is object i's hostPort (v1beta1), or host and port (v1).
func crontabHostPort(i int) (string, string) {
	return fmt.Sprintf("host-%05d.example.com", i), strconv.Itoa(8000 + i%1000)
}

func crontabBody(group string, name string, i int) []byte {
	host, port := crontabHostPort(i)
	obj := map[string]any{
		"apiVersion": group + "/v1beta1", "kind": "CronTab",
		"metadata": map[string]any{"name": name, "labels": map[string]string{"bench": "crdbench"}},
		"spec":     map[string]any{"cronSpec": "*/5 * * * *", "image": "my-awesome-cron-image", "replicas": 1 + i%3},
		"hostPort": net.JoinHostPort(host, port),
	}
	b, _ := json.Marshal(obj)
	return b
}

// checkCronTabs checks a list answer: n items, all in apiVersion want, and,
// for v1 through the webhook, host and port converted from each object's
// hostPort. It reports whether a v1 answer still carries hostPort.
func checkCronTabs(body []byte, n int, prefix, want string, webhookV1 bool) (hostPortKept bool, problem string) {
	var list struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Items      []struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name string `json:"name"`
			} `json:"metadata"`
			HostPort *string `json:"hostPort"`
			Host     *string `json:"host"`
			Port     *string `json:"port"`
		} `json:"items"`
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
	bad := 0
	var first string
	for _, it := range list.Items {
		var why string
		i, err := strconv.Atoi(strings.TrimPrefix(it.Metadata.Name, prefix))
		switch {
		case err != nil || !strings.HasPrefix(it.Metadata.Name, prefix):
			why = "unexpected name"
		case it.APIVersion != want || it.Kind != "CronTab":
			why = fmt.Sprintf("item is %s %s", it.APIVersion, it.Kind)
		case strings.HasSuffix(want, "/v1beta1"):
			host, port := crontabHostPort(i)
			if it.HostPort == nil || *it.HostPort != net.JoinHostPort(host, port) {
				why = "hostPort missing or wrong"
			}
		case webhookV1:
			host, port := crontabHostPort(i)
			if it.Host == nil || it.Port == nil || *it.Host != host || *it.Port != port {
				why = "host/port missing or wrong"
			} else if it.HostPort != nil {
				why = "v1 item still has hostPort"
			}
		}
		if it.HostPort != nil {
			hostPortKept = true
		}
		if why != "" {
			bad++
			if first == "" {
				first = it.Metadata.Name + ": " + why
			}
		}
	}
	if bad > 0 {
		return hostPortKept, fmt.Sprintf("%d of %d items wrong; first: %s", bad, n, first)
	}
	return hostPortKept, ""
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
	if *n < 1 || *n > 100000 || *lists < 1 || *conc < 1 || *conc > 64 {
		return errors.New("need 1 <= -n <= 100000, -lists >= 1, 1 <= -concurrency <= 64")
	}
	l, err := connect(*server, t, *conc)
	if err != nil {
		return err
	}
	base, ctx := l.base, context.Background()
	res := &convertResult{Server: base, ClientCert: t.cert != "", N: *n, Concurrency: *conc, ListsPerColl: *lists,
		Warmup: *warmup, SettleSec: settle.Seconds(), PopulateHooks: map[string]webhookCount{}}

	// The webhook: the example's handler, served in this process over TLS
	// on a loopback port, behind the counter.
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
	res.BodyBytes = len(crontabBody(crontab.Group, "crontab-00000", 0))
	log.Printf("conversion webhook on %s", res.WebhookURL)

	created := map[string]bool{}
	finish := func(err error) error {
		if *cleanup && len(created) > 0 {
			before := hook.snapshot()
			var notes []string
			for _, name := range []string{webhookCRDName, noneCRDName} {
				if !created[name] {
					continue
				}
				notes = append(notes, l.deleteAndWait("CRD "+name, base+crdPath+"/"+name, 10*time.Minute))
			}
			res.Cleanup = strings.Join(notes, "; ")
			h := hook.snapshot().minus(before)
			res.CleanupHooks = &h
		}
		res.Protocol = l.protocol()
		hook.protoMu.Lock()
		res.WebhookProtos = maps.Clone(hook.protos)
		hook.protoMu.Unlock()
		res.MaxObjsPerCall = hook.maxObjs.Load()
		res.Failures = append(res.Failures, firstError(res.Phases...)...)
		return done(*jsonOut, res, &res.Error, res.Failures, err)
	}

	// The two CRDs. An existing one is not touched: it may be someone else's.
	for _, c := range []struct{ name, group, url string }{
		{webhookCRDName, crontab.Group, res.WebhookURL},
		{noneCRDName, noneGroup, ""},
	} {
		code, b, err := l.do(ctx, http.MethodPost, base+crdPath, crontabCRD(c.group, c.url, certPEM))
		if err != nil || code != http.StatusCreated {
			f := l.fail("create-crd", http.MethodPost, base+crdPath, code, b, err)
			f.Path += " (" + c.name + ")"
			res.Failures = append(res.Failures, *f)
			if code == http.StatusConflict {
				return finish(fmt.Errorf("CRD %s already exists on %s; left alone (delete it to rerun)", c.name, base))
			}
			return finish(fmt.Errorf("could not create CRD %s", c.name))
		}
		created[c.name] = true
	}
	for _, name := range []string{webhookCRDName, noneCRDName} {
		if err := l.waitEstablished(ctx, name, *waitFor); err != nil {
			return finish(err)
		}
	}
	time.Sleep(*settle)

	ns := ""
	if *namespace != "" {
		ns = "/namespaces/" + *namespace
	}
	coll := func(group, version string) string { return base + "/apis/" + group + "/" + version + ns + "/crontabs" }
	prefix := "crontab-"
	name := func(i int) string { return prefix + strconv.Itoa(100000 + i)[1:] }

	// Create n objects in v1beta1 in each CRD, counting webhook calls.
	for _, c := range []struct{ label, group string }{{"populate-webhook", crontab.Group}, {"populate-none", noneGroup}} {
		bodies := make([][]byte, *n)
		for i := range bodies {
			bodies[i] = crontabBody(c.group, name(i), i)
		}
		target := coll(c.group, "v1beta1")
		log.Printf("%s: %d creates in %s/v1beta1 with %d workers", c.label, *n, c.group, *conc)
		before := hook.snapshot()
		p := l.phase(ctx, c.label, *n, *conc, 0, func(i int) request {
			return request{http.MethodPost, target, bodies[i], []int{http.StatusCreated}}
		}, nil)
		res.PopulateHooks[c.label] = hook.snapshot().minus(before)
		res.Phases = append(res.Phases, p)
		if c.label == "populate-webhook" {
			if code, b, err := l.do(ctx, http.MethodGet, target+"/"+name(0), nil); err == nil && code == http.StatusOK {
				res.SampleBody = truncate(b, 2000)
			}
		}
		if p.Errors > 0 {
			return finish(fmt.Errorf("%s: %d of %d creates failed", c.label, p.Errors, p.Requests))
		}
	}

	// The lists, interleaved round by round so that noise hits all alike.
	res.Lists = []convList{
		{Name: "webhook-v1", CRD: webhookCRDName, Conversion: "Webhook", Version: "v1", Path: coll(crontab.Group, "v1")},
		{Name: "none-v1", CRD: noneCRDName, Conversion: "None", Version: "v1", Path: coll(noneGroup, "v1")},
		{Name: "webhook-v1beta1", CRD: webhookCRDName, Conversion: "Webhook", Version: "v1beta1", Path: coll(crontab.Group, "v1beta1")},
		{Name: "none-v1beta1", CRD: noneCRDName, Conversion: "None", Version: "v1beta1", Path: coll(noneGroup, "v1beta1")},
	}
	one := func(cl *convList) (convSample, bool) {
		before := hook.snapshot()
		t0 := time.Now()
		code, b, err := l.do(ctx, http.MethodGet, cl.Path, nil)
		d := time.Since(t0)
		s := convSample{listSample: listSample{Ms: ms(d), Bytes: len(b), Status: code}}
		s.Webhook = hook.snapshot().minus(before)
		if err != nil || code != http.StatusOK {
			f := l.fail("list "+cl.Name, http.MethodGet, cl.Path, code, b, err)
			f.Body += fmt.Sprintf(" [webhook during this GET: %d calls, %d objects, %d non-200]", s.Webhook.Calls, s.Webhook.Objects, s.Webhook.Non200)
			res.Failures = append(res.Failures, *f)
			return s, false
		}
		group := crontab.Group
		if cl.Conversion == "None" {
			group = noneGroup
		}
		kept, problem := checkCronTabs(b, *n, prefix, group+"/"+cl.Version, cl.Name == "webhook-v1")
		var items struct{ Items []json.RawMessage }
		_ = json.Unmarshal(b, &items)
		s.Items = len(items.Items)
		if cl.Version == "v1" {
			cl.HostPortKept = &kept
		}
		if problem != "" {
			s.Invalid = problem
			res.Failures = append(res.Failures, failure{Phase: "list " + cl.Name, Method: http.MethodGet, Path: strings.TrimPrefix(cl.Path, base), Status: code,
				Error: "wrong answer: " + problem})
			return s, false
		}
		return s, true
	}
	before := hook.snapshot()
	res.BeforeLists = &before
	if *warmup {
		for i := range res.Lists {
			s, ok := one(&res.Lists[i])
			res.Lists[i].Warmup = &s
			if !ok {
				return finish(fmt.Errorf("warm-up GET of %s failed", res.Lists[i].Name))
			}
		}
	}
	log.Printf("%d rounds of lists (%d collections)", *lists, len(res.Lists))
	failed := map[string]bool{}
	for r := 0; r < *lists; r++ {
		for i := range res.Lists {
			cl := &res.Lists[i]
			if failed[cl.Name] {
				continue
			}
			s, ok := one(cl)
			cl.Samples = append(cl.Samples, s)
			if !ok {
				failed[cl.Name] = true
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
			ds = append(ds, s.Ms)
			hs = append(hs, s.Webhook.BusyMs)
			rs = append(rs, s.Webhook.ReadMs)
			cs = append(cs, s.Webhook.CountMs)
			cl.CallsPerList = max(cl.CallsPerList, s.Webhook.Calls)
			cl.ObjectsPerList = max(cl.ObjectsPerList, s.Webhook.Objects)
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
// self-signed certificate for 127.0.0.1 and ::1 (client-go's certificate
// helper). It returns the server's https:// URL, the PEM that trusts it (a
// caBundle) and the server, to Close when done.
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
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		ErrorLog:  log.New(io.Discard, "", 0)}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	return "https://" + ln.Addr().String(), certPEM, srv, nil
}

// convSide is the conversion benchmark of one server (convert-NAME.json).
type convSide sideOf[convertResult]

// listVal is a figure of one measured collection, or why there is none.
func (s convSide) listVal(name string, f func(*convList) float64, prec int, unit string) val {
	if s.res == nil {
		return none(s.why)
	}
	cl := s.res.list(name)
	if cl == nil {
		return none("not reached")
	}
	for _, f := range s.res.Failures {
		if f.Phase == "list "+name {
			return none("**failed** (see Failures)")
		}
	}
	if len(cl.Samples) == 0 {
		return none("not reached")
	}
	return num(f(cl), prec, unit)
}

// ratioVal is webhook-v1 ÷ none-v1 (medians).
func (s convSide) ratioVal() val {
	w := s.listVal("webhook-v1", func(c *convList) float64 { return c.MedianMs }, 1, "")
	n := s.listVal("none-v1", func(c *convList) float64 { return c.MedianMs }, 1, "")
	if !w.ok {
		return w
	}
	if !n.ok || n.v == 0 {
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
	add := func(metric string, cell func(convSide) val) { fs = append(fs, fig[convSide]{metric, cell, nil}) }
	// addR is a row of a time, size or rate, with the ratio of the two.
	addR := func(metric string, cell func(convSide) val) { fs = append(fs, fig[convSide]{metric, cell, ratio}) }
	field := func(name string, f func(*convList) float64, prec int, unit string) func(convSide) val {
		return func(s convSide) val { return s.listVal(name, f, prec, unit) }
	}
	medianOf := func(name string) func(convSide) val {
		return field(name, func(c *convList) float64 { return c.MedianMs }, 1, " ms")
	}
	minOf := func(name string) func(convSide) val {
		return field(name, func(c *convList) float64 { return c.MinMs }, 1, " ms")
	}
	addR(fmt.Sprintf("list of %s, stored v1beta1, read as **v1 through the webhook**: median", commas(n)), medianOf("webhook-v1"))
	for _, x := range []struct {
		metric string
		f      func(*convList) float64
		prec   int
		unit   string
	}{
		{"… min", func(c *convList) float64 { return c.MinMs }, 1, " ms"},
		{"… max", func(c *convList) float64 { return c.MaxMs }, 1, " ms"},
		{"… **webhook calls** per GET (most seen in one GET)", func(c *convList) float64 { return float64(c.CallsPerList) }, 0, ""},
		{"… objects sent to the webhook per GET", func(c *convList) float64 { return float64(c.ObjectsPerList) }, 0, ""},
		{"… time inside the example webhook's handler per GET, median (its decode, conversion and encode; in crdbench)", func(c *convList) float64 { return c.WebhookMsMed }, 1, " ms"},
		{"… reading the ConversionReview bodies in the webhook per GET, median", func(c *convList) float64 { return c.WebhookReadMed }, 1, " ms"},
		{"… the counter's own time per GET, median (in the list time, not the handler's)", func(c *convList) float64 { return c.CounterMsMed }, 2, " ms"},
		{"… the rest of each GET (list time − handler − body read − counter), median: the server's own work, TLS, transfer", func(c *convList) float64 {
			var rest []float64
			for _, s := range c.Samples {
				rest = append(rest, s.Ms-s.Webhook.BusyMs-s.Webhook.ReadMs-s.Webhook.CountMs)
			}
			return median(rest)
		}, 1, " ms"},
		{"… items returned, all checked (v1, `host`/`port` converted from each object's `hostPort`)", func(c *convList) float64 { return float64(c.Items) }, 0, ""},
		{"… response size", func(c *convList) float64 { return float64(c.Bytes) / 1e6 }, 2, " MB"},
	} {
		if x.unit == "" {
			add(x.metric, field("webhook-v1", x.f, x.prec, x.unit))
		} else {
			addR(x.metric, field("webhook-v1", x.f, x.prec, x.unit))
		}
	}
	add("first GET through the webhook (warm-up, not in the median: opens the webhook connection)", func(s convSide) val {
		return s.with(func(r *convertResult) val {
			if cl := r.list("webhook-v1"); cl != nil && cl.Warmup != nil && cl.Warmup.Status == 200 {
				return val{v: cl.Warmup.Ms, ok: true, prec: 1, unit: fmt.Sprintf(" ms, %d calls", cl.Warmup.Webhook.Calls)}
			}
			return none("not measured")
		})
	})
	addR(fmt.Sprintf("same list, **None conversion** (`%s`, read as v1): median", noneCRDName), medianOf("none-v1"))
	addR("… min", minOf("none-v1"))
	add("**webhook ÷ None** (medians)", convSide.ratioVal)
	addR("same list in the storage version v1beta1, no conversion (Webhook CRD): median", medianOf("webhook-v1beta1"))
	addR("same list in v1beta1 (None CRD): median", medianOf("none-v1beta1"))
	add("webhook calls while creating the objects in v1beta1 (Webhook CRD's creates)", func(s convSide) val {
		return s.with(func(r *convertResult) val {
			if h, ok := r.PopulateHooks["populate-webhook"]; ok {
				return hookCalls(&h, "")
			}
			return none("not reached")
		})
	})
	add("webhook calls from the CRDs' creation to the first GET (both CRDs' creates and any conversion trailing them)", func(s convSide) val {
		return s.with(func(r *convertResult) val { return hookCalls(r.BeforeLists, "not reached") })
	})
	add("webhook calls while deleting the two CRDs afterwards (`-cleanup`, reference only)", func(s convSide) val {
		return s.with(func(r *convertResult) val { return hookCalls(r.CleanupHooks, "not run (no -cleanup)") })
	})
	add("largest ConversionReview of the run (objects)", func(s convSide) val {
		return s.with(func(r *convertResult) val { return num(float64(r.MaxObjsPerCall), 0, "") })
	})
	add("(setup) create body, v1beta1 CronTab", func(s convSide) val {
		return s.with(func(r *convertResult) val { return num(float64(r.BodyBytes), 0, " B") })
	})
	addR("(setup) creates with the Webhook CRD: req/s", func(s convSide) val { return convPhase(s, "populate-webhook") })
	addR("(setup) creates with the None CRD: req/s", func(s convSide) val { return convPhase(s, "populate-none") })
	addR("(not a target) RSS right after the lists, both CRDs' objects stored (reference: apiserver + etcd)", func(s convSide) val {
		return s.with(func(r *convertResult) val {
			if len(r.RSSAfter) == 0 {
				return none("not measured")
			}
			return num(r.RSSAfterMiB, 1, " MiB")
		})
	})
	add("(fidelity, not a target) a None-converted v1 answer still carries the v1beta1-only field `hostPort`", func(s convSide) val {
		return s.with(func(r *convertResult) val {
			if cl := r.list("none-v1"); cl != nil && cl.HostPortKept != nil {
				return label(map[bool]string{true: "yes (kept)", false: "no (pruned)"}[*cl.HostPortKept])
			}
			return label("not measured")
		})
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
	calls := c.listVal("webhook-v1", func(c *convList) float64 { return float64(c.CallsPerList) }, 0, " calls")
	met := func(v val, ok func(float64) bool) string {
		if !v.ok {
			return "not measured"
		}
		return yesNo(ok(v.v))
	}
	targets = append(targets, []string{fmt.Sprintf("webhook conversion: at most 10 webhook calls for a list of %s objects", commas(n)),
		calls.String(), met(calls, func(x float64) bool { return x <= 10 })})
	rv := c.ratioVal()
	m := rv.String()
	if rv.ok {
		med := func(name string) val {
			return c.listVal(name, func(c *convList) float64 { return c.MedianMs }, 1, " ms")
		}
		m = fmt.Sprintf("%s vs %s (%s)", med("webhook-v1"), med("none-v1"), rv)
	}
	targets = append(targets, []string{fmt.Sprintf("webhook conversion within 2× the None-conversion time (list of %s, medians)", commas(n)),
		m, met(rv, func(x float64) bool { return x <= 2 })})

	for i, s := range []convSide{c, r} {
		if s.res != nil {
			fails = append(fails, workloadFailures([]string{"crdserver", "reference"}[i], "webhook conversion", s.res.Error, s.res.Failures)...)
		}
	}
	return targets, fails
}

func convPhase(s convSide, name string) val {
	return s.with(func(r *convertResult) val {
		p := find(r.Phases, func(x *phase) bool { return x.Name == name })
		switch {
		case p == nil:
			return none("not reached")
		case p.Errors > 0:
			return none(fmt.Sprintf("**failed** (%d/%d errors)", p.Errors, p.Requests))
		}
		return num(p.PerSecond, 1, "")
	})
}
