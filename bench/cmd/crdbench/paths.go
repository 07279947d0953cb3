package main

// crdbench paths: the request paths the other workloads do not measure,
// against one server, in rounds, each on CRDs of its own (groups under
// paths.crdbench.example.com, labelled crdbench-paths-run=<run id>) that it
// deletes again. The rows, numbered as in the report: 1 sequential GETs;
// 2 creates by -concurrency workers on one HTTP/2 connection; 3 full lists
// with gzip; 4 walks by pages; 5 watch fan-out (watch.go); 6 the first list
// through the conversion webhook after a CRD edit and after a flip None →
// Webhook; 7 the DELETE of the CRD of -n objects; 8 the first create after
// Established; 9 RSS with the -n objects stored.

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/crdserver/crdserver/examples/crontab-conversion/crontab"
)

const (
	pathsLabel  = "crdbench-paths-run"
	pathsDomain = "paths.crdbench.example.com"
	pathsPlural = "pathitems"
)

// gzipList is one GET of the whole collection with Accept-Encoding: gzip.
type gzipList struct {
	Ms        float64 `json:"ms"`
	Status    int     `json:"status"`
	Items     int     `json:"items"`
	Bytes     int     `json:"bytes"`      // decompressed
	WireBytes int     `json:"wire_bytes"` // as sent
	Encoding  string  `json:"content_encoding,omitempty"`
}

// pageWalk is one walk of the collection by pages (limit + continue).
type pageWalk struct {
	Ms        float64 `json:"ms"`          // first request sent → last page decoded
	RequestMs float64 `json:"requests_ms"` // the pages' requests alone
	Pages     int     `json:"pages"`
	Items     int     `json:"items"`
	Bytes     int     `json:"bytes"`
	WireBytes int     `json:"wire_bytes"`
	MaxPageMs float64 `json:"slowest_page_ms"`
	Encoding  string  `json:"content_encoding,omitempty"` // of the first page
}

// convListRun is one list of the CronTabs as v1: the first GET, then, after
// a 429, GETs after its Retry-After until a 200, and the webhook's calls.
type convListRun struct {
	Ms        float64      `json:"ms"`     // the first GET
	Status    int          `json:"status"` // of the first GET
	Message   string       `json:"message,omitempty"`
	UntilOKMs float64      `json:"until_200_ms"`
	Attempts  int          `json:"attempts"`
	Items     int          `json:"items"`
	Bytes     int          `json:"bytes"`
	Webhook   webhookCount `json:"webhook"`
}

// convChange is a change of the CronTab CRD and the first list after it.
type convChange struct {
	PutMs      float64      `json:"put_ms"`
	ObservedMs float64      `json:"observed_ms"` // PUT sent → the CRD shows it, Established
	Polls      int          `json:"polls"`
	ServedMs   float64      `json:"served_ms"` // PUT sent → one object's GET shows it
	ServePolls int          `json:"serve_polls"`
	ServeHooks webhookCount `json:"webhook_while_polling"`
	List       *convListRun `json:"first_list,omitempty"`
}

// convPaths is row 6 of one round.
type convPaths struct {
	CRD      string       `json:"crd"`
	Populate *phase       `json:"populate,omitempty"`
	First    *convListRun `json:"first_list,omitempty"`
	Warm     *convListRun `json:"warm_list,omitempty"`
	Edit     *convChange  `json:"edit,omitempty"`    // a printer column added
	ToNone   *convChange  `json:"to_none,omitempty"` // Webhook → None
	Flip     *convChange  `json:"flip,omitempty"`    // None → Webhook
}

// crdDeletion is row 7 of one round.
type crdDeletion struct {
	Objects          int            `json:"objects"`
	DeleteStatus     int            `json:"delete_status"`
	DeleteMs         float64        `json:"delete_request_ms"`
	GoneMs           float64        `json:"crd_gone_ms"`
	CollectionGoneMs float64        `json:"collection_gone_ms"`
	Polls            int            `json:"polls"`
	CollStatuses     map[string]int `json:"collection_statuses"`
}

// firstCreate is one sample of row 8.
type firstCreate struct {
	CRD           string         `json:"crd"`
	EstablishedMs float64        `json:"crd_post_to_established_ms"`
	Ms            float64        `json:"established_to_201_ms"`
	Attempts      int            `json:"attempts"`
	Statuses      map[string]int `json:"statuses_before_201,omitempty"`
}

// pathsRound is everything of one round.
type pathsRound struct {
	Round          int               `json:"round"`
	CRD            string            `json:"crd"`
	EstablishedSec float64           `json:"established_seconds"`
	Creates        *phase            `json:"creates,omitempty"`
	Populate       *phase            `json:"populate,omitempty"`
	RSSBefore      []procMem         `json:"rss_before,omitempty"`
	RSSBeforeMiB   float64           `json:"rss_before_mib,omitempty"`
	RSS            []procMem         `json:"rss,omitempty"`
	RSSMiB         float64           `json:"rss_mib,omitempty"`
	Gets           *phase            `json:"gets,omitempty"`
	Lists          []gzipList        `json:"gzip_lists,omitempty"`
	ListMedianMs   float64           `json:"gzip_list_median_ms,omitempty"`
	Walks          []pageWalk        `json:"page_walks,omitempty"`
	WalkMedianMs   float64           `json:"page_walk_median_ms,omitempty"`
	Watches        []watchRun        `json:"watches,omitempty"`
	Delete         *crdDeletion      `json:"delete,omitempty"`
	FirstCreates   []firstCreate     `json:"first_creates,omitempty"`
	FirstCreateMs  float64           `json:"first_create_median_ms,omitempty"`
	Conv           *convPaths        `json:"conversion,omitempty"`
	Failed         map[string]string `json:"failed,omitempty"` // row → its first failure in this round
	Load1          float64           `json:"load1_after"`
	WallSec        float64           `json:"wall_seconds"`
}

// pathsOpts are the settings of a run, from its flags; the durations are
// in the result as the fields below.
type pathsOpts struct {
	N               int   `json:"objects"`
	Rounds          int   `json:"rounds"`
	Creates         int   `json:"creates"`
	Concurrency     int   `json:"concurrency"`
	Gets            int   `json:"gets"`
	Lists           int   `json:"lists_per_round"`
	Walks           int   `json:"walks_per_round"`
	PageLimit       int   `json:"page_limit"`
	Watchers        []int `json:"watchers"`
	WatchersPerConn int   `json:"watchers_per_connection"`
	WatchUpdates    int   `json:"watch_updates"`
	FreshCRDs       int   `json:"fresh_crds_per_round"`
	Conversion      bool  `json:"conversion"`

	interval, watchWait, settle, rssSettle, waitFor, deleteWait, phaseLimit time.Duration
}

type pathsResult struct {
	Server     string `json:"server"`
	Name       string `json:"name"`
	Protocol   string `json:"protocol"`
	ClientCert bool   `json:"client_cert"`
	Date       string `json:"date"`
	RunID      string `json:"run_id"`
	Namespace  string `json:"namespace"`
	pathsOpts
	WatchIntervalMs float64      `json:"watch_interval_ms"`
	WatchWaitSec    float64      `json:"watch_wait_seconds"`
	BodyBytes       int          `json:"create_body_bytes"`
	ConvBodyBytes   int          `json:"conversion_body_bytes"`
	SettleSec       float64      `json:"settle_seconds"`
	RSSSettleSec    float64      `json:"rss_settle_seconds"`
	RSSProcs        []string     `json:"rss_processes,omitempty"`
	WebhookURL      string       `json:"webhook_url,omitempty"`
	LoadStart       string       `json:"loadavg_start"`
	LoadEnd         string       `json:"loadavg_end"`
	RoundsData      []pathsRound `json:"rounds_data"`
	Cleanup         []string     `json:"cleanup,omitempty"`
	Failures        []failure    `json:"failures,omitempty"`
	Error           string       `json:"error,omitempty"`
}

// pathsCRD is the CRD of rows 1–5, 7, 8 and 9: PathItems in group, v1,
// namespaced, with a structural schema of the bodies' spec.
func pathsCRD(group, runID string) []byte {
	str, integer := map[string]any{"type": "string"}, map[string]any{"type": "integer"}
	spec := map[string]any{"type": "object", "properties": map[string]any{
		"size": integer, "color": str, "seq": integer, "data": str, "tags": map[string]any{"type": "array", "items": str}}}
	b, _ := json.Marshal(map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": pathsPlural + "." + group, "labels": map[string]string{pathsLabel: runID}},
		"spec": map[string]any{"group": group, "scope": "Namespaced",
			"names": map[string]any{"plural": pathsPlural, "singular": "pathitem", "kind": "PathItem", "listKind": "PathItemList"},
			"versions": []any{map[string]any{"name": "v1", "served": true, "storage": true, "schema": map[string]any{
				"openAPIV3Schema": map[string]any{"type": "object", "properties": map[string]any{"spec": spec}}}}}},
	})
	return b
}

