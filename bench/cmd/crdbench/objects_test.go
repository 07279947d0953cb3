package main

import (
	"bytes"
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// release is what the tests read of a Release body.
type release struct {
	APIVersion, Kind string
	Metadata         objectMeta
	Spec             struct {
		Path, TargetNamespace string
		SourceRef             releaseRef
	}
	Status struct {
		LastAppliedRevision string
		Conditions          []releaseCondition
	}
}

func TestReleaseBody(t *testing.T) {
	b := releaseBody("default", 42)
	if !bytes.Equal(b, releaseBody("default", 42)) {
		t.Fatal("Release 42 differs between two builds")
	}
	var r release
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, b)
	}
	sum, rev := sha256.Sum256([]byte("42")), sha1.Sum([]byte("42"))
	wantRev := "main@sha1:" + hex.EncodeToString(rev[:])
	for _, c := range []struct{ what, got, want string }{
		{"apiVersion", r.APIVersion, "scale.example.com/v1"},
		{"kind", r.Kind, "Release"},
		{"name", r.Metadata.Name, "rel-0000042"},
		{"namespace", r.Metadata.Namespace, "default"},
		{"label app", r.Metadata.Labels["app.kubernetes.io/name"], "app-42"},
		{"label team", r.Metadata.Labels["team"], "team-2"},
		{"label part-of", r.Metadata.Labels["app.kubernetes.io/part-of"], "platform"},
		{"release-name", r.Metadata.Annotations["meta.helm.sh/release-name"], "rel-0000042"},
		{"checksum", r.Metadata.Annotations["checksum/config"], hex.EncodeToString(sum[:])},
		{"path", r.Spec.Path, "./apps/app-42/overlays/prod"},
		{"targetNamespace", r.Spec.TargetNamespace, "team-2"},
		{"source", r.Spec.SourceRef.Namespace + "/" + r.Spec.SourceRef.Name, "flux-system/platform-repo"},
		{"revision", r.Status.LastAppliedRevision, wantRev},
		{"message", r.Status.Conditions[0].Message, "Applied revision: " + wantRev},
		{"lastTransitionTime", r.Status.Conditions[0].LastTransitionTime, "2025-03-01T08:00:42Z"},
	} {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.what, c.got, c.want)
		}
	}
	if len(r.Metadata.Annotations["checksum/config"]) != 64 || len(wantRev) != len("main@sha1:")+40 {
		t.Errorf("checksum %q or revision %q of the wrong length", r.Metadata.Annotations["checksum/config"], wantRev)
	}
}

// checkBodies builds n bodies and checks each is JSON with a unique name
// and a size within [lo, hi].
func checkBodies(t *testing.T, n, lo, hi int, body func(int) []byte, name func(int) string) {
	t.Helper()
	seen := map[string]bool{}
	for i := range n {
		b := body(i)
		var o struct{ Metadata struct{ Name string } }
		if err := json.Unmarshal(b, &o); err != nil {
			t.Fatalf("body %d: %v", i, err)
		}
		if o.Metadata.Name != name(i) || seen[o.Metadata.Name] {
			t.Fatalf("body %d: name %q (want %q, once)", i, o.Metadata.Name, name(i))
		}
		seen[o.Metadata.Name] = true
		if len(b) < lo || len(b) > hi {
			t.Fatalf("body %d: %d bytes, want %d to %d", i, len(b), lo, hi)
		}
	}
}

func TestObjectBodiesSizesAndNames(t *testing.T) {
	// The Release as sent is about 880 bytes (about 1.5 KiB as served, with
	// its managedFields); the ConfigMap about 600 (about 1.1 KiB served).
	checkBodies(t, 20000, 860, 900, func(i int) []byte { return releaseBody("default", i) }, releaseName)
	checkBodies(t, 20000, 580, 620, func(i int) []byte { return configMapObjBody("default", i) }, configMapName)
	var cm struct {
		Kind     string
		Metadata objectMeta
		Data     map[string]string
	}
	if err := json.Unmarshal(configMapObjBody("ns1", 7), &cm); err != nil {
		t.Fatal(err)
	}
	y := cm.Data["kustomization.yaml"]
	if cm.Kind != "ConfigMap" || cm.Metadata.Namespace != "ns1" || cm.Metadata.Labels["team"] != "team-7" ||
		!strings.Contains(y, "namespace: team-7\n") || !strings.Contains(y, "registry.example.com/app-7\n") || !strings.Contains(y, "count: 3\n") {
		t.Fatalf("ConfigMap 7: %+v", cm)
	}
}

