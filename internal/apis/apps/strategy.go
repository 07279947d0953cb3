package apps

import (
	"context"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/crdserver/crdserver/internal/resource"
)

// kubeStrategy is what crdserver uses of a kube-apiserver registry
// strategy (k8s.io/kubernetes/pkg/registry/apps/...), on internal types.
type kubeStrategy interface {
	PrepareForCreate(ctx context.Context, obj runtime.Object)
	PrepareForUpdate(ctx context.Context, obj, old runtime.Object)
	Validate(ctx context.Context, obj runtime.Object) field.ErrorList
	ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList
	WarningsOnCreate(ctx context.Context, obj runtime.Object) []string
	WarningsOnUpdate(ctx context.Context, obj, old runtime.Object) []string
}

// kubeStatusStrategy is what crdserver uses of a registry's status
// strategy.
type kubeStatusStrategy interface {
	PrepareForUpdate(ctx context.Context, obj, old runtime.Object)
	ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList
}

// strategy is a resource.Strategy (and StatusStrategy, Warner and
// Normalizer) of a kind served in version V (k8s.io/api) and handled by
// kube's strategies on its internal type I: every object is defaulted,
// converted to I, and given to kube's functions. The engine validates
// metadata itself (with the same functions), so kube's errors on
// metadata are left out to report each once.
type strategy[V, I any] struct {
	kind   string
	kube   kubeStrategy
	status kubeStatusStrategy
}

func (s strategy[V, I]) toInternal(obj *resource.Object) (runtime.Object, error) {
	in, err := internal[V, I](obj)
	if err != nil {
		return nil, err
	}
	return any(in).(runtime.Object), nil
}

func (s strategy[V, I]) edit(obj *resource.Object, f func(runtime.Object)) {
	editInternal[V](obj, func(in *I) { f(any(in).(runtime.Object)) })
}

// Normalize decodes a body through V and applies its defaults.
func (s strategy[V, I]) Normalize(obj *resource.Object) ([]error, error) {
	return resource.NormalizeTyped(obj, s.kind, "v1", defaults[V])
}

func (s strategy[V, I]) PrepareForCreate(ctx context.Context, obj *resource.Object) {
	s.edit(obj, func(in runtime.Object) { s.kube.PrepareForCreate(ctx, in) })
}

func (s strategy[V, I]) PrepareForUpdate(ctx context.Context, obj, old *resource.Object) {
	o, err := s.toInternal(old)
	if err != nil {
		return
	}
	s.edit(obj, func(in runtime.Object) { s.kube.PrepareForUpdate(ctx, in, o) })
}

func (s strategy[V, I]) Validate(ctx context.Context, obj *resource.Object) field.ErrorList {
	in, err := s.toInternal(obj)
	if err != nil {
		return decodeError(err)
	}
	return withoutMetadata(s.kube.Validate(ctx, in))
}

func (s strategy[V, I]) ValidateUpdate(ctx context.Context, obj, old *resource.Object) field.ErrorList {
	in, err := s.toInternal(obj)
	if err != nil {
		return decodeError(err)
	}
	o, err := s.toInternal(old)
	if err != nil {
		return decodeError(err)
	}
	return withoutMetadata(s.kube.ValidateUpdate(ctx, in, o))
}

func (s strategy[V, I]) WarningsOnCreate(ctx context.Context, obj *resource.Object) []string {
	in, err := s.toInternal(obj)
	if err != nil {
		return nil
	}
	return s.kube.WarningsOnCreate(ctx, in)
}

func (s strategy[V, I]) WarningsOnUpdate(ctx context.Context, obj, old *resource.Object) []string {
	in, err := s.toInternal(obj)
	if err != nil {
		return nil
	}
	o, err := s.toInternal(old)
	if err != nil {
		return nil
	}
	return s.kube.WarningsOnUpdate(ctx, in, o)
}

// PrepareForStatusUpdate keeps what kube's status strategy keeps (the
// spec, and labels where it does).
func (s strategy[V, I]) PrepareForStatusUpdate(ctx context.Context, obj, old *resource.Object) {
	o, err := s.toInternal(old)
	if err != nil {
		return
	}
	s.edit(obj, func(in runtime.Object) { s.status.PrepareForUpdate(ctx, in, o) })
}

func (s strategy[V, I]) ValidateStatusUpdate(ctx context.Context, obj, old *resource.Object) field.ErrorList {
	in, err := s.toInternal(obj)
	if err != nil {
		return decodeError(err)
	}
	o, err := s.toInternal(old)
	if err != nil {
		return decodeError(err)
	}
	return withoutMetadata(s.status.ValidateUpdate(ctx, in, o))
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
