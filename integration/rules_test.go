package integration

import (
	"net/http"
	"os"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/crdserver/crdserver/internal/fixtures"
)

// cronTabRulesCRD is the documentation's versioned CronTab
// (examples/crontab-conversion/crd.yaml), its webhook pointing nowhere:
// on crdserver its ConversionRules replace the webhook.
func cronTabRulesCRD(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	data, err := os.ReadFile("../examples/crontab-conversion/crd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return fixtures.DecodeCRD(t, fixtures.FillWebhook(string(data), "https://127.0.0.1:9/convert", nil))
}

const cronTabRules = `{"apiVersion":"conversion.crdserver.io/v1alpha1","kind":"ConversionRules",
 "metadata":{"name":"crontabs.example.com"},
 "spec":{"hub":"v1","versions":[{"name":"v1beta1","toHub":[{"split":{"from":".hostPort","to":[".host",".port"],"separator":":"}}]}]}}`

const rulesPath = "/apis/conversion.crdserver.io/v1alpha1/conversionrules"

func TestDeclarativeConversion(t *testing.T) {
	e := start(t)
	e.createCRD(cronTabRulesCRD(t))
	// Without rules the webhook is called, and it is not there.
	beta := "/apis/example.com/v1beta1/namespaces/default/crontabs"
	v1 := "/apis/example.com/v1/namespaces/default/crontabs"
	e.mustCreate(beta, `{"apiVersion":"example.com/v1beta1","kind":"CronTab","metadata":{"name":"c1"},"hostPort":"localhost:7070","spec":{"image":"i"}}`)
	if r := e.do("GET", v1+"/c1", ""); r.code != http.StatusInternalServerError {
		t.Fatalf("without rules: %d %s", r.code, r.body)
	}
	// With them, conversion is in process.
	e.mustCreate(rulesPath, cronTabRules)
	eventually(t, e.ctx, "the rules in use", func() (bool, error) {
		return e.do("GET", v1+"/c1", "").code == http.StatusOK, nil
	})
	got := e.do("GET", v1+"/c1", "").object(t)
	if got["host"] != "localhost" || got["port"] != "7070" || got["hostPort"] != nil || got["apiVersion"] != "example.com/v1" {
		t.Fatalf("v1: %v", got)
	}
	// Written in v1, stored in v1beta1, read back in both.
	e.mustCreate(v1, `{"apiVersion":"example.com/v1","kind":"CronTab","metadata":{"name":"c2"},"host":"example.com","port":"443"}`)
	if b := e.do("GET", beta+"/c2", "").object(t); b["hostPort"] != "example.com:443" {
		t.Fatalf("v1beta1: %v", b)
	}
	l := e.do("GET", v1, "").object(t)
	if items := l["items"].([]any); len(items) != 2 || items[1].(map[string]any)["port"] != "443" {
		t.Fatalf("list: %v", l)
	}
	// Rules that do not fit the CRD are refused.
	st := expectStatus(t, e.do("POST", rulesPath, `{"apiVersion":"conversion.crdserver.io/v1alpha1","kind":"ConversionRules",
		"metadata":{"name":"crontabs.example.com"},"spec":{"hub":"v2","versions":[]}}`), http.StatusUnprocessableEntity, metav1.StatusReasonInvalid, "")
	if !strings.Contains(st.Message, `spec.hub: Unsupported value: "v2": supported values: "v1beta1", "v1"`) {
		t.Fatalf("bad hub: %s", st.Message)
	}
	st = expectStatus(t, e.do("POST", rulesPath, strings.Replace(cronTabRules, "crontabs.example.com", "nothing.example.com", 1)), http.StatusUnprocessableEntity, metav1.StatusReasonInvalid, "")
	if !strings.Contains(st.Message, `metadata.name: Not found: "nothing.example.com"`) {
		t.Fatalf("no CRD: %s", st.Message)
	}
	// Deleting the rules brings the CRD's own strategy back.
	if r := e.do("DELETE", rulesPath+"/crontabs.example.com", ""); r.code != http.StatusOK {
		t.Fatalf("delete: %d %s", r.code, r.body)
	}
	eventually(t, e.ctx, "the webhook back", func() (bool, error) {
		return e.do("GET", v1+"/c1", "").code == http.StatusInternalServerError, nil
	})
}

// TestCRDChangeCheckedAgainstRules: a CRD change that its ConversionRules
// can no longer convert without loss, or that they no longer fit, is
// reported (Warning headers; 422 where enforced).
func TestCRDChangeCheckedAgainstRules(t *testing.T) {
	e := start(t)
	e.createCRD(cronTabRulesCRD(t))
	e.mustCreate(rulesPath, cronTabRules)
	crdPath := "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/crontabs.example.com"
	patch := func(p string) response {
		return e.do("PATCH", crdPath, p, "Content-Type", "application/json-patch+json")
	}
	// v1 without port: the port of a v1beta1 hostPort has nowhere to go.
	r := patch(`[{"op":"remove","path":"/spec/versions/1/schema/openAPIV3Schema/properties/port"},
		{"op":"remove","path":"/spec/versions/1/schema/openAPIV3Schema/x-kubernetes-validations"}]`)
	warnings := strings.Join(r.header.Values("Warning"), "\n")
	if r.code != http.StatusOK || !strings.Contains(warnings, `conversion-loses-field version=v1 path=.hostPort: v1beta1→v1→v1beta1 under the ConversionRules: changed hostPort`) {
		t.Fatalf("port removed: %d %s", r.code, warnings)
	}
	// A new version that the rules do not cover.
	r = patch(`[{"op":"add","path":"/spec/versions/-","value":{"name":"v2","served":true,"storage":false,"schema":{"openAPIV3Schema":{"type":"object"}}}}]`)
	warnings = strings.Join(r.header.Values("Warning"), "\n")
	if r.code != http.StatusOK || !strings.Contains(warnings, `conversion-rules-invalid version= path=: the ConversionRules crontabs.example.com no longer fit the CRD (spec.versions: Required value: version \"v2\" has no rules)`) {
		t.Fatalf("v2 added: %d %s", r.code, warnings)
	}
	// Enforced, the same change is refused, with the finding as its cause.
	r = patch(`[{"op":"add","path":"/metadata/annotations","value":{"crdserver.io/enforce-compatibility":"true"}},
		{"op":"add","path":"/spec/versions/-","value":{"name":"v3","served":true,"storage":false,"schema":{"openAPIV3Schema":{"type":"object"}}}}]`)
	st := expectStatus(t, r, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid, "")
	if !strings.Contains(st.Message, `conversion-rules-invalid`) {
		t.Fatalf("enforced: %s", st.Message)
	}
}