// cannedList is a list of the items, with whitespace and strings that
// hold braces, brackets, quotes, escapes and the word "items".
func cannedList(items []string) string {
	return `{"kind":"ReleaseList","apiVersion":"scale.example.com/v1","metadata":{"resourceVersion":"77","note":"} ] { [ \"items\": [\"}"},` +
		"\n  \"items\" : [\n" + strings.Join(items, " ,\n") + "\n]}\n"
}

func cannedItems() []string {
	return []string{
		`{"metadata":{"name":"a"},"spec":{"items":[{"x":1},{"y":"]}"}]}}`,
		`{"metadata":{"name":"b","annotations":{"q":"a \"quoted\" {brace} \\","r":"\"}]"}},"data":[[],{}]}`,
		`{ "metadata" : { "name" : "c" } }`,
	}
}

func TestItemCounter(t *testing.T) {
	items := cannedItems()
	list := cannedList(items)
	want := 0
	for _, it := range items {
		want += len(it)
	}
	for _, chunk := range []int{1, 3, 7, 64, len(list)} {
		var c itemCounter
		for i := 0; i < len(list); i += chunk {
			if _, err := c.Write([]byte(list[min(i, len(list)):min(i+chunk, len(list))])); err != nil {
				t.Fatal(err)
			}
		}
		if c.Items != 3 || c.ItemBytes != int64(want) || c.Total != int64(len(list)) {
			t.Errorf("chunks of %d: %d items, %d item bytes, %d bytes; want 3, %d, %d", chunk, c.Items, c.ItemBytes, c.Total, want, len(list))
		}
	}
	// Real bodies: the ConfigMaps' YAML is full of escapes (\n).
	items, want = nil, 0
	for i := range 200 {
		for _, b := range [][]byte{configMapObjBody("default", i), releaseBody("default", i)} {
			items, want = append(items, string(b)), want+len(b)
		}
	}
	list = cannedList(items)
	for _, chunk := range []int{1, 13, 4096} {
		var c itemCounter
		for i := 0; i < len(list); i += chunk {
			_, _ = c.Write([]byte(list[i:min(i+chunk, len(list))]))
		}
		if c.Items != 400 || c.ItemBytes != int64(want) {
			t.Errorf("bodies in chunks of %d: %d items, %d item bytes; want 400, %d", chunk, c.Items, c.ItemBytes, want)
		}
	}
	var empty itemCounter
	_, _ = empty.Write([]byte(`{"kind":"List","metadata":{"items":[{"a":1}]},"items":[]}`))
	if empty.Items != 0 {
		t.Errorf("an empty list: %d items", empty.Items)
	}
}

// testRun is an objectsRun against a test server.
func testRun(t *testing.T, h http.Handler, n int) *objectsRun {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	if !strings.HasPrefix(srv.URL, "http://127.0.0.1:") {
		t.Fatalf("test server at %s, not on 127.0.0.1", srv.URL)
	}
	c, err := connect(srv.URL, tlsFlags{}, 2)
	if err != nil {
		t.Fatal(err)
	}
	return &objectsRun{objectsResult: &objectsResult{Objects: n}, ctx: context.Background(), c: c,
		stream: &client{hc: &http.Client{Transport: c.hc.Transport}, base: c.base, u: c.u},
		coll:   c.base + "/apis/scale.example.com/v1/namespaces/default/releases", name: releaseName,
		limit: 30 * time.Second, page: 2, lists: 2}
}

func TestListOnceAndFullLists(t *testing.T) {
	var items []string
	want := 0
	for i := range 50 {
		b := releaseBody("default", i)
		items, want = append(items, string(b)), want+len(b)
	}
	body := cannedList(items)
	o := testRun(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(body[:100]))
		w.(http.Flusher).Flush()
		time.Sleep(20 * time.Millisecond)
		_, _ = w.Write([]byte(body[100:]))
	}), 50)
	l, err := o.listOnce()
	if err != nil {
		t.Fatal(err)
	}
	if l.Status != 200 || l.Items != 50 || l.ItemBytes != int64(want) || l.Bytes != int64(len(body)) {
		t.Fatalf("list: %+v; want 50 items, %d item bytes, %d bytes", l, want, len(body))
	}
	if l.FirstByteMs <= 0 || l.Ms < l.FirstByteMs+15 {
		t.Fatalf("first byte %.1f ms, all %.1f ms: want the last byte 20 ms after the first", l.FirstByteMs, l.Ms)
	}
	o.fullLists()
	if len(o.Failures) != 0 || len(o.Lists.Rounds) != 2 || o.ServedBytes != float64(want)/50 {
		t.Fatalf("fullLists: failures %v, rounds %d, served %.1f bytes (want %.1f)", o.Failures, len(o.Lists.Rounds), o.ServedBytes, float64(want)/50)
	}
	o.Objects = 51 // the list now misses one
	o.fullLists()
	if len(o.Failures) != 1 || !strings.Contains(o.Failures[0].Error, "50 items, want at least 51") {
		t.Fatalf("a list short of one item: failures %v", o.Failures)
	}
}