// pathsBody is PathItem i, padded with spec.data (pseudo-random hex
// digits seeded by i) to exactly size bytes when it can be.
func pathsBody(group, name string, i, size int) []byte {
	spec := map[string]any{"size": i % 100, "color": []string{"red", "green", "blue"}[i%3], "tags": []string{"x", "y"}, "seq": 0, "data": ""}
	obj := map[string]any{"apiVersion": group + "/v1", "kind": "PathItem",
		"metadata": map[string]any{"name": name, "labels": map[string]string{"bench": "crdbench"}}, "spec": spec}
	b, _ := json.Marshal(obj)
	if pad := size - len(b); pad > 0 {
		spec["data"] = hexPad(i, pad)
		b, _ = json.Marshal(obj)
	}
	return b
}

// hexPad is n pseudo-random hex digits, the same for the same i.
func hexPad(i, n int) string {
	r := rand.New(rand.NewPCG(uint64(i), 0x9e3779b97f4a7c15))
	d := make([]byte, n)
	for j := range d {
		d[j] = "0123456789abcdef"[r.IntN(16)]
	}
	return string(d)
}

// jsonPath is the value at a path of keys in decoded JSON, or nil.
func jsonPath(v any, keys ...string) any {
	for _, k := range keys {
		m, _ := v.(map[string]any)
		v = m[k]
	}
	return v
}

// withLabel adds the run's label to a CRD body.
func withLabel(crd []byte, runID string) []byte {
	var m map[string]any
	_ = json.Unmarshal(crd, &m)
	md, _ := jsonPath(m, "metadata").(map[string]any)
	if md == nil {
		return crd
	}
	md["labels"] = map[string]string{pathsLabel: runID}
	b, _ := json.Marshal(m)
	return b
}

func crdGeneration(crd map[string]any) int64 {
	g, _ := jsonPath(crd, "metadata", "generation").(float64)
	return int64(g)
}

func crdConversion(crd map[string]any) string {
	s, _ := jsonPath(crd, "spec", "conversion", "strategy").(string)
	return s
}

// crdVersion is version v of a CRD (decoded JSON), or nil.
func crdVersion(crd map[string]any, v string) map[string]any {
	versions, _ := jsonPath(crd, "spec", "versions").([]any)
	for _, x := range versions {
		if vm, _ := x.(map[string]any); vm["name"] == v {
			return vm
		}
	}
	return nil
}

// crdHasColumn reports whether version v of a CRD has a printer column.
func crdHasColumn(crd map[string]any, v, column string) bool {
	cols, _ := crdVersion(crd, v)["additionalPrinterColumns"].([]any)
	return slices.ContainsFunc(cols, func(c any) bool { return jsonPath(c, "name") == column })
}

// addColumn adds a printer column to version v of a CRD (decoded JSON).
func addColumn(crd map[string]any, v string, column map[string]any) bool {
	vm := crdVersion(crd, v)
	if vm != nil {
		cols, _ := vm["additionalPrinterColumns"].([]any)
		vm["additionalPrinterColumns"] = append(cols, column)
	}
	return vm != nil
}

// checkNames adds a list's item names to seen: each once, at most n.
func checkNames(names []string, n int, seen map[string]bool) string {
	for _, nm := range names {
		if seen[nm] {
			return "item " + nm + " twice"
		}
		seen[nm] = true
	}
	if len(seen) > n {
		return fmt.Sprintf("%d distinct items, want %d", len(seen), n)
	}
	return ""
}

// pathsRun is one crdbench paths run against one server.
type pathsRun struct {
	*pathsResult
	ctx     context.Context
	c       *client
	base    string
	hook    *webhookCounter
	hookURL string
	caPEM   []byte
	rss     namedPIDs
	created map[string]bool // CRDs of this run not yet deleted
	failed  map[string]bool // rows whose first failure is in Failures
}

// do sends one request bounded by the run's context and limit.
func (p *pathsRun) do(method, url string, body []byte, limit time.Duration) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(p.ctx, limit)
	defer cancel()
	return p.c.do(ctx, method, url, body)
}

// fail records a row's failure in round rd (the round then has no figure
// of that row) and, the first time for the row, in Failures.
func (p *pathsRun) fail(rd *pathsRound, row string, f failure) {
	if p.ctx.Err() != nil {
		return // interrupted: that is the run's error, not the row's
	}
	msg := cmp.Or(f.Error, fmt.Sprintf("%s %s → HTTP %d", f.Method, f.Path, f.Status))
	if rd.Failed == nil {
		rd.Failed = map[string]string{}
	}
	if _, ok := rd.Failed[row]; !ok {
		rd.Failed[row] = msg
	}
	if !p.failed[row] {
		p.failed[row] = true
		f.Phase = fmt.Sprintf("round %d: %s", rd.Round, row)
		p.Failures = append(p.Failures, f)
	}
	log.Printf("round %d: %s FAILED: %s", rd.Round, row, msg)
}

func (p *pathsRun) httpFail(method, url string, code int, b []byte, err error) *failure {
	return p.c.fail("", method, url, code, b, err)
}

// failf is a failure of a request to url with a message.
func (p *pathsRun) failf(method, url string, code int, format string, a ...any) *failure {
	return &failure{Method: method, Path: strings.TrimPrefix(url, p.base), Status: code, Error: fmt.Sprintf(format, a...)}
}

// newCRD POSTs a CRD (one that exists already could be someone else's: it
// is left alone), adds it to crds, and polls it every poll until
// Established; it returns the time from the POST sent and from its answer.
func (p *pathsRun) newCRD(name string, body []byte, poll time.Duration, crds *[]string) (sincePost, sinceAnswer time.Duration, f *failure) {
	t0 := time.Now()
	if f, err := p.c.create(p.ctx, "", "CRD "+name, p.base+crdPath, body); err != nil {
		f.Phase, f.Error = "", strings.TrimSpace(err.Error()+" "+f.Error)
		return 0, 0, f
	}
	t1 := time.Now()
	p.created[name] = true
	*crds = append(*crds, name)
	d, _, err := p.c.waitCRD(p.ctx, name, t0, p.waitFor, poll, crdEstablished)
	if err != nil {
		return 0, 0, p.failf(http.MethodGet, p.base+crdPath+"/"+name, 0, "%v", err)
	}
	return d, d - t1.Sub(t0), nil
}

// deleteCRDs deletes CRDs of this run and waits until each is gone, within
// limit; it says what happened.
func (p *pathsRun) deleteCRDs(names []string, limit time.Duration) string {
	var notes []string
	for _, name := range names {
		s := p.c.deleteAndWait("CRD "+name, p.base+crdPath+"/"+name, limit)
		if strings.Contains(s, "gone after") {
			delete(p.created, name)
		}
		notes = append(notes, s)
	}
	return strings.Join(notes, "; ")
}

func parseWatchers(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		v, err := strconv.Atoi(f)
		if err != nil || v < 1 || v > 5000 {
			return nil, fmt.Errorf("-watchers: %q is not a count from 1 to 5000", f)
		}
		out = append(out, v)
	}
	return out, nil
}

