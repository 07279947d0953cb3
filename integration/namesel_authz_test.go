package integration

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// TestNameSelectorAuthorization checks that a list or watch whose field
// selector requires one metadata.name is authorized as a request for that
// object, as Kubernetes does: a Role limited by resourceNames allows a
// client-go informer scoped to the object, for built-in and custom
// resources.
func TestNameSelectorAuthorization(t *testing.T) {
	e := start(t)
	e.createCRD(cronTabCRD(t))
	ctx := e.ctx
	if _, err := e.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cms := e.kube.CoreV1().ConfigMaps("team")
	for _, name := range []string{"cm1", "cm2"} {
		if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"v": "1"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cts := e.dyn.Resource(crontabs).Namespace("team")
	for _, name := range []string{"ct1", "ct2"} {
		obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "stable.example.com/v1", "kind": "CronTab",
			"metadata": map[string]any{"name": name}, "spec": map[string]any{"cronSpec": "* * * * */5"}}}
		if _, err := cts.Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.kube.CoreV1().ServiceAccounts("team").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "one"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.kube.RbacV1().Roles("team").Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "one"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"cm1"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"stable.example.com"}, Resources: []string{"crontabs"}, ResourceNames: []string{"ct1"}, Verbs: []string{"get", "list", "watch"}},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.kube.RbacV1().RoleBindings("team").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "one"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "one"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "team", Name: "one"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg := e.asServiceAccount("team", "one")
	kube := kubernetes.NewForConfigOrDie(cfg)
	dyn := dynamic.NewForConfigOrDie(cfg)
	one := kube.CoreV1().ConfigMaps("team")

	byName := func(name string) metav1.ListOptions {
		return metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()}
	}
	var list *corev1.ConfigMapList
	waitAllowed(t, func() (err error) { list, err = one.List(ctx, byName("cm1")); return err })
	if len(list.Items) != 1 || list.Items[0].Name != "cm1" {
		t.Fatalf("list of cm1: %+v", list.Items)
	}
	forbidden := func(what string, err error, msg string) {
		t.Helper()
		if !apierrors.IsForbidden(err) || err.Error() != msg {
			t.Fatalf("%s: %v, want %q", what, err, msg)
		}
	}
	const user = `User "system:serviceaccount:team:one"`
	// Another name, no name, and a selector that names no one object are
	// refused; the refusal of a named one names it.
	_, err := one.List(ctx, byName("cm2"))
	forbidden("list of cm2", err, `configmaps "cm2" is forbidden: `+user+` cannot list resource "configmaps" in API group "" in the namespace "team"`)
	_, err = one.List(ctx, metav1.ListOptions{})
	forbidden("list of all", err, `configmaps is forbidden: `+user+` cannot list resource "configmaps" in API group "" in the namespace "team"`)
	_, err = one.List(ctx, metav1.ListOptions{FieldSelector: "metadata.name!=cm2"})
	forbidden("list of all but cm2", err, `configmaps is forbidden: `+user+` cannot list resource "configmaps" in API group "" in the namespace "team"`)
	_, err = kube.CoreV1().ConfigMaps("").List(ctx, byName("cm1"))
	forbidden("list of cm1 in every namespace", err, `configmaps "cm1" is forbidden: `+user+` cannot list resource "configmaps" in API group "" at the cluster scope`)
	// More terms, and "==", still require the one name.
	for _, sel := range []string{"metadata.name==cm1", "metadata.namespace=team,metadata.name=cm1", "metadata.name=cm1,metadata.name=cm2"} {
		if _, err := one.List(ctx, metav1.ListOptions{FieldSelector: sel}); err != nil {
			t.Errorf("list with %q: %v", sel, err)
		}
	}
	// The deprecated watch path names no object by its selector.
	r := kube.CoreV1().RESTClient().Get().AbsPath("/api/v1/watch/namespaces/team/configmaps").Param("fieldSelector", "metadata.name=cm1").Do(ctx).Error()
	forbidden("watch path", r, `configmaps is forbidden: `+user+` cannot watch resource "configmaps" in API group "" in the namespace "team"`)

	// A client-go informer scoped to cm1 lists, watches, and sees cm1
	// change.
	informerSees(t, cache.NewListWatchFromClient(kube.CoreV1().RESTClient(), "configmaps", "team", fields.OneTermEqualSelector("metadata.name", "cm1")),
		&corev1.ConfigMap{}, func() {
			cm, err := e.kube.CoreV1().ConfigMaps("team").Get(ctx, "cm1", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			cm.Data["v"] = "2"
			if _, err := e.kube.CoreV1().ConfigMaps("team").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}, func(obj any) bool {
			cm, ok := obj.(*corev1.ConfigMap)
			return ok && cm.Name == "cm1" && cm.Data["v"] == "2"
		})

	// Custom resources too.
	ct := dyn.Resource(crontabs).Namespace("team")
	if l, err := ct.List(ctx, byName("ct1")); err != nil || len(l.Items) != 1 || l.Items[0].GetName() != "ct1" {
		t.Fatalf("list of ct1: %v %v", err, l)
	}
	_, err = ct.List(ctx, byName("ct2"))
	forbidden("list of ct2", err, `crontabs.stable.example.com "ct2" is forbidden: `+user+` cannot list resource "crontabs" in API group "stable.example.com" in the namespace "team"`)
	_, err = ct.Watch(ctx, metav1.ListOptions{})
	forbidden("watch of all", err, `crontabs.stable.example.com is forbidden: `+user+` cannot watch resource "crontabs" in API group "stable.example.com" in the namespace "team"`)
	informerSees(t, &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", "ct1").String()
			return ct.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", "ct1").String()
			return ct.Watch(ctx, o)
		},
	}, &unstructured.Unstructured{}, func() {
		obj, err := e.dyn.Resource(crontabs).Namespace("team").Get(ctx, "ct1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := unstructured.SetNestedField(obj.Object, "changed", "spec", "image"); err != nil {
			t.Fatal(err)
		}
		if _, err := e.dyn.Resource(crontabs).Namespace("team").Update(ctx, obj, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}, func(obj any) bool {
		u, ok := obj.(*unstructured.Unstructured)
		image, _, _ := unstructured.NestedString(u.Object, "spec", "image")
		return ok && u.GetName() == "ct1" && image == "changed"
	})
}

// informerSees runs an informer on lw until it has synced (its list and
// watch allowed) and seen the object change made by change.
func informerSees(t *testing.T, lw cache.ListerWatcher, obj runtime.Object, change func(), seen func(any) bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	inf := cache.NewSharedIndexInformer(lw, obj, 0, cache.Indexers{})
	updated := make(chan struct{})
	var once bool
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{UpdateFunc: func(_, newObj any) {
		if seen(newObj) && !once {
			once = true
			close(updated)
		}
	}}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var watchErr error
	lastErr := func() error { mu.Lock(); defer mu.Unlock(); return watchErr }
	if err := inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
		mu.Lock()
		defer mu.Unlock()
		watchErr = err
	}); err != nil {
		t.Fatal(err)
	}
	go inf.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatalf("informer never synced: %v", lastErr())
	}
	if keys := inf.GetStore().ListKeys(); len(keys) != 1 {
		t.Fatalf("informer holds %v", keys)
	}
	change()
	select {
	case <-updated:
	case <-ctx.Done():
		t.Fatalf("informer never saw the change: %v", lastErr())
	}
}
