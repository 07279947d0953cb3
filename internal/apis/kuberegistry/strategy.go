package kuberegistry

import (
	"context"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

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
	// Kind and Version are the served kind's, for decoding errors.
	Kind, Version string
	Kube          Strategy
	// Status is the status strategy (nil: no status subresource).
	Status StatusStrategy
	// DefaultStored defaults again what kube's strategy prepared, as
	// kube-apiserver's reads of the stored object are defaulted (a
	// PersistentVolumeClaim's status, cleared on create, reads phase
	// Pending).
	DefaultStored bool
}

func (s TypedStrategy[V, I]) toInternal(obj *resource.Object) (runtime.Object, error) {
	in, err := Internal[V, I](obj)
	if err != nil {
		return nil, err
	}
	return any(in).(runtime.Object), nil
}

func (s TypedStrategy[V, I]) edit(obj *resource.Object, f func(runtime.Object)) {
	editInternal[V](obj, func(in *I) { f(any(in).(runtime.Object)) })
	if s.DefaultStored {
		resource.EditTyped(obj, defaults[V])
	}
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
	return withoutMetadata(s.Kube.Validate(ctx, in))
}

// ValidateUpdate is kube's validation of an update, without its metadata errors.
func (s TypedStrategy[V, I]) ValidateUpdate(ctx context.Context, obj, old *resource.Object) field.ErrorList {
	in, err := s.toInternal(obj)
	if err != nil {
		return decodeError(err)
	}
	o, err := s.toInternal(old)
	if err != nil {
		return decodeError(err)
	}
	return withoutMetadata(s.Kube.ValidateUpdate(ctx, in, o))
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
	in, err := s.toInternal(obj)
	if err != nil {
		return nil
	}
	o, err := s.toInternal(old)
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
	in, err := s.toInternal(obj)
	if err != nil {
		return decodeError(err)
	}
	o, err := s.toInternal(old)
	if err != nil {
		return decodeError(err)
	}
	return withoutMetadata(s.Status.ValidateUpdate(ctx, in, o))
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
