package retire

import (
	"context"
	"fmt"
	"io"

	svmv1 "k8s.io/api/storagemigration/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
)

var svmGVR = svmv1.SchemeGroupVersion.WithResource("storageversionmigrations")

// Migrate rewrites every stored object of a resource in its storage
// version with a StorageVersionMigration — the one already running for
// the resource, if there is one, else a new one — and waits for its end,
// telling out its progress.
func (c *Client) Migrate(ctx context.Context, group, plural string, out io.Writer) error {
	svms := c.dyn.Resource(svmGVR)
	list, err := svms.List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	var running *unstructured.Unstructured
	for i := range list.Items {
		m, err := decodeSVM(&list.Items[i])
		if err != nil {
			return err
		}
		if m.Spec.Resource.Group == group && m.Spec.Resource.Resource == plural && !finished(m) {
			running = &list.Items[i]
		}
	}
	if running != nil {
		fmt.Fprintf(out, "storageversionmigration.storagemigration.k8s.io/%s is running: waiting for it\n", running.GetName())
	} else {
		m := &svmv1.StorageVersionMigration{
			TypeMeta:   metav1.TypeMeta{APIVersion: svmv1.SchemeGroupVersion.String(), Kind: "StorageVersionMigration"},
			ObjectMeta: metav1.ObjectMeta{GenerateName: plural + "." + group + "-"},
			Spec:       svmv1.StorageVersionMigrationSpec{Resource: metav1.GroupResource{Group: group, Resource: plural}},
		}
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(m)
		if err != nil {
			return err
		}
		if running, err = svms.Create(ctx, &unstructured.Unstructured{Object: u}, metav1.CreateOptions{}); err != nil {
			return err
		}
		fmt.Fprintf(out, "storageversionmigration.storagemigration.k8s.io/%s created\n", running.GetName())
	}
	name := running.GetName()
	w, err := svms.Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String(), ResourceVersion: running.GetResourceVersion()})
	if err != nil {
		return err
	}
	defer w.Stop()
	last := ""
	// The object as created or listed may already be finished.
	ev := running
	for {
		m, err := decodeSVM(ev)
		if err != nil {
			return err
		}
		conds := m.Status.Conditions
		if c := meta.FindStatusCondition(conds, string(svmv1.MigrationFailed)); c != nil && c.Status == metav1.ConditionTrue {
			return fmt.Errorf("migration %s failed: %s", name, c.Message)
		}
		if c := meta.FindStatusCondition(conds, string(svmv1.MigrationSucceeded)); c != nil && c.Status == metav1.ConditionTrue {
			fmt.Fprintf(out, "succeeded: %s\n", c.Message)
			return nil
		}
		if c := meta.FindStatusCondition(conds, string(svmv1.MigrationRunning)); c != nil && c.Message != last {
			last = c.Message
			fmt.Fprintf(out, "running: %s\n", c.Message)
		}
		for ev = nil; ev == nil; {
			select {
			case <-ctx.Done():
				return fmt.Errorf("migration %s did not end: %w", name, ctx.Err())
			case e, ok := <-w.ResultChan():
				if !ok {
					return fmt.Errorf("the watch of migration %s ended", name)
				}
				ev, _ = e.Object.(*unstructured.Unstructured)
			}
		}
	}
}

func decodeSVM(u *unstructured.Unstructured) (*svmv1.StorageVersionMigration, error) {
	var m svmv1.StorageVersionMigration
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &m); err != nil {
		return nil, err
	}
	return &m, nil
}

func finished(m *svmv1.StorageVersionMigration) bool {
	return meta.IsStatusConditionTrue(m.Status.Conditions, string(svmv1.MigrationSucceeded)) ||
		meta.IsStatusConditionTrue(m.Status.Conditions, string(svmv1.MigrationFailed))
}