func TestRetryAfter429(t *testing.T) {
	calls := 0
	o := testRun(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls++; calls <= 2 {
			w.Header().Set("Retry-After", "0")
			http.Error(w, `{"kind":"Status","code":429,"message":"storage is (re)initializing"}`, http.StatusTooManyRequests)
			return
		}
		_, _ = w.Write([]byte(cannedList(cannedItems())))
	}), 3)
	l, err := o.listOnce()
	if err != nil || l.Status != 200 || l.Items != 3 || calls != 3 || o.retries.Load() != 2 {
		t.Fatalf("list after two 429s: %+v, %v; %d calls, %d retries", l, err, calls, o.retries.Load())
	}
}

// watchStream writes the events, one line each, flushing after each.
func watchStream(events ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		for _, e := range events {
			_, _ = fmt.Fprintln(w, e)
			w.(http.Flusher).Flush()
		}
	}
}

func added(i int) string {
	return `{"type":"ADDED","object":` + string(releaseBody("default", i)) + `}`
}

const (
	plainBookmark = `{"type":"BOOKMARK","object":{"kind":"Release","metadata":{"resourceVersion":"5"}}}`
	endBookmark   = `{"type":"BOOKMARK","object":{"kind":"Release","metadata":{"resourceVersion":"9","annotations":{"k8s.io/initial-events-end":"true"}}}}`
)

