package registry

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/crdserver/crdserver/internal/jsonraw"
	"github.com/crdserver/crdserver/internal/resource"
	"github.com/crdserver/crdserver/internal/store"
	svmv1 "k8s.io/api/storagemigration/v1"
	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

const migrationPrefix = "/registry/storagemigration.k8s.io/storageversionmigrations/"

var migrationsGVR = svmv1.SchemeGroupVersion.WithResource("storageversionmigrations")

func migrationResource(cache *store.Cache) *resource.Resource {
	return &resource.Resource{
		Group:          svmv1.GroupName,
		Plural:         "storageversionmigrations",
		Singular:       "storageversionmigration",
		Kind:           "StorageVersionMigration",
		ListKind:       "StorageVersionMigrationList",
		Versions:       []*resource.Version{{Name: "v1", Status: true}, {Name: "v1beta1", Status: true}},
		StorageVersion: "v1",
		KeyPrefix:      migrationPrefix,
		Cache:          cache,
		Strategy:       migrationStrategy{},
		Converter:      resource.ApiVersionConverter{},
		FieldManagers:  builtinFieldManagers(svmv1.GroupName, "StorageVersionMigration", true),
		Protobuf:       true,
		Verbs:          []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"},
	}
}

func toMigration(obj *resource.Object) (*svmv1.StorageVersionMigration, error) {
	m := &svmv1.StorageVersionMigration{}
	err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.ToUnstructured(), m)
	return m, err
}

func fromMigration(m *svmv1.StorageVersionMigration, obj *resource.Object) {
	av := obj.APIVersion()
	u, _ := runtime.DefaultUnstructuredConverter.ToUnstructured(m)
	delete(u, "metadata")
	u["apiVersion"], u["kind"] = av, "StorageVersionMigration"
	obj.Content = u
	obj.Meta = m.ObjectMeta
}

// migrationStrategy holds the rules of StorageVersionMigrations: the spec
// is immutable, the status belongs to the migration controller.
type migrationStrategy struct{}

func (migrationStrategy) Normalize(obj *resource.Object) ([]error, error) {
	m := &svmv1.StorageVersionMigration{}
	strict, err := decodeTyped(obj, m)
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("StorageVersionMigration in version %q cannot be handled as a StorageVersionMigration: %v", obj.APIVersion(), err))
	}
	fromMigration(m, obj)
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

// followMigrations runs every StorageVersionMigration that has not ended.
func (r *Registry) followMigrations(ctx context.Context) {
	check := func(it *store.Item) {
		obj, err := resource.DecodeObject(it.Raw)
		if err != nil {
			return
		}
		m, err := toMigration(obj)
		if err != nil || meta.IsStatusConditionTrue(m.Status.Conditions, string(svmv1.MigrationSucceeded)) ||
			meta.IsStatusConditionTrue(m.Status.Conditions, string(svmv1.MigrationFailed)) {
			return
		}
		name := m.Name
		r.startOnce("svm/"+name, func() { r.migrate(ctx, name) })
	}
	follow(ctx, r.migrations.Cache, func(items []*store.Item, _ int64) {
		for _, it := range items {
			check(it)
		}
	}, func(ev store.Event) {
		if ev.Type != store.Deleted {
			check(ev.Item)
		}
	})
}

// migrate runs one migration to its end and records it in its status.
func (r *Registry) migrate(ctx context.Context, name string) {
	client := r.dyn.Resource(migrationsGVR)
	setStatus := func(f func(m *svmv1.StorageVersionMigration)) error {
		for {
			u, err := client.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			m := &svmv1.StorageVersionMigration{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, m); err != nil {
				return err
			}
			f(m)
			obj, _ := runtime.DefaultUnstructuredConverter.ToUnstructured(m)
			_, err = client.UpdateStatus(ctx, &unstructured.Unstructured{Object: obj}, metav1.UpdateOptions{})
			if !apierrors.IsConflict(err) {
				return err
			}
		}
	}
	var gr metav1.GroupResource
	if err := setStatus(func(m *svmv1.StorageVersionMigration) {
		gr = m.Spec.Resource
		if m.Status.ResourceVersion == "" {
			if rev, err := r.store.CurrentRevision(ctx); err == nil {
				m.Status.ResourceVersion = strconv.FormatInt(rev, 10)
			}
		}
		meta.SetStatusCondition(&m.Status.Conditions, metav1.Condition{
			Type: string(svmv1.MigrationRunning), Status: metav1.ConditionTrue,
			Reason: "MigrationRunning", Message: "the migration is running",
		})
	}); err != nil {
		r.log.Warn("storage migration", "migration", name, "err", err)
		return
	}
	progress := func(done, total, rewritten int) {
		_ = setStatus(func(m *svmv1.StorageVersionMigration) {
			meta.SetStatusCondition(&m.Status.Conditions, metav1.Condition{
				Type: string(svmv1.MigrationRunning), Status: metav1.ConditionTrue,
				Reason:  "MigrationRunning",
				Message: fmt.Sprintf("checked %d of %d objects, rewrote %d", done, total, rewritten),
			})
		})
	}
	migrated, err := r.rewriteAll(ctx, schema.GroupResource{Group: gr.Group, Resource: gr.Resource}, progress)
	_ = setStatus(func(m *svmv1.StorageVersionMigration) {
		meta.SetStatusCondition(&m.Status.Conditions, metav1.Condition{
			Type: string(svmv1.MigrationRunning), Status: metav1.ConditionFalse,
			Reason: "MigrationEnded", Message: fmt.Sprintf("migrated %d objects", migrated),
		})
		if err != nil {
			meta.SetStatusCondition(&m.Status.Conditions, metav1.Condition{
				Type: string(svmv1.MigrationFailed), Status: metav1.ConditionTrue,
				Reason: "MigrationFailed", Message: err.Error(),
			})
			return
		}
		meta.SetStatusCondition(&m.Status.Conditions, metav1.Condition{
			Type: string(svmv1.MigrationSucceeded), Status: metav1.ConditionTrue,
			Reason: "MigrationSucceeded", Message: fmt.Sprintf("migrated %d objects to the storage version", migrated),
		})
	})
}

