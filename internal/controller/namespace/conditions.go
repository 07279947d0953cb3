package namespace

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// conditionTypes are the conditions a terminating namespace carries, in the
// order kube-controller-manager's namespace controller first adds them.
var conditionTypes = []corev1.NamespaceConditionType{
	corev1.NamespaceDeletionDiscoveryFailure,
	corev1.NamespaceDeletionGVParsingFailure,
	corev1.NamespaceDeletionContentFailure,
	corev1.NamespaceContentRemaining,
	corev1.NamespaceFinalizersRemaining,
}

// The reasons and messages of the conditions' False ("all went well")
// variants, as Kubernetes words them.
var (
	okReasons = map[corev1.NamespaceConditionType]string{
		corev1.NamespaceDeletionDiscoveryFailure: "ResourcesDiscovered",
		corev1.NamespaceDeletionGVParsingFailure: "ParsedGroupVersions",
		corev1.NamespaceDeletionContentFailure:   "ContentDeleted",
		corev1.NamespaceContentRemaining:         "ContentRemoved",
		corev1.NamespaceFinalizersRemaining:      "ContentHasNoFinalizers",
	}
	okMessages = map[corev1.NamespaceConditionType]string{
		corev1.NamespaceDeletionDiscoveryFailure: "All resources successfully discovered",
		corev1.NamespaceDeletionGVParsingFailure: "All legacy kube types successfully parsed",
		corev1.NamespaceDeletionContentFailure:   "All content successfully deleted, may be waiting on finalization",
		corev1.NamespaceContentRemaining:         "All content successfully removed",
		corev1.NamespaceFinalizersRemaining:      "All content-preserving finalizers finished",
	}
)

// The reasons of the conditions' True variants.
const (
	reasonContentDeletionFailed = "ContentDeletionFailed"
	reasonSomeResourcesRemain   = "SomeResourcesRemain"
	reasonSomeFinalizersRemain  = "SomeFinalizersRemain"
)

// content is what one pass over a terminating namespace found left in it.
type content struct {
	// remaining counts the objects left per resource, keyed
	// "<resource>.<group>" ("configmaps." for the core group).
	remaining map[string]int
	// finalizers counts the objects left per finalizer they carry.
	finalizers map[string]int
	// errs are the failures to delete or list a resource's objects.
	errs []error
}

func newContent() *content {
	return &content{remaining: map[string]int{}, finalizers: map[string]int{}}
}

// add records n objects of resource.group left, with their finalizers.
func (c *content) add(resource, group string, n int, finalizers map[string]int) {
	if n == 0 {
		return
	}
	c.remaining[resource+"."+group] += n
	for f, k := range finalizers {
		if k > 0 {
			c.finalizers[f] += k
		}
	}
}

// left reports whether anything remains in the namespace.
func (c *content) left() bool { return len(c.remaining) > 0 }

// conditions are the conditions that say something went wrong or remains;
// the types missing from them are to be set to their False variant.
func (c *content) conditions(now metav1.Time) []corev1.NamespaceCondition {
	var out []corev1.NamespaceCondition
	add := func(t corev1.NamespaceConditionType, reason, message string) {
		out = append(out, corev1.NamespaceCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: now, Reason: reason, Message: message})
	}
	if len(c.remaining) > 0 {
		add(corev1.NamespaceContentRemaining, reasonSomeResourcesRemain,
			"Some resources are remaining: "+counted(c.remaining, "%s has %d resource instances"))
	}
	if len(c.finalizers) > 0 {
		add(corev1.NamespaceFinalizersRemaining, reasonSomeFinalizersRemain,
			"Some content in the namespace has finalizers remaining: "+counted(c.finalizers, "%s in %d resource instances"))
	}
	if len(c.errs) > 0 {
		msgs := make([]string, 0, len(c.errs))
		for _, err := range c.errs {
			msgs = append(msgs, err.Error())
		}
		sort.Strings(msgs)
		add(corev1.NamespaceDeletionContentFailure, reasonContentDeletionFailed,
			fmt.Sprintf("Failed to delete all resource types, %d remaining: %v", len(c.errs), strings.Join(msgs, ", ")))
	}
	return out
}

// counted lists the counts of m, each as format (name, count) words it,
// sorted and joined by commas.
func counted(m map[string]int, format string) string {
	parts := make([]string, 0, len(m))
	for name, n := range m {
		parts = append(parts, fmt.Sprintf(format, name, n))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// updateConditions sets every condition type of the namespace deletion in
// status: to its condition in found, or else to its False variant. A
// condition not there yet is appended; one whose status changes gets now as
// its lastTransitionTime; one whose reason or message alone changes keeps
// its lastTransitionTime. It reports whether status changed.
func updateConditions(status *corev1.NamespaceStatus, found []corev1.NamespaceCondition, now metav1.Time) bool {
	changed := false
	for _, t := range conditionTypes {
		want := getCondition(found, t)
		if want == nil {
			want = &corev1.NamespaceCondition{
				Type:               t,
				Status:             corev1.ConditionFalse,
				LastTransitionTime: now,
				Reason:             okReasons[t],
				Message:            okMessages[t],
			}
		}
		old := getCondition(status.Conditions, t)
		switch {
		case old == nil:
			status.Conditions = append(status.Conditions, *want)
			changed = true
		case old.Status != want.Status || old.Reason != want.Reason || old.Message != want.Message:
			if old.Status != want.Status {
				old.LastTransitionTime = now
			}
			old.Status, old.Reason, old.Message = want.Status, want.Reason, want.Message
			changed = true
		}
	}
	return changed
}

func getCondition(conditions []corev1.NamespaceCondition, t corev1.NamespaceConditionType) *corev1.NamespaceCondition {
	for i := range conditions {
		if conditions[i].Type == t {
			return &conditions[i]
		}
	}
	return nil
}
