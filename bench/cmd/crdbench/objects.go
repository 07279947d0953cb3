package main

// crdbench objects: many objects of one resource on one server, for the
// issue "A million objects: memory close to what they weigh, lists and
// watches that stay fast". With -resource crd the objects are Releases
// (releases.scale.example.com, a CRD it creates if missing), with
// -resource configmaps ConfigMaps, each built from its index alone, like a
// Flux Kustomization (realistic repetition and realistic unique parts, no
// random padding): a Release is about 880 bytes as sent and about 1.5 KiB
// as served (its managedFields alone are about 500 bytes), a ConfigMap
// about 600 and 1.1 KiB; the run measures the mean size as served (the
// first full list's item bytes ÷ its items). Phases: the RSS of the
// -rss-pid processes before the fill; the fill (-n creates by
// -concurrency workers); the RSS -settle after it, and per object; -lists
// full lists (time to the first byte of the body and to the last, items
// counted as they stream by); a walk by pages of -page; a watch-list
// (sendInitialEvents) to its initial-events-end bookmark; -watchers watches
// from a recent resourceVersion and the delay of each of -watch-updates
// patches to each of them. With -serving, after a restart at -t0: the time
// until a list, a GET and a watch are answered, and the first full list.

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

const (
	releaseGroup = "scale.example.com"
	releaseCRD   = "releases." + releaseGroup
	// seqAnnotation is set by each patch of the watch phase to the patch's number.
	seqAnnotation = "crdbench.example.com/seq"
)

// releaseCRDBody is the CRD of the Releases: v1 served and stored,
// namespaced, spec and status kept as sent, no status subresource.
func releaseCRDBody() []byte {
	open := map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}
	b, _ := json.Marshal(map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": releaseCRD},
		"spec": map[string]any{"group": releaseGroup, "scope": "Namespaced",
			"names": map[string]any{"plural": "releases", "singular": "release", "kind": "Release", "listKind": "ReleaseList"},
			"versions": []any{map[string]any{"name": "v1", "served": true, "storage": true, "schema": map[string]any{
				"openAPIV3Schema": map[string]any{"type": "object", "properties": map[string]any{"spec": open, "status": open}}}}}},
	})
	return b
}

