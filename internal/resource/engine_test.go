package resource

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/crdserver/crdserver/internal/conversion"
	"github.com/crdserver/crdserver/internal/request"
	"github.com/crdserver/crdserver/internal/store"
)

// memStore is store.Interface in memory, with etcd's revisions: enough to
// drive the engine's verbs without etcd.
type memStore struct {
	mu   sync.Mutex
	rev  int64
	kvs  map[string]*store.KV
	puts int
	// opts are the options of the last write.
	opts store.WriteOptions
	// only makes it say it is its etcd's only writer.
	only bool
	// afterGet, when set, runs after each Get (a concurrent writer).
	afterGet func(key string)
}

func newMemStore() *memStore { return &memStore{rev: 1, kvs: map[string]*store.KV{}} }

func (m *memStore) CurrentRevision(context.Context) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.rev, nil
}

// OnlyWriter: the engine's tests read through the store, unless only.
func (m *memStore) OnlyWriter() bool { return m.only }

func (m *memStore) Get(_ context.Context, key string, _ int64) (*store.KV, int64, error) {
	m.mu.Lock()
	defer func() {
		hook := m.afterGet
		m.mu.Unlock()
		if hook != nil {
			hook(key)
		}
	}()
	kv := m.kvs[key]
	if kv == nil {
		return nil, m.rev, store.ErrNotFound
	}
	c := *kv
	return &c, m.rev, nil
}

