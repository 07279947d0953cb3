package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
)

func TestAdmissionHookAllows(t *testing.T) {
	h := &admissionHook{protos: map[string]int{}}
	review := func(name string) *httptest.ResponseRecorder {
		body := fmt.Sprintf(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u-%s","name":%q,"operation":"CREATE",
			"object":{"apiVersion":"admission.crdbench.example.com/v1","kind":"Widget","metadata":{"name":%q}}}}`, name, name, name)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body)))
		return w
	}
	for _, name := range []string{"w-webhook-1-00000", admProbeObj, admProbeBig} {
		w := review(name)
		var out admissionv1.AdmissionReview
		if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil || w.Code != http.StatusOK {
			t.Fatalf("%s: %d %s %v", name, w.Code, w.Body, err)
		}
		if out.APIVersion != "admission.k8s.io/v1" || out.Kind != "AdmissionReview" || out.Response == nil ||
			!out.Response.Allowed || string(out.Response.UID) != "u-"+name {
			t.Errorf("%s: answer %s", name, w.Body)
		}
	}
	if c, p := h.calls, h.probes; c != 3 || p != 2 {
		t.Errorf("calls %d, probes %d; want 3 and 2", c, p)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/", strings.NewReader(`{"kind":"AdmissionReview"}`)))
	if w.Code != http.StatusBadRequest || h.bad != 1 {
		t.Errorf("a review without a request: %d, bad %d", w.Code, h.bad)
	}
}

func TestAdmissionObjects(t *testing.T) {
	var pol struct {
		Spec struct {
			MatchConstraints struct {
				ResourceRules []struct {
					APIGroups, Operations, Resources []string
				}
			}
			Validations []struct{ Expression string }
		}
	}
	if err := json.Unmarshal(admPolicy(admPolicyName(3), admExpression, "m"), &pol); err != nil {
		t.Fatal(err)
	}
	rr := pol.Spec.MatchConstraints.ResourceRules
	if len(rr) != 1 || rr[0].APIGroups[0] != admGroup || rr[0].Operations[0] != "CREATE" || rr[0].Resources[0] != "widgets" ||
		len(pol.Spec.Validations) != 1 || pol.Spec.Validations[0].Expression != "object.spec.size <= 100" {
		t.Errorf("policy: %+v", pol)
	}
	var hook struct {
		Webhooks []struct {
			ClientConfig            struct{ URL, CABundle string }
			SideEffects             string
			AdmissionReviewVersions []string
		}
	}
	if err := json.Unmarshal(admWebhookConfig("https://127.0.0.1:1/", []byte("PEM")), &hook); err != nil {
		t.Fatal(err)
	}
	if h := hook.Webhooks; len(h) != 1 || h[0].ClientConfig.URL != "https://127.0.0.1:1/" || h[0].ClientConfig.CABundle != "UEVN" ||
		h[0].SideEffects != "None" || len(h[0].AdmissionReviewVersions) != 1 || h[0].AdmissionReviewVersions[0] != "v1" {
		t.Errorf("webhook configuration: %+v", hook)
	}
	if admPolicyName(3) != "crdbench-admission-03" {
		t.Errorf("policy name %s", admPolicyName(3))
	}
}

func TestAdmissionConfigs(t *testing.T) {
	cfs, order, err := admConfigs("0, 1,10", true)
	if err != nil || fmt.Sprint(order) != "[p0 p1 p10 webhook]" || cfs[0].Name != "no admission (0 policies)" || cfs[2].Name != "10 policies" ||
		cfs[2].Policies != 10 || !cfs[3].Webhook || cfs[3].Policies != 0 {
		t.Errorf("0,1,10 and the webhook: %+v %v %v", cfs, order, err)
	}
	for _, bad := range []string{"1,1", "1,01", "-1", "51", "x", ""} {
		if _, _, err := admConfigs(bad, false); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestAdmissionReport(t *testing.T) {
	dir := t.TempDir()
	side := func(name string, ps0, ps10 float64, cpu0, cpu10 float64) {
		r := admissionResult{Name: name, CRD: admCRDName, N: 100, Rounds: 1, Concurrency: 8, BodyBytes: 185, Expression: admExpression,
			Existing: map[string]int{"validatingadmissionpolicies": 0}, HookProtos: map[string]int{"HTTP/2.0": 5}}
		for _, c := range []struct {
			key      string
			policies int
			ps, cpu  float64
		}{{"p0", 0, ps0, cpu0}, {"p10", 10, ps10, cpu10}} {
			r.Configs = append(r.Configs, admConfig{Key: c.key, Name: c.key, Policies: c.policies, GoodRounds: 1,
				PerSecond: c.ps, P50Ms: 1000 / c.ps, P99Ms: 3000 / c.ps, CPUPerCreate: c.cpu,
				Rounds: []admRound{{Round: 1, Create: phase{Requests: 100, PerSecond: c.ps, P50Ms: 1000 / c.ps}, CPUPerCreate: c.cpu, Load1: 1.5}}})
		}
		if err := writeJSON(filepath.Join(dir, "admission-"+name+".json"), r); err != nil {
			t.Fatal(err)
		}
	}
	side("crdserver", 2000, 1000, 400, 900)
	side("kube", 500, 400, 2000, 2300)
	var b strings.Builder
	fails := admissionReport(dir, func(f string, a ...any) { fmt.Fprintf(&b, f, a...) })
	out := b.String()
	mustContain(t, "report", out,
		"## Admission: creates with 0/1/10 validating policies and one webhook",
		"| p0: creates/s | 2000.0 | 500.0 | 4.00× |\n| … p50 | 0.50 ms | 2.00 ms | 0.25× |\n| … p99 | 1.50 ms | 6.00 ms | 0.25× |\n| … server CPU per create | 0.400 ms | 2.000 ms | 0.20× |",
		"| … creates/s against no admission | 0.50× | 0.80× | – |\n| … p50 against no admission | +0.50 ms | +0.50 ms | – |\n"+
			"| … server CPU per create against no admission | +500 µs (+50 µs per policy) | +300 µs (+30 µs per policy) | – |",
		"| crdserver | p10 | 1000 | 1.00 ms | 1.50 | 0.0 |",
		"HTTP/2.0 (5 calls)",
	)
	if len(fails) != 0 {
		t.Errorf("failures: %v", fails)
	}
	b.Reset()
	if f := admissionReport(t.TempDir(), func(f string, a ...any) { fmt.Fprintf(&b, f, a...) }); f != nil || b.Len() != 0 {
		t.Errorf("nothing measured, yet: %v %q", f, b.String())
	}
}

// TestAdmissionSync: sync creates the wanted objects in order, deletes the
// others latest first, and removeAll deletes what is left, recording what
// it could not delete.
func TestAdmissionSync(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Method+" "+strings.TrimPrefix(r.URL.Path, admPath))
		code := map[string]int{http.MethodPost: http.StatusCreated, http.MethodDelete: http.StatusOK}[r.Method]
		if r.Method == http.MethodDelete && r.URL.Path == admPath+"validatingadmissionpolicies/a" {
			code = http.StatusInternalServerError
		}
		w.WriteHeader(code)
	}))
	defer srv.Close()
	c, err := connect(srv.URL, tlsFlags{}, 1)
	if err != nil {
		t.Fatal(err)
	}
	a := &admRun{ctx: context.Background(), c: c, res: &admissionResult{}}
	two := append(admPolicyObjs("a", "true", "m"), admPolicyObjs("b", "true", "m")...)
	hook := admObj{"validatingwebhookconfigurations", admHookName, "webhook-config", nil}
	if err := a.sync(two); err != nil {
		t.Fatal(err)
	}
	if err := a.sync([]admObj{two[0], two[1], hook}); err != nil {
		t.Fatal(err)
	}
	a.removeAll()
	want := []string{"POST validatingadmissionpolicies", "POST validatingadmissionpolicybindings", "POST validatingadmissionpolicies", "POST validatingadmissionpolicybindings",
		"DELETE validatingadmissionpolicybindings/b", "DELETE validatingadmissionpolicies/b", "POST validatingwebhookconfigurations",
		"DELETE validatingwebhookconfigurations/" + admHookName, "DELETE validatingadmissionpolicybindings/a", "DELETE validatingadmissionpolicies/a"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") || a.res.Removed != "2 deleted; NOT deleted: "+admPath+"validatingadmissionpolicies/a (HTTP 500 <nil>)" ||
		len(a.res.Failures) != 2 || a.res.Failures[0].Phase != "delete-policy" || a.res.Failures[1].Phase != "remove-admission" {
		t.Errorf("requests:\n%s\nwant:\n%s\nremoved %q, failures %v", strings.Join(got, "\n"), strings.Join(want, "\n"), a.res.Removed, a.res.Failures)
	}
}
