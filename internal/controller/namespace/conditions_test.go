package namespace

import (
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestUpdateConditions(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Minute))
	t2 := metav1.NewTime(t0.Add(2 * time.Minute))

	// The first pass adds all five, in Kubernetes' order.
	found := newContent()
	found.add("configmaps", "", 1, map[string]int{"example.com/hold": 1})
	var status corev1.NamespaceStatus
	if !updateConditions(&status, found.conditions(t0), t0) {
		t.Fatal("no change reported")
	}
	mustConds(t, "first pass", conds(&corev1.Namespace{Status: status}), stuckOnConfigMap)

	// The same again changes nothing, not even a time.
	if updateConditions(&status, found.conditions(t1), t1) {
		t.Fatal("a change reported for the same content")
	}
	for _, c := range status.Conditions {
		if !c.LastTransitionTime.Equal(&t0) {
			t.Fatalf("%s: lastTransitionTime %v", c.Type, c.LastTransitionTime)
		}
	}

	// A new message with the same status keeps the time.
	found = newContent()
	found.add("configmaps", "", 2, map[string]int{"example.com/hold": 2})
	if !updateConditions(&status, found.conditions(t1), t1) {
		t.Fatal("no change reported")
	}
	c := getCondition(status.Conditions, corev1.NamespaceContentRemaining)
	if c.Message != "Some resources are remaining: configmaps. has 2 resource instances" || !c.LastTransitionTime.Equal(&t0) {
		t.Fatalf("after a new count: %+v", c)
	}

	// A failure makes one True, with its own time; the others stay.
	found.errs = []error{errors.New("b failed"), errors.New("a failed")}
	if !updateConditions(&status, found.conditions(t2), t2) {
		t.Fatal("no change reported")
	}
	c = getCondition(status.Conditions, corev1.NamespaceDeletionContentFailure)
	if c.Status != corev1.ConditionTrue || c.Reason != "ContentDeletionFailed" ||
		c.Message != "Failed to delete all resource types, 2 remaining: a failed, b failed" || !c.LastTransitionTime.Equal(&t2) {
		t.Fatalf("content failure: %+v", c)
	}
	if c := getCondition(status.Conditions, corev1.NamespaceContentRemaining); !c.LastTransitionTime.Equal(&t0) {
		t.Fatalf("unchanged condition got a new time: %+v", c)
	}
	if len(status.Conditions) != 5 {
		t.Fatalf("%d conditions", len(status.Conditions))
	}
}

// Conditions the namespace carries besides these five are left alone, and
// the five are appended after them.
func TestUpdateConditionsKeepsOthers(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC))
	status := corev1.NamespaceStatus{Conditions: []corev1.NamespaceCondition{{Type: "Other", Status: corev1.ConditionTrue, Reason: "Mine"}}}
	updateConditions(&status, nil, now)
	if len(status.Conditions) != 6 || status.Conditions[0].Type != "Other" || status.Conditions[1].Type != corev1.NamespaceDeletionDiscoveryFailure {
		t.Fatalf("conditions: %+v", status.Conditions)
	}
}
