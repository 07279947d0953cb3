package aggregator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"

	"github.com/crdserver/crdserver/internal/apis/apiregistration"
	"github.com/crdserver/crdserver/internal/store"
)

func ref(ns, name string, port int32) *apiregistrationv1.ServiceReference {
	return &apiregistrationv1.ServiceReference{Namespace: ns, Name: name, Port: &port}
}

func apiService(group, version string, groupPrio, versionPrio int32, svc *apiregistrationv1.ServiceReference) *apiregistrationv1.APIService {
	return &apiregistrationv1.APIService{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apiregistration.k8s.io/v1", Kind: "APIService"},
		ObjectMeta: metav1.ObjectMeta{Name: version + "." + group, ResourceVersion: "1"},
		Spec:       apiregistrationv1.APIServiceSpec{Group: group, Version: version, GroupPriorityMinimum: groupPrio, VersionPriority: versionPrio, Service: svc, InsecureSkipTLSVerify: svc != nil},
	}
}

// newAggregator is an Aggregator over a fixed set of APIServices.
func newAggregator(t *testing.T, addrs map[string]string, apis ...*apiregistrationv1.APIService) *Aggregator {
	t.Helper()
	var items []*store.Item
	for _, a := range apis {
		raw, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		items = append(items, &store.Item{Key: apiregistration.Prefix + a.Name, Name: a.Name, Raw: raw})
	}
	agg := New(Options{APIServices: apiregistration.APIServices(store.NewFixedCache(apiregistration.Prefix, 1, items...)), ServiceAddresses: addrs})
	t.Cleanup(agg.Close)
	return agg
}

func TestGroupVersionOf(t *testing.T) {
	for path, want := range map[string]string{
		"/apis/wardle.example.com/v1alpha1":                       "wardle.example.com/v1alpha1",
		"/apis/wardle.example.com/v1alpha1/namespaces/x/flunders": "wardle.example.com/v1alpha1",
		"/apis/wardle.example.com":                                "",
		"/apis":                                                   "",
		"/api/v1/namespaces":                                      "",
		"/apis//v1":                                               "",
	} {
		g, v, ok := GroupVersionOf(path)
		got := ""
		if ok {
			got = g + "/" + v
		}
		if got != want {
			t.Errorf("%s: %q, want %q", path, got, want)
		}
	}
}

func TestResolve(t *testing.T) {
	agg := newAggregator(t, map[string]string{"ns/api:443": "127.0.0.1:1234"})
	if u, err := agg.Resolve(ref("ns", "api", 443)); err != nil || u.String() != "https://127.0.0.1:1234" {
		t.Errorf("listed: %v %v", u, err)
	}
	if _, err := agg.Resolve(ref("ns", "api", 8443)); !errors.Is(err, ErrServicePort) {
		t.Errorf("another port: %v", err)
	}
	if _, err := agg.Resolve(ref("ns", "other", 443)); !errors.Is(err, ErrServiceNotFound) {
		t.Errorf("not listed: %v", err)
	}
}

// Remote lists the APIServices with a service in kube-aggregator's
// order; Lookup finds local ones too, which the proxy leaves alone.
func TestRemoteAndLookup(t *testing.T) {
	agg := newAggregator(t, nil,
		apiService("b.example.com", "v1", 1000, 15, ref("ns", "b", 443)),
		apiService("a.example.com", "v1beta1", 1000, 15, ref("ns", "a", 443)),
		apiService("a.example.com", "v1", 1000, 15, ref("ns", "a", 443)),
		apiService("a.example.com", "v2alpha1", 1000, 20, ref("ns", "a", 443)),
		apiService("high.example.com", "v1", 2000, 15, ref("ns", "h", 443)),
		apiService("coordination.k8s.io", "v1", 16500, 15, nil),
	)
	var names []string
	for _, s := range agg.Remote() {
		names = append(names, s.API.Name)
	}
	if got := strings.Join(names, " "); got != "v1.high.example.com v2alpha1.a.example.com v1.a.example.com v1beta1.a.example.com v1.b.example.com" {
		t.Errorf("order: %s", got)
	}
	if s := agg.Lookup("coordination.k8s.io", "v1"); s == nil || !s.Local() {
		t.Errorf("local: %+v", s)
	}
	w := httptest.NewRecorder()
	if agg.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/apis/coordination.k8s.io/v1/leases", nil)) {
		t.Error("a local APIService's request was proxied")
	}
	// Not available (no condition): 503 as kube-aggregator answers.
	w = httptest.NewRecorder()
	if !agg.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/apis/b.example.com/v1/things", nil)) || w.Code != http.StatusServiceUnavailable || w.Body.String() != "service unavailable\n" {
		t.Errorf("unavailable: %d %q", w.Code, w.Body.String())
	}
}

// Check gives kube-aggregator's reasons and messages.
func TestCheck(t *testing.T) {
	status := http.StatusOK
	var user string
	backend := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user = r.Header.Get("X-Remote-User") + " " + strings.Join(r.Header.Values("X-Remote-Group"), ",") + " " + r.URL.Path
		w.WriteHeader(status)
	}))
	defer backend.Close()
	addr := strings.TrimPrefix(backend.URL, "https://")
	agg := newAggregator(t, map[string]string{"ns/api:443": addr, "ns/other:80": "127.0.0.1:1"})
	ctx := context.Background()
	u := fmt.Sprintf("https://%s/apis/w.example.com/v1", addr)
	for _, tc := range []struct {
		name   string
		svc    *apiregistrationv1.ServiceReference
		status int
		want   apiregistrationv1.APIServiceCondition
	}{
		{"passed", ref("ns", "api", 443), http.StatusOK, apiregistrationv1.APIServiceCondition{Status: "True", Reason: "Passed", Message: "all checks passed"}},
		{"bad status", ref("ns", "api", 443), http.StatusForbidden, apiregistrationv1.APIServiceCondition{Status: "False", Reason: "FailedDiscoveryCheck",
			Message: fmt.Sprintf("failing or missing response from %s: bad status from %s: 403", u, u)}},
		{"not present", ref("ns", "missing", 443), http.StatusOK, apiregistrationv1.APIServiceCondition{Status: "False", Reason: "ServiceNotFound", Message: `service/missing in "ns" is not present`}},
		{"port", ref("ns", "api", 8443), http.StatusOK, apiregistrationv1.APIServiceCondition{Status: "False", Reason: "ServicePortError", Message: `service/api in "ns" is not listening on port 8443`}},
	} {
		status = tc.status
		got := agg.Check(ctx, apiService("w.example.com", "v1", 1000, 15, tc.svc))
		tc.want.Type = apiregistrationv1.Available
		if got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
	if user != "system:kube-aggregator system:masters /apis/w.example.com/v1" {
		t.Errorf("the check asked as %q", user)
	}
	// Nothing listening: the client's error, as kube words it.
	got := agg.Check(ctx, apiService("w.example.com", "v1", 1000, 15, ref("ns", "other", 80)))
	if got.Status != "False" || got.Reason != "FailedDiscoveryCheck" || !strings.HasPrefix(got.Message, "failing or missing response from https://127.0.0.1:1/apis/w.example.com/v1: Get ") {
		t.Errorf("refused: %+v", got)
	}
}
