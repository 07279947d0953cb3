package registry

import (
	"context"

	"github.com/crdserver/crdserver/internal/resource"
	"github.com/crdserver/crdserver/internal/schema"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// customResourceStrategy holds Kubernetes' rules for custom resources:
// with a status subresource the main resource cannot write status, and the
// generation counts changes outside metadata.
type customResourceStrategy struct {
	// status says which apiVersions have the status subresource.
	status map[string]bool
	// schemas are the compiled schemas by apiVersion.
	schemas map[string]*schema.Version
}

// Coerce prunes and defaults a request body with its version's schema.
func (s customResourceStrategy) Coerce(content map[string]any, track bool) ([]string, error) {
	av, _ := content["apiVersion"].(string)
	v := s.schemas[av]
	unknown, err := v.Coerce(content, track)
	if err != nil {
		return nil, err
	}
	v.Default(content)
	return unknown, nil
}

func (s customResourceStrategy) PrepareForCreate(_ context.Context, obj *resource.Object) {
	if s.status[obj.APIVersion()] {
		delete(obj.Content, "status")
	}
	obj.Meta.Generation = 1
}

func (s customResourceStrategy) PrepareForUpdate(_ context.Context, obj, old *resource.Object) {
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
func (s customResourceStrategy) PrepareForStatusUpdate(_ context.Context, obj, old *resource.Object) {
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

func (s customResourceStrategy) Validate(ctx context.Context, obj *resource.Object) field.ErrorList {
	return s.schemas[obj.APIVersion()].Validate(ctx, obj.ToUnstructured())
}

func (s customResourceStrategy) ValidateUpdate(ctx context.Context, obj, old *resource.Object) field.ErrorList {
	return s.schemas[obj.APIVersion()].ValidateUpdate(ctx, obj.ToUnstructured(), old.ToUnstructured())
}

func (s customResourceStrategy) ValidateStatusUpdate(ctx context.Context, obj, old *resource.Object) field.ErrorList {
	return s.schemas[obj.APIVersion()].ValidateStatus(ctx, obj.ToUnstructured(), old.ToUnstructured())
}