// List lists at rev (0: the newest) as far as a store of the newest state
// can: keys created after rev are left out, a future rev refused.
func (m *memStore) List(_ context.Context, start, end string, rev, limit int64) (*store.ListResult, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if rev > m.rev {
		return nil, &store.TooLargeError{Requested: rev, Current: m.rev}
	}
	if rev <= 0 {
		rev = m.rev
	}
	var keys []string
	for k, kv := range m.kvs {
		if k >= start && k < end && kv.CreateRevision <= rev {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	out := &store.ListResult{Revision: rev}
	for i, k := range keys {
		if limit > 0 && int64(i) >= limit {
			out.More, out.Remaining = true, int64(len(keys)-i)
			break
		}
		c := *m.kvs[k]
		out.KVs = append(out.KVs, &c)
	}
	return out, nil
}

func (m *memStore) Create(_ context.Context, key string, value []byte, opts store.WriteOptions) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.opts = opts
	if m.kvs[key] != nil {
		return 0, store.ErrExists
	}
	m.rev++
	m.puts++
	m.kvs[key] = &store.KV{Key: key, Value: value, ModRevision: m.rev, CreateRevision: m.rev}
	return m.rev, nil
}

func (m *memStore) guard(key string, expected int64) (*store.KV, error) {
	kv := m.kvs[key]
	if kv == nil {
		return nil, store.ErrNotFound
	}
	if kv.ModRevision != expected {
		c := *kv
		return &c, store.ErrConflict
	}
	return kv, nil
}

func (m *memStore) Update(_ context.Context, key string, value []byte, expected int64, opts store.WriteOptions) (int64, *store.KV, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.opts = opts
	kv, err := m.guard(key, expected)
	if err != nil {
		return 0, kv, err
	}
	m.rev++
	m.puts++
	kv.Value, kv.ModRevision = value, m.rev
	return m.rev, nil, nil
}

func (m *memStore) Delete(_ context.Context, key string, expected int64) (int64, *store.KV, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	kv, err := m.guard(key, expected)
	if err != nil {
		return 0, kv, err
	}
	m.rev++
	delete(m.kvs, key)
	return m.rev, nil, nil
}

// widgetStrategy: widgets need spec.size ≥ 0; generation counts spec
// changes.
type widgetStrategy struct{}

func (widgetStrategy) PrepareForCreate(_ context.Context, obj *Object) { obj.Meta.Generation = 1 }
func (widgetStrategy) PrepareForUpdate(_ context.Context, obj, old *Object) {
	a, _ := json.Marshal(obj.Content["spec"])
	b, _ := json.Marshal(old.Content["spec"])
	if string(a) != string(b) {
		obj.Meta.Generation = old.Meta.Generation + 1
	}
}
func (widgetStrategy) Validate(_ context.Context, obj *Object) field.ErrorList {
	spec, _ := obj.Content["spec"].(map[string]any)
	if n, ok := spec["size"].(int64); ok && n < 0 {
		return field.ErrorList{field.Invalid(field.NewPath("spec", "size"), n, "must be at least 0")}
	}
	return nil
}
func (s widgetStrategy) ValidateUpdate(ctx context.Context, obj, _ *Object) field.ErrorList {
	return s.Validate(ctx, obj)
}

func widgets() (*Resource, *Version) {
	v := &Version{Name: "v1"}
	return &Resource{
		Group: "example.com", Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList",
		Namespaced: true, Versions: []*Version{v}, StorageVersion: "v1",
		KeyPrefix: "/registry/example.com/widgets/",
		Strategy:  widgetStrategy{}, Converter: conversion.None{}, Verbs: DefaultVerbs,
	}, v
}

type engine struct {
	t     *testing.T
	h     *Handler
	store *memStore
	res   *Resource
	ver   *Version
}

func newEngine(t *testing.T) *engine {
	res, ver := widgets()
	m := newMemStore()
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	return &engine{t: t, store: m, res: res, ver: ver,
		h: &Handler{Store: m, Log: slog.New(slog.DiscardHandler), Now: func() time.Time { return now }}}
}

type answer struct {
	code   int
	body   map[string]any
	raw    string
	header http.Header
}

func (e *engine) do(method, path, contentType, body string) answer {
	e.t.Helper()
	var hdr map[string]string
	if contentType != "" {
		hdr = map[string]string{"Content-Type": contentType}
	}
	return e.send(method, path, hdr, body)
}

// send makes a request with the given headers.
func (e *engine) send(method, path string, hdr map[string]string, body string) answer {
	e.t.Helper()
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	for k, v := range hdr {
		r.Header.Set(k, v)
	}
	info := request.Parse(r)
	r = r.WithContext(request.WithInfo(r.Context(), info))
	w := httptest.NewRecorder()
	e.h.Serve(w, r, info, e.res, e.ver)
	raw, _ := io.ReadAll(w.Result().Body)
	a := answer{code: w.Code, raw: string(raw), header: w.Result().Header}
	_ = json.Unmarshal(raw, &a.body)
	return a
}

// cache gives the resource a cache that holds what the store holds, at
// its newest revision. It follows nothing: call it again after writes.
func (e *engine) cache() {
	e.t.Helper()
	e.store.mu.Lock()
	defer e.store.mu.Unlock()
	var items []*store.Item
	for k, kv := range e.store.kvs {
		it, err := DecodeItem(k, kv.Value, kv.ModRevision)
		if err != nil {
			e.t.Fatal(err)
		}
		items = append(items, it)
	}
	e.res.Cache = store.NewFixedCache(e.res.KeyPrefix, e.store.rev, items...)
}

// stored decodes the stored object named name in namespace default (nil
// when there is none).
func (e *engine) stored(name string) map[string]any {
	e.t.Helper()
	e.store.mu.Lock()
	defer e.store.mu.Unlock()
	kv := e.store.kvs[e.res.Key("default", name)]
	if kv == nil {
		return nil
	}
	var m map[string]any
	if err := json.Unmarshal(kv.Value, &m); err != nil {
		e.t.Fatal(err)
	}
	return m
}

// create creates widgets, failing the test if one is refused.
func (e *engine) create(bodies ...string) {
	e.t.Helper()
	for _, b := range bodies {
		if a := e.do("POST", widgetsPath, "application/json", b); a.code != http.StatusCreated {
			e.t.Fatalf("create: %d %s", a.code, a.raw)
		}
	}
}

const widgetsPath = "/apis/example.com/v1/namespaces/default/widgets"

func widget(name, extra string) string {
	return `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"` + name + `"` + extra + `},"spec":{"size":1}}`
}

func meta(a answer) map[string]any { m, _ := a.body["metadata"].(map[string]any); return m }

// status checks a Status answer: code, reason and (part of) the message.
func (a answer) status(t *testing.T, code int, reason metav1.StatusReason, msg string) {
	t.Helper()
	if a.code != code || a.body["kind"] != "Status" || a.body["reason"] != string(reason) || !strings.Contains(a.body["message"].(string), msg) {
		t.Fatalf("want %d %s %q, got %d %s", code, reason, msg, a.code, a.raw)
	}
}

func TestEngineCreate(t *testing.T) {
	e := newEngine(t)
	a := e.do("POST", widgetsPath, "application/json", widget("w1", ""))
	if a.code != http.StatusCreated {
		t.Fatalf("create: %d %s", a.code, a.raw)
	}
	m := meta(a)
	if m["uid"] == "" || m["creationTimestamp"] != "2026-11-24T12:00:00Z" || m["generation"] != 1.0 || m["namespace"] != "default" || m["resourceVersion"] != "2" {
		t.Fatalf("metadata set on create: %v", m)
	}
	kv := e.store.kvs["/registry/example.com/widgets/default/w1"]
	if kv == nil || strings.Contains(string(kv.Value), "resourceVersion") {
		t.Fatalf("stored under Kubernetes' key layout without resourceVersion: %+v", kv)
	}

	cases := []struct {
		name, body, ct string
		code           int
		reason         metav1.StatusReason
		msg            string
	}{
		{"same name", widget("w1", ""), "application/json", 409, metav1.StatusReasonAlreadyExists, `widgets.example.com "w1" already exists`},
		{"other namespace in the body", widget("w2", `,"namespace":"other"`), "application/json", 400, metav1.StatusReasonBadRequest, "does not match the namespace"},
		{"resourceVersion set", widget("w3", `,"resourceVersion":"5"`), "application/json", 400, metav1.StatusReasonBadRequest, "resourceVersion should not be set"},
		{"wrong apiVersion", strings.Replace(widget("w4", ""), "example.com/v1", "example.com/v2", 1), "application/json", 400, metav1.StatusReasonBadRequest, "does not match the expected API version"},
		{"wrong kind", strings.Replace(widget("w5", ""), `"Widget"`, `"Gadget"`, 1), "application/json", 422, metav1.StatusReasonInvalid, "kind: Invalid value"},
		{"invalid spec", strings.Replace(widget("w6", ""), `"size":1`, `"size":-1`, 1), "application/json", 422, metav1.StatusReasonInvalid, "spec.size: Invalid value: -1: must be at least 0"},
		{"invalid name", widget("W_7", ""), "application/json", 422, metav1.StatusReasonInvalid, "metadata.name: Invalid value"},
		{"not JSON", "{", "application/json", 400, metav1.StatusReasonBadRequest, ""},
		{"unsupported type", widget("w8", ""), "text/plain", 415, metav1.StatusReasonUnsupportedMediaType, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			puts := e.store.puts
			e.do("POST", widgetsPath, c.ct, c.body).status(t, c.code, c.reason, c.msg)
			if e.store.puts != puts {
				t.Fatal("a refused create stored something")
			}
		})
	}

	// generateName, and a dry run that stores nothing.
	a = e.do("POST", widgetsPath, "application/json", `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"generateName":"gen-"}}`)
	if a.code != 201 || !strings.HasPrefix(meta(a)["name"].(string), "gen-") || len(meta(a)["name"].(string)) != 9 {
		t.Fatalf("generateName: %d %s", a.code, a.raw)
	}
	puts := e.store.puts
	if a = e.do("POST", widgetsPath+"?dryRun=All", "application/json", widget("dry", "")); a.code != 201 || e.store.puts != puts {
		t.Fatalf("dry run: %d, %d writes", a.code, e.store.puts-puts)
	}
	e.do("POST", widgetsPath+"?dryRun=Some", "application/json", widget("dry", "")).status(t, 422, metav1.StatusReasonInvalid, "dryRun")
}