// objectMeta is the metadata of a created object, in the order a client
// writes it.
type objectMeta struct {
	Name        string            `json:"name"`
	Namespace   string            `json:"namespace,omitempty"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

// The Release's spec and status, in a Kustomization's field order.
type (
	releaseRef struct {
		APIVersion string `json:"apiVersion,omitempty"`
		Kind       string `json:"kind"`
		Name       string `json:"name"`
		Namespace  string `json:"namespace"`
	}
	releaseSpec struct {
		Interval        string     `json:"interval"`
		Path            string     `json:"path"`
		Prune           bool       `json:"prune"`
		SourceRef       releaseRef `json:"sourceRef"`
		TargetNamespace string     `json:"targetNamespace"`
	}
	releaseCondition struct {
		Type               string `json:"type"`
		Status             string `json:"status"`
		Reason             string `json:"reason"`
		Message            string `json:"message"`
		LastTransitionTime string `json:"lastTransitionTime"`
		ObservedGeneration int    `json:"observedGeneration"`
	}
	releaseStatus struct {
		ObservedGeneration  int                `json:"observedGeneration"`
		LastAppliedRevision string             `json:"lastAppliedRevision"`
		Conditions          []releaseCondition `json:"conditions"`
	}
)

// objectParts are the values of object i that its body is built from.
type objectParts struct {
	app, team, checksum, revision, replicas string
	transition                              time.Time
}

func partsOf(i int) objectParts {
	sum := sha256.Sum256([]byte(strconv.Itoa(i)))
	rev := sha1.Sum([]byte(strconv.Itoa(i)))
	return objectParts{app: fmt.Sprintf("app-%d", i%50), team: fmt.Sprintf("team-%d", i%10),
		checksum: hex.EncodeToString(sum[:]), revision: "main@sha1:" + hex.EncodeToString(rev[:]),
		replicas: strconv.Itoa(i%5 + 1), transition: time.Date(2025, 3, 1, 8, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Second)}
}

func (p objectParts) meta(name, ns string) objectMeta {
	return objectMeta{Name: name, Namespace: ns,
		Labels:      map[string]string{"app.kubernetes.io/name": p.app, "app.kubernetes.io/part-of": "platform", "team": p.team},
		Annotations: map[string]string{"meta.helm.sh/release-name": name, "checksum/config": p.checksum}}
}

func releaseName(i int) string   { return fmt.Sprintf("rel-%07d", i) }
func configMapName(i int) string { return fmt.Sprintf("cm-%07d", i) }

// releaseBody is Release i: a Flux Kustomization's spec and status.
func releaseBody(ns string, i int) []byte {
	p := partsOf(i)
	spec := releaseSpec{Interval: "5m", Path: "./apps/" + p.app + "/overlays/prod", Prune: true,
		SourceRef: releaseRef{Kind: "GitRepository", Name: "platform-repo", Namespace: "flux-system"}, TargetNamespace: p.team}
	status := releaseStatus{ObservedGeneration: 1, LastAppliedRevision: p.revision,
		Conditions: []releaseCondition{{Type: "Ready", Status: "True", Reason: "ReconciliationSucceeded",
			Message: "Applied revision: " + p.revision, LastTransitionTime: p.transition.Format(time.RFC3339), ObservedGeneration: 1}}}
	b, _ := json.Marshal(struct {
		APIVersion string        `json:"apiVersion"`
		Kind       string        `json:"kind"`
		Metadata   objectMeta    `json:"metadata"`
		Spec       releaseSpec   `json:"spec"`
		Status     releaseStatus `json:"status"`
	}{releaseGroup + "/v1", "Release", p.meta(releaseName(i), ns), spec, status})
	return b
}

// kustomization is the kustomization.yaml of ConfigMap i, from the same
// values as Release i: about 220 bytes, so that the ConfigMap is about
// 1.1 KiB as served (with its managedFields, uid, timestamps).
func kustomization(p objectParts) string {
	return "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: " + p.team + "\n" +
		"resources:\n  - ../../base\n" +
		"images:\n  - name: registry.example.com/" + p.app + "\n    newTag: " + p.revision[len("main@sha1:"):][:12] + "\n" +
		"replicas:\n  - name: " + p.app + "\n    count: " + p.replicas + "\n"
}

// configMapObjBody is ConfigMap i: the labels and annotations of Release
// i, and its kustomization.yaml.
func configMapObjBody(ns string, i int) []byte {
	p := partsOf(i)
	b, _ := json.Marshal(struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Metadata   objectMeta        `json:"metadata"`
		Data       map[string]string `json:"data"`
	}{"v1", "ConfigMap", p.meta(configMapName(i), ns), map[string]string{"kustomization.yaml": kustomization(p)}})
	return b
}

// strState follows a JSON text's strings across writes.
type strState struct{ inStr, esc bool }

// skip reads p, which starts inside a string, up to the string's closing
// quote: it returns how many bytes of p belong to the string (the quote
// included). It jumps from backslash to backslash to quote with
// bytes.IndexByte, as most of a list's bytes are in strings.
func (s *strState) skip(p []byte) int {
	q := -1 // the next '"' at or after i, once looked for (len(p): none)
	for i := 0; i < len(p); {
		if s.esc {
			s.esc = false
			i++
			continue
		}
		if q < i {
			if q = bytes.IndexByte(p[i:], '"'); q < 0 {
				q = len(p)
			} else {
				q += i
			}
		}
		if bs := bytes.IndexByte(p[i:q], '\\'); bs >= 0 {
			i += bs + 1
			s.esc = true
			continue
		}
		if q == len(p) {
			return len(p)
		}
		s.inStr = false
		return q + 1
	}
	return len(p)
}

// itemCounter is an io.Writer that reads a JSON list ({…, "items": […]})
// as it streams through, keeping nothing: it counts the items of the
// top-level "items" array and their bytes (each item from its '{' to its
// '}'), with the bytes of the whole. It follows strings and escapes, so a
// brace in a string is not counted. It does not check that the JSON is
// valid: a list whose Items match what was stored is taken as right.
type itemCounter struct {
	strState
	depth     int
	key       [8]byte // the start of the last string read at depth 1 (the key before "items"' '[')
	keyLen    int
	inItems   bool
	itemStart int64
	Total     int64
	Items     int
	ItemBytes int64
}

func (c *itemCounter) Write(p []byte) (int, error) {
	for i := 0; i < len(p); i++ {
		b := p[i]
		if c.inStr {
			if c.depth != 1 {
				i += c.skip(p[i:]) - 1
				continue
			}
			// The top-level object's keys, byte by byte.
			switch {
			case c.esc:
				c.esc = false
			case b == '\\':
				c.esc = true
			case b == '"':
				c.inStr = false
			default:
				if c.keyLen < len(c.key) {
					c.key[c.keyLen] = b
				}
				c.keyLen++
			}
			continue
		}
		switch b {
		case '"':
			c.inStr, c.keyLen = true, 0
		case '{', '[':
			c.depth++
			if b == '[' && c.depth == 2 && c.keyLen == 5 && string(c.key[:5]) == "items" {
				c.inItems = true
			} else if c.inItems && c.depth == 3 {
				c.itemStart = c.Total + int64(i)
			}
		case '}', ']':
			if c.inItems && c.depth == 3 {
				c.Items++
				c.ItemBytes += c.Total + int64(i) - c.itemStart + 1
			} else if c.inItems && c.depth == 2 {
				c.inItems = false
			}
			c.depth--
		}
	}
	c.Total += int64(len(p))
	return len(p), nil
}

// errStopStream ends a stream read by an eventSplitter when its callback
// has seen what it waited for.
var errStopStream = errors.New("stop reading")

// eventSplitter is an io.Writer that splits a stream of JSON objects (a
// watch: one event after another) into its top-level objects and calls
// event with each, in a buffer it reuses; an error from event stops the
// writes with that error. An object larger than max is an error.
type eventSplitter struct {
	strState
	depth int
	buf   []byte
	max   int
	event func(b []byte) error
}

func (s *eventSplitter) Write(p []byte) (int, error) {
	start := 0 // where the current object starts in p, if it started in p
	if s.depth == 0 {
		start = -1
	}
	for i := 0; i < len(p); i++ {
		if s.inStr {
			i += s.skip(p[i:]) - 1
			continue
		}
		switch b := p[i]; {
		case s.depth == 0 && b != '{':
			// Whitespace between events.
		case b == '"':
			s.inStr = true
		case b == '{' || b == '[':
			if s.depth == 0 {
				start, s.buf = i, s.buf[:0]
			}
			s.depth++
		case b == '}' || b == ']':
			if s.depth--; s.depth == 0 {
				s.buf = append(s.buf, p[start:i+1]...)
				if err := s.event(s.buf); err != nil {
					return i + 1, err
				}
				start = -1
			}
		}
	}
	if start >= 0 {
		s.buf = append(s.buf, p[start:]...)
		if s.max > 0 && len(s.buf) > s.max {
			return len(p), fmt.Errorf("a watch event of more than %d bytes", s.max)
		}
	}
	return len(p), nil
}

// eventType is the type of a watch event: read from its start when the
// server wrote "type" first (both crdserver and kube-apiserver do), else
// decoded.
func eventType(b []byte) string {
	const head = `{"type":"`
	if bytes.HasPrefix(b, []byte(head)) {
		if end := bytes.IndexByte(b[len(head):], '"'); end > 0 && end < 32 {
			return string(b[len(head) : len(head)+end])
		}
	}
	var ev struct{ Type string }
	_ = json.Unmarshal(b, &ev)
	return ev.Type
}

// watchEvent is what crdbench reads of a watch event.
type watchEvent struct {
	Type   string
	Object struct {
		Metadata struct {
			Name            string
			ResourceVersion string
			Annotations     map[string]string
		}
		Message string // of an ERROR event's Status
		Code    int
	}
}

// memReading is the memory of the -rss-pid processes at one moment.
type memReading struct {
	Procs    []procMem `json:"processes"`
	TotalMiB float64   `json:"total_vmrss_mib"`
	AnonMiB  float64   `json:"total_rss_anon_mib"`
	FileMiB  float64   `json:"total_rss_file_mib"`
}

func readMemOf(pids namedPIDs) *memReading {
	if len(pids) == 0 {
		return nil
	}
	m := &memReading{}
	m.Procs, m.TotalMiB = readRSS(pids)
	for _, p := range m.Procs {
		m.AnonMiB += p.RSSAnonMiB
		m.FileMiB += p.RSSFileMiB
	}
	return m
}

// fullList is one GET of the whole collection, read as a stream.
type fullList struct {
	Status      int     `json:"status"`
	FirstByteMs float64 `json:"first_byte_ms"` // request sent → the body's first byte read
	Ms          float64 `json:"ms"`            // request sent → the body's last byte read
	Bytes       int64   `json:"bytes"`         // decompressed
	Items       int     `json:"items"`
	ItemBytes   int64   `json:"item_bytes"`
	Gzip        bool    `json:"gzip"` // the server sent it gzipped (Go's transport decompressed it)
}

type fullLists struct {
	Rounds            []fullList `json:"rounds"`
	MedianFirstByteMs float64    `json:"median_first_byte_ms"`
	MedianMs          float64    `json:"median_ms"`
}

// pagedWalk is one walk of the collection by pages of limit.
type pagedWalk struct {
	Limit           int     `json:"limit"`
	Pages           int     `json:"pages"`
	Items           int     `json:"items"`
	Unique          int     `json:"unique_names"`
	Ours            int     `json:"objects_found"` // of the -n objects, by name
	Others          int     `json:"other_objects"`
	Ms              float64 `json:"ms"`
	FirstPageMs     float64 `json:"first_page_ms"`
	First10MedianMs float64 `json:"first_10_pages_median_ms"`
	Last10MedianMs  float64 `json:"last_10_pages_median_ms"`
	P99Ms           float64 `json:"page_p99_ms"`
	MaxMs           float64 `json:"page_max_ms"`
	Phase           *phase  `json:"page_latencies,omitempty"`
}

// watchListRun is one watch-list: a watch with sendInitialEvents.
type watchListRun struct {
	Status          int     `json:"status"`
	Unsupported     string  `json:"unsupported,omitempty"` // the server refused it: what it answered
	HeaderMs        float64 `json:"header_ms"`
	FirstEventMs    float64 `json:"first_event_ms"`
	InitialEndMs    float64 `json:"initial_events_end_ms"`
	Added           int     `json:"added"`
	Bookmarks       int     `json:"bookmarks"`
	Other           int     `json:"other_events"`
	Bytes           int64   `json:"bytes"`
	BookmarkRV      string  `json:"bookmark_resource_version,omitempty"`
	BookmarkReached bool    `json:"initial_events_end_seen"`
}

// watchLatency is the delay from each patch to its event at each watcher.
type watchLatency struct {
	Watchers        int     `json:"watchers"`
	Updates         int     `json:"updates"`
	IntervalMs      float64 `json:"update_interval_ms"`
	ResourceVersion string  `json:"from_resource_version"`
	Open            *phase  `json:"open,omitempty"` // each watch: request sent → 200
	WritesOK        int     `json:"writes_ok"`
	WriteP50Ms      float64 `json:"write_p50_ms"`
	deliveryFigures
	WatchErrors int `json:"watch_errors"`
}

// servingRun is the -serving mode: from the server's (re)start at t0 until
// it serves the collection, one object and a watch.
type servingRun struct {
	T0UnixNano int64       `json:"t0_unix_nano"`
	StartMs    float64     `json:"t0_to_first_poll_ms"`
	ListMs     float64     `json:"list_ms"`  // t0 → a GET ?limit=1 answered 200
	GetMs      float64     `json:"get_ms"`   // t0 → a GET of object 0 answered 200
	WatchMs    float64     `json:"watch_ms"` // t0 → a watch from the list's resourceVersion answered 200
	AllMs      float64     `json:"all_ms"`
	Polls      int         `json:"polls"`
	LastError  string      `json:"last_error,omitempty"` // the last failed poll's answer
	FirstList  *fullList   `json:"first_full_list,omitempty"`
	RSS        *memReading `json:"rss,omitempty"` // -settle after the first full list
}

type objectsResult struct {
	Server      string   `json:"server"`
	Name        string   `json:"name"`
	Mode        string   `json:"mode"` // measure or serving
	Resource    string   `json:"resource"`
	Collection  string   `json:"collection"`
	Objects     int      `json:"objects"`
	Concurrency int      `json:"concurrency"`
	Protocol    string   `json:"protocol"`
	ClientCert  bool     `json:"client_cert"`
	Date        string   `json:"date"`
	LoadStart   string   `json:"loadavg_start"`
	LoadEnd     string   `json:"loadavg_end"`
	SettleSec   float64  `json:"settle_seconds"`
	RSSProcs    []string `json:"rss_processes,omitempty"`
	CRDCreated  bool     `json:"crd_created,omitempty"`
	// Objects in the collection before the fill (a namespace's
	// kube-root-ca.crt ConfigMap, which kube-controller-manager may also
	// publish later): the lists hold them too. See consistent.
	Preexisting     int         `json:"preexisting_objects"`
	EstablishedMs   float64     `json:"established_ms,omitempty"`
	Idle            *memReading `json:"rss_idle,omitempty"`
	Fill            *phase      `json:"fill,omitempty"`
	CreateBodyBytes float64     `json:"create_body_mean_bytes,omitempty"`
	Filled          *memReading `json:"rss_filled,omitempty"`
	BytesPerObject  float64     `json:"rss_bytes_per_object,omitempty"`
	ServedBytes     float64     `json:"served_object_mean_bytes,omitempty"` // the first full list's item bytes ÷ its items

	MemoryRatio float64       `json:"rss_per_served_byte,omitempty"`
	Lists       *fullLists    `json:"full_lists,omitempty"`
	Paged       *pagedWalk    `json:"paged,omitempty"`
	WatchList   *watchListRun `json:"watch_list,omitempty"`
	Watch       *watchLatency `json:"watch,omitempty"`
	Serving     *servingRun   `json:"serving,omitempty"`
	// GETs sent again after a 429 (the reference answers "storage is
	// (re)initializing" for a while after a CRD is Established).
	Retries429 int64     `json:"retries_after_429,omitempty"`
	Failures   []failure `json:"failures,omitempty"`
	Error      string    `json:"error,omitempty"`
}

// objectsRun is one crdbench objects run.
type objectsRun struct {
	*objectsResult
	ctx      context.Context
	c        *client // requests bounded by the client's timeout
	stream   *client // the same connections, no timeout: lists and watches, bounded by their contexts
	coll     string
	name     func(int) string
	body     func(int) []byte
	limit    time.Duration
	settle   time.Duration
	lists    int
	page     int
	watchers int
	updates  int
	interval time.Duration
	wait     time.Duration
	rss      namedPIDs
	retries  atomic.Int64
}

// whole reports whether a list of items can hold every object (the
// collection may hold others: see consistent), and says what it wanted.
func (o *objectsRun) whole(items int) (bool, string) {
	return items >= o.Objects, fmt.Sprintf("want at least %d", o.Objects)
}

// consistent checks that each full list and the watch-list held as many
// items as the paged walk, which checked every name (each of the -n
// objects once, and Others besides).
func (o *objectsRun) consistent() {
	w := o.Paged
	if w == nil || w.Phase == nil || w.Ours != o.Objects {
		return // the walk failed: that is its failure
	}
	if o.Lists != nil {
		for k, l := range o.Lists.Rounds {
			if l.Status == http.StatusOK && l.Items != w.Items {
				o.failf("full-list", http.MethodGet, o.coll, l.Status, "list %d: %d items, the paged walk %d", k+1, l.Items, w.Items)
				break
			}
		}
	}
	if wl := o.WatchList; wl != nil && wl.BookmarkReached && wl.Added != w.Items {
		o.failf("watch-list", http.MethodGet, o.coll, wl.Status, "%d ADDED events before initial-events-end, the paged walk %d items", wl.Added, w.Items)
	}
}

// failf records a failure of a phase.
func (o *objectsRun) failf(phaseName, method, u string, code int, format string, a ...any) {
	if o.ctx.Err() != nil {
		return // interrupted: that is the run's error
	}
	f := failure{Phase: phaseName, Method: method, Path: strings.TrimPrefix(u, o.c.base), Status: code, Error: fmt.Sprintf(format, a...)}
	o.Failures = append(o.Failures, f)
	log.Printf("%s FAILED: %s", phaseName, f.Error)
}

// send sends a GET with the streaming client and, as client-go does, sends
// it again after a 429's Retry-After (1 s if none, at most 10 s), at most
// 10 times; the retries are counted in Retries429. It returns when the
// answered attempt was sent: the figures time that attempt.
func (o *objectsRun) send(ctx context.Context, u string) (*http.Response, time.Time, error) {
	for attempt := 0; ; attempt++ {
		t0 := time.Now()
		resp, err := o.stream.send(ctx, http.MethodGet, u, nil)
		if err != nil || resp.StatusCode != http.StatusTooManyRequests || attempt == 10 {
			return resp, t0, err
		}
		after := time.Second
		if v, perr := strconv.Atoi(resp.Header.Get("Retry-After")); perr == nil && v >= 0 && v <= 10 {
			after = time.Duration(v) * time.Second
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		o.retries.Add(1)
		select {
		case <-ctx.Done():
			return nil, t0, ctx.Err()
		case <-time.After(after):
		}
	}
}

// phaseCtx is the run's context bounded by -limit.
func (o *objectsRun) phaseCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(o.ctx, o.limit)
}

func runObjects(args []string) error {
	fs := flag.NewFlagSet("objects", flag.ExitOnError)
	var t tlsFlags
	t.register(fs)
	o := &objectsRun{objectsResult: &objectsResult{}}
	var n, conc int
	checkInts := rangedFlags(fs.IntVar,
		ranged[int]{&n, "n", 10000, 1, 1_000_000, "objects"},
		ranged[int]{&conc, "concurrency", 16, 1, 256, "workers of the fill (one HTTP/2 connection)"},
		ranged[int]{&o.lists, "lists", 3, 1, 50, "full lists; the medians are reported"},
		ranged[int]{&o.page, "page", 500, 1, 100_000, "limit of each page of the paged walk"},
		ranged[int]{&o.watchers, "watchers", 10, 1, 1000, "watches of the watch-latency phase"},
		ranged[int]{&o.updates, "watch-updates", 200, 1, 10000, "sequential merge patches while the watches run"})
	checkDurations := rangedFlags(fs.DurationVar,
		ranged[time.Duration]{&o.interval, "watch-interval", 20 * time.Millisecond, 0, 10 * time.Second, "one patch sent this often"},
		ranged[time.Duration]{&o.wait, "watch-wait", 30 * time.Second, time.Second, 10 * time.Minute, "after the last patch, how long to wait for the last deliveries"},
		ranged[time.Duration]{&o.limit, "limit", 30 * time.Minute, time.Second, 24 * time.Hour, "time limit of each phase (the fill, each list, the walk, the watch-list, the wait for a restarted server)"},
		ranged[time.Duration]{&o.settle, "settle", 5 * time.Second, 0, 10 * time.Minute, "pause between the fill and reading the RSS (with -serving: between the first list and the RSS)"})
	var (
		server    = fs.String("server", "", "API server base URL, https:// or http:// (loopback only)")
		name      = fs.String("name", "server", "name of the server in the results")
		resource  = fs.String("resource", "crd", "crd (Releases of "+releaseCRD+", created if missing) or configmaps")
		namespace = fs.String("namespace", "default", "namespace of the objects (it must exist)")
		skipFill  = fs.Bool("skip-fill", false, "the -n objects exist already: measure only (no idle RSS, no fill)")
		serving   = fs.Bool("serving", false, "the server was (re)started at -t0: time until it serves the collection, object 0 and a watch, then one full list")
		t0ns      = fs.Int64("t0", 0, "with -serving: when the server was launched, in Unix nanoseconds (date +%s%N)")
		jsonOut   = fs.String("json", "", "write the results as JSON to this file")
	)
	fs.Var(&o.rss, "rss-pid", "name=PID of a server process whose memory is read (repeatable; summed)")
	_ = fs.Parse(args)
	if err := cmp.Or(checkInts(), checkDurations()); err != nil {
		return err
	}
	if *serving && *t0ns <= 0 {
		return errors.New("-serving needs -t0 UNIXNANO")
	}
	if *namespace == "" {
		return errors.New("need -namespace")
	}
	c, err := connect(*server, t, conc)
	if err != nil {
		return err
	}
	c.hc.Timeout = 30 * time.Second
	o.c = c
	o.stream = &client{hc: &http.Client{Transport: c.hc.Transport}, base: c.base, u: c.u, tls: t}
	switch *resource {
	case "crd":
		o.coll = c.base + "/apis/" + releaseGroup + "/v1/namespaces/" + *namespace + "/releases"
		o.name, o.body = releaseName, func(i int) []byte { return releaseBody(*namespace, i) }
	case "configmaps":
		o.coll = c.base + "/api/v1/namespaces/" + *namespace + "/configmaps"
		o.name, o.body = configMapName, func(i int) []byte { return configMapObjBody(*namespace, i) }
	default:
		return fmt.Errorf("-resource: %q is neither crd nor configmaps", *resource)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	o.ctx = ctx
	o.objectsResult = &objectsResult{Server: c.base, Name: *name, Mode: "measure", Resource: *resource,
		Collection: strings.TrimPrefix(o.coll, c.base), Objects: n, Concurrency: conc, ClientCert: t.cert != "",
		Date: time.Now().UTC().Format(time.RFC3339), LoadStart: loadavg(), SettleSec: o.settle.Seconds()}
	for _, p := range o.rss {
		o.RSSProcs = append(o.RSSProcs, p.name)
	}
	if *serving {
		o.Mode = "serving"
		err = o.servingPhase(time.Unix(0, *t0ns))
	} else {
		err = o.measure(*resource == "crd", *skipFill)
	}
	o.Protocol, o.LoadEnd, o.Retries429 = c.protocol(), loadavg(), o.retries.Load()
	if ctx.Err() != nil {
		err = errors.New("interrupted")
	}
	return done(*jsonOut, o.objectsResult, &o.Error, o.Failures, err)
}

// measure runs every phase but -serving's. An error stops the run: the
// objects could not be there.
func (o *objectsRun) measure(crd, skipFill bool) error {
	if crd {
		if err := o.ensureCRD(); err != nil {
			return err
		}
	}
	if !skipFill {
		l, err := o.listOnce()
		if err != nil {
			o.failf("count", http.MethodGet, o.coll, l.Status, "%v", err)
			return err
		}
		o.Preexisting = l.Items
		o.Idle = readMemOf(o.rss)
		if err := o.fill(); err != nil {
			return err
		}
		if o.settle > 0 {
			log.Printf("settling %v", o.settle)
			time.Sleep(o.settle)
		}
	}
	o.Filled = readMemOf(o.rss)
	steps := []func(){o.fullLists, o.paged, o.watchList, o.watchLatency}
	for _, step := range steps {
		if o.ctx.Err() != nil {
			return o.ctx.Err()
		}
		step()
	}
	o.consistent()
	if o.Idle != nil && o.Filled != nil {
		o.BytesPerObject = math3((o.Filled.TotalMiB - o.Idle.TotalMiB) * (1 << 20) / float64(o.Objects))
		if o.ServedBytes > 0 {
			o.MemoryRatio = math3(o.BytesPerObject / o.ServedBytes)
		}
	}
	return nil
}

// ensureCRD creates the Releases' CRD unless it exists, and waits until it
// is Established (and 2 s more when it was just created: the reference's
// create handler sleeps in the creates that come sooner).
func (o *objectsRun) ensureCRD() error {
	t0 := time.Now()
	ctx, cancel := context.WithTimeout(o.ctx, 30*time.Second)
	code, b, err := o.c.do(ctx, http.MethodPost, o.c.base+crdPath, releaseCRDBody())
	cancel()
	switch {
	case err == nil && code == http.StatusCreated:
		o.CRDCreated = true
	case err == nil && code == http.StatusConflict:
	default:
		f := o.c.fail("crd", http.MethodPost, o.c.base+crdPath, code, b, err)
		o.Failures = append(o.Failures, *f)
		return fmt.Errorf("could not create the CRD %s (HTTP %d)", releaseCRD, code)
	}
	if err := o.c.waitEstablished(o.ctx, releaseCRD, 2*time.Minute); err != nil {
		return err
	}
	o.EstablishedMs = ms(time.Since(t0))
	if o.CRDCreated {
		time.Sleep(2 * time.Second)
	}
	log.Printf("CRD %s Established after %.0f ms (created: %v)", releaseCRD, o.EstablishedMs, o.CRDCreated)
	return nil
}

// fill creates the -n objects with -concurrency workers within -limit.
func (o *objectsRun) fill() error {
	log.Printf("fill: %d objects, %d workers", o.Objects, o.Concurrency)
	var bodyBytes atomic.Int64
	ph := o.c.phase(o.ctx, "fill", o.Objects, o.Concurrency, o.limit, func(i int) request {
		b := o.body(i)
		bodyBytes.Add(int64(len(b)))
		return request{http.MethodPost, o.coll, b, []int{http.StatusCreated}}
	}, nil)
	o.Fill = &ph
	if ph.Requests > 0 {
		o.CreateBodyBytes = math3(float64(bodyBytes.Load()) / float64(ph.Requests))
	}
	log.Printf("fill: %d created in %.1f s (%.0f/s), %d errors", ph.Requests-ph.Errors, ph.WallSec, ph.PerSecond, ph.Errors)
	if ph.FirstError != nil {
		o.Failures = append(o.Failures, *ph.FirstError)
	}
	if ph.Aborted || ph.Errors > 0 {
		return fmt.Errorf("fill: %d of %d objects created", ph.Requests-ph.Errors, o.Objects)
	}
	return nil
}

// firstByteReader notes when its first byte was read.
type firstByteReader struct {
	r     io.Reader
	first time.Time
}

func (f *firstByteReader) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if n > 0 && f.first.IsZero() {
		f.first = time.Now()
	}
	return n, err
}

// listOnce GETs the whole collection as client-go does (Accept:
// application/json; Go's transport asks for gzip and decompresses) and
// reads the body as a stream through an itemCounter.
func (o *objectsRun) listOnce() (fullList, error) {
	ctx, cancel := o.phaseCtx()
	defer cancel()
	var l fullList
	resp, t0, err := o.send(ctx, o.coll)
	if err != nil {
		return l, err
	}
	defer resp.Body.Close()
	l.Status, l.Gzip = resp.StatusCode, resp.Uncompressed
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 2000))
		return l, fmt.Errorf("HTTP %d %s", resp.StatusCode, truncate(b, 500))
	}
	fb := &firstByteReader{r: resp.Body}
	var ic itemCounter
	_, err = io.CopyBuffer(&ic, fb, make([]byte, 256<<10))
	l.Ms = ms(time.Since(t0))
	if !fb.first.IsZero() {
		l.FirstByteMs = ms(fb.first.Sub(t0))
	}
	l.Bytes, l.Items, l.ItemBytes = ic.Total, ic.Items, ic.ItemBytes
	return l, err
}

