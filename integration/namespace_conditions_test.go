package integration

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
)

// nsCondition is a namespace condition without its time.
type nsCondition struct{ Type, Status, Reason, Message string }

func nsConditions(ns *corev1.Namespace) []nsCondition {
	var out []nsCondition
	for _, c := range ns.Status.Conditions {
		out = append(out, nsCondition{string(c.Type), string(c.Status), c.Reason, c.Message})
	}
	return out
}

// terminatingConditions are the conditions kube-controller-manager v1.37.2
// sets on a terminating namespace: with remaining and finalizers, the
// messages of NamespaceContentRemaining and NamespaceFinalizersRemaining
// (none: all content gone).
func terminatingConditions(remaining, finalizers string) []nsCondition {
	out := []nsCondition{
		{"NamespaceDeletionDiscoveryFailure", "False", "ResourcesDiscovered", "All resources successfully discovered"},
		{"NamespaceDeletionGroupVersionParsingFailure", "False", "ParsedGroupVersions", "All legacy kube types successfully parsed"},
		{"NamespaceDeletionContentFailure", "False", "ContentDeleted", "All content successfully deleted, may be waiting on finalization"},
	}
	if remaining == "" {
		return append(out,
			nsCondition{"NamespaceContentRemaining", "False", "ContentRemoved", "All content successfully removed"},
			nsCondition{"NamespaceFinalizersRemaining", "False", "ContentHasNoFinalizers", "All content-preserving finalizers finished"})
	}
	return append(out,
		nsCondition{"NamespaceContentRemaining", "True", "SomeResourcesRemain", "Some resources are remaining: " + remaining},
		nsCondition{"NamespaceFinalizersRemaining", "True", "SomeFinalizersRemain", "Some content in the namespace has finalizers remaining: " + finalizers})
}

// TestNamespaceDeletionConditions deletes a namespace whose ConfigMap and
// CronTab carry a finalizer: its conditions say what remains and why, as
// Kubernetes words it, follow the objects as their finalizers are removed,
// and turn False before the namespace goes.
func TestNamespaceDeletionConditions(t *testing.T) {
	e := start(t)
	e.createCRD(cronTabCRD(t))
	nss := e.kube.CoreV1().Namespaces()
	if _, err := nss.Create(e.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "held"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cms := e.kube.CoreV1().ConfigMaps("held")
	if _, err := cms.Create(e.ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "held", Finalizers: []string{"example.com/hold"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kept := cronTab("kept", nil)
	kept.SetFinalizers([]string{"example.com/hold"})
	cts := e.dyn.Resource(crontabs).Namespace("held")
	if _, err := cts.Create(e.ctx, kept, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cts.Create(e.ctx, cronTab("gone", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := nss.Delete(e.ctx, "held", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	// waitFor waits until the namespace's conditions are want.
	waitFor := func(what string, want []nsCondition) *corev1.Namespace {
		t.Helper()
		var ns *corev1.Namespace
		err := wait.PollUntilContextTimeout(e.ctx, 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			var err error
			ns, err = nss.Get(ctx, "held", metav1.GetOptions{})
			return err == nil && slices.Equal(nsConditions(ns), want), err
		})
		if err != nil {
			got := []nsCondition(nil)
			if ns != nil {
				got = nsConditions(ns)
			}
			t.Fatalf("%s: %v\n got %q\nwant %q", what, err, got, want)
		}
		return ns
	}
	stuck := waitFor("both objects held", terminatingConditions(
		"configmaps. has 1 resource instances, crontabs.stable.example.com has 1 resource instances",
		"example.com/hold in 2 resource instances"))
	if stuck.Status.Phase != corev1.NamespaceTerminating || len(stuck.Spec.Finalizers) != 1 {
		t.Fatalf("stuck namespace: %+v", stuck)
	}

	// The ConfigMap goes; the conditions name the CronTab alone, and keep
	// the time they became True.
	cm, err := cms.Get(e.ctx, "held", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Finalizers = nil
	if _, err := cms.Update(e.ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	one := waitFor("the CronTab held", terminatingConditions(
		"crontabs.stable.example.com has 1 resource instances",
		"example.com/hold in 1 resource instances"))
	for i := range one.Status.Conditions {
		if before, after := stuck.Status.Conditions[i].LastTransitionTime, one.Status.Conditions[i].LastTransitionTime; !before.Equal(&after) {
			t.Fatalf("%s: lastTransitionTime changed from %v to %v with its status unchanged", one.Status.Conditions[i].Type, before, after)
		}
	}

	// The CronTab goes: the conditions turn False, then the namespace goes.
	w, err := nss.Watch(e.ctx, metav1.ListOptions{FieldSelector: "metadata.name=held", ResourceVersion: one.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	ct, err := cts.Get(e.ctx, "kept", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ct.SetFinalizers(nil)
	if _, err := cts.Update(e.ctx, ct, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	var last *corev1.Namespace
	deleted := false
	timeout := time.After(30 * time.Second)
	for !deleted {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("watch closed before the namespace was deleted")
			}
			switch ev.Type {
			case watch.Modified:
				last = ev.Object.(*corev1.Namespace)
			case watch.Deleted:
				deleted = true
			default:
				t.Fatalf("watch event %s: %v", ev.Type, ev.Object)
			}
		case <-timeout:
			t.Fatal("the namespace was not deleted")
		}
	}
	if last == nil {
		t.Fatal("no update before the namespace was deleted")
	}
	if got, want := nsConditions(last), terminatingConditions("", ""); !slices.Equal(got, want) {
		t.Fatalf("conditions before the namespace went:\n got %q\nwant %q", got, want)
	}
	if _, err := nss.Get(e.ctx, "held", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("namespace after its deletion: %v", err)
	}
	if last.Status.Phase != corev1.NamespaceTerminating {
		t.Fatalf("phase: %s", last.Status.Phase)
	}
}
