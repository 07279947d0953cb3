package main

// crdbench paths: the request paths of single objects, large collections,
// watches and CRD changes that the other workloads do not measure, against
// one server, in rounds; the numbers are the rows of the report's table
// (its "#" column). Each round works on CRDs
// of its own (fresh groups under paths.crdbench.example.com, labelled
// crdbench-paths-run=<run id>), in the namespace -namespace, and deletes
// them again before the next round:
//
//  9. RSS of the server's processes (-rss-pid) -rss-settle after creating
//     -n objects of -body-bytes each (before the creates too);
//  2. the first -creates of those creates, by -concurrency workers sharing
//     one HTTP/2 connection, are measured;
//  1. -gets sequential GETs of single objects;
//  3. -lists full lists of the -n objects with Accept-Encoding: gzip, timed
//     until the answer is read and decompressed;
//  4. -walks walks of the same collection by pages of -page-limit
//     (continue tokens);
//  5. watch fan-out: for each count W of -watchers, W watches of the
//     collection from a list's resourceVersion, -watchers-per-conn on each
//     HTTP/2 connection, then -watch-updates merge patches of spec.seq,
//     one every -watch-interval; for each watcher and each write, the delay
//     from just before the write was sent to the event's arrival;
//  7. the DELETE of the CRD holding the -n objects: until the CRD, and
//     until its collection, answer 404;
//  8. the first create after Established, on -fresh-crds fresh CRDs each;
//  6. a CronTab CRD with Webhook conversion (the example webhook, served
//     by crdbench), -n objects stored in v1beta1: a warm list as v1, then
//     the first list as v1 after a CRD edit that does not touch conversion
//     (a printer column added), and after a flip None → Webhook.

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
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
	WireBytes int     `json:"wire_bytes"` // the body as sent: compressed when Encoding is gzip
	Encoding  string  `json:"content_encoding,omitempty"`
}

// pageWalk is one walk of the collection by pages (limit + continue).
type pageWalk struct {
	Ms        float64 `json:"ms"`          // first request sent → last page read and decoded
	RequestMs float64 `json:"requests_ms"` // the pages' requests alone (sent → read and decompressed)
	Pages     int     `json:"pages"`
	Items     int     `json:"items"`
	Bytes     int     `json:"bytes"`
	WireBytes int     `json:"wire_bytes"`
	MaxPageMs float64 `json:"slowest_page_ms"`
	Encoding  string  `json:"content_encoding,omitempty"` // of the first page
}

// convListRun is one list of the CronTab collection as v1, with what the
// webhook saw meanwhile: the first GET (no retry), and, if that was a 429,
// the GETs after it as client-go retries them (after Retry-After) until a
// 200.
type convListRun struct {
	Ms        float64      `json:"ms"`     // the first GET
	Status    int          `json:"status"` // of the first GET
	Message   string       `json:"message,omitempty"`
	UntilOKMs float64      `json:"until_200_ms"` // first GET sent → a 200 read
	Attempts  int          `json:"attempts"`
	Items     int          `json:"items"`
	Bytes     int          `json:"bytes"`
	Webhook   webhookCount `json:"webhook"` // first GET sent → a 200 read
}

// convChange is a change of the CronTab CRD and the first list after it.
type convChange struct {
	PutMs      float64      `json:"put_ms"`
	ObservedMs float64      `json:"observed_ms"` // PUT sent → GET of the CRD shows it, Established
	Polls      int          `json:"polls"`
	ServedMs   float64      `json:"served_ms"` // PUT sent → a GET of one object shows it
	ServePolls int          `json:"serve_polls"`
	ServeHooks webhookCount `json:"webhook_while_polling"`
	List       *convListRun `json:"first_list,omitempty"`
}

// convPaths is row 6 of one round.
type convPaths struct {
	CRD      string       `json:"crd"`
	Populate *phase       `json:"populate,omitempty"`
	First    *convListRun `json:"first_list,omitempty"` // the first list after the creates (warms up)
	Warm     *convListRun `json:"warm_list,omitempty"`  // the list after it: the steady state
	Edit     *convChange  `json:"edit,omitempty"`       // a printer column added
	ToNone   *convChange  `json:"to_none,omitempty"`    // Webhook → None
	Flip     *convChange  `json:"flip,omitempty"`       // None → Webhook, as before
}

// crdDeletion is row 7 of one round.
type crdDeletion struct {
	Objects          int            `json:"objects"`
	DeleteStatus     int            `json:"delete_status"`
	DeleteMs         float64        `json:"delete_request_ms"`
	GoneMs           float64        `json:"crd_gone_ms"`        // DELETE sent → GET of the CRD 404
	CollectionGoneMs float64        `json:"collection_gone_ms"` // DELETE sent → GET of the collection 404
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
	Creates        *phase            `json:"creates,omitempty"`  // row 2
	Populate       *phase            `json:"populate,omitempty"` // setup: the rest of the n objects
	RSSBefore      []procMem         `json:"rss_before,omitempty"`
	RSSBeforeMiB   float64           `json:"rss_before_mib,omitempty"`
	RSS            []procMem         `json:"rss,omitempty"` // row 9
	RSSMiB         float64           `json:"rss_mib,omitempty"`
	Gets           *phase            `json:"gets,omitempty"` // row 1
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

type pathsResult struct {
	Server          string       `json:"server"`
	Name            string       `json:"name"`
	Protocol        string       `json:"protocol"`
	ClientCert      bool         `json:"client_cert"`
	Date            string       `json:"date"`
	RunID           string       `json:"run_id"`
	Namespace       string       `json:"namespace"`
	N               int          `json:"objects"`
	Rounds          int          `json:"rounds"`
	Creates         int          `json:"creates"`
	Concurrency     int          `json:"concurrency"`
	Gets            int          `json:"gets"`
	Lists           int          `json:"lists_per_round"`
	Walks           int          `json:"walks_per_round"`
	PageLimit       int          `json:"page_limit"`
	Watchers        []int        `json:"watchers"`
	WatchersPerConn int          `json:"watchers_per_connection"`
	WatchUpdates    int          `json:"watch_updates"`
	WatchIntervalMs float64      `json:"watch_interval_ms"`
	WatchWaitSec    float64      `json:"watch_wait_seconds"`
	FreshCRDs       int          `json:"fresh_crds_per_round"`
	BodyBytes       int          `json:"create_body_bytes"`
	ConvBodyBytes   int          `json:"conversion_body_bytes"`
	Conversion      bool         `json:"conversion"`
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

// pathsCRD is the CRD of rows 1–5, 7, 8 and 9: PathItems in group, v1 only,
// namespaced, with a structural schema of the spec the bodies carry.
func pathsCRD(group, runID string) []byte {
	str := map[string]any{"type": "string"}
	integer := map[string]any{"type": "integer"}
	crd := map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": pathsPlural + "." + group, "labels": map[string]string{pathsLabel: runID}},
		"spec": map[string]any{
			"group": group, "scope": "Namespaced",
			"names": map[string]any{"plural": pathsPlural, "singular": "pathitem", "kind": "PathItem", "listKind": "PathItemList"},
			"versions": []any{map[string]any{"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "properties": map[string]any{
					"spec": map[string]any{"type": "object", "properties": map[string]any{
						"size": integer, "color": str, "seq": integer, "data": str,
						"tags": map[string]any{"type": "array", "items": str},
					}},
				}}}}},
		},
	}
	b, _ := json.Marshal(crd)
	return b
}

// pathsBody is PathItem i, padded with spec.data (hex digits drawn from a
// generator seeded by i, so about as compressible as real data, not a run
// of one byte) to exactly size bytes when it can be.
func pathsBody(group, name string, i, size int) []byte {
	spec := map[string]any{"size": i % 100, "color": []string{"red", "green", "blue"}[i%3], "tags": []string{"x", "y"}, "seq": 0, "data": ""}
	obj := map[string]any{
		"apiVersion": group + "/v1", "kind": "PathItem",
		"metadata": map[string]any{"name": name, "labels": map[string]string{"bench": "crdbench"}},
		"spec":     spec,
	}
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
	const hex = "0123456789abcdef"
	d := make([]byte, n)
	for j := range d {
		d[j] = hex[r.IntN(16)]
	}
	return string(d)
}

