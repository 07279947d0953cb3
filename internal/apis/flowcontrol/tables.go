package flowcontrol

import (
	"context"
	"sort"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/crdserver/crdserver/internal/resource"
)

// The tables of kubectl get, as Kubernetes prints them. FlowSchemas:
// Name, PriorityLevel, MatchingPrecedence, DistinguisherMethod, Age,
// MissingPL (the Dangling condition), in the order they are matched
// (precedence, then name). PriorityLevelConfigurations: Name, Type,
// NominalConcurrencyShares, Queues, HandSize, QueueLengthLimit, Age.

var objectMetaDoc = metav1.ObjectMeta{}.SwaggerDoc()

type flowSchemaTable struct{}

func (flowSchemaTable) ConvertToTable(_ context.Context, _ string, objs []*unstructured.Unstructured, noHeaders bool) (*metav1.Table, error) {
	tbl := &metav1.Table{}
	if !noHeaders {
		tbl.ColumnDefinitions = []metav1.TableColumnDefinition{
			{Name: "Name", Type: "string", Format: "name", Description: objectMetaDoc["name"]},
			{Name: "PriorityLevel", Type: "string", Description: flowcontrolv1.PriorityLevelConfigurationReference{}.SwaggerDoc()["name"]},
			{Name: "MatchingPrecedence", Type: "string", Description: flowcontrolv1.FlowSchemaSpec{}.SwaggerDoc()["matchingPrecedence"]},
			{Name: "DistinguisherMethod", Type: "string", Description: flowcontrolv1.FlowSchemaSpec{}.SwaggerDoc()["distinguisherMethod"]},
			{Name: "Age", Type: "string", Description: objectMetaDoc["creationTimestamp"]},
			{Name: "MissingPL", Type: "string", Description: "references a broken or non-existent PriorityLevelConfiguration"},
		}
	}
	schemas := make([]*flowcontrolv1.FlowSchema, 0, len(objs))
	for _, o := range objs {
		fs := &flowcontrolv1.FlowSchema{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, fs); err != nil {
			return nil, err
		}
		schemas = append(schemas, fs)
	}
	sort.SliceStable(schemas, func(i, j int) bool {
		a, b := schemas[i], schemas[j]
		if a.Spec.MatchingPrecedence != b.Spec.MatchingPrecedence {
			return a.Spec.MatchingPrecedence < b.Spec.MatchingPrecedence
		}
		return a.Name < b.Name
	})
	for _, fs := range schemas {
		method := "<none>"
		if fs.Spec.DistinguisherMethod != nil {
			method = string(fs.Spec.DistinguisherMethod.Type)
		}
		missing := "?"
		for _, c := range fs.Status.Conditions {
			if c.Type == flowcontrolv1.FlowSchemaConditionDangling {
				missing = string(c.Status)
				break
			}
		}
		tbl.Rows = append(tbl.Rows, metav1.TableRow{Cells: []any{fs.Name, fs.Spec.PriorityLevelConfiguration.Name,
			int64(fs.Spec.MatchingPrecedence), method, resource.Age(fs.CreationTimestamp), missing}})
	}
	return tbl, nil
}

type priorityLevelTable struct{}

func (priorityLevelTable) ConvertToTable(_ context.Context, _ string, objs []*unstructured.Unstructured, noHeaders bool) (*metav1.Table, error) {
	tbl := &metav1.Table{}
	if !noHeaders {
		tbl.ColumnDefinitions = []metav1.TableColumnDefinition{
			{Name: "Name", Type: "string", Format: "name", Description: objectMetaDoc["name"]},
			{Name: "Type", Type: "string", Description: flowcontrolv1.PriorityLevelConfigurationSpec{}.SwaggerDoc()["type"]},
			{Name: "NominalConcurrencyShares", Type: "string", Description: flowcontrolv1.LimitedPriorityLevelConfiguration{}.SwaggerDoc()["nominalConcurrencyShares"]},
			{Name: "Queues", Type: "string", Description: flowcontrolv1.QueuingConfiguration{}.SwaggerDoc()["queues"]},
			{Name: "HandSize", Type: "string", Description: flowcontrolv1.QueuingConfiguration{}.SwaggerDoc()["handSize"]},
			{Name: "QueueLengthLimit", Type: "string", Description: flowcontrolv1.QueuingConfiguration{}.SwaggerDoc()["queueLengthLimit"]},
			{Name: "Age", Type: "string", Description: objectMetaDoc["creationTimestamp"]},
		}
	}
	for _, o := range objs {
		pl := &flowcontrolv1.PriorityLevelConfiguration{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, pl); err != nil {
			return nil, err
		}
		var ncs, queues, handSize, queueLengthLimit any = "<none>", "<none>", "<none>", "<none>"
		if l := pl.Spec.Limited; l != nil {
			if l.NominalConcurrencyShares != nil {
				ncs = int64(*l.NominalConcurrencyShares)
			} else {
				ncs = int64(0)
			}
			if q := l.LimitResponse.Queuing; q != nil {
				queues, handSize, queueLengthLimit = int64(q.Queues), int64(q.HandSize), int64(q.QueueLengthLimit)
			}
		}
		tbl.Rows = append(tbl.Rows, metav1.TableRow{Cells: []any{pl.Name, string(pl.Spec.Type), ncs, queues, handSize, queueLengthLimit,
			resource.Age(pl.CreationTimestamp)}})
	}
	return tbl, nil
}
