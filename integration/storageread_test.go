package integration

import (
	"context"
	"fmt"
	"net/http"
	"reflect"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/retry"

	"github.com/crdserver/crdserver/examples/crontab-conversion/crontab"
	"github.com/crdserver/crdserver/server"
)

// Objects are read from storage as Kubernetes' storage decoder reads them,
// whoever wrote them: a tool writing to etcd directly, another replica,
// crdserver itself before the schema changed.

// startWithEtcd starts a server on an etcd of the test's own and returns
// a client of that etcd, to write objects behind the server's back.
func startWithEtcd(t *testing.T) (*env, *clientv3.Client) {
	t.Helper()
	endpoint := startExternalEtcd(t)
	e := start(t, func(c *server.Config) { c.EtcdServers = []string{endpoint} })
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return e, cli
}

func (e *env) etcdPut(cli *clientv3.Client, key, value string) {
	e.t.Helper()
	if _, err := cli.Put(e.ctx, key, value); err != nil {
		e.t.Fatal(err)
	}
}

// readEventually polls check until it holds (the cache follows etcd).
func readEventually(t *testing.T, what string, check func() error) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		last = check()
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("%s: %v", what, last)
	}
}

// checkRead is what reading the stored object of TestStoredObjectsAreRead
// must give: unknown fields pruned, the metadata that does not decode
// dropped, the generation repaired.
func checkRead(u map[string]any) error {
	if _, found := u["garbage"]; found {
		return fmt.Errorf("garbage not pruned: %v", u)
	}
	md, _ := u["metadata"].(map[string]any)
	if _, found := md["unknown"]; found {
		return fmt.Errorf("metadata.unknown not dropped: %v", md)
	}
	if _, found := md["annotations"]; found {
		return fmt.Errorf("wrongly typed annotations not dropped: %v", md)
	}
	if g, _ := md["generation"].(int64); g != 1 {
		return fmt.Errorf("generation %v, want 1", md["generation"])
	}
	if l, _ := md["labels"].(map[string]any); l["app"] != "x" {
		return fmt.Errorf("labels lost: %v", md)
	}
	if spec, _ := u["spec"].(map[string]any); spec["image"] != "img" {
		return fmt.Errorf("spec lost: %v", u)
	}
	return nil
}

