package integration

import (
	"context"
	"net/http"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/crdserver/crdserver/crdtest"
	"github.com/crdserver/crdserver/server"
)

// gcObject creates a CronTab owned by the given owners.
func gcObject(t *testing.T, ctx context.Context, dyn dynamic.Interface, name string, finalizers []string, owners ...metav1.OwnerReference) *unstructured.Unstructured {
	t.Helper()
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "stable.example.com/v1", "kind": "CronTab",
		"metadata": map[string]any{"name": name},
		"spec":     map[string]any{"cronSpec": "* * * * *"},
	}}
	obj.SetOwnerReferences(owners)
	obj.SetFinalizers(finalizers)
	out, err := dyn.Resource(crontabs).Namespace("default").Create(ctx, obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	return out
}

func ownerRef(o *unstructured.Unstructured, block bool) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: o.GetAPIVersion(), Kind: o.GetKind(), Name: o.GetName(), UID: o.GetUID(), BlockOwnerDeletion: &block}
}

// eventually polls until cond holds.
func eventually(t *testing.T, ctx context.Context, what string, cond func() (bool, error)) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 15*time.Second, true, func(context.Context) (bool, error) { return cond() })
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func gone(ctx context.Context, dyn dynamic.Interface, name string) func() (bool, error) {
	return func() (bool, error) {
		_, err := dyn.Resource(crontabs).Namespace("default").Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	}
}

