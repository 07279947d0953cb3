package integration

import (
	"net/http"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A conversion webhook that is down blocks only what needs a conversion:
// reads and writes in the storage version, deleting objects, a namespace
// or the CRD itself go on (Kubernetes blocks CRD deletion then,
// kubernetes/kubernetes#71925).
func TestConversionFailureContained(t *testing.T) {
	e := start(t)
	crd := cronTabRulesCRD(t) // Webhook conversion to 127.0.0.1:9, where nothing listens
	// Objects stored in v1beta1, then the storage version moves to v1.
	e.createCRD(crd)
	if _, err := e.kube.CoreV1().Namespaces().Create(e.ctx, nsObject("team"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	beta := "/apis/example.com/v1beta1/namespaces/team/crontabs"
	v1 := "/apis/example.com/v1/namespaces/team/crontabs"
	for _, n := range []string{"a", "b", "c", "d"} {
		e.mustCreate(beta, `{"apiVersion":"example.com/v1beta1","kind":"CronTab","metadata":{"name":"`+n+`"},"hostPort":"h:1"}`)
	}
	got, err := e.ext.ApiextensionsV1().CustomResourceDefinitions().Get(e.ctx, crd.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got.Spec.Versions[0].Storage, got.Spec.Versions[1].Storage = false, true
	if _, err := e.ext.ApiextensionsV1().CustomResourceDefinitions().Update(e.ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Reading in another version needs the webhook: 500.
	if r := e.do("GET", v1+"/a", ""); r.code != http.StatusInternalServerError {
		t.Fatalf("a conversion without the webhook: %d %s", r.code, r.body)
	}
	// Reads and writes in the stored version need none.
	if r := e.do("GET", beta+"/a", ""); r.code != http.StatusOK {
		t.Fatalf("a read in the stored version: %d %s", r.code, r.body)
	}
	// (A write in v1beta1 is written in the storage version, v1: it needs
	// the webhook.)
	// Deleting one object in the storage version (it is stored in the
	// other) goes through.
	if r := e.do("DELETE", v1+"/b", ""); r.code != http.StatusOK {
		t.Fatalf("delete an object stored in another version: %d %s", r.code, r.body)
	}
	if r := e.do("GET", beta+"/b", ""); r.code != http.StatusNotFound {
		t.Fatalf("the deleted object: %d", r.code)
	}
	// Deleting the namespace empties it.
	if err := e.kube.CoreV1().Namespaces().Delete(e.ctx, "team", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, func() error {
		_, err := e.kube.CoreV1().Namespaces().Get(e.ctx, "team", metav1.GetOptions{})
		return err
	})
	// And the CRD goes, with whatever objects it still has.
	if _, err := e.kube.CoreV1().Namespaces().Create(e.ctx, nsObject("more"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.mustCreate("/apis/example.com/v1/namespaces/more/crontabs", `{"apiVersion":"example.com/v1","kind":"CronTab","metadata":{"name":"e"},"host":"h","port":"1"}`)
	if err := e.ext.ApiextensionsV1().CustomResourceDefinitions().Delete(e.ctx, crd.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, func() error {
		_, err := e.ext.ApiextensionsV1().CustomResourceDefinitions().Get(e.ctx, crd.Name, metav1.GetOptions{})
		return err
	})
}

// A write whose object has a manager of another version keeps that
// manager when the conversion to its version fails: the write is tracked,
// and the other entry stays as it was.
func TestManagedFieldsOfAnUnconvertibleVersionKept(t *testing.T) {
	e := start(t)
	crd := cronTabRulesCRD(t)
	crd.Spec.Versions[0].Storage, crd.Spec.Versions[1].Storage = false, true // v1 stores
	e.createCRD(crd)
	// While rules convert, a client writes through v1beta1.
	e.mustCreate(rulesPath, cronTabRules)
	beta := "/apis/example.com/v1beta1/namespaces/default/crontabs"
	v1 := "/apis/example.com/v1/namespaces/default/crontabs"
	eventually(t, e.ctx, "the rules in use", func() (bool, error) {
		r := e.do("POST", beta+"?fieldManager=old-client", `{"apiVersion":"example.com/v1beta1","kind":"CronTab","metadata":{"name":"m"},"hostPort":"h:1"}`)
		return r.code == http.StatusCreated, nil
	})
	// Then the rules go; the webhook is down.
	if r := e.do("DELETE", rulesPath+"/crontabs.example.com", ""); r.code != http.StatusOK {
		t.Fatal(r.code)
	}
	eventually(t, e.ctx, "the webhook back", func() (bool, error) {
		return e.do("GET", beta+"/m", "").code == http.StatusInternalServerError, nil
	})
	r := e.do("PATCH", v1+"/m?fieldManager=new-client", `{"metadata":{"labels":{"l":"v"}}}`, "Content-Type", "application/merge-patch+json")
	if r.code != http.StatusOK {
		t.Fatalf("patch in the storage version: %d %s", r.code, r.body)
	}
	managers := map[string]string{}
	for _, m := range r.object(t)["metadata"].(map[string]any)["managedFields"].([]any) {
		m := m.(map[string]any)
		managers[m["manager"].(string)] = m["apiVersion"].(string)
	}
	if managers["old-client"] != "example.com/v1beta1" || managers["new-client"] != "example.com/v1" {
		t.Fatalf("managers %v", managers)
	}
}

func waitGone(t *testing.T, get func() error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := get()
		if apierrors.IsNotFound(err) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still there after 30 s: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func nsObject(name string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
}