// fullLists runs the -lists full lists; the first gives the objects' mean
// size as served.
func (o *objectsRun) fullLists() {
	fl := &fullLists{}
	o.Lists = fl
	var first, total []float64
	for k := range o.lists {
		l, err := o.listOnce()
		fl.Rounds = append(fl.Rounds, l)
		log.Printf("full list %d: first byte %.1f ms, all %.1f ms, %d items, %d bytes (gzip %v)", k+1, l.FirstByteMs, l.Ms, l.Items, l.Bytes, l.Gzip)
		if err != nil {
			o.failf("full-list", http.MethodGet, o.coll, l.Status, "list %d: %v", k+1, err)
			return
		}
		if ok, want := o.whole(l.Items); !ok {
			o.failf("full-list", http.MethodGet, o.coll, l.Status, "list %d: %d items, %s", k+1, l.Items, want)
			return
		}
		if k == 0 {
			o.ServedBytes = math3(float64(l.ItemBytes) / float64(l.Items))
		}
		first, total = append(first, l.FirstByteMs), append(total, l.Ms)
	}
	fl.MedianFirstByteMs, fl.MedianMs = median(first), median(total)
}

// pageOf is what a walk reads of a page.
type pageOf struct {
	Metadata struct {
		Continue        string `json:"continue"`
		ResourceVersion string `json:"resourceVersion"`
	} `json:"metadata"`
	Items []struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
	} `json:"items"`
}