func TestGarbageCollectorBackground(t *testing.T) {
	e := start(t)
	e.createCRD(cronTabCRD(t))
	crs := e.dyn.Resource(crontabs).Namespace("default")
	owner := gcObject(t, e.ctx, e.dyn, "owner", nil)
	other := gcObject(t, e.ctx, e.dyn, "other", nil)
	gcObject(t, e.ctx, e.dyn, "child", nil, ownerRef(owner, false))
	gcObject(t, e.ctx, e.dyn, "shared", nil, ownerRef(owner, false), ownerRef(other, false))
	// An owner that never existed: the dependent is collected at once.
	gcObject(t, e.ctx, e.dyn, "dangling", nil, metav1.OwnerReference{APIVersion: "stable.example.com/v1", Kind: "CronTab", Name: "ghost", UID: types.UID("00000000-0000-0000-0000-000000000001")})
	eventually(t, e.ctx, "dangling dependent collected", gone(e.ctx, e.dyn, "dangling"))

	// Default propagation for custom resources is Background: the owner
	// goes at once, its only-owned dependent after it.
	if err := crs.Delete(e.ctx, "owner", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := crs.Get(e.ctx, "owner", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("owner still there after a background delete: %v", err)
	}
	eventually(t, e.ctx, "child collected", gone(e.ctx, e.dyn, "child"))
	// A dependent with another live owner stays, without the gone owner.
	eventually(t, e.ctx, "shared keeps only its live owner", func() (bool, error) {
		s, err := crs.Get(e.ctx, "shared", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		refs := s.GetOwnerReferences()
		return len(refs) == 1 && refs[0].UID == other.GetUID(), nil
	})
	if _, err := crs.Get(e.ctx, "other", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestGarbageCollectorOrphan(t *testing.T) {
	e := start(t)
	e.createCRD(cronTabCRD(t))
	crs := e.dyn.Resource(crontabs).Namespace("default")
	owner := gcObject(t, e.ctx, e.dyn, "owner", nil)
	gcObject(t, e.ctx, e.dyn, "child", nil, ownerRef(owner, true))
	orphan := metav1.DeletePropagationOrphan
	if err := crs.Delete(e.ctx, "owner", metav1.DeleteOptions{PropagationPolicy: &orphan}); err != nil {
		t.Fatal(err)
	}
	eventually(t, e.ctx, "owner deleted once its dependents are orphaned", gone(e.ctx, e.dyn, "owner"))
	child, err := crs.Get(e.ctx, "child", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("orphaned dependent deleted: %v", err)
	}
	if refs := child.GetOwnerReferences(); len(refs) != 0 {
		t.Fatalf("orphaned dependent still refers to its owner: %+v", refs)
	}
	// The old orphanDependents option means the same.
	owner = gcObject(t, e.ctx, e.dyn, "owner2", nil)
	gcObject(t, e.ctx, e.dyn, "child2", nil, ownerRef(owner, false))
	r := e.do("DELETE", ctPath+"/owner2", `{"kind":"DeleteOptions","apiVersion":"v1","orphanDependents":true}`)
	if r.code != 200 && r.code != 202 {
		t.Fatalf("delete with orphanDependents: %d %s", r.code, r.body)
	}
	eventually(t, e.ctx, "owner2 deleted", gone(e.ctx, e.dyn, "owner2"))
	if _, err := crs.Get(e.ctx, "child2", metav1.GetOptions{}); err != nil {
		t.Fatalf("orphaned dependent deleted: %v", err)
	}
}

func TestGarbageCollectorForeground(t *testing.T) {
	e := start(t)
	e.createCRD(cronTabCRD(t))
	crs := e.dyn.Resource(crontabs).Namespace("default")
	owner := gcObject(t, e.ctx, e.dyn, "owner", nil)
	gcObject(t, e.ctx, e.dyn, "blocker", []string{"example.com/hold"}, ownerRef(owner, true))
	gcObject(t, e.ctx, e.dyn, "loose", nil, ownerRef(owner, false))
	fg := metav1.DeletePropagationForeground
	if err := crs.Delete(e.ctx, "owner", metav1.DeleteOptions{PropagationPolicy: &fg}); err != nil {
		t.Fatal(err)
	}
	// The owner waits, marked for deletion with the foregroundDeletion
	// finalizer, while a dependent that blocks owner deletion is there.
	eventually(t, e.ctx, "dependents deleted first", func() (bool, error) {
		b, err := crs.Get(e.ctx, "blocker", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		_, err = crs.Get(e.ctx, "loose", metav1.GetOptions{})
		return b.GetDeletionTimestamp() != nil && apierrors.IsNotFound(err), nil
	})
	o, err := crs.Get(e.ctx, "owner", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("owner gone before its blocking dependent: %v", err)
	}
	if o.GetDeletionTimestamp() == nil || len(o.GetFinalizers()) != 1 || o.GetFinalizers()[0] != metav1.FinalizerDeleteDependents {
		t.Fatalf("owner in foreground deletion: deletionTimestamp %v finalizers %v", o.GetDeletionTimestamp(), o.GetFinalizers())
	}
	// Once the blocking dependent goes, so does the owner.
	if _, err := crs.Patch(e.ctx, "blocker", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, e.ctx, "blocker gone", gone(e.ctx, e.dyn, "blocker"))
	eventually(t, e.ctx, "owner gone", gone(e.ctx, e.dyn, "owner"))
}

func TestDeleteOptionsValidation(t *testing.T) {
	e := start(t)
	e.createCRD(cronTabCRD(t))
	gcObject(t, e.ctx, e.dyn, "x", nil)
	expectStatus(t, e.do("DELETE", ctPath+"/x", `{"kind":"DeleteOptions","apiVersion":"v1","propagationPolicy":"Sideways"}`),
		422, metav1.StatusReasonInvalid, `propagationPolicy: Unsupported value: "Sideways"`)
	expectStatus(t, e.do("DELETE", ctPath+"/x", `{"kind":"DeleteOptions","apiVersion":"v1","propagationPolicy":"Orphan","orphanDependents":true}`),
		422, metav1.StatusReasonInvalid, "orphanDependents and deletionPropagation cannot be both set")
	if _, err := e.dyn.Resource(crontabs).Namespace("default").Get(e.ctx, "x", metav1.GetOptions{}); err != nil {
		t.Fatalf("object lost after refused deletes: %v", err)
	}
	// A negative grace period is taken as 1 second, as Kubernetes takes it
	// (k8s.io/apiserver/pkg/registry/rest.BeforeDelete): a custom
	// resource, deleted without grace, goes at once.
	r := e.do("DELETE", ctPath+"/x?gracePeriodSeconds=-1", "")
	if r.code != http.StatusOK {
		t.Fatalf("delete with gracePeriodSeconds=-1: %d %s", r.code, r.body)
	}
	if _, err := e.dyn.Resource(crontabs).Namespace("default").Get(e.ctx, "x", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("object still there after a delete with gracePeriodSeconds=-1: %v", err)
	}
}

// The collector works from what is stored: a dependent whose owner goes
// after a restart is still collected.
func TestGarbageCollectorAfterRestart(t *testing.T) {
	dir := t.TempDir()
	e := start(t, func(c *server.Config) { c.DataDir = dir })
	e.createCRD(cronTabCRD(t))
	owner := gcObject(t, e.ctx, e.dyn, "owner", []string{"example.com/hold"})
	gcObject(t, e.ctx, e.dyn, "child", nil, ownerRef(owner, false))
	if err := e.dyn.Resource(crontabs).Namespace("default").Delete(e.ctx, "owner", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := e.srv.Close(); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv := crdtest.Start(t, crdtest.Options{Server: func(c *server.Config) { c.DataDir = dir }})
	dyn := dynamic.NewForConfigOrDie(rest.CopyConfig(srv.Config))
	crs := dyn.Resource(crontabs).Namespace("default")
	eventually(t, ctx, "CRD served after restart", func() (bool, error) {
		_, err := crs.Get(ctx, "child", metav1.GetOptions{})
		return err == nil, nil
	})
	if _, err := crs.Patch(ctx, "owner", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, ctx, "child collected after restart", gone(ctx, dyn, "child"))
}
