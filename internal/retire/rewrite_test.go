package retire

import (
	"encoding/json"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func fieldsOf(raw string) *metav1.FieldsV1 { return metav1.NewFieldsV1(raw) }

func TestRelabelMergesEntriesThatShareAnIdentity(t *testing.T) {
	t1 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	t2 := metav1.NewTime(time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC))
	entries := []metav1.ManagedFieldsEntry{
		// One Apply entry per manager: only relabelled.
		{Manager: "tool", Operation: metav1.ManagedFieldsOperationApply, APIVersion: "g/v1beta1", Time: &t1, FieldsType: "FieldsV1", FieldsV1: fieldsOf(`{"f:spec":{"f:size":{}}}`)},
		// An Update at v1beta1 and one at v1 of the same manager: merged.
		{Manager: "ctl", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "g/v1beta1", Time: &t2, FieldsType: "FieldsV1", FieldsV1: fieldsOf(`{"f:spec":{"f:color":{}}}`)},
		{Manager: "ctl", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "g/v1", Time: &t1, FieldsType: "FieldsV1", FieldsV1: fieldsOf(`{"f:metadata":{"f:labels":{"f:a":{}}}}`)},
		// Of a subresource: kept apart.
		{Manager: "ctl", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "g/v1beta1", Subresource: "status", Time: &t1, FieldsType: "FieldsV1", FieldsV1: fieldsOf(`{"f:status":{}}`)},
	}
	got, err := relabel(entries, "g/v1beta1", "g/v1")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("got %d entries, want 3: %+v", len(got), got)
	}
	for _, e := range got {
		if e.APIVersion != "g/v1" {
			t.Errorf("%s/%s is at %s", e.Manager, e.Subresource, e.APIVersion)
		}
	}
	var merged map[string]any
	if err := json.Unmarshal(got[1].FieldsV1.GetRawBytes(), &merged); err != nil {
		t.Fatal(err)
	}
	if merged["f:spec"] == nil || merged["f:metadata"] == nil {
		t.Errorf("the merged entry's fields: %s", got[1].FieldsV1.GetRawBytes())
	}
	if !got[1].Time.Equal(&t2) {
		t.Errorf("the merged entry's time is %v, want the later %v", got[1].Time, t2)
	}
	if got[2].Subresource != "status" {
		t.Errorf("the status entry: %+v", got[2])
	}
}

func TestFixesTouchOnlyWhatNamesTheVersion(t *testing.T) {
	obj := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "x", "resourceVersion": "5"}}}
	obj.SetOwnerReferences([]metav1.OwnerReference{
		{APIVersion: "g/v1beta1", Kind: "Gizmo", Name: "a", UID: "1"},
		{APIVersion: "g/v1beta1", Kind: "Other", Name: "b", UID: "2"},
	})
	ops, err := ownerReferencesFix("Gizmo", "g/v1beta1", "g/v1")(obj)
	if err != nil || len(ops) != 1 {
		t.Fatalf("ops %v, err %v", ops, err)
	}
	refs := ops[0].Value.([]metav1.OwnerReference)
	if refs[0].APIVersion != "g/v1" || refs[1].APIVersion != "g/v1beta1" {
		t.Errorf("rewritten references: %+v", refs)
	}
	if ops, _ := ownerReferencesFix("Gizmo", "g/v1alpha1", "g/v1")(obj); ops != nil {
		t.Errorf("a fix of a version nothing names: %v", ops)
	}
	if ops, _ := managedFieldsFix("g/v1beta1", "g/v1")(obj); ops != nil {
		t.Errorf("a managedFields fix of an object without entries: %v", ops)
	}
}