// withLabel adds the run's label to a CRD body.
func withLabel(crd []byte, runID string) []byte {
	var m map[string]any
	if json.Unmarshal(crd, &m) != nil {
		return crd
	}
	md, _ := m["metadata"].(map[string]any)
	if md == nil {
		return crd
	}
	md["labels"] = map[string]string{pathsLabel: runID}
	b, _ := json.Marshal(m)
	return b
}

// crdGeneration is metadata.generation of a CRD (decoded JSON).
func crdGeneration(crd map[string]any) int64 {
	md, _ := crd["metadata"].(map[string]any)
	g, _ := md["generation"].(float64)
	return int64(g)
}

// crdConversion is spec.conversion.strategy of a CRD (decoded JSON).
func crdConversion(crd map[string]any) string {
	spec, _ := crd["spec"].(map[string]any)
	conv, _ := spec["conversion"].(map[string]any)
	s, _ := conv["strategy"].(string)
	return s
}

// crdHasColumn reports whether version v of a CRD has a printer column.
func crdHasColumn(crd map[string]any, v, column string) bool {
	spec, _ := crd["spec"].(map[string]any)
	versions, _ := spec["versions"].([]any)
	for _, x := range versions {
		vm, _ := x.(map[string]any)
		if vm["name"] != v {
			continue
		}
		cols, _ := vm["additionalPrinterColumns"].([]any)
		for _, c := range cols {
			if cm, _ := c.(map[string]any); cm["name"] == column {
				return true
			}
		}
	}
	return false
}

// addColumn adds a printer column to version v of a CRD (decoded JSON).
func addColumn(crd map[string]any, v string, column map[string]any) bool {
	spec, _ := crd["spec"].(map[string]any)
	versions, _ := spec["versions"].([]any)
	for _, x := range versions {
		vm, _ := x.(map[string]any)
		if vm["name"] != v {
			continue
		}
		cols, _ := vm["additionalPrinterColumns"].([]any)
		vm["additionalPrinterColumns"] = append(cols, column)
		return true
	}
	return false
}

// checkNames checks a list's items: exactly n, unique, all named by name(i)
// for some i < n. seen (optional) accumulates over pages.
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
	ctx     context.Context
	c       *client
	base    string
	ns      string
	res     *pathsResult
	hook    *webhookCounter
	hookURL string
	caPEM   []byte
	rss     namedPIDs
	created map[string]bool // CRDs of this run not yet deleted
	failed  map[string]bool // rows whose first failure is in res.Failures

	n, creates, conc, gets, lists, walks, pageLimit int
	watchers                                        []int
	perConn, updates, freshCRDs, bodyBytes          int
	interval, watchWait, settle, rssSettle          time.Duration
	waitFor, deleteWait, phaseLimit                 time.Duration
	conversion                                      bool
}

// do sends one request bounded by the run's context and limit.
func (p *pathsRun) do(method, url string, body []byte, limit time.Duration) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(p.ctx, limit)
	defer cancel()
	return p.c.do(ctx, method, url, body)
}

// fail records a row's failure in round rd: in rd.Failed (the round's
// figure of that row is then not used) and, the first time for the row,
// in res.Failures.
func (p *pathsRun) fail(rd *pathsRound, row string, f failure) {
	if p.ctx.Err() != nil {
		return // interrupted: that is the run's error, not the row's
	}
	if rd.Failed == nil {
		rd.Failed = map[string]string{}
	}
	msg := f.Error
	if msg == "" {
		msg = fmt.Sprintf("%s %s → HTTP %d", f.Method, f.Path, f.Status)
	}
	if _, ok := rd.Failed[row]; !ok {
		rd.Failed[row] = msg
	}
	if !p.failed[row] {
		p.failed[row] = true
		f.Phase = fmt.Sprintf("round %d: %s", rd.Round, row)
		p.res.Failures = append(p.res.Failures, f)
	}
	log.Printf("round %d: %s FAILED: %s", rd.Round, row, msg)
}

func (p *pathsRun) httpFail(method, url string, code int, b []byte, err error) failure {
	return *p.c.fail("", method, url, code, b, err)
}

// createCRD POSTs a CRD; one that exists already is left alone (it could be
// someone else's).
func (p *pathsRun) createCRD(name string, body []byte) (failure, bool) {
	if f, err := p.c.create(p.ctx, "", "CRD "+name, p.base+crdPath, body); err != nil {
		f.Phase, f.Error = "", strings.TrimSpace(err.Error()+" "+f.Error)
		return *f, false
	}
	p.created[name] = true
	return failure{}, true
}

// waitCRD polls a CRD every poll until cond holds, within -wait.
func (p *pathsRun) waitCRD(name string, t0 time.Time, poll time.Duration, cond func(map[string]any) bool) (time.Duration, int, error) {
	return p.c.waitCRD(p.ctx, name, t0, p.waitFor, poll, cond)
}

// deleteCRDs deletes CRDs of this run and waits until they are gone, all
// within limit; it says what happened. It uses a context of its own, as the
// run's may have been cancelled.
func (p *pathsRun) deleteCRDs(names []string, limit time.Duration) string {
	ctx, cancel := context.WithTimeout(context.Background(), limit+10*time.Second)
	defer cancel()
	t0 := time.Now()
	var notes []string
	var pending []string
	for _, name := range names {
		code, b, err := p.c.do(ctx, http.MethodDelete, p.base+crdPath+"/"+name, nil)
		switch {
		case err == nil && code == http.StatusNotFound:
			delete(p.created, name)
		case err != nil || (code != http.StatusOK && code != http.StatusAccepted):
			notes = append(notes, fmt.Sprintf("DELETE %s: HTTP %d %v %s", name, code, err, truncate(b, 200)))
		default:
			pending = append(pending, name)
		}
	}
	deadline := time.Now().Add(limit)
	for i := 0; i < 100_000 && len(pending) > 0 && time.Now().Before(deadline); i++ {
		time.Sleep(200 * time.Millisecond)
		var still []string
		for _, name := range pending {
			code, _, err := p.c.do(ctx, http.MethodGet, p.base+crdPath+"/"+name, nil)
			if err == nil && code == http.StatusNotFound {
				delete(p.created, name)
				continue
			}
			still = append(still, name)
		}
		pending = still
	}
	gone := len(names) - len(pending) - len(notes)
	s := fmt.Sprintf("%d CRD(s) deleted and gone after %.1f s", gone, time.Since(t0).Seconds())
	if len(pending) > 0 {
		s += fmt.Sprintf("; still there after %v: %s", limit, strings.Join(pending, ", "))
	}
	if len(notes) > 0 {
		s += "; " + strings.Join(notes, "; ")
	}
	return s
}

