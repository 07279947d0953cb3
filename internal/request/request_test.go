package request

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	cases := []struct {
		method, path string
		want         Info
	}{
		{"GET", "/api", Info{Verb: "get"}},
		{"GET", "/apis/g.io/v1", Info{APIPrefix: "apis", Group: "g.io", Version: "v1", Verb: "get"}},
		{"GET", "/api/v1/namespaces", Info{IsResourceRequest: true, APIPrefix: "api", Version: "v1", Resource: "namespaces", Verb: "list"}},
		{"GET", "/api/v1/namespaces/foo", Info{IsResourceRequest: true, APIPrefix: "api", Version: "v1", Namespace: "foo", Resource: "namespaces", Name: "foo", Verb: "get", NamespaceIsObject: true}},
		{"PUT", "/api/v1/namespaces/foo/finalize", Info{IsResourceRequest: true, APIPrefix: "api", Version: "v1", Namespace: "foo", Resource: "namespaces", Name: "foo", Subresource: "finalize", Verb: "update", NamespaceIsObject: true}},
		{"GET", "/apis/g.io/v1/namespaces/ns/things?watch=1", Info{IsResourceRequest: true, APIPrefix: "apis", Group: "g.io", Version: "v1", Namespace: "ns", Resource: "things", Verb: "watch"}},
		{"GET", "/apis/g.io/v1/things?watch=true", Info{IsResourceRequest: true, APIPrefix: "apis", Group: "g.io", Version: "v1", Resource: "things", Verb: "watch"}},
		{"POST", "/apis/g.io/v1/namespaces/ns/things", Info{IsResourceRequest: true, APIPrefix: "apis", Group: "g.io", Version: "v1", Namespace: "ns", Resource: "things", Verb: "create"}},
		{"DELETE", "/apis/g.io/v1/namespaces/ns/things", Info{IsResourceRequest: true, APIPrefix: "apis", Group: "g.io", Version: "v1", Namespace: "ns", Resource: "things", Verb: "deletecollection"}},
		{"DELETE", "/apis/g.io/v1/namespaces/ns/things/a", Info{IsResourceRequest: true, APIPrefix: "apis", Group: "g.io", Version: "v1", Namespace: "ns", Resource: "things", Name: "a", Verb: "delete"}},
		{"PATCH", "/apis/g.io/v1/namespaces/ns/things/a/status", Info{IsResourceRequest: true, APIPrefix: "apis", Group: "g.io", Version: "v1", Namespace: "ns", Resource: "things", Name: "a", Subresource: "status", Verb: "patch"}},
		{"GET", "/apis/g.io/v1/watch/namespaces/ns/things", Info{IsResourceRequest: true, APIPrefix: "apis", Group: "g.io", Version: "v1", Namespace: "ns", Resource: "things", Verb: "watch"}},
		{"GET", "/apis/g.io/v1/things/a/b/c", Info{IsResourceRequest: true, APIPrefix: "apis", Group: "g.io", Version: "v1", Resource: "things", Name: "a", Subresource: "b", Verb: "get", Extra: true}},
		{"GET", "/healthz", Info{Verb: "get"}},
	}
	// A list or watch whose field selector requires one name is for that
	// object, as Kubernetes' RequestInfoFactory has it.
	cm := Info{IsResourceRequest: true, APIPrefix: "api", Version: "v1", Namespace: "ns", Resource: "configmaps"}
	named := func(verb, name string) Info {
		i := cm
		i.Verb, i.Name = verb, name
		return i
	}
	for _, c := range []struct {
		query string
		want  Info
	}{
		{"fieldSelector=metadata.name%3Dcm1", named("list", "cm1")},
		{"fieldSelector=metadata.name%3D%3Dcm1", named("list", "cm1")},
		{"fieldSelector=metadata.name%21%3Dcm1", named("list", "")},
		{"fieldSelector=metadata.namespace%3Dns,metadata.name%3Dcm1", named("list", "cm1")},
		{"fieldSelector=metadata.name%3Dcm1,metadata.name%3Dcm2", named("list", "cm1")},
		{"fieldSelector=metadata.name%3Dcm1&fieldSelector=metadata.name%3Dcm2", named("list", "cm1")},
		{"fieldSelector=metadata.name%3Dcm1&watch=true", named("watch", "cm1")},
		{"fieldSelector=metadata.name%3Dcm1&watch=yes", named("watch", "cm1")},
		{"fieldSelector=metadata.name%3Dcm1&watch=0", named("list", "cm1")},
		{"fieldSelector=metadata.name%3Dcm1&watch=False", named("list", "cm1")},
		// Options that do not decode name no object; ?watch= still counts.
		{"fieldSelector=metadata.name%3Dcm1&limit=abc", named("list", "")},
		{"fieldSelector=metadata.name%3Dcm1&limit=abc&watch=1", named("watch", "")},
		{"fieldSelector=metadata.name%3Dcm1&limit=abc&watch=FALSE", named("list", "")},
		{"fieldSelector=bad", named("list", "")},
		{"fieldSelector=%20metadata.name%3Dcm1", named("list", "")},
		// Names that cannot be a path segment name no object.
		{"fieldSelector=metadata.name%3Dcm%2F1", named("list", "")},
		{"fieldSelector=metadata.name%3D..", named("list", "")},
		{"fieldSelector=metadata.name%3D", named("list", "")},
		{"labelSelector=metadata.name%3Dcm1", named("list", "")},
		// ?watch= is a boolean query parameter: only 0 and false are not.
		{"watch=", named("watch", "")},
		{"watch=no", named("watch", "")},
		{"watch=FALSE", named("list", "")},
		{"watch=0&watch=1", named("list", "")},
		{"limit=abc&watch=true", named("watch", "")},
	} {
		cases = append(cases, struct {
			method, path string
			want         Info
		}{"GET", "/api/v1/namespaces/ns/configmaps?" + c.query, c.want})
	}
	// The path's name and the deprecated /watch/ prefix take no name from
	// the selector.
	get := cm
	get.Verb, get.Name = "get", "cm2"
	watchPath := cm
	watchPath.Verb = "watch"
	cases = append(cases, []struct {
		method, path string
		want         Info
	}{
		{"GET", "/api/v1/namespaces/ns/configmaps/cm2?fieldSelector=metadata.name%3Dcm1", get},
		{"GET", "/api/v1/watch/namespaces/ns/configmaps?fieldSelector=metadata.name%3Dcm1", watchPath},
		{"DELETE", "/api/v1/namespaces/ns/configmaps?fieldSelector=metadata.name%3Dcm1", named("deletecollection", "")},
	}...)
	for _, c := range cases {
		r := httptest.NewRequest(c.method, c.path, nil)
		got := *Parse(r)
		c.want.Path = r.URL.Path
		if got != c.want {
			t.Errorf("%s %s:\n got %+v\nwant %+v", c.method, c.path, got, c.want)
		}
	}
}

