package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"github.com/crdserver/crdserver/server"
)

// next reads one event from a watch, failing after a while.
func next(t *testing.T, w watch.Interface) watch.Event {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			t.Fatal("watch closed")
		}
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no watch event")
	}
	return watch.Event{}
}

func rvOf(t *testing.T, ev watch.Event) int64 {
	t.Helper()
	u := ev.Object.(*unstructured.Unstructured)
	n, err := strconv.ParseInt(u.GetResourceVersion(), 10, 64)
	if err != nil {
		t.Fatalf("resourceVersion %q", u.GetResourceVersion())
	}
	return n
}

func TestWatchFromResourceVersion(t *testing.T) {
	e := start(t)
	e.createCRD(cronTabCRD(t))
	cts := e.dyn.Resource(crontabs).Namespace("default")
	first, _ := cts.Create(e.ctx, cronTab("before", nil), metav1.CreateOptions{})
	l, _ := cts.List(e.ctx, metav1.ListOptions{})

	// From the list's resourceVersion: no initial events, then every change.
	w, err := cts.Watch(e.ctx, metav1.ListOptions{ResourceVersion: l.GetResourceVersion()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	created, _ := cts.Create(e.ctx, cronTab("a", nil), metav1.CreateOptions{})
	created.SetLabels(map[string]string{"x": "y"})
	updated, _ := cts.Update(e.ctx, created, metav1.UpdateOptions{})
	_ = cts.Delete(e.ctx, "a", metav1.DeleteOptions{})
	var last int64
	for _, want := range []watch.EventType{watch.Added, watch.Modified, watch.Deleted} {
		ev := next(t, w)
		u := ev.Object.(*unstructured.Unstructured)
		if ev.Type != want || u.GetName() != "a" || u.GetKind() != "CronTab" || u.GetAPIVersion() != "stable.example.com/v1" {
			t.Fatalf("got %s %s, want %s a", ev.Type, u.GetName(), want)
		}
		if rv := rvOf(t, ev); rv <= last {
			t.Fatalf("resourceVersions not increasing: %d after %d", rv, last)
		} else {
			last = rv
		}
		if want == watch.Modified && u.GetResourceVersion() != updated.GetResourceVersion() {
			t.Fatalf("MODIFIED rv %s, want %s", u.GetResourceVersion(), updated.GetResourceVersion())
		}
	}

	// From "0" (and unset): the current state as ADDED first.
	for _, rv := range []string{"0", ""} {
		w0, err := cts.Watch(e.ctx, metav1.ListOptions{ResourceVersion: rv})
		if err != nil {
			t.Fatal(err)
		}
		ev := next(t, w0)
		if ev.Type != watch.Added || ev.Object.(*unstructured.Unstructured).GetName() != first.GetName() {
			t.Fatalf("rv=%q: initial event %s", rv, ev.Type)
		}
		w0.Stop()
	}
}

func TestWatchSelectors(t *testing.T) {
	e := start(t)
	e.createCRD(cronTabCRD(t))
	cts := e.dyn.Resource(crontabs).Namespace("default")
	l, _ := cts.List(e.ctx, metav1.ListOptions{})
	w, err := cts.Watch(e.ctx, metav1.ListOptions{ResourceVersion: l.GetResourceVersion(), LabelSelector: "color=red"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	ct, _ := cts.Create(e.ctx, cronTab("s", map[string]string{"color": "blue"}), metav1.CreateOptions{})
	ct.SetLabels(map[string]string{"color": "red"})
	ct, _ = cts.Update(e.ctx, ct, metav1.UpdateOptions{})
	if ev := next(t, w); ev.Type != watch.Added {
		t.Fatalf("entering the selector: %s", ev.Type)
	}
	ct.SetLabels(map[string]string{"color": "green"})
	moved, _ := cts.Update(e.ctx, ct, metav1.UpdateOptions{})
	ev := next(t, w)
	u := ev.Object.(*unstructured.Unstructured)
	if ev.Type != watch.Deleted || u.GetLabels()["color"] != "red" || u.GetResourceVersion() != moved.GetResourceVersion() {
		t.Fatalf("leaving the selector: %s %v rv %s want %s", ev.Type, u.GetLabels(), u.GetResourceVersion(), moved.GetResourceVersion())
	}
	// A field selector on the name watches one object.
	w2, err := cts.Watch(e.ctx, metav1.ListOptions{FieldSelector: "metadata.name=other"})
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Stop()
	_, _ = cts.Create(e.ctx, cronTab("skipped", nil), metav1.CreateOptions{})
	_, _ = cts.Create(e.ctx, cronTab("other", nil), metav1.CreateOptions{})
	if ev := next(t, w2); ev.Object.(*unstructured.Unstructured).GetName() != "other" {
		t.Fatal("field selector let another object through")
	}
}

// rawWatch opens a watch with raw HTTP and returns a line reader.
func (e *env) rawWatch(path string) (*http.Response, *bufio.Scanner) {
	e.t.Helper()
	req, _ := http.NewRequestWithContext(e.ctx, "GET", e.srv.URL()+path, nil)
	resp, err := (&http.Client{Transport: e.rt}).Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { resp.Body.Close() })
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	return resp, sc
}

type rawEvent struct {
	Type   string         `json:"type"`
	Object map[string]any `json:"object"`
}

func readEvent(t *testing.T, sc *bufio.Scanner) rawEvent {
	t.Helper()
	if !sc.Scan() {
		t.Fatalf("stream ended: %v", sc.Err())
	}
	var ev rawEvent
	if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
		t.Fatalf("event is not JSON: %s", sc.Bytes())
	}
	return ev
}

func TestWatchBookmarksAndInitialEvents(t *testing.T) {
	e := start(t, func(c *server.Config) { c.Cache.BookmarkInterval = 50 * time.Millisecond })
	e.createCRD(cronTabCRD(t))
	e.seed("default", 2)

	// Streaming list: ADDED for each object, then the initial-events-end
	// bookmark.
	resp, sc := e.rawWatch(ctPath + "?watch=1&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("watch: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	for i := 0; i < 2; i++ {
		if ev := readEvent(t, sc); ev.Type != "ADDED" {
			t.Fatalf("initial event %d: %s", i, ev.Type)
		}
	}
	ev := readEvent(t, sc)
	md, _ := ev.Object["metadata"].(map[string]any)
	ann, _ := md["annotations"].(map[string]any)
	if ev.Type != "BOOKMARK" || ann["k8s.io/initial-events-end"] != "true" || ev.Object["kind"] != "CronTab" || ev.Object["apiVersion"] != "stable.example.com/v1" || md["resourceVersion"] == "" {
		t.Fatalf("initial-events-end bookmark: %+v", ev)
	}
	// Periodic bookmarks follow.
	if ev := readEvent(t, sc); ev.Type != "BOOKMARK" {
		t.Fatalf("periodic bookmark: %+v", ev)
	}

	// Without allowWatchBookmarks, no bookmarks: the next event is a change.
	_, sc2 := e.rawWatch(ctPath + "?watch=true&resourceVersion=0")
	readEvent(t, sc2)
	readEvent(t, sc2)
	time.Sleep(200 * time.Millisecond)
	if _, err := e.dyn.Resource(crontabs).Namespace("default").Create(e.ctx, cronTab("later", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if ev := readEvent(t, sc2); ev.Type != "ADDED" || ev.Object["metadata"].(map[string]any)["name"] != "later" {
		t.Fatalf("expected the change, got %+v", ev)
	}

	// Bad option combinations: 422.
	expectStatus(t, e.do("GET", ctPath+"?watch=1&sendInitialEvents=true", ""), http.StatusUnprocessableEntity, "Invalid",
		"sendInitialEvents requires setting resourceVersionMatch to NotOlderThan")
	expectStatus(t, e.do("GET", ctPath+"?watch=1&resourceVersionMatch=NotOlderThan&resourceVersion=1", ""), http.StatusUnprocessableEntity, "Invalid",
		"resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided")
	// YAML has no stream framing: 406.
	// (The Status comes in YAML, as asked.)
	r := e.do("GET", ctPath+"?watch=1", "", "Accept", "application/yaml")
	if r.code != http.StatusNotAcceptable || !contains(r.body, "reason: NotAcceptable") || r.header.Get("Content-Type") != "application/yaml" {
		t.Fatalf("YAML watch: %d %s", r.code, r.body)
	}
}

func TestWatchTimeoutAndExpiry(t *testing.T) {
	e := start(t, func(c *server.Config) { c.Cache.History = 2 })
	e.createCRD(cronTabCRD(t))
	e.seed("default", 1)
	l, _ := e.dyn.Resource(crontabs).Namespace("default").List(e.ctx, metav1.ListOptions{})
	// timeoutSeconds ends the stream cleanly.
	_, sc := e.rawWatch(ctPath + "?watch=1&timeoutSeconds=1&resourceVersion=" + l.GetResourceVersion())
	done := make(chan bool)
	go func() { done <- sc.Scan() }()
	select {
	case more := <-done:
		if more {
			t.Fatalf("unexpected event %s", sc.Bytes())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("timeoutSeconds did not end the watch")
	}
	// With bookmarks asked for, the last thing before the timeout is a
	// bookmark at the newest revision, as kube-apiserver sends it 2 s
	// before a watch's deadline.
	_, sc = e.rawWatch(ctPath + "?watch=1&timeoutSeconds=3&allowWatchBookmarks=true&resourceVersion=" + l.GetResourceVersion())
	ev := readEvent(t, sc)
	md, _ := ev.Object["metadata"].(map[string]any)
	if rv, _ := md["resourceVersion"].(string); ev.Type != "BOOKMARK" || rv != l.GetResourceVersion() {
		t.Fatalf("pre-timeout bookmark: %+v", ev)
	}
	if sc.Scan() {
		t.Fatalf("stream goes on after the pre-timeout bookmark: %s", sc.Bytes())
	}
	// Once the cache's history has moved past a resourceVersion, a watch
	// from it gets the events it lacks from etcd, then the rest.
	e.seed("kube-public", 4)
	for _, name := range []string{"b", "c", "d"} {
		if _, err := e.dyn.Resource(crontabs).Namespace("default").Create(e.ctx, cronTab(name, nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	resp, sc := e.rawWatch(ctPath + "?watch=1&resourceVersion=" + l.GetResourceVersion())
	if resp.StatusCode != 200 {
		t.Fatalf("watch from before the history: %d", resp.StatusCode)
	}
	prev := l.GetResourceVersion()
	for _, name := range []string{"b", "c", "d"} {
		ev := readEvent(t, sc)
		md, _ := ev.Object["metadata"].(map[string]any)
		rv, _ := md["resourceVersion"].(string)
		if ev.Type != "ADDED" || md["name"] != name || rvLess(rv, prev) {
			t.Fatalf("watch from before the history: want ADDED %s after %s, got %+v", name, prev, ev)
		}
		prev = rv
	}
}

// rvLess compares resourceVersions as numbers (in a test, where they are
// etcd revisions).
func rvLess(a, b string) bool {
	x, _ := strconv.ParseInt(a, 10, 64)
	y, _ := strconv.ParseInt(b, 10, 64)
	return x <= y
}

func TestWatchFromCompactedRevision(t *testing.T) {
	// A cache's history of two events: the watch below is served from
	// etcd (a watch the history still holds is served from it, compacted
	// or not, as kube-apiserver's watch cache does).
	e := start(t, func(c *server.Config) {
		c.CompactionInterval = 50 * time.Millisecond
		c.Cache.History = 2
	})
	e.createCRD(cronTabCRD(t))
	e.seed("default", 1)
	l, err := e.dyn.Resource(crontabs).Namespace("default").List(e.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Writes move the revision on; the compactor drops etcd's history
	// after the list: a watch from it gets one ERROR event with 410
	// Expired.
	var ev rawEvent
	err = wait.PollUntilContextTimeout(e.ctx, 20*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		filler := cronTab("", nil)
		filler.SetGenerateName("filler-")
		if _, err := e.dyn.Resource(crontabs).Namespace("default").Create(ctx, filler, metav1.CreateOptions{}); err != nil {
			return false, err
		}
		_, sc := e.rawWatch(ctPath + "?watch=1&timeoutSeconds=1&resourceVersion=" + l.GetResourceVersion())
		if !sc.Scan() {
			return false, nil
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return false, err
		}
		if ev.Type == "ERROR" && sc.Scan() {
			t.Fatalf("stream goes on after ERROR: %s", sc.Bytes())
		}
		return ev.Type == "ERROR", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if ev.Object["code"] != float64(410) || ev.Object["reason"] != "Expired" ||
		!strings.HasPrefix(ev.Object["message"].(string), "too old resource version: "+l.GetResourceVersion()+" (") {
		t.Fatalf("compacted watch: %+v", ev)
	}
}

func TestInformerSyncs(t *testing.T) {
	e := start(t)
	e.createCRD(cronTabCRD(t))
	e.seed("default", 3)
	// client-go's informer (a reflector using the streaming-list protocol
	// where supported) sees the objects and later changes.
	f := dynamicinformer.NewDynamicSharedInformerFactory(e.dyn, 0)
	inf := f.ForResource(crontabs).Informer()
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("informer did not sync")
	}
	if n := len(inf.GetStore().List()); n != 3 {
		t.Fatalf("informer has %d objects", n)
	}
	if _, err := e.dyn.Resource(crontabs).Namespace("default").Create(e.ctx, cronTab("late", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		_, ok, _ := inf.GetStore().GetByKey("default/late")
		return ok, nil
	})
	if err != nil {
		t.Fatal("informer missed a change")
	}
}
