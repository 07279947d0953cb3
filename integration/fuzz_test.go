package integration

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// fuzzServer starts one plain-HTTP server (its handler is called directly)
// with the CronTab CRD and an object "target" in it.
func fuzzServer(f *testing.F) http.Handler {
	f.Helper()
	srv, ctx := plainServer(f, "crd-crontab-fuzz")
	h := srv.Handler()
	err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("POST", ctPath, strings.NewReader(`{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"target","labels":{"a":"b"}},"spec":{"cronSpec":"* * * * *","image":"i","replicas":1,"list":[{"name":"x","v":1}]}}`)))
		return rec.Code == http.StatusCreated, nil
	})
	if err != nil {
		f.Fatal(err)
	}
	return h
}

var patchTypes = []string{"application/json-patch+json", "application/merge-patch+json", "application/apply-patch+yaml", "application/strategic-merge-patch+json"}

// FuzzPatch: no patch body, of any patch type, on the object or its
// status, makes the server fail (5xx) or lose the object.
func FuzzPatch(f *testing.F) {
	h := fuzzServer(f)
	f.Add(uint8(0), false, []byte(`[{"op":"replace","path":"/spec/replicas","value":3}]`))
	f.Add(uint8(0), false, []byte(`[{"op":"remove","path":"/metadata"}]`))
	f.Add(uint8(0), true, []byte(`[{"op":"test","path":"/spec/image","value":"i"},{"op":"move","from":"/spec","path":"/status/x"}]`))
	f.Add(uint8(1), false, []byte(`{"spec":{"replicas":-1,"list":null},"metadata":{"name":"other","uid":"x"}}`))
	f.Add(uint8(1), true, []byte(`{"status":{"a":{"b":[1,2,{"c":null}]}}}`))
	f.Add(uint8(2), false, []byte("apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata: {name: target}\nspec: {list: [{name: x, v: 2}, {name: y}]}\n"))
	f.Add(uint8(2), false, []byte("apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata: {name: target}\nspec: {list: [{v: 2}]}\n"))
	f.Add(uint8(3), false, []byte(`{"spec":{"$patch":"delete"}}`))
	f.Fuzz(func(t *testing.T, kind uint8, status bool, body []byte) {
		path := ctPath + "/target"
		if status {
			path += "/status"
		}
		q := "?fieldManager=fuzz"
		if kind%8 >= 4 {
			q += "&force=true"
		}
		req := httptest.NewRequest("PATCH", path+q, strings.NewReader(string(body)))
		req.Header.Set("Content-Type", patchTypes[int(kind)%len(patchTypes)])
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("PATCH %s (%s) %q: %d %s", path, req.Header.Get("Content-Type"), body, rec.Code, rec.Body)
		}
		if rec.Code >= 400 {
			var st metav1.Status
			if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil || st.Kind != "Status" {
				t.Fatalf("error answer is not a Status: %d %s", rec.Code, rec.Body)
			}
		}
		get := httptest.NewRecorder()
		h.ServeHTTP(get, httptest.NewRequest("GET", ctPath+"/target", nil))
		var obj struct {
			Metadata metav1.ObjectMeta `json:"metadata"`
		}
		if get.Code != 200 || json.Unmarshal(get.Body.Bytes(), &obj) != nil || obj.Metadata.Name != "target" || obj.Metadata.UID == "" {
			t.Fatalf("object after PATCH %q: %d %s", body, get.Code, get.Body)
		}
	})
}

// FuzzListQuery: any query string on a list (selectors, continue tokens,
// resourceVersion, limit) is answered, never with a 5xx.
func FuzzListQuery(f *testing.F) {
	h := fuzzServer(f)
	for _, q := range []string{
		"labelSelector=a%3Db", "labelSelector=a+in+(b,c),!d", "labelSelector=%3D%3D%3D", "fieldSelector=spec.image%3Di",
		"fieldSelector=spec.nope%3Dx", "fieldSelector=metadata.name!%3Dtarget,spec.image%3D%3Dx", "limit=1", "limit=-5",
		"limit=1&continue=abc", "continue=eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MSwic3RhcnQiOiJ4In0", "resourceVersion=0",
		"resourceVersion=999999999&resourceVersionMatch=Exact", "resourceVersionMatch=NotOlderThan", "timeoutSeconds=-1",
	} {
		f.Add(q)
	}
	f.Fuzz(func(t *testing.T, query string) {
		vals, err := url.ParseQuery(query)
		if err != nil {
			return
		}
		// A watch would wait for events: lists only.
		for _, k := range []string{"watch", "allowWatchBookmarks", "sendInitialEvents"} {
			vals.Del(k)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		req := httptest.NewRequest("GET", ctPath+"?"+vals.Encode(), nil).WithContext(ctx)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code >= 500 && rec.Code != http.StatusGatewayTimeout {
			t.Fatalf("GET ?%s: %d %s", vals.Encode(), rec.Code, rec.Body)
		}
	})
}
