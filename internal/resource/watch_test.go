package resource

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

type watchEvent struct {
	Type   string         `json:"type"`
	Object map[string]any `json:"object"`
}

// watchEngine: five widgets, cached, and a server that is shutting down,
// so that a watch ends once it has sent what it has (the fixed cache
// has no live events).
func watchEngine(t *testing.T) *engine {
	e := fiveWidgets(t)
	stopping := make(chan struct{})
	close(stopping)
	e.h.Stopping = stopping
	return e
}

// events decodes a watch answer: one event a line.
func events(t *testing.T, a answer) []watchEvent {
	t.Helper()
	if a.code != http.StatusOK {
		t.Fatalf("watch: %d %s", a.code, a.raw)
	}
	var out []watchEvent
	for _, line := range strings.Split(strings.TrimSpace(a.raw), "\n") {
		if line == "" {
			continue
		}
		var ev watchEvent
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("event %q: %v", line, err)
		}
		out = append(out, ev)
	}
	return out
}

// summary is TYPE:name of each event (TYPE:@rv for bookmarks).
func summary(evs []watchEvent) string {
	var s []string
	for _, ev := range evs {
		md, _ := ev.Object["metadata"].(map[string]any)
		if ev.Type == "BOOKMARK" {
			s = append(s, ev.Type+":@"+md["resourceVersion"].(string))
			continue
		}
		name, _ := md["name"].(string)
		s = append(s, ev.Type+":"+name)
	}
	return strings.Join(s, ",")
}

func TestWatchInitialEvents(t *testing.T) {
	e := watchEngine(t)
	for _, c := range []struct{ query, want string }{
		// No resourceVersion: the current state, as ADDED events.
		{"", "ADDED:a,ADDED:b,ADDED:c,ADDED:d"},
		{"&resourceVersion=0", "ADDED:a,ADDED:b,ADDED:c,ADDED:d"},
		// Bookmarks alone do not mark the end of the initial events.
		{"&allowWatchBookmarks=true", "ADDED:a,ADDED:b,ADDED:c,ADDED:d"},
		{"&labelSelector=tier%3Ddb", "ADDED:b,ADDED:d"},
		{"&fieldSelector=metadata.name%3Dc", "ADDED:c"},
		// From a resourceVersion: only what changed after it.
		{"&resourceVersion=6", ""},
		// A streaming list: the state, then the bookmark that ends it.
		{"&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true", "ADDED:a,ADDED:b,ADDED:c,ADDED:d,BOOKMARK:@6"},
		// Without bookmarks, no bookmark.
		{"&sendInitialEvents=true&resourceVersionMatch=NotOlderThan", "ADDED:a,ADDED:b,ADDED:c,ADDED:d"},
		// sendInitialEvents=false: from now on.
		{"&sendInitialEvents=false&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true", ""},
	} {
		t.Run(c.query, func(t *testing.T) {
			a := e.do("GET", widgetsPath+"?watch=true"+c.query, "", "")
			evs := events(t, a)
			if got := summary(evs); got != c.want {
				t.Fatalf("events %s, want %s", got, c.want)
			}
			if ct := a.header.Get("Content-Type"); ct != "application/json" {
				t.Fatalf("Content-Type %q", ct)
			}
			for _, ev := range evs {
				if ev.Object["apiVersion"] != "example.com/v1" || ev.Object["kind"] != "Widget" {
					t.Fatalf("event object: %v", ev.Object)
				}
			}
		})
	}
	// The bookmark that ends the initial events says so, and nothing else.
	evs := events(t, e.do("GET", widgetsPath+"?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true", "", ""))
	bm := evs[len(evs)-1].Object
	if ann := bm["metadata"].(map[string]any)["annotations"].(map[string]any); len(ann) != 1 || ann["k8s.io/initial-events-end"] != "true" || bm["spec"] != nil {
		t.Fatalf("bookmark: %v", bm)
	}
	// Each ADDED object carries its own resourceVersion.
	if rv := evs[0].Object["metadata"].(map[string]any)["resourceVersion"]; rv != "2" {
		t.Fatalf("first event's resourceVersion: %v", rv)
	}

	// Every namespace, and the deprecated single-object watch.
	if got := summary(events(t, e.do("GET", "/apis/example.com/v1/widgets?watch=1", "", ""))); got != "ADDED:a,ADDED:b,ADDED:c,ADDED:d,ADDED:x" {
		t.Fatalf("every namespace: %s", got)
	}
	if got := summary(events(t, e.do("GET", "/apis/example.com/v1/watch/namespaces/default/widgets/b", "", ""))); got != "ADDED:b" {
		t.Fatalf("one object: %s", got)
	}
}

