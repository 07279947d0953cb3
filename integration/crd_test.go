package integration

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
)

func condition(crd *apiextensionsv1.CustomResourceDefinition, t apiextensionsv1.CustomResourceDefinitionConditionType) *apiextensionsv1.CustomResourceDefinitionCondition {
	for i := range crd.Status.Conditions {
		if crd.Status.Conditions[i].Type == t {
			return &crd.Status.Conditions[i]
		}
	}
	return nil
}

func TestCRDCreateEstablishes(t *testing.T) {
	e := start(t)
	in := cronTabCRD(t)
	in.Status.StoredVersions = []string{"bogus"} // status on create is ignored
	crd := e.createCRD(in)

	if crd.Generation != 1 || crd.UID == "" || crd.CreationTimestamp.IsZero() {
		t.Fatalf("metadata not set: %+v", crd.ObjectMeta)
	}
	if got := crd.Status.StoredVersions; !slices.Equal(got, []string{"v1"}) {
		t.Fatalf("storedVersions %v", got)
	}
	an := crd.Status.AcceptedNames
	if an.Plural != "crontabs" || an.Singular != "crontab" || an.Kind != "CronTab" || an.ListKind != "CronTabList" || !slices.Equal(an.ShortNames, []string{"ct"}) {
		t.Fatalf("acceptedNames %+v", an)
	}
	if c := condition(crd, apiextensionsv1.NamesAccepted); c == nil || c.Status != apiextensionsv1.ConditionTrue || c.Reason != "NoConflicts" || c.Message != "no conflicts found" {
		t.Fatalf("NamesAccepted %+v", c)
	}
	if c := condition(crd, apiextensionsv1.Established); c.Reason != "InitialNamesAccepted" || c.Message != "the initial names have been accepted" {
		t.Fatalf("Established %+v", c)
	}
	// Defaults were applied: conversion None, listKind.
	if crd.Spec.Conversion == nil || crd.Spec.Conversion.Strategy != apiextensionsv1.NoneConverter {
		t.Fatalf("conversion not defaulted: %+v", crd.Spec.Conversion)
	}
	// The resource is served right away.
	if _, err := e.dyn.Resource(crontabs).Namespace("default").List(e.ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestCRDInvalid(t *testing.T) {
	e := start(t)
	crd := cronTabCRD(t)
	crd.Name = "wrong.stable.example.com"
	r := e.do("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", mustJSON(crd))
	st := expectStatus(t, r, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid,
		`CustomResourceDefinition.apiextensions.k8s.io "wrong.stable.example.com" is invalid: metadata.name: Invalid value: "wrong.stable.example.com": must be spec.names.plural+"."+spec.group`)
	if st.Details == nil || st.Details.Kind != "CustomResourceDefinition" || st.Details.Group != "apiextensions.k8s.io" ||
		len(st.Details.Causes) != 1 || st.Details.Causes[0].Field != "metadata.name" || st.Details.Causes[0].Type != metav1.CauseTypeFieldValueInvalid {
		t.Fatalf("details %+v", st.Details)
	}

	// Several errors at once, each with its field path.
	crd = cronTabCRD(t)
	crd.Spec.Versions[0].Storage = false
	crd.Spec.Scope = "Everywhere"
	_, err := e.ext.ApiextensionsV1().CustomResourceDefinitions().Create(e.ctx, crd, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) {
		t.Fatalf("expected 422, got %v", err)
	}
	fields := map[string]bool{}
	for _, c := range err.(apierrors.APIStatus).Status().Details.Causes {
		fields[c.Field] = true
	}
	if !fields["spec.scope"] || !fields["spec.versions"] {
		t.Fatalf("causes %v", err.(apierrors.APIStatus).Status().Details.Causes)
	}
	if !strings.Contains(err.Error(), "must have exactly one version marked as storage version") {
		t.Fatalf("message %v", err)
	}
}

func TestCRDNamesConflict(t *testing.T) {
	e := start(t)
	e.createCRD(cronTabCRD(t))
	other := cronTabCRD(t)
	other.Name = "crontab2s.stable.example.com"
	other.Spec.Names.Plural = "crontab2s"
	other.Spec.Names.Singular = "crontab2"
	other.Spec.Names.ShortNames = nil
	other.Spec.Names.ListKind = "CronTab2List"
	// Kind CronTab is taken by the first CRD.
	if _, err := e.ext.ApiextensionsV1().CustomResourceDefinitions().Create(e.ctx, other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var got *apiextensionsv1.CustomResourceDefinition
	err := wait.PollUntilContextTimeout(e.ctx, 10*time.Millisecond, 5*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		got, err = e.ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, other.Name, metav1.GetOptions{})
		return err == nil && condition(got, apiextensionsv1.NamesAccepted) != nil, err
	})
	if err != nil {
		t.Fatal(err)
	}
	c := condition(got, apiextensionsv1.NamesAccepted)
	if c.Status != apiextensionsv1.ConditionFalse || c.Reason != "KindConflict" || c.Message != `"CronTab" is already in use` {
		t.Fatalf("NamesAccepted %+v", c)
	}
	if est := condition(got, apiextensionsv1.Established); est == nil || est.Status != apiextensionsv1.ConditionFalse || est.Reason != "NotAccepted" {
		t.Fatalf("Established %+v", est)
	}
	// Not served.
	r := e.do("GET", "/apis/stable.example.com/v1/crontab2s", "")
	if r.code != http.StatusNotFound {
		t.Fatalf("conflicting CRD served: %d %s", r.code, r.body)
	}
	// Deleting the first frees the kind.
	if err := e.ext.ApiextensionsV1().CustomResourceDefinitions().Delete(e.ctx, "crontabs.stable.example.com", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitEstablished(other.Name)
}

func TestCRDDeleteRemovesObjects(t *testing.T) {
	e := start(t)
	e.createCRD(cronTabCRD(t))
	for _, ns := range []string{"default", "kube-public"} {
		for _, name := range []string{"a", "b"} {
			if _, err := e.dyn.Resource(crontabs).Namespace(ns).Create(e.ctx, cronTab(name, nil), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	r := e.do("DELETE", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/crontabs.stable.example.com", "")
	if r.code != http.StatusOK {
		t.Fatalf("delete: %d %s", r.code, r.body)
	}
	// The answer is the CRD, marked for deletion with the cleanup finalizer.
	var crd apiextensionsv1.CustomResourceDefinition
	if err := jsonUnmarshal(r.body, &crd); err != nil {
		t.Fatal(err)
	}
	if crd.DeletionTimestamp == nil || !slices.Contains(crd.Finalizers, apiextensionsv1.CustomResourceCleanupFinalizer) {
		t.Fatalf("not marked: %+v", crd.ObjectMeta)
	}
	if c := condition(&crd, apiextensionsv1.Terminating); c == nil || c.Status != apiextensionsv1.ConditionTrue || c.Reason != "InstanceDeletionPending" {
		t.Fatalf("Terminating %+v", c)
	}
	err := wait.PollUntilContextTimeout(e.ctx, 10*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := e.ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatal("CRD not removed")
	}
	// The resource stops being served when the registry sees the CRD go
	// (a watch event, as kube-apiserver's CRD handler sees it in its
	// informer): moments later, not necessarily before the GET above.
	var last int
	err = wait.PollUntilContextTimeout(e.ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		last = e.do("GET", "/apis/stable.example.com/v1/crontabs", "").code
		return last == http.StatusNotFound, nil
	})
	if err != nil {
		t.Fatalf("resource still served: %d", last)
	}
	// Created again, it starts empty.
	e.createCRD(cronTabCRD(t))
	l, err := e.dyn.Resource(crontabs).List(e.ctx, metav1.ListOptions{})
	if err != nil || len(l.Items) != 0 {
		t.Fatalf("recreated CRD not empty: %v %d", err, len(l.Items))
	}
}

func TestCRDDeleteWaitsForFinalizers(t *testing.T) {
	e := start(t)
	e.createCRD(cronTabCRD(t))
	ct := cronTab("kept", nil)
	ct.SetFinalizers([]string{"example.com/keep"})
	if _, err := e.dyn.Resource(crontabs).Namespace("default").Create(e.ctx, ct, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := e.ext.ApiextensionsV1().CustomResourceDefinitions().Delete(e.ctx, "crontabs.stable.example.com", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The object is marked deleted but stays, and so does the CRD.
	err := wait.PollUntilContextTimeout(e.ctx, 10*time.Millisecond, 5*time.Second, true, func(ctx context.Context) (bool, error) {
		got, err := e.dyn.Resource(crontabs).Namespace("default").Get(ctx, "kept", metav1.GetOptions{})
		return err == nil && got.GetDeletionTimestamp() != nil, err
	})
	if err != nil {
		t.Fatal(err)
	}
	// While terminating, creates are refused with 403.
	_, err = e.dyn.Resource(crontabs).Namespace("default").Create(e.ctx, cronTab("new", nil), metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "create not allowed while custom resource definition is terminating") {
		t.Fatalf("create while terminating: %v", err)
	}
	crd, err := e.ext.ApiextensionsV1().CustomResourceDefinitions().Get(e.ctx, "crontabs.stable.example.com", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c := condition(crd, apiextensionsv1.Terminating); c == nil || c.Status != apiextensionsv1.ConditionTrue {
		t.Fatalf("Terminating %+v", c)
	}
	// Removing the finalizer lets everything go.
	got, _ := e.dyn.Resource(crontabs).Namespace("default").Get(e.ctx, "kept", metav1.GetOptions{})
	got.SetFinalizers(nil)
	if _, err := e.dyn.Resource(crontabs).Namespace("default").Update(e.ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(e.ctx, 10*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := e.ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, "crontabs.stable.example.com", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatal("CRD not removed after the finalizer went")
	}
}

func TestCRDUpdateAndStatus(t *testing.T) {
	e := start(t)
	crd := e.createCRD(cronTabCRD(t))
	crds := e.ext.ApiextensionsV1().CustomResourceDefinitions()

	// A spec change bumps the generation; the status sent is ignored.
	crd.Spec.Names.ShortNames = []string{"ct", "cront"}
	crd.Status.StoredVersions = []string{"v9"}
	upd, err := crds.Update(e.ctx, crd, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if upd.Generation != 2 || !slices.Equal(upd.Status.StoredVersions, []string{"v1"}) {
		t.Fatalf("generation %d storedVersions %v", upd.Generation, upd.Status.StoredVersions)
	}
	// A stale update conflicts.
	crd.Spec.Names.ShortNames = []string{"x"}
	if _, err := crds.Update(e.ctx, crd, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Fatalf("stale update: %v", err)
	}
	// Immutable fields are refused. (The controllers may write the status
	// meanwhile: retry conflicts.)
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		upd, _ := crds.Get(e.ctx, crd.Name, metav1.GetOptions{})
		upd.Spec.Scope = apiextensionsv1.ClusterScoped
		_, err := crds.Update(e.ctx, upd, metav1.UpdateOptions{})
		return err
	})
	if !apierrors.IsInvalid(err) {
		t.Fatalf("scope change: %v", err)
	}
	// The new short name reaches the accepted names.
	err = wait.PollUntilContextTimeout(e.ctx, 10*time.Millisecond, 5*time.Second, true, func(ctx context.Context) (bool, error) {
		got, err := crds.Get(ctx, crd.Name, metav1.GetOptions{})
		return err == nil && slices.Equal(got.Status.AcceptedNames.ShortNames, []string{"ct", "cront"}), err
	})
	if err != nil {
		t.Fatal(err)
	}
	// The status subresource changes status only.
	got, _ := crds.Get(e.ctx, crd.Name, metav1.GetOptions{})
	got.Spec.Scope = apiextensionsv1.ClusterScoped
	got.Status.StoredVersions = []string{"v1"}
	st, err := crds.UpdateStatus(e.ctx, got, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Spec.Scope != apiextensionsv1.NamespaceScoped || st.Generation != got.Generation {
		t.Fatalf("status update changed the spec: %s %d", st.Spec.Scope, st.Generation)
	}
	// Patch through the main resource.
	p, err := e.dyn.Resource(crdGVR).Patch(e.ctx, crd.Name, "application/merge-patch+json", []byte(`{"metadata":{"labels":{"team":"a"}}}`), metav1.PatchOptions{})
	if err != nil || p.GetLabels()["team"] != "a" {
		t.Fatalf("patch: %v", err)
	}
}

func TestCRDListWatchDeleteCollection(t *testing.T) {
	e := start(t)
	crds := e.ext.ApiextensionsV1().CustomResourceDefinitions()
	w, err := crds.Watch(e.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	crd := cronTabCRD(t)
	crd.Labels = map[string]string{"batch": "1"}
	e.createCRD(crd)
	select {
	case ev := <-w.ResultChan():
		if ev.Type != "ADDED" {
			t.Fatalf("first event %s", ev.Type)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no watch event")
	}
	l, err := crds.List(e.ctx, metav1.ListOptions{LabelSelector: "batch=1"})
	if err != nil || len(l.Items) != 1 {
		t.Fatalf("list: %v %d", err, len(l.Items))
	}
	if err := crds.DeleteCollection(e.ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "batch=1"}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(e.ctx, 10*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		l, err := crds.List(ctx, metav1.ListOptions{})
		return err == nil && len(l.Items) == 0, err
	})
	if err != nil {
		t.Fatal("deletecollection did not remove the CRD")
	}
}

func cronTab(name string, labels map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "stable.example.com/v1",
		"kind":       "CronTab",
		"metadata":   map[string]any{"name": name},
		"spec":       map[string]any{"cronSpec": "* * * * */5", "image": "my-awesome-cron-image"},
	}}
	if labels != nil {
		u.SetLabels(labels)
	}
	return u
}

func TestCRDWriteWarnings(t *testing.T) {
	e := start(t)
	crd := cronTabCRD(t)
	spec := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
	image := spec.Properties["image"]
	image.Format = "no-such-format"
	spec.Properties["image"] = image
	crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"] = spec
	r := e.do("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", mustJSON(crd))
	if r.code != http.StatusCreated || !slices.Contains(r.header.Values("Warning"), `299 - "unrecognized format \"no-such-format\""`) {
		t.Fatalf("create: %d warnings %q", r.code, r.header.Values("Warning"))
	}
}

// TestCRDNamesRace: of two CRDs of one group asking for the same kind at
// the same instant, exactly one is accepted and established; the other gets
// NamesAccepted=False with KindConflict — for 20 such pairs at once.
func TestCRDNamesRace(t *testing.T) {
	e := start(t)
	crds := e.ext.ApiextensionsV1().CustomResourceDefinitions()
	const pairs = 20
	mk := func(i int, plural string) *apiextensionsv1.CustomResourceDefinition {
		c := cronTabCRD(t)
		group := fmt.Sprintf("race%d.example.com", i)
		c.Name = plural + "." + group
		c.Spec.Group = group
		// One kind, each its own list kind: the conflict is the kind's.
		c.Spec.Names = apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Singular: strings.TrimSuffix(plural, "s"), Kind: "Racer", ListKind: plural + "List"}
		return c
	}
	var wg sync.WaitGroup
	errs := make(chan error, 2*pairs)
	for i := 0; i < pairs; i++ {
		for _, plural := range []string{"racers", "runners"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := crds.Create(e.ctx, mk(i, plural), metav1.CreateOptions{}); err != nil {
					errs <- err
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for i := 0; i < pairs; i++ {
		var a, b *apiextensionsv1.CustomResourceDefinition
		err := wait.PollUntilContextTimeout(e.ctx, 20*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
			var err error
			if a, err = crds.Get(ctx, fmt.Sprintf("racers.race%d.example.com", i), metav1.GetOptions{}); err != nil {
				return false, err
			}
			if b, err = crds.Get(ctx, fmt.Sprintf("runners.race%d.example.com", i), metav1.GetOptions{}); err != nil {
				return false, err
			}
			settled := func(c *apiextensionsv1.CustomResourceDefinition) bool {
				n := condition(c, apiextensionsv1.NamesAccepted)
				est := condition(c, apiextensionsv1.Established)
				return n != nil && (n.Status == apiextensionsv1.ConditionFalse || (est != nil && est.Status == apiextensionsv1.ConditionTrue))
			}
			return settled(a) && settled(b), nil
		})
		if err != nil {
			t.Fatalf("pair %d did not settle: %v", i, err)
		}
		accepted := 0
		for _, c := range []*apiextensionsv1.CustomResourceDefinition{a, b} {
			n := condition(c, apiextensionsv1.NamesAccepted)
			switch {
			case n.Status == apiextensionsv1.ConditionTrue:
				accepted++
			case n.Reason != "KindConflict" || n.Message != `"Racer" is already in use`:
				t.Errorf("pair %d: %s NamesAccepted %+v", i, c.Name, n)
			}
		}
		if accepted != 1 {
			t.Errorf("pair %d: %d of 2 accepted", i, accepted)
		}
	}
}
