package apps

import (
	"context"
	"fmt"
	"strings"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	"k8s.io/kubernetes/pkg/apis/apps"
	_ "k8s.io/kubernetes/pkg/apis/apps/install" // apps' defaults and conversions in legacyscheme
	appsvalidation "k8s.io/kubernetes/pkg/apis/apps/validation"
	"k8s.io/kubernetes/pkg/printers"
	printersinternal "k8s.io/kubernetes/pkg/printers/internalversion"
	"k8s.io/kubernetes/pkg/registry/apps/daemonset"
	"k8s.io/kubernetes/pkg/registry/apps/deployment"
	"k8s.io/kubernetes/pkg/registry/apps/replicaset"
	"k8s.io/kubernetes/pkg/registry/apps/statefulset"

	"github.com/crdserver/crdserver/internal/conversion"
	"github.com/crdserver/crdserver/internal/resource"
	"github.com/crdserver/crdserver/internal/store"
)

// The etcd keys of the apps resources (kube-apiserver's).
const (
	DeploymentPrefix  = "/registry/deployments/"
	ReplicaSetPrefix  = "/registry/replicasets/"
	StatefulSetPrefix = "/registry/statefulsets/"
	DaemonSetPrefix   = "/registry/daemonsets/"
)

// AddToScheme registers the apps/v1 Go types (for protobuf and the
// built-in type converter).
var AddToScheme = appsv1.AddToScheme

// Resources are the apps/v1 resources, in kube-apiserver's discovery
// order, each served from the cache newCache makes for its key prefix.
func Resources(newCache func(prefix string) *store.Cache) []*resource.Resource {
	return []*resource.Resource{
		DaemonSets(newCache(DaemonSetPrefix)),
		Deployments(newCache(DeploymentPrefix)),
		ReplicaSets(newCache(ReplicaSetPrefix)),
		StatefulSets(newCache(StatefulSetPrefix)),
	}
}

// Deployments is the deployments resource, with the status and scale
// subresources.
func Deployments(cache *store.Cache) *resource.Resource {
	return newResource(kindInfo[appsv1.Deployment, apps.Deployment]{
		plural: "deployments", kind: "Deployment", short: "deploy", prefix: DeploymentPrefix, scale: true,
		kube: deployment.Strategy, status: deployment.StatusStrategy,
		list: func(items []apps.Deployment) runtime.Object { return &apps.DeploymentList{Items: items} },
	}, cache)
}

// ReplicaSets is the replicasets resource, with the status and scale
// subresources.
func ReplicaSets(cache *store.Cache) *resource.Resource {
	return newResource(kindInfo[appsv1.ReplicaSet, apps.ReplicaSet]{
		plural: "replicasets", kind: "ReplicaSet", short: "rs", prefix: ReplicaSetPrefix, scale: true,
		kube: replicaset.Strategy, status: replicaset.StatusStrategy,
		list: func(items []apps.ReplicaSet) runtime.Object { return &apps.ReplicaSetList{Items: items} },
	}, cache)
}

// StatefulSets is the statefulsets resource, with the status and scale
// subresources; their names are DNS labels.
func StatefulSets(cache *store.Cache) *resource.Resource {
	r := newResource(kindInfo[appsv1.StatefulSet, apps.StatefulSet]{
		plural: "statefulsets", kind: "StatefulSet", short: "sts", prefix: StatefulSetPrefix, scale: true,
		kube: statefulset.Strategy, status: statefulset.StatusStrategy,
		list: func(items []apps.StatefulSet) runtime.Object { return &apps.StatefulSetList{Items: items} },
	}, cache)
	r.ValidateName = appsvalidation.ValidateStatefulSetName
	return r
}

// DaemonSets is the daemonsets resource, with the status subresource.
func DaemonSets(cache *store.Cache) *resource.Resource {
	return newResource(kindInfo[appsv1.DaemonSet, apps.DaemonSet]{
		plural: "daemonsets", kind: "DaemonSet", short: "ds", prefix: DaemonSetPrefix,
		kube: daemonset.Strategy, status: daemonset.StatusStrategy,
		list: func(items []apps.DaemonSet) runtime.Object { return &apps.DaemonSetList{Items: items} },
	}, cache)
}

// kindInfo describes one apps kind: its v1 type V, internal type I and
// kube's strategies for it.
type kindInfo[V, I any] struct {
	plural, kind, short, prefix string
	// scale serves the scale subresource (spec.replicas, status.replicas,
	// spec.selector).
	scale  bool
	kube   kubeStrategy
	status kubeStatusStrategy
	list   func(items []I) runtime.Object
}

func newResource[V, I any](k kindInfo[V, I], cache *store.Cache) *resource.Resource {
	v := &resource.Version{Name: "v1", Status: true}
	if k.scale {
		v.Scale = &resource.Scale{SpecReplicasPath: ".spec.replicas", StatusReplicasPath: ".status.replicas", Selector: specSelector}
	}
	return &resource.Resource{
		Group:                    appsv1.GroupName,
		Plural:                   k.plural,
		Singular:                 strings.ToLower(k.kind),
		Kind:                     k.kind,
		ListKind:                 k.kind + "List",
		ShortNames:               []string{k.short},
		Categories:               []string{"all"},
		Namespaced:               true,
		Versions:                 []*resource.Version{v},
		StorageVersion:           "v1",
		KeyPrefix:                k.prefix,
		Cache:                    cache,
		Strategy:                 strategy[V, I]{kind: k.kind, kube: k.kube, status: k.status},
		Converter:                conversion.None{},
		Table:                    table[V, I]{list: k.list},
		FieldManagers:            resource.BuiltinFieldManagers(appsv1.GroupName, k.kind, true),
		AllowUnconditionalUpdate: true,
		Protobuf:                 true,
		StrategicMergeType:       new(V),
		Verbs:                    []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"},
	}
}

// specSelector is the Scale's status.selector: spec.selector as a label
// selector string, as kube's scale subresources give it.
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

// defaults applies apps/v1's defaults (SetObjectDefaults_<Kind> of
// k8s.io/kubernetes/pkg/apis/apps/v1, registered in legacyscheme).
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
