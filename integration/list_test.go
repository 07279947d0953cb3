package integration

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/pager"

	"github.com/crdserver/crdserver/server"
)

// seed creates n CronTabs in namespace ns, labelled by parity.
func (e *env) seed(ns string, n int) {
	e.t.Helper()
	for i := 0; i < n; i++ {
		parity := "even"
		if i%2 == 1 {
			parity = "odd"
		}
		if _, err := e.dyn.Resource(crontabs).Namespace(ns).Create(e.ctx, cronTab(fmt.Sprintf("ct-%03d", i), map[string]string{"parity": parity}), metav1.CreateOptions{}); err != nil {
			e.t.Fatal(err)
		}
	}
}

func TestListShapeAndSelectors(t *testing.T) {
	e := start(t)
	e.createCRD(cronTabCRD(t))
	e.seed("default", 4)
	e.seed("kube-public", 2)

	r := e.do("GET", ctPath, "")
	list := r.object(t)
	if r.code != 200 || list["kind"] != "CronTabList" || list["apiVersion"] != "stable.example.com/v1" {
		t.Fatalf("list: %d %s", r.code, r.body)
	}
	md := list["metadata"].(map[string]any)
	if md["resourceVersion"] == "" || md["continue"] != "" {
		t.Fatalf("list metadata %v", md)
	}
	items := list["items"].([]any)
	if len(items) != 4 || items[0].(map[string]any)["kind"] != "CronTab" {
		t.Fatalf("items: %d", len(items))
	}
	// An empty list has "items": [].
	if r := e.do("GET", "/apis/stable.example.com/v1/namespaces/kube-system/crontabs", ""); !contains(r.body, `"items":[]`) {
		t.Fatalf("empty list: %s", r.body)
	}
	all, _ := e.dyn.Resource(crontabs).List(e.ctx, metav1.ListOptions{})
	if len(all.Items) != 6 {
		t.Fatalf("all namespaces: %d", len(all.Items))
	}
	for _, c := range []struct {
		sel  string
		want int
	}{
		{"parity=even", 2}, {"parity!=even", 2}, {"parity in (odd,even)", 4}, {"parity notin (odd)", 2}, {"parity", 4}, {"!parity", 0},
	} {
		l, err := e.dyn.Resource(crontabs).Namespace("default").List(e.ctx, metav1.ListOptions{LabelSelector: c.sel})
		if err != nil || len(l.Items) != c.want {
			t.Fatalf("selector %q: %v %d, want %d", c.sel, err, len(l.Items), c.want)
		}
	}
	for _, c := range []struct {
		sel  string
		want int
	}{
		{"metadata.name=ct-001", 2}, {"metadata.name==ct-001,metadata.namespace=default", 1}, {"metadata.namespace!=default", 2},
	} {
		l, err := e.dyn.Resource(crontabs).List(e.ctx, metav1.ListOptions{FieldSelector: c.sel})
		if err != nil || len(l.Items) != c.want {
			t.Fatalf("field selector %q: %v %d, want %d", c.sel, err, len(l.Items), c.want)
		}
	}
	expectStatus(t, e.do("GET", ctPath+"?fieldSelector=spec.image%3Dx", ""), http.StatusBadRequest, metav1.StatusReasonBadRequest, "field label not supported: spec.image")
	expectStatus(t, e.do("GET", ctPath+"?labelSelector=a%3D%3D%3Db", ""), http.StatusBadRequest, metav1.StatusReasonBadRequest, "unable to parse requirement")
}

func contains(b []byte, s string) bool { return strings.Contains(string(b), s) }

