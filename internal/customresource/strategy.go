package customresource

import (
	"context"
	"fmt"
	"math"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/crdserver/crdserver/internal/conversion"
	"github.com/crdserver/crdserver/internal/resource"
	"github.com/crdserver/crdserver/internal/schema"
	"github.com/crdserver/crdserver/internal/store"
)

// strategy holds Kubernetes' rules for custom resources:
// with a status subresource the main resource cannot write status, and the
// generation counts changes outside metadata.
type strategy struct {
	// status says which apiVersions have the status subresource.
	status map[string]bool
	// schemas are the compiled schemas by apiVersion.
	schemas map[string]*schema.Version
	// scales are the scale subresources by apiVersion.
	scales map[string]*apiextensionsv1.CustomResourceSubresourceScale
	// stamps, when set, says what this process vouches for in the
	// objects its write path prepared (see WriteStamp).
	stamps *stamper
}

// stamper knows what the write path vouches for in an object it prepared
// under a strategy's schemas (store.WriteStamp): pruned and with its
// metadata typed (the write path's work) under the schemas of revision
// epoch, and, when it is in the storage version and nothing of that
// version's defaults is missing, defaulted.
type stamper struct {
	// storage is the apiVersion objects are stored in.
	storage string
	// epoch is the schema revision of schemas (conversion.SchemaRevOf).
	epoch int64
}

// newStrategy is the strategy of crd's objects. Its writes are stamped
// when they are read back by a cache and its converter knows the schemas'
// revision.
func newStrategy(crd *apiextensionsv1.CustomResourceDefinition, cache *store.Cache, conv conversion.Converter, storage string, status map[string]bool, schemas map[string]*schema.Version, scales map[string]*apiextensionsv1.CustomResourceSubresourceScale) strategy {
	s := strategy{status: status, schemas: schemas, scales: scales}
	if epoch, ok := conversion.SchemaRevOf(conv); ok && cache != nil && storage != "" {
		s.stamps = &stamper{storage: crd.Spec.Group + "/" + storage, epoch: epoch}
	}
	return s
}

// WriteStamp implements resource.Stamper. The strategy's Prepare methods
// are the last to change an object before it is stored.
func (s strategy) WriteStamp(obj *resource.Object) *store.WriteStamp {
	if s.stamps == nil {
		return nil
	}
	av := obj.APIVersion()
	defaulted := av == s.stamps.storage && !s.schemas[av].NeedsDefaults(obj.Content)
	return &store.WriteStamp{Epoch: s.stamps.epoch, Defaulted: defaulted}
}

// Coerce prunes and defaults a request body with its version's schema.
func (s strategy) Coerce(content map[string]any, track bool) ([]string, error) {
	av, _ := content["apiVersion"].(string)
	v := s.schemas[av]
	unknown, err := v.Coerce(content, track)
	if err != nil {
		return nil, err
	}
	v.Default(content)
	return unknown, nil
}

func (s strategy) PrepareForCreate(ctx context.Context, obj *resource.Object) {
	if s.status[obj.APIVersion()] {
		delete(obj.Content, "status")
	}
	obj.Meta.Generation = 1
}

func (s strategy) PrepareForUpdate(ctx context.Context, obj, old *resource.Object) {
	if s.status[obj.APIVersion()] {
		if st, ok := old.Content["status"]; ok {
			obj.Content["status"] = runtime.DeepCopyJSONValue(st)
		} else {
			delete(obj.Content, "status")
		}
	}
	if !apiequality.Semantic.DeepEqual(obj.Content, old.Content) {
		obj.Meta.Generation = old.Meta.Generation + 1
	}
}

// PrepareForStatusUpdate takes only status from the request; everything
// else stays as stored (managedFields aside).
func (s strategy) PrepareForStatusUpdate(ctx context.Context, obj, old *resource.Object) {
	st, ok := obj.Content["status"]
	managed := obj.Meta.ManagedFields
	next := old.DeepCopy()
	next.Meta.ManagedFields = managed
	if ok {
		next.Content["status"] = st
	} else {
		delete(next.Content, "status")
	}
	*obj = *next
}

func (s strategy) Validate(ctx context.Context, obj *resource.Object) field.ErrorList {
	u := obj.ToUnstructured()
	errs := s.schemas[obj.APIVersion()].Validate(ctx, u)
	return append(errs, s.validateScale(u, obj.APIVersion(), true)...)
}

func (s strategy) ValidateUpdate(ctx context.Context, obj, old *resource.Object) field.ErrorList {
	u := obj.ToUnstructured()
	errs := s.schemas[obj.APIVersion()].ValidateUpdate(ctx, u, old.ToUnstructured())
	return append(errs, s.validateScale(u, obj.APIVersion(), true)...)
}

func (s strategy) ValidateStatusUpdate(ctx context.Context, obj, old *resource.Object) field.ErrorList {
	u := obj.ToUnstructured()
	errs := s.schemas[obj.APIVersion()].ValidateStatus(ctx, u, old.ToUnstructured())
	return append(errs, s.validateScale(u, obj.APIVersion(), false)...)
}

// validateScale checks the replicas (and label selector) paths of the
// scale subresource as Kubernetes does: replicas must be non-negative
// int32 values; spec replicas are checked on every write but a status one.
func (s strategy) validateScale(obj map[string]any, apiVersion string, spec bool) field.ErrorList {
	scale := s.scales[apiVersion]
	if scale == nil {
		return nil
	}
	var errs field.ErrorList
	replicas := func(path string) {
		n, _, err := unstructured.NestedInt64(obj, strings.Split(strings.TrimPrefix(path, "."), ".")...)
		switch {
		case err != nil:
			errs = append(errs, field.Invalid(field.NewPath(path), n, err.Error()))
		case n < 0:
			errs = append(errs, field.Invalid(field.NewPath(path), n, "should be a non-negative integer"))
		case n > math.MaxInt32:
			errs = append(errs, field.Invalid(field.NewPath(path), n, fmt.Sprintf("should be less than or equal to %v", math.MaxInt32)))
		}
	}
	if spec {
		replicas(scale.SpecReplicasPath)
	}
	replicas(scale.StatusReplicasPath)
	if scale.LabelSelectorPath != nil {
		sel, _, err := unstructured.NestedString(obj, strings.Split(strings.TrimPrefix(*scale.LabelSelectorPath, "."), ".")...)
		if err != nil {
			errs = append(errs, field.Invalid(field.NewPath(*scale.LabelSelectorPath), sel, err.Error()))
		}
	}
	return errs
}
