package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

func TestPathsBody(t *testing.T) {
	group := "r1-abc123.paths.crdbench.example.com"
	for _, size := range []int{1024, 2000} {
		for _, i := range []int{0, 7, 9999} {
			b := pathsBody(group, "item-"+strings.Repeat("0", 5), i, size)
			if len(b) != size {
				t.Fatalf("size %d, object %d: body is %d bytes", size, i, len(b))
			}
			var obj map[string]any
			if err := json.Unmarshal(b, &obj); err != nil {
				t.Fatal(err)
			}
			if obj["apiVersion"] != group+"/v1" || obj["kind"] != "PathItem" || jsonPath(obj, "spec", "seq") == nil || jsonPath(obj, "spec", "data") == "" {
				t.Fatalf("body %s", b)
			}
		}
	}
	// Smaller than the object itself: no padding.
	if b := pathsBody(group, "x", 1, 0); bytes.Contains(b, []byte(`"data":"0`)) || len(b) > 300 {
		t.Fatalf("unpadded body %s", b)
	}
	// Deterministic per object, different between objects.
	a1, a2, b1 := pathsBody(group, "x", 1, 1024), pathsBody(group, "x", 1, 1024), pathsBody(group, "x", 2, 1024)
	if !bytes.Equal(a1, a2) || bytes.Equal(a1, b1) {
		t.Fatal("padding not deterministic per object")
	}
	// The pathsCRD schema covers the body's spec fields.
	var crd map[string]any
	if err := json.Unmarshal(pathsCRD(group, "abc123"), &crd); err != nil {
		t.Fatal(err)
	}
	if jsonPath(crd, "metadata", "name") != pathsPlural+"."+group {
		t.Fatalf("CRD name %v", crd["metadata"])
	}
	for _, f := range []string{"size", "color", "tags", "seq", "data"} {
		if jsonPath(crdVersion(crd, "v1"), "schema", "openAPIV3Schema", "properties", "spec", "properties", f) == nil {
			t.Fatalf("schema lacks spec.%s", f)
		}
	}
}

func TestCRDHelpers(t *testing.T) {
	var crd map[string]any
	_ = json.Unmarshal(withLabel(crontabCRD("example.com", "https://127.0.0.1:1/convert", []byte("pem")), "run1"), &crd)
	if l := jsonPath(crd, "metadata", "labels", pathsLabel); l != "run1" {
		t.Fatalf("label %v", l)
	}
	if crdConversion(crd) != "Webhook" {
		t.Fatalf("conversion %q", crdConversion(crd))
	}
	if crdEstablished(crd) {
		t.Fatal("Established without a status")
	}
	crd["status"] = map[string]any{"conditions": []any{
		map[string]any{"type": "NamesAccepted", "status": "True"},
		map[string]any{"type": "Established", "status": "True"},
	}}
	if !crdEstablished(crd) {
		t.Fatal("not Established")
	}
	crd["metadata"].(map[string]any)["generation"] = float64(3)
	if crdGeneration(crd) != 3 {
		t.Fatalf("generation %d", crdGeneration(crd))
	}
	if crdHasColumn(crd, "v1", "Image") {
		t.Fatal("column before it was added")
	}
	if !addColumn(crd, "v1", map[string]any{"name": "Image", "type": "string", "jsonPath": ".spec.image"}) || !crdHasColumn(crd, "v1", "Image") {
		t.Fatal("column not added to v1")
	}
	if crdHasColumn(crd, "v1beta1", "Image") || addColumn(crd, "v9", nil) {
		t.Fatal("column on the wrong version")
	}
}

func TestCheckNamesAndParse(t *testing.T) {
	seen := map[string]bool{}
	if p := checkNames([]string{"a", "b"}, 3, seen); p != "" {
		t.Fatal(p)
	}
	if p := checkNames([]string{"c"}, 3, seen); p != "" || len(seen) != 3 {
		t.Fatal(p)
	}
	if p := checkNames([]string{"b"}, 3, seen); !strings.Contains(p, "twice") {
		t.Fatalf("duplicate not found: %q", p)
	}
	if p := checkNames([]string{"d"}, 3, seen); !strings.Contains(p, "want 3") {
		t.Fatalf("too many not found: %q", p)
	}
	kind, cont, names, err := listNames([]byte(`{"kind":"PathItemList","metadata":{"continue":"tok"},"items":[{"metadata":{"name":"x"}},{"metadata":{"name":"y"}}]}`))
	if err != nil || kind != "PathItemList" || cont != "tok" || strings.Join(names, ",") != "x,y" {
		t.Fatalf("listNames: %q %q %v %v", kind, cont, names, err)
	}
	if ws, err := parseWatchers("200, 1000"); err != nil || len(ws) != 2 || ws[1] != 1000 {
		t.Fatalf("parseWatchers: %v %v", ws, err)
	}
	for _, bad := range []string{"0", "x", "6000"} {
		if _, err := parseWatchers(bad); err == nil {
			t.Fatalf("parseWatchers(%q) accepted", bad)
		}
	}
}