func parseWatchers(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
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
	var (
		server     = fs.String("server", "", "API server base URL, https:// or http:// (loopback only)")
		name       = fs.String("name", "server", "name of the server in the results")
		namespace  = fs.String("namespace", "default", "namespace of the objects (it must exist; each round has CRDs of its own)")
		runID      = fs.String("run-id", "", "tag of this run in the CRDs' groups and in their label "+pathsLabel+" (default: from the time and PID)")
		n          = fs.Int("n", 10000, "objects stored per round (lists, walks, memory, the CRD deleted, the conversion CRD)")
		rounds     = fs.Int("rounds", 3, "rounds; the report gives the median over them")
		creates    = fs.Int("creates", 5000, "of the n creates, how many are measured (the first ones)")
		conc       = fs.Int("concurrency", 16, "workers of the creates (one HTTP/2 connection)")
		gets       = fs.Int("gets", 1000, "sequential GETs of single objects per round")
		lists      = fs.Int("lists", 3, "full lists (gzip) per round; the round's figure is their median")
		walks      = fs.Int("walks", 3, "paged walks per round; the round's figure is their median")
		pageLimit  = fs.Int("page-limit", 500, "limit of each page of the walks")
		watchers   = fs.String("watchers", "200,1000", "watch fan-out: numbers of watchers, comma-separated")
		perConn    = fs.Int("watchers-per-conn", 100, "watches per HTTP/2 connection")
		updates    = fs.Int("watch-updates", 100, "merge patches made while the watches run")
		interval   = fs.Duration("watch-interval", 50*time.Millisecond, "one patch sent this often (sequential)")
		watchWait  = fs.Duration("watch-wait", 30*time.Second, "after the last patch, how long to wait for the last deliveries")
		freshCRDs  = fs.Int("fresh-crds", 3, "first create after Established: fresh CRDs per round")
		bodyBytes  = fs.Int("body-bytes", 1024, "size of each create body (padded with spec.data)")
		conversion = fs.Bool("conversion", true, "measure the first list through the conversion webhook after a CRD edit and after a flip None → Webhook")
		settle     = fs.Duration("settle", 0, "pause after a CRD is Established before its objects are created (the reference needs 2s)")
		rssSettle  = fs.Duration("rss-settle", 3*time.Second, "pause between the creates and reading the RSS")
		waitFor    = fs.Duration("wait", 60*time.Second, "how long to wait for a CRD to be Established or to show a change")
		deleteWait = fs.Duration("delete-wait", 5*time.Minute, "how long to wait for a deleted CRD (and its collection) to be gone")
		phaseLimit = fs.Duration("phase-timeout", 5*time.Minute, "time limit of each phase of requests")
		jsonOut    = fs.String("json", "", "write the results as JSON to this file")
		rssPIDs    namedPIDs
	)
	fs.Var(&rssPIDs, "rss-pid", "name=PID of a server process whose VmRSS is read (repeatable; the reference: apiserver and etcd)")
	_ = fs.Parse(args)
	ws, err := parseWatchers(*watchers)
	if err != nil {
		return err
	}
	if err := checkFlags([]bound{
		{*n < 1 || *n > 100000, "1 <= -n <= 100000"},
		{*rounds < 1 || *rounds > 20, "1 <= -rounds <= 20"},
		{*creates < 1 || *conc < 1 || *conc > 64, "-creates >= 1 and 1 <= -concurrency <= 64"},
		{*gets < 1 || *gets > 100000 || *lists < 1 || *lists > 50 || *walks < 1 || *walks > 50, "1 <= -gets <= 100000, 1 <= -lists <= 50, 1 <= -walks <= 50"},
		{*pageLimit < 1 || *pageLimit > 10000, "1 <= -page-limit <= 10000"},
		{*perConn < 1 || *perConn > 1000 || *updates < 1 || *updates > 10000, "1 <= -watchers-per-conn <= 1000, 1 <= -watch-updates <= 10000"},
		{*interval < 0 || *interval > 10*time.Second || *watchWait < time.Second || *watchWait > 10*time.Minute, "0 <= -watch-interval <= 10s, 1s <= -watch-wait <= 10m"},
		{*freshCRDs < 0 || *freshCRDs > 50 || *bodyBytes < 0 || *bodyBytes > 1<<20, "0 <= -fresh-crds <= 50, 0 <= -body-bytes <= 1 MiB"},
		{*settle < 0 || *settle > time.Minute || *rssSettle < 0 || *rssSettle > time.Minute, "0 <= -settle, -rss-settle <= 1m"},
		{*waitFor < time.Second || *waitFor > 10*time.Minute || *deleteWait < time.Second || *deleteWait > 30*time.Minute, "1s <= -wait <= 10m, 1s <= -delete-wait <= 30m"},
		{*phaseLimit < time.Second || *phaseLimit > time.Hour, "1s <= -phase-timeout <= 1h"},
		{*namespace == "", "-namespace"},
	}); err != nil {
		return err
	}
	if *runID == "" {
		*runID = strconv.FormatInt(time.Now().Unix(), 36) + strconv.Itoa(os.Getpid()%1000)
	}
	if len(*runID) > 20 || strings.Trim(*runID, "abcdefghijklmnopqrstuvwxyz0123456789") != "" {
		return errors.New("-run-id: at most 20 lower-case letters and digits")
	}
	*creates = min(*creates, *n)
	c, err := connect(*server, t, *conc)
	if err != nil {
		return err
	}
	// Interrupted, crdbench still deletes the CRDs it created.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	base := c.base
	res := &pathsResult{Server: base, Name: *name, ClientCert: t.cert != "", Date: time.Now().UTC().Format(time.RFC3339), RunID: *runID,
		Namespace: *namespace, N: *n, Rounds: *rounds, Creates: *creates, Concurrency: *conc, Gets: *gets, Lists: *lists, Walks: *walks,
		PageLimit: *pageLimit, Watchers: ws, WatchersPerConn: *perConn, WatchUpdates: *updates, WatchIntervalMs: ms(*interval),
		WatchWaitSec: watchWait.Seconds(),
		FreshCRDs:    *freshCRDs, Conversion: *conversion, SettleSec: settle.Seconds(), RSSSettleSec: rssSettle.Seconds(), LoadStart: loadavg()}
	res.BodyBytes = len(pathsBody(fmt.Sprintf("r1-%s.%s", *runID, pathsDomain), "item-00000", 0, *bodyBytes))
	res.ConvBodyBytes = len(crontabBody(crontab.Group, "crontab-00000", 0))
	for _, p := range rssPIDs {
		res.RSSProcs = append(res.RSSProcs, p.name)
	}
	p := &pathsRun{ctx: ctx, c: c, base: base, ns: *namespace, res: res, rss: rssPIDs,
		created: map[string]bool{}, failed: map[string]bool{},
		n: *n, creates: *creates, conc: *conc, gets: *gets, lists: *lists, walks: *walks, pageLimit: *pageLimit, watchers: ws,
		perConn: *perConn, updates: *updates, freshCRDs: *freshCRDs, bodyBytes: *bodyBytes, interval: *interval, watchWait: *watchWait,
		settle: *settle, rssSettle: *rssSettle, waitFor: *waitFor, deleteWait: *deleteWait, phaseLimit: *phaseLimit, conversion: *conversion}

	if *conversion {
		hook, hookURL, caPEM, hsrv, err := serveCronTabWebhook()
		if err != nil {
			return err
		}
		defer hsrv.Close()
		p.hook, p.hookURL, p.caPEM = hook, hookURL, caPEM
		res.WebhookURL = hookURL
		log.Printf("conversion webhook on %s", hookURL)
	}

	finish := func(err error) error {
		if len(p.created) > 0 {
			var names []string
			for nm := range p.created {
				names = append(names, nm)
			}
			slices.Sort(names)
			s := p.deleteCRDs(names, p.deleteWait)
			res.Cleanup = append(res.Cleanup, "at the end: "+s)
			log.Printf("cleanup: %s", s)
			if len(p.created) > 0 {
				res.Failures = append(res.Failures, failure{Phase: "cleanup", Error: "CRDs left behind: " + s})
			}
		}
		res.Protocol = c.protocol()
		res.LoadEnd = loadavg()
		if err == nil && ctx.Err() != nil {
			err = errors.New("interrupted")
		}
		return done(*jsonOut, res, &res.Error, res.Failures, err)
	}

	for r := 1; r <= *rounds; r++ {
		if ctx.Err() != nil {
			break
		}
		rd := pathsRound{Round: r}
		t0 := time.Now()
		err := p.round(&rd)
		rd.WallSec = time.Since(t0).Seconds()
		rd.Load1 = load1()
		res.RoundsData = append(res.RoundsData, rd)
		log.Printf("round %d done in %.1f s (load %.2f)", r, rd.WallSec, rd.Load1)
		if err != nil {
			if ctx.Err() != nil {
				err = errors.New("interrupted")
			}
			return finish(err)
		}
	}
	return finish(nil)
}

