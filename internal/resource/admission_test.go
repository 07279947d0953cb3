package resource

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
)

// recordingAdmission records what each phase sees (operation, kind,
// subresource, name, dry run, options kind, and the objects' uid and
// labels); mutating admission labels new objects, validating admission
// refuses what refuse says.
type recordingAdmission struct {
	seen   []string
	refuse func(a admission.Attributes) error
}

func (r *recordingAdmission) Handles(admission.Operation) bool { return true }

func (r *recordingAdmission) record(phase string, a admission.Attributes) {
	desc := func(o any) string {
		u, ok := o.(*unstructured.Unstructured)
		if !ok || u == nil {
			return "-"
		}
		uid := "no-uid"
		if u.GetUID() != "" {
			uid = "uid"
		}
		return uid + strings.TrimPrefix(fmt.Sprint(u.GetLabels()), "map")
	}
	opts := "-"
	if a.GetOperationOptions() != nil {
		opts = a.GetOperationOptions().GetObjectKind().GroupVersionKind().Kind
	}
	r.seen = append(r.seen, fmt.Sprintf("%s %s %s/%s %s/%s dry=%v %s obj=%s old=%s", phase, a.GetOperation(), a.GetKind().Kind, a.GetSubresource(), a.GetNamespace(), a.GetName(), a.IsDryRun(), opts, desc(a.GetObject()), desc(a.GetOldObject())))
}

func (r *recordingAdmission) Admit(_ context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	r.record("mutate", a)
	if u, ok := a.GetObject().(*unstructured.Unstructured); ok && u != nil && u.GetKind() == "Widget" {
		l := u.GetLabels()
		if l == nil {
			l = map[string]string{}
		}
		l["admitted"] = "yes"
		u.SetLabels(l)
	}
	return nil
}

func (r *recordingAdmission) Validate(_ context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	r.record("validate", a)
	if r.refuse != nil {
		return r.refuse(a)
	}
	return nil
}

func (r *recordingAdmission) ObjectInterfaces(*Resource) admission.ObjectInterfaces { return nil }

func TestAdmissionSeesEveryWrite(t *testing.T) {
	e := statusEngine(t) // w exists, created before admission
	ac := &recordingAdmission{}
	e.h.Admission = ac
	a := e.do("POST", widgetsPath+"?dryRun=All", "application/json", widget("n", ""))
	if a.code != http.StatusCreated || meta(a)["labels"].(map[string]any)["admitted"] != "yes" {
		t.Fatalf("create: %d %s", a.code, a.raw)
	}
	e.do("PATCH", widgetsPath+"/w", "application/merge-patch+json", `{"spec":{"size":2}}`)
	e.do("PATCH", widgetsPath+"/w/scale", "application/merge-patch+json", `{"spec":{"replicas":3}}`)
	e.do("DELETE", widgetsPath+"/w", "", "")
	want := []string{
		// Mutating admission sees the object as sent; validating admission
		// sees it as the strategy made it.
		"mutate CREATE Widget/ default/n dry=true CreateOptions obj=no-uid[] old=-",
		"validate CREATE Widget/ default/n dry=true CreateOptions obj=uid[admitted:yes] old=-",
		"mutate UPDATE Widget/ default/w dry=false UpdateOptions obj=uid[] old=uid[]",
		"validate UPDATE Widget/ default/w dry=false UpdateOptions obj=uid[admitted:yes] old=uid[]",
		// The scale subresource is admitted as a Scale.
		"mutate UPDATE Scale/scale default/w dry=false UpdateOptions obj=uid[] old=uid[]",
		"validate UPDATE Scale/scale default/w dry=false UpdateOptions obj=uid[] old=uid[]",
		// A delete: options first, then the object being deleted.
		"mutate DELETE Widget/ default/w dry=false DeleteOptions obj=- old=-",
		"validate DELETE Widget/ default/w dry=false DeleteOptions obj=- old=uid[admitted:yes]",
	}
	if got := strings.Join(ac.seen, "\n"); got != strings.Join(want, "\n") {
		t.Fatalf("admission saw:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}
	if e.stored("n") != nil {
		t.Fatal("dry run stored")
	}
}

func TestAdmissionRefuses(t *testing.T) {
	e := newEngine(t)
	e.create(widget("w", ""))
	ac := &recordingAdmission{refuse: func(a admission.Attributes) error {
		if a.GetName() == "plain" {
			return errors.New("webhook said no")
		}
		return apierrors.NewForbidden(schema.GroupResource{Group: "example.com", Resource: "widgets"}, a.GetName(), errors.New("policy said no"))
	}}
	e.h.Admission = ac
	puts := e.store.puts
	e.do("POST", widgetsPath, "application/json", widget("n", "")).status(t, 403, metav1.StatusReasonForbidden, `widgets.example.com "n" is forbidden: policy said no`)
	e.do("POST", widgetsPath, "application/json", widget("plain", "")).status(t, 500, metav1.StatusReasonInternalError, "webhook said no")
	e.do("PUT", widgetsPath+"/w", "application/json", widget("w", `,"resourceVersion":"2"`)).status(t, 403, metav1.StatusReasonForbidden, "policy said no")
	e.do("DELETE", widgetsPath+"/w", "", "").status(t, 403, metav1.StatusReasonForbidden, "policy said no")
	if e.store.puts != puts || e.stored("w") == nil || e.stored("n") != nil {
		t.Fatal("a refused write changed the store")
	}
}