func runPaths(args []string) error {
	fs := flag.NewFlagSet("paths", flag.ExitOnError)
	var t tlsFlags
	t.register(fs)
	var o pathsOpts
	bodyBytes := 0
	checkInts := rangedFlags(fs.IntVar,
		ranged[int]{&o.N, "n", 10000, 1, 100000, "objects stored per round (lists, walks, memory, the CRD deleted, the conversion CRD)"},
		ranged[int]{&o.Rounds, "rounds", 3, 1, 20, "rounds; the report gives the median over them"},
		ranged[int]{&o.Creates, "creates", 5000, 1, 100000, "of the n creates, how many are measured (the first ones)"},
		ranged[int]{&o.Concurrency, "concurrency", 16, 1, 64, "workers of the creates (one HTTP/2 connection)"},
		ranged[int]{&o.Gets, "gets", 1000, 1, 100000, "sequential GETs of single objects per round"},
		ranged[int]{&o.Lists, "lists", 3, 1, 50, "full lists (gzip) per round; the round's figure is their median"},
		ranged[int]{&o.Walks, "walks", 3, 1, 50, "paged walks per round; the round's figure is their median"},
		ranged[int]{&o.PageLimit, "page-limit", 500, 1, 10000, "limit of each page of the walks"},
		ranged[int]{&o.WatchersPerConn, "watchers-per-conn", 100, 1, 1000, "watches per HTTP/2 connection"},
		ranged[int]{&o.WatchUpdates, "watch-updates", 100, 1, 10000, "merge patches made while the watches run"},
		ranged[int]{&o.FreshCRDs, "fresh-crds", 3, 0, 50, "first create after Established: fresh CRDs per round"},
		ranged[int]{&bodyBytes, "body-bytes", 1024, 0, 1 << 20, "size of each create body (padded with spec.data)"})
	checkDurations := rangedFlags(fs.DurationVar,
		ranged[time.Duration]{&o.interval, "watch-interval", 50 * time.Millisecond, 0, 10 * time.Second, "one patch sent this often (sequential)"},
		ranged[time.Duration]{&o.watchWait, "watch-wait", 30 * time.Second, time.Second, 10 * time.Minute, "after the last patch, how long to wait for the last deliveries"},
		ranged[time.Duration]{&o.settle, "settle", 0, 0, time.Minute, "pause after a CRD is Established before its objects are created (the reference needs 2s)"},
		ranged[time.Duration]{&o.rssSettle, "rss-settle", 3 * time.Second, 0, time.Minute, "pause between the creates and reading the RSS"},
		ranged[time.Duration]{&o.waitFor, "wait", 60 * time.Second, time.Second, 10 * time.Minute, "how long to wait for a CRD to be Established or to show a change"},
		ranged[time.Duration]{&o.deleteWait, "delete-wait", 5 * time.Minute, time.Second, 30 * time.Minute, "how long to wait for a deleted CRD (and its collection) to be gone"},
		ranged[time.Duration]{&o.phaseLimit, "phase-timeout", 5 * time.Minute, time.Second, time.Hour, "time limit of each phase of requests"})
	fs.BoolVar(&o.Conversion, "conversion", true, "measure the first list through the conversion webhook after a CRD edit and after a flip None → Webhook")
	var (
		server    = fs.String("server", "", "API server base URL, https:// or http:// (loopback only)")
		name      = fs.String("name", "server", "name of the server in the results")
		namespace = fs.String("namespace", "default", "namespace of the objects (it must exist; each round has CRDs of its own)")
		runID     = fs.String("run-id", "", "tag of this run in the CRDs' groups and in their label "+pathsLabel+" (default: from the time and PID)")
		watchers  = fs.String("watchers", "200,1000", "watch fan-out: numbers of watchers, comma-separated")
		jsonOut   = fs.String("json", "", "write the results as JSON to this file")
		rssPIDs   namedPIDs
	)
	fs.Var(&rssPIDs, "rss-pid", "name=PID of a server process whose VmRSS is read (repeatable; the reference: apiserver and etcd)")
	_ = fs.Parse(args)
	var err error
	if o.Watchers, err = parseWatchers(*watchers); err != nil {
		return err
	}
	if err := cmp.Or(checkInts(), checkDurations()); err != nil {
		return err
	}
	if *namespace == "" {
		return errors.New("need -namespace")
	}
	if *runID == "" {
		*runID = strconv.FormatInt(time.Now().Unix(), 36) + strconv.Itoa(os.Getpid()%1000)
	}
	if len(*runID) > 20 || strings.Trim(*runID, "abcdefghijklmnopqrstuvwxyz0123456789") != "" {
		return errors.New("-run-id: at most 20 lower-case letters and digits")
	}
	o.Creates = min(o.Creates, o.N)
	c, err := connect(*server, t, o.Concurrency)
	if err != nil {
		return err
	}
	// Interrupted, crdbench still deletes the CRDs it created.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	res := &pathsResult{Server: c.base, Name: *name, ClientCert: t.cert != "", Date: time.Now().UTC().Format(time.RFC3339), RunID: *runID,
		Namespace: *namespace, pathsOpts: o, WatchIntervalMs: ms(o.interval), WatchWaitSec: o.watchWait.Seconds(),
		SettleSec: o.settle.Seconds(), RSSSettleSec: o.rssSettle.Seconds(), LoadStart: loadavg(),
		BodyBytes:     len(pathsBody(fmt.Sprintf("r1-%s.%s", *runID, pathsDomain), "item-00000", 0, bodyBytes)),
		ConvBodyBytes: len(crontabBody(crontab.Group, "crontab-00000", 0))}
	for _, p := range rssPIDs {
		res.RSSProcs = append(res.RSSProcs, p.name)
	}
	p := &pathsRun{pathsResult: res, ctx: ctx, c: c, base: c.base, rss: rssPIDs, created: map[string]bool{}, failed: map[string]bool{}}
	if o.Conversion {
		hook, hookURL, caPEM, hsrv, err := serveCronTabWebhook()
		if err != nil {
			return err
		}
		defer hsrv.Close()
		p.hook, p.hookURL, p.caPEM, res.WebhookURL = hook, hookURL, caPEM, hookURL
	}
	for r := 1; r <= o.Rounds && ctx.Err() == nil && err == nil; r++ {
		rd := pathsRound{Round: r}
		t0 := time.Now()
		err = p.round(&rd, bodyBytes)
		rd.WallSec, rd.Load1 = time.Since(t0).Seconds(), load1()
		res.RoundsData = append(res.RoundsData, rd)
		log.Printf("round %d done in %.1f s (load %.2f)", r, rd.WallSec, rd.Load1)
	}
	if len(p.created) > 0 {
		s := p.deleteCRDs(slices.Sorted(maps.Keys(p.created)), o.deleteWait)
		res.Cleanup = append(res.Cleanup, "at the end: "+s)
		if len(p.created) > 0 {
			res.Failures = append(res.Failures, failure{Phase: "cleanup", Error: "CRDs left behind: " + s})
		}
	}
	res.Protocol, res.LoadEnd = c.protocol(), loadavg()
	if ctx.Err() != nil {
		err = errors.New("interrupted")
	}
	return done(*jsonOut, res, &res.Error, res.Failures, err)
}

// round runs every row once, on CRDs of its own, and deletes them. An error
// stops the run (the main CRD could not be set up); a row's failure is
// recorded in rd.Failed and the round goes on.
func (p *pathsRun) round(rd *pathsRound, bodyBytes int) error {
	group := fmt.Sprintf("r%d-%s.%s", rd.Round, p.RunID, pathsDomain)
	rd.CRD = pathsPlural + "." + group
	coll := p.base + "/apis/" + group + "/v1/namespaces/" + p.Namespace + "/" + pathsPlural
	itemName := func(i int) string { return "item-" + strconv.Itoa(100000 + i)[1:] }
	var crds []string // deleted at the end of the round
	defer func() {
		if left := slices.DeleteFunc(crds, func(nm string) bool { return !p.created[nm] }); len(left) > 0 {
			p.Cleanup = append(p.Cleanup, fmt.Sprintf("round %d: %s", rd.Round, p.deleteCRDs(left, p.deleteWait)))
		}
	}()
	log.Printf("round %d: CRD %s", rd.Round, rd.CRD)
	_, est, f := p.newCRD(rd.CRD, pathsCRD(group, p.RunID), 20*time.Millisecond, &crds)
	if f != nil {
		p.fail(rd, "setup", *f)
		return errors.New(f.Error)
	}
	rd.EstablishedSec = est.Seconds()
	time.Sleep(p.settle)

	// Rows 2 and 9: the creates, the first p.Creates measured; RSS before and after.
	rd.RSSBefore, rd.RSSBeforeMiB = readRSS(p.rss)
	bodies := make([][]byte, p.N)
	for i := range bodies {
		bodies[i] = pathsBody(group, itemName(i), i, bodyBytes)
	}
	stored := true
	for _, x := range []struct {
		row      string
		dst      **phase
		from, to int
	}{{"creates", &rd.Creates, 0, p.Creates}, {"populate", &rd.Populate, p.Creates, p.N}} {
		if x.to == x.from || x.row == "populate" && rd.Creates.Aborted {
			continue
		}
		ph := p.c.phase(p.ctx, x.row, x.to-x.from, p.Concurrency, p.phaseLimit, func(i int) request {
			return request{http.MethodPost, coll, bodies[x.from+i], []int{http.StatusCreated}}
		}, nil)
		*x.dst = &ph
		if ph.FirstError != nil {
			p.fail(rd, x.row, *ph.FirstError)
		}
		stored = stored && ph.Errors == 0 && !ph.Aborted
	}
	if p.ctx.Err() != nil {
		return p.ctx.Err()
	}
	if !stored {
		p.fail(rd, "rss", failure{Error: "not all objects could be created"})
		return p.conversionAndRest(rd, &crds)
	}
	time.Sleep(p.rssSettle)
	rd.RSS, rd.RSSMiB = readRSS(p.rss)

	steps := []func(){
		func() { // Row 1: sequential GETs of single objects, spread over the n, each the object asked for.
			stride := max(1, p.N/p.Gets)
			var wrong atomic.Int64
			var firstWrong atomic.Value
			g := p.c.phase(p.ctx, "gets", p.Gets, 1, p.phaseLimit, func(i int) request {
				return request{http.MethodGet, coll + "/" + itemName((i*stride)%p.N), nil, []int{http.StatusOK}}
			}, func(i int, ok bool, b []byte) {
				var o struct {
					Kind     string
					Metadata struct{ Name string }
				}
				if err := json.Unmarshal(b, &o); ok && (err != nil || o.Kind != "PathItem" || o.Metadata.Name != itemName((i*stride)%p.N)) {
					wrong.Add(1)
					firstWrong.CompareAndSwap(nil, fmt.Sprintf("GET of %s answered %s %q (%v)", itemName((i*stride)%p.N), o.Kind, o.Metadata.Name, err))
				}
			})
			rd.Gets = &g
			if g.FirstError != nil {
				p.fail(rd, "gets", *g.FirstError)
			} else if n := wrong.Load(); n > 0 {
				p.fail(rd, "gets", *p.failf(http.MethodGet, coll+"/…", 200, "wrong answer in %d of %d GETs; first: %v", n, g.Requests, firstWrong.Load()))
			}
		},
		func() { // Row 3: full lists with gzip.
			rd.ListMedianMs = p.repeat(rd, "list", p.Lists, func() (float64, *failure) {
				w, f := p.walk(coll, 0)
				rd.Lists = append(rd.Lists, gzipList{Ms: w.Ms, Status: w.status, Items: w.Items, Bytes: w.Bytes, WireBytes: w.WireBytes, Encoding: w.Encoding})
				return w.Ms, f
			})
		},
		func() { // Row 4: walks by pages.
			rd.WalkMedianMs = p.repeat(rd, "pages", p.Walks, func() (float64, *failure) {
				w, f := p.walk(coll, p.PageLimit)
				rd.Walks = append(rd.Walks, w.pageWalk)
				return w.Ms, f
			})
		},
		func() { // Row 5: watch fan-out.
			for k, w := range p.Watchers {
				log.Printf("round %d: watch fan-out, %d watchers", rd.Round, w)
				wr, f := p.watchFanOut(rd.Round, k, coll, w, itemName)
				if rd.Watches = append(rd.Watches, wr); f != nil {
					p.fail(rd, fmt.Sprintf("watch-%d", w), *f)
				}
			}
		},
		func() { // Row 7: delete the CRD that holds the n objects.
			del, f := p.deleteTimed(rd.CRD, coll)
			if rd.Delete, del.Objects = del, p.N; f != nil {
				p.fail(rd, "delete", *f)
			}
		},
	}
	for _, step := range steps {
		if p.ctx.Err() != nil {
			return p.ctx.Err()
		}
		step()
	}
	return p.conversionAndRest(rd, &crds)
}