func TestEngineUpdate(t *testing.T) {
	e := newEngine(t)
	created := e.do("POST", widgetsPath, "application/json", widget("w1", ""))
	rv := meta(created)["resourceVersion"].(string)
	path := widgetsPath + "/w1"
	withRV := func(rv string) string { return widget("w1", `,"resourceVersion":"`+rv+`"`) }

	// An update that changes nothing stores nothing.
	puts := e.store.puts
	if a := e.do("PUT", path, "application/json", withRV(rv)); a.code != 200 || meta(a)["resourceVersion"] != rv || e.store.puts != puts {
		t.Fatalf("no-op update: %d %s (%d writes)", a.code, a.raw, e.store.puts-puts)
	}
	// A spec change bumps the generation; server-owned metadata stays.
	a := e.do("PUT", path, "application/json", strings.Replace(withRV(rv), `"size":1`, `"size":2`, 1))
	if a.code != 200 || meta(a)["generation"] != 2.0 || meta(a)["uid"] != meta(created)["uid"] || meta(a)["creationTimestamp"] != meta(created)["creationTimestamp"] {
		t.Fatalf("update: %d %s", a.code, a.raw)
	}
	e.do("PUT", path, "application/json", withRV(rv)).status(t, 409, metav1.StatusReasonConflict, "the object has been modified")
	e.do("PUT", path, "application/json", widget("w1", "")).status(t, 422, metav1.StatusReasonInvalid, "metadata.resourceVersion: Invalid value: 0: must be specified for an update")
	e.do("PUT", widgetsPath+"/other", "application/json", withRV(rv)).status(t, 400, metav1.StatusReasonBadRequest, "does not match the name on the URL")
	e.do("PUT", widgetsPath+"/missing", "application/json", widget("missing", `,"resourceVersion":"1"`)).status(t, 404, metav1.StatusReasonNotFound, `widgets.example.com "missing" not found`)
}

