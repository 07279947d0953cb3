package resource

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/crdserver/crdserver/internal/conversion"
	"github.com/crdserver/crdserver/internal/request"
	"github.com/crdserver/crdserver/internal/store"
)

// listed returns the names of a list answer's items and its metadata.
func listed(t *testing.T, a answer) ([]string, map[string]any) {
	t.Helper()
	if a.code != http.StatusOK {
		t.Fatalf("list: %d %s", a.code, a.raw)
	}
	items, _ := a.body["items"].([]any)
	names := []string{}
	for _, it := range items {
		names = append(names, it.(map[string]any)["metadata"].(map[string]any)["name"].(string))
	}
	return names, meta(a)
}

// fiveWidgets: a, b, c, d in default (b and d labelled tier=db, d of
// size 3), x in namespace other; the cache holds them.
func fiveWidgets(t *testing.T) *engine {
	e := newEngine(t)
	e.create(widget("a", ""), widget("b", `,"labels":{"tier":"db"}`), widget("c", `,"labels":{"tier":"web"}`),
		strings.Replace(widget("d", `,"labels":{"tier":"db"}`), `"size":1`, `"size":3`, 1))
	if a := e.do("POST", "/apis/example.com/v1/namespaces/other/widgets", "application/json", widget("x", "")); a.code != http.StatusCreated {
		t.Fatalf("create in other: %d %s", a.code, a.raw)
	}
	e.cache()
	return e
}

func TestListWholeCollection(t *testing.T) {
	e := fiveWidgets(t)
	a := e.do("GET", widgetsPath, "", "")
	names, md := listed(t, a)
	if strings.Join(names, ",") != "a,b,c,d" {
		t.Fatalf("items of namespace default: %v", names)
	}
	if a.body["kind"] != "WidgetList" || a.body["apiVersion"] != "example.com/v1" {
		t.Fatalf("list type: %s", a.raw)
	}
	// The list's resourceVersion is the store's revision; an unpaginated
	// list has no continue token nor remainingItemCount.
	if md["resourceVersion"] != "6" || md["continue"] != "" || md["remainingItemCount"] != nil {
		t.Fatalf("list metadata: %v", md)
	}
	// Each item carries its own resourceVersion.
	first := a.body["items"].([]any)[0].(map[string]any)
	if first["metadata"].(map[string]any)["resourceVersion"] != "2" {
		t.Fatalf("item resourceVersion: %v", first)
	}
	if ct := a.header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type: %q", ct)
	}

	// Across namespaces.
	names, _ = listed(t, e.do("GET", "/apis/example.com/v1/widgets", "", ""))
	if strings.Join(names, ",") != "a,b,c,d,x" {
		t.Fatalf("items of every namespace: %v", names)
	}
	// An empty namespace lists nothing, as an empty list (not null).
	a = e.do("GET", "/apis/example.com/v1/namespaces/empty/widgets", "", "")
	if names, _ = listed(t, a); len(names) != 0 || !strings.Contains(a.raw, `"items":[]`) {
		t.Fatalf("an empty namespace: %s", a.raw)
	}
}

func TestListPagination(t *testing.T) {
	e := fiveWidgets(t)
	a := e.do("GET", widgetsPath+"?limit=2", "", "")
	names, md := listed(t, a)
	if strings.Join(names, ",") != "a,b" || md["resourceVersion"] != "6" || md["remainingItemCount"] != 2.0 {
		t.Fatalf("first page: %v %v", names, md)
	}
	cont, _ := md["continue"].(string)
	if cont == "" {
		t.Fatalf("first page has no continue token: %v", md)
	}
	// The token is Kubernetes' own: base64 of the encoded version, the
	// revision of the first page and the key to start from.
	tok, err := base64.RawURLEncoding.DecodeString(cont)
	if err != nil || !strings.Contains(string(tok), `"v":"meta.k8s.io/v1"`) || !strings.Contains(string(tok), `"rv":6`) || !strings.Contains(string(tok), `"start":"default/c`) {
		t.Fatalf("continue token %q: %s %v", cont, tok, err)
	}

	// Writes after the first page do not show in the next ones: they are
	// read at the first page's revision.
	e.create(widget("bb", ""))
	e.cache()
	a = e.do("GET", widgetsPath+"?limit=2&continue="+cont, "", "")
	names, md = listed(t, a)
	if strings.Join(names, ",") != "c,d" || md["resourceVersion"] != "6" {
		t.Fatalf("second page: %v %v", names, md)
	}
	if md["continue"] != "" || md["remainingItemCount"] != nil {
		t.Fatalf("last page: %v", md)
	}
	// resourceVersion=0 may go with a continue token; another may not.
	if names, _ = listed(t, e.do("GET", widgetsPath+"?limit=2&resourceVersion=0&continue="+cont, "", "")); strings.Join(names, ",") != "c,d" {
		t.Fatalf("continue with resourceVersion=0: %v", names)
	}
	e.do("GET", widgetsPath+"?limit=2&resourceVersion=3&continue="+cont, "", "").
		status(t, 400, metav1.StatusReasonBadRequest, "specifying resource version is not allowed when using continue")
	e.do("GET", widgetsPath+"?limit=2&resourceVersionMatch=NotOlderThan&continue="+cont, "", "").
		status(t, 422, metav1.StatusReasonInvalid, "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided, resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden when continue is provided")

	// A token of another namespace's range is refused.
	other := e.do("GET", "/apis/example.com/v1/namespaces/other/widgets?limit=1", "", "")
	if _, md := listed(t, other); md["continue"] != "" {
		t.Fatalf("one item on one page: %v", md)
	}
	foreign := base64.RawURLEncoding.EncodeToString([]byte(`{"v":"meta.k8s.io/v1","rv":6,"start":"other/x"}`))
	e.do("GET", widgetsPath+"?limit=2&continue="+foreign, "", "").status(t, 400, metav1.StatusReasonBadRequest, "invalid continue token")
}

