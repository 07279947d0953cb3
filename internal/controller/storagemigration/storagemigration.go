// Package storagemigration is the controller of StorageVersionMigrations:
// it rewrites every object of a resource in its current storage version,
// through the API, then trims the CRD's status.storedVersions, as
// kube-controller-manager's storage version migrator does.
//
// Objects are read a page at a time in the storage version (one batch of
// conversions per page, remembered by the watch cache) and each is written
// back unchanged, guarded by its resourceVersion. A write of an object
// already in the storage version stores nothing; one that stores counts as
// migrated.
package storagemigration

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	svmv1 "k8s.io/api/storagemigration/v1"
	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"

	"github.com/crdserver/crdserver/internal/controller"
	"github.com/crdserver/crdserver/internal/resource"
	"github.com/crdserver/crdserver/internal/store"
)

var migrationsGVR = svmv1.SchemeGroupVersion.WithResource("storageversionmigrations")

// fieldManager is the manager the migration's writes are made as.
const fieldManager = "storage-version-migrator-controller"

// pageSize is how many objects are read, converted and written at a time;
// writers is how many are written at once.
const (
	pageSize = 500
	writers  = 4
)

// Reader is what the controller reads: the served resources, caught up
// with every CRD change.
type Reader interface {
	controller.Reader
	// CatchUp waits until the Index reflects every stored CRD.
	CatchUp(ctx context.Context) error
}

// Controller runs StorageVersionMigrations.
type Controller struct {
	reader     Reader
	migrations *resource.Resource
	crds       apiextensionsclient.Interface
	dynamic    dynamic.Interface
	log        *slog.Logger
	queue      controller.Queue
}

// New returns the controller of the migrations resource; it writes
// through the two clients.
func New(reader Reader, migrations *resource.Resource, crds apiextensionsclient.Interface, dyn dynamic.Interface, log *slog.Logger) *Controller {
	return &Controller{reader: reader, migrations: migrations, crds: crds, dynamic: dyn, log: log, queue: controller.NewQueue("storage-version-migration")}
}

// Name implements controller.Controller.
func (c *Controller) Name() string { return "storage-version-migration" }

// Run implements controller.Controller.
func (c *Controller) Run(ctx context.Context) {
	check := func(it *store.Item) {
		if m, err := decode(it.Bytes()); err == nil && !ended(m) {
			c.queue.Add(m.Name)
		}
	}
	go store.Follow(ctx, c.migrations.Cache, func(items []*store.Item, _ int64) {
		for _, it := range items {
			check(it)
		}
	}, func(ev store.Event) {
		if ev.Type != store.Deleted {
			check(ev.Item)
		}
	})
	controller.Work(ctx, c.Name(), c.queue, 2, c.log, c.sync)
}

func decode(raw []byte) (*svmv1.StorageVersionMigration, error) {
	obj, err := resource.DecodeObject(raw)
	if err != nil {
		return nil, err
	}
	m := &svmv1.StorageVersionMigration{}
	return m, resource.ToTyped(obj, m)
}

func ended(m *svmv1.StorageVersionMigration) bool {
	return meta.IsStatusConditionTrue(m.Status.Conditions, string(svmv1.MigrationSucceeded)) ||
		meta.IsStatusConditionTrue(m.Status.Conditions, string(svmv1.MigrationFailed))
}