func TestNegotiate(t *testing.T) {
	tables := Offer{Transforms: map[As][]string{AsTable: {"meta.k8s.io/v1", "meta.k8s.io/v1beta1"}}}
	cases := []struct {
		accept  string
		offer   Offer
		want    Target
		wantErr bool
	}{
		{"", Offer{}, Target{Format: FormatJSON}, false},
		{"*/*", Offer{}, Target{Format: FormatJSON}, false},
		{"application/yaml", Offer{}, Target{Format: FormatYAML}, false},
		{"application/yaml", Offer{NoYAML: true}, Target{}, true},
		{"application/vnd.kubernetes.protobuf", Offer{}, Target{}, true},
		{"application/vnd.kubernetes.protobuf, application/json", Offer{}, Target{Format: FormatJSON}, false},
		{"application/json;as=Table;v=v1;g=meta.k8s.io,application/json", Offer{}, Target{Format: FormatJSON}, false},
		{"application/json;as=Table;v=v1;g=meta.k8s.io,application/json", tables, Target{Format: FormatJSON, As: AsTable, Group: "meta.k8s.io", Version: "v1"}, false},
		{"application/json;as=Table;v=v2;g=meta.k8s.io", tables, Target{}, true},
		{"application/json;q=0.5, application/yaml", Offer{}, Target{Format: FormatYAML}, false},
		{"text/html", Offer{}, Target{}, true},
		{"application/json;pretty=1", Offer{}, Target{Format: FormatJSON, Pretty: true}, false},
	}
	for _, c := range cases {
		r := httptest.NewRequest("GET", "/x", nil)
		r.Header.Set("Accept", c.accept)
		got, err := Negotiate(r, c.offer)
		if (err != nil) != c.wantErr || (err == nil && got != c.want) {
			t.Errorf("Accept %q: got %+v %v, want %+v (error %v)", c.accept, got, err, c.want, c.wantErr)
		}
		if err != nil && Status(err).Code != http.StatusNotAcceptable {
			t.Errorf("Accept %q: error %v is not a 406", c.accept, err)
		}
	}
}

