package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/util/retry"

	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"

	"github.com/crdserver/crdserver/server"
)

// twoVersions is the CronTab CRD with v1beta1 (deprecated) and v1
// (storage), the same schema in both.
func twoVersions(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
	crd := cronTabCRD(t)
	v1 := crd.Spec.Versions[0]
	beta := *v1.DeepCopy()
	beta.Name, beta.Storage, beta.Deprecated = "v1beta1", false, true
	crd.Spec.Versions = []apiextensionsv1.CustomResourceDefinitionVersion{beta, v1}
	return crd
}

var crontabsBeta = schema.GroupVersionResource{Group: "stable.example.com", Version: "v1beta1", Resource: "crontabs"}

func TestSeveralVersions(t *testing.T) {
	e := start(t)
	e.createCRD(twoVersions(t))

	// Discovery: v1 first and preferred.
	dc := discovery.NewDiscoveryClientForConfigOrDie(e.cfg)
	groups, err := dc.ServerGroups()
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range groups.Groups {
		if g.Name == "stable.example.com" {
			if g.PreferredVersion.Version != "v1" || len(g.Versions) != 2 || g.Versions[1].Version != "v1beta1" {
				t.Fatalf("group %+v", g)
			}
		}
	}
	// Written in v1beta1, read in both.
	ct := cronTab("both", nil)
	ct.SetAPIVersion("stable.example.com/v1beta1")
	if _, err := e.dyn.Resource(crontabsBeta).Namespace("default").Create(e.ctx, ct, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, gvr := range []schema.GroupVersionResource{crontabs, crontabsBeta} {
		got, err := e.dyn.Resource(gvr).Namespace("default").Get(e.ctx, "both", metav1.GetOptions{})
		if err != nil || got.GetAPIVersion() != "stable.example.com/"+gvr.Version {
			t.Fatalf("read in %s: %v %s", gvr.Version, err, got.GetAPIVersion())
		}
	}
	l, _ := e.dyn.Resource(crontabsBeta).List(e.ctx, metav1.ListOptions{})
	if l.GetAPIVersion() != "stable.example.com/v1beta1" || l.Items[0].GetAPIVersion() != "stable.example.com/v1beta1" {
		t.Fatalf("list in v1beta1: %s %s", l.GetAPIVersion(), l.Items[0].GetAPIVersion())
	}
	// A body in the other version than the URL is refused.
	expectStatus(t, e.do("POST", "/apis/stable.example.com/v1beta1/namespaces/default/crontabs", `{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"x"}}`),
		http.StatusBadRequest, metav1.StatusReasonBadRequest, "does not match the expected API version")
}

func TestDeprecationWarnings(t *testing.T) {
	e := start(t)
	crd := e.createCRD(twoVersions(t))
	beta := "/apis/stable.example.com/v1beta1/namespaces/default/crontabs"
	r := e.do("GET", beta, "")
	if w := r.header.Values("Warning"); len(w) != 1 || w[0] != `299 - "stable.example.com/v1beta1 CronTab is deprecated; use stable.example.com/v1 CronTab"` {
		t.Fatalf("warning %q", w)
	}
	if w := e.do("GET", ctPath, "").header.Values("Warning"); len(w) != 0 {
		t.Fatalf("warning on v1: %q", w)
	}
	// Errors carry it too.
	if w := e.do("GET", beta+"/missing", "").header.Values("Warning"); len(w) != 1 {
		t.Fatalf("no warning on an error: %q", w)
	}
	m := e.do("GET", "/metrics", "")
	if !contains(m.body, `apiserver_requested_deprecated_apis{group="stable.example.com",removed_release="",resource="crontabs",subresource="",version="v1beta1"} 1`) {
		t.Fatal("deprecated API gauge missing")
	}
	// A custom text replaces the default.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		crd, _ = e.ext.ApiextensionsV1().CustomResourceDefinitions().Get(e.ctx, crd.Name, metav1.GetOptions{})
		crd.Spec.Versions[0].DeprecationWarning = ptr("v1beta1 goes away in 2027; use v1")
		_, err := e.ext.ApiextensionsV1().CustomResourceDefinitions().Update(e.ctx, crd, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(e.ctx, 10*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		w := e.do("GET", beta, "").header.Values("Warning")
		return len(w) == 1 && w[0] == `299 - "v1beta1 goes away in 2027; use v1"`, nil
	})
	if err != nil {
		t.Fatal("custom deprecation warning not sent")
	}
	// client-go surfaces warnings to its handler.
	var got []string
	cfg := *e.cfg
	cfg.WarningHandler = warningRecorder(func(msg string) { got = append(got, msg) })
	c, _ := newDynamic(&cfg)
	if _, err := c.Resource(crontabsBeta).Namespace("default").List(e.ctx, metav1.ListOptions{}); err != nil || !slices.Contains(got, "v1beta1 goes away in 2027; use v1") {
		t.Fatalf("client-go warnings %v %v", got, err)
	}
}

func TestStoredVersionsAndUnserving(t *testing.T) {
	e := start(t)
	crds := e.ext.ApiextensionsV1().CustomResourceDefinitions()
	crd := e.createCRD(twoVersions(t))
	name := crd.Name
	update := func(f func(*apiextensionsv1.CustomResourceDefinition)) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur, err := crds.Get(e.ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			f(cur)
			_, err = crds.Update(e.ctx, cur, metav1.UpdateOptions{})
			return err
		})
	}
	// Make v1beta1 the storage version: it joins storedVersions.
	if err := update(func(c *apiextensionsv1.CustomResourceDefinition) {
		c.Spec.Versions[0].Storage, c.Spec.Versions[1].Storage = true, false
	}); err != nil {
		t.Fatal(err)
	}
	got, _ := crds.Get(e.ctx, name, metav1.GetOptions{})
	if !slices.Equal(got.Status.StoredVersions, []string{"v1", "v1beta1"}) {
		t.Fatalf("storedVersions %v", got.Status.StoredVersions)
	}
	// Back to v1; v1beta1 cannot be removed while it is a stored version.
	if err := update(func(c *apiextensionsv1.CustomResourceDefinition) {
		c.Spec.Versions[0].Storage, c.Spec.Versions[1].Storage = false, true
	}); err != nil {
		t.Fatal(err)
	}
	err := update(func(c *apiextensionsv1.CustomResourceDefinition) { c.Spec.Versions = c.Spec.Versions[1:] })
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "status.storedVersions[1]: Invalid value: \"v1beta1\": missing from spec.versions; v1beta1 was previously a storage version") {
		t.Fatalf("removing a stored version: %v", err)
	}
	// Not served: 404 and gone from discovery.
	if err := update(func(c *apiextensionsv1.CustomResourceDefinition) { c.Spec.Versions[0].Served = false }); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(e.ctx, 10*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		return e.do("GET", "/apis/stable.example.com/v1beta1/namespaces/default/crontabs", "").code == http.StatusNotFound, nil
	})
	if err != nil {
		t.Fatal("unserved version still served")
	}
	dc := discovery.NewDiscoveryClientForConfigOrDie(e.cfg)
	if _, err := dc.ServerResourcesForGroupVersion("stable.example.com/v1beta1"); !apierrors.IsNotFound(err) {
		t.Fatalf("unserved version in discovery: %v", err)
	}
	// Trim storedVersions through the status subresource, then remove it.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, _ := crds.Get(e.ctx, name, metav1.GetOptions{})
		cur.Status.StoredVersions = []string{"v1"}
		_, err := crds.UpdateStatus(e.ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := update(func(c *apiextensionsv1.CustomResourceDefinition) { c.Spec.Versions = c.Spec.Versions[1:] }); err != nil {
		t.Fatalf("removing a trimmed version: %v", err)
	}
	if _, err := e.dyn.Resource(crontabs).Namespace("default").Create(e.ctx, cronTab("still", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestAuditMarksDeprecatedRequests(t *testing.T) {
	path := t.TempDir() + "/audit.log"
	e := start(t, func(c *server.Config) { c.AuditLogPath = path })
	e.createCRD(twoVersions(t))
	r := e.do("GET", "/apis/stable.example.com/v1beta1/namespaces/default/crontabs", "")
	id := r.header.Get("Audit-Id")
	if id == "" {
		t.Fatal("no Audit-Id header")
	}
	e.do("GET", ctPath, "")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var found, plain bool
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var ev auditv1.Event
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("audit line is not an Event: %s", line)
		}
		if ev.Stage == auditv1.StageResponseStarted && ev.Verb == "watch" {
			continue // a long-running request's first event (an informer of crdserver's own)
		}
		if ev.Kind != "Event" || ev.APIVersion != "audit.k8s.io/v1" || ev.Stage != auditv1.StageResponseComplete {
			t.Fatalf("event %+v", ev)
		}
		if string(ev.AuditID) == id {
			found = ev.Annotations["k8s.io/deprecated"] == "true" && ev.Verb == "list" && ev.ObjectRef.APIVersion == "v1beta1" && ev.ResponseStatus.Code == 200
		}
		if ev.ObjectRef != nil && ev.ObjectRef.APIVersion == "v1" && ev.ObjectRef.Resource == "crontabs" {
			plain = ev.Annotations["k8s.io/deprecated"] == ""
		}
	}
	if !found || !plain {
		t.Fatalf("deprecated annotation: found %v, absent on v1 %v\n%s", found, plain, data)
	}
}

// TestBigListConvertedInOrder: a list of more objects than a list
// converts on one goroutine (700), read through client-go in the version
// not stored, right after the creates and again after a CRD edit (nothing
// remembered for the new schemas), holds every object once, converted, in
// the stored list's order.
func TestBigListConvertedInOrder(t *testing.T) {
	e := start(t)
	e.createCRD(twoVersions(t))
	tabs := e.dyn.Resource(crontabs).Namespace("default")
	const n = 700
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < n; i += 8 {
				if _, err := tabs.Create(e.ctx, cronTab(fmt.Sprintf("ct-%04d", i), nil), metav1.CreateOptions{}); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	stored, err := tabs.List(e.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		l, err := e.dyn.Resource(crontabsBeta).Namespace("default").List(e.ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(l.Items) != n || len(stored.Items) != n {
			t.Fatalf("%s: %d items in v1beta1, %d in v1, want %d", when, len(l.Items), len(stored.Items), n)
		}
		for i, it := range l.Items {
			if it.GetName() != stored.Items[i].GetName() || it.GetAPIVersion() != "stable.example.com/v1beta1" {
				t.Fatalf("%s: item %d is %s %s, want %s in v1beta1", when, i, it.GetAPIVersion(), it.GetName(), stored.Items[i].GetName())
			}
		}
	}
	check("after the creates")
	crd, err := e.ext.ApiextensionsV1().CustomResourceDefinitions().Get(e.ctx, "crontabs.stable.example.com", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	crd.Spec.Versions[0].AdditionalPrinterColumns = append(crd.Spec.Versions[0].AdditionalPrinterColumns,
		apiextensionsv1.CustomResourceColumnDefinition{Name: "Image", Type: "string", JSONPath: ".spec.image"})
	if _, err := e.ext.ApiextensionsV1().CustomResourceDefinitions().Update(e.ctx, crd, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitEstablished(crd.Name)
	check("after a CRD edit")
}