// A page read from etcd at a revision (limit with resourceVersion) counts
// what remains, and its token goes on at that revision.
func TestListPaginationFromStore(t *testing.T) {
	e := fiveWidgets(t)
	a := e.do("GET", widgetsPath+"?limit=3&resourceVersion=6&resourceVersionMatch=Exact", "", "")
	names, md := listed(t, a)
	if strings.Join(names, ",") != "a,b,c" || md["resourceVersion"] != "6" || md["remainingItemCount"] != 1.0 || md["continue"] == "" {
		t.Fatalf("exact page: %v %v", names, md)
	}
	// The rest, after a write the cache has no history before: etcd
	// gives it, at the first page's revision (without the new object).
	e.create(widget("e", ""))
	e.cache()
	names, md = listed(t, e.do("GET", widgetsPath+"?limit=3&continue="+md["continue"].(string), "", ""))
	if strings.Join(names, ",") != "d" || md["continue"] != "" || md["resourceVersion"] != "6" {
		t.Fatalf("next page: %v %v", names, md)
	}
}

func TestListContinueTokens(t *testing.T) {
	e := fiveWidgets(t)
	enc := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	for _, c := range []struct{ name, token, msg string }{
		{"no revision", enc(`{"v":"meta.k8s.io/v1","rv":0,"start":"default/b"}`), "invalid continue token: continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)"},
		{"not JSON", enc(`{`), "invalid continue token: continue key is not valid: "},
		{"path traversal", enc(`{"v":"meta.k8s.io/v1","rv":6,"start":"../other/x"}`), "invalid continue token: continue key is not valid"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e.do("GET", widgetsPath+"?limit=1&continue="+c.token, "", "").status(t, 400, metav1.StatusReasonBadRequest, c.msg)
		})
	}
	// Kubernetes' wording for the other malformed tokens
	// (k8s.io/apiserver/pkg/storage.DecodeContinue).
	for _, c := range []struct{ name, token, msg string }{
		{"not base64", "a!b", "invalid continue token: continue key is not valid: illegal base64 data at input byte 1"},
		{"unknown version", enc(`{"v":"meta.k8s.io/v2","rv":6,"start":"default/b"}`), "invalid continue token: continue key is not valid: server does not recognize this encoded version meta.k8s.io/v2"},
		{"no start key", enc(`{"v":"meta.k8s.io/v1","rv":6,"start":""}`), "invalid continue token: continue key is not valid: encoded start key empty (version meta.k8s.io/v1)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := e.do("GET", widgetsPath+"?limit=1&continue="+c.token, "", "")
			if a.code != 400 {
				t.Fatalf("%d %s", a.code, a.raw)
			}
			if !strings.Contains(a.body["message"].(string), c.msg) {
				t.Fatalf("the message is %q, kube-apiserver's %q", a.body["message"], c.msg)
			}
		})
	}
}