func TestWatchRefused(t *testing.T) {
	e := watchEngine(t)
	for _, c := range []struct {
		query  string
		code   int
		reason metav1.StatusReason
		msg    string
	}{
		{"sendInitialEvents=true", 422, metav1.StatusReasonInvalid, "resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"},
		{"resourceVersion=1&resourceVersionMatch=NotOlderThan", 422, metav1.StatusReasonInvalid, "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"},
		{"sendInitialEvents=true&resourceVersionMatch=Exact", 422, metav1.StatusReasonInvalid, `resourceVersionMatch: Unsupported value: "Exact": supported values: "NotOlderThan"`},
		{"resourceVersion=x", 400, metav1.StatusReasonBadRequest, "invalid resource version"},
		{"fieldSelector=spec.size%3D1", 400, metav1.StatusReasonBadRequest, "field label not supported: spec.size"},
	} {
		t.Run(c.query, func(t *testing.T) {
			e.do("GET", widgetsPath+"?watch=true&"+c.query, "", "").status(t, c.code, c.reason, c.msg)
		})
	}
	// A watch from a version whose history is gone: an ERROR event with
	// a 410 Expired, in a stream that began well.
	evs := events(t, e.do("GET", widgetsPath+"?watch=true&resourceVersion=2", "", ""))
	if len(evs) != 1 || evs[0].Type != "ERROR" {
		t.Fatalf("events: %v", evs)
	}
	st := evs[0].Object
	if st["kind"] != "Status" || st["code"] != 410.0 || st["reason"] != string(metav1.StatusReasonExpired) || st["message"] != "too old resource version: 2 (6)" {
		t.Fatalf("error event: %v", st)
	}
}

// A watch asked for as Tables sends each object as a Table, the column
// definitions in the first event only; as PartialObjectMetadata, the
// objects' metadata.
func TestWatchTransforms(t *testing.T) {
	e := watchEngine(t)
	evs := events(t, e.send("GET", widgetsPath+"?watch=true&labelSelector=tier%3Ddb", map[string]string{"Accept": asTable}, ""))
	if len(evs) != 2 {
		t.Fatalf("events: %v", evs)
	}
	for i, ev := range evs {
		tbl := ev.Object
		cols, _ := tbl["columnDefinitions"].([]any)
		if ev.Type != "ADDED" || tbl["kind"] != "Table" || tbl["apiVersion"] != "meta.k8s.io/v1" || (i == 0) != (len(cols) == 2) {
			t.Fatalf("event %d: %v", i, tbl)
		}
		row := tbl["rows"].([]any)[0].(map[string]any)
		if name := row["cells"].([]any)[0]; name != []string{"b", "d"}[i] {
			t.Fatalf("event %d row: %v", i, row)
		}
	}
	evs = events(t, e.send("GET", widgetsPath+"?watch=true&fieldSelector=metadata.name%3Db", map[string]string{"Accept": asPartial}, ""))
	if len(evs) != 1 || evs[0].Object["kind"] != "PartialObjectMetadata" || evs[0].Object["metadata"].(map[string]any)["name"] != "b" || evs[0].Object["spec"] != nil {
		t.Fatalf("metadata events: %v", evs)
	}
}