func TestEnginePatch(t *testing.T) {
	e := newEngine(t)
	e.do("POST", widgetsPath, "application/json", widget("w1", ""))
	path := widgetsPath + "/w1"
	if a := e.do("PATCH", path, "application/merge-patch+json", `{"spec":{"size":5}}`); a.code != 200 || a.body["spec"].(map[string]any)["size"] != 5.0 {
		t.Fatalf("merge patch: %d %s", a.code, a.raw)
	}
	if a := e.do("PATCH", path, "application/json-patch+json", `[{"op":"replace","path":"/spec/size","value":6}]`); a.code != 200 || a.body["spec"].(map[string]any)["size"] != 6.0 {
		t.Fatalf("JSON patch: %d %s", a.code, a.raw)
	}
	e.do("PATCH", path, "application/json-patch+json", `[{"op":"test","path":"/spec/size","value":1}]`).status(t, 422, metav1.StatusReasonInvalid, "the server rejected our request due to an error in our request")
	e.do("PATCH", path, "application/merge-patch+json", `{"spec":{"size":-1}}`).status(t, 422, metav1.StatusReasonInvalid, "spec.size")
	// Widgets have no Go type: no strategic merge patch, and no field
	// manager: no apply.
	e.do("PATCH", path, "application/strategic-merge-patch+json", `{}`).status(t, 415, metav1.StatusReasonUnsupportedMediaType, "")
	e.do("PATCH", path, "application/apply-patch+yaml", `{}`).status(t, 415, metav1.StatusReasonUnsupportedMediaType, "")
	e.do("PATCH", path+"?force=true", "application/merge-patch+json", `{}`).status(t, 422, metav1.StatusReasonInvalid, "force: Forbidden")
}