func TestDecodeObject(t *testing.T) {
	obj, err := DecodeObject([]byte(`{"a":1,"b":1.5,"c":[2]}`), "application/json", "K")
	if err != nil || obj["a"] != int64(1) || obj["b"] != 1.5 || obj["c"].([]any)[0] != int64(2) {
		t.Fatalf("numbers: %#v %v", obj, err)
	}
	obj, err = DecodeObject([]byte("a: 1\nb: x\n"), "application/yaml", "K")
	if err != nil || obj["a"] != int64(1) || obj["b"] != "x" {
		t.Fatalf("yaml: %#v %v", obj, err)
	}
	for _, bad := range []string{``, `[]`, `"x"`, `{`, `null`} {
		if _, err := DecodeObject([]byte(bad), "application/json", "K"); err == nil || Status(err).Code != 400 {
			t.Errorf("%q: %v", bad, err)
		}
	}
	if _, err := DecodeObject([]byte(`{}`), "text/plain", "K"); err == nil || Status(err).Code != 415 {
		t.Errorf("text/plain: %v", err)
	}
}

func TestReadBodyLimit(t *testing.T) {
	r := httptest.NewRequest("POST", "/x", strings.NewReader(strings.Repeat("x", MaxBodyBytes+1)))
	r.ContentLength = -1
	if _, err := ReadBody(r); err == nil || Status(err).Code != http.StatusRequestEntityTooLarge {
		t.Fatalf("over the limit: %v", err)
	}
	r = httptest.NewRequest("POST", "/x", strings.NewReader(strings.Repeat("x", MaxBodyBytes)))
	if b, err := ReadBody(r); err != nil || len(b) != MaxBodyBytes {
		t.Fatalf("at the limit: %v", err)
	}
}

func TestWarningQuoting(t *testing.T) {
	w := httptest.NewRecorder()
	AddWarning(w, `a "b" \c`)
	AddWarning(w, `a "b" \c`)
	if got := w.Header().Values("Warning"); len(got) != 1 || got[0] != `299 - "a \"b\" \\c"` {
		t.Fatalf("warning header %q", got)
	}
}

// FuzzDecodeObject feeds arbitrary bodies to the request decoder: it must
// answer an object or a 4xx Status, never panic.
func FuzzDecodeObject(f *testing.F) {
	for _, s := range []string{`{"apiVersion":"v1","kind":"X","metadata":{"name":"a"}}`, "a: [b", "a: &x [*x, *x]", `{"a":1e400}`, "- 1\n- 2", `{"a":{"b":{"c":[1,2,{"d":null}]}}}`} {
		f.Add([]byte(s), true)
		f.Add([]byte(s), false)
	}
	f.Fuzz(func(t *testing.T, body []byte, yamlBody bool) {
		mt := "application/json"
		if yamlBody {
			mt = "application/yaml"
		}
		obj, err := DecodeObject(body, mt, "X")
		if err != nil {
			if code := Status(err).Code; code < 400 || code >= 500 {
				t.Fatalf("decode error with code %d: %v", code, err)
			}
			return
		}
		if obj == nil {
			t.Fatal("nil object without error")
		}
	})
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"/api/v1/namespaces/a/b/c/d", "/apis/g/v/watch/x", "/apis//v", "/api/v1/namespaces/x/finalize"} {
		f.Add("GET", s)
	}
	f.Fuzz(func(t *testing.T, method, path string) {
		r, err := http.NewRequest(method, "http://127.0.0.1/"+strings.TrimPrefix(path, "/"), nil)
		if err != nil {
			return
		}
		_ = Parse(r)
	})
}
