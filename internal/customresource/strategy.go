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
	// writes, when set, is told of every object the write path prepares
	// (see announce).
	writes *writeAnnouncer
}

// writeAnnouncer tells the watch cache which values this process's write
// path prepared, and under which schemas, so that readers know what they
// need not do again (store.WriteStamp).
type writeAnnouncer struct {
	cache      *store.Cache
	keyPrefix  string
	namespaced bool
	// storage is the apiVersion objects are stored in.
	storage string
	// epoch is the schema revision of schemas (conversion.SchemaRevOf).
	epoch int64
}

func newStrategy(crd *apiextensionsv1.CustomResourceDefinition, cache *store.Cache, conv conversion.Converter, storage string, status map[string]bool, schemas map[string]*schema.Version, scales map[string]*apiextensionsv1.CustomResourceSubresourceScale) strategy {
	s := strategy{status: status, schemas: schemas, scales: scales}
	if epoch, ok := conversion.SchemaRevOf(conv); ok && cache != nil && storage != "" {
		s.writes = &writeAnnouncer{
			cache:      cache,
			keyPrefix:  KeyPrefix(crd),
			namespaced: crd.Spec.Scope == apiextensionsv1.NamespaceScoped,
			storage:    crd.Spec.Group + "/" + storage,
			epoch:      epoch,
		}
	}
	return s
}

// announce tells the cache that the request of ctx prepared obj, as it
// will be written, under this strategy's schemas: pruned and with its
// metadata typed (the write path's work), and, when it is in the storage
// version and nothing of that version's defaults is missing, defaulted.
// Its strategy's methods are the last to change an object before it is
// stored.
func (s strategy) announce(ctx context.Context, obj *resource.Object) {
	w := s.writes
	if w == nil {
		return
	}
	key := w.keyPrefix + obj.Meta.Name
	if w.namespaced {
		key = w.keyPrefix + obj.Meta.Namespace + "/" + obj.Meta.Name
	}
	av := obj.APIVersion()
	defaulted := av == w.storage && !s.schemas[av].NeedsDefaults(obj.Content)
	w.cache.PrepareWrite(ctx, key, store.WriteStamp{Epoch: w.epoch, Defaulted: defaulted})
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
	s.announce(ctx, obj)
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
	s.announce(ctx, obj)
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
	s.announce(ctx, obj)
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