func TestStoredObjectsAreReadAsKubernetesReadsThem(t *testing.T) {
	e, cli := startWithEtcd(t)
	e.createCRD(cronTabCRD(t))
	cts := e.dyn.Resource(crontabs).Namespace("default")
	// An object crdserver wrote, then changed behind its back: what it
	// wrote itself does not vouch for what is stored now.
	if _, err := cts.Create(e.ctx, cronTab("own", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const stored = `{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"%s","namespace":"default","unknown":42,"generation":null,"annotations":{"foo":42,"bar":"abc"},"labels":{"app":"x"}},"garbage":"foo","spec":{"image":"img"}}`
	for _, name := range []string{"own", "direct"} {
		e.etcdPut(cli, "/registry/stable.example.com/crontabs/default/"+name, fmt.Sprintf(stored, name))
	}

	for _, name := range []string{"own", "direct"} {
		r := e.do("GET", "/apis/stable.example.com/v1/namespaces/default/crontabs/"+name, "")
		if r.code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", name, r.code, r.body)
		}
		if err := checkRead(r.object(t)); err != nil {
			t.Fatalf("GET %s: %v", name, err)
		}
		readEventually(t, "GET from the cache", func() error {
			r := e.do("GET", "/apis/stable.example.com/v1/namespaces/default/crontabs/"+name+"?resourceVersion=0", "")
			return checkRead(r.object(t))
		})
	}
	for _, rv := range []string{"", "0"} {
		l, err := cts.List(e.ctx, metav1.ListOptions{ResourceVersion: rv})
		if err != nil || len(l.Items) != 2 {
			t.Fatalf("list: %v %v", err, l)
		}
		for _, it := range l.Items {
			if err := checkRead(it.Object); err != nil {
				t.Fatalf("list (resourceVersion %q) %s: %v", rv, it.GetName(), err)
			}
		}
	}
	w, err := cts.Watch(e.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		ev := next(t, w)
		if err := checkRead(ev.Object.(*unstructured.Unstructured).Object); ev.Type != watch.Added || err != nil {
			t.Fatalf("watch: %s %v", ev.Type, err)
		}
	}
	w.Stop()

	// What cannot be read is dropped, not a 500: the object can be
	// updated.
	got, err := cts.Get(e.ctx, "direct", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got.SetLabels(map[string]string{"app": "fixed"})
	if _, err := cts.Update(e.ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// An object whose stored metadata does not decode can be deleted (200),
// as in Kubernetes, one at a time or with its collection; one with a
// finalizer is marked deleted, its metadata read as Kubernetes reads it.
func TestUndecodableMetadataCanBeDeleted(t *testing.T) {
	e, cli := startWithEtcd(t)
	e.createCRD(cronTabCRD(t))
	const stored = `{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"%s","namespace":"default","uid":"u-%[1]s","unknown":42,"generation":null,"annotations":{"foo":42,"bar":"abc"}%s},"spec":{"image":"img"}}`
	for _, name := range []string{"one", "two", "three"} {
		e.etcdPut(cli, "/registry/stable.example.com/crontabs/default/"+name, fmt.Sprintf(stored, name, ""))
	}
	e.etcdPut(cli, "/registry/stable.example.com/crontabs/default/kept", fmt.Sprintf(stored, "kept", `,"finalizers":["example.com/keep"]`))
	if r := e.do("DELETE", "/apis/stable.example.com/v1/namespaces/default/crontabs/one", ""); r.code != http.StatusOK {
		t.Fatalf("DELETE: %d %s", r.code, r.body)
	}
	r := e.do("DELETE", "/apis/stable.example.com/v1/namespaces/default/crontabs/kept", "")
	if r.code != http.StatusOK {
		t.Fatalf("DELETE of an object with a finalizer: %d %s", r.code, r.body)
	}
	kept := r.object(t)
	if md, _ := kept["metadata"].(map[string]any); md["deletionTimestamp"] == nil || md["annotations"] != nil || md["unknown"] != nil || md["generation"] != int64(2) {
		t.Fatalf("marked deleted: %v", md)
	}
	if r := e.do("DELETE", "/apis/stable.example.com/v1/namespaces/default/crontabs", ""); r.code != http.StatusOK {
		t.Fatalf("DELETE of the collection: %d %s", r.code, r.body)
	}
	l, err := e.dyn.Resource(crontabs).Namespace("default").List(e.ctx, metav1.ListOptions{})
	if err != nil || len(l.Items) != 1 || l.Items[0].GetName() != "kept" {
		t.Fatalf("left: %v %v", err, l)
	}
}

// defaultsCRD stores v1; the tests add defaults to its versions.
func defaultsCRD() *apiextensionsv1.CustomResourceDefinition {
	props := func() *apiextensionsv1.CustomResourceValidation {
		return &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
			Type: "object",
			Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
				"a": {Type: "string"}, "b": {Type: "string"}, "c": {Type: "string"},
			}}},
		}}
	}
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "things.defaults.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "defaults.example.com",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "things", Singular: "thing", Kind: "Thing"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
				{Name: "v1", Served: true, Storage: true, Schema: props()},
				{Name: "v1beta1", Served: true, Schema: props()},
			},
		},
	}
}

