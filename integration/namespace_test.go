package integration

import (
	"context"
	"net/http"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
)

func TestNamespaces(t *testing.T) {
	e := start(t)
	nss := e.kube.CoreV1().Namespaces()
	for _, name := range []string{"default", "kube-system", "kube-public", "kube-node-lease"} {
		ns, err := nss.Get(e.ctx, name, metav1.GetOptions{})
		if err != nil || ns.Status.Phase != corev1.NamespaceActive {
			t.Fatalf("namespace %s: %v", name, err)
		}
	}
	// Created through the typed clientset (protobuf bodies).
	ns, err := nss.Create(e.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ns.Status.Phase != corev1.NamespaceActive || len(ns.Spec.Finalizers) != 1 || ns.Spec.Finalizers[0] != corev1.FinalizerKubernetes ||
		ns.Labels[corev1.LabelMetadataName] != "team-a" {
		t.Fatalf("new namespace: %+v", ns)
	}
	// Namespace names are DNS labels.
	if _, err := nss.Create(e.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a.b"}}, metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
		t.Fatalf("dotted namespace name: %v", err)
	}
	// Strategic merge patch works on built-in types.
	p, err := nss.Patch(e.ctx, "team-a", types.StrategicMergePatchType, []byte(`{"metadata":{"labels":{"team":"a"}}}`), metav1.PatchOptions{})
	if err != nil || p.Labels["team"] != "a" {
		t.Fatalf("strategic merge patch: %v", err)
	}
	// default cannot be deleted.
	if err := nss.Delete(e.ctx, "default", metav1.DeleteOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("deleting default: %v", err)
	}
}

func TestNamespaceDeletionRemovesContent(t *testing.T) {
	e := start(t)
	e.createCRD(cronTabCRD(t))
	nss := e.kube.CoreV1().Namespaces()
	if _, err := nss.Create(e.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "doomed"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.seed("doomed", 3)
	kept := cronTab("kept", nil)
	kept.SetFinalizers([]string{"example.com/hold"})
	if _, err := e.dyn.Resource(crontabs).Namespace("doomed").Create(e.ctx, kept, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	r := e.do("DELETE", "/api/v1/namespaces/doomed", "")
	if r.code != http.StatusOK {
		t.Fatalf("delete: %d %s", r.code, r.body)
	}
	var ns corev1.Namespace
	if err := jsonUnmarshal(r.body, &ns); err != nil || ns.Status.Phase != corev1.NamespaceTerminating || ns.DeletionTimestamp == nil || ns.DeletionGracePeriodSeconds != nil {
		t.Fatalf("delete answer: %s", r.body)
	}
	// Nothing new may be created in it.
	_, err := e.dyn.Resource(crontabs).Namespace("doomed").Create(e.ctx, cronTab("new", nil), metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) || !stringContainsAll(err.Error(), "unable to create new content in namespace doomed because it is being terminated") {
		t.Fatalf("create in terminating namespace: %v", err)
	}
	// The objects without finalizers go; the namespace waits for the other.
	err = wait.PollUntilContextTimeout(e.ctx, 10*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		l, err := e.dyn.Resource(crontabs).Namespace("doomed").List(ctx, metav1.ListOptions{})
		return err == nil && len(l.Items) == 1 && l.Items[0].GetDeletionTimestamp() != nil, err
	})
	if err != nil {
		t.Fatal("namespace content not deleted")
	}
	if _, err := nss.Get(e.ctx, "doomed", metav1.GetOptions{}); err != nil {
		t.Fatalf("namespace gone while an object remains: %v", err)
	}
	got, _ := e.dyn.Resource(crontabs).Namespace("doomed").Get(e.ctx, "kept", metav1.GetOptions{})
	got.SetFinalizers(nil)
	if _, err := e.dyn.Resource(crontabs).Namespace("doomed").Update(e.ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(e.ctx, 10*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := nss.Get(ctx, "doomed", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatal("namespace not removed")
	}
	// A namespace of the same name starts empty.
	if _, err := nss.Create(e.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "doomed"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	l, _ := e.dyn.Resource(crontabs).Namespace("doomed").List(e.ctx, metav1.ListOptions{})
	if len(l.Items) != 0 {
		t.Fatalf("recreated namespace has %d objects", len(l.Items))
	}
}

func stringContainsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !contains([]byte(s), p) {
			return false
		}
	}
	return true
}
