package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
)

// TestDeleteCollectionInParallel: a DELETE of a collection deletes its
// objects several at a time, and a client sees what it saw when they went
// one by one: the answer lists every object in order (those finalizers
// keep marked deleted), every object has its own watch event with a
// resourceVersion of its own, and warnings from admission on each
// deletion reach the response once.
func TestDeleteCollectionInParallel(t *testing.T) {
	e := start(t)
	e.createCRD(widgetCRD(t))
	const n, kept = 120, 10
	name := func(i int) string { return fmt.Sprintf("w-%03d", i) }
	for i := range n {
		fin := ""
		if i%(n/kept) == 0 {
			fin = `,"finalizers":["example.com/keep"]`
		}
		e.mustCreate(widgetsColl, fmt.Sprintf(`{"apiVersion":"compat.example.com/v1","kind":"Widget","metadata":{"name":%q%s},"spec":{"size":%d}}`, name(i), fin, i))
	}

	// Every deletion warns (the same text each time).
	e.bindPolicy(t, "warn-deletes", admissionregistrationv1.ValidatingAdmissionPolicySpec{
		MatchConstraints: widgetsOn(admissionregistrationv1.Delete),
		Validations:      []admissionregistrationv1.Validation{{Expression: "oldObject.spec.size < 0", Message: "a widget goes"}},
	}, admissionregistrationv1.Warn)
	const warned = "Validation failed for ValidatingAdmissionPolicy 'warn-deletes' with binding 'warn-deletes': a widget goes"
	eventually(t, e.ctx, "the policy warns", func() (bool, error) {
		r := e.do("DELETE", widgetsColl+"/"+name(1)+"?dryRun=All", "")
		return r.code == http.StatusOK && strings.Contains(r.header.Get("Warning"), warned), nil
	})

	widgets := e.dyn.Resource(schema.GroupVersionResource{Group: "compat.example.com", Version: "v1", Resource: "widgets"}).Namespace("default")
	l, err := widgets.List(e.ctx, metav1.ListOptions{})
	if err != nil || len(l.Items) != n {
		t.Fatalf("list: %v, %d items", err, len(l.Items))
	}
	w, err := widgets.Watch(e.ctx, metav1.ListOptions{ResourceVersion: l.GetResourceVersion()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	r := e.do("DELETE", widgetsColl, "")
	if r.code != http.StatusOK {
		t.Fatalf("deletecollection: %d %s", r.code, r.body)
	}
	if ws := r.header.Values("Warning"); len(ws) != 1 || !strings.Contains(ws[0], warned) {
		t.Errorf("warnings: %q", ws)
	}
	var answer struct {
		Items []struct {
			Metadata metav1.ObjectMeta `json:"metadata"`
		} `json:"items"`
	}
	if err := json.Unmarshal(r.body, &answer); err != nil {
		t.Fatal(err)
	}
	if len(answer.Items) != n {
		t.Fatalf("answer lists %d objects, want %d", len(answer.Items), n)
	}
	for i, it := range answer.Items {
		if it.Metadata.Name != name(i) {
			t.Fatalf("answer item %d is %q, want %q", i, it.Metadata.Name, name(i))
		}
		if marked := it.Metadata.DeletionTimestamp != nil; marked != (i%(n/kept) == 0) {
			t.Errorf("%s: marked deleted %v", it.Metadata.Name, marked)
		}
	}

	// One event per object, each at a resourceVersion of its own.
	seen, revs := map[string]watch.EventType{}, map[string]string{}
	timeout := time.After(30 * time.Second)
	for len(seen) < n {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("watch ended after %d events", len(seen))
			}
			o, err := meta.Accessor(ev.Object)
			if err != nil {
				t.Fatalf("%s event: %v", ev.Type, err)
			}
			if prev, dup := seen[o.GetName()]; dup {
				t.Fatalf("%s: a second event %s after %s", o.GetName(), ev.Type, prev)
			}
			if other, dup := revs[o.GetResourceVersion()]; dup {
				t.Fatalf("%s and %s share resourceVersion %s", other, o.GetName(), o.GetResourceVersion())
			}
			seen[o.GetName()], revs[o.GetResourceVersion()] = ev.Type, o.GetName()
		case <-timeout:
			t.Fatalf("%d of %d events after 30s", len(seen), n)
		}
	}
	for i := range n {
		want := watch.Deleted
		if i%(n/kept) == 0 {
			want = watch.Modified
		}
		if got := seen[name(i)]; got != want {
			t.Errorf("%s: event %s, want %s", name(i), got, want)
		}
	}
	left, err := widgets.List(e.ctx, metav1.ListOptions{})
	if err != nil || len(left.Items) != kept {
		t.Fatalf("after deletecollection: %v, %d left, want the %d with finalizers", err, len(left.Items), kept)
	}
}