// setStatus changes a migration's status with f, retrying conflicts as
// client-go's controllers do; it returns the migration as f saw it.
func (c *Controller) setStatus(ctx context.Context, name string, f func(m *svmv1.StorageVersionMigration)) (*svmv1.StorageVersionMigration, error) {
	client := c.dynamic.Resource(migrationsGVR)
	var m *svmv1.StorageVersionMigration
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		u, err := client.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		m = &svmv1.StorageVersionMigration{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, m); err != nil {
			return err
		}
		if ended(m) {
			return nil
		}
		f(m)
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(m)
		if err != nil {
			return err
		}
		_, err = client.UpdateStatus(ctx, &unstructured.Unstructured{Object: obj}, metav1.UpdateOptions{FieldManager: fieldManager})
		return err
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

func running(msg string) metav1.Condition {
	return metav1.Condition{Type: string(svmv1.MigrationRunning), Status: metav1.ConditionTrue, Reason: "MigrationRunning", Message: msg}
}

// sync runs one migration to its end and records it in its status.
func (c *Controller) sync(ctx context.Context, name string) error {
	m, err := c.setStatus(ctx, name, func(m *svmv1.StorageVersionMigration) {
		meta.SetStatusCondition(&m.Status.Conditions, running("the migration is running"))
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil || ended(m) {
		return err
	}
	gr := m.Spec.Resource
	progress := func(rv string, done, total, rewritten int) {
		_, _ = c.setStatus(ctx, name, func(m *svmv1.StorageVersionMigration) {
			if m.Status.ResourceVersion == "" {
				m.Status.ResourceVersion = rv
			}
			meta.SetStatusCondition(&m.Status.Conditions, running(fmt.Sprintf("checked %d of %d objects, rewrote %d", done, total, rewritten)))
		})
	}
	migrated, err := c.migrate(ctx, gr.Group, gr.Resource, progress)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	_, serr := c.setStatus(ctx, name, func(m *svmv1.StorageVersionMigration) {
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
	return serr
}

// migrate rewrites every object of a resource in its storage version,
// then trims the CRD's storedVersions to it.
func (c *Controller) migrate(ctx context.Context, group, plural string, progress func(rv string, done, total, rewritten int)) (int, error) {
	// Migrate to the storage version of the newest CRD.
	if err := c.reader.CatchUp(ctx); err != nil {
		return 0, err
	}
	ix := c.reader.Index()
	var res *resource.Resource
	for _, x := range ix.Resources {
		if x.Group == group && x.Plural == plural && x.Cache != nil {
			res = x
		}
	}
	if res == nil {
		return 0, fmt.Errorf("the server does not serve %s.%s", plural, group)
	}
	crdName := ""
	for name, r := range ix.CRDResources {
		if r == res {
			crdName = name
		}
	}
	client := c.dynamic.Resource(controller.StorageGVR(res))
	var migrated atomic.Int64
	seen, total := 0, -1
	opts := metav1.ListOptions{Limit: pageSize}
	for {
		page, err := client.List(ctx, opts)
		if err != nil {
			return int(migrated.Load()), err
		}
		if total < 0 {
			total = len(page.Items)
			if n := page.GetRemainingItemCount(); n != nil {
				total += int(*n)
			}
		}
		if err := c.rewrite(ctx, res, client, page.Items, &migrated); err != nil {
			return int(migrated.Load()), err
		}
		seen += len(page.Items)
		progress(page.GetResourceVersion(), seen, total, int(migrated.Load()))
		if page.GetContinue() == "" {
			break
		}
		opts.Continue = page.GetContinue()
	}
	if crdName != "" {
		if err := c.trimStoredVersions(ctx, crdName, res.StorageVersion); err != nil {
			return int(migrated.Load()), err
		}
	}
	return int(migrated.Load()), nil
}

// rewrite writes objects back as they are, a few at a time.
func (c *Controller) rewrite(ctx context.Context, res *resource.Resource, client dynamic.NamespaceableResourceInterface, items []unstructured.Unstructured, migrated *atomic.Int64) error {
	work := make(chan *unstructured.Unstructured)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failed error
	for i := 0; i < writers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for obj := range work {
				rc := dynamic.ResourceInterface(client)
				if res.Namespaced {
					rc = client.Namespace(obj.GetNamespace())
				}
				stored, err := rewriteOne(ctx, rc, obj)
				if err != nil {
					mu.Lock()
					failed = errors.Join(failed, fmt.Errorf("%s/%s: %w", obj.GetNamespace(), obj.GetName(), err))
					mu.Unlock()
				} else if stored {
					migrated.Add(1)
				}
			}
		}()
	}
	for i := range items {
		work <- &items[i]
	}
	close(work)
	wg.Wait()
	return failed
}

// rewriteOne writes one object back, guarded by its resourceVersion, and
// reports whether that stored anything. An object written meanwhile is
// read again; one deleted meanwhile needs nothing.
func rewriteOne(ctx context.Context, rc dynamic.ResourceInterface, obj *unstructured.Unstructured) (bool, error) {
	for attempt := 0; ; attempt++ {
		out, err := rc.Update(ctx, obj, metav1.UpdateOptions{FieldManager: fieldManager})
		switch {
		case err == nil:
			return out.GetResourceVersion() != obj.GetResourceVersion(), nil
		case apierrors.IsNotFound(err):
			return false, nil
		case apierrors.IsConflict(err) && attempt < 10:
			if obj, err = rc.Get(ctx, obj.GetName(), metav1.GetOptions{}); err != nil {
				if apierrors.IsNotFound(err) {
					return false, nil
				}
				return false, err
			}
		default:
			return false, err
		}
	}
}

// trimStoredVersions leaves only the storage version in a CRD's
// storedVersions, once no object is stored in another.
func (c *Controller) trimStoredVersions(ctx context.Context, name, storageVersion string) error {
	crds := c.crds.ApiextensionsV1().CustomResourceDefinitions()
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
		_, err = crds.UpdateStatus(ctx, crd, metav1.UpdateOptions{FieldManager: fieldManager})
		if err == nil || !apierrors.IsConflict(err) || attempt > 10 {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
}