func TestEngineDelete(t *testing.T) {
	e := newEngine(t)
	e.do("POST", widgetsPath, "application/json", widget("kept", `,"finalizers":["example.com/keep"]`))
	e.do("POST", widgetsPath, "application/json", widget("gone", ""))

	// A finalizer keeps the object, marked deleted.
	a := e.do("DELETE", widgetsPath+"/kept", "", "")
	if a.code != 200 || meta(a)["deletionTimestamp"] != "2026-11-24T12:00:00Z" || meta(a)["generation"] != 2.0 {
		t.Fatalf("delete with a finalizer: %d %s", a.code, a.raw)
	}
	// Removing the last finalizer removes it.
	rv := meta(a)["resourceVersion"].(string)
	if a = e.do("PATCH", widgetsPath+"/kept", "application/merge-patch+json", `{"metadata":{"finalizers":null,"resourceVersion":"`+rv+`"}}`); a.code != 200 {
		t.Fatalf("finalizer removed: %d %s", a.code, a.raw)
	}
	if e.store.kvs["/registry/example.com/widgets/default/kept"] != nil {
		t.Fatal("the object outlived its last finalizer")
	}

	e.do("DELETE", widgetsPath+"/gone", "application/json", `{"preconditions":{"uid":"nope"}}`).status(t, 409, metav1.StatusReasonConflict, `Operation cannot be fulfilled on Widget.example.com "gone": the UID in the precondition (nope) does not match the UID in record`)
	e.do("DELETE", widgetsPath+"/gone", "application/json", `{"propagationPolicy":"Sometimes"}`).status(t, 422, metav1.StatusReasonInvalid, "propagationPolicy")
	if a = e.do("DELETE", widgetsPath+"/gone?dryRun=All", "", ""); a.code != 200 || e.store.kvs["/registry/example.com/widgets/default/gone"] == nil {
		t.Fatalf("dry-run delete: %d %s", a.code, a.raw)
	}
	// Orphan propagation hands the object to the garbage collector.
	if a = e.do("DELETE", widgetsPath+"/gone", "application/json", `{"propagationPolicy":"Orphan"}`); a.code != 200 || !strings.Contains(a.raw, `"orphan"`) {
		t.Fatalf("orphan delete: %d %s", a.code, a.raw)
	}
	if a = e.do("DELETE", widgetsPath+"/missing", "", ""); a.code != 404 {
		t.Fatalf("missing: %d", a.code)
	}
}

func TestEngineAddressing(t *testing.T) {
	e := newEngine(t)
	// A namespaced resource is addressed in a namespace, but for lists and
	// watches; unknown verbs and subresources are refused.
	e.do("GET", "/apis/example.com/v1/widgets/w1", "", "").status(t, 404, metav1.StatusReasonNotFound, "")
	e.do("POST", widgetsPath+"/w1", "application/json", widget("w1", "")).status(t, 405, metav1.StatusReasonMethodNotAllowed, "")
	e.do("GET", widgetsPath+"/w1/status", "", "").status(t, 404, metav1.StatusReasonNotFound, "")
	e.do("GET", widgetsPath+"/w1/scale", "", "").status(t, 404, metav1.StatusReasonNotFound, "")
	e.do("PUT", widgetsPath+"/w1/finalize", "application/json", widget("w1", "")).status(t, 404, metav1.StatusReasonNotFound, "")
	// A cluster-scoped resource is never addressed in a namespace, but a
	// namespace object's own path names it.
	e.res.Namespaced = false
	e.do("GET", "/apis/example.com/v1/namespaces/default/widgets/w1", "", "").status(t, 404, metav1.StatusReasonNotFound, "")
}

// TestEngineGetFromCache: when the store is its etcd's only writer, a GET
// without resourceVersion is answered from the cache once it reaches the
// newest revision, and from the store when the cache stays behind.
func TestEngineGetFromCache(t *testing.T) {
	e := newEngine(t)
	e.store.only = true
	if a := e.do("POST", widgetsPath, "application/json", widget("w", "")); a.code != http.StatusCreated {
		t.Fatalf("create: %d %s", a.code, a.raw)
	}
	key := e.res.Key("default", "w")
	kv, _, err := e.store.Get(context.Background(), key, 0)
	if err != nil {
		t.Fatal(err)
	}
	// A cache past the newest revision, holding the object with a label
	// the stored one lacks: the GET is answered from it.
	cached := widget("w", `,"labels":{"from":"cache"}`)
	it, err := DecodeItem(key, []byte(cached), kv.ModRevision)
	if err != nil {
		t.Fatal(err)
	}
	e.res.Cache = store.NewFixedCache(e.res.KeyPrefix, kv.ModRevision+10, it)
	a := e.do("GET", widgetsPath+"/w", "", "")
	if a.code != http.StatusOK || !strings.Contains(a.raw, `"from":"cache"`) {
		t.Fatalf("GET with a cache at the newest revision: %d %s", a.code, a.raw)
	}
	// A cache that stays behind (with an older state): the GET reads the
	// store.
	old, err := DecodeItem(key, []byte(cached), 1)
	if err != nil {
		t.Fatal(err)
	}
	e.res.Cache = store.NewFixedCache(e.res.KeyPrefix, 1, old)
	a = e.do("GET", widgetsPath+"/w", "", "")
	if a.code != http.StatusOK || strings.Contains(a.raw, `"from":"cache"`) {
		t.Fatalf("GET with a cache behind: %d %s", a.code, a.raw)
	}
	// An object the cache lacks is read from the store too.
	e.res.Cache = store.NewFixedCache(e.res.KeyPrefix, kv.ModRevision+10)
	if a := e.do("GET", widgetsPath+"/w", "", ""); a.code != http.StatusOK {
		t.Fatalf("GET with a cache lacking the object: %d %s", a.code, a.raw)
	}
}

