package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	clientfeatures "k8s.io/client-go/features"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// This file drives crdserver with sigs.k8s.io/controller-runtime, the
// library most operators are written with: its client (typed and
// unstructured, server-side apply) and a real manager whose informers list
// and watch CronTabs and whose reconciler writes them back.

var (
	crtGroupVersion = schema.GroupVersion{Group: "stable.example.com", Version: "v1"}
	crtCronTabGVK   = crtGroupVersion.WithKind("CronTab")
	crtListGVK      = crtGroupVersion.WithKind("CronTabList")
)

// crtCronTab is a hand-written Go type for the CronTab CRD
// (examples/crontab-crd.yaml), as an operator would generate it.
type crtCronTab struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              crtCronTabSpec `json:"spec,omitempty"`
}

type crtCronTabSpec struct {
	CronSpec string `json:"cronSpec,omitempty"`
	Image    string `json:"image,omitempty"`
	Replicas *int64 `json:"replicas,omitempty"`
}

func (c *crtCronTab) DeepCopy() *crtCronTab {
	out := *c
	c.DeepCopyInto(&out.ObjectMeta)
	if c.Spec.Replicas != nil {
		out.Spec.Replicas = ptr.To(*c.Spec.Replicas)
	}
	return &out
}

func (c *crtCronTab) DeepCopyObject() runtime.Object { return c.DeepCopy() }

type crtCronTabList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []crtCronTab `json:"items"`
}

func (l *crtCronTabList) DeepCopyObject() runtime.Object {
	out := *l
	l.DeepCopyInto(&out.ListMeta)
	if l.Items != nil {
		out.Items = make([]crtCronTab, len(l.Items))
		for i := range l.Items {
			out.Items[i] = *l.Items[i].DeepCopy()
		}
	}
	return &out
}

// crtScheme knows the built-in types (namespaces), CRDs and the CronTab
// types.
func crtScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	s.AddKnownTypeWithName(crtCronTabGVK, &crtCronTab{})
	s.AddKnownTypeWithName(crtListGVK, &crtCronTabList{})
	metav1.AddToGroupVersion(s, crtGroupVersion)
	return s
}

// controller-runtime logs through a process-wide logger; it goes to a
// buffer that a failing test prints.
var (
	crtLogOnce sync.Once
	crtLog     syncBuffer
)

func crtSetLogger(t *testing.T) {
	crtLogOnce.Do(func() {
		ctrllog.SetLogger(funcr.New(func(prefix, args string) {
			fmt.Fprintf(&crtLog, "%s %s\n", prefix, args)
		}, funcr.Options{}))
	})
	start := len(crtLog.String()) // what earlier runs (-count) logged
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("controller-runtime's log:\n%s", crtLog.String()[start:])
		}
	})
}

// client-go's informers fill their cache with a streaming list (a watch
// with sendInitialEvents) when its WatchListClient feature is on, as it is
// by default, and with a list and then a watch from the list's
// resourceVersion when it is off. The manager runs both ways; crtGates
// turns the feature off while noWatchList is set. It is installed before
// anything reads client-go's feature gates, and otherwise answers as they do.
type crtFeatureGates struct {
	base        clientfeatures.Gates
	noWatchList atomic.Bool
}

func (g *crtFeatureGates) Enabled(f clientfeatures.Feature) bool {
	if f == clientfeatures.WatchListClient && g.noWatchList.Load() {
		return false
	}
	return g.base.Enabled(f)
}

var crtGates = &crtFeatureGates{base: clientfeatures.FeatureGates()}

func init() { clientfeatures.ReplaceFeatureGates(crtGates) }

// TestControllerRuntime uses crdserver the way controller-runtime based
// operators do.
func TestControllerRuntime(t *testing.T) {
	crtSetLogger(t)
	srv := startServer(t)
	cfg := srv.restConfig(t)
	// No client-side rate limit, as controller-runtime's GetConfig sets it.
	cfg.QPS = -1
	scheme := crtScheme(t)
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatalf("controller-runtime client: %v", err)
	}
	ctx := t.Context()

	// The CRD, typed, through controller-runtime's client.
	if err := c.Create(ctx, readCRD(t)); err != nil {
		t.Fatalf("create the CRD: %v", err)
	}
	waitEstablished(t, cfg)

	const nsA, nsB, nsStream, nsList = "crt-a", "crt-b", "crt-mgr-stream", "crt-mgr-list"
	for _, ns := range []string{nsA, nsB, nsStream, nsList} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatalf("create namespace %s: %v", ns, err)
		}
	}

	t.Run("client", func(t *testing.T) { crtClientVerbs(t, c, nsA, nsB) })
	t.Run("server-side apply", func(t *testing.T) { crtServerSideApply(t, c, nsA) })
	t.Run("manager with streaming lists", func(t *testing.T) { crtManager(t, cfg, scheme, c, nsStream, true) })
	t.Run("manager with list then watch", func(t *testing.T) { crtManager(t, cfg, scheme, c, nsList, false) })
}