func TestListSelectors(t *testing.T) {
	e := fiveWidgets(t)
	for _, c := range []struct{ query, want string }{
		{"labelSelector=tier%3Ddb", "b,d"},
		{"labelSelector=tier", "b,c,d"},
		{"labelSelector=!tier", "a"},
		{"labelSelector=tier+in+(web,db),tier!%3Ddb", "c"},
		{"fieldSelector=metadata.name%3Dc", "c"},
		{"fieldSelector=metadata.name!%3Dc", "a,b,d"},
		{"fieldSelector=metadata.namespace%3Dother", ""},
		{"labelSelector=tier%3Ddb&fieldSelector=metadata.name%3Dd", "d"},
		// A limit counts the matching items.
		{"labelSelector=tier%3Ddb&limit=1", "b"},
	} {
		names, md := listed(t, e.do("GET", widgetsPath+"?"+c.query, "", ""))
		if strings.Join(names, ",") != c.want {
			t.Errorf("%s: %v, want %s", c.query, names, c.want)
		}
		// What remains after a filtered page is not known.
		if md["remainingItemCount"] != nil {
			t.Errorf("%s: remainingItemCount %v", c.query, md["remainingItemCount"])
		}
	}
	// The second page of a filtered list goes on after the first match.
	_, md := listed(t, e.do("GET", widgetsPath+"?labelSelector=tier%3Ddb&limit=1", "", ""))
	names, _ := listed(t, e.do("GET", widgetsPath+"?labelSelector=tier%3Ddb&limit=1&continue="+md["continue"].(string), "", ""))
	if strings.Join(names, ",") != "d" {
		t.Fatalf("second filtered page: %v", names)
	}
	// Across namespaces, by namespace.
	if names, _ = listed(t, e.do("GET", "/apis/example.com/v1/widgets?fieldSelector=metadata.namespace%3Dother", "", "")); strings.Join(names, ",") != "x" {
		t.Fatalf("by namespace: %v", names)
	}

	// A field a version does not make selectable is refused; one it does
	// is read from the object.
	e.do("GET", widgetsPath+"?fieldSelector=spec.size%3D3", "", "").status(t, 400, metav1.StatusReasonBadRequest, "field label not supported: spec.size")
	e.ver.SelectableFields = []string{"spec.size"}
	if names, _ = listed(t, e.do("GET", widgetsPath+"?fieldSelector=spec.size%3D3", "", "")); strings.Join(names, ",") != "d" {
		t.Fatalf("selectable field: %v", names)
	}
	e.do("GET", widgetsPath+"?labelSelector=tier%3D%3D%3Ddb", "", "").status(t, 400, metav1.StatusReasonBadRequest, "unable to parse requirement")
}

func TestListResourceVersions(t *testing.T) {
	e := fiveWidgets(t)
	// resourceVersion=0: any state, the cache's.
	if names, md := listed(t, e.do("GET", widgetsPath+"?resourceVersion=0", "", "")); len(names) != 4 || md["resourceVersion"] != "6" {
		t.Fatalf("resourceVersion=0: %v %v", names, md)
	}
	// NotOlderThan a version the cache has reached.
	if names, _ := listed(t, e.do("GET", widgetsPath+"?resourceVersion=4&resourceVersionMatch=NotOlderThan", "", "")); len(names) != 4 {
		t.Fatalf("NotOlderThan: %v", names)
	}
	// Exact: the state at that revision, read from etcd (without the
	// objects created since).
	if names, md := listed(t, e.do("GET", widgetsPath+"?resourceVersion=4&resourceVersionMatch=Exact", "", "")); strings.Join(names, ",") != "a,b,c" || md["resourceVersion"] != "4" {
		t.Fatalf("Exact: %v %v", names, md)
	}
	// A limit with a resourceVersion and no match reads etcd at it too.
	if names, md := listed(t, e.do("GET", widgetsPath+"?resourceVersion=3&limit=10", "", "")); strings.Join(names, ",") != "a,b" || md["resourceVersion"] != "3" {
		t.Fatalf("limit at a resourceVersion: %v %v", names, md)
	}
	for _, c := range []struct {
		query  string
		code   int
		reason metav1.StatusReason
		msg    string
	}{
		{"resourceVersion=abc", 400, metav1.StatusReasonBadRequest, `invalid resource version: resourceVersion: Invalid value: "abc"`},
		{"resourceVersionMatch=Exact", 422, metav1.StatusReasonInvalid, "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided"},
		{"resourceVersion=0&resourceVersionMatch=Exact", 422, metav1.StatusReasonInvalid, `resourceVersionMatch "exact" is forbidden for resourceVersion "0"`},
		{"resourceVersion=1&resourceVersionMatch=Newest", 422, metav1.StatusReasonInvalid, `resourceVersionMatch: Unsupported value: "Newest": supported values: "Exact", "NotOlderThan", ""`},
		{"sendInitialEvents=true", 422, metav1.StatusReasonInvalid, "sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list"},
		{"limit=x", 400, metav1.StatusReasonBadRequest, ""},
	} {
		t.Run(c.query, func(t *testing.T) {
			a := e.do("GET", widgetsPath+"?"+c.query, "", "")
			a.status(t, c.code, c.reason, c.msg)
			if c.code == 422 && a.body["message"] != nil && !strings.HasPrefix(a.body["message"].(string), `ListOptions.meta.k8s.io "" is invalid: `) {
				t.Fatalf("invalid ListOptions: %s", a.raw)
			}
		})
	}
}

