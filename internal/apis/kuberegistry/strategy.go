package kuberegistry

import (
	"context"
	"strings"

	"k8s.io/apimachinery/pkg/api/operation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/crdserver/crdserver/internal/resource"
)

// Strategy is what crdserver uses of a kube-apiserver registry strategy
// (k8s.io/kubernetes/pkg/registry/...), on internal types.
type Strategy interface {
	PrepareForCreate(ctx context.Context, obj runtime.Object)
	PrepareForUpdate(ctx context.Context, obj, old runtime.Object)
	Validate(ctx context.Context, obj runtime.Object) field.ErrorList
	ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList
	WarningsOnCreate(ctx context.Context, obj runtime.Object) []string
	WarningsOnUpdate(ctx context.Context, obj, old runtime.Object) []string
}

// StatusStrategy is what crdserver uses of a registry's status strategy.
type StatusStrategy interface {
	PrepareForUpdate(ctx context.Context, obj, old runtime.Object)
	ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList
}

// TypedStrategy is a resource.Strategy (and StatusStrategy, Warner and
// Normalizer) of a kind served in version V (k8s.io/api) and handled by
// kube's strategies on its internal type I: every object is defaulted,
// converted to I, and given to kube's functions. The engine validates
// metadata itself (with the same functions), so kube's errors on
// metadata are left out to report each once.
type TypedStrategy[V, I any] struct {
	// Group, Kind and Version are the served kind's, for decoding errors
	// and declarative validation (which validates the served version).
	Group, Kind, Version string
	Kube                 Strategy
	// Status is the status strategy (nil: no status subresource).
	Status StatusStrategy
	// OrphanWarning is the warning of a delete that orphans dependents
	// by kube's default garbage collection policy of the served version.
	OrphanWarning string
}

// OrphansByDefault says whether kube's strategy orphans dependents by
// default in the served version (its DefaultGarbageCollectionPolicy).
func (s TypedStrategy[V, I]) OrphansByDefault() (string, bool) {
	gc, ok := s.Kube.(rest.GarbageCollectionDeleteStrategy)
	if !ok {
		return "", false
	}
	ctx := genericapirequest.WithRequestInfo(context.Background(), &genericapirequest.RequestInfo{
		IsResourceRequest: true, APIGroup: s.Group, APIVersion: s.Version,
	})
	return s.OrphanWarning, gc.DefaultGarbageCollectionPolicy(ctx) == rest.OrphanDependents
}

func (s TypedStrategy[V, I]) toInternal(obj *resource.Object) (runtime.Object, error) {
	in, err := Internal[V, I](obj)
	if err != nil {
		return nil, err
	}
	return any(in).(runtime.Object), nil
}

// toInternalPair converts an update's new and old objects.
func (s TypedStrategy[V, I]) toInternalPair(obj, old *resource.Object) (in, o runtime.Object, err error) {
	if in, err = s.toInternal(obj); err != nil {
		return nil, nil, err
	}
	if o, err = s.toInternal(old); err != nil {
		return nil, nil, err
	}
	return in, o, nil
}

func (s TypedStrategy[V, I]) edit(obj *resource.Object, f func(runtime.Object)) {
	editInternal[V](obj, func(in *I) { f(any(in).(runtime.Object)) })
}

// Normalize decodes a body through V and applies its defaults.
func (s TypedStrategy[V, I]) Normalize(obj *resource.Object) ([]error, error) {
	return resource.NormalizeTyped(obj, s.Kind, s.Version, defaults[V])
}

// PrepareForCreate applies kube's PrepareForCreate (status, generation).
func (s TypedStrategy[V, I]) PrepareForCreate(ctx context.Context, obj *resource.Object) {
	s.edit(obj, func(in runtime.Object) { s.Kube.PrepareForCreate(ctx, in) })
}

// PrepareForUpdate applies kube's PrepareForUpdate (status kept, generation).
func (s TypedStrategy[V, I]) PrepareForUpdate(ctx context.Context, obj, old *resource.Object) {
	o, err := s.toInternal(old)
	if err != nil {
		return
	}
	s.edit(obj, func(in runtime.Object) { s.Kube.PrepareForUpdate(ctx, in, o) })
}

// Validate is kube's validation of a new object, without its metadata errors.
func (s TypedStrategy[V, I]) Validate(ctx context.Context, obj *resource.Object) field.ErrorList {
	in, err := s.toInternal(obj)
	if err != nil {
		return decodeError(err)
	}
	return withoutMetadata(s.declarative(ctx, s.Kube, in, nil, "", s.Kube.Validate(ctx, in)))
}