// crtClientVerbs does Create, Get, List, Update, Patch, Delete and
// DeleteAllOf with unstructured and typed CronTabs.
func crtClientVerbs(t *testing.T, c client.Client, nsA, nsB string) {
	ctx := t.Context()

	// Create.
	a1 := crtUnstructured(nsA, "a1", "a")
	if err := c.Create(ctx, a1); err != nil {
		t.Fatalf("create a1: %v", err)
	}
	if ts := a1.GetCreationTimestamp(); a1.GetUID() == "" || a1.GetResourceVersion() == "" || ts.IsZero() || a1.GetGeneration() != 1 {
		t.Errorf("Create did not fill in uid, resourceVersion, creationTimestamp and generation 1: %v", a1.Object["metadata"])
	}
	if err := c.Create(ctx, crtUnstructured(nsA, "a1", "a")); !apierrors.IsAlreadyExists(err) {
		t.Errorf("create a1 again: got %v, want AlreadyExists", err)
	}
	for _, o := range []*unstructured.Unstructured{crtUnstructured(nsA, "b1", "b"), crtUnstructured(nsB, "a2", "a")} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatalf("create %s/%s: %v", o.GetNamespace(), o.GetName(), err)
		}
	}
	typed := &crtCronTab{
		ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: "t1", Labels: map[string]string{"app": "typed"}},
		Spec:       crtCronTabSpec{CronSpec: "0 * * * *", Image: "image-typed", Replicas: ptr.To[int64](1)},
	}
	if err := c.Create(ctx, typed); err != nil {
		t.Fatalf("create the typed t1: %v", err)
	}
	if typed.UID == "" || typed.ResourceVersion == "" || typed.Generation != 1 {
		t.Errorf("typed Create did not fill in uid, resourceVersion and generation 1: %+v", typed.ObjectMeta)
	}

	// Get.
	got := crtEmpty()
	if err := c.Get(ctx, client.ObjectKey{Namespace: nsA, Name: "a1"}, got); err != nil {
		t.Fatalf("get a1: %v", err)
	}
	if got.GetKind() != "CronTab" || nestedString(got, "spec", "image") != "image-a" || got.GetUID() != a1.GetUID() {
		t.Errorf("get a1 returned %v", got.Object)
	}
	var gotTyped crtCronTab
	if err := c.Get(ctx, client.ObjectKey{Namespace: nsA, Name: "t1"}, &gotTyped); err != nil {
		t.Fatalf("get the typed t1: %v", err)
	}
	if gotTyped.Spec.Image != "image-typed" || gotTyped.Spec.CronSpec != "0 * * * *" || gotTyped.Spec.Replicas == nil || *gotTyped.Spec.Replicas != 1 {
		t.Errorf("typed get of t1: spec %+v", gotTyped.Spec)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: nsA, Name: "nothing"}, crtEmpty()); !apierrors.IsNotFound(err) {
		t.Errorf("get a missing object: got %v, want NotFound", err)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: nsB, Name: "a1"}, crtEmpty()); !apierrors.IsNotFound(err) {
		t.Errorf("get a1 in the wrong namespace: got %v, want NotFound", err)
	}

	// List with namespaces and label selectors.
	inAB, err := labels.Parse("app in (a,b)")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		what string
		opts []client.ListOption
		want []string
	}{
		{"namespace " + nsA, []client.ListOption{client.InNamespace(nsA)}, []string{nsA + "/a1", nsA + "/b1", nsA + "/t1"}},
		{"namespace " + nsA + ", app=a", []client.ListOption{client.InNamespace(nsA), client.MatchingLabels{"app": "a"}}, []string{nsA + "/a1"}},
		{"all namespaces, app=a", []client.ListOption{client.MatchingLabels{"app": "a"}}, []string{nsA + "/a1", nsB + "/a2"}},
		{"namespace " + nsB + ", app=b", []client.ListOption{client.InNamespace(nsB), client.MatchingLabels{"app": "b"}}, nil},
		{"namespace " + nsA + ", app in (a,b)", []client.ListOption{client.InNamespace(nsA), client.MatchingLabelsSelector{Selector: inAB}}, []string{nsA + "/a1", nsA + "/b1"}},
		{"all namespaces, has label app", []client.ListOption{client.HasLabels{"app"}}, []string{nsA + "/a1", nsA + "/b1", nsA + "/t1", nsB + "/a2"}},
	} {
		if got := crtList(t, c, tc.opts...); !slices.Equal(got, tc.want) {
			t.Errorf("list in %s: got %q, want %q", tc.what, got, tc.want)
		}
	}
	var typedList crtCronTabList
	if err := c.List(ctx, &typedList, client.InNamespace(nsA), client.MatchingLabels{"app": "typed"}); err != nil {
		t.Fatalf("typed list: %v", err)
	}
	if len(typedList.Items) != 1 || typedList.Items[0].Name != "t1" || typedList.Items[0].Spec.Image != "image-typed" || typedList.ResourceVersion == "" {
		t.Errorf("typed list with app=typed: %+v", typedList)
	}
	// Pages of two.
	page1 := crtEmptyList()
	if err := c.List(ctx, page1, client.InNamespace(nsA), client.Limit(2)); err != nil {
		t.Fatalf("list the first page: %v", err)
	}
	if len(page1.Items) != 2 || page1.GetContinue() == "" {
		t.Fatalf("first page of 2: %q, continue %q", names(page1.Items), page1.GetContinue())
	}
	page2 := crtEmptyList()
	if err := c.List(ctx, page2, client.InNamespace(nsA), client.Limit(2), client.Continue(page1.GetContinue())); err != nil {
		t.Fatalf("list the second page: %v", err)
	}
	if all := append(names(page1.Items), names(page2.Items)...); !slices.Equal(all, []string{"a1", "b1", "t1"}) || page2.GetContinue() != "" {
		t.Errorf("two pages: %q, last continue %q; want [a1 b1 t1] and no continue", all, page2.GetContinue())
	}

	// Update, then the same update from the stale copy.
	old := crtEmpty()
	if err := c.Get(ctx, client.ObjectKey{Namespace: nsA, Name: "a1"}, old); err != nil {
		t.Fatalf("get a1: %v", err)
	}
	updated := old.DeepCopy()
	if err := unstructured.SetNestedField(updated.Object, int64(3), "spec", "replicas"); err != nil {
		t.Fatal(err)
	}
	if err := c.Update(ctx, updated); err != nil {
		t.Fatalf("update a1: %v", err)
	}
	if updated.GetResourceVersion() == old.GetResourceVersion() || updated.GetGeneration() != 2 {
		t.Errorf("after the update: resourceVersion %s (was %s), generation %d; want a new resourceVersion and generation 2",
			updated.GetResourceVersion(), old.GetResourceVersion(), updated.GetGeneration())
	}
	stale := old.DeepCopy()
	if err := unstructured.SetNestedField(stale.Object, int64(9), "spec", "replicas"); err != nil {
		t.Fatal(err)
	}
	if err := c.Update(ctx, stale); !apierrors.IsConflict(err) {
		t.Errorf("update from a stale copy: got %v, want Conflict", err)
	}
	gotTyped.Spec.Replicas = ptr.To[int64](5)
	if err := c.Update(ctx, &gotTyped); err != nil {
		t.Fatalf("typed update of t1: %v", err)
	}
	if *gotTyped.Spec.Replicas != 5 || gotTyped.Generation != 2 {
		t.Errorf("typed update of t1: replicas %d, generation %d; want 5, 2", *gotTyped.Spec.Replicas, gotTyped.Generation)
	}

	// Merge patches: computed from a base object, raw, and with the
	// optimistic lock (the base's resourceVersion in the patch).
	base := updated.DeepCopy()
	patched := updated.DeepCopy()
	if err := unstructured.SetNestedField(patched.Object, "patched", "spec", "image"); err != nil {
		t.Fatal(err)
	}
	patched.SetLabels(map[string]string{"app": "a", "tier": "x"})
	if err := c.Patch(ctx, patched, client.MergeFrom(base)); err != nil {
		t.Fatalf("merge patch a1: %v", err)
	}
	if r, _, _ := unstructured.NestedInt64(patched.Object, "spec", "replicas"); nestedString(patched, "spec", "image") != "patched" ||
		nestedString(patched, "spec", "cronSpec") != "* * * * */5" || r != 3 || patched.GetLabels()["tier"] != "x" {
		t.Errorf("after the merge patch: labels %v, spec %v", patched.GetLabels(), patched.Object["spec"])
	}
	b1 := crtUnstructured(nsA, "b1", "")
	if err := c.Patch(ctx, b1, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"crt":"raw"}}}`))); err != nil {
		t.Fatalf("raw merge patch b1: %v", err)
	}
	if b1.GetAnnotations()["crt"] != "raw" || nestedString(b1, "spec", "image") != "image-b" {
		t.Errorf("after the raw merge patch: annotations %v, spec %v", b1.GetAnnotations(), b1.Object["spec"])
	}
	locked := base.DeepCopy() // base's resourceVersion is no longer current
	if err := unstructured.SetNestedField(locked.Object, "locked", "spec", "image"); err != nil {
		t.Fatal(err)
	}
	if err := c.Patch(ctx, locked, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); !apierrors.IsConflict(err) {
		t.Errorf("merge patch with a stale resourceVersion (optimistic lock): got %v, want Conflict", err)
	}
	if err := c.Patch(ctx, crtUnstructured(nsA, "nothing", ""), client.RawPatch(types.MergePatchType, []byte(`{"spec":{}}`))); !apierrors.IsNotFound(err) {
		t.Errorf("patch a missing object: got %v, want NotFound", err)
	}
	check := crtEmpty()
	if err := c.Get(ctx, client.ObjectKey{Namespace: nsA, Name: "a1"}, check); err != nil || nestedString(check, "spec", "image") != "patched" {
		t.Errorf("a1 after the rejected patch: %v, spec %v; want spec.image still patched", err, check.Object["spec"])
	}

	// Delete, and DeleteAllOf (a deletecollection) with a label selector.
	if err := c.Delete(ctx, crtUnstructured(nsA, "b1", "")); err != nil {
		t.Fatalf("delete b1: %v", err)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: nsA, Name: "b1"}, crtEmpty()); !apierrors.IsNotFound(err) {
		t.Errorf("get b1 after delete: got %v, want NotFound", err)
	}
	if err := c.Delete(ctx, crtUnstructured(nsA, "b1", "")); !apierrors.IsNotFound(err) {
		t.Errorf("delete b1 again: got %v, want NotFound", err)
	}
	if err := c.DeleteAllOf(ctx, &crtCronTab{}, client.InNamespace(nsA), client.MatchingLabels{"app": "typed"}); err != nil {
		t.Fatalf("delete all of app=typed in %s: %v", nsA, err)
	}
	if got, want := crtList(t, c), []string{nsA + "/a1", nsB + "/a2"}; !slices.Equal(got, want) {
		t.Errorf("CronTabs after the deletes: got %q, want %q", got, want)
	}
}

// crtServerSideApply applies a CronTab as two field managers: ownership in
// managedFields, a conflict without force, taking over with force, and
// removal of fields a manager stops applying.
func crtServerSideApply(t *testing.T, c client.Client, ns string) {
	ctx := t.Context()
	key := client.ObjectKey{Namespace: ns, Name: "ssa"}
	applied := func(spec map[string]any, labels map[string]any) *unstructured.Unstructured {
		meta := map[string]any{"name": key.Name, "namespace": key.Namespace}
		if labels != nil {
			meta["labels"] = labels
		}
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": crtGroupVersion.String(), "kind": "CronTab", "metadata": meta, "spec": spec,
		}}
	}

	// The first apply creates the object.
	first := applied(map[string]any{"cronSpec": "*/1 * * * *", "image": "image-1"}, map[string]any{"app": "ssa"})
	if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(first), client.FieldOwner("crt-test"), client.ForceOwnership); err != nil {
		t.Fatalf("apply as crt-test: %v", err)
	}
	if first.GetUID() == "" || first.GetGeneration() != 1 || nestedString(first, "spec", "image") != "image-1" {
		t.Errorf("the apply that created the object returned %v", first.Object)
	}
	live := crtEmpty()
	if err := c.Get(ctx, key, live); err != nil {
		t.Fatalf("get: %v", err)
	}
	mf := live.GetManagedFields()
	if len(mf) != 1 {
		t.Fatalf("managedFields after one apply: want one entry, got %s", crtManagedFields(mf))
	}
	e := mf[0]
	if e.Manager != "crt-test" || e.Operation != metav1.ManagedFieldsOperationApply || e.APIVersion != crtGroupVersion.String() ||
		e.FieldsType != "FieldsV1" || e.Time == nil || e.Subresource != "" {
		t.Errorf("managedFields entry: got %s, want manager crt-test, operation Apply, apiVersion %s, fieldsType FieldsV1, a time",
			crtManagedFields(mf), crtGroupVersion)
	}
	crtOwns(t, mf, "crt-test", metav1.ManagedFieldsOperationApply, []string{"f:spec.f:cronSpec", "f:spec.f:image", "f:metadata.f:labels.f:app"}, nil)

	// Another manager that sets spec.image without force conflicts with
	// crt-test, and nothing changes.
	err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(applied(map[string]any{"image": "image-2"}, nil)), client.FieldOwner("crt-other"))
	if !apierrors.IsConflict(err) {
		t.Fatalf("conflicting apply without force: got %v, want Conflict", err)
	}
	if want := `Apply failed with 1 conflict: conflict with "crt-test": .spec.image`; err.Error() != want {
		t.Errorf("conflict message: got %q, want %q", err.Error(), want)
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		want := []metav1.StatusCause{{Type: metav1.CauseTypeFieldManagerConflict, Message: `conflict with "crt-test"`, Field: ".spec.image"}}
		if d := status.Status().Details; d == nil || !slices.Equal(d.Causes, want) {
			t.Errorf("conflict details: got %+v, want causes %+v", d, want)
		}
	}
	after := crtEmpty()
	if err := c.Get(ctx, key, after); err != nil {
		t.Fatalf("get: %v", err)
	}
	if after.GetResourceVersion() != live.GetResourceVersion() || nestedString(after, "spec", "image") != "image-1" {
		t.Errorf("the rejected apply changed the object: resourceVersion %s → %s, spec %v", live.GetResourceVersion(), after.GetResourceVersion(), after.Object["spec"])
	}

	// With force, crt-other takes spec.image over.
	forced := applied(map[string]any{"image": "image-2"}, nil)
	if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(forced), client.FieldOwner("crt-other"), client.ForceOwnership); err != nil {
		t.Fatalf("forced apply as crt-other: %v", err)
	}
	if nestedString(forced, "spec", "image") != "image-2" || nestedString(forced, "spec", "cronSpec") != "*/1 * * * *" || forced.GetLabels()["app"] != "ssa" {
		t.Errorf("after the forced apply: labels %v, spec %v", forced.GetLabels(), forced.Object["spec"])
	}
	crtOwns(t, forced.GetManagedFields(), "crt-other", metav1.ManagedFieldsOperationApply, []string{"f:spec.f:image"}, []string{"f:spec.f:cronSpec"})
	crtOwns(t, forced.GetManagedFields(), "crt-test", metav1.ManagedFieldsOperationApply, []string{"f:spec.f:cronSpec", "f:metadata.f:labels.f:app"}, []string{"f:spec.f:image"})

	// crt-test applies again without the label it alone owned: the label
	// goes; spec.image stays crt-other's.
	again := applied(map[string]any{"cronSpec": "*/2 * * * *"}, nil)
	if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(again), client.FieldOwner("crt-test"), client.ForceOwnership); err != nil {
		t.Fatalf("apply as crt-test again: %v", err)
	}
	if _, ok := again.GetLabels()["app"]; ok || nestedString(again, "spec", "image") != "image-2" || nestedString(again, "spec", "cronSpec") != "*/2 * * * *" {
		t.Errorf("after crt-test dropped the label: labels %v, spec %v; want no app label, image-2, */2 * * * *", again.GetLabels(), again.Object["spec"])
	}

	// An ordinary update is tracked as an Update by its field owner.
	again.Object["spec"].(map[string]any)["replicas"] = int64(4)
	if err := c.Update(ctx, again, client.FieldOwner("crt-updater")); err != nil {
		t.Fatalf("update as crt-updater: %v", err)
	}
	crtOwns(t, again.GetManagedFields(), "crt-updater", metav1.ManagedFieldsOperationUpdate, []string{"f:spec.f:replicas"}, nil)
}

// crtReconciler annotates every CronTab with its spec.image and labels it
// reconciled, and remembers the CronTabs it found gone.
type crtReconciler struct {
	client client.Client // the manager's, reading from its cache

	mu   sync.Mutex
	gone map[types.NamespacedName]bool
}

const (
	crtObservedImage = "crt.example.com/observed-image"
	crtReconciled    = "crt.example.com/reconciled"
)

func (r *crtReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var ct crtCronTab
	if err := r.client.Get(ctx, req.NamespacedName, &ct); err != nil {
		if apierrors.IsNotFound(err) {
			r.mu.Lock()
			r.gone[req.NamespacedName] = true
			r.mu.Unlock()
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, err
	}
	if ct.Annotations[crtObservedImage] == ct.Spec.Image && ct.Labels[crtReconciled] == "true" {
		return reconcile.Result{}, nil
	}
	base := ct.DeepCopy()
	if ct.Annotations == nil {
		ct.Annotations = map[string]string{}
	}
	ct.Annotations[crtObservedImage] = ct.Spec.Image
	if ct.Labels == nil {
		ct.Labels = map[string]string{}
	}
	ct.Labels[crtReconciled] = "true"
	return reconcile.Result{}, r.client.Patch(ctx, &ct, client.MergeFrom(base))
}

func (r *crtReconciler) isGone(key types.NamespacedName) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.gone[key]
}

// crtManager runs a controller-runtime manager whose controller reconciles
// CronTabs, and checks that its informers see objects that existed before
// it started (list), that are created, changed and deleted after (watch),
// and that its cache serves them. Its informers use streaming lists or a
// list and then a watch.
func crtManager(t *testing.T, cfg *rest.Config, scheme *runtime.Scheme, c client.Client, ns string, streaming bool) {
	crtGates.noWatchList.Store(!streaming)
	defer crtGates.noWatchList.Store(false)

	// The manager's requests, to see that it watches.
	cfg = rest.CopyConfig(cfg)
	var reqMu sync.Mutex
	var requests []string
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			reqMu.Lock()
			requests = append(requests, req.Method+" "+req.URL.RequestURI())
			reqMu.Unlock()
			return rt.RoundTrip(req)
		})
	})

	pre := &crtCronTab{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pre"},
		Spec:       crtCronTabSpec{CronSpec: "* * * * *", Image: "image-pre"},
	}
	if err := c.Create(t.Context(), pre); err != nil {
		t.Fatalf("create pre: %v", err)
	}

	mgr, err := manager.New(cfg, manager.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		LeaderElection:         false,
		// -count=N runs this test again in the same process.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatalf("new manager: %v", err)
	}
	rec := &crtReconciler{client: mgr.GetClient(), gone: map[types.NamespacedName]bool{}}
	if err := builder.ControllerManagedBy(mgr).For(&crtCronTab{}).Named("crt-crontab").Complete(rec); err != nil {
		t.Fatalf("build the controller: %v", err)
	}

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	stopped := make(chan error, 1)
	go func() { stopped <- mgr.Start(ctx) }()
	stop := func() {
		cancel()
		select {
		case err := <-stopped:
			if err != nil {
				t.Errorf("the manager stopped with an error: %v", err)
			}
		case <-time.After(stopTimeout):
			t.Errorf("the manager did not stop within %v of its context's cancel", stopTimeout)
		}
	}
	defer func() {
		if ctx.Err() == nil {
			stop()
		}
	}()

	syncCtx, syncCancel := context.WithTimeout(ctx, eventTimeout)
	defer syncCancel()
	if !mgr.GetCache().WaitForCacheSync(syncCtx) {
		t.Fatalf("the manager's cache did not sync within %v", eventTimeout)
	}

	post := &crtCronTab{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "post"},
		Spec:       crtCronTabSpec{CronSpec: "* * * * *", Image: "image-post"},
	}
	if err := c.Create(t.Context(), post); err != nil {
		t.Fatalf("create post: %v", err)
	}

	// The reconciler's writes, read from the server (not from the cache).
	waitAnnotated := func(namespace, name, image string) {
		t.Helper()
		var last crtCronTab
		crtEventually(t, fmt.Sprintf("the reconciler annotates %s/%s with %s", namespace, name, image), func(ctx context.Context) (bool, error) {
			if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &last); err != nil {
				return false, err
			}
			return last.Annotations[crtObservedImage] == image && last.Labels[crtReconciled] == "true", nil
		}, func() string { return fmt.Sprintf("last seen: %+v", last.ObjectMeta) })
	}
	waitAnnotated(ns, "pre", "image-pre")   // from the informer's initial list
	waitAnnotated(ns, "post", "image-post") // from its watch
	// a1 of the client subtest, in another namespace, if that subtest got
	// so far: the informer lists and watches all namespaces.
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: "crt-a", Name: "a1"}, &crtCronTab{}); err == nil {
		waitAnnotated("crt-a", "a1", "patched")
	}

	// A change seen through the watch.
	if err := c.Patch(t.Context(), post, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"image":"image-post-2"}}`))); err != nil {
		t.Fatalf("patch post: %v", err)
	}
	waitAnnotated(ns, "post", "image-post-2")

	// The cache catches up with the reconciler's own write, and answers
	// lists with label selectors.
	cached := mgr.GetClient()
	var fromCache crtCronTab
	crtEventually(t, "the manager's cache has post's annotation image-post-2", func(ctx context.Context) (bool, error) {
		if err := cached.Get(ctx, client.ObjectKey{Namespace: ns, Name: "post"}, &fromCache); err != nil {
			return false, err
		}
		return fromCache.Annotations[crtObservedImage] == "image-post-2", nil
	}, func() string { return fmt.Sprintf("last seen: %+v", fromCache.ObjectMeta) })
	var cachedList crtCronTabList
	if err := cached.List(t.Context(), &cachedList, client.InNamespace(ns), client.MatchingLabels{crtReconciled: "true"}); err != nil {
		t.Fatalf("list from the cache: %v", err)
	}
	var cachedNames []string
	for _, it := range cachedList.Items {
		cachedNames = append(cachedNames, it.Name)
	}
	slices.Sort(cachedNames)
	if !slices.Equal(cachedNames, []string{"post", "pre"}) {
		t.Errorf("cached list in %s with %s=true: got %q, want [post pre]", ns, crtReconciled, cachedNames)
	}

	// A deletion seen through the watch: the reconciler finds pre gone.
	if err := c.Delete(t.Context(), pre); err != nil {
		t.Fatalf("delete pre: %v", err)
	}
	crtEventually(t, "the reconciler finds pre deleted", func(context.Context) (bool, error) {
		return rec.isGone(client.ObjectKey{Namespace: ns, Name: "pre"}), nil
	}, func() string { return "" })
	if rec.isGone(client.ObjectKey{Namespace: ns, Name: "post"}) {
		t.Errorf("the reconciler found post gone, but it was not deleted")
	}

	stop()

	// The informer filled its cache the way it was set to, and did not
	// keep re-listing or re-watching (a watch lasts minutes; the test
	// seconds).
	reqMu.Lock()
	defer reqMu.Unlock()
	var watches, lists, streams []string
	for _, r := range requests {
		method, uri, _ := strings.Cut(r, " ")
		u, err := url.Parse(uri)
		if err != nil || method != http.MethodGet || !strings.HasSuffix(u.Path, "/crontabs") {
			continue
		}
		q := u.Query()
		switch {
		case q.Get("watch") == "true" && q.Get("sendInitialEvents") == "true":
			streams = append(streams, uri)
		case q.Get("watch") == "true":
			watches = append(watches, uri)
		default:
			lists = append(lists, uri)
		}
	}
	t.Logf("the manager's CronTab requests: lists %q; streaming lists %q; watches %q", lists, streams, watches)
	all := strings.Join(requests, "\n")
	if streaming && (len(streams) == 0 || len(streams) > 3 || len(lists) > 0) {
		t.Errorf("with streaming lists the informer sent %d streaming lists and %d lists; want 1 to 3 streaming lists and no list; the manager's requests:\n%s", len(streams), len(lists), all)
	}
	if !streaming && (len(lists) == 0 || len(lists) > 3 || len(watches) == 0 || len(watches) > 3 || len(streams) > 0) {
		t.Errorf("with list then watch the informer sent %d lists, %d watches and %d streaming lists; want 1 to 3 lists and watches and no streaming list; the manager's requests:\n%s",
			len(lists), len(watches), len(streams), all)
	}
	for _, w := range watches {
		if u, _ := url.Parse(w); u.Query().Get("resourceVersion") == "" {
			t.Errorf("the informer watched from no resourceVersion (after a list it watches from the list's): %s", w)
		}
	}
}

