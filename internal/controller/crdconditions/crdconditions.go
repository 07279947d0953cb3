// Package crdconditions is the controller of two conditions Kubernetes
// sets on CRDs: NonStructuralSchema (a CRD whose schema is not
// structural, such as one stored through v1beta1, or that keeps unknown
// fields at its root) and KubernetesAPIApprovalPolicyConformant (a CRD in
// a protected group, *.k8s.io or *.kubernetes.io, and its
// api-approved.kubernetes.io annotation). It decides them as
// k8s.io/apiextensions-apiserver's nonstructuralschema and apiapproval
// controllers do (their code is the oracle of its tests), but from the
// registry's Index rather than an informer holding every CRD whole: a
// CRD's schemas are decoded once per generation, to check them, and
// dropped again.
package crdconditions

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/crdserver/crdserver/internal/controller"
	"github.com/crdserver/crdserver/internal/registry"
)

// Reader is what the controller reads: the Index (with FullCRD, the
// CRDs with their schemas).
type Reader = controller.Reader

// Controller sets the two conditions.
type Controller struct {
	reader Reader
	client apiextensionsclient.Interface
	log    *slog.Logger
	queue  controller.Queue

	mu sync.Mutex
	// seenGeneration and seenApproval are what the conditions were last
	// written for, by CRD name, as Kubernetes' controllers remember them:
	// a generation is checked once, an annotation value once.
	seenGeneration map[string]int64
	seenApproval   map[string]string
	// checked is the NonStructuralSchema condition computed for a CRD's
	// generation, by name: its schemas are decoded once per generation.
	checked map[string]checkedGeneration
}

// checkedGeneration is the condition a generation of a CRD should have.
type checkedGeneration struct {
	generation int64
	cond       *apiextensionsv1.CustomResourceDefinitionCondition
}

// New returns the controller; it writes status through client.
func New(reader Reader, client apiextensionsclient.Interface, log *slog.Logger) *Controller {
	return &Controller{reader: reader, client: client, log: log, queue: controller.NewQueue("crd-conditions"),
		seenGeneration: map[string]int64{}, seenApproval: map[string]string{}, checked: map[string]checkedGeneration{}}
}

// Name implements controller.Controller.
func (c *Controller) Name() string { return "crd-conditions" }

// Run implements controller.Controller: every CRD that changes is synced.
func (c *Controller) Run(ctx context.Context) {
	first := true
	c.reader.Subscribe(func(ix *registry.Index) {
		if first || ix.Changed == nil {
			first = false
			for name := range ix.CRDs {
				c.queue.Add(name)
			}
			return
		}
		for _, name := range ix.Changed {
			c.queue.Add(name)
		}
	})
	controller.Work(ctx, c.Name(), c.queue, 1, c.log, c.sync)
}

func (c *Controller) sync(ctx context.Context, name string) error {
	ix := c.reader.Index()
	crd := ix.CRDs[name]
	if crd == nil {
		c.mu.Lock()
		delete(c.seenGeneration, name)
		delete(c.seenApproval, name)
		delete(c.checked, name)
		c.mu.Unlock()
		return nil
	}
	next := crd.DeepCopy()
	structural, err := c.syncStructural(ix, crd, next)
	if err != nil {
		return err
	}
	approval := c.syncApproval(crd, next)
	if !structural && !approval {
		return nil
	}
	// Both conditions in one write (Kubernetes' two controllers write
	// them apart).
	_, err = c.client.ApiextensionsV1().CustomResourceDefinitions().UpdateStatus(ctx, next, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		// Deleted or changed meanwhile: synced again with its next change,
		// as in Kubernetes.
		return nil
	}
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if structural {
		c.seenGeneration[crd.Name] = crd.Generation
	}
	if approval {
		c.seenApproval[crd.Name] = crd.Annotations[apiextensionsv1.KubeAPIApprovedAnnotation]
	}
	return nil
}

// syncStructural sets NonStructuralSchema on next, once per generation,
// and reports whether it changed it.
func (c *Controller) syncStructural(ix *registry.Index, crd, next *apiextensionsv1.CustomResourceDefinition) (bool, error) {
	c.mu.Lock()
	last, seen := c.seenGeneration[crd.Name]
	c.mu.Unlock()
	if seen && crd.Generation <= last {
		return false, nil
	}
	cond, err := c.structuralCondition(ix, crd)
	if err != nil {
		return false, err
	}
	old := apihelpers.FindCRDCondition(crd, apiextensionsv1.NonStructuralSchema)
	if (cond == nil && old == nil) || (cond != nil && old != nil && old.Status == cond.Status && old.Reason == cond.Reason && old.Message == cond.Message) {
		return false, nil
	}
	if cond == nil {
		apihelpers.RemoveCRDCondition(next, apiextensionsv1.NonStructuralSchema)
	} else {
		cond.LastTransitionTime = metav1.NewTime(time.Now())
		apihelpers.SetCRDCondition(next, *cond)
	}
	return true, nil
}