func (e *env) setDefault(crdName, version, field, value string) {
	e.t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		crd, err := e.ext.ApiextensionsV1().CustomResourceDefinitions().Get(e.ctx, crdName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for i := range crd.Spec.Versions {
			if crd.Spec.Versions[i].Name == version {
				p := crd.Spec.Versions[i].Schema.OpenAPIV3Schema.Properties["spec"]
				f := p.Properties[field]
				f.Default = &apiextensionsv1.JSON{Raw: []byte(fmt.Sprintf("%q", value))}
				p.Properties[field] = f
				crd.Spec.Versions[i].Schema.OpenAPIV3Schema.Properties["spec"] = p
			}
		}
		_, err = e.ext.ApiextensionsV1().CustomResourceDefinitions().Update(e.ctx, crd, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
}

func specOf(u *unstructured.Unstructured) map[string]any {
	s, _ := u.Object["spec"].(map[string]any)
	return s
}

// The defaults of the version an object is stored in apply when it is
// read, in whatever version; the defaults of the version read do not; and
// the storage version's defaults are not written when an object of
// another version is stored.
func TestStorageVersionDefaultsApplyOnRead(t *testing.T) {
	e, cli := startWithEtcd(t)
	crd := e.createCRD(defaultsCRD())
	gvr := func(v string) schema.GroupVersionResource {
		return schema.GroupVersionResource{Group: "defaults.example.com", Version: v, Resource: "things"}
	}
	v1, v1beta1 := e.dyn.Resource(gvr("v1")).Namespace("default"), e.dyn.Resource(gvr("v1beta1")).Namespace("default")
	thing := func(v, name string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "defaults.example.com/" + v, "kind": "Thing", "metadata": map[string]any{"name": name}, "spec": map[string]any{"a": "A"},
		}}
	}
	if _, err := v1.Create(e.ctx, thing("v1", "old"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// A default added to the storage version shows in every version.
	e.setDefault(crd.Name, "v1", "b", "B")
	for _, c := range []struct {
		name   string
		client interface {
			Get(context.Context, string, metav1.GetOptions, ...string) (*unstructured.Unstructured, error)
		}
	}{{"v1", v1}, {"v1beta1", v1beta1}} {
		for _, rv := range []string{"", "0"} {
			readEventually(t, "the storage version's new default on "+c.name+" (resourceVersion "+rv+")", func() error {
				got, err := c.client.Get(e.ctx, "old", metav1.GetOptions{ResourceVersion: rv})
				if err != nil {
					return err
				}
				if specOf(got)["b"] != "B" {
					return fmt.Errorf("spec %v", specOf(got))
				}
				return nil
			})
		}
	}
	l, err := v1beta1.List(e.ctx, metav1.ListOptions{})
	if err != nil || len(l.Items) != 1 || specOf(&l.Items[0])["b"] != "B" {
		t.Fatalf("list in v1beta1: %v %v", err, l)
	}

	// A default of the version read only is not applied to what is read.
	e.setDefault(crd.Name, "v1beta1", "c", "C")
	time.Sleep(200 * time.Millisecond) // the CRD change takes effect
	for _, rv := range []string{"", "0"} {
		got, err := v1beta1.Get(e.ctx, "old", metav1.GetOptions{ResourceVersion: rv})
		if err != nil {
			t.Fatal(err)
		}
		if _, found := specOf(got)["c"]; found {
			t.Fatalf("a default of the version read was applied on read: %v", specOf(got))
		}
	}

	// Created in v1beta1: its own defaults are written, the storage
	// version's are not, and are there on every read.
	created, err := v1beta1.Create(e.ctx, thing("v1beta1", "new"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s := specOf(created); s["b"] != "B" || s["c"] != "C" {
		t.Fatalf("created: %v", s)
	}
	resp, err := cli.Get(e.ctx, "/registry/defaults.example.com/things/default/new")
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("etcd: %v", err)
	}
	var inEtcd map[string]any
	if err := utiljson.Unmarshal(resp.Kvs[0].Value, &inEtcd); err != nil {
		t.Fatal(err)
	}
	if s, _ := inEtcd["spec"].(map[string]any); !reflect.DeepEqual(s, map[string]any{"a": "A", "c": "C"}) {
		t.Fatalf("stored: %v", inEtcd)
	}
	for _, rv := range []string{"", "0"} {
		readEventually(t, "a read of what v1beta1 created", func() error {
			got, err := v1.Get(e.ctx, "new", metav1.GetOptions{ResourceVersion: rv})
			if err != nil {
				return err
			}
			if s := specOf(got); s["b"] != "B" || s["c"] != "C" {
				return fmt.Errorf("spec %v", s)
			}
			return nil
		})
	}
}

// Field selectors match the object in the version asked for: through a
// conversion webhook that renames the selected field, in lists, watches
// and collection deletes.
func TestFieldSelectorsMatchTheConvertedObject(t *testing.T) {
	ws := startWebhook(t, crontab.NewScheme())
	e := start(t)
	crd := conversionCRD("v1beta1", apiextensionsv1.WebhookClientConfig{URL: ptr(ws.url + "/convert"), CABundle: ws.caPEM})
	for i := range crd.Spec.Versions {
		if crd.Spec.Versions[i].Name == "v1" {
			crd.Spec.Versions[i].SelectableFields = []apiextensionsv1.SelectableField{{JSONPath: ".host"}}
		} else {
			crd.Spec.Versions[i].SelectableFields = []apiextensionsv1.SelectableField{{JSONPath: ".hostPort"}}
		}
	}
	e.createCRD(crd)
	beta := e.dyn.Resource(exV1beta).Namespace("default")
	v1 := e.dyn.Resource(exV1).Namespace("default")
	w, err := v1.Watch(e.ctx, metav1.ListOptions{FieldSelector: "host=blue"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for i, host := range []string{"blue", "green", "blue"} {
		if _, err := beta.Create(e.ctx, betaCronTab(fmt.Sprintf("c%d", i), host+":80"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	names := func(l *unstructured.UnstructuredList) sets.Set[string] {
		s := sets.New[string]()
		for _, it := range l.Items {
			s.Insert(it.GetName())
		}
		return s
	}
	for _, rv := range []string{"", "0"} {
		l, err := v1.List(e.ctx, metav1.ListOptions{FieldSelector: "host=blue", ResourceVersion: rv})
		if err != nil || !names(l).Equal(sets.New("c0", "c2")) {
			t.Fatalf("list v1 host=blue (resourceVersion %q): %v %v", rv, err, names(l))
		}
	}
	l, err := v1.List(e.ctx, metav1.ListOptions{FieldSelector: "host=blue", Limit: 1})
	if err != nil || !names(l).Equal(sets.New("c0")) || l.GetContinue() == "" {
		t.Fatalf("first page: %v %v %q", err, names(l), l.GetContinue())
	}
	l, err = v1.List(e.ctx, metav1.ListOptions{FieldSelector: "host=blue", Limit: 1, Continue: l.GetContinue()})
	if err != nil || !names(l).Equal(sets.New("c2")) {
		t.Fatalf("second page: %v %v", err, names(l))
	}
	if l, err := beta.List(e.ctx, metav1.ListOptions{FieldSelector: "hostPort=green:80"}); err != nil || !names(l).Equal(sets.New("c1")) {
		t.Fatalf("list v1beta1: %v %v", err, l)
	}

	// c2 stops matching: the watch sees it go.
	c2, err := beta.Get(e.ctx, "c2", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c2.Object["hostPort"] = "red:80"
	if _, err := beta.Update(e.ctx, c2, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	var seen []string
	for len(seen) < 3 {
		ev := next(t, w)
		seen = append(seen, fmt.Sprintf("%s %s %v", ev.Type, ev.Object.(*unstructured.Unstructured).GetName(), ev.Object.(*unstructured.Unstructured).Object["host"]))
	}
	if want := []string{"ADDED c0 blue", "ADDED c2 blue", "DELETED c2 blue"}; !reflect.DeepEqual(seen, want) {
		t.Fatalf("watch events %v, want %v", seen, want)
	}

	if err := v1.DeleteCollection(e.ctx, metav1.DeleteOptions{}, metav1.ListOptions{FieldSelector: "host=blue"}); err != nil {
		t.Fatal(err)
	}
	if l, err := beta.List(e.ctx, metav1.ListOptions{}); err != nil || !names(l).Equal(sets.New("c1", "c2")) {
		t.Fatalf("after deletecollection host=blue: %v %v", err, names(l))
	}
}