// A list at a revision etcd has not reached is a 504 with Kubernetes'
// ResourceVersionTooLarge cause; the message names both revisions
// (k8s.io/apiserver/pkg/storage.NewTooLargeResourceVersionError).
func TestListFutureResourceVersion(t *testing.T) {
	e := fiveWidgets(t)
	a := e.do("GET", widgetsPath+"?resourceVersion=100&resourceVersionMatch=Exact", "", "")
	a.status(t, 504, metav1.StatusReasonTimeout, "Too large resource version")
	causes, _ := a.body["details"].(map[string]any)["causes"].([]any)
	if len(causes) != 1 || causes[0].(map[string]any)["reason"] != string(metav1.CauseTypeResourceVersionTooLarge) {
		t.Fatalf("causes: %s", a.raw)
	}
	if msg := a.body["message"].(string); msg != "Timeout: Too large resource version: 100, current: 6" {
		t.Fatalf("message %q, kube-apiserver says %q", msg, "Timeout: Too large resource version: 100, current: 6")
	}
}

// kube-apiserver's watch cache ignores the limit of a list at
// resourceVersion=0 (k8s.io/apiserver/pkg/storage/cacher.computeListLimit:
// "the limit is ignored for requests that set RV == 0"): every item, no
// continue token.
func TestListLimitIgnoredAtResourceVersion0(t *testing.T) {
	e := fiveWidgets(t)
	names, md := listed(t, e.do("GET", widgetsPath+"?resourceVersion=0&limit=2", "", ""))
	if md["resourceVersion"] != "6" {
		t.Fatalf("metadata: %v", md)
	}
	if strings.Join(names, ",") != "a,b,c,d" || md["continue"] != "" {
		t.Fatalf("a list at resourceVersion=0 honours its limit; kube-apiserver does not: %v %v", names, md)
	}
}

// TestListWhileCacheLoads: a consistent page of a list while the
// resource's cache loads its state (a restart with many objects stored)
// is read from etcd at once, a few objects at a time, as one state; it
// does not wait for the load (the client's deadline here is a second, the
// cache's wait three).
func TestListWhileCacheLoads(t *testing.T) {
	defer func(n int64) { storeBatch = n }(storeBatch)
	storeBatch = 2
	e := newEngine(t)
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		e.create(widget(n, ""))
	}
	e.res.Cache = store.NewLoadingCache(e.res.KeyPrefix)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	r := httptest.NewRequest("GET", widgetsPath+"?limit=10", nil).WithContext(ctx)
	info := request.Parse(r)
	r = r.WithContext(request.WithInfo(r.Context(), info))
	w := httptest.NewRecorder()
	e.h.Serve(w, r, info, e.res, e.ver)
	if ctx.Err() != nil {
		t.Fatal("the list waited for the cache to load")
	}
	var l struct {
		Metadata struct{ ResourceVersion string }
		Items    []struct{ Metadata struct{ Name string } }
	}
	if err := json.Unmarshal(w.Body.Bytes(), &l); w.Code != 200 || err != nil {
		t.Fatalf("list while loading: %d %s", w.Code, w.Body)
	}
	var names []string
	for _, it := range l.Items {
		names = append(names, it.Metadata.Name)
	}
	cur, _ := e.h.Store.CurrentRevision(ctx)
	if !slices.Equal(names, []string{"a", "b", "c", "d", "e"}) || l.Metadata.ResourceVersion != itoa(cur) {
		t.Fatalf("list while loading: %v at %s", names, l.Metadata.ResourceVersion)
	}
}

// storedAs: with None, items the cache's index says are stored in the
// version asked for are served as cached; any other version, converter or
// an item with no index is not.
func TestStoredAs(t *testing.T) {
	item := func(name, extra string) *store.Item {
		it, err := DecodeItem("/registry/configmaps/ns/"+name, []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"`+name+`","namespace":"ns"`+extra+`}}`), 3)
		if err != nil {
			t.Fatal(err)
		}
		return it
	}
	items := []*store.Item{item("a", ""), item("b", `,"finalizers":["x"]`)}
	if !storedAs(conversion.None{}, items, "v1") {
		t.Error("stored in v1, asked for v1: not served as cached")
	}
	if storedAs(conversion.None{}, items, "v2") {
		t.Error("stored in v1, asked for v2: served as cached")
	}
	if storedAs(conversion.Failing{}, items, "v1") {
		t.Error("another converter: served as cached")
	}
	if storedAs(conversion.None{}, append(items, store.NewCachedItem(&store.Item{Key: "/registry/configmaps/ns/c", Raw: []byte(`{"apiVersion":"v1"}`)})), "v1") {
		t.Error("an item with no index: served as cached")
	}
}
