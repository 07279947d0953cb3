package admissionregistration

import (
	"context"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/crdserver/crdserver/internal/resource"
)

// The tables of kubectl get, as Kubernetes prints them: webhook
// configurations (Name, Webhooks, Age), policies (Name, Validations or
// Mutations, ParamKind, Age) and bindings (Name, PolicyName, ParamRef,
// Age). None has wide columns.

var objectMetaDoc = metav1.ObjectMeta{}.SwaggerDoc()

func nameColumn() metav1.TableColumnDefinition {
	return metav1.TableColumnDefinition{Name: "Name", Type: "string", Format: "name", Description: objectMetaDoc["name"]}
}

func ageColumn() metav1.TableColumnDefinition {
	return metav1.TableColumnDefinition{Name: "Age", Type: "string", Description: objectMetaDoc["creationTimestamp"]}
}

// table makes a table of objs with the columns and the cells of each row.
func table(objs []*unstructured.Unstructured, noHeaders bool, columns []metav1.TableColumnDefinition, cells func(o *unstructured.Unstructured) []any) *metav1.Table {
	tbl := &metav1.Table{}
	if !noHeaders {
		tbl.ColumnDefinitions = columns
	}
	for _, o := range objs {
		tbl.Rows = append(tbl.Rows, metav1.TableRow{Cells: cells(o)})
	}
	return tbl
}

type webhookTable struct{}

func (webhookTable) ConvertToTable(_ context.Context, _ string, objs []*unstructured.Unstructured, noHeaders bool) (*metav1.Table, error) {
	columns := []metav1.TableColumnDefinition{
		nameColumn(),
		{Name: "Webhooks", Type: "integer", Description: "Webhooks indicates the number of webhooks registered in this configuration"},
		ageColumn(),
	}
	return table(objs, noHeaders, columns, func(o *unstructured.Unstructured) []any {
		hooks, _, _ := unstructured.NestedSlice(o.Object, "webhooks")
		return []any{o.GetName(), int64(len(hooks)), resource.Age(o.GetCreationTimestamp())}
	}), nil
}

type policyTable struct{ validating bool }

func (t policyTable) ConvertToTable(_ context.Context, _ string, objs []*unstructured.Unstructured, noHeaders bool) (*metav1.Table, error) {
	count := metav1.TableColumnDefinition{Name: "Mutations", Type: "integer", Description: "Mutation indicates the number of mutations rules defined in this configuration"}
	list := "mutations"
	if t.validating {
		count = metav1.TableColumnDefinition{Name: "Validations", Type: "integer", Description: "Validations indicates the number of validation rules defined in this configuration"}
		list = "validations"
	}
	columns := []metav1.TableColumnDefinition{
		nameColumn(),
		count,
		{Name: "ParamKind", Type: "string", Description: "ParamKind specifies the kind of resources used to parameterize this policy"},
		ageColumn(),
	}
	return table(objs, noHeaders, columns, func(o *unstructured.Unstructured) []any {
		items, _, _ := unstructured.NestedSlice(o.Object, "spec", list)
		paramKind := "<unset>"
		if pk, ok, _ := unstructured.NestedMap(o.Object, "spec", "paramKind"); ok {
			apiVersion, _ := pk["apiVersion"].(string)
			kind, _ := pk["kind"].(string)
			paramKind = apiVersion + "/" + kind
		}
		return []any{o.GetName(), int64(len(items)), paramKind, resource.Age(o.GetCreationTimestamp())}
	}), nil
}

type bindingTable struct{}

func (bindingTable) ConvertToTable(_ context.Context, _ string, objs []*unstructured.Unstructured, noHeaders bool) (*metav1.Table, error) {
	columns := []metav1.TableColumnDefinition{
		nameColumn(),
		{Name: "PolicyName", Type: "string", Description: "PolicyName indicates the policy definition which the policy binding binded to"},
		{Name: "ParamRef", Type: "string", Description: "ParamRef indicates the param resource which sets the configuration param"},
		ageColumn(),
	}
	return table(objs, noHeaders, columns, func(o *unstructured.Unstructured) []any {
		policy, _, _ := unstructured.NestedString(o.Object, "spec", "policyName")
		param := "<unset>"
		if m, ok, _ := unstructured.NestedMap(o.Object, "spec", "paramRef"); ok {
			ref := &admissionv1.ParamRef{}
			if runtime.DefaultUnstructuredConverter.FromUnstructured(m, ref) == nil {
				param = paramRefString(ref)
			}
		}
		return []any{o.GetName(), policy, param, resource.Age(o.GetCreationTimestamp())}
	}), nil
}

// paramRefString is a binding's ParamRef cell: namespace/name ("*" for
// any namespace), or its selector.
func paramRefString(ref *admissionv1.ParamRef) string {
	switch {
	case ref.Name != "" && ref.Namespace != "":
		return ref.Namespace + "/" + ref.Name
	case ref.Name != "":
		// Whether the param is cluster-scoped is not known here.
		return "*/" + ref.Name
	case ref.Selector != nil:
		return ref.Selector.String()
	}
	return "<unset>"
}