// repeat takes k samples with f, in ms, and returns their median; at the
// first failure it records it as row's and returns 0.
func (p *pathsRun) repeat(rd *pathsRound, row string, k int, f func() (float64, *failure)) float64 {
	var ds []float64
	for range k {
		d, fl := f()
		if fl != nil {
			p.fail(rd, row, *fl)
			return 0
		}
		ds = append(ds, d)
	}
	return median(ds)
}

// conversionAndRest runs rows 8 and 6 of a round (they do not need its
// objects); crds gets the CRDs they create, for the round's cleanup.
func (p *pathsRun) conversionAndRest(rd *pathsRound, crds *[]string) error {
	var fcs []float64
	for k := 1; k <= p.FreshCRDs && p.ctx.Err() == nil; k++ {
		fc, f := p.firstCreate(fmt.Sprintf("r%d-f%d-%s.%s", rd.Round, k, p.RunID, pathsDomain), crds)
		if f != nil {
			p.fail(rd, "first-create", *f)
			continue
		}
		rd.FirstCreates = append(rd.FirstCreates, *fc)
		fcs = append(fcs, fc.Ms)
	}
	if len(fcs) > 0 && rd.Failed["first-create"] == "" {
		rd.FirstCreateMs = median(fcs)
	}
	if p.Conversion && p.ctx.Err() == nil {
		p.convRow(rd, crds)
	}
	return p.ctx.Err()
}

// listNames decodes a list answer: its kind, continue token and item names.
func listNames(b []byte) (kind, cont string, names []string, err error) {
	var l struct {
		Kind     string
		Metadata struct{ Continue string }
		Items    []struct{ Metadata struct{ Name string } }
	}
	if err := json.Unmarshal(b, &l); err != nil {
		return "", "", nil, err
	}
	for _, it := range l.Items {
		names = append(names, it.Metadata.Name)
	}
	return l.Kind, l.Metadata.Continue, names, nil
}

// walked is a pageWalk with the first page's status.
type walked struct {
	pageWalk
	status int
}

// walk lists the collection with gzip: whole (limit 0) or by pages of
// limit following continue tokens; it checks the union of the pages: all n
// items, each once, no page above its limit.
func (p *pathsRun) walk(coll string, limit int) (walked, *failure) {
	ctx, cancel := context.WithTimeout(p.ctx, 5*time.Minute)
	defer cancel()
	var w walked
	seen := make(map[string]bool, p.N)
	cont, t0 := "", time.Now()
	for page := 1; page == 1 || cont != ""; page++ {
		u := coll
		if limit > 0 {
			u += "?limit=" + strconv.Itoa(limit)
		}
		if cont != "" {
			u += "&continue=" + url.QueryEscape(cont)
		}
		if page > p.N/max(1, limit)+10 {
			return w, p.failf(http.MethodGet, coll, 0, "still a continue token after %d pages", page-1)
		}
		t1 := time.Now()
		code, b, wire, enc, err := p.c.getGzip(ctx, u)
		pd := ms(time.Since(t1))
		w.RequestMs, w.MaxPageMs, w.Pages, w.Bytes, w.WireBytes = w.RequestMs+pd, max(w.MaxPageMs, pd), w.Pages+1, w.Bytes+len(b), w.WireBytes+wire
		if page == 1 {
			w.Encoding, w.status, w.Ms = enc, code, pd
		}
		where := ""
		if limit > 0 {
			where = fmt.Sprintf("page %d: ", page)
		}
		if err != nil || code != http.StatusOK {
			f := p.httpFail(http.MethodGet, u, code, b, err)
			f.Error = strings.TrimSpace(where + f.Error)
			return w, f
		}
		kind, next, names, err := listNames(b)
		problem := ""
		switch {
		case err != nil:
			problem = "decode: " + err.Error()
		case kind != "PathItemList":
			problem = "kind " + kind
		case limit > 0 && len(names) > limit:
			problem = fmt.Sprintf("%d items in a page of limit %d", len(names), limit)
		default:
			problem = checkNames(names, p.N, seen)
		}
		if w.Items = len(seen); problem != "" {
			return w, p.failf(http.MethodGet, u, code, "%swrong answer: %s", where, problem)
		}
		cont = next
	}
	if limit > 0 {
		w.Ms, w.RequestMs = ms(time.Since(t0)), math3(w.RequestMs)
	}
	if w.Items != p.N {
		return w, p.failf(http.MethodGet, coll, 200, "saw %d items, want %d", w.Items, p.N)
	}
	return w, nil
}

