package core

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/crdserver/crdserver/internal/conversion"
	"github.com/crdserver/crdserver/internal/resource"
	"github.com/crdserver/crdserver/internal/store"
)

// NamespacePrefix is where namespaces live in etcd.
const NamespacePrefix = "/registry/namespaces/"

// SystemNamespaces exist from the start, as in Kubernetes; all but
// kube-node-lease cannot be deleted.
var (
	SystemNamespaces    = []string{metav1.NamespaceDefault, metav1.NamespaceSystem, metav1.NamespacePublic, corev1.NamespaceNodeLease}
	undeletedNamespaces = []string{metav1.NamespaceDefault, metav1.NamespaceSystem, metav1.NamespacePublic}
)

// Terminations remembers the namespaces this server marked Terminating a
// moment ago, so that the NamespaceLifecycle check of a create does not
// trust a cache that has not yet seen the deletion (Kubernetes'
// NamespaceLifecycle admission does the same, for 30 seconds).
type Terminations struct {
	mu sync.Mutex
	at map[string]time.Time
}

// terminationTTL is how long a deletion makes creates read the namespace
// from storage.
const terminationTTL = 30 * time.Second

func (t *Terminations) add(name string) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	now := time.Now()
	if t.at == nil {
		t.at = map[string]time.Time{}
	}
	for n, at := range t.at {
		if now.Sub(at) > terminationTTL {
			delete(t.at, n)
		}
	}
	t.at[name] = now
}

func (t *Terminations) recent(name string) bool {
	if t == nil {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	at, ok := t.at[name]
	return ok && time.Since(at) <= terminationTTL
}

// Namespaces is the namespaces resource, served from cache; the
// deletions it marks are remembered in terms.
func Namespaces(cache *store.Cache, terms *Terminations) *resource.Resource {
	return &resource.Resource{
		Group:                    "",
		Plural:                   "namespaces",
		Singular:                 "namespace",
		Kind:                     "Namespace",
		ListKind:                 "NamespaceList",
		ShortNames:               []string{"ns"},
		Versions:                 []*resource.Version{{Name: "v1", Status: true}},
		StorageVersion:           "v1",
		KeyPrefix:                NamespacePrefix,
		Cache:                    cache,
		Strategy:                 namespaceStrategy{terms: terms},
		Converter:                conversion.None{},
		Table:                    namespaceTable{},
		FieldManagers:            resource.BuiltinFieldManagers("", "Namespace", true),
		AllowUnconditionalUpdate: true,
		Protobuf:                 true,
		StrategicMergeType:       &corev1.Namespace{},
		ValidateName:             validation.ValidateNamespaceName,
		Verbs:                    []string{"create", "delete", "get", "list", "patch", "update", "watch"},
	}
}

// namespaceStrategy holds Kubernetes' rules for Namespace objects.
type namespaceStrategy struct{ terms *Terminations }

func toNamespace(obj *resource.Object) (*corev1.Namespace, error) {
	ns := &corev1.Namespace{}
	return ns, resource.ToTyped(obj, ns)
}

// Normalize decodes a body through the Namespace type.
func (namespaceStrategy) Normalize(obj *resource.Object) ([]error, error) {
	ns := &corev1.Namespace{}
	strict, err := resource.DecodeStrict(obj, ns)
	if err == nil {
		err = resource.FromTyped(ns, obj)
	}
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("Namespace in version \"v1\" cannot be handled as a Namespace: %v", err))
	}
	return strict, nil
}

func edit(obj *resource.Object, f func(ns *corev1.Namespace)) {
	ns, err := toNamespace(obj)
	if err != nil {
		return
	}
	f(ns)
	_ = resource.FromTyped(ns, obj)
}

func (namespaceStrategy) PrepareForCreate(_ context.Context, obj *resource.Object) {
	edit(obj, func(ns *corev1.Namespace) {
		ns.Status = corev1.NamespaceStatus{Phase: corev1.NamespaceActive}
		if !slices.Contains(ns.Spec.Finalizers, corev1.FinalizerKubernetes) {
			ns.Spec.Finalizers = append(ns.Spec.Finalizers, corev1.FinalizerKubernetes)
		}
		setNameLabel(ns)
	})
}

func setNameLabel(ns *corev1.Namespace) {
	if ns.Labels == nil {
		ns.Labels = map[string]string{}
	}
	ns.Labels[corev1.LabelMetadataName] = ns.Name
}

func (namespaceStrategy) PrepareForUpdate(_ context.Context, obj, old *resource.Object) {
	o, err := toNamespace(old)
	if err != nil {
		return
	}
	edit(obj, func(ns *corev1.Namespace) {
		ns.Spec.Finalizers = o.Spec.Finalizers
		ns.Status = o.Status
		setNameLabel(ns)
	})
}

func (namespaceStrategy) PrepareForStatusUpdate(_ context.Context, obj, old *resource.Object) {
	o, err := toNamespace(old)
	if err != nil {
		return
	}
	edit(obj, func(ns *corev1.Namespace) {
		ns.Spec = o.Spec
		metav1.ResetObjectMetaForStatus(&ns.ObjectMeta, &o.ObjectMeta)
	})
}