// rewriteAll rewrites every stored object of a resource that is not in the
// current storage version: read in pages, converted in batches, written
// back unchanged with a revision precondition, conflicts retried. Then the
// CRD's storedVersions are trimmed to the storage version.
func (r *Registry) rewriteAll(ctx context.Context, gr schema.GroupResource, progress func(done, total, rewritten int)) (int, error) {
	// Migrate to the storage version of the newest CRD.
	if err := r.CatchUp(ctx); err != nil {
		return 0, err
	}
	var res *resource.Resource
	var crdName string
	for _, x := range r.Index().Resources {
		if x.Group == gr.Group && x.Plural == gr.Resource && x.Cache != nil {
			res = x
		}
	}
	for name, crd := range r.Index().CRDs {
		if crd.Spec.Group == gr.Group && crd.Status.AcceptedNames.Plural == gr.Resource {
			crdName = name
		}
	}
	if res == nil {
		return 0, fmt.Errorf("the server does not serve %s", gr)
	}
	storageVersion := res.StorageVersion
	target := res.APIVersion(storageVersion)
	start, end := res.KeyPrefix, store.PrefixEnd(res.KeyPrefix)
	rev, migrated, seen := int64(0), 0, 0
	total := -1
	for {
		page, err := r.store.List(ctx, start, end, rev, 500)
		if err != nil {
			return migrated, err
		}
		rev = page.Revision
		if total < 0 {
			total = len(page.KVs) + int(page.Remaining)
		}
		var stale []*store.KV
		var raws [][]byte
		for _, kv := range page.KVs {
			av, _, err := jsonraw.String(kv.Value, "apiVersion")
			if err == nil && av != target {
				raw, err := jsonraw.SetResourceVersion(kv.Value, kv.ModRevision)
				if err != nil {
					return migrated, err
				}
				stale = append(stale, kv)
				raws = append(raws, raw)
			}
		}
		n, err := r.rewrite(ctx, res, target, stale, raws)
		migrated += n
		seen += len(page.KVs)
		if err != nil {
			return migrated, err
		}
		progress(seen, total, migrated)
		if !page.More || len(page.KVs) == 0 {
			break
		}
		start = page.KVs[len(page.KVs)-1].Key + "\x00"
	}
	if crdName != "" {
		if err := r.trimStoredVersions(ctx, crdName, storageVersion); err != nil {
			return migrated, err
		}
	}
	return migrated, nil
}

// rewrite converts a batch of stored objects to the storage version and
// writes each back, guarded by its revision.
func (r *Registry) rewrite(ctx context.Context, res *resource.Resource, target string, kvs []*store.KV, raws [][]byte) (int, error) {
	if len(kvs) == 0 {
		return 0, nil
	}
	converted, err := res.Converter.Convert(ctx, raws, target)
	if err != nil {
		return 0, err
	}
	n := 0
	for i, kv := range kvs {
		obj, err := resource.DecodeObject(converted[i])
		if err != nil {
			return n, err
		}
		obj.Meta.ResourceVersion = ""
		data, err := obj.Encode()
		if err != nil {
			return n, err
		}
		_, latest, err := r.store.Update(ctx, kv.Key, data, kv.ModRevision)
		switch {
		case err == nil:
			n++
		case errors.Is(err, store.ErrNotFound):
			// Deleted meanwhile: nothing to migrate.
		case errors.Is(err, store.ErrConflict):
			// Written meanwhile; migrate what is there now, if it still
			// needs it.
			av, _, _ := jsonraw.String(latest.Value, "apiVersion")
			if av == target {
				continue
			}
			raw, err := jsonraw.SetResourceVersion(latest.Value, latest.ModRevision)
			if err != nil {
				return n, err
			}
			m, err := r.rewrite(ctx, res, target, []*store.KV{latest}, [][]byte{raw})
			n += m
			if err != nil {
				return n, err
			}
		default:
			return n, err
		}
	}
	return n, nil
}

// trimStoredVersions leaves only the storage version in a CRD's
// storedVersions, once no object is stored in another.
func (r *Registry) trimStoredVersions(ctx context.Context, name, storageVersion string) error {
	crds := r.crdClient.ApiextensionsV1().CustomResourceDefinitions()
	for attempt := 0; ; attempt++ {
		crd, err := crds.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		current, err := apihelpers.GetCRDStorageVersion(crd)
		if err != nil {
			return err
		}
		if current != storageVersion {
			return fmt.Errorf("the storage version changed from %s to %s during the migration", storageVersion, current)
		}
		if slices.Equal(crd.Status.StoredVersions, []string{storageVersion}) {
			return nil
		}
		crd.Status.StoredVersions = []string{storageVersion}
		_, err = crds.UpdateStatus(ctx, crd, metav1.UpdateOptions{})
		if err == nil || !apierrors.IsConflict(err) || attempt > 10 {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
}
