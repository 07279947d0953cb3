package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	svmv1 "k8s.io/api/storagemigration/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
)

// runMigrate starts a storage-version migration of one resource on a
// running server, shows its progress and waits for its end.
func runMigrate(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("crdserver migrate", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: crdserver migrate [flags] <plural>.<group>\n\nRewrites every stored object of the resource in its current storage version,\nthen leaves only that version in the CRD's status.storedVersions.")
		fs.PrintDefaults()
	}
	kubeconfig := fs.String("kubeconfig", defaultKubeconfig(), "kubeconfig of the server")
	timeout := fs.Duration("timeout", time.Hour, "how long to wait for the migration")
	// Flags may come before or after the resource, as with kubectl.
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(positional) != 1 || !strings.Contains(positional[0], ".") {
		fs.Usage()
		return errors.New("name the resource as <plural>.<group>")
	}
	target := positional[0]
	plural, group, _ := strings.Cut(target, ".")
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return err
	}
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	svms := client.Resource(svmv1.SchemeGroupVersion.WithResource("storageversionmigrations"))
	m := &svmv1.StorageVersionMigration{
		TypeMeta:   metav1.TypeMeta{APIVersion: svmv1.SchemeGroupVersion.String(), Kind: "StorageVersionMigration"},
		ObjectMeta: metav1.ObjectMeta{GenerateName: target + "-"},
		Spec:       svmv1.StorageVersionMigrationSpec{Resource: metav1.GroupResource{Group: group, Resource: plural}},
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(m)
	if err != nil {
		return err
	}
	created, err := svms.Create(ctx, &unstructured.Unstructured{Object: u}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	name := created.GetName()
	fmt.Fprintf(out, "storageversionmigration.storagemigration.k8s.io/%s created\n", name)
	w, err := svms.Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String(), ResourceVersion: created.GetResourceVersion()})
	if err != nil {
		return err
	}
	defer w.Stop()
	last := ""
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("migration %s did not end within %v", name, *timeout)
		case ev, ok := <-w.ResultChan():
			if !ok {
				return fmt.Errorf("the watch of migration %s ended", name)
			}
			obj, ok := ev.Object.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			var got svmv1.StorageVersionMigration
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &got); err != nil {
				return err
			}
			conds := got.Status.Conditions
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
		}
	}
}

func defaultKubeconfig() string {
	if k := os.Getenv("KUBECONFIG"); k != "" {
		return strings.Split(k, string(os.PathListSeparator))[0]
	}
	return filepath.Join("crdserver-data", "admin.kubeconfig")
}
