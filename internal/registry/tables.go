package registry

import (
	"context"

	"github.com/crdserver/crdserver/internal/resource"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	crtable "k8s.io/apiextensions-apiserver/pkg/registry/customresource/tableconvertor"
	crdtable "k8s.io/apiextensions-apiserver/pkg/registry/customresourcedefinition/tableconvertor"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/rest"
)

// customResourceTable shows a CRD version's additionalPrinterColumns, with
// Kubernetes' own printer-column code (JSONPath cells, types, priorities);
// a version without columns shows Age.
type customResourceTable map[string]rest.TableConvertor

func newCustomResourceTable(crd *apiextensionsv1.CustomResourceDefinition) customResourceTable {
	t := customResourceTable{}
	for _, v := range crd.Spec.Versions {
		cols := v.AdditionalPrinterColumns
		if len(cols) == 0 {
			cols = []apiextensionsv1.CustomResourceColumnDefinition{{
				Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp",
				Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"],
			}}
		}
		conv, err := crtable.New(cols)
		if err != nil {
			// CRD validation refuses bad JSONPaths; keep the columns that
			// parsed, as Kubernetes does.
			continue
		}
		t[v.Name] = conv
	}
	return t
}

func (t customResourceTable) ConvertToTable(ctx context.Context, version string, objs []*unstructured.Unstructured, noHeaders bool) (*metav1.Table, error) {
	conv := t[version]
	if conv == nil {
		return resource.DefaultTable{}.ConvertToTable(ctx, version, objs, noHeaders)
	}
	list := &unstructured.UnstructuredList{Object: map[string]any{"apiVersion": "v1", "kind": "List"}}
	for _, o := range objs {
		list.Items = append(list.Items, *o)
	}
	return conv.ConvertToTable(ctx, list, &metav1.TableOptions{NoHeaders: noHeaders})
}

// crdTable is Kubernetes' table of CustomResourceDefinitions: Name, Scope,
// Versions, Created At (and Group, Kind, ShortNames, Established wide).
type crdTable struct{}

func (crdTable) ConvertToTable(ctx context.Context, _ string, objs []*unstructured.Unstructured, noHeaders bool) (*metav1.Table, error) {
	list := &apiextensions.CustomResourceDefinitionList{}
	for _, o := range objs {
		v1 := &apiextensionsv1.CustomResourceDefinition{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, v1); err != nil {
			return nil, err
		}
		in, err := toInternal(v1)
		if err != nil {
			return nil, err
		}
		list.Items = append(list.Items, *in)
	}
	return crdtable.New().ConvertToTable(ctx, list, &metav1.TableOptions{NoHeaders: noHeaders})
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
