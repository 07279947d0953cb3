package resource

import (
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/crdserver/crdserver/internal/auth"
)

// AdmissionControl is the server's dynamic admission: Kubernetes'
// admission plugins (admission policies and webhooks). Mutating admission
// runs on a write's object before the resource's strategy, validating
// admission after the strategy's validation, as in kube-apiserver.
type AdmissionControl interface {
	admission.MutationInterface
	admission.ValidationInterface
	// ObjectInterfaces are what the plugins convert and default the
	// objects of res with (its versions, its equivalent resources).
	ObjectInterfaces(res *Resource) admission.ObjectInterfaces
}

// admissionRequest is one write as admission sees it.
type admissionRequest struct {
	op      admission.Operation
	sub     string
	obj     *Object // nil for a delete
	old     *Object // nil for a create
	options runtime.Object
	dry     bool
	// kind, when set, is the kind of obj and old (a subresource's, such
	// as autoscaling/v1 Scale), not the resource's.
	kind *schema.GroupVersionKind
}

// attributes are the admission attributes of a write, with the objects as
// unstructured maps (changed in place by mutating admission).
func (c *call) attributes(a admissionRequest) (admission.Attributes, *unstructured.Unstructured) {
	var obj, old runtime.Object
	var u *unstructured.Unstructured
	name := c.info.Name
	if a.obj != nil {
		u = &unstructured.Unstructured{Object: a.obj.ToUnstructured()}
		obj = u
		if name == "" {
			name = a.obj.Meta.Name
		}
	}
	if a.old != nil {
		old = &unstructured.Unstructured{Object: a.old.ToUnstructured()}
		if name == "" {
			name = a.old.Meta.Name
		}
	}
	var who user.Info
	if u, ok := auth.UserFrom(c.ctx); ok {
		who = u
	}
	gv := schema.GroupVersion{Group: c.res.Group, Version: c.ver.Name}
	gvk := gv.WithKind(c.res.Kind)
	if a.kind != nil {
		gvk = *a.kind
	}
	gvr := gv.WithResource(c.res.Plural)
	return admission.NewAttributesRecord(obj, old, gvk, c.namespace, name, gvr, a.sub, a.op, a.options, a.dry, who), u
}

// admitMutating runs mutating admission on a write; obj takes what the
// plugins changed.
func (c *call) admitMutating(a admissionRequest) error {
	ac := c.h.Admission
	if ac == nil || !ac.Handles(a.op) {
		return nil
	}
	attrs, u := c.attributes(a)
	if err := ac.Admit(c.ctx, attrs, ac.ObjectInterfaces(c.res)); err != nil {
		return admissionError(err)
	}
	if u == nil || a.obj == nil {
		return nil
	}
	next, errs := NewObject(u.Object)
	if len(errs) > 0 {
		return apierrors.NewInternalError(errs.ToAggregate())
	}
	*a.obj = *next
	return nil
}

// admitValidating runs validating admission on a write.
func (c *call) admitValidating(a admissionRequest) error {
	ac := c.h.Admission
	if ac == nil || !ac.Handles(a.op) {
		return nil
	}
	attrs, _ := c.attributes(a)
	if err := ac.Validate(c.ctx, attrs, ac.ObjectInterfaces(c.res)); err != nil {
		return admissionError(err)
	}
	return nil
}

// admissionError is how a refusal reaches the client: the plugins' API
// errors as they are, anything else a 500 as Kubernetes wraps it.
func admissionError(err error) error {
	if _, ok := err.(apierrors.APIStatus); ok {
		return err
	}
	return apierrors.NewInternalError(err)
}

// createOptions, updateOptions and deleteOptions are the options objects
// admission sees, as Kubernetes passes them.
func (c *call) createOptions(dry bool) runtime.Object {
	o := &metav1.CreateOptions{FieldManager: c.r.URL.Query().Get("fieldManager"), FieldValidation: c.r.URL.Query().Get("fieldValidation")}
	if dry {
		o.DryRun = []string{metav1.DryRunAll}
	}
	o.SetGroupVersionKind(metav1.SchemeGroupVersion.WithKind("CreateOptions"))
	return o
}

func (c *call) updateOptions(dry bool) runtime.Object {
	o := &metav1.UpdateOptions{FieldManager: c.r.URL.Query().Get("fieldManager"), FieldValidation: c.r.URL.Query().Get("fieldValidation")}
	if dry {
		o.DryRun = []string{metav1.DryRunAll}
	}
	o.SetGroupVersionKind(metav1.SchemeGroupVersion.WithKind("UpdateOptions"))
	return o
}
