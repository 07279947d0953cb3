package e2e

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apiextensionsv1client "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/typed/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/crdserver/crdserver/crdtest"
)

var cronTabs = schema.GroupVersionResource{Group: "stable.example.com", Version: "v1", Resource: "crontabs"}

// TestCRDClientset creates and deletes the CronTab CRD with the generated
// apiextensions clientset, which sends protobuf.
func TestCRDClientset(t *testing.T) {
	srv := startServer(t)
	cfg, contentTypes := recordContentTypes(srv.restConfig(t))
	crds := newCRDClient(t, cfg)
	ctx := t.Context()

	crd := readCRD(t)
	created, err := crds.Create(ctx, crd, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create CRD: %v", err)
	}
	if created.UID == "" || created.ResourceVersion == "" || created.Spec.Names.Kind != "CronTab" {
		t.Errorf("created CRD lacks uid/resourceVersion or spec: %+v", created.ObjectMeta)
	}
	if got := contentTypes.get(http.MethodPost); !slices.Contains(got, "application/vnd.kubernetes.protobuf") {
		t.Errorf("the clientset's create was sent as %q; the generated clientset should send protobuf", got)
	}

	if _, err := crds.Create(ctx, crd, metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
		t.Errorf("create the CRD again: got %v, want AlreadyExists", err)
	}

	established := waitEstablished(t, cfg)
	if established.Status.AcceptedNames.Plural != "crontabs" || !slices.Equal(established.Status.AcceptedNames.ShortNames, []string{"ct"}) {
		t.Errorf("status.acceptedNames = %+v", established.Status.AcceptedNames)
	}
	if !slices.Equal(established.Status.StoredVersions, []string{"v1"}) {
		t.Errorf("status.storedVersions = %q, want [v1]", established.Status.StoredVersions)
	}

	list, err := crds.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list CRDs: %v", err)
	}
	if len(list.Items) != 1 || list.Items[0].Name != crdName {
		t.Errorf("list CRDs: got %d items, want just %s", len(list.Items), crdName)
	}

	if err := crds.Delete(ctx, crdName, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete CRD: %v", err)
	}
	// The CRD goes away once its custom resources are cleaned up.
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, eventTimeout, true, func(ctx context.Context) (bool, error) {
		_, err := crds.Get(ctx, crdName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
	if err != nil {
		t.Fatalf("the deleted CRD did not go away: %v", err)
	}
}

// TestDynamicClient uses every verb on CronTabs with client-go's dynamic
// client.
func TestDynamicClient(t *testing.T) {
	srv := startServer(t)
	cfg := srv.restConfig(t)
	crds := newCRDClient(t, cfg)
	if _, err := crds.Create(t.Context(), readCRD(t), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create CRD: %v", err)
	}
	waitEstablished(t, cfg)
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	client := dyn.Resource(cronTabs).Namespace("default")

	t.Run("create", func(t *testing.T) {
		got, err := client.Create(t.Context(), newCronTab("c1", "a"), metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create: %v", err)
		}
		if ts := got.GetCreationTimestamp(); got.GetUID() == "" || got.GetResourceVersion() == "" || ts.IsZero() {
			t.Errorf("created object lacks uid, resourceVersion or creationTimestamp: %v", got.Object["metadata"])
		}
		if got.GetGeneration() != 1 || got.GetNamespace() != "default" {
			t.Errorf("generation %d, namespace %q; want 1, default", got.GetGeneration(), got.GetNamespace())
		}
		if _, err := client.Create(t.Context(), newCronTab("c1", "a"), metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
			t.Errorf("create c1 again: got %v, want AlreadyExists", err)
		}
		if _, err := client.Create(t.Context(), newCronTab("c2", "b"), metav1.CreateOptions{}); err != nil {
			t.Fatalf("create c2: %v", err)
		}
	})

	t.Run("get", func(t *testing.T) {
		got, err := client.Get(t.Context(), "c1", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get: %v", err)
		}
		if got.GetName() != "c1" || nestedString(got, "spec", "image") != "image-a" || got.GetKind() != "CronTab" {
			t.Errorf("get c1 returned %v", got.Object)
		}
		if _, err := client.Get(t.Context(), "nothing", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("get a missing object: got %v, want NotFound", err)
		}
	})

	t.Run("list with a label selector", func(t *testing.T) {
		for selector, want := range map[string][]string{
			"":                  {"c1", "c2"},
			"app=a":             {"c1"},
			"app!=a":            {"c2"},
			"app in (a,b)":      {"c1", "c2"},
			"app=nothing":       nil,
			"app,!doesnotexist": {"c1", "c2"},
		} {
			list, err := client.List(t.Context(), metav1.ListOptions{LabelSelector: selector})
			if err != nil {
				t.Fatalf("list %q: %v", selector, err)
			}
			if got := names(list.Items); !slices.Equal(got, want) {
				t.Errorf("list with selector %q: got %q, want %q", selector, got, want)
			}
			if list.GetResourceVersion() == "" {
				t.Errorf("list with selector %q has no resourceVersion", selector)
			}
		}
	})

	t.Run("update with resourceVersion", func(t *testing.T) {
		old, err := client.Get(t.Context(), "c1", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get: %v", err)
		}
		changed := old.DeepCopy()
		if err := unstructured.SetNestedField(changed.Object, int64(2), "spec", "replicas"); err != nil {
			t.Fatal(err)
		}
		updated, err := client.Update(t.Context(), changed, metav1.UpdateOptions{})
		if err != nil {
			t.Fatalf("update: %v", err)
		}
		if updated.GetResourceVersion() == old.GetResourceVersion() {
			t.Errorf("update kept resourceVersion %s", old.GetResourceVersion())
		}
		if updated.GetGeneration() != 2 {
			t.Errorf("generation after a spec update = %d, want 2", updated.GetGeneration())
		}
		if r, _, _ := unstructured.NestedInt64(updated.Object, "spec", "replicas"); r != 2 {
			t.Errorf("spec.replicas after update = %d, want 2", r)
		}

		// The same update based on the old resourceVersion is stale.
		stale := old.DeepCopy()
		if err := unstructured.SetNestedField(stale.Object, int64(7), "spec", "replicas"); err != nil {
			t.Fatal(err)
		}
		_, err = client.Update(t.Context(), stale, metav1.UpdateOptions{})
		if !apierrors.IsConflict(err) {
			t.Fatalf("update with a stale resourceVersion: got %v, want a 409 Conflict", err)
		}
		got, err := client.Get(t.Context(), "c1", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get: %v", err)
		}
		if r, _, _ := unstructured.NestedInt64(got.Object, "spec", "replicas"); r != 2 {
			t.Errorf("spec.replicas after the rejected update = %d, want 2", r)
		}
	})

	t.Run("patch", func(t *testing.T) {
		got, err := client.Patch(t.Context(), "c1", types.MergePatchType, []byte(`{"spec":{"image":"merged"}}`), metav1.PatchOptions{})
		if err != nil {
			t.Fatalf("merge patch: %v", err)
		}
		if nestedString(got, "spec", "image") != "merged" || nestedString(got, "spec", "cronSpec") != "* * * * */5" {
			t.Errorf("after the merge patch spec = %v", got.Object["spec"])
		}
		got, err = client.Patch(t.Context(), "c1", types.JSONPatchType,
			[]byte(`[{"op":"test","path":"/spec/image","value":"merged"},{"op":"replace","path":"/spec/cronSpec","value":"0 0 * * *"}]`), metav1.PatchOptions{})
		if err != nil {
			t.Fatalf("JSON patch: %v", err)
		}
		if nestedString(got, "spec", "cronSpec") != "0 0 * * *" || nestedString(got, "spec", "image") != "merged" {
			t.Errorf("after the JSON patch spec = %v", got.Object["spec"])
		}
		// A JSON patch whose test operation fails is 422 Invalid, and changes nothing.
		_, err = client.Patch(t.Context(), "c1", types.JSONPatchType,
			[]byte(`[{"op":"test","path":"/spec/image","value":"wrong"},{"op":"replace","path":"/spec/image","value":"not-applied"}]`), metav1.PatchOptions{})
		if !apierrors.IsInvalid(err) {
			t.Errorf("JSON patch with a failing test op: got %v, want 422 Invalid", err)
		}
		if got, err := client.Get(t.Context(), "c1", metav1.GetOptions{}); err != nil || nestedString(got, "spec", "image") != "merged" {
			t.Errorf("after the failed JSON patch: %v, spec %v; want spec.image still merged", err, got.Object["spec"])
		}
		if _, err := client.Patch(t.Context(), "nothing", types.MergePatchType, []byte(`{"spec":{}}`), metav1.PatchOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("patch a missing object: got %v, want NotFound", err)
		}
	})

	t.Run("delete", func(t *testing.T) {
		if err := client.Delete(t.Context(), "c2", metav1.DeleteOptions{}); err != nil {
			t.Fatalf("delete: %v", err)
		}
		if _, err := client.Get(t.Context(), "c2", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("get after delete: got %v, want NotFound", err)
		}
		if err := client.Delete(t.Context(), "c2", metav1.DeleteOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("delete again: got %v, want NotFound", err)
		}
	})

	t.Run("watch", func(t *testing.T) {
		list, err := client.List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatalf("list: %v", err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		w, err := client.Watch(ctx, metav1.ListOptions{ResourceVersion: list.GetResourceVersion()})
		if err != nil {
			t.Fatalf("watch: %v", err)
		}
		defer w.Stop()

		if _, err := client.Create(t.Context(), newCronTab("w1", "w"), metav1.CreateOptions{}); err != nil {
			t.Fatalf("create: %v", err)
		}
		if _, err := client.Patch(t.Context(), "w1", types.MergePatchType, []byte(`{"spec":{"replicas":4}}`), metav1.PatchOptions{}); err != nil {
			t.Fatalf("patch: %v", err)
		}
		if err := client.Delete(t.Context(), "w1", metav1.DeleteOptions{}); err != nil {
			t.Fatalf("delete: %v", err)
		}

		last, _ := strconv.ParseUint(list.GetResourceVersion(), 10, 64)
		for _, want := range []watch.EventType{watch.Added, watch.Modified, watch.Deleted} {
			var ev watch.Event
			select {
			case ev = <-w.ResultChan():
			case <-time.After(eventTimeout):
				t.Fatalf("no %s event within %v", want, eventTimeout)
			}
			obj, ok := ev.Object.(*unstructured.Unstructured)
			if !ok {
				t.Fatalf("event %s carries a %T: %v", ev.Type, ev.Object, ev.Object)
			}
			if ev.Type != want || obj.GetName() != "w1" {
				t.Fatalf("got event %s %s, want %s w1", ev.Type, obj.GetName(), want)
			}
			// crdserver's resourceVersions are etcd revisions; Kubernetes
			// clients must not compare them, but this test may.
			rv, err := strconv.ParseUint(obj.GetResourceVersion(), 10, 64)
			if err != nil || rv <= last {
				t.Errorf("%s event has resourceVersion %q, want a number above %d", ev.Type, obj.GetResourceVersion(), last)
			}
			last = rv
			if want == watch.Modified {
				if r, _, _ := unstructured.NestedInt64(obj.Object, "spec", "replicas"); r != 4 {
					t.Errorf("MODIFIED event has spec.replicas %d, want 4", r)
				}
			}
		}
	})
}

// newCRDClient is the generated apiextensions clientset's CRD client.
func newCRDClient(t *testing.T, cfg *rest.Config) apiextensionsv1client.CustomResourceDefinitionInterface {
	t.Helper()
	cs, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs.ApiextensionsV1().CustomResourceDefinitions()
}

// readCRD reads the CronTab CRD fixture.
func readCRD(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	crds, err := crdtest.ReadCRDs([]string{crdFile}, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(crds) != 1 {
		t.Fatalf("%s has %d CRDs, want 1", crdFile, len(crds))
	}
	return crds[0]
}

// waitEstablished waits until the CronTab CRD is Established on the server
// of cfg, and returns the CRD.
func waitEstablished(t *testing.T, cfg *rest.Config) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), eventTimeout)
	defer cancel()
	crds, err := crdtest.WaitEstablished(ctx, cfg, crdName)
	if err != nil {
		t.Fatal(err)
	}
	return crds[0]
}

// newCronTab is a CronTab named name, labelled app=app.
func newCronTab(name, app string) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "stable.example.com/v1",
		"kind":       "CronTab",
		"metadata":   map[string]any{"name": name, "labels": map[string]any{"app": app}},
		"spec":       map[string]any{"cronSpec": "* * * * */5", "image": "image-" + app},
	}}
	return obj
}

func names(items []unstructured.Unstructured) []string {
	var n []string
	for _, it := range items {
		n = append(n, it.GetName())
	}
	return n
}

// contentTypes records the Content-Type of the requests a client sends,
// by HTTP method.
type contentTypes struct {
	mu       sync.Mutex
	byMethod map[string][]string
}

func (c *contentTypes) get(method string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.byMethod[method])
}

func recordContentTypes(cfg *rest.Config) (*rest.Config, *contentTypes) {
	rec := &contentTypes{byMethod: map[string][]string{}}
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			if ct := req.Header.Get("Content-Type"); ct != "" {
				rec.mu.Lock()
				rec.byMethod[req.Method] = append(rec.byMethod[req.Method], ct)
				rec.mu.Unlock()
			}
			return rt.RoundTrip(req)
		})
	})
	return cfg, rec
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
