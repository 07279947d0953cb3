package admission

import (
	"context"
	"fmt"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestTypeChecker(t *testing.T) {
	e := newEnv(t, Options{})
	p := validatingPolicy("typed",
		admissionregistrationv1.Validation{Expression: "object.spec.replicas == 'five'"},
		admissionregistrationv1.Validation{Expression: "object.spec.replicas <= 5", MessageExpression: "object.spec.nope"})
	p.Spec.MatchConstraints.ResourceRules = widgetRules("v1")
	good := validatingPolicy("good", admissionregistrationv1.Validation{Expression: "object.spec.replicas <= 5"})
	good.Spec.MatchConstraints.ResourceRules = widgetRules("v1")
	for _, p := range []*admissionregistrationv1.ValidatingAdmissionPolicy{p, good} {
		if _, err := e.client.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(e.ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- e.adm.RunTypeChecker(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()

	var checked *admissionregistrationv1.ValidatingAdmissionPolicy
	eventually(t, func() error {
		var err error
		checked, err = e.client.AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(e.ctx, "typed", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if checked.Status.ObservedGeneration != 1 || checked.Status.TypeChecking == nil {
			return fmt.Errorf("status %+v", checked.Status)
		}
		return nil
	})
	warnings := checked.Status.TypeChecking.ExpressionWarnings
	if len(warnings) != 2 {
		t.Fatalf("warnings %+v, want 2", warnings)
	}
	if w := warnings[0]; w.FieldRef != "spec.validations[0].expression" || !strings.Contains(w.Warning, "example.com/v1, Kind=Widget: ERROR") || !strings.Contains(w.Warning, "no matching overload for '_==_'") {
		t.Errorf("warning %+v", w)
	}
	if w := warnings[1]; w.FieldRef != "spec.validations[1].messageExpression" || !strings.Contains(w.Warning, "undefined field 'nope'") {
		t.Errorf("warning %+v", w)
	}

	eventually(t, func() error {
		g, err := e.client.AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(e.ctx, "good", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if g.Status.ObservedGeneration != 1 || g.Status.TypeChecking == nil || len(g.Status.TypeChecking.ExpressionWarnings) != 0 {
			return fmt.Errorf("status %+v", g.Status)
		}
		return nil
	})
}
