package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/crdserver/crdserver/examples/crontab-conversion/crontab"
	"github.com/crdserver/crdserver/server"
)

// buggyPorts answers as the CronTab example's webhook does, but with the
// wrong port in every object converted to v1: a conversion bug.
func buggyPorts() http.Handler {
	return spoiled(func(_, resp *apiextensionsv1.ConversionReview) []byte {
		for i, o := range resp.Response.ConvertedObjects {
			var m map[string]any
			if json.Unmarshal(o.Raw, &m) == nil && m["apiVersion"] == "example.com/v1" {
				m["port"] = "0"
				resp.Response.ConvertedObjects[i].Raw, _ = json.Marshal(m)
			}
		}
		b, _ := json.Marshal(resp)
		return b
	})
}

// TestWebhookRedeployedIsHeard: the answers a conversion webhook gave for
// objects that do not change are asked again once the recheck interval
// passes: a webhook redeployed at the same address with a fix is heard by
// gets and lists of those objects, and one that starts failing fails them
// as a first conversion fails (500 naming the webhook), while reads in the
// storage version go on.
func TestWebhookRedeployedIsHeard(t *testing.T) {
	ws := startWebhook(t, buggyPorts())
	e := start(t, func(c *server.Config) { c.Conversion.RecheckInterval = 200 * time.Millisecond })
	e.createCRD(conversionCRD("v1beta1", apiextensionsv1.WebhookClientConfig{URL: ptr(ws.url + "/convert"), CABundle: ws.caPEM}))
	beta := e.dyn.Resource(exV1beta).Namespace("default")
	v1 := e.dyn.Resource(exV1).Namespace("default")
	const n = 4
	revs := map[string]string{}
	for i := range n {
		o, err := beta.Create(e.ctx, betaCronTab(fmt.Sprintf("c%d", i), fmt.Sprintf("host%d:%d", i, 1000+i)), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		revs[o.GetName()] = o.GetResourceVersion()
	}
	// ports reads every object in v1, by a get of c0 and a list, as
	// "port" values by name; ok is false when a read fails.
	ports := func(ctx context.Context) (map[string]any, bool) {
		got := map[string]any{}
		o, err := v1.Get(ctx, "c0", metav1.GetOptions{})
		if err != nil {
			return nil, false
		}
		got["get c0"] = o.Object["port"]
		l, err := v1.List(ctx, metav1.ListOptions{})
		if err != nil || len(l.Items) != n {
			return nil, false
		}
		for _, it := range l.Items {
			if it.GetResourceVersion() != revs[it.GetName()] {
				t.Errorf("%s changed: resourceVersion %s, was %s", it.GetName(), it.GetResourceVersion(), revs[it.GetName()])
			}
			got[it.GetName()] = it.Object["port"]
		}
		return got, true
	}
	wantPorts := func(fixed bool) map[string]any {
		want := map[string]any{"get c0": "1000"}
		for i := range n {
			want[fmt.Sprintf("c%d", i)] = fmt.Sprint(1000 + i)
		}
		if !fixed {
			for k := range want {
				want[k] = "0"
			}
		}
		return want
	}
	if got, ok := ports(e.ctx); !ok || !reflect.DeepEqual(got, wantPorts(false)) {
		t.Fatalf("read in v1 through the buggy webhook: %v (%v)", got, ok)
	}

	// The fix is deployed at the same address: the unchanged objects are
	// served with its answers within the interval.
	ws.set(crontab.NewScheme())
	var last map[string]any
	err := wait.PollUntilContextTimeout(e.ctx, 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		got, ok := ports(ctx)
		if !ok {
			return false, fmt.Errorf("a read failed")
		}
		last = got
		return reflect.DeepEqual(got, wantPorts(true)), nil
	})
	if err != nil {
		t.Fatalf("the redeployed webhook's answers are not served: %v, last read %v", err, last)
	}

	// The webhook starts failing: reads in v1 fail with the error a first
	// conversion gets, reads in v1beta1 go on.
	ws.set(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "webhook broke", http.StatusServiceUnavailable)
	}))
	const msg = "conversion webhook for example.com/v1beta1, Kind=CronTab failed: the server is currently unable to handle the request"
	var getFailure response
	err = wait.PollUntilContextTimeout(e.ctx, 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		getFailure = e.do("GET", "/apis/example.com/v1/namespaces/default/crontabs/c1", "")
		return getFailure.code != http.StatusOK, nil
	})
	if err != nil {
		t.Fatalf("reads through the failing webhook still succeed: %s", getFailure.body)
	}
	getStatus := expectStatus(t, getFailure, http.StatusInternalServerError, metav1.StatusReasonInternalError, msg)
	// Failing once, it fails every read, as a first conversion does.
	expectStatus(t, e.do("GET", "/apis/example.com/v1/namespaces/default/crontabs/c1", ""), http.StatusInternalServerError, metav1.StatusReasonInternalError, msg)
	var listFailure response
	err = wait.PollUntilContextTimeout(e.ctx, 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		listFailure = e.do("GET", "/apis/example.com/v1/namespaces/default/crontabs", "")
		return listFailure.code != http.StatusOK, nil
	})
	if err != nil {
		t.Fatalf("lists through the failing webhook still succeed: %s", listFailure.body)
	}
	listStatus := expectStatus(t, listFailure, http.StatusInternalServerError, metav1.StatusReasonInternalError, msg)
	if _, err := v1.List(e.ctx, metav1.ListOptions{}); !apierrors.IsInternalError(err) {
		t.Fatalf("client-go list in v1: %v", err)
	}

	// The same Status as a first conversion's failure: an object never
	// read in v1.
	if _, err := beta.Create(e.ctx, betaCronTab("fresh", "h:1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	first := expectStatus(t, e.do("GET", "/apis/example.com/v1/namespaces/default/crontabs/fresh", ""), http.StatusInternalServerError, metav1.StatusReasonInternalError, msg)
	if !reflect.DeepEqual(getStatus, first) || !reflect.DeepEqual(listStatus, first) {
		t.Errorf("a failure asking again differs from a first one:\nget  %+v\nlist %+v\nfirst %+v", getStatus, listStatus, first)
	}

	// The storage version needs no webhook.
	if o, err := beta.Get(e.ctx, "c1", metav1.GetOptions{}); err != nil || o.Object["hostPort"] != "host1:1001" {
		t.Fatalf("get in the storage version: %v %v", err, o)
	}
	if l, err := beta.List(e.ctx, metav1.ListOptions{}); err != nil || len(l.Items) != n+1 {
		t.Fatalf("list in the storage version: %v", err)
	}

	// Back up: served again.
	ws.set(crontab.NewScheme())
	if o, err := v1.Get(e.ctx, "c1", metav1.GetOptions{}); err != nil || o.Object["port"] != "1001" {
		t.Fatalf("get in v1 once the webhook works again: %v %v", err, o)
	}
	if l, err := v1.List(e.ctx, metav1.ListOptions{}); err != nil || len(l.Items) != n+1 {
		t.Fatalf("list in v1 once the webhook works again: %v", err)
	}
}