// round runs every row once, on CRDs of its own, and deletes them. An error
// stops the run (the main CRD could not be set up); a row's failure is
// recorded in rd.Failed and the round goes on.
func (p *pathsRun) round(rd *pathsRound) error {
	group := fmt.Sprintf("r%d-%s.%s", rd.Round, p.res.RunID, pathsDomain)
	crdName := pathsPlural + "." + group
	rd.CRD = crdName
	coll := p.base + "/apis/" + group + "/v1/namespaces/" + p.ns + "/" + pathsPlural
	itemName := func(i int) string { return "item-" + strconv.Itoa(100000 + i)[1:] }
	var roundCRDs []string // deleted at the end of the round
	defer func() {
		var left []string
		for _, nm := range roundCRDs {
			if p.created[nm] {
				left = append(left, nm)
			}
		}
		if len(left) > 0 {
			s := p.deleteCRDs(left, p.deleteWait)
			p.res.Cleanup = append(p.res.Cleanup, fmt.Sprintf("round %d: %s", rd.Round, s))
			log.Printf("round %d cleanup: %s", rd.Round, s)
		}
	}()

	log.Printf("round %d: CRD %s", rd.Round, crdName)
	if f, ok := p.createCRD(crdName, pathsCRD(group, p.res.RunID)); !ok {
		p.fail(rd, "setup", f)
		return errors.New(f.Error)
	}
	roundCRDs = append(roundCRDs, crdName)
	t0 := time.Now()
	if _, _, err := p.waitCRD(crdName, t0, 20*time.Millisecond, crdEstablished); err != nil {
		p.fail(rd, "setup", failure{Phase: "setup", Error: err.Error()})
		return err
	}
	rd.EstablishedSec = time.Since(t0).Seconds()
	time.Sleep(p.settle)

	// Rows 2 and 9: the creates, RSS before and after.
	rd.RSSBefore, rd.RSSBeforeMiB = readRSS(p.rss)
	bodies := make([][]byte, p.n)
	for i := range bodies {
		bodies[i] = pathsBody(group, itemName(i), i, p.bodyBytes)
	}
	log.Printf("round %d: %d creates with %d workers (measured)", rd.Round, p.creates, p.conc)
	cr := p.c.phase(p.ctx, "creates", p.creates, p.conc, p.phaseLimit, func(i int) request {
		return request{http.MethodPost, coll, bodies[i], []int{http.StatusCreated}}
	}, nil)
	rd.Creates = &cr
	if cr.FirstError != nil {
		p.fail(rd, "creates", *cr.FirstError)
	}
	if rest := p.n - p.creates; rest > 0 && !cr.Aborted {
		log.Printf("round %d: %d more creates (setup)", rd.Round, rest)
		pop := p.c.phase(p.ctx, "populate", rest, p.conc, p.phaseLimit, func(i int) request {
			return request{http.MethodPost, coll, bodies[p.creates+i], []int{http.StatusCreated}}
		}, nil)
		rd.Populate = &pop
		if pop.FirstError != nil {
			p.fail(rd, "populate", *pop.FirstError)
		}
	}
	stored := rd.Creates.Errors == 0 && !rd.Creates.Aborted && (rd.Populate == nil || (rd.Populate.Errors == 0 && !rd.Populate.Aborted))
	if p.ctx.Err() != nil {
		return p.ctx.Err()
	}
	if !stored {
		p.fail(rd, "rss", failure{Error: "not all objects could be created"})
		return p.conversionAndRest(rd, &roundCRDs)
	}
	time.Sleep(p.rssSettle)
	rd.RSS, rd.RSSMiB = readRSS(p.rss)

	if p.ctx.Err() != nil {
		return p.ctx.Err()
	}
	// Row 1: sequential GETs of single objects, spread over the n.
	log.Printf("round %d: %d sequential GETs", rd.Round, p.gets)
	stride := max(1, p.n/p.gets)
	var wrong atomic.Int64
	var firstWrong atomic.Value
	g := p.c.phase(p.ctx, "gets", p.gets, 1, p.phaseLimit, func(i int) request {
		return request{http.MethodGet, coll + "/" + itemName((i*stride)%p.n), nil, []int{http.StatusOK}}
	}, func(i int, ok bool, b []byte) {
		if !ok {
			return
		}
		// The answer is the object asked for.
		var o struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(b, &o); err != nil || o.Kind != "PathItem" || o.Metadata.Name != itemName((i*stride)%p.n) {
			wrong.Add(1)
			firstWrong.CompareAndSwap(nil, fmt.Sprintf("GET of %s answered %s %q (%v)", itemName((i*stride)%p.n), o.Kind, o.Metadata.Name, err))
		}
	})
	rd.Gets = &g
	if g.FirstError != nil {
		p.fail(rd, "gets", *g.FirstError)
	} else if n := wrong.Load(); n > 0 {
		p.fail(rd, "gets", failure{Method: http.MethodGet, Path: strings.TrimPrefix(coll, p.base) + "/…", Status: 200,
			Error: fmt.Sprintf("wrong answer in %d of %d GETs; first: %v", n, g.Requests, firstWrong.Load())})
	}

	if p.ctx.Err() != nil {
		return p.ctx.Err()
	}
	// Rows 3 and 4: full lists with gzip, and walks by pages.
	log.Printf("round %d: %d full lists (gzip), %d walks by pages of %d", rd.Round, p.lists, p.walks, p.pageLimit)
	rd.ListMedianMs = p.repeat(rd, "list", p.lists, func() (float64, *failure) {
		s, f := p.gzipList(coll)
		rd.Lists = append(rd.Lists, s)
		return s.Ms, f
	})
	if p.ctx.Err() != nil {
		return p.ctx.Err()
	}
	rd.WalkMedianMs = p.repeat(rd, "pages", p.walks, func() (float64, *failure) {
		w, f := p.pageWalk(coll)
		rd.Walks = append(rd.Walks, w)
		return w.Ms, f
	})

	if p.ctx.Err() != nil {
		return p.ctx.Err()
	}
	// Row 5: watch fan-out.
	for k, w := range p.watchers {
		log.Printf("round %d: watch fan-out, %d watchers", rd.Round, w)
		wr, f := p.watchFanOut(rd.Round, k, coll, w, itemName)
		rd.Watches = append(rd.Watches, wr)
		if f != nil {
			p.fail(rd, fmt.Sprintf("watch-%d", w), *f)
		}
	}

	if p.ctx.Err() != nil {
		return p.ctx.Err()
	}
	// Row 7: delete the CRD that holds the n objects.
	log.Printf("round %d: DELETE of the CRD holding %d objects", rd.Round, p.n)
	del, f := p.deleteTimed(crdName, coll)
	rd.Delete = del
	del.Objects = p.n
	if f != nil {
		p.fail(rd, "delete", *f)
	}
	return p.conversionAndRest(rd, &roundCRDs)
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
// objects). roundCRDs gets the CRDs they create, for the round's cleanup.
func (p *pathsRun) conversionAndRest(rd *pathsRound, roundCRDs *[]string) error {
	// Row 8: first create after Established.
	var fcs []float64
	for k := 1; k <= p.freshCRDs && p.ctx.Err() == nil; k++ {
		group := fmt.Sprintf("r%d-f%d-%s.%s", rd.Round, k, p.res.RunID, pathsDomain)
		fc, f := p.firstCreate(group, roundCRDs)
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
	// Row 6: conversion webhook after a CRD edit, and after a flip.
	if p.conversion && p.ctx.Err() == nil {
		p.convRow(rd, roundCRDs)
	}
	return p.ctx.Err()
}

// listNames decodes a list answer: its kind, continue token and item names.
func listNames(b []byte) (kind, cont string, names []string, err error) {
	var l struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Continue string `json:"continue"`
		} `json:"metadata"`
		Items []struct {
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		} `json:"items"`
	}
	if err := json.Unmarshal(b, &l); err != nil {
		return "", "", nil, err
	}
	names = make([]string, len(l.Items))
	for i, it := range l.Items {
		names[i] = it.Metadata.Name
	}
	return l.Kind, l.Metadata.Continue, names, nil
}

// gzipList is one full list with gzip, checked afterwards (all n items,
// each once).
func (p *pathsRun) gzipList(coll string) (gzipList, *failure) {
	ctx, cancel := context.WithTimeout(p.ctx, 2*time.Minute)
	defer cancel()
	t0 := time.Now()
	code, b, wire, enc, err := p.c.getGzip(ctx, coll)
	d := time.Since(t0)
	s := gzipList{Ms: ms(d), Status: code, Bytes: len(b), WireBytes: wire, Encoding: enc}
	if err != nil || code != http.StatusOK {
		f := p.httpFail(http.MethodGet, coll, code, b, err)
		return s, &f
	}
	kind, _, names, err := listNames(b)
	problem := ""
	switch {
	case err != nil:
		problem = "decode: " + err.Error()
	case kind != "PathItemList":
		problem = "kind " + kind
	case len(names) != p.n:
		problem = fmt.Sprintf("%d items, want %d", len(names), p.n)
	default:
		problem = checkNames(names, p.n, map[string]bool{})
	}
	s.Items = len(names)
	if problem != "" {
		f := failure{Method: http.MethodGet, Path: strings.TrimPrefix(coll, p.base), Status: code, Error: "wrong answer: " + problem}
		return s, &f
	}
	return s, nil
}

