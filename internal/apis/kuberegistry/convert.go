package kuberegistry

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/kubernetes/pkg/api/legacyscheme"

	"github.com/crdserver/crdserver/internal/resource"
)

// defaults applies the served version's defaults (SetObjectDefaults_<Kind>
// of k8s.io/kubernetes/pkg/apis/<group>/<version>, registered in
// legacyscheme by the group's install package, which the kind's package
// imports).
func defaults[V any](v *V) {
	if o, ok := any(v).(runtime.Object); ok {
		legacyscheme.Scheme.Default(o)
	}
}

// Internal converts an object to its internal type I, through its served
// type V.
func Internal[V, I any](obj *resource.Object) (*I, error) {
	v, err := resource.Typed[V](obj)
	if err != nil {
		return nil, err
	}
	in := new(I)
	if err := legacyscheme.Scheme.Convert(v, in, nil); err != nil {
		return nil, err
	}
	return in, nil
}

// External writes an internal object back into obj through its served
// type V.
func External[V, I any](in *I, obj *resource.Object) error {
	v := new(V)
	if err := legacyscheme.Scheme.Convert(in, v, nil); err != nil {
		return err
	}
	return resource.FromTyped(v, obj)
}

// editInternal lets f change obj, defaulted, as its internal type; an
// object that does not convert is left alone (validation reports it).
func editInternal[V, I any](obj *resource.Object, f func(*I)) {
	v, err := resource.Typed[V](obj)
	if err != nil {
		return
	}
	// A patch (server-side apply among them) may have left out what the
	// defaults fill in.
	defaults(v)
	in := new(I)
	if err := legacyscheme.Scheme.Convert(v, in, nil); err != nil {
		return
	}
	f(in)
	out := new(V)
	if err := legacyscheme.Scheme.Convert(in, out, nil); err != nil {
		return
	}
	// kube-apiserver answers and later reads what it wrote decoded from
	// storage, which defaults it again: what f set may have defaults of
	// its own (a Job's labels are its generated template labels).
	defaults(out)
	_ = resource.FromTyped(out, obj)
}

func decodeError(err error) field.ErrorList {
	return field.ErrorList{field.Invalid(field.NewPath(""), nil, err.Error())}
}
