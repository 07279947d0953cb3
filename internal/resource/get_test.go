package resource

import (
	"net/http"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/crdserver/crdserver/internal/store"
)

// cachedEngine: widget w stored at revision 2, and a cache at revision 9
// that holds an older state of it (revision 1) labelled from=cache, so
// that an answer tells where it was read.
func cachedEngine(t *testing.T) *engine {
	e := newEngine(t)
	e.create(widget("w", ""))
	it, err := DecodeItem(e.res.Key("default", "w"), []byte(widget("w", `,"labels":{"from":"cache"}`)), 1)
	if err != nil {
		t.Fatal(err)
	}
	e.res.Cache = store.NewFixedCache(e.res.KeyPrefix, 9, it)
	return e
}

func fromCache(a answer) bool { return strings.Contains(a.raw, `"from":"cache"`) }

func TestGetResourceVersions(t *testing.T) {
	e := cachedEngine(t)
	path := widgetsPath + "/w"
	// Unset: the newest state, from etcd (the store has other writers;
	// the cache's state is another).
	if a := e.do("GET", path, "", ""); a.code != 200 || fromCache(a) || meta(a)["resourceVersion"] != "2" {
		t.Fatalf("unset: %d %s", a.code, a.raw)
	}
	// 0: any state, the cache's.
	if a := e.do("GET", path+"?resourceVersion=0", "", ""); a.code != 200 || !fromCache(a) {
		t.Fatalf("0: %d %s", a.code, a.raw)
	}
	// Not older than a revision the cache has reached: the cache's.
	if a := e.do("GET", path+"?resourceVersion=9", "", ""); a.code != 200 || !fromCache(a) {
		t.Fatalf("9: %d %s", a.code, a.raw)
	}
	// What the cache lacks is not found there.
	e.do("GET", widgetsPath+"/other?resourceVersion=0", "", "").status(t, 404, metav1.StatusReasonNotFound, `widgets.example.com "other" not found`)
	e.do("GET", widgetsPath+"/other", "", "").status(t, 404, metav1.StatusReasonNotFound, `widgets.example.com "other" not found`)
	e.do("GET", path+"?resourceVersion=abc", "", "").status(t, 400, metav1.StatusReasonBadRequest, `resourceVersion: Invalid value: "abc"`)
	e.do("GET", path+"?resourceVersion=-1", "", "").status(t, 400, metav1.StatusReasonBadRequest, `resourceVersion: Invalid value: "-1"`)
}

func TestGetEncodings(t *testing.T) {
	e := newEngine(t)
	e.create(widget("w", ""))
	a := e.send("GET", widgetsPath+"/w", map[string]string{"Accept": "application/yaml"}, "")
	if a.code != 200 || a.header.Get("Content-Type") != "application/yaml" || !strings.HasPrefix(a.raw, "apiVersion: example.com/v1\nkind: Widget\n") {
		t.Fatalf("YAML: %d %q %s", a.code, a.header.Get("Content-Type"), a.raw)
	}
	// The client's order of preference.
	a = e.send("GET", widgetsPath+"/w", map[string]string{"Accept": "application/xml;q=1, application/json;q=0.5"}, "")
	if a.code != 200 || a.header.Get("Content-Type") != "application/json" {
		t.Fatalf("JSON by preference: %d %q", a.code, a.header.Get("Content-Type"))
	}
	// ?pretty=true indents.
	if a = e.do("GET", widgetsPath+"/w?pretty=true", "", ""); a.code != 200 || !strings.HasPrefix(a.raw, "{\n  \"apiVersion\": \"example.com/v1\",\n") {
		t.Fatalf("pretty: %d %s", a.code, a.raw)
	}
	// Lists in YAML.
	e.cache()
	a = e.send("GET", widgetsPath, map[string]string{"Accept": "application/yaml"}, "")
	if a.code != 200 || a.header.Get("Content-Type") != "application/yaml" || !strings.HasPrefix(a.raw, "apiVersion: example.com/v1\nitems:\n- apiVersion: example.com/v1\n") || !strings.Contains(a.raw, "kind: WidgetList\n") {
		t.Fatalf("YAML list: %d %s", a.code, a.raw)
	}
	// Errors are Status objects in JSON.
	a = e.send("GET", widgetsPath+"/nope", map[string]string{"Accept": "application/json"}, "")
	if a.code != 404 || a.header.Get("Content-Type") != "application/json" || a.body["kind"] != "Status" {
		t.Fatalf("404: %d %q %s", a.code, a.header.Get("Content-Type"), a.raw)
	}
}

// Every request of a deprecated version carries its warning.
func TestDeprecatedVersionWarns(t *testing.T) {
	e := fiveWidgets(t)
	e.ver.Deprecated, e.ver.Warning = true, "example.com/v1 Widget is deprecated; use example.com/v2 Widget"
	want := `299 - "example.com/v1 Widget is deprecated; use example.com/v2 Widget"`
	for _, a := range []answer{
		e.do("GET", widgetsPath+"/a", "", ""),
		e.do("GET", widgetsPath, "", ""),
		e.do("POST", widgetsPath, "application/json", widget("n", "")),
		e.do("PATCH", widgetsPath+"/a", "application/merge-patch+json", `{}`),
		e.do("DELETE", widgetsPath+"/b", "", ""),
		e.do("GET", widgetsPath+"/missing", "", ""),
	} {
		if got := a.header.Values("Warning"); len(got) != 1 || got[0] != want {
			t.Fatalf("%d %s: Warning %q", a.code, a.raw, got)
		}
		if a.code != http.StatusOK && a.code != http.StatusCreated && a.code != http.StatusNotFound {
			t.Fatalf("%d %s", a.code, a.raw)
		}
	}
}