// paged walks the collection by pages of -page following continue tokens,
// each page timed from its request to its last byte; it checks the walk
// returned the -n objects, each once.
func (o *objectsRun) paged() {
	ctx, cancel := o.phaseCtx()
	defer cancel()
	w := &pagedWalk{Limit: o.page}
	o.Paged = w
	seen := make(map[string]struct{}, o.Objects)
	var lat []time.Duration
	cont, t0 := "", time.Now()
	maxPages := o.Objects/o.page + 10
	for page := 1; page == 1 || cont != ""; page++ {
		u := o.coll + "?limit=" + strconv.Itoa(o.page)
		if cont != "" {
			u += "&continue=" + url.QueryEscape(cont)
		}
		if page > maxPages {
			o.failf("paged", http.MethodGet, u, 0, "still a continue token after %d pages", page-1)
			return
		}
		code, b, d, err := o.get(ctx, u)
		lat = append(lat, d)
		if err != nil || code != http.StatusOK {
			o.failf("paged", http.MethodGet, u, code, "page %d: %v %s", page, err, truncate(b, 300))
			return
		}
		var p pageOf
		if err := json.Unmarshal(b, &p); err != nil {
			o.failf("paged", http.MethodGet, u, code, "page %d: decode: %v", page, err)
			return
		}
		if len(p.Items) > o.page {
			o.failf("paged", http.MethodGet, u, code, "page %d: %d items, limit %d", page, len(p.Items), o.page)
			return
		}
		for _, it := range p.Items {
			seen[it.Metadata.Name] = struct{}{}
		}
		w.Items += len(p.Items)
		cont = p.Metadata.Continue
	}
	wall := time.Since(t0)
	ph := summarize("pages", lat, wall)
	w.Phase, w.Pages, w.Unique, w.Ms = &ph, len(lat), len(seen), ms(wall)
	w.FirstPageMs, w.P99Ms, w.MaxMs = ms(lat[0]), ph.P99Ms, ph.MaxMs
	w.First10MedianMs, w.Last10MedianMs = medianOfMs(lat[:min(10, len(lat))]), medianOfMs(lat[max(0, len(lat)-10):])
	log.Printf("paged: %d pages of %d in %.0f ms; first %.1f ms, median of the first 10 %.1f ms, of the last 10 %.1f ms", w.Pages, o.page, w.Ms, w.FirstPageMs, w.First10MedianMs, w.Last10MedianMs)
	for i := range o.Objects {
		if _, ok := seen[o.name(i)]; ok {
			w.Ours++
		}
	}
	w.Others = w.Unique - w.Ours
	if w.Ours != o.Objects || w.Unique != w.Items {
		o.failf("paged", http.MethodGet, o.coll, 200, "the walk returned %d items, %d distinct names, %d of the %d objects", w.Items, w.Unique, w.Ours, o.Objects)
	}
}

