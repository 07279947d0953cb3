package conversion

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"

	"github.com/crdserver/crdserver/internal/schema"
	"github.com/crdserver/crdserver/internal/store"
)

// defaultsCRD stores v1, whose schema defaults spec.v1; v1beta1 defaults
// spec.v1beta1. Kubernetes applies the defaults of the version an object
// is stored in when it reads it, never those of the version read.
//
//go:embed testdata/defaults-things.yaml
var defaultsCRD string

func defaultsConverter(t *testing.T, rev int64) *WithSchemas {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict([]byte(defaultsCRD), crd); err != nil {
		t.Fatal(err)
	}
	schemas := map[string]*schema.Version{}
	for _, v := range crd.Spec.Versions {
		s, err := schema.Compile(crd, v.Name)
		if err != nil {
			t.Fatal(err)
		}
		schemas["example.com/"+v.Name] = s
	}
	conv, err := ForCRD(crd, schemas, rev, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return conv.(*WithSchemas)
}

func decoded(t *testing.T, raw []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := utiljson.Unmarshal(raw, &m); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	return m
}

func sameJSON(t *testing.T, got []byte, want string) {
	t.Helper()
	if !reflect.DeepEqual(decoded(t, got), decoded(t, []byte(want))) {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

// Reading an object from storage applies the stored version's schema
// (pruning, its defaults, metadata), then converts; the version read adds
// no defaults. Storing an object of another version adds none either.
func TestWithSchemasReadsAsKubernetes(t *testing.T) {
	conv := defaultsConverter(t, 5)
	ctx := context.Background()
	stored := []byte(`{"apiVersion":"example.com/v1","kind":"Thing","metadata":{"name":"x","resourceVersion":"9","generation":null,"unknown":1},"garbage":true,"spec":{"a":"x"}}`)
	for _, tc := range []struct{ to, want string }{
		{"example.com/v1", `{"apiVersion":"example.com/v1","kind":"Thing","metadata":{"name":"x","resourceVersion":"9","generation":1},"spec":{"a":"x","v1":"stored"}}`},
		{"example.com/v1beta1", `{"apiVersion":"example.com/v1beta1","kind":"Thing","metadata":{"name":"x","resourceVersion":"9","generation":1},"spec":{"a":"x"}}`},
	} {
		res, err := conv.Convert(ctx, [][]byte{stored}, tc.to)
		if err != nil {
			t.Fatal(err)
		}
		sameJSON(t, res.Objects[0], tc.want)
	}

	// On its way to storage (no resourceVersion, to the storage version):
	// converted and pruned, not defaulted.
	res, err := conv.Convert(ctx, [][]byte{[]byte(`{"apiVersion":"example.com/v1beta1","kind":"Thing","metadata":{"name":"x"},"spec":{"a":"x","v1beta1":"read"}}`)}, "example.com/v1")
	if err != nil {
		t.Fatal(err)
	}
	sameJSON(t, res.Objects[0], `{"apiVersion":"example.com/v1","kind":"Thing","metadata":{"name":"x"},"spec":{"a":"x"}}`)

	// A dry run's answer (no resourceVersion, from the storage version):
	// read as stored, with the stored version's defaults.
	res, err = conv.Convert(ctx, [][]byte{[]byte(`{"apiVersion":"example.com/v1","kind":"Thing","metadata":{"name":"x"},"spec":{"a":"x"}}`)}, "example.com/v1")
	if err != nil {
		t.Fatal(err)
	}
	sameJSON(t, res.Objects[0], `{"apiVersion":"example.com/v1","kind":"Thing","metadata":{"name":"x"},"spec":{"a":"x","v1":"stored"}}`)

	// What is already as Kubernetes reads it comes back as it is.
	clean := []byte(`{"apiVersion":"example.com/v1","kind":"Thing","metadata":{"name":"x","resourceVersion":"9","generation":1},"spec":{"a":"x","v1":"stored"}}`)
	res, err = conv.Convert(ctx, [][]byte{clean}, "example.com/v1")
	if err != nil || res.changedAt(0) || &res.Objects[0][0] != &clean[0] {
		t.Fatalf("a clean object was changed: %v %s", err, res.Objects[0])
	}
}

// Cached items this process wrote under the converter's schemas are served
// as cached (what they hold is not looked at again, nor remembered);
// others are read as from storage, once, and remembered.
func TestItemsTrustOnlyOwnWritesUnderTheSameSchemas(t *testing.T) {
	conv := defaultsConverter(t, 5)
	ctx := context.Background()
	// garbage stands for anything the write path would have removed: an
	// item that is trusted keeps it, which shows it was not looked at.
	raw := []byte(`{"apiVersion":"example.com/v1","kind":"Thing","metadata":{"name":"x","resourceVersion":"9","generation":1},"garbage":true,"spec":{"a":"x"}}`)
	item := func(w *store.WriteStamp) *store.Item {
		return store.NewCachedItem(&store.Item{Key: "/k", Raw: raw, Rev: 9, Written: w})
	}
	own := item(&store.WriteStamp{Epoch: 5, Defaulted: true})
	out, err := Items(ctx, conv, []*store.Item{own}, "example.com/v1")
	if err != nil || &out[0][0] != &raw[0] {
		t.Fatalf("own write: %v %s", err, out[0])
	}
	if !ServedAsStored(conv, own, "example.com/v1") || ServedAsStored(conv, own, "example.com/v1beta1") {
		t.Fatal("ServedAsStored of an own write")
	}
	if _, ok := lookup(own, conv, "example.com/v1"); ok {
		t.Fatal("an item served as cached was remembered")
	}
	// Written in another version: only the stored version's defaults.
	undefaulted := item(&store.WriteStamp{Epoch: 5})
	out, err = Items(ctx, conv, []*store.Item{undefaulted}, "example.com/v1")
	if err != nil {
		t.Fatal(err)
	}
	sameJSON(t, out[0], `{"apiVersion":"example.com/v1","kind":"Thing","metadata":{"name":"x","resourceVersion":"9","generation":1},"garbage":true,"spec":{"a":"x","v1":"stored"}}`)
	// Written under other schemas, or not by this process: read as
	// Kubernetes reads from storage.
	for _, it := range []*store.Item{item(&store.WriteStamp{Epoch: 4, Defaulted: true}), item(nil)} {
		if ServedAsStored(conv, it, "example.com/v1") {
			t.Fatal("an item of unknown origin is served as cached")
		}
		out, err = Items(ctx, conv, []*store.Item{it}, "example.com/v1")
		if err != nil {
			t.Fatal(err)
		}
		sameJSON(t, out[0], `{"apiVersion":"example.com/v1","kind":"Thing","metadata":{"name":"x","resourceVersion":"9","generation":1},"spec":{"a":"x","v1":"stored"}}`)
		if r, ok := lookup(it, conv, "example.com/v1"); !ok || r.raw == nil {
			t.Fatalf("the reading was not remembered: %+v", r)
		}
	}
	// An item of unknown origin that needs nothing is remembered as such,
	// without a copy, and is then served as cached.
	clean := store.NewCachedItem(&store.Item{Key: "/k", Rev: 9, Raw: []byte(`{"apiVersion":"example.com/v1","kind":"Thing","metadata":{"name":"x","resourceVersion":"9","generation":1},"spec":{"a":"x","v1":"stored"}}`)})
	if _, err := Items(ctx, conv, []*store.Item{clean}, "example.com/v1"); err != nil {
		t.Fatal(err)
	}
	if r, ok := lookup(clean, conv, "example.com/v1"); !ok || r.raw != nil || !ServedAsStored(conv, clean, "example.com/v1") {
		t.Fatalf("a clean item: %+v %v", r, ok)
	}
}

// A webhook's failures are worded as Kubernetes' webhook client words
// them: the generic text of the status code, a failure Status's message.
func TestWebhookErrorMessages(t *testing.T) {
	var answer http.HandlerFunc
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { answer(w, r) }))
	defer srv.Close()
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	crd := &apiextensionsv1.CustomResourceDefinition{}
	crd.Spec.Group, crd.Spec.Names.Kind = "example.com", "Thing"
	crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter, Webhook: &apiextensionsv1.WebhookConversion{
		ClientConfig: &apiextensionsv1.WebhookClientConfig{URL: &srv.URL, CABundle: caPEM}, ConversionReviewVersions: []string{"v1"},
	}}
	conv, err := Strategy(crd, Options{})
	if err != nil {
		t.Fatal(err)
	}
	obj := [][]byte{[]byte(`{"apiVersion":"example.com/v1","kind":"Thing","metadata":{"name":"x"}}`)}
	for _, tc := range []struct {
		name string
		h    http.HandlerFunc
		want string
	}{
		{"422 text", func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "Cannot handle v1 ConversionReview", http.StatusUnprocessableEntity)
		}, "conversion webhook for example.com/v1, Kind=Thing failed: the server rejected our request due to an error in our request"},
		{"500 text", func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "it broke", http.StatusInternalServerError)
		}, `failed: an error on the server ("it broke") has prevented the request from succeeding`},
		{"500 json", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte(`{"not":"a status"}`))
		}, `failed: an error on the server ("unknown") has prevented the request from succeeding`},
		{"418", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) },
			"failed: the server responded with the status code 418 but did not return more information"},
		{"Status", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(map[string]any{"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": "no such version", "code": 400})
		}, "failed: no such version"},
	} {
		answer = tc.h
		_, err := conv.Convert(context.Background(), obj, "example.com/v2")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// ItemsLazy answers nil for a packed item served as the cache keeps it
// (its writer reads it from the item), whether it is trusted or read as
// from storage and found clean; anything else as Items answers it: a
// packed item that reading changes, a raw item, a conversion by None.
func TestItemsLazyLeavesPackedItemsPacked(t *testing.T) {
	conv := defaultsConverter(t, 5)
	ctx := context.Background()
	clean := `{"apiVersion":"example.com/v1","kind":"Thing","metadata":{"name":"x%d","resourceVersion":"9","generation":1},"spec":{"a":"x","v1":"stored"}}`
	dirty := `{"apiVersion":"example.com/v1","kind":"Thing","metadata":{"name":"x%d","resourceVersion":"9","generation":1},"garbage":true,"spec":{"a":"x"}}`
	var samples [][]byte
	for i := range 64 {
		samples = append(samples, fmt.Appendf(nil, clean, i), fmt.Appendf(nil, dirty, i))
	}
	packed := func(format string, i int, w *store.WriteStamp) *store.Item {
		it := store.NewPackedItem(&store.Item{Key: "/k", Raw: fmt.Appendf(nil, format, i), Rev: 9, Written: w}, samples)
		if !it.Packed() {
			t.Fatal("not packed")
		}
		return it
	}
	items := []*store.Item{
		packed(clean, 1, &store.WriteStamp{Epoch: 5, Defaulted: true}), // trusted
		packed(clean, 2, nil), // read as from storage: clean
		packed(dirty, 3, nil), // read as from storage: pruned and defaulted
		store.NewCachedItem(&store.Item{Key: "/k", Raw: fmt.Appendf(nil, clean, 4), Rev: 9}),
	}
	for round := range 2 { // the second from the memo
		out, err := ItemsLazy(ctx, conv, items, "example.com/v1")
		if err != nil {
			t.Fatal(err)
		}
		if out[0] != nil || out[1] != nil {
			t.Fatalf("round %d: packed items served as kept: %s, %s", round, out[0], out[1])
		}
		sameJSON(t, out[2], fmt.Sprintf(clean, 3))
		sameJSON(t, out[3], fmt.Sprintf(clean, 4))
	}
	// By None: nil where the version is the same, converted where not.
	out, err := ItemsLazy(ctx, None{}, items[:2], "example.com/v1")
	if err != nil || out[0] != nil || out[1] != nil {
		t.Fatalf("None, same version: %v %s %s", err, out[0], out[1])
	}
	out, err = ItemsLazy(ctx, None{}, items[:2], "example.com/v2")
	if err != nil || !bytes.Contains(out[0], []byte(`"apiVersion":"example.com/v2"`)) || !bytes.Contains(out[1], []byte(`"name":"x2"`)) {
		t.Fatalf("None, another version: %v %s %s", err, out[0], out[1])
	}
}
