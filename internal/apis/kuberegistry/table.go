package kuberegistry

import (
	"context"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	"k8s.io/kubernetes/pkg/printers"
	printersinternal "k8s.io/kubernetes/pkg/printers/internalversion"
)

// tableGenerator is kube-apiserver's table generator of the internal
// types (pkg/printers/internalversion).
var tableGenerator = sync.OnceValue(func() *printers.HumanReadableGenerator {
	return printers.NewTableGenerator().With(printersinternal.AddHandlers)
})

// Table is kubectl's table of a kind as kube-apiserver prints it: its
// objects converted to the internal type I (through V) and put in a list
// of them, printed wide (the priority-1 columns are what -o wide shows).
type Table[V, I any] struct {
	List func(items []I) runtime.Object
}

// ConvertToTable prints objs with kube's printer of the internal type.
func (t Table[V, I]) ConvertToTable(_ context.Context, _ string, objs []*unstructured.Unstructured, noHeaders bool) (*metav1.Table, error) {
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
	tbl, err := tableGenerator().GenerateTable(t.List(items), printers.GenerateOptions{Wide: true, NoHeaders: noHeaders})
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("table: %w", err))
	}
	for i := range tbl.Rows {
		tbl.Rows[i].Object = runtime.RawExtension{}
	}
	return tbl, nil
}