// get is a GET by send, read whole, timed from the answered attempt's
// sending to its last byte.
func (o *objectsRun) get(ctx context.Context, u string) (int, []byte, time.Duration, error) {
	resp, t0, err := o.send(ctx, u)
	if err != nil {
		return 0, nil, 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, time.Since(t0), err
}

func medianOfMs(d []time.Duration) float64 {
	v := make([]float64, len(d))
	for i, x := range d {
		v[i] = ms(x)
	}
	return median(v)
}

// watchList opens a watch with sendInitialEvents and reads it until the
// bookmark that ends the initial events. A server that refuses it (an old
// one) is recorded, not failed.
func (o *objectsRun) watchList() {
	ctx, cancel := o.phaseCtx()
	defer cancel()
	u := o.coll + "?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=" + strconv.Itoa(int(o.limit.Seconds()))
	wl := &watchListRun{}
	o.WatchList = wl
	resp, t0, err := o.send(ctx, u)
	if err != nil {
		o.failf("watch-list", http.MethodGet, u, 0, "%v", err)
		return
	}
	defer resp.Body.Close()
	wl.Status, wl.HeaderMs = resp.StatusCode, ms(time.Since(t0))
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 2000))
		wl.Unsupported = fmt.Sprintf("HTTP %d %s", resp.StatusCode, truncate(b, 500))
		log.Printf("watch-list: not served: %s", wl.Unsupported)
		return
	}
	err = readWatchList(resp.Body, t0, wl)
	log.Printf("watch-list: first event %.1f ms, initial-events-end %.1f ms, %d ADDED", wl.FirstEventMs, wl.InitialEndMs, wl.Added)
	if err != nil {
		o.failf("watch-list", http.MethodGet, u, 200, "after %d ADDED: %v", wl.Added, err)
	} else if ok, want := o.whole(wl.Added); !ok {
		o.failf("watch-list", http.MethodGet, u, 200, "%d ADDED events before initial-events-end, %s", wl.Added, want)
	}
}