// deleteTimed DELETEs a CRD and polls, every 20 ms, the CRD and its
// collection until both answer 404.
func (p *pathsRun) deleteTimed(crdName, coll string) (*crdDeletion, *failure) {
	del := &crdDeletion{CollStatuses: map[string]int{}}
	crdURL := p.base + crdPath + "/" + crdName
	t0 := time.Now()
	code, b, err := p.do(http.MethodDelete, crdURL, nil, 60*time.Second)
	del.DeleteMs, del.DeleteStatus = ms(time.Since(t0)), code
	if err != nil || (code != http.StatusOK && code != http.StatusAccepted) {
		return del, p.httpFail(http.MethodDelete, crdURL, code, b, err)
	}
	gone := func(u string, dst *float64) bool {
		if *dst > 0 {
			return true
		}
		code, _, err := p.do(http.MethodGet, u, nil, 10*time.Second)
		if u != crdURL {
			del.CollStatuses[statusKey(code, err)]++
		}
		if err == nil && code == http.StatusNotFound {
			*dst = ms(time.Since(t0))
		}
		return *dst > 0
	}
	deadline := t0.Add(p.deleteWait)
	for i := 0; i < 1_000_000 && time.Now().Before(deadline) && p.ctx.Err() == nil; i++ {
		del.Polls++
		if crdGone, collGone := gone(crdURL, &del.GoneMs), gone(coll+"?limit=1", &del.CollectionGoneMs); crdGone && collGone {
			delete(p.created, crdName)
			return del, nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return del, p.failf(http.MethodDelete, crdURL, 0, "after %v: CRD gone %v, collection 404 %v (collection answers: %v)", p.deleteWait, del.GoneMs > 0, del.CollectionGoneMs > 0, del.CollStatuses)
}

// firstCreate creates a fresh CRD, polls it every 10 ms until Established,
// then POSTs one object, again every 10 ms while the answer is 404, 429 or
// 503, until 201.
func (p *pathsRun) firstCreate(group string, crds *[]string) (*firstCreate, *failure) {
	fc := &firstCreate{CRD: pathsPlural + "." + group, Statuses: map[string]int{}}
	d, _, f := p.newCRD(fc.CRD, pathsCRD(group, p.RunID), 10*time.Millisecond, crds)
	if f != nil {
		return nil, f
	}
	fc.EstablishedMs = ms(d)
	coll := p.base + "/apis/" + group + "/v1/namespaces/" + p.Namespace + "/" + pathsPlural
	body := pathsBody(group, "first", 0, 0)
	t1 := time.Now()
	for fc.Attempts = 1; ; fc.Attempts++ {
		code, b, err := p.do(http.MethodPost, coll, body, 30*time.Second)
		if err == nil && code == http.StatusCreated {
			fc.Ms = ms(time.Since(t1))
			break
		}
		retry := err == nil && (code == http.StatusNotFound || code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable)
		if !retry || fc.Attempts >= 100_000 || time.Since(t1) > p.waitFor || p.ctx.Err() != nil {
			f := p.httpFail(http.MethodPost, coll, code, b, err)
			f.Error = strings.TrimSpace(fmt.Sprintf("attempt %d after Established: %s (before: %v)", fc.Attempts, f.Error, fc.Statuses))
			return nil, f
		}
		fc.Statuses[statusKey(code, err)]++
		time.Sleep(10 * time.Millisecond)
	}
	if len(fc.Statuses) == 0 {
		fc.Statuses = nil
	}
	return fc, nil
}

// convList lists the CronTabs as v1 and checks the answer: n items of v1,
// host and port converted when through the webhook. The first GET is timed
// alone; a 429 is retried after its Retry-After (1 s if none), as client-go
// does, until a 200 (at most 100 GETs and -wait).
func (p *pathsRun) convList(group string, webhook bool) (*convListRun, *failure) {
	path := p.base + "/apis/" + group + "/v1/namespaces/" + p.Namespace + "/crontabs"
	before := p.hook.snapshot()
	cl := &convListRun{}
	t0 := time.Now()
	for {
		cl.Attempts++
		ctx, cancel := context.WithTimeout(p.ctx, 2*time.Minute)
		t1 := time.Now()
		code, b, hdr, err := p.c.call(ctx, http.MethodGet, path, nil)
		d := time.Since(t1)
		cancel()
		after := time.Second
		if s, perr := strconv.Atoi(hdr.Get("Retry-After")); err == nil && perr == nil && s >= 0 && s <= 60 {
			after = time.Duration(s) * time.Second
		}
		if cl.Attempts == 1 {
			cl.Ms, cl.Status = ms(d), code
			if code != http.StatusOK {
				var st struct{ Message string }
				_ = json.Unmarshal(b, &st)
				cl.Message = st.Message
			}
		}
		if err == nil && code == http.StatusTooManyRequests && cl.Attempts < 100 && time.Since(t0)+after < p.waitFor {
			time.Sleep(after)
			continue
		}
		cl.UntilOKMs, cl.Bytes, cl.Webhook = ms(time.Since(t0)), len(b), p.hook.snapshot().minus(before)
		if err != nil || code != http.StatusOK {
			f := p.httpFail(http.MethodGet, path, code, b, err)
			f.Error = strings.TrimSpace(fmt.Sprintf("%s (GET %d of this list)", f.Error, cl.Attempts))
			f.Body += fmt.Sprintf(" [webhook during this list: %d calls, %d objects, %d non-200]", cl.Webhook.Calls, cl.Webhook.Objects, cl.Webhook.Non200)
			return cl, f
		}
		if _, problem := checkCronTabs(b, p.N, "crontab-", group+"/v1", webhook); problem != "" {
			return cl, p.failf(http.MethodGet, path, code, "wrong answer: %s", problem)
		}
		cl.Items = p.N
		return cl, nil
	}
}

// tableColumn is the name of a column of a meta.k8s.io Table.
type tableColumn struct {
	Name string `json:"name"`
}

// changeCRD GETs a CRD, changes it with edit, PUTs it and waits until a GET
// of the CRD shows the change (observed) with the CRD Established, then
// until the server serves it: served polls one object every 10 ms.
func (p *pathsRun) changeCRD(name string, edit func(map[string]any) error, observed func(map[string]any) bool, served func() bool) (*convChange, *failure) {
	u := p.base + crdPath + "/" + name
	crd, code, b, err := p.c.getCRD(p.ctx, name)
	if crd == nil {
		return nil, p.httpFail(http.MethodGet, u, code, b, err)
	}
	if err := edit(crd); err != nil {
		return nil, p.failf(http.MethodPut, u, 0, "%v", err)
	}
	body, _ := json.Marshal(crd)
	ch := &convChange{}
	t0 := time.Now()
	code, b, err = p.do(http.MethodPut, u, body, 30*time.Second)
	if ch.PutMs = ms(time.Since(t0)); err != nil || code != http.StatusOK {
		return ch, p.httpFail(http.MethodPut, u, code, b, err)
	}
	var put map[string]any
	_ = json.Unmarshal(b, &put)
	d, polls, err := p.c.waitCRD(p.ctx, name, t0, p.waitFor, 10*time.Millisecond, func(c map[string]any) bool {
		return crdGeneration(c) >= crdGeneration(put) && crdEstablished(c) && observed(c)
	})
	if ch.ObservedMs, ch.Polls = ms(d), polls; err != nil {
		return ch, p.failf(http.MethodGet, u, 0, "%v", err)
	}
	before := p.hook.snapshot()
	for ch.ServePolls = 1; !served(); ch.ServePolls++ {
		if ch.ServePolls >= 100_000 || time.Since(t0) > p.waitFor+d || p.ctx.Err() != nil {
			return ch, p.failf(http.MethodGet, u, 0, "the change was not served within %v (%d GETs of one object)", p.waitFor, ch.ServePolls)
		}
		time.Sleep(10 * time.Millisecond)
	}
	ch.ServedMs, ch.ServeHooks = ms(time.Since(t0)), p.hook.snapshot().minus(before)
	return ch, nil
}

// convRow is row 6: a CronTab CRD with Webhook conversion and n objects in
// v1beta1; two lists as v1; a printer column added, then the first list;
// the conversion set to None, then the list; back to the same Webhook, then
// the first list. The example webhook converts the group example.com only:
// every round creates crontabs.example.com afresh (one that exists already
// is someone else's, and left alone).
func (p *pathsRun) convRow(rd *pathsRound, crds *[]string) {
	group, name := crontab.Group, webhookCRDName
	cv := &convPaths{CRD: name}
	rd.Conv = cv
	if _, _, f := p.newCRD(name, withLabel(crontabCRD(group, p.hookURL, p.caPEM), p.RunID), 20*time.Millisecond, crds); f != nil {
		p.fail(rd, "conv-setup", *f)
		return
	}
	time.Sleep(p.settle)
	coll := p.base + "/apis/" + group + "/v1beta1/namespaces/" + p.Namespace + "/crontabs"
	pop := p.c.phase(p.ctx, "conv-populate", p.N, p.Concurrency, p.phaseLimit, func(i int) request {
		return request{http.MethodPost, coll, crontabBody(group, "crontab-"+strconv.Itoa(100000 + i)[1:], i), []int{http.StatusCreated}}
	}, nil)
	cv.Populate = &pop
	if pop.FirstError != nil || pop.Aborted {
		p.fail(rd, "conv-setup", *cmp.Or(pop.FirstError, &failure{Error: "not all CronTabs could be created"}))
		return
	}
	for _, dst := range []**convListRun{&cv.First, &cv.Warm} {
		var f *failure
		if *dst, f = p.convList(group, true); f != nil {
			p.fail(rd, "conv-setup", *f)
			return
		}
	}
	// What one object's GET shows: the columns of its Table; whether its v1
	// has host (through the webhook) or not (None).
	obj := p.base + "/apis/" + group + "/v1/namespaces/" + p.Namespace + "/crontabs/crontab-00000"
	hasColumn := func() bool {
		var t struct{ ColumnDefinitions []tableColumn }
		code, err := p.c.getJSON(p.ctx, obj, "application/json;as=Table;v=v1;g=meta.k8s.io", &t)
		return err == nil && code == http.StatusOK && slices.Contains(t.ColumnDefinitions, tableColumn{Name: "Image"})
	}
	hostIs := func(want bool) func() bool {
		return func() bool {
			var o struct{ Host *string }
			code, err := p.c.getJSON(p.ctx, obj, "application/json", &o)
			return err == nil && code == http.StatusOK && (o.Host != nil) == want
		}
	}
	var webhookConv any
	setConv := func(to func(old any) any) func(map[string]any) error {
		return func(c map[string]any) error {
			spec, _ := c["spec"].(map[string]any)
			if spec == nil {
				return errors.New("CRD without spec")
			}
			spec["conversion"] = to(spec["conversion"])
			return nil
		}
	}
	convIs := func(s string) func(map[string]any) bool {
		return func(c map[string]any) bool { return crdConversion(c) == s }
	}
	for _, x := range []struct {
		row      string
		dst      **convChange
		edit     func(map[string]any) error
		observed func(map[string]any) bool
		served   func() bool
		webhook  bool
	}{
		{"conv-edit", &cv.Edit, func(c map[string]any) error {
			if !addColumn(c, "v1", map[string]any{"name": "Image", "type": "string", "jsonPath": ".spec.image"}) {
				return errors.New("no version v1 in the CRD")
			}
			return nil
		}, func(c map[string]any) bool { return crdHasColumn(c, "v1", "Image") }, hasColumn, true},
		{"conv-flip", &cv.ToNone, setConv(func(old any) any { webhookConv = old; return map[string]any{"strategy": "None"} }), convIs("None"), hostIs(false), false},
		{"conv-flip", &cv.Flip, setConv(func(any) any { return webhookConv }), convIs("Webhook"), hostIs(true), true},
	} {
		var f *failure
		if *x.dst, f = p.changeCRD(name, x.edit, x.observed, x.served); f == nil {
			(*x.dst).List, f = p.convList(group, x.webhook)
		}
		if f != nil {
			p.fail(rd, x.row, *f)
			return
		}
	}
}

// pathsSide is the paths benchmark of one server (paths-NAME.json).
type pathsSide sideOf[pathsResult]

// roundStat is the median over rounds of a round's figure f, with the
// smallest and largest, over the rounds where f has one (ok). If any round
// failed one of rows, there is no figure: a row is failed, never a number.
func (s pathsSide) roundStat(rows []string, f func(*pathsRound) (float64, bool)) (med, lo, hi float64, n int, why string) {
	if s.res == nil {
		return 0, 0, 0, 0, s.why
	}
	var v []float64
	failed := 0
	for i := range s.res.RoundsData {
		rd := &s.res.RoundsData[i]
		if slices.ContainsFunc(rows, func(row string) bool { return rd.Failed[row] != "" }) {
			failed++
		} else if x, ok := f(rd); ok {
			v = append(v, x)
		}
	}
	switch {
	case failed > 0:
		return 0, 0, 0, 0, fmt.Sprintf("**failed** in %d of %d rounds (see Failures)", failed, len(s.res.RoundsData))
	case len(v) == 0:
		return 0, 0, 0, 0, "not reached"
	}
	return median(v), slices.Min(v), slices.Max(v), len(v), ""
}

// cell is roundStat as a table cell: the median, with the range over the
// rounds when there are several.
func (s pathsSide) cell(rows []string, f func(*pathsRound) (float64, bool), prec int, unit string) val {
	med, lo, hi, n, why := s.roundStat(rows, f)
	if why != "" {
		return none(why)
	}
	v := num(med, prec, unit)
	if n > 1 {
		v.unit += fmt.Sprintf(" (%.*f–%.*f)", prec, lo, prec, hi)
	}
	return v
}

// pathsRows is the row keys a figure depends on (pathsRun.fail's names).
func pathsRows(rows ...string) []string { return rows }

// partFig is the figure f of what get picks of a round, when there is one.
func partFig[T any](get func(*pathsRound) *T, f func(*T) float64) func(*pathsRound) (float64, bool) {
	return func(rd *pathsRound) (float64, bool) {
		if x := get(rd); x != nil {
			return f(x), true
		}
		return 0, false
	}
}

// lastOf is the last element of s, or nil.
func lastOf[T any](s []T) *T {
	if len(s) == 0 {
		return nil
	}
	return &s[len(s)-1]
}

func phaseFig(get func(*pathsRound) *phase, f func(*phase) float64) func(*pathsRound) (float64, bool) {
	return partFig(func(rd *pathsRound) *phase {
		if p := get(rd); p != nil && p.Requests > 0 {
			return p
		}
		return nil
	}, f)
}

func watchOf(rd *pathsRound, w int) *watchRun {
	return find(rd.Watches, func(x *watchRun) bool { return x.Watchers == w })
}

// convStep is one step of row 6 ("first", "warm", "edit", "none", "flip"):
// the CRD change before it (none for the first two) and its list.
func convStep(cv *convPaths, step string) (*convChange, *convListRun) {
	if cv == nil {
		return nil, nil
	}
	ch := map[string]*convChange{"edit": cv.Edit, "none": cv.ToNone, "flip": cv.Flip}[step]
	if ch == nil {
		return nil, map[string]*convListRun{"first": cv.First, "warm": cv.Warm}[step]
	}
	return ch, ch.List
}

// pathsTableRows are the rows of the paths table by their number, each
// figure the median over the rounds of both servers.
func pathsTableRows(first *pathsResult, nObj, rss string) map[string][]fig[pathsSide] {
	rows := map[string][]fig[pathsSide]{}
	add := func(no, metric string, withRatio bool, cell func(pathsSide) val) {
		f := fig[pathsSide]{metric, cell, nil}
		if withRatio {
			f.ratio = ratio
		}
		rows[no] = append(rows[no], f)
	}
	type figure = func(*pathsRound) (float64, bool)
	fig := func(keys []string, f figure, prec int, unit string) func(pathsSide) val {
		return func(s pathsSide) val { return s.cell(keys, f, prec, unit) }
	}
	// rowsOf adds rows of figures of one key: each metric, ratio or not,
	// figure, precision and unit.
	type spec struct {
		metric string
		ratio  bool
		f      figure
		prec   int
		unit   string
	}
	rowsOf := func(no string, keys []string, specs ...spec) {
		for _, x := range specs {
			add(no, x.metric, x.ratio, fig(keys, x.f, x.prec, x.unit))
		}
	}
	k := pathsRows
	for _, x := range []struct {
		no, key, metric string
		get             func(*pathsRound) *phase
	}{
		{"1", "gets", commas(first.Gets) + " sequential GETs of single objects: throughput", func(rd *pathsRound) *phase { return rd.Gets }},
		{"2", "creates", fmt.Sprintf("%s creates (%s-byte bodies) from %d workers sharing one HTTP/2 connection: throughput", commas(first.Creates), commas(first.BodyBytes), first.Concurrency),
			func(rd *pathsRound) *phase { return rd.Creates }},
	} {
		rowsOf(x.no, k(x.key), spec{x.metric, true, phaseFig(x.get, func(p *phase) float64 { return p.PerSecond }), 0, " req/s"},
			spec{"… p50", true, phaseFig(x.get, func(p *phase) float64 { return p.P50Ms }), 2, " ms"},
			spec{"… p99", true, phaseFig(x.get, func(p *phase) float64 { return p.P99Ms }), 2, " ms"})
	}

	lastList := func(f func(*gzipList) float64) figure {
		return partFig(func(rd *pathsRound) *gzipList { return lastOf(rd.Lists) }, f)
	}
	rowsOf("3", k("list"), spec{fmt.Sprintf("full list of %s objects, `Accept-Encoding: gzip`, until read and decompressed (median of %d per round)", nObj, first.Lists), true,
		func(rd *pathsRound) (float64, bool) { return rd.ListMedianMs, rd.ListMedianMs > 0 }, 1, " ms"},
		spec{"… bytes on the wire", true, lastList(func(s *gzipList) float64 { return float64(s.WireBytes) / 1e6 }), 2, " MB"},
		spec{"… decompressed", true, lastList(func(s *gzipList) float64 { return float64(s.Bytes) / 1e6 }), 2, " MB"})
	add("3", "… Content-Encoding of the answers", false, func(s pathsSide) val {
		if s.res == nil {
			return label(s.why)
		}
		var e []string
		for _, rd := range s.res.RoundsData {
			for _, x := range rd.Lists {
				if v := cmp.Or(x.Encoding, "identity"); !slices.Contains(e, v) {
					e = append(e, v)
				}
			}
		}
		return label(cmp.Or(strings.Join(e, ", "), "not reached"))
	})

	lastWalk := func(f func(*pageWalk) float64) figure {
		return partFig(func(rd *pathsRound) *pageWalk { return lastOf(rd.Walks) }, f)
	}
	rowsOf("4", k("pages"), spec{fmt.Sprintf("paged list, `limit=%d`, walk of all %s objects by `continue` (gzip as above): time per walk (median of %d per round)", first.PageLimit, nObj, first.Walks), true,
		func(rd *pathsRound) (float64, bool) { return rd.WalkMedianMs, rd.WalkMedianMs > 0 }, 1, " ms"},
		spec{"… of which in the pages' requests (the rest is crdbench decoding each page for its `continue`)", true, func(rd *pathsRound) (float64, bool) {
			var v []float64
			for _, x := range rd.Walks {
				v = append(v, x.RequestMs)
			}
			return median(v), len(v) > 0
		}, 1, " ms"},
		spec{"… slowest page of a walk", true, lastWalk(func(x *pageWalk) float64 { return x.MaxPageMs }), 1, " ms"},
		spec{"… pages per walk", false, lastWalk(func(x *pageWalk) float64 { return float64(x.Pages) }), 0, ""},
		spec{"… items checked per walk (each once)", false, lastWalk(func(x *pageWalk) float64 { return float64(x.Items) }), 0, ""})

	for _, nw := range first.Watchers {
		of := func(f func(*watchRun) float64) figure {
			return partFig(func(rd *pathsRound) *watchRun {
				if x := watchOf(rd, nw); x != nil && x.Delivered > 0 {
					return x
				}
				return nil
			}, f)
		}
		conns := (nw + first.WatchersPerConn - 1) / first.WatchersPerConn
		rowsOf("5", k(fmt.Sprintf("watch-%d", nw)),
			spec{fmt.Sprintf("watch fan-out, **%s watchers** (%d HTTP/2 connection(s)), %d patches one every %.0f ms: delivery delay p99", commas(nw), conns, first.WatchUpdates, first.WatchIntervalMs), true,
				of(func(x *watchRun) float64 { return x.P99Ms }), 1, " ms"},
			spec{"… p50", true, of(func(x *watchRun) float64 { return x.P50Ms }), 1, " ms"},
			spec{"… max", true, of(func(x *watchRun) float64 { return x.MaxMs }), 1, " ms"},
			spec{"… the patches themselves, p50", true, of(func(x *watchRun) float64 { return x.WriteP50Ms }), 1, " ms"})
		// Shown even for failed rounds: they are the failure.
		add("5", "… deliveries missed, duplicated or unexpected, all rounds (must be 0)", false, func(s pathsSide) val {
			if s.res == nil {
				return none(s.why)
			}
			tot, exp, reached := 0, 0, 0
			for i := range s.res.RoundsData {
				if x := watchOf(&s.res.RoundsData[i], nw); x != nil {
					tot, exp, reached = tot+x.Missed+x.Duplicates+x.Unexpected, exp+x.Expected, reached+1
				}
			}
			if reached == 0 {
				return none("not reached")
			}
			v := val{v: float64(tot), ok: true, unit: " of " + commas(exp)}
			if tot > 0 {
				v.unit += " **(must be 0)**"
			}
			return v
		})
	}

	if first.Conversion {
		lst := func(step string, f func(*convListRun) float64) figure {
			return partFig(func(rd *pathsRound) *convListRun { _, l := convStep(rd.Conv, step); return l }, f)
		}
		chg := func(step string, f func(*convChange) float64) figure {
			return partFig(func(rd *pathsRound) *convChange { ch, _ := convStep(rd.Conv, step); return ch }, f)
		}
		calls := func(keys []string, step string) func(pathsSide) val {
			return func(s pathsSide) val {
				calls, _, _, _, why := s.roundStat(keys, lst(step, func(l *convListRun) float64 { return float64(l.Webhook.Calls) }))
				if why != "" {
					return none(why)
				}
				objs, _, _, _, _ := s.roundStat(keys, lst(step, func(l *convListRun) float64 { return float64(l.Webhook.Objects) }))
				return label(fmt.Sprintf("%s calls, %s objects", commas(int(calls)), commas(int(objs))))
			}
		}
		firstGet := func(keys []string, step string) func(pathsSide) val {
			return func(s pathsSide) val {
				return firstGetCell(s, keys, func(cv *convPaths) *convListRun { _, l := convStep(cv, step); return l })
			}
		}
		untilOK := func(l *convListRun) float64 { return l.UntilOKMs }
		setup, flip := k("conv-setup"), k("conv-setup", "conv-edit", "conv-flip")
		for _, x := range []struct {
			step, what, seen string
			keys             []string
		}{
			{"edit", "**first list as v1 through the webhook after a CRD edit** (a printer column added to v1; conversion untouched): " + nObj + " CronTabs stored in v1beta1",
				"the Table of one object has the new column", k("conv-setup", "conv-edit")},
			{"flip", "**first list as v1 after a flip None → Webhook** (back to exactly the conversion of before)", "one object's v1 has `host` again", flip},
		} {
			add("6", x.what+": the first GET, no retry", true, firstGet(x.keys, x.step))
			rowsOf("6", x.keys, spec{"… until a 200 list, a 429 retried after its Retry-After as client-go does", true, lst(x.step, untilOK), 1, " ms"},
				spec{"… GETs until that 200", false, lst(x.step, func(l *convListRun) float64 { return float64(l.Attempts) }), 0, ""})
			add("6", "… webhook calls from the first GET to the 200", false, calls(x.keys, x.step))
			rowsOf("6", x.keys, spec{"… time in the example webhook's handler meanwhile (in crdbench; summed over its calls)", true, lst(x.step, func(l *convListRun) float64 { return l.Webhook.BusyMs }), 1, " ms"},
				spec{"… before it: the PUT sent → a GET of the CRD shows the change, Established (polled every 10 ms)", true, chg(x.step, func(ch *convChange) float64 { return ch.ObservedMs }), 0, " ms"},
				spec{"… the PUT sent → " + x.seen + " (polled every 10 ms; then the list)", true, chg(x.step, func(ch *convChange) float64 { return ch.ServedMs }), 0, " ms"})
		}
		add("6", "(for reference) the list as v1 while the conversion was None, just before the flip: the first GET", true, firstGet(flip, "none"))
		add("6", "… until a 200", true, fig(flip, lst("none", untilOK), 1, " ms"))
		add("6", "(for reference) the first list as v1 after the creates, before any edit", true, fig(setup, lst("first", untilOK), 1, " ms"))
		add("6", "… webhook calls during it", false, calls(setup, "first"))
		add("6", "(for reference) the next list as v1 (warm), before the edit", true, fig(setup, lst("warm", untilOK), 1, " ms"))
		add("6", "… webhook calls during it", false, calls(setup, "warm"))
	}

	del := func(f func(*crdDeletion) float64) figure {
		return partFig(func(rd *pathsRound) *crdDeletion { return rd.Delete }, f)
	}
	rowsOf("7", k("delete"), spec{fmt.Sprintf("DELETE of a CRD holding %s objects → GET of the CRD answers 404", nObj), true, del(func(x *crdDeletion) float64 { return x.GoneMs / 1000 }), 2, " s"},
		spec{"… → GET of its collection answers 404", true, del(func(x *crdDeletion) float64 { return x.CollectionGoneMs / 1000 }), 2, " s"})

	fc := func(f func(xs []firstCreate) float64) figure {
		return func(rd *pathsRound) (float64, bool) { return f(rd.FirstCreates), len(rd.FirstCreates) > 0 }
	}
	rowsOf("8", k("first-create"), spec{fmt.Sprintf("first create after Established: Established seen (polled every 10 ms) → 201, retrying 404/429/503 every 10 ms (median of %d fresh CRDs per round)", first.FreshCRDs), true,
		func(rd *pathsRound) (float64, bool) { return rd.FirstCreateMs, len(rd.FirstCreates) > 0 }, 1, " ms"},
		spec{"… attempts until 201 (most in a round)", false, fc(func(xs []firstCreate) float64 {
			return float64(slices.MaxFunc(xs, func(a, b firstCreate) int { return cmp.Compare(a.Attempts, b.Attempts) }).Attempts)
		}), 0, ""},
		spec{"… (for reference) the CRD's POST → Established seen", true, fc(func(xs []firstCreate) float64 {
			var v []float64
			for _, x := range xs {
				v = append(v, x.EstablishedMs)
			}
			return median(v)
		}), 1, " ms"})

	mem := func(f func(*pathsRound) float64) figure {
		return func(rd *pathsRound) (float64, bool) { return f(rd), len(rd.RSS) > 0 }
	}
	rowsOf("9", k("rss"), spec{fmt.Sprintf("RSS with %s objects of %s-byte create bodies stored, %.0f s after the creates (%s)", nObj, commas(first.BodyBytes), first.RSSSettleSec, rss), true,
		mem(func(rd *pathsRound) float64 { return rd.RSSMiB }), 1, " MiB"},
		spec{"… RSS just before the creates (the CRD Established; earlier rounds' objects deleted)", true, mem(func(rd *pathsRound) float64 { return rd.RSSBeforeMiB }), 1, " MiB"},
		spec{"… increase over the creates", true, mem(func(rd *pathsRound) float64 { return rd.RSSMiB - rd.RSSBeforeMiB }), 1, " MiB"})
	return rows
}

func orZero[T any](p *T) *T {
	if p == nil {
		return new(T)
	}
	return p
}

// pathsReport writes the section of crdbench paths (crdserver beside the
// reference) and returns its failures.
func pathsReport(dir string, p func(string, ...any)) (fails []string) {
	c, r := pathsSide(readSide[pathsResult](dir, "paths-crdserver.json")), pathsSide(readSide[pathsResult](dir, "paths-reference.json"))
	if c.res == nil && r.res == nil {
		return nil
	}
	first := cmp.Or(c.res, r.res)
	names := []string{"crdserver", "reference"}
	var rss, rounds []string
	for i, s := range []pathsSide{c, r} {
		if s.res != nil {
			rounds = append(rounds, fmt.Sprintf("%s %d", names[i], len(s.res.RoundsData)))
			if len(s.res.RSSProcs) > 0 {
				rss = append(rss, fmt.Sprintf("%s: %s", names[i], strings.Join(s.res.RSSProcs, " + ")))
			}
		}
	}
	nObj := commas(first.N)

	p("## Paths of the performance issue\n\n")
	p("`crdbench paths`, in rounds (%s), each on CRDs of its own (API groups under `%s`, labelled `%s`; the conversion CRD `%s` created afresh) "+
		"in the namespace `%s`, deleted before the next round. A figure is the median over the rounds (smallest–largest round in brackets); "+
		"a row that failed in any round has none. HTTPS, HTTP/2, the admin client certificate; crdbench shares the servers' cores.\n\n",
		strings.Join(rounds, ", "), pathsDomain, pathsLabel+"=<run>", webhookCRDName, first.Namespace)
	t := newTable("#", "metric", "crdserver", "reference", "ratio")
	rows := pathsTableRows(first, nObj, strings.Join(rss, "; "))
	for no := range 9 {
		figs(t, rows[strconv.Itoa(no+1)], c, r, strconv.Itoa(no+1))
	}
	p("%s\n", t)
	pathsNotes(p, r, first, nObj)
	pathsRounds(p, c, r, first)
	for i, s := range []pathsSide{c, r} {
		if res := s.res; res != nil {
			p("- %s (%s, %s, run `%s`): load average (1/5/15 min) %s at the start, %s at the end", names[i], res.Server, res.Protocol, res.RunID, res.LoadStart, res.LoadEnd)
			if len(res.Cleanup) > 0 {
				p("; cleanup: %s", strings.Join(res.Cleanup, "; "))
			}
			p(".\n")
			fails = append(fails, workloadFailures(names[i], "paths", res.Error, res.Failures)...)
		}
	}
	p("\n")
	return fails
}

// pathsNotes says how each row of the paths table was measured.
func pathsNotes(p func(string, ...any), r pathsSide, first *pathsResult, nObj string) {
	settle := ""
	if r.res != nil && r.res.SettleSec > 0 {
		settle = fmt.Sprintf(" (the reference %.0f s more: it delays earlier creates)", r.res.SettleSec)
	}
	p("How each row was measured:\n\n")
	p("- **1** %s GETs of single objects, one after another on one connection, spread over the %s objects.\n", commas(first.Gets), nObj)
	p("- **2, 9** Per round a fresh CRD (`PathItem`, v1, structural schema), polled until Established%s; RSS (VmRSS, summed) read; %s objects of exactly %s bytes "+
		"(padded with pseudo-random hex) created by %d workers over one HTTP/2 connection, the first %s being row 2; RSS read again %.0f s later (row 9).\n",
		settle, nObj, commas(first.BodyBytes), first.Concurrency, commas(first.Creates), first.RSSSettleSec)
	p("- **3** %d GETs of the whole collection with `Accept-Encoding: gzip`, timed until read and decompressed; then checked: all %s items, each once.\n", first.Lists, nObj)
	p("- **4** %d walks by `limit=%d` pages and `continue` tokens, timed from the first request to the last page decoded; all %s items, each once, no page above the limit.\n",
		first.Walks, first.PageLimit, nObj)
	p("- **5** W watches from a list's resourceVersion, %d per HTTP/2 connection (Kubernetes allows 100 streams on one, Go 250); once all answered 200, %d merge patches of `spec.seq`, one every %.0f ms; "+
		"for every watcher and write, the delay from just before the write to the event decoded; at most %v wait for the last. A delivery missed, duplicated or of no write fails the row.\n",
		first.WatchersPerConn, first.WatchUpdates, first.WatchIntervalMs, watchWaitOf(first))
	if first.Conversion {
		p("- **6** `%s` (the CronTab: v1beta1 storage, v1 served) with Webhook conversion to the example webhook (served by crdbench over TLS), %s objects in v1beta1, "+
			"listed as v1 twice. Then a printer column is added to v1 (the CRD polled every 10 ms until Established with it, then an object's Table until it has it), and the collection listed as v1: "+
			"the first GET is a row; a 429 is retried after its Retry-After as client-go does, until a 200. The same for conversion None and back to Webhook. "+
			"Every 200 is checked: all %s items in v1 with `host`/`port`. Webhook calls are counted from the first GET to the 200.\n", webhookCRDName, nObj, nObj)
	}
	p("- **7** The CRD of the %s objects DELETEd; the CRD and its collection (`?limit=1`) polled every 20 ms until 404.\n", nObj)
	p("- **8** %d fresh CRDs per round: each polled every 10 ms until Established, then one object POSTed, again every 10 ms while 404, 429 or 503, until 201.\n\n", first.FreshCRDs)
}

// pathsRounds writes the paths figures round by round.
func pathsRounds(p func(string, ...any), c, r pathsSide, first *pathsResult) {
	head := []string{"server", "round", "creates/s", "list (gzip)", "walk"}
	for _, nw := range first.Watchers {
		head = append(head, "watch p99, "+commas(nw))
	}
	t := newTable(append(head, "CRD delete → collection 404", "first create", "edit → first list", "flip → first list", "RSS", "wall", "load after")...)
	// or is the cell of format and a when ok, else "–".
	or := func(ok bool, format string, a ...any) string {
		if !ok {
			return "–"
		}
		return fmt.Sprintf(format, a...)
	}
	for i, s := range []pathsSide{c, r} {
		for _, rd := range orZero(s.res).RoundsData {
			cells := []any{[]string{"crdserver", "reference"}[i], rd.Round, or(rd.Creates != nil, "%.0f", orZero(rd.Creates).PerSecond),
				or(rd.ListMedianMs > 0, "%.1f ms", rd.ListMedianMs), or(rd.WalkMedianMs > 0, "%.1f ms", rd.WalkMedianMs)}
			for _, nw := range first.Watchers {
				wr := orZero(watchOf(&rd, nw))
				miss := ""
				if wr.Missed > 0 {
					miss = fmt.Sprintf(" (%d missed)", wr.Missed)
				}
				cells = append(cells, or(wr.Delivered > 0, "%.1f ms%s", wr.P99Ms, miss))
			}
			cells = append(cells, or(rd.Delete != nil, "%.2f s", orZero(rd.Delete).CollectionGoneMs/1000), or(len(rd.FirstCreates) > 0, "%.1f ms", rd.FirstCreateMs))
			for _, step := range []string{"edit", "flip"} {
				_, l := convStep(rd.Conv, step)
				switch {
				case l == nil:
					cells = append(cells, "–")
				case l.Status == 200:
					cells = append(cells, fmt.Sprintf("%.1f ms (%d calls)", l.Ms, l.Webhook.Calls))
				default:
					cells = append(cells, fmt.Sprintf("HTTP %d, a 200 after %.1f ms (%d calls)", l.Status, l.UntilOKMs, l.Webhook.Calls))
				}
			}
			t.row(append(cells, or(len(rd.RSS) > 0, "%.1f MiB", rd.RSSMiB), fmt.Sprintf("%.0f s", rd.WallSec), fmt.Sprintf("%.2f", rd.Load1))...)
		}
	}
	p("%s\n", t)
}

// watchWaitOf is how long the run waited for the last deliveries (not in
// the JSON of older runs: then the default).
func watchWaitOf(r *pathsResult) string {
	if r.WatchWaitSec > 0 {
		return fmt.Sprintf("%.0f s", r.WatchWaitSec)
	}
	return "30 s"
}

// firstGetCell is the first GET of a list after a change: its time when it
// was a 200 in every round, else what it answered.
func firstGetCell(s pathsSide, rows []string, get func(*convPaths) *convListRun) val {
	of := func(rd *pathsRound) *convListRun {
		if rd.Conv == nil {
			return nil
		}
		return get(rd.Conv)
	}
	_, _, _, n, why := s.roundStat(rows, func(rd *pathsRound) (float64, bool) { return 0, of(rd) != nil })
	if why != "" {
		return none(why)
	}
	var oks, otherMs []float64
	var other []string
	for i := range s.res.RoundsData {
		switch l := of(&s.res.RoundsData[i]); {
		case l == nil:
		case l.Status == 200:
			oks = append(oks, l.Ms)
		default:
			d := fmt.Sprintf("HTTP %d", l.Status)
			if l.Message != "" {
				d += " “" + l.Message + "”"
			}
			if otherMs = append(otherMs, l.Ms); !slices.Contains(other, d) {
				other = append(other, d)
			}
		}
	}
	if len(other) > 0 {
		return none(fmt.Sprintf("%s in %d of %d rounds (answered in %.1f ms, median)", strings.Join(other, ", "), len(otherMs), n, median(otherMs)))
	}
	v := num(median(oks), 1, " ms")
	if len(oks) > 1 {
		v.unit += fmt.Sprintf(" (%.1f–%.1f)", slices.Min(oks), slices.Max(oks))
	}
	return v
}

// label is a table cell of text, not a figure (no ratio).
func label(s string) val { return val{why: s} }
