package customresource

import (
	"context"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	crtable "k8s.io/apiextensions-apiserver/pkg/registry/customresource/tableconvertor"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/crdserver/crdserver/internal/resource"
)

// table shows a CRD version's additionalPrinterColumns, with
// Kubernetes' own printer-column code (JSONPath cells, types, priorities);
// a version without columns shows Age.
type table map[string]rest.TableConvertor

func newTable(crd *apiextensionsv1.CustomResourceDefinition) table {
	t := table{}
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

func (t table) ConvertToTable(ctx context.Context, version string, objs []*unstructured.Unstructured, noHeaders bool) (*metav1.Table, error) {
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