// readWatchList reads a watch-list's events from body until the bookmark
// annotated k8s.io/initial-events-end, timing from t0.
func readWatchList(body io.Reader, t0 time.Time, wl *watchListRun) error {
	sp := &eventSplitter{max: 64 << 20}
	sp.event = func(b []byte) error {
		if wl.FirstEventMs == 0 {
			wl.FirstEventMs = ms(time.Since(t0))
		}
		switch eventType(b) {
		case "ADDED":
			wl.Added++
		case "BOOKMARK":
			wl.Bookmarks++
			var ev watchEvent
			if err := json.Unmarshal(b, &ev); err != nil {
				return fmt.Errorf("bookmark: %v", err)
			}
			if ev.Object.Metadata.Annotations["k8s.io/initial-events-end"] == "true" {
				wl.InitialEndMs, wl.BookmarkRV, wl.BookmarkReached = ms(time.Since(t0)), ev.Object.Metadata.ResourceVersion, true
				return errStopStream
			}
		case "ERROR":
			var ev watchEvent
			_ = json.Unmarshal(b, &ev)
			return fmt.Errorf("ERROR event: %d %s", ev.Object.Code, ev.Object.Message)
		default:
			wl.Other++
		}
		return nil
	}
	n, err := io.CopyBuffer(sp, body, make([]byte, 256<<10))
	wl.Bytes = n
	switch {
	case errors.Is(err, errStopStream):
		return nil
	case err != nil:
		return err
	}
	return errors.New("the watch ended before the initial-events-end bookmark")
}