func (namespaceStrategy) PrepareForFinalize(_ context.Context, obj, old *resource.Object) {
	o, err := toNamespace(old)
	if err != nil {
		return
	}
	edit(obj, func(ns *corev1.Namespace) {
		ns.Status = o.Status
		ns.ObjectMeta = o.ObjectMeta
	})
}

func validateNamespace(obj *resource.Object) field.ErrorList {
	ns, err := toNamespace(obj)
	if err != nil {
		return field.ErrorList{field.Invalid(field.NewPath(""), nil, err.Error())}
	}
	var errs field.ErrorList
	for i, f := range ns.Spec.Finalizers {
		errs = append(errs, validation.ValidateFinalizerName(string(f), field.NewPath("spec", "finalizers").Index(i))...)
	}
	return errs
}

func (namespaceStrategy) Validate(_ context.Context, obj *resource.Object) field.ErrorList {
	return validateNamespace(obj)
}

func (namespaceStrategy) ValidateUpdate(_ context.Context, obj, _ *resource.Object) field.ErrorList {
	return validateNamespace(obj)
}

func (namespaceStrategy) ValidateStatusUpdate(_ context.Context, obj, _ *resource.Object) field.ErrorList {
	return validateNamespace(obj)
}

// BeforeDelete marks a namespace Terminating; the namespace controller
// empties it and then removes it.
func (s namespaceStrategy) BeforeDelete(_ context.Context, obj *resource.Object) (bool, error) {
	if slices.Contains(undeletedNamespaces, obj.Meta.Name) {
		return false, apierrors.NewForbidden(corev1.Resource("namespaces"), obj.Meta.Name, errors.New("this namespace may not be deleted"))
	}
	ns, err := toNamespace(obj)
	if err != nil {
		return false, apierrors.NewInternalError(err)
	}
	if ns.DeletionTimestamp == nil {
		// No deletionGracePeriodSeconds: kube-apiserver's namespace
		// deletion sets only the timestamp.
		now := metav1.Now().Rfc3339Copy()
		ns.DeletionTimestamp = &now
		ns.Status.Phase = corev1.NamespaceTerminating
		if err := resource.FromTyped(ns, obj); err != nil {
			return false, apierrors.NewInternalError(err)
		}
		s.terms.add(ns.Name)
		return true, nil
	}
	return len(ns.Spec.Finalizers) > 0, nil
}

// Finalized: a namespace goes once its spec.finalizers are gone too.
func (namespaceStrategy) Finalized(obj *resource.Object) bool {
	ns, err := toNamespace(obj)
	return err == nil && len(ns.Spec.Finalizers) == 0
}

// namespaceTable is kubectl's table of namespaces: Name, Status, Age.
type namespaceTable struct{}

func (namespaceTable) ConvertToTable(_ context.Context, _ string, objs []*unstructured.Unstructured, noHeaders bool) (*metav1.Table, error) {
	tbl := &metav1.Table{}
	if !noHeaders {
		tbl.ColumnDefinitions = []metav1.TableColumnDefinition{
			{Name: "Name", Type: "string", Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]},
			{Name: "Status", Type: "string", Description: "The status of the namespace"},
			{Name: "Age", Type: "string", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]},
		}
	}
	for _, o := range objs {
		phase, _, _ := unstructured.NestedString(o.Object, "status", "phase")
		tbl.Rows = append(tbl.Rows, metav1.TableRow{Cells: []any{o.GetName(), phase, resource.Age(o.GetCreationTimestamp())}})
	}
	return tbl, nil
}

// NamespaceLifecycle is Kubernetes' NamespaceLifecycle admission for
// creates: no new object in a namespace that does not exist or is being
// terminated.
type NamespaceLifecycle struct {
	// Namespaces is the namespaces resource (its cache is read).
	Namespaces *resource.Resource
	// Store is read when the cache lags: a namespace created a moment
	// ago, or one this server marked Terminating (Terminations).
	Store        store.Interface
	Terminations *Terminations
}

// CheckCreate implements resource.NamespaceChecker.
func (n NamespaceLifecycle) CheckCreate(ctx context.Context, gr schema.GroupResource, objName, name string) error {
	key := n.Namespaces.Key("", name)
	it, _ := n.Namespaces.Cache.Get(key)
	var raw []byte
	if it != nil && n.Terminations.recent(name) {
		it = nil // the cache may not have seen the deletion yet
	}
	if it != nil {
		raw = it.Bytes()
	} else {
		kv, _, err := n.Store.Get(ctx, key, 0)
		if errors.Is(err, store.ErrNotFound) {
			return apierrors.NewNotFound(corev1.Resource("namespaces"), name)
		}
		if err != nil {
			return apierrors.NewInternalError(err)
		}
		raw = kv.Value
	}
	obj, err := resource.DecodeObject(raw)
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	if obj.Meta.DeletionTimestamp != nil {
		err := apierrors.NewForbidden(gr, objName, fmt.Errorf("unable to create new content in namespace %s because it is being terminated", name))
		err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{
			Type:    corev1.NamespaceTerminatingCause,
			Message: fmt.Sprintf("namespace %s is being terminated", name),
			Field:   "metadata.namespace",
		})
		return err
	}
	return nil
}