// pageWalk lists the collection by pages of pageLimit, following continue
// tokens, and checks the union of the pages: n items, each once.
func (p *pathsRun) pageWalk(coll string) (pageWalk, *failure) {
	ctx, cancel := context.WithTimeout(p.ctx, 5*time.Minute)
	defer cancel()
	var w pageWalk
	seen := make(map[string]bool, p.n)
	cont := ""
	maxPages := p.n/p.pageLimit + 10
	t0 := time.Now()
	for page := 0; ; page++ {
		if page >= maxPages {
			f := failure{Method: http.MethodGet, Path: strings.TrimPrefix(coll, p.base), Error: fmt.Sprintf("still a continue token after %d pages", page)}
			return w, &f
		}
		u := coll + "?limit=" + strconv.Itoa(p.pageLimit)
		if cont != "" {
			u += "&continue=" + url.QueryEscape(cont)
		}
		t1 := time.Now()
		code, b, wire, enc, err := p.c.getGzip(ctx, u)
		pd := time.Since(t1)
		w.RequestMs += ms(pd)
		w.MaxPageMs = max(w.MaxPageMs, ms(pd))
		w.Pages++
		w.Bytes += len(b)
		w.WireBytes += wire
		if page == 0 {
			w.Encoding = enc
		}
		if err != nil || code != http.StatusOK {
			f := p.httpFail(http.MethodGet, u, code, b, err)
			f.Error = strings.TrimSpace(fmt.Sprintf("page %d: %s", page+1, f.Error))
			return w, &f
		}
		kind, next, names, err := listNames(b)
		problem := ""
		switch {
		case err != nil:
			problem = "decode: " + err.Error()
		case kind != "PathItemList":
			problem = "kind " + kind
		case len(names) > p.pageLimit:
			problem = fmt.Sprintf("%d items in a page of limit %d", len(names), p.pageLimit)
		default:
			problem = checkNames(names, p.n, seen)
		}
		if problem != "" {
			f := failure{Method: http.MethodGet, Path: strings.TrimPrefix(u, p.base), Status: code, Error: fmt.Sprintf("page %d: wrong answer: %s", page+1, problem)}
			return w, &f
		}
		cont = next
		if cont == "" {
			break
		}
	}
	w.Ms = ms(time.Since(t0))
	w.Items = len(seen)
	w.RequestMs = math3(w.RequestMs)
	if w.Items != p.n {
		f := failure{Method: http.MethodGet, Path: strings.TrimPrefix(coll, p.base), Status: 200, Error: fmt.Sprintf("walk saw %d items, want %d", w.Items, p.n)}
		return w, &f
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
		f := p.httpFail(http.MethodDelete, crdURL, code, b, err)
		return del, &f
	}
	crdGone, collGone := false, false
	deadline := t0.Add(p.deleteWait)
	for i := 0; i < 1_000_000 && (!crdGone || !collGone) && time.Now().Before(deadline) && p.ctx.Err() == nil; i++ {
		del.Polls++
		if !crdGone {
			code, _, err := p.do(http.MethodGet, crdURL, nil, 10*time.Second)
			if err == nil && code == http.StatusNotFound {
				crdGone, del.GoneMs = true, ms(time.Since(t0))
				delete(p.created, crdName)
			}
		}
		if !collGone {
			code, _, err := p.do(http.MethodGet, coll+"?limit=1", nil, 10*time.Second)
			del.CollStatuses[statusKey(code, err)]++
			if err == nil && code == http.StatusNotFound {
				collGone, del.CollectionGoneMs = true, ms(time.Since(t0))
			}
		}
		if !crdGone || !collGone {
			time.Sleep(20 * time.Millisecond)
		}
	}
	log.Printf("  CRD gone after %.0f ms, collection 404 after %.0f ms (%d polls)", del.GoneMs, del.CollectionGoneMs, del.Polls)
	if !crdGone || !collGone {
		f := failure{Method: http.MethodDelete, Path: strings.TrimPrefix(crdURL, p.base),
			Error: fmt.Sprintf("after %v: CRD gone %v, collection 404 %v (collection answers: %v)", p.deleteWait, crdGone, collGone, del.CollStatuses)}
		return del, &f
	}
	return del, nil
}

// firstCreate creates a fresh CRD, polls it every 10 ms until Established,
// then POSTs one object, again every 10 ms while the answer is 404, 429 or
// 503, until 201.
func (p *pathsRun) firstCreate(group string, roundCRDs *[]string) (*firstCreate, *failure) {
	name := pathsPlural + "." + group
	fc := &firstCreate{CRD: name, Statuses: map[string]int{}}
	t0 := time.Now()
	if f, ok := p.createCRD(name, pathsCRD(group, p.res.RunID)); !ok {
		return nil, &f
	}
	*roundCRDs = append(*roundCRDs, name)
	d, _, err := p.waitCRD(name, t0, 10*time.Millisecond, crdEstablished)
	if err != nil {
		return nil, &failure{Method: http.MethodGet, Path: crdPath + "/" + name, Error: err.Error()}
	}
	fc.EstablishedMs = ms(d)
	coll := p.base + "/apis/" + group + "/v1/namespaces/" + p.ns + "/" + pathsPlural
	body := pathsBody(group, "first", 0, 0)
	t1 := time.Now()
	deadline := t1.Add(p.waitFor)
	for fc.Attempts < 100_000 {
		fc.Attempts++
		code, b, err := p.do(http.MethodPost, coll, body, 30*time.Second)
		if err == nil && code == http.StatusCreated {
			fc.Ms = ms(time.Since(t1))
			break
		}
		retry := err == nil && (code == http.StatusNotFound || code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable)
		if !retry || time.Now().After(deadline) || p.ctx.Err() != nil {
			f := p.httpFail(http.MethodPost, coll, code, b, err)
			f.Error = strings.TrimSpace(fmt.Sprintf("attempt %d after Established: %s (before: %v)", fc.Attempts, f.Error, fc.Statuses))
			return nil, &f
		}
		fc.Statuses[statusKey(code, err)]++
		time.Sleep(10 * time.Millisecond)
	}
	if len(fc.Statuses) == 0 {
		fc.Statuses = nil
	}
	log.Printf("  %s: Established after %.0f ms; 201 %.1f ms later, attempt %d", name, fc.EstablishedMs, fc.Ms, fc.Attempts)
	return fc, nil
}