// listRV is the collection's resourceVersion, from a list of one item.
// With retry, a 429 is sent again (send); without, it is the answer.
func (o *objectsRun) listRV(ctx context.Context, retry bool) (string, int, error) {
	var l pageOf
	var code int
	var err error
	if retry {
		var b []byte
		if code, b, _, err = o.get(ctx, o.coll+"?limit=1"); err == nil && code == http.StatusOK {
			err = json.Unmarshal(b, &l)
		}
	} else {
		code, err = o.c.getJSON(ctx, o.coll+"?limit=1", "application/json", &l)
	}
	if err == nil && code == http.StatusOK && l.Metadata.ResourceVersion == "" {
		err = errors.New("no resourceVersion in the list")
	}
	return l.Metadata.ResourceVersion, code, err
}

// watchLatency opens -watchers watches from a recent resourceVersion (no
// relist), then sends -watch-updates merge patches of objects' annotation
// seqAnnotation, one every -watch-interval, and books when each watcher
// gets each patch's event.
func (o *objectsRun) watchLatency() {
	wl := &watchLatency{Watchers: o.watchers, Updates: o.updates, IntervalMs: ms(o.interval)}
	o.Watch = wl
	ctx, cancel := context.WithTimeout(o.ctx, time.Minute+time.Duration(o.updates)*(o.interval+10*time.Second)+o.wait)
	defer cancel()
	rv, code, err := o.listRV(ctx, true)
	if err != nil || code != http.StatusOK {
		o.failf("watch", http.MethodGet, o.coll+"?limit=1", code, "%v", err)
		return
	}
	wl.ResourceVersion = rv
	u := o.coll + "?watch=1&allowWatchBookmarks=true&resourceVersion=" + url.QueryEscape(rv) + "&timeoutSeconds=3600"
	book := newDeliveryBook(o.watchers, o.updates)
	opens := make([]time.Duration, o.watchers)
	var (
		mu       sync.Mutex
		firstErr string
		werrs    int
		opened   atomic.Int64
		wg       sync.WaitGroup
	)
	watchErr := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		werrs++
		firstErr = cmp.Or(firstErr, s)
	}
	t0 := time.Now()
	for w := range o.watchers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := o.follow(ctx, u, w, book, &opens[w], &opened); err != nil && ctx.Err() == nil {
				watchErr(fmt.Sprintf("watch %d: %v", w, err))
			}
		}()
	}
	allOpen := pollUntil(time.Minute, time.Millisecond, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return werrs > 0 || opened.Load() == int64(o.watchers) || ctx.Err() != nil
	})
	if !allOpen || werrs > 0 || opened.Load() != int64(o.watchers) {
		cancel()
		wg.Wait()
		o.failf("watch", http.MethodGet, u, 0, "opening %d watches: %d answered; %s", o.watchers, opened.Load(), firstErr)
		return
	}
	open := summarize("watch-open", opens, time.Since(t0))
	wl.Open = &open
	log.Printf("watch: %d watches from resourceVersion %s answered in %.1f ms (median %.1f ms); %d patches, one every %v", o.watchers, rv, open.MaxMs, open.P50Ms, o.updates, o.interval)
	wlat := o.patches(ctx, book)
	pollUntil(o.wait, 5*time.Millisecond, func() bool { return book.total.Load() >= int64(o.watchers*len(wlat)) || ctx.Err() != nil })
	cancel()
	wg.Wait()
	sum := book.summary()
	slices.Sort(wlat)
	wl.WritesOK, wl.WriteP50Ms, wl.WatchErrors = len(wlat), ms(percentile(wlat, 0.5)), werrs
	wl.deliveryFigures = sum.figures()
	log.Printf("watch: %d of %d deliveries, %d missed, p50 %.1f ms, p99 %.1f ms, max %.1f ms", wl.Delivered, wl.Expected, wl.Missed, wl.P50Ms, wl.P99Ms, wl.MaxMs)
	switch {
	case wl.WritesOK < o.updates:
		o.failf("watch", http.MethodPatch, o.coll, 0, "%d of %d patches failed", o.updates-wl.WritesOK, o.updates)
	case wl.Missed > 0 || wl.Duplicates > 0 || wl.Unexpected > 0 || werrs > 0:
		o.failf("watch", http.MethodGet, u, 200, "%d of %d deliveries missed (waited %v), %d duplicates, %d unexpected; %d watch errors, first: %s",
			wl.Missed, wl.Expected, o.wait, wl.Duplicates, wl.Unexpected, werrs, firstErr)
	}
}

