package flowcontrol

import (
	"encoding/json"
	"testing"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	"k8s.io/apiserver/pkg/apis/flowcontrol/bootstrap"
)

// The errors of invalid objects, as kube-apiserver 1.37 words them (its
// answers to the same bodies).
func TestValidationMessages(t *testing.T) {
	tests := []struct {
		name, body string
		want       []string
	}{
		{"queuing with Reject, lendable over 100", `{"metadata":{"name":"a"},"spec":{"type":"Limited","exempt":{},"limited":{"lendablePercent":101,"limitResponse":{"type":"Reject","queuing":{"queues":4}}}}}`,
			[]string{"spec.limited.lendablePercent: Invalid value: 101: must be between 0 and 100, inclusive", "spec.exempt: Forbidden", "spec.limited.limitResponse.queuing: Forbidden"}},
		{"no type", `{"metadata":{"name":"a"},"spec":{}}`, []string{"spec.type: Required value"}},
		{"unknown type", `{"metadata":{"name":"a"},"spec":{"type":"Bogus","limited":{"limitResponse":{"type":"Queue","queuing":{"queues":2,"handSize":5,"queueLengthLimit":-1}}}}}`,
			[]string{`spec.type: Unsupported value: "Bogus": supported values: "Exempt", "Limited"`, "spec.limited: Forbidden"}},
		{"too much entropy", `{"metadata":{"name":"a"},"spec":{"type":"Limited","limited":{"limitResponse":{"type":"Queue","queuing":{"queues":128,"handSize":100}}}}}`,
			[]string{"spec.limited.limitResponse.queuing.handSize: Invalid value: 100: required entropy bits of deckSize 128 and handSize 100 should not be greater than 60"}},
		{"Exempt not named exempt", `{"metadata":{"name":"a"},"spec":{"type":"Exempt","limited":{"limitResponse":{"type":"Bad"}}}}`,
			[]string{"spec.type: Invalid value: \"Exempt\": must be 'Exempt' if and only if `name` is 'exempt'", "spec.limited: Forbidden"}},
		{"catch-all changed", `{"metadata":{"name":"catch-all"},"spec":{"type":"Limited","limited":{"nominalConcurrencyShares":6,"limitResponse":{"type":"Reject"}}}}`,
			[]string{`spec: Invalid value: {"Type":"Limited","Limited":{"NominalConcurrencyShares":6,"LimitResponse":{"Type":"Reject","Queuing":null},"LendablePercent":0,"BorrowingLimitPercent":null},"Exempt":null}: spec of 'catch-all' must equal the fixed value`}},
	}
	for _, tt := range tests {
		var pl flowcontrolv1.PriorityLevelConfiguration
		if err := json.Unmarshal([]byte(tt.body), &pl); err != nil {
			t.Fatal(err)
		}
		DefaultPriorityLevel(&pl)
		errs := ValidatePriorityLevel(&pl)
		if len(errs) != len(tt.want) {
			t.Errorf("%s: %v", tt.name, errs)
			continue
		}
		for i, e := range errs {
			if e.Error() != tt.want[i] {
				t.Errorf("%s: error %d\n got %s\nwant %s", tt.name, i, e.Error(), tt.want[i])
			}
		}
	}
}

// Kubernetes' bootstrap objects, defaulted, are valid, and each mandatory
// one equals its fixed spec.
func TestBootstrapValid(t *testing.T) {
	for _, pl := range append(bootstrap.MandatoryPriorityLevelConfigurations, bootstrap.SuggestedPriorityLevelConfigurations...) {
		pl = pl.DeepCopy()
		DefaultPriorityLevel(pl)
		if errs := ValidatePriorityLevel(pl); len(errs) != 0 {
			t.Errorf("%s: %v", pl.Name, errs)
		}
	}
	for _, fs := range append(bootstrap.MandatoryFlowSchemas, bootstrap.SuggestedFlowSchemas...) {
		fs = fs.DeepCopy()
		DefaultFlowSchema(fs)
		if errs := ValidateFlowSchema(fs); len(errs) != 0 {
			t.Errorf("%s: %v", fs.Name, errs)
		}
	}
}

func TestDefaults(t *testing.T) {
	pl := &flowcontrolv1.PriorityLevelConfiguration{Spec: flowcontrolv1.PriorityLevelConfigurationSpec{
		Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{LimitResponse: flowcontrolv1.LimitResponse{Queuing: &flowcontrolv1.QueuingConfiguration{}}},
		Exempt:  &flowcontrolv1.ExemptPriorityLevelConfiguration{},
	}}
	DefaultPriorityLevel(pl)
	l, q, e := pl.Spec.Limited, pl.Spec.Limited.LimitResponse.Queuing, pl.Spec.Exempt
	if *l.NominalConcurrencyShares != 30 || *l.LendablePercent != 0 || l.BorrowingLimitPercent != nil ||
		q.HandSize != 8 || q.Queues != 64 || q.QueueLengthLimit != 50 || *e.NominalConcurrencyShares != 0 || *e.LendablePercent != 0 {
		t.Errorf("defaults: %+v %+v %+v", l, q, e)
	}
	fs := &flowcontrolv1.FlowSchema{}
	DefaultFlowSchema(fs)
	if fs.Spec.MatchingPrecedence != 1000 {
		t.Errorf("matchingPrecedence %d", fs.Spec.MatchingPrecedence)
	}
}
