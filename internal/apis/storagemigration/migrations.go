package storagemigration

import (
	"context"
	"fmt"

	svmv1 "k8s.io/api/storagemigration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/crdserver/crdserver/internal/conversion"
	"github.com/crdserver/crdserver/internal/resource"
	"github.com/crdserver/crdserver/internal/store"
)

// Prefix is where StorageVersionMigrations live in etcd.
const Prefix = "/registry/storagemigration.k8s.io/storageversionmigrations/"

// Migrations is the storageversionmigrations resource, served from cache.
func Migrations(cache *store.Cache) *resource.Resource {
	return &resource.Resource{
		Group:          svmv1.GroupName,
		Plural:         "storageversionmigrations",
		Singular:       "storageversionmigration",
		Kind:           "StorageVersionMigration",
		ListKind:       "StorageVersionMigrationList",
		Versions:       []*resource.Version{{Name: "v1", Status: true}, {Name: "v1beta1", Status: true}},
		StorageVersion: "v1",
		KeyPrefix:      Prefix,
		Cache:          cache,
		Strategy:       migrationStrategy{},
		Converter:      conversion.None{},
		// v1beta1 has the same fields and patch strategies as v1.
		StrategicMergeType: &svmv1.StorageVersionMigration{},
		FieldManagers:      resource.BuiltinFieldManagers(svmv1.GroupName, "StorageVersionMigration", true),
		Protobuf:           true,
		Verbs:              []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"},
	}
}

func toMigration(obj *resource.Object) (*svmv1.StorageVersionMigration, error) {
	m := &svmv1.StorageVersionMigration{}
	return m, resource.ToTyped(obj, m)
}

// migrationStrategy holds the rules of StorageVersionMigrations: the spec
// is immutable, the status belongs to the migration controller.
type migrationStrategy struct{}

func (migrationStrategy) Normalize(obj *resource.Object) ([]error, error) {
	m := &svmv1.StorageVersionMigration{}
	strict, err := resource.DecodeStrict(obj, m)
	if err == nil {
		err = resource.FromTyped(m, obj)
	}
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("StorageVersionMigration in version %q cannot be handled as a StorageVersionMigration: %v", obj.APIVersion(), err))
	}
	return strict, nil
}

func (migrationStrategy) PrepareForCreate(_ context.Context, obj *resource.Object) {
	delete(obj.Content, "status")
	obj.Meta.Generation = 1
}

func (migrationStrategy) PrepareForUpdate(_ context.Context, obj, old *resource.Object) {
	if st, ok := old.Content["status"]; ok {
		obj.Content["status"] = runtime.DeepCopyJSONValue(st)
	} else {
		delete(obj.Content, "status")
	}
}

func (migrationStrategy) PrepareForStatusUpdate(_ context.Context, obj, old *resource.Object) {
	st, ok := obj.Content["status"]
	next := old.DeepCopy()
	if ok {
		next.Content["status"] = st
	}
	*obj = *next
}

func validateMigration(obj *resource.Object) field.ErrorList {
	m, err := toMigration(obj)
	if err != nil {
		return field.ErrorList{field.Invalid(field.NewPath("spec"), nil, err.Error())}
	}
	if m.Spec.Resource.Resource == "" {
		return field.ErrorList{field.Required(field.NewPath("spec", "resource", "resource"), "")}
	}
	return nil
}

func (migrationStrategy) Validate(_ context.Context, obj *resource.Object) field.ErrorList {
	return validateMigration(obj)
}

func (migrationStrategy) ValidateUpdate(_ context.Context, obj, old *resource.Object) field.ErrorList {
	errs := validateMigration(obj)
	n, err1 := toMigration(obj)
	o, err2 := toMigration(old)
	if err1 == nil && err2 == nil && n.Spec.Resource != o.Spec.Resource {
		errs = append(errs, field.Invalid(field.NewPath("spec", "resource"), n.Spec.Resource, "field is immutable"))
	}
	return errs
}

func (migrationStrategy) ValidateStatusUpdate(context.Context, *resource.Object, *resource.Object) field.ErrorList {
	return nil
}