// ValidateUpdate is kube's validation of an update, without its metadata errors.
func (s TypedStrategy[V, I]) ValidateUpdate(ctx context.Context, obj, old *resource.Object) field.ErrorList {
	in, o, err := s.toInternalPair(obj, old)
	if err != nil {
		return decodeError(err)
	}
	return withoutMetadata(s.declarative(ctx, s.Kube, in, o, "", s.Kube.ValidateUpdate(ctx, in, o)))
}

// WarningsOnCreate are kube's warnings on a new object.
func (s TypedStrategy[V, I]) WarningsOnCreate(ctx context.Context, obj *resource.Object) []string {
	in, err := s.toInternal(obj)
	if err != nil {
		return nil
	}
	return s.Kube.WarningsOnCreate(ctx, in)
}

// WarningsOnUpdate are kube's warnings on an update.
func (s TypedStrategy[V, I]) WarningsOnUpdate(ctx context.Context, obj, old *resource.Object) []string {
	in, o, err := s.toInternalPair(obj, old)
	if err != nil {
		return nil
	}
	return s.Kube.WarningsOnUpdate(ctx, in, o)
}

// PrepareForStatusUpdate keeps what kube's status strategy keeps (the
// spec, and labels where it does).
func (s TypedStrategy[V, I]) PrepareForStatusUpdate(ctx context.Context, obj, old *resource.Object) {
	o, err := s.toInternal(old)
	if err != nil {
		return
	}
	s.edit(obj, func(in runtime.Object) { s.Status.PrepareForUpdate(ctx, in, o) })
}

// ValidateStatusUpdate is kube's validation of a status update.
func (s TypedStrategy[V, I]) ValidateStatusUpdate(ctx context.Context, obj, old *resource.Object) field.ErrorList {
	in, o, err := s.toInternalPair(obj, old)
	if err != nil {
		return decodeError(err)
	}
	return withoutMetadata(s.declarative(ctx, s.Status, in, o, "status", s.Status.ValidateUpdate(ctx, in, o)))
}

// declarative adds what kube's declarative validation finds (the rules
// of the served version's type tags) to errs, kube's hand-written
// errors, as kube-apiserver's registry does after a strategy's
// validation: errors it reports in place of hand-written ones replace
// them. old is nil on create; sub names the subresource.
func (s TypedStrategy[V, I]) declarative(ctx context.Context, kube any, obj, old runtime.Object, sub string, errs field.ErrorList) field.ErrorList {
	dv, ok := kube.(rest.DeclarativeValidationStrategy)
	if !ok {
		return errs
	}
	op := operation.Create
	if old != nil {
		op = operation.Update
	}
	ctx = genericapirequest.WithRequestInfo(ctx, &genericapirequest.RequestInfo{
		IsResourceRequest: true, APIGroup: s.Group, APIVersion: s.Version, Subresource: sub,
	})
	return dv.ValidateDeclaratively(ctx, obj, old, errs, op, dv.DeclarativeValidationConfig(ctx, obj, old))
}

// withoutMetadata drops the errors on the object's metadata.
func withoutMetadata(errs field.ErrorList) field.ErrorList {
	out := errs[:0:0]
	for _, e := range errs {
		if e.Field == "metadata" || strings.HasPrefix(e.Field, "metadata.") || strings.HasPrefix(e.Field, "metadata[") {
			continue
		}
		out = append(out, e)
	}
	return out
}

// GracefulStrategy is the TypedStrategy of a kind kube deletes gracefully
// (its strategy is a rest.RESTGracefulDeleteStrategy: Pods).
type GracefulStrategy[V, I any] struct {
	TypedStrategy[V, I]
}

// BeforeGracefulDelete runs kube's rest.BeforeDelete with kube's strategy
// on obj as its internal type, and takes the deletion's timestamp, grace
// period and generation it sets.
func (s GracefulStrategy[V, I]) BeforeGracefulDelete(ctx context.Context, obj *resource.Object, opts *metav1.DeleteOptions) (graceful, pending bool, err error) {
	in, err := s.toInternal(obj)
	if err != nil {
		return false, false, err
	}
	graceful, pending, err = rest.BeforeDelete(s.Kube.(rest.RESTDeleteStrategy), ctx, in, opts)
	if err != nil {
		return false, false, err
	}
	m := in.(metav1.Object)
	obj.Meta.DeletionTimestamp = m.GetDeletionTimestamp()
	obj.Meta.DeletionGracePeriodSeconds = m.GetDeletionGracePeriodSeconds()
	obj.Meta.Generation = m.GetGeneration()
	return graceful, pending, nil
}
