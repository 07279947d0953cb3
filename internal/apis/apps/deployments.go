package apps

import (
	"context"
	"fmt"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	podutil "k8s.io/kubernetes/pkg/api/pod"
	"k8s.io/kubernetes/pkg/apis/apps"
	_ "k8s.io/kubernetes/pkg/apis/apps/install" // apps' defaults and conversions in legacyscheme
	appsvalidation "k8s.io/kubernetes/pkg/apis/apps/validation"
	apivalidation "k8s.io/kubernetes/pkg/apis/core/validation"
	"k8s.io/kubernetes/pkg/printers"
	printersinternal "k8s.io/kubernetes/pkg/printers/internalversion"
	"k8s.io/kubernetes/pkg/registry/apps/deployment"

	"github.com/crdserver/crdserver/internal/conversion"
	"github.com/crdserver/crdserver/internal/resource"
	"github.com/crdserver/crdserver/internal/store"
)

// DeploymentPrefix is where Deployments live in etcd (kube-apiserver's
// key).
const DeploymentPrefix = "/registry/deployments/"

// AddToScheme registers the apps/v1 Go types (for protobuf and the
// built-in type converter).
var AddToScheme = appsv1.AddToScheme

// Deployments is the deployments resource, served from cache, with the
// status and scale subresources.
func Deployments(cache *store.Cache) *resource.Resource {
	return &resource.Resource{
		Group:      appsv1.GroupName,
		Plural:     "deployments",
		Singular:   "deployment",
		Kind:       "Deployment",
		ListKind:   "DeploymentList",
		ShortNames: []string{"deploy"},
		Categories: []string{"all"},
		Namespaced: true,
		Versions: []*resource.Version{{
			Name:   "v1",
			Status: true,
			Scale:  &resource.Scale{SpecReplicasPath: ".spec.replicas", StatusReplicasPath: ".status.replicas", Selector: specSelector},
		}},
		StorageVersion:           "v1",
		KeyPrefix:                DeploymentPrefix,
		Cache:                    cache,
		Strategy:                 deploymentStrategy{},
		Converter:                conversion.None{},
		Table:                    table[appsv1.Deployment, apps.Deployment]{list: func(items []apps.Deployment) runtime.Object { return &apps.DeploymentList{Items: items} }},
		FieldManagers:            resource.BuiltinFieldManagers(appsv1.GroupName, "Deployment", true),
		AllowUnconditionalUpdate: true,
		Protobuf:                 true,
		StrategicMergeType:       &appsv1.Deployment{},
		Verbs:                    []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"},
	}
}

// specSelector is the Scale's status.selector: spec.selector as a label
// selector string, as kube's deployment scale subresource gives it.
func specSelector(obj map[string]any) (string, error) {
	m, found, err := unstructured.NestedMap(obj, "spec", "selector")
	if err != nil || !found {
		return "", err
	}
	ls := &metav1.LabelSelector{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, ls); err != nil {
		return "", err
	}
	sel, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil {
		return "", err
	}
	return sel.String(), nil
}

// defaults applies apps/v1's defaults (SetObjectDefaults_Deployment).
func defaults[V any](v *V) {
	if o, ok := any(v).(runtime.Object); ok {
		legacyscheme.Scheme.Default(o)
	}
}