// syncApproval sets KubernetesAPIApprovalPolicyConformant on next, once
// per value of the approval annotation, and reports whether it changed it.
func (c *Controller) syncApproval(crd, next *apiextensionsv1.CustomResourceDefinition) bool {
	c.mu.Lock()
	last, seen := c.seenApproval[crd.Name]
	c.mu.Unlock()
	if seen && crd.Annotations[apiextensionsv1.KubeAPIApprovedAnnotation] == last {
		return false
	}
	cond := approvalCondition(crd)
	if cond == nil {
		// The group cannot change: no condition now is none ever.
		return false
	}
	if old := apihelpers.FindCRDCondition(crd, apiextensionsv1.KubernetesAPIApprovalPolicyConformant); old != nil &&
		old.Status == cond.Status && old.Reason == cond.Reason && old.Message == cond.Message {
		return false
	}
	apihelpers.SetCRDCondition(next, *cond)
	return true
}

// structuralCondition is the NonStructuralSchema condition of crd's
// generation (a copy), computed once per generation.
func (c *Controller) structuralCondition(ix *registry.Index, crd *apiextensionsv1.CustomResourceDefinition) (*apiextensionsv1.CustomResourceDefinitionCondition, error) {
	c.mu.Lock()
	done, ok := c.checked[crd.Name]
	c.mu.Unlock()
	if !ok || done.generation != crd.Generation {
		full, err := ix.FullCRD(crd.Name)
		if err != nil || full == nil {
			return nil, err
		}
		done = checkedGeneration{generation: crd.Generation, cond: structuralCondition(full)}
		c.mu.Lock()
		c.checked[crd.Name] = done
		c.mu.Unlock()
	}
	if done.cond == nil {
		return nil, nil
	}
	cond := *done.cond
	return &cond, nil
}

// structuralCondition is the NonStructuralSchema condition a CRD should
// have, nil for none: its versions' schemas must be structural, and
// preserveUnknownFields false.
func structuralCondition(crd *apiextensionsv1.CustomResourceDefinition) *apiextensionsv1.CustomResourceDefinitionCondition {
	cond := &apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.NonStructuralSchema, Status: apiextensionsv1.ConditionUnknown}
	var errs field.ErrorList
	if crd.Spec.PreserveUnknownFields {
		errs = append(errs, field.Invalid(field.NewPath("spec", "preserveUnknownFields"), crd.Spec.PreserveUnknownFields, "must be false"))
	}
	for i, v := range crd.Spec.Versions {
		if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			continue
		}
		internal := &apiextensionsinternal.CustomResourceValidation{}
		if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(v.Schema, internal, nil); err != nil {
			continue
		}
		s, err := structuralschema.NewStructural(internal.OpenAPIV3Schema)
		if err != nil {
			cond.Reason = "StructuralError"
			cond.Message = fmt.Sprintf("failed to check validation schema for version %s: %v", v.Name, err)
			return cond
		}
		errs = append(errs, structuralschema.ValidateStructural(field.NewPath("spec", "versions").Index(i).Child("schema", "openAPIV3Schema"), s)...)
	}
	if len(errs) == 0 {
		return nil
	}
	cond.Status, cond.Reason, cond.Message = apiextensionsv1.ConditionTrue, "Violations", errs.ToAggregate().Error()
	return cond
}

// approvalCondition is the KubernetesAPIApprovalPolicyConformant
// condition of a CRD in a protected group, nil for a CRD in another.
func approvalCondition(crd *apiextensionsv1.CustomResourceDefinition) *apiextensionsv1.CustomResourceDefinitionCondition {
	if !apihelpers.IsProtectedCommunityGroup(crd.Spec.Group) {
		return nil
	}
	state, reason := apihelpers.GetAPIApprovalState(crd.Annotations)
	cond := &apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.KubernetesAPIApprovalPolicyConformant, Message: reason}
	switch state {
	case apihelpers.APIApprovalInvalid:
		cond.Status, cond.Reason = apiextensionsv1.ConditionFalse, "InvalidAnnotation"
	case apihelpers.APIApprovalMissing:
		cond.Status, cond.Reason = apiextensionsv1.ConditionFalse, "MissingAnnotation"
	case apihelpers.APIApproved:
		cond.Status, cond.Reason = apiextensionsv1.ConditionTrue, "ApprovedAnnotation"
	case apihelpers.APIApprovalBypassed:
		cond.Status, cond.Reason = apiextensionsv1.ConditionFalse, "UnapprovedAnnotation"
	default:
		cond.Status, cond.Reason = apiextensionsv1.ConditionUnknown, "UnknownAnnotation"
	}
	return cond
}