// The report shows no figure for a row that failed in any round, and the
// first GET's status when it was not a 200.
func TestPathsReportCells(t *testing.T) {
	ok := func(round int, ms float64) pathsRound {
		return pathsRound{Round: round, ListMedianMs: ms, Creates: &phase{Requests: 10, PerSecond: 100 * ms},
			Conv: &convPaths{Edit: &convChange{List: &convListRun{Ms: ms, Status: 200, UntilOKMs: ms, Attempts: 1}}}}
	}
	s := pathsSide{res: &pathsResult{RoundsData: []pathsRound{ok(1, 10), ok(2, 30), ok(3, 20)}}}
	list := func(rd *pathsRound) (float64, bool) { return rd.ListMedianMs, rd.ListMedianMs > 0 }
	if v := s.cell(pathsRows("list"), list, 1, " ms"); !v.ok || v.v != 20 || v.String() != "20.0 ms (10.0–30.0)" {
		t.Fatalf("cell %q", v)
	}
	s.res.RoundsData[1].Failed = map[string]string{"list": "wrong answer"}
	if v := s.cell(pathsRows("list"), list, 1, " ms"); v.ok || !strings.Contains(v.String(), "failed") {
		t.Fatalf("failed row shown as %q", v)
	}
	// Another row's failure does not hide this one.
	if v := s.cell(pathsRows("creates"), phaseFig(func(rd *pathsRound) *phase { return rd.Creates }, func(p *phase) float64 { return p.PerSecond }), 0, ""); !v.ok {
		t.Fatalf("creates %q", v)
	}
	edit := func(cv *convPaths) *convListRun { return cv.Edit.List }
	if v := firstGetCell(s, pathsRows("conv-edit"), edit); !v.ok || v.v != 20 {
		t.Fatalf("first GET %q", v)
	}
	s.res.RoundsData[0].Conv.Edit.List = &convListRun{Ms: 3, Status: 429, Message: "storage is (re)initializing", UntilOKMs: 1000, Attempts: 2}
	if v := firstGetCell(s, pathsRows("conv-edit"), edit); v.ok || !strings.Contains(v.String(), "HTTP 429") || !strings.Contains(v.String(), "1 of 3") {
		t.Fatalf("first GET with a 429 shown as %q", v)
	}
	if v := (pathsSide{why: "not measured"}).cell(pathsRows("list"), list, 1, ""); v.ok || v.String() != "not measured" {
		t.Fatalf("missing side %q", v)
	}
}

// walk follows continue tokens, and fails a walk that sees an item twice
// or misses one.
func TestWalk(t *testing.T) {
	items := []string{"a", "b", "c", "d", "e"}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
		from, _ := strconv.Atoi(r.URL.Query().Get("continue"))
		if limit == 0 {
			limit = len(items)
		}
		to := min(from+limit, len(items))
		l := map[string]any{"kind": "PathItemList", "metadata": map[string]any{}, "items": []any{}}
		for _, nm := range items[from:to] {
			l["items"] = append(l["items"].([]any), map[string]any{"metadata": map[string]any{"name": nm}})
		}
		if to < len(items) {
			l["metadata"] = map[string]any{"continue": strconv.Itoa(to)}
		}
		_ = json.NewEncoder(w).Encode(l)
	}))
	defer srv.Close()
	p := &pathsRun{pathsResult: &pathsResult{pathsOpts: pathsOpts{N: 5}}, ctx: context.Background(), c: &client{hc: srv.Client(), base: srv.URL}, base: srv.URL}
	for _, limit := range []int{0, 2} {
		w, f := p.walk(srv.URL+"/items", limit)
		if f != nil || w.Items != 5 || w.Pages != map[int]int{0: 1, 2: 3}[limit] || w.status != 200 {
			t.Errorf("limit %d: %+v %+v", limit, w, f)
		}
	}
	items = []string{"a", "b", "b", "c", "d"}
	if _, f := p.walk(srv.URL+"/items", 2); f == nil || !strings.Contains(f.Error, "page 2: wrong answer: item b twice") {
		t.Errorf("duplicate: %+v", f)
	}
	items, p.N = []string{"a", "b", "c", "d"}, 6
	if _, f := p.walk(srv.URL+"/items", 0); f == nil || !strings.Contains(f.Error, "saw 4 items, want 6") {
		t.Errorf("missing: %+v", f)
	}
}

// A flag out of its range is refused, naming it.
func TestRanges(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	var n int
	check := rangedFlags(fs.IntVar, ranged[int]{&n, "n", 5, 1, 10, ""})
	if err := check(); err != nil || n != 5 {
		t.Fatalf("default: %v %d", err, n)
	}
	_ = fs.Parse([]string{"-n", "11"})
	if err := check(); err == nil || err.Error() != "need 1 <= -n <= 10" {
		t.Fatalf("11: %v", err)
	}
	if jsonPath(map[string]any{"a": map[string]any{"b": 1.0}}, "a", "b") != 1.0 || jsonPath(nil, "a", "b") != nil {
		t.Fatal("dig")
	}
}