// internal converts an object to its internal type I, through its v1
// type V.
func internal[V, I any](obj *resource.Object) (*I, error) {
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

// external writes an internal object back into obj through its v1 type V.
func external[V, I any](in *I, obj *resource.Object) error {
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
	_ = external[V](in, obj)
}

func decodeError(err error) field.ErrorList {
	return field.ErrorList{field.Invalid(field.NewPath(""), nil, err.Error())}
}

// deploymentStrategy is Kubernetes' deployment strategy
// (k8s.io/kubernetes/pkg/registry/apps/deployment) on crdserver's objects.
// Metadata is validated by the engine, so Validate checks the spec as
// kube's ValidateDeployment does after its metadata.
type deploymentStrategy struct{}

func toDeployment(obj *resource.Object) (*apps.Deployment, error) {
	return internal[appsv1.Deployment, apps.Deployment](obj)
}

// Normalize decodes a body through the Deployment type and applies
// apps/v1's defaults.
func (deploymentStrategy) Normalize(obj *resource.Object) ([]error, error) {
	return resource.NormalizeTyped(obj, "Deployment", "v1", defaults[appsv1.Deployment])
}

func (deploymentStrategy) PrepareForCreate(ctx context.Context, obj *resource.Object) {
	editInternal[appsv1.Deployment](obj, func(d *apps.Deployment) {
		deployment.Strategy.PrepareForCreate(ctx, d)
	})
}

func (deploymentStrategy) PrepareForUpdate(ctx context.Context, obj, old *resource.Object) {
	o, err := toDeployment(old)
	if err != nil {
		return
	}
	editInternal[appsv1.Deployment](obj, func(d *apps.Deployment) {
		deployment.Strategy.PrepareForUpdate(ctx, d, o)
	})
}

func (deploymentStrategy) Validate(_ context.Context, obj *resource.Object) field.ErrorList {
	d, err := toDeployment(obj)
	if err != nil {
		return decodeError(err)
	}
	opts := podutil.GetValidationOptionsFromPodTemplate(&d.Spec.Template, nil)
	return appsvalidation.ValidateDeploymentSpec(&d.Spec, nil, field.NewPath("spec"), opts)
}

func (deploymentStrategy) ValidateUpdate(_ context.Context, obj, old *resource.Object) field.ErrorList {
	d, err := toDeployment(obj)
	if err != nil {
		return decodeError(err)
	}
	o, err := toDeployment(old)
	if err != nil {
		return decodeError(err)
	}
	opts := podutil.GetValidationOptionsFromPodTemplate(&d.Spec.Template, &o.Spec.Template)
	errs := appsvalidation.ValidateDeploymentSpec(&d.Spec, &o.Spec, field.NewPath("spec"), opts)
	return append(errs, apivalidation.ValidateImmutableField(d.Spec.Selector, o.Spec.Selector, field.NewPath("spec").Child("selector"))...)
}

func (deploymentStrategy) WarningsOnCreate(ctx context.Context, obj *resource.Object) []string {
	d, err := toDeployment(obj)
	if err != nil {
		return nil
	}
	return deployment.Strategy.WarningsOnCreate(ctx, d)
}

func (deploymentStrategy) WarningsOnUpdate(ctx context.Context, obj, old *resource.Object) []string {
	d, err := toDeployment(obj)
	if err != nil {
		return nil
	}
	o, err := toDeployment(old)
	if err != nil {
		return nil
	}
	return deployment.Strategy.WarningsOnUpdate(ctx, d, o)
}

// PrepareForStatusUpdate keeps the spec and labels, as kube's status
// strategy.
func (deploymentStrategy) PrepareForStatusUpdate(ctx context.Context, obj, old *resource.Object) {
	o, err := toDeployment(old)
	if err != nil {
		return
	}
	editInternal[appsv1.Deployment](obj, func(d *apps.Deployment) {
		deployment.StatusStrategy.PrepareForUpdate(ctx, d, o)
	})
}

// ValidateStatusUpdate is kube's ValidateDeploymentStatusUpdate without
// its metadata part (the engine's).
func (deploymentStrategy) ValidateStatusUpdate(_ context.Context, obj, old *resource.Object) field.ErrorList {
	d, err := toDeployment(obj)
	if err != nil {
		return decodeError(err)
	}
	o, err := toDeployment(old)
	if err != nil {
		return decodeError(err)
	}
	p := field.NewPath("status")
	errs := appsvalidation.ValidateDeploymentStatus(&d.Status, p)
	if apivalidation.IsDecremented(d.Status.CollisionCount, o.Status.CollisionCount) {
		value := int32(0)
		if d.Status.CollisionCount != nil {
			value = *d.Status.CollisionCount
		}
		errs = append(errs, field.Invalid(p.Child("collisionCount"), value, "cannot be decremented"))
	}
	return errs
}

// tableGenerator is kube-apiserver's table generator of the internal
// types (pkg/printers/internalversion).
var tableGenerator = sync.OnceValue(func() *printers.HumanReadableGenerator {
	return printers.NewTableGenerator().With(printersinternal.AddHandlers)
})

// table is kubectl's table of a kind as kube-apiserver prints it: its
// objects converted to the internal type I (through V) and put in a list
// of them, printed wide (the priority-1 columns are what -o wide shows).
type table[V, I any] struct {
	list func(items []I) runtime.Object
}

func (t table[V, I]) ConvertToTable(_ context.Context, _ string, objs []*unstructured.Unstructured, noHeaders bool) (*metav1.Table, error) {
	items := make([]I, 0, len(objs))
	for _, u := range objs {
		v := new(V)
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, v); err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		in := new(I)
		if err := legacyscheme.Scheme.Convert(v, in, nil); err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		items = append(items, *in)
	}
	tbl, err := tableGenerator().GenerateTable(t.list(items), printers.GenerateOptions{Wide: true, NoHeaders: noHeaders})
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("table: %w", err))
	}
	for i := range tbl.Rows {
		tbl.Rows[i].Object = runtime.RawExtension{}
	}
	return tbl, nil
}