// crtEventually polls cond until it is true, and fails the test with
// describe's words if it is not within eventTimeout.
func crtEventually(t *testing.T, what string, cond func(context.Context) (bool, error), describe func() string) {
	t.Helper()
	var lastErr error
	err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, eventTimeout, true, func(ctx context.Context) (bool, error) {
		ok, err := cond(ctx)
		lastErr = err
		return ok, nil
	})
	if err != nil {
		t.Fatalf("%s: not within %v (last error: %v); %s", what, eventTimeout, lastErr, describe())
	}
}

// crtUnstructured is a CronTab labelled app=app (without a label if app is
// empty).
func crtUnstructured(ns, name, app string) *unstructured.Unstructured {
	u := newCronTab(name, app)
	u.SetNamespace(ns)
	if app == "" {
		u.SetLabels(nil)
	}
	return u
}

func crtEmpty() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(crtCronTabGVK)
	return u
}

func crtEmptyList() *unstructured.UnstructuredList {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(crtListGVK)
	return l
}

// crtList lists CronTabs (unstructured) and returns their namespace/name,
// sorted.
func crtList(t *testing.T, c client.Client, opts ...client.ListOption) []string {
	t.Helper()
	l := crtEmptyList()
	if err := c.List(t.Context(), l, opts...); err != nil {
		t.Fatalf("list CronTabs with %+v: %v", opts, err)
	}
	if l.GetResourceVersion() == "" {
		t.Errorf("list with %+v has no resourceVersion", opts)
	}
	var got []string
	for _, it := range l.Items {
		got = append(got, it.GetNamespace()+"/"+it.GetName())
	}
	slices.Sort(got)
	return got
}