// follow is watcher w: it opens the watch u, notes the time to its 200,
// and books each MODIFIED event carrying seqAnnotation until it has every
// patch's.
func (o *objectsRun) follow(ctx context.Context, u string, w int, book *deliveryBook, open *time.Duration, opened *atomic.Int64) error {
	resp, t0, err := o.send(ctx, u)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	*open = time.Since(t0)
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 2000))
		return fmt.Errorf("HTTP %d %s", resp.StatusCode, truncate(b, 500))
	}
	opened.Add(1)
	sp := &eventSplitter{max: 64 << 20}
	sp.event = func(b []byte) error {
		var ev watchEvent
		if err := json.Unmarshal(b, &ev); err != nil {
			return err
		}
		seq, serr := strconv.Atoi(ev.Object.Metadata.Annotations[seqAnnotation])
		switch {
		case ev.Type == "BOOKMARK":
		case ev.Type == "ERROR":
			return fmt.Errorf("ERROR event: %d %s", ev.Object.Code, ev.Object.Message)
		case ev.Type != "MODIFIED" || serr != nil:
			book.unexpected(w)
		case book.arrive(w, seq, time.Now()):
			return errStopStream
		}
		return nil
	}
	_, err = io.Copy(sp, resp.Body)
	if errors.Is(err, errStopStream) {
		return nil
	}
	return cmp.Or(err, errors.New("the watch ended"))
}

// patches sends the merge patches, one every -watch-interval, and returns
// the latencies of those the server took.
func (o *objectsRun) patches(ctx context.Context, book *deliveryBook) []time.Duration {
	var wlat []time.Duration
	var firstFail string
	start := time.Now()
	for k := 0; k < o.updates && ctx.Err() == nil; k++ {
		time.Sleep(time.Until(start.Add(time.Duration(k) * o.interval)))
		target := o.coll + "/" + o.name(k*7919%o.Objects)
		body := []byte(`{"metadata":{"annotations":{"` + seqAnnotation + `":"` + strconv.Itoa(k) + `"}}}`)
		pctx, pcancel := context.WithTimeout(ctx, 10*time.Second)
		ts := time.Now()
		code, b, err := o.c.do(pctx, http.MethodPatch, target, body, "Content-Type", "application/merge-patch+json")
		d := time.Since(ts)
		pcancel()
		ok := err == nil && code == http.StatusOK
		if book.wrote(k, ts, ok); ok {
			wlat = append(wlat, d)
		} else if firstFail == "" {
			firstFail = fmt.Sprintf("PATCH %s: HTTP %d %v %s", strings.TrimPrefix(target, o.c.base), code, err, truncate(b, 300))
			log.Print(firstFail)
		}
	}
	return wlat
}

// exited is the name of an -rss-pid process that is gone, if any.
func (o *objectsRun) exited() string {
	for _, p := range o.rss {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", p.pid)); err != nil {
			return fmt.Sprintf("%s (pid %d)", p.name, p.pid)
		}
	}
	return ""
}

// servingPhase polls, every 20 ms within -limit, the restarted server
// until a list of one, a GET of object 0 and a watch from the list's
// resourceVersion are each answered 200; then it lists the whole
// collection once and, -settle later, reads the RSS.
func (o *objectsRun) servingPhase(t0 time.Time) error {
	s := &servingRun{T0UnixNano: t0.UnixNano(), StartMs: ms(time.Since(t0))}
	o.Serving = s
	ctx, cancel := o.phaseCtx()
	defer cancel()
	var rv string
	poll := func(u string, what *float64, try func(context.Context) (int, error)) {
		if *what > 0 {
			return
		}
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		defer pcancel()
		code, err := try(pctx)
		if err == nil && code == http.StatusOK {
			*what = ms(time.Since(t0))
			return
		}
		s.LastError = fmt.Sprintf("%s: HTTP %d %v", strings.TrimPrefix(u, o.c.base), code, err)
	}
	getURL := o.coll + "/" + o.name(0)
	for ; ctx.Err() == nil && (s.ListMs == 0 || s.GetMs == 0 || s.WatchMs == 0); s.Polls++ {
		if s.Polls > 0 {
			time.Sleep(20 * time.Millisecond)
		}
		if gone := o.exited(); gone != "" {
			o.failf("serving", http.MethodGet, o.coll, 0, "%s exited before it served (%d polls; last: %s)", gone, s.Polls, s.LastError)
			return nil
		}
		poll(o.coll+"?limit=1", &s.ListMs, func(ctx context.Context) (int, error) {
			var code int
			var err error
			rv, code, err = o.listRV(ctx, false)
			return code, err
		})
		poll(getURL, &s.GetMs, func(ctx context.Context) (int, error) {
			code, _, err := o.c.do(ctx, http.MethodGet, getURL, nil)
			return code, err
		})
		if rv != "" {
			wu := o.coll + "?watch=1&resourceVersion=" + url.QueryEscape(rv) + "&timeoutSeconds=10"
			poll(wu, &s.WatchMs, func(ctx context.Context) (int, error) {
				resp, err := o.stream.send(ctx, http.MethodGet, wu, nil)
				if err != nil {
					return 0, err
				}
				resp.Body.Close()
				return resp.StatusCode, nil
			})
		}
	}
	if s.ListMs == 0 || s.GetMs == 0 || s.WatchMs == 0 {
		o.failf("serving", http.MethodGet, o.coll, 0, "not serving after %v (%d polls): list %v, get %v, watch %v; last: %s", o.limit, s.Polls, s.ListMs > 0, s.GetMs > 0, s.WatchMs > 0, s.LastError)
		return nil
	}
	s.AllMs = max(s.ListMs, s.GetMs, s.WatchMs)
	s.LastError = ""
	log.Printf("serving after t0: list %.0f ms, get %.0f ms, watch %.0f ms (%d polls)", s.ListMs, s.GetMs, s.WatchMs, s.Polls)
	l, err := o.listOnce()
	s.FirstList = &l
	log.Printf("first full list: first byte %.1f ms, all %.1f ms, %d items", l.FirstByteMs, l.Ms, l.Items)
	if err != nil {
		o.failf("serving-list", http.MethodGet, o.coll, l.Status, "%v", err)
	} else if ok, want := o.whole(l.Items); !ok {
		o.failf("serving-list", http.MethodGet, o.coll, l.Status, "%d items, %s", l.Items, want)
	} else {
		o.ServedBytes = math3(float64(l.ItemBytes) / float64(l.Items))
	}
	if len(o.rss) > 0 {
		time.Sleep(o.settle)
		s.RSS = readMemOf(o.rss)
	}
	return nil
}