func TestListPagination(t *testing.T) {
	e := start(t)
	e.createCRD(cronTabCRD(t))
	e.seed("default", 7)
	cts := e.dyn.Resource(crontabs).Namespace("default")

	first, err := cts.List(e.ctx, metav1.ListOptions{Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Items) != 3 || first.GetContinue() == "" || first.GetRemainingItemCount() == nil || *first.GetRemainingItemCount() != 4 {
		t.Fatalf("first page: %d items, continue %q, remaining %v", len(first.Items), first.GetContinue(), first.GetRemainingItemCount())
	}
	// A change after the first page is not seen by the next pages.
	if _, err := cts.Create(e.ctx, cronTab("ct-999", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cts.Delete(e.ctx, "ct-006", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	second, err := cts.List(e.ctx, metav1.ListOptions{Limit: 3, Continue: first.GetContinue()})
	if err != nil {
		t.Fatal(err)
	}
	third, err := cts.List(e.ctx, metav1.ListOptions{Limit: 3, Continue: second.GetContinue()})
	if err != nil {
		t.Fatal(err)
	}
	if second.GetResourceVersion() != first.GetResourceVersion() || third.GetResourceVersion() != first.GetResourceVersion() {
		t.Fatalf("pages at different resourceVersions: %s %s %s", first.GetResourceVersion(), second.GetResourceVersion(), third.GetResourceVersion())
	}
	names := []string{}
	for _, l := range []*unstructured.UnstructuredList{first, second, third} {
		for _, it := range l.Items {
			names = append(names, it.GetName())
		}
	}
	if fmt.Sprint(names) != "[ct-000 ct-001 ct-002 ct-003 ct-004 ct-005 ct-006]" || third.GetContinue() != "" || third.GetRemainingItemCount() != nil {
		t.Fatalf("pages: %v continue %q", names, third.GetContinue())
	}
	// With a selector, remainingItemCount is left out.
	sel, _ := cts.List(e.ctx, metav1.ListOptions{Limit: 1, LabelSelector: "parity=odd"})
	if len(sel.Items) != 1 || sel.GetContinue() == "" || sel.GetRemainingItemCount() != nil {
		t.Fatalf("selector page: %d %q %v", len(sel.Items), sel.GetContinue(), sel.GetRemainingItemCount())
	}
	// client-go's pager walks it all.
	n := 0
	err = pager.New(func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		return cts.List(ctx, opts)
	}).EachListItem(e.ctx, metav1.ListOptions{Limit: 2}, func(obj runtime.Object) error { n++; return nil })
	if err != nil || n != 7 {
		t.Fatalf("pager: %v %d", err, n)
	}
	// Pages of a range that did not change since the first page are the
	// watch cache's: the same items, resourceVersion and remaining count.
	again, err := cts.List(e.ctx, metav1.ListOptions{Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	next, err := cts.List(e.ctx, metav1.ListOptions{Limit: 3, Continue: again.GetContinue()})
	if err != nil || len(next.Items) != 3 || next.Items[0].GetName() != "ct-003" || next.GetResourceVersion() != again.GetResourceVersion() ||
		next.GetRemainingItemCount() == nil || *next.GetRemainingItemCount() != 1 {
		t.Fatalf("unchanged second page: %v %d items, rv %s (first %s), remaining %v", err, len(next.Items), next.GetResourceVersion(), again.GetResourceVersion(), next.GetRemainingItemCount())
	}
	// Bad tokens and combinations.
	expectStatus(t, e.do("GET", ctPath+"?limit=1&continue=abc", ""), http.StatusBadRequest, metav1.StatusReasonBadRequest, "invalid continue token")
	expectStatus(t, e.do("GET", ctPath+"?limit=1&resourceVersion=5&continue="+first.GetContinue(), ""), http.StatusBadRequest, metav1.StatusReasonBadRequest, "specifying resource version is not allowed when using continue")

}

func TestListResourceVersionSemantics(t *testing.T) {
	e := start(t, shortFreshTimeout)
	e.createCRD(cronTabCRD(t))
	e.seed("default", 2)
	cts := e.dyn.Resource(crontabs).Namespace("default")
	l, _ := cts.List(e.ctx, metav1.ListOptions{})
	rv := l.GetResourceVersion()
	if _, err := cts.Create(e.ctx, cronTab("later", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Exact: the old state.
	exact, err := cts.List(e.ctx, metav1.ListOptions{ResourceVersion: rv, ResourceVersionMatch: metav1.ResourceVersionMatchExact})
	if err != nil || len(exact.Items) != 2 || exact.GetResourceVersion() != rv {
		t.Fatalf("exact: %v %d %s", err, len(exact.Items), exact.GetResourceVersion())
	}
	// limit with a resourceVersion is exact too.
	paged, err := cts.List(e.ctx, metav1.ListOptions{ResourceVersion: rv, Limit: 10})
	if err != nil || len(paged.Items) != 2 {
		t.Fatalf("limit+rv: %v %d", err, len(paged.Items))
	}
	// Unset: the new state; then NotOlderThan and "0" have it too (they
	// may answer with any state not older than the one asked for, and
	// the consistent list waited for the cache to have the write).
	for _, o := range []metav1.ListOptions{{}, {ResourceVersion: rv, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan}, {ResourceVersion: rv}, {ResourceVersion: "0"}} {
		got, err := cts.List(e.ctx, o)
		if err != nil || len(got.Items) != 3 {
			t.Fatalf("%+v: %v %d", o, err, len(got.Items))
		}
	}
	// Too new: 504 with Retry-After.
	r := e.do("GET", ctPath+"?resourceVersion=999999", "")
	st := expectStatus(t, r, http.StatusGatewayTimeout, metav1.StatusReasonTimeout, "Too large resource version: 999999, current: ")
	if r.header.Get("Retry-After") != "1" || st.Details == nil || len(st.Details.Causes) != 1 || st.Details.Causes[0].Type != metav1.CauseTypeResourceVersionTooLarge {
		t.Fatalf("too large: header %q details %+v", r.header.Get("Retry-After"), st.Details)
	}
	// An exact list at a revision etcd has not reached names both, as
	// kube-apiserver does (a client-go error).
	if _, err := cts.List(e.ctx, metav1.ListOptions{ResourceVersion: "999999", ResourceVersionMatch: metav1.ResourceVersionMatchExact}); !apierrors.IsTimeout(err) ||
		!strings.HasPrefix(err.Error(), "Timeout: Too large resource version: 999999, current: ") || strings.HasSuffix(err.Error(), "current: 0") {
		t.Fatalf("exact list in the future: %v", err)
	}
	// A list at resourceVersion=0 ignores its limit (kube-apiserver's
	// watch cache does): every item, no continue token.
	if all, err := cts.List(e.ctx, metav1.ListOptions{ResourceVersion: "0", Limit: 1}); err != nil || len(all.Items) != 3 || all.GetContinue() != "" {
		t.Fatalf("limit at resourceVersion=0: %v %v", err, all)
	}
	// Invalid combinations: 422.
	expectStatus(t, e.do("GET", ctPath+"?resourceVersionMatch=Exact", ""), http.StatusUnprocessableEntity, metav1.StatusReasonInvalid,
		"resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided")
	expectStatus(t, e.do("GET", ctPath+"?resourceVersion=0&resourceVersionMatch=Exact", ""), http.StatusUnprocessableEntity, metav1.StatusReasonInvalid,
		`resourceVersionMatch "exact" is forbidden for resourceVersion "0"`)
	expectStatus(t, e.do("GET", ctPath+"?resourceVersion=1&resourceVersionMatch=Sometimes", ""), http.StatusUnprocessableEntity, metav1.StatusReasonInvalid,
		"Unsupported value")
	expectStatus(t, e.do("GET", ctPath+"?sendInitialEvents=true", ""), http.StatusUnprocessableEntity, metav1.StatusReasonInvalid,
		"sendInitialEvents is forbidden for list")
}

func TestGetResourceVersionSemantics(t *testing.T) {
	e := start(t, shortFreshTimeout)
	e.createCRD(cronTabCRD(t))
	cts := e.dyn.Resource(crontabs).Namespace("default")
	created, err := cts.Create(e.ctx, cronTab("g", nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, rv := range []string{"", "0", created.GetResourceVersion()} {
		got, err := cts.Get(e.ctx, "g", metav1.GetOptions{ResourceVersion: rv})
		if err != nil || got.GetResourceVersion() != created.GetResourceVersion() {
			t.Fatalf("get rv=%q: %v", rv, err)
		}
	}
	expectStatus(t, e.do("GET", ctPath+"/g?resourceVersion=999999", ""), http.StatusGatewayTimeout, metav1.StatusReasonTimeout, "Too large resource version")
}

func TestCompactionExpiresHistory(t *testing.T) {
	e := start(t, func(c *server.Config) { c.CompactionInterval = 50 * time.Millisecond })
	e.createCRD(cronTabCRD(t))
	e.seed("default", 3)
	cts := e.dyn.Resource(crontabs).Namespace("default")
	first, err := cts.List(e.ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	// Writes move the revision on; the compactor then drops the history of
	// the first page.
	var expired error
	err = wait.PollUntilContextTimeout(e.ctx, 20*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		filler := cronTab("", nil)
		filler.SetGenerateName("filler-")
		if _, err := cts.Create(ctx, filler, metav1.CreateOptions{}); err != nil {
			return false, err
		}
		_, expired = cts.List(ctx, metav1.ListOptions{Limit: 1, Continue: first.GetContinue()})
		return expired != nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !apierrors.IsResourceExpired(expired) || !strings.Contains(expired.Error(), "The provided continue parameter is too old to display a consistent list result.") {
		t.Fatalf("expired token: %v", expired)
	}
	_, err = cts.List(e.ctx, metav1.ListOptions{ResourceVersion: first.GetResourceVersion(), ResourceVersionMatch: metav1.ResourceVersionMatchExact})
	if !apierrors.IsResourceExpired(err) || !strings.Contains(err.Error(), "The resourceVersion for the provided list is too old.") {
		t.Fatalf("compacted exact list: %v", err)
	}
}

// shortFreshTimeout makes reads of future resourceVersions fail fast.
func shortFreshTimeout(c *server.Config) { c.Cache.FreshTimeout = 200 * time.Millisecond }