func crtManagedFields(mf []metav1.ManagedFieldsEntry) string {
	var b strings.Builder
	for _, e := range mf {
		fields := ""
		if e.FieldsV1 != nil {
			fields = e.FieldsV1.GetRawString()
		}
		fmt.Fprintf(&b, "\n  manager=%q operation=%s apiVersion=%s fieldsType=%s subresource=%q fields=%s", e.Manager, e.Operation, e.APIVersion, e.FieldsType, e.Subresource, fields)
	}
	return b.String()
}

// crtOwns checks that the managedFields entry of manager and operation
// owns the fields in owns and none in notOwns (paths of FieldsV1 keys,
// like "f:spec.f:image").
func crtOwns(t *testing.T, mf []metav1.ManagedFieldsEntry, manager string, op metav1.ManagedFieldsOperationType, owns, notOwns []string) {
	t.Helper()
	var entry *metav1.ManagedFieldsEntry
	for i := range mf {
		if mf[i].Manager == manager && mf[i].Operation == op {
			if entry != nil {
				t.Errorf("two managedFields entries for %s %s:%s", manager, op, crtManagedFields(mf))
			}
			entry = &mf[i]
		}
	}
	if entry == nil || entry.FieldsV1 == nil {
		t.Errorf("no managedFields entry with fields for manager %s, operation %s:%s", manager, op, crtManagedFields(mf))
		return
	}
	var set map[string]any
	if err := json.Unmarshal(entry.FieldsV1.GetRawBytes(), &set); err != nil {
		t.Errorf("managedFields of %s: fieldsV1 %s: %v", manager, entry.FieldsV1.GetRawString(), err)
		return
	}
	has := func(path string) bool {
		_, found, _ := unstructured.NestedFieldNoCopy(set, strings.Split(path, ".")...)
		return found
	}
	for _, p := range owns {
		if !has(p) {
			t.Errorf("%s (%s) should own %s:%s", manager, op, p, crtManagedFields(mf))
		}
	}
	for _, p := range notOwns {
		if has(p) {
			t.Errorf("%s (%s) should not own %s:%s", manager, op, p, crtManagedFields(mf))
		}
	}
}