// convList lists the CronTab collection as v1 (plain JSON, as the convert
// phase) and checks the answer: n items of v1, with host and port converted
// from each hostPort when through the webhook. The first GET is timed alone;
// a 429 is retried after its Retry-After (1 s if none), as client-go does,
// until a 200 (at most 100 GETs and -wait).
func (p *pathsRun) convList(group string, webhook bool) (*convListRun, *failure) {
	path := p.base + "/apis/" + group + "/v1/namespaces/" + p.ns + "/crontabs"
	before := p.hook.snapshot()
	cl := &convListRun{}
	deadline := time.Now().Add(p.waitFor)
	t0 := time.Now()
	for {
		cl.Attempts++
		ctx, cancel := context.WithTimeout(p.ctx, 2*time.Minute)
		t1 := time.Now()
		code, b, hdr, err := p.c.call(ctx, http.MethodGet, path, nil)
		after := time.Second
		if s, perr := strconv.Atoi(hdr.Get("Retry-After")); err == nil && perr == nil && s >= 0 && s <= 60 {
			after = time.Duration(s) * time.Second
		}
		d := time.Since(t1)
		cancel()
		if cl.Attempts == 1 {
			cl.Ms, cl.Status = ms(d), code
			if code != http.StatusOK {
				var st struct {
					Message string `json:"message"`
				}
				_ = json.Unmarshal(b, &st)
				cl.Message = st.Message
			}
		}
		if err == nil && code == http.StatusTooManyRequests && cl.Attempts < 100 && time.Now().Add(after).Before(deadline) {
			time.Sleep(after)
			continue
		}
		cl.UntilOKMs, cl.Bytes = ms(time.Since(t0)), len(b)
		cl.Webhook = p.hook.snapshot().minus(before)
		if err != nil || code != http.StatusOK {
			f := p.httpFail(http.MethodGet, path, code, b, err)
			f.Error = strings.TrimSpace(fmt.Sprintf("%s (GET %d of this list)", f.Error, cl.Attempts))
			f.Body += fmt.Sprintf(" [webhook during this list: %d calls, %d objects, %d non-200]", cl.Webhook.Calls, cl.Webhook.Objects, cl.Webhook.Non200)
			return cl, &f
		}
		if _, problem := checkCronTabs(b, p.n, "crontab-", group+"/v1", webhook); problem != "" {
			return cl, &failure{Method: http.MethodGet, Path: strings.TrimPrefix(path, p.base), Status: code, Error: "wrong answer: " + problem}
		}
		cl.Items = p.n
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
	crd, code, b, err := p.c.getCRD(p.ctx, name)
	if crd == nil {
		f := p.httpFail(http.MethodGet, p.base+crdPath+"/"+name, code, b, err)
		return nil, &f
	}
	if err := edit(crd); err != nil {
		return nil, &failure{Method: http.MethodPut, Path: crdPath + "/" + name, Error: err.Error()}
	}
	body, _ := json.Marshal(crd)
	ch := &convChange{}
	t0 := time.Now()
	code, b, err = p.do(http.MethodPut, p.base+crdPath+"/"+name, body, 30*time.Second)
	ch.PutMs = ms(time.Since(t0))
	if err != nil || code != http.StatusOK {
		f := p.httpFail(http.MethodPut, p.base+crdPath+"/"+name, code, b, err)
		return ch, &f
	}
	var put map[string]any
	_ = json.Unmarshal(b, &put)
	gen := crdGeneration(put)
	d, polls, err := p.waitCRD(name, t0, 10*time.Millisecond, func(c map[string]any) bool {
		return crdGeneration(c) >= gen && crdEstablished(c) && observed(c)
	})
	ch.ObservedMs, ch.Polls = ms(d), polls
	if err != nil {
		return ch, &failure{Method: http.MethodGet, Path: crdPath + "/" + name, Error: err.Error()}
	}
	before := p.hook.snapshot()
	deadline := time.Now().Add(p.waitFor)
	for ch.ServePolls = 1; !served(); ch.ServePolls++ {
		if ch.ServePolls >= 100_000 || time.Now().After(deadline) || p.ctx.Err() != nil {
			return ch, &failure{Method: http.MethodGet, Path: crdPath + "/" + name, Error: fmt.Sprintf("the change was not served within %v (%d GETs of one object)", p.waitFor, ch.ServePolls)}
		}
		time.Sleep(10 * time.Millisecond)
	}
	ch.ServedMs = ms(time.Since(t0))
	ch.ServeHooks = p.hook.snapshot().minus(before)
	return ch, nil
}

// convRow is row 6: a CronTab CRD with Webhook conversion and n objects in
// v1beta1; a warm list as v1; a printer column added, then the first list;
// the conversion set to None (one list), then back to the same Webhook, then
// the first list.
func (p *pathsRun) convRow(rd *pathsRound, roundCRDs *[]string) {
	// The example webhook converts the group example.com only: every round
	// creates crontabs.example.com afresh (and deletes it at its end). One
	// that exists already is someone else's, and left alone.
	group, name := crontab.Group, webhookCRDName
	cv := &convPaths{CRD: name}
	rd.Conv = cv
	log.Printf("round %d: conversion webhook CRD %s", rd.Round, name)
	if f, ok := p.createCRD(name, withLabel(crontabCRD(group, p.hookURL, p.caPEM), p.res.RunID)); !ok {
		p.fail(rd, "conv-setup", f)
		return
	}
	*roundCRDs = append(*roundCRDs, name)
	if _, _, err := p.waitCRD(name, time.Now(), 20*time.Millisecond, crdEstablished); err != nil {
		p.fail(rd, "conv-setup", failure{Error: err.Error()})
		return
	}
	time.Sleep(p.settle)
	coll := p.base + "/apis/" + group + "/v1beta1/namespaces/" + p.ns + "/crontabs"
	bodies := make([][]byte, p.n)
	for i := range bodies {
		bodies[i] = crontabBody(group, "crontab-"+strconv.Itoa(100000 + i)[1:], i)
	}
	pop := p.c.phase(p.ctx, "conv-populate", p.n, p.conc, p.phaseLimit, func(i int) request {
		return request{http.MethodPost, coll, bodies[i], []int{http.StatusCreated}}
	}, nil)
	cv.Populate = &pop
	if pop.FirstError != nil || pop.Aborted {
		f := failure{Error: "not all CronTabs could be created"}
		if pop.FirstError != nil {
			f = *pop.FirstError
		}
		p.fail(rd, "conv-setup", f)
		return
	}
	for _, dst := range []**convListRun{&cv.First, &cv.Warm} {
		var f *failure
		if *dst, f = p.convList(group, true); f != nil {
			p.fail(rd, "conv-setup", *f)
			return
		}
	}
	log.Printf("  first list as v1: %.1f ms, %d webhook calls; warm list: %.1f ms, %d calls", cv.First.Ms, cv.First.Webhook.Calls, cv.Warm.Ms, cv.Warm.Webhook.Calls)

	// What one object's GET shows: the printer columns of its Table, and
	// whether its v1 has host (through the webhook) or not (None).
	obj := p.base + "/apis/" + group + "/v1/namespaces/" + p.ns + "/crontabs/crontab-00000"
	hasColumn := func() bool {
		var t struct {
			ColumnDefinitions []tableColumn `json:"columnDefinitions"`
		}
		code, err := p.c.getJSON(p.ctx, obj, "application/json;as=Table;v=v1;g=meta.k8s.io", &t)
		return err == nil && code == http.StatusOK && slices.Contains(t.ColumnDefinitions, tableColumn{Name: "Image"})
	}
	hostIs := func(want bool) func() bool {
		return func() bool {
			var o struct {
				Host *string `json:"host"`
			}
			code, err := p.c.getJSON(p.ctx, obj, "application/json", &o)
			return err == nil && code == http.StatusOK && (o.Host != nil) == want
		}
	}

	// The changes, each then served and listed as v1: a printer column on
	// v1 (conversion untouched); Webhook → None; None → the same Webhook as
	// before.
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
		row, what string
		dst       **convChange
		edit      func(map[string]any) error
		observed  func(map[string]any) bool
		served    func() bool
		webhook   bool
	}{
		{"conv-edit", "after the edit", &cv.Edit, func(c map[string]any) error {
			if !addColumn(c, "v1", map[string]any{"name": "Image", "type": "string", "jsonPath": ".spec.image"}) {
				return errors.New("no version v1 in the CRD")
			}
			return nil
		}, func(c map[string]any) bool { return crdHasColumn(c, "v1", "Image") }, hasColumn, true},
		{"conv-flip", "Webhook → None", &cv.ToNone, setConv(func(old any) any { webhookConv = old; return map[string]any{"strategy": "None"} }), convIs("None"), hostIs(false), false},
		{"conv-flip", "None → Webhook", &cv.Flip, setConv(func(any) any { return webhookConv }), convIs("Webhook"), hostIs(true), true},
	} {
		var f *failure
		if *x.dst, f = p.changeCRD(name, x.edit, x.observed, x.served); f != nil {
			p.fail(rd, x.row, *f)
			return
		}
		ch := *x.dst
		if ch.List, f = p.convList(group, x.webhook); f != nil {
			p.fail(rd, x.row, *f)
			return
		}
		log.Printf("  %s (observed in %.0f ms, served in %.0f ms): first GET HTTP %d in %.1f ms; a 200 list after %.1f ms, %d GETs, %d webhook calls",
			x.what, ch.ObservedMs, ch.ServedMs, ch.List.Status, ch.List.Ms, ch.List.UntilOKMs, ch.List.Attempts, ch.List.Webhook.Calls)
	}
}