func TestWatchList(t *testing.T) {
	var events []string
	for i := range 30 {
		events = append(events, added(i))
	}
	events = append(events, plainBookmark, endBookmark, added(99), added(100))
	o := testRun(t, watchStream(events...), 30)
	o.watchList()
	wl := o.WatchList
	if len(o.Failures) != 0 || wl.Added != 30 || wl.Bookmarks != 2 || !wl.BookmarkReached || wl.BookmarkRV != "9" || wl.Other != 0 {
		t.Fatalf("watch-list: %+v, failures %v", wl, o.Failures)
	}
	if wl.FirstEventMs <= 0 || wl.InitialEndMs < wl.FirstEventMs {
		t.Fatalf("first event %.3f ms, end %.3f ms", wl.FirstEventMs, wl.InitialEndMs)
	}

	// No initial-events-end: a failure.
	o = testRun(t, watchStream(added(0), plainBookmark), 1)
	if o.watchList(); len(o.Failures) != 1 || !strings.Contains(o.Failures[0].Error, "before the initial-events-end bookmark") {
		t.Fatalf("a stream without the end bookmark: %v", o.Failures)
	}
	// An ERROR event: a failure.
	o = testRun(t, watchStream(added(0), `{"type":"ERROR","object":{"kind":"Status","code":410,"message":"too old"}}`), 1)
	if o.watchList(); len(o.Failures) != 1 || !strings.Contains(o.Failures[0].Error, "410 too old") {
		t.Fatalf("an ERROR event: %v", o.Failures)
	}
	// A server without watch-list: recorded, not failed.
	o = testRun(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"kind":"Status","code":400,"message":"sendInitialEvents is forbidden"}`, http.StatusBadRequest)
	}), 1)
	if o.watchList(); len(o.Failures) != 0 || o.WatchList.Status != 400 || !strings.Contains(o.WatchList.Unsupported, "forbidden") {
		t.Fatalf("a server refusing watch-list: %+v, failures %v", o.WatchList, o.Failures)
	}
}

func TestEventSplitter(t *testing.T) {
	stream := " {\"type\":\"A\",\"s\":\"}{\\\"\"}\n{\"type\":\"B\",\"o\":{\"x\":[1,{}]}}\n\n{\"t\":\"C\"}"
	for _, chunk := range []int{1, 2, 5, len(stream)} {
		var got []string
		sp := &eventSplitter{event: func(b []byte) error {
			if !json.Valid(b) {
				t.Fatalf("chunks of %d: event %q is not JSON", chunk, b)
			}
			got = append(got, string(b))
			return nil
		}}
		for i := 0; i < len(stream); i += chunk {
			if _, err := sp.Write([]byte(stream[i:min(i+chunk, len(stream))])); err != nil {
				t.Fatal(err)
			}
		}
		if len(got) != 3 || got[0] != `{"type":"A","s":"}{\""}` || got[2] != `{"t":"C"}` {
			t.Fatalf("chunks of %d: %q", chunk, got)
		}
	}
	for _, c := range []struct{ ev, want string }{
		{`{"type":"ADDED","object":{}}`, "ADDED"},
		{`{"object":{"type":"x"},"type":"BOOKMARK"}`, "BOOKMARK"},
		{`{ "type" : "MODIFIED" }`, "MODIFIED"},
	} {
		if got := eventType([]byte(c.ev)); got != c.want {
			t.Errorf("eventType(%s) = %q, want %q", c.ev, got, c.want)
		}
	}
}

// pagesHandler serves names in pages of the limit asked, continue being
// the next index; dup repeats a name on the second page.
func pagesHandler(names []string, dup bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
		from, _ := strconv.Atoi(r.URL.Query().Get("continue"))
		to := min(from+limit, len(names))
		var p pageOf
		for _, nm := range names[from:to] {
			p.Items = append(p.Items, struct {
				Metadata struct {
					Name string `json:"name"`
				} `json:"metadata"`
			}{})
			p.Items[len(p.Items)-1].Metadata.Name = nm
		}
		if dup && from > 0 {
			p.Items[0].Metadata.Name = names[0]
		}
		if to < len(names) {
			p.Metadata.Continue = strconv.Itoa(to)
		}
		_ = json.NewEncoder(w).Encode(p)
	}
}

func TestPaged(t *testing.T) {
	var names []string
	for i := range 25 {
		names = append(names, releaseName(i))
	}
	o := testRun(t, pagesHandler(names, false), 25)
	o.page = 2
	o.paged()
	if w := o.Paged; len(o.Failures) != 0 || w.Pages != 13 || w.Items != 25 || w.Unique != 25 || w.Ours != 25 || w.Others != 0 || w.Phase.Requests != 13 || w.FirstPageMs <= 0 {
		t.Fatalf("walk: %+v, failures %v", o.Paged, o.Failures)
	}
	o = testRun(t, pagesHandler(names, true), 25)
	o.page = 10
	if o.paged(); len(o.Failures) != 1 || !strings.Contains(o.Failures[0].Error, "25 items, 23 distinct names, 23 of the 25") {
		t.Fatalf("a walk with a name twice: %v", o.Failures)
	}
	// Another object besides the 25: counted apart, not a failure.
	o = testRun(t, pagesHandler(append(names, "kube-root-ca.crt"), false), 25)
	o.page = 10
	if o.paged(); len(o.Failures) != 0 || o.Paged.Ours != 25 || o.Paged.Others != 1 || o.Paged.Items != 26 {
		t.Fatalf("a walk with another object: %+v, %v", o.Paged, o.Failures)
	}
}

func TestWholeAndConsistent(t *testing.T) {
	o := testRun(t, http.NotFoundHandler(), 10)
	if ok, _ := o.whole(11); !ok {
		t.Error("11 items of 10 objects: not whole")
	}
	if ok, want := o.whole(9); ok || !strings.Contains(want, "at least 10") {
		t.Errorf("9 items of 10 objects: whole (%s)", want)
	}
	// The walk found the 10 and one other: every list must hold 11.
	ph := phase{Requests: 1}
	o.Paged = &pagedWalk{Items: 11, Unique: 11, Ours: 10, Others: 1, Phase: &ph}
	o.Lists = &fullLists{Rounds: []fullList{{Status: 200, Items: 11}, {Status: 200, Items: 11}}}
	o.WatchList = &watchListRun{Status: 200, Added: 11, BookmarkReached: true}
	if o.consistent(); len(o.Failures) != 0 {
		t.Fatalf("consistent phases: %v", o.Failures)
	}
	o.Lists.Rounds[1].Items, o.WatchList.Added = 10, 12
	if o.consistent(); len(o.Failures) != 2 || !strings.Contains(o.Failures[0].Error, "list 2: 10 items, the paged walk 11") ||
		!strings.Contains(o.Failures[1].Error, "12 ADDED") {
		t.Fatalf("a list short of one, a watch-list with one more: %v", o.Failures)
	}
}

func TestExited(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skip("no true:", err)
	}
	o := &objectsRun{}
	_ = o.rss.Set(fmt.Sprintf("self=%d", os.Getpid()))
	if got := o.exited(); got != "" {
		t.Fatalf("this process counted as exited: %q", got)
	}
	_ = o.rss.Set(fmt.Sprintf("gone=%d", cmd.Process.Pid))
	if got := o.exited(); !strings.HasPrefix(got, "gone (pid ") {
		t.Fatalf("an exited process: %q", got)
	}
}