// stampingWidgets vouch for what they prepare: epoch 3, defaulted when the
// object has a spec.
type stampingWidgets struct{ widgetStrategy }

func (stampingWidgets) WriteStamp(obj *Object) *store.WriteStamp {
	_, ok := obj.Content["spec"]
	return &store.WriteStamp{Epoch: 3, Defaulted: ok}
}

// answerConverter records what the conversion of each answer knew of the
// request's write.
type answerConverter struct {
	conversion.None
	seen []*store.Written
}

func (c *answerConverter) Convert(ctx context.Context, objs [][]byte, to string) (conversion.Result, error) {
	c.seen = append(c.seen, store.WrittenFrom(ctx))
	return c.None.Convert(ctx, objs, to)
}

// The strategy's stamp goes with the write as a value of the write (the
// object as its rules left it), and the answer's conversion knows that the
// answer is what the request wrote; a write of a strategy without stamps,
// or a read, carries none.
func TestEngineStampsItsWrites(t *testing.T) {
	e := newEngine(t)
	conv := &answerConverter{}
	e.res.Strategy, e.res.Converter = stampingWidgets{}, conv
	a := e.do("POST", widgetsPath, "application/json", widget("w1", ""))
	if a.code != http.StatusCreated {
		t.Fatalf("create: %d %s", a.code, a.raw)
	}
	want := store.WriteStamp{Epoch: 3, Defaulted: true}
	if e.store.opts.Stamp == nil || *e.store.opts.Stamp != want {
		t.Fatalf("create's stamp: %+v", e.store.opts.Stamp)
	}
	w := conv.seen[len(conv.seen)-1]
	kv := e.store.kvs["/registry/example.com/widgets/default/w1"]
	if w == nil || w.Stamp != want || string(w.Value) != string(kv.Value) || w.Rev != kv.ModRevision {
		t.Fatalf("the answer's conversion knew %+v", w)
	}
	if w.Vouches([]byte(a.raw), kv.ModRevision) == nil {
		t.Fatalf("the answer is not what was written: %s", a.raw)
	}
	a = e.do("PATCH", widgetsPath+"/w1", "application/merge-patch+json", `{"spec":null}`)
	if a.code != http.StatusOK {
		t.Fatalf("update: %d %s", a.code, a.raw)
	}
	if want := (store.WriteStamp{Epoch: 3}); e.store.opts.Stamp == nil || *e.store.opts.Stamp != want {
		t.Fatalf("update's stamp: %+v", e.store.opts.Stamp)
	}
	if w := conv.seen[len(conv.seen)-1]; w == nil || w.Rev != e.store.kvs["/registry/example.com/widgets/default/w1"].ModRevision {
		t.Fatalf("the update's answer's conversion knew %+v", w)
	}
	if a = e.do("GET", widgetsPath+"/w1", "", ""); a.code != http.StatusOK || conv.seen[len(conv.seen)-1] != nil {
		t.Fatalf("a read's conversion knew a write: %d %+v", a.code, conv.seen[len(conv.seen)-1])
	}

	e.res.Strategy = widgetStrategy{}
	if a = e.do("POST", widgetsPath, "application/json", widget("w2", "")); a.code != http.StatusCreated || e.store.opts.Stamp != nil {
		t.Fatalf("an unstamped strategy's create: %d %+v", a.code, e.store.opts.Stamp)
	}
	if conv.seen[len(conv.seen)-1] != nil {
		t.Fatal("an unstamped write's answer knew a write")
	}
}