// pathsSide is the paths benchmark of one server (paths-NAME.json).
type pathsSide sideOf[pathsResult]

// roundStat is the median over rounds of a round's figure f, with the
// smallest and largest. A round counts if none of rows failed in it and f
// has a figure for it (ok). If any round failed one of rows, there is no
// figure: a row is failed, never a number.
func (s pathsSide) roundStat(rows []string, f func(*pathsRound) (float64, bool)) (med, lo, hi float64, n int, why string) {
	if s.res == nil {
		return 0, 0, 0, 0, s.why
	}
	var v []float64
	failed := 0
	for i := range s.res.RoundsData {
		rd := &s.res.RoundsData[i]
		bad := false
		for _, row := range rows {
			if rd.Failed[row] != "" {
				bad = true
			}
		}
		if bad {
			failed++
			continue
		}
		if x, ok := f(rd); ok {
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

func phaseFig(get func(*pathsRound) *phase, f func(*phase) float64) func(*pathsRound) (float64, bool) {
	return func(rd *pathsRound) (float64, bool) {
		p := get(rd)
		if p == nil || p.Requests == 0 {
			return 0, false
		}
		return f(p), true
	}
}

func watchOf(rd *pathsRound, w int) *watchRun {
	return find(rd.Watches, func(x *watchRun) bool { return x.Watchers == w })
}

// convStep is one step of row 6 ("first", "warm", "edit", "none", "flip"):
// the CRD change before it (none for the first two) and its list.
func convStep(cv *convPaths, step string) (*convChange, *convListRun) {
	switch {
	case cv == nil:
		return nil, nil
	case step == "first":
		return nil, cv.First
	case step == "warm":
		return nil, cv.Warm
	}
	ch := map[string]*convChange{"edit": cv.Edit, "none": cv.ToNone, "flip": cv.Flip}[step]
	if ch == nil {
		return nil, nil
	}
	return ch, ch.List
}

// pathsTableRows are the rows of the paths table by their number, each figure the median
// over the rounds of both servers.
func pathsTableRows(first *pathsResult, nObj, rss string) map[string][]fig[pathsSide] {
	rows := map[string][]fig[pathsSide]{}
	add := func(no, metric string, withRatio bool, cell func(pathsSide) val) {
		f := fig[pathsSide]{metric, cell, nil}
		if withRatio {
			f.ratio = ratio
		}
		rows[no] = append(rows[no], f)
	}
	fig := func(keys []string, f func(*pathsRound) (float64, bool), prec int, unit string) func(pathsSide) val {
		return func(s pathsSide) val { return s.cell(keys, f, prec, unit) }
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
		add(x.no, x.metric, true, fig(k(x.key), phaseFig(x.get, func(p *phase) float64 { return p.PerSecond }), 0, " req/s"))
		add(x.no, "… p50", true, fig(k(x.key), phaseFig(x.get, func(p *phase) float64 { return p.P50Ms }), 2, " ms"))
		add(x.no, "… p99", true, fig(k(x.key), phaseFig(x.get, func(p *phase) float64 { return p.P99Ms }), 2, " ms"))
	}

	lastList := func(f func(gzipList) float64) func(*pathsRound) (float64, bool) {
		return func(rd *pathsRound) (float64, bool) {
			if len(rd.Lists) == 0 {
				return 0, false
			}
			return f(rd.Lists[len(rd.Lists)-1]), true
		}
	}
	add("3", fmt.Sprintf("full list of %s objects, `Accept-Encoding: gzip`, until read and decompressed (median of %d per round)", nObj, first.Lists), true,
		fig(k("list"), func(rd *pathsRound) (float64, bool) { return rd.ListMedianMs, rd.ListMedianMs > 0 }, 1, " ms"))
	add("3", "… bytes on the wire", true, fig(k("list"), lastList(func(s gzipList) float64 { return float64(s.WireBytes) / 1e6 }), 2, " MB"))
	add("3", "… decompressed", true, fig(k("list"), lastList(func(s gzipList) float64 { return float64(s.Bytes) / 1e6 }), 2, " MB"))
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

	lastWalk := func(f func(pageWalk) float64) func(*pathsRound) (float64, bool) {
		return func(rd *pathsRound) (float64, bool) {
			if len(rd.Walks) == 0 {
				return 0, false
			}
			return f(rd.Walks[len(rd.Walks)-1]), true
		}
	}
	add("4", fmt.Sprintf("paged list, `limit=%d`, walk of all %s objects by `continue` (gzip as above): time per walk (median of %d per round)", first.PageLimit, nObj, first.Walks), true,
		fig(k("pages"), func(rd *pathsRound) (float64, bool) { return rd.WalkMedianMs, rd.WalkMedianMs > 0 }, 1, " ms"))
	add("4", "… of which in the pages' requests (the rest is crdbench decoding each page for its `continue`)", true, fig(k("pages"), func(rd *pathsRound) (float64, bool) {
		var v []float64
		for _, x := range rd.Walks {
			v = append(v, x.RequestMs)
		}
		return median(v), len(v) > 0
	}, 1, " ms"))
	add("4", "… slowest page of a walk", true, fig(k("pages"), lastWalk(func(x pageWalk) float64 { return x.MaxPageMs }), 1, " ms"))
	add("4", "… pages per walk", false, fig(k("pages"), lastWalk(func(x pageWalk) float64 { return float64(x.Pages) }), 0, ""))
	add("4", "… items checked per walk (each once)", false, fig(k("pages"), lastWalk(func(x pageWalk) float64 { return float64(x.Items) }), 0, ""))

	for _, nw := range first.Watchers {
		key := k(fmt.Sprintf("watch-%d", nw))
		of := func(f func(*watchRun) float64) func(*pathsRound) (float64, bool) {
			return func(rd *pathsRound) (float64, bool) {
				x := watchOf(rd, nw)
				if x == nil || x.Delivered == 0 {
					return 0, false
				}
				return f(x), true
			}
		}
		conns := (nw + first.WatchersPerConn - 1) / first.WatchersPerConn
		add("5", fmt.Sprintf("watch fan-out, **%s watchers** (%d HTTP/2 connection(s)), %d patches one every %.0f ms: delivery delay p99", commas(nw), conns, first.WatchUpdates, first.WatchIntervalMs), true,
			fig(key, of(func(x *watchRun) float64 { return x.P99Ms }), 1, " ms"))
		add("5", "… p50", true, fig(key, of(func(x *watchRun) float64 { return x.P50Ms }), 1, " ms"))
		add("5", "… max", true, fig(key, of(func(x *watchRun) float64 { return x.MaxMs }), 1, " ms"))
		add("5", "… the patches themselves, p50", true, fig(key, of(func(x *watchRun) float64 { return x.WriteP50Ms }), 1, " ms"))
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
		list := func(step string) func(*convPaths) *convListRun {
			return func(cv *convPaths) *convListRun { _, l := convStep(cv, step); return l }
		}
		lst := func(step string, f func(*convListRun) float64) func(*pathsRound) (float64, bool) {
			return func(rd *pathsRound) (float64, bool) {
				_, l := convStep(rd.Conv, step)
				return f(orZero(l)), l != nil
			}
		}
		chg := func(step string, f func(*convChange) float64) func(*pathsRound) (float64, bool) {
			return func(rd *pathsRound) (float64, bool) {
				ch, _ := convStep(rd.Conv, step)
				return f(orZero(ch)), ch != nil
			}
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
			return func(s pathsSide) val { return firstGetCell(s, keys, list(step)) }
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
			add("6", "… until a 200 list, a 429 retried after its Retry-After as client-go does", true, fig(x.keys, lst(x.step, untilOK), 1, " ms"))
			add("6", "… GETs until that 200", false, fig(x.keys, lst(x.step, func(l *convListRun) float64 { return float64(l.Attempts) }), 0, ""))
			add("6", "… webhook calls from the first GET to the 200", false, calls(x.keys, x.step))
			add("6", "… time in the example webhook's handler meanwhile (in crdbench; summed over its calls)", true, fig(x.keys, lst(x.step, func(l *convListRun) float64 { return l.Webhook.BusyMs }), 1, " ms"))
			add("6", "… before it: the PUT sent → a GET of the CRD shows the change, Established (polled every 10 ms)", true, fig(x.keys, chg(x.step, func(ch *convChange) float64 { return ch.ObservedMs }), 0, " ms"))
			add("6", "… the PUT sent → "+x.seen+" (polled every 10 ms; then the list)", true, fig(x.keys, chg(x.step, func(ch *convChange) float64 { return ch.ServedMs }), 0, " ms"))
		}
		add("6", "(for reference) the list as v1 while the conversion was None, just before the flip: the first GET", true, firstGet(flip, "none"))
		add("6", "… until a 200", true, fig(flip, lst("none", untilOK), 1, " ms"))
		add("6", "(for reference) the first list as v1 after the creates, before any edit", true, fig(setup, lst("first", untilOK), 1, " ms"))
		add("6", "… webhook calls during it", false, calls(setup, "first"))
		add("6", "(for reference) the next list as v1 (warm), before the edit", true, fig(setup, lst("warm", untilOK), 1, " ms"))
		add("6", "… webhook calls during it", false, calls(setup, "warm"))
	}

	del := func(f func(*crdDeletion) float64) func(*pathsRound) (float64, bool) {
		return func(rd *pathsRound) (float64, bool) { return f(orZero(rd.Delete)), rd.Delete != nil }
	}
	add("7", fmt.Sprintf("DELETE of a CRD holding %s objects → GET of the CRD answers 404", nObj), true, fig(k("delete"), del(func(x *crdDeletion) float64 { return x.GoneMs / 1000 }), 2, " s"))
	add("7", "… → GET of its collection answers 404", true, fig(k("delete"), del(func(x *crdDeletion) float64 { return x.CollectionGoneMs / 1000 }), 2, " s"))

	fc := func(f func([]firstCreate) float64) func(*pathsRound) (float64, bool) {
		return func(rd *pathsRound) (float64, bool) { return f(rd.FirstCreates), len(rd.FirstCreates) > 0 }
	}
	add("8", fmt.Sprintf("first create after Established: Established seen (polled every 10 ms) → 201, retrying 404/429/503 every 10 ms (median of %d fresh CRDs per round)", first.FreshCRDs), true,
		fig(k("first-create"), func(rd *pathsRound) (float64, bool) { return rd.FirstCreateMs, len(rd.FirstCreates) > 0 }, 1, " ms"))
	add("8", "… attempts until 201 (most in a round)", false, fig(k("first-create"), fc(func(xs []firstCreate) float64 {
		mx := 0
		for _, x := range xs {
			mx = max(mx, x.Attempts)
		}
		return float64(mx)
	}), 0, ""))
	add("8", "… (for reference) the CRD's POST → Established seen", true, fig(k("first-create"), fc(func(xs []firstCreate) float64 {
		var v []float64
		for _, x := range xs {
			v = append(v, x.EstablishedMs)
		}
		return median(v)
	}), 1, " ms"))

	mem := func(f func(*pathsRound) float64) func(*pathsRound) (float64, bool) {
		return func(rd *pathsRound) (float64, bool) { return f(rd), len(rd.RSS) > 0 }
	}
	add("9", fmt.Sprintf("RSS with %s objects of %s-byte create bodies stored, %.0f s after the creates (%s)", nObj, commas(first.BodyBytes), first.RSSSettleSec, rss), true,
		fig(k("rss"), mem(func(rd *pathsRound) float64 { return rd.RSSMiB }), 1, " MiB"))
	add("9", "… RSS just before the creates (the CRD Established; earlier rounds' objects deleted)", true, fig(k("rss"), mem(func(rd *pathsRound) float64 { return rd.RSSBeforeMiB }), 1, " MiB"))
	add("9", "… increase over the creates", true, fig(k("rss"), mem(func(rd *pathsRound) float64 { return rd.RSSMiB - rd.RSSBeforeMiB }), 1, " MiB"))
	return rows
}

// orZero is *p, or T's zero value when p is nil.
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
	sides := []struct {
		name string
		s    pathsSide
	}{{"crdserver", c}, {"reference", r}}
	var rss, rounds []string
	for _, x := range sides {
		if x.s.res != nil {
			rounds = append(rounds, fmt.Sprintf("%s %d", x.name, len(x.s.res.RoundsData)))
			if len(x.s.res.RSSProcs) > 0 {
				rss = append(rss, fmt.Sprintf("%s: %s", x.name, strings.Join(x.s.res.RSSProcs, " + ")))
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
	for _, x := range sides {
		if res := x.s.res; res != nil {
			p("- %s (%s, %s, run `%s`): load average (1/5/15 min) %s at the start, %s at the end", x.name, res.Server, res.Protocol, res.RunID, res.LoadStart, res.LoadEnd)
			if len(res.Cleanup) > 0 {
				p("; cleanup: %s", strings.Join(res.Cleanup, "; "))
			}
			p(".\n")
			fails = append(fails, workloadFailures(x.name, "paths", res.Error, res.Failures)...)
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
	f1 := func(v float64, ok bool, unit string) string {
		if !ok {
			return "–"
		}
		return fmt.Sprintf("%.1f%s", v, unit)
	}
	for _, x := range []struct {
		name string
		s    pathsSide
	}{{"crdserver", c}, {"reference", r}} {
		if x.s.res == nil {
			continue
		}
		for _, rd := range x.s.res.RoundsData {
			cells := []any{x.name, rd.Round, "–"}
			if rd.Creates != nil {
				cells[2] = fmt.Sprintf("%.0f", rd.Creates.PerSecond)
			}
			cells = append(cells, f1(rd.ListMedianMs, rd.ListMedianMs > 0, " ms"), f1(rd.WalkMedianMs, rd.WalkMedianMs > 0, " ms"))
			for _, nw := range first.Watchers {
				wr := orZero(watchOf(&rd, nw))
				switch {
				case wr.Delivered == 0:
					cells = append(cells, "–")
				case wr.Missed > 0:
					cells = append(cells, fmt.Sprintf("%.1f ms (%d missed)", wr.P99Ms, wr.Missed))
				default:
					cells = append(cells, fmt.Sprintf("%.1f ms", wr.P99Ms))
				}
			}
			del := "–"
			if rd.Delete != nil {
				del = fmt.Sprintf("%.2f s", rd.Delete.CollectionGoneMs/1000)
			}
			cells = append(cells, del, f1(rd.FirstCreateMs, len(rd.FirstCreates) > 0, " ms"))
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
			t.row(append(cells, f1(rd.RSSMiB, len(rd.RSS) > 0, " MiB"), fmt.Sprintf("%.0f s", rd.WallSec), fmt.Sprintf("%.2f", rd.Load1))...)
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
	_, _, _, n, why := s.roundStat(rows, func(rd *pathsRound) (float64, bool) {
		return 0, rd.Conv != nil && get(rd.Conv) != nil
	})
	if why != "" {
		return none(why)
	}
	var oks []float64
	var other []string
	var otherMs []float64
	for i := range s.res.RoundsData {
		rd := &s.res.RoundsData[i]
		if rd.Conv == nil || get(rd.Conv) == nil {
			continue
		}
		l := get(rd.Conv)
		if l.Status == 200 {
			oks = append(oks, l.Ms)
			continue
		}
		d := fmt.Sprintf("HTTP %d", l.Status)
		if l.Message != "" {
			d += " “" + l.Message + "”"
		}
		if !slices.Contains(other, d) {
			other = append(other, d)
		}
		otherMs = append(otherMs, l.Ms)
	}
	if len(other) == 0 {
		v := num(median(oks), 1, " ms")
		if len(oks) > 1 {
			v.unit += fmt.Sprintf(" (%.1f–%.1f)", slices.Min(oks), slices.Max(oks))
		}
		return v
	}
	return none(fmt.Sprintf("%s in %d of %d rounds (answered in %.1f ms, median)", strings.Join(other, ", "), len(otherMs), n, median(otherMs)))
}

// label is a table cell of text, not a figure (no ratio).
func label(s string) val { return val{why: s} }
