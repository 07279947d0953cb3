package customresource

import (
	"context"
	"sync"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	crtable "k8s.io/apiextensions-apiserver/pkg/registry/customresource/tableconvertor"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/crdserver/crdserver/internal/resource"
)

// table shows a CRD version's additionalPrinterColumns, with
// Kubernetes' own printer-column code (JSONPath cells, types, priorities);
// a version without columns shows Age. A version's columns are parsed
// when a Table of it is first asked for: most CRDs are never shown so.
type table map[string]*columns

// columns are one version's printer columns and, once parsed, their
// converter (nil when they do not parse).
type columns struct {
	defs []apiextensionsv1.CustomResourceColumnDefinition
	once sync.Once
	conv rest.TableConvertor
}

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
		t[v.Name] = &columns{defs: cols}
	}
	return t
}

// converter is the version's converter, nil if its columns do not parse
// (CRD validation refuses bad JSONPaths).
func (c *columns) converter() rest.TableConvertor {
	c.once.Do(func() {
		if conv, err := crtable.New(c.defs); err == nil {
			c.conv = conv
		}
	})
	return c.conv
}

func (t table) ConvertToTable(ctx context.Context, version string, objs []*unstructured.Unstructured, noHeaders bool) (*metav1.Table, error) {
	var conv rest.TableConvertor
	if cols := t[version]; cols != nil {
		conv = cols.converter()
	}
	if conv == nil {
		return resource.DefaultTable{}.ConvertToTable(ctx, version, objs, noHeaders)
	}
	list := &unstructured.UnstructuredList{Object: map[string]any{"apiVersion": "v1", "kind": "List"}}
	for _, o := range objs {
		list.Items = append(list.Items, *o)
	}
	return conv.ConvertToTable(ctx, list, &metav1.TableOptions{NoHeaders: noHeaders})
}
