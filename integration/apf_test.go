package integration

import (
	"crypto/tls"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/apis/flowcontrol/bootstrap"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/crdserver/crdserver/server"
)

// The mandatory and suggested configuration is in place, and the mandatory
// objects come back when deleted or changed.
func TestPriorityAndFairnessConfiguration(t *testing.T) {
	e := start(t, withAPF)
	fc := e.kube.FlowcontrolV1()
	eventually(t, e.ctx, "bootstrap configuration", func() (bool, error) {
		for _, pl := range append(bootstrap.MandatoryPriorityLevelConfigurations, bootstrap.SuggestedPriorityLevelConfigurations...) {
			if _, err := fc.PriorityLevelConfigurations().Get(e.ctx, pl.Name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
				return false, nil
			} else if err != nil {
				return false, err
			}
		}
		for _, fs := range append(bootstrap.MandatoryFlowSchemas, bootstrap.SuggestedFlowSchemas...) {
			got, err := fc.FlowSchemas().Get(e.ctx, fs.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return false, nil
			} else if err != nil {
				return false, err
			}
			if got.Annotations[flowcontrolv1.AutoUpdateAnnotationKey] != "true" || got.Spec.MatchingPrecedence != fs.Spec.MatchingPrecedence {
				t.Fatalf("%s: %+v", fs.Name, got)
			}
		}
		return true, nil
	})

	// kubectl's tables, as Kubernetes prints them.
	r := e.do("GET", "/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas", "", "Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	var tbl metav1.Table
	if err := json.Unmarshal(r.body, &tbl); err != nil || r.code != 200 {
		t.Fatalf("table: %d %v %s", r.code, err, r.body)
	}
	var cols []string
	for _, c := range tbl.ColumnDefinitions {
		cols = append(cols, c.Name)
	}
	if strings.Join(cols, ",") != "Name,PriorityLevel,MatchingPrecedence,DistinguisherMethod,Age,MissingPL" ||
		tbl.Rows[0].Cells[0] != "exempt" || tbl.Rows[len(tbl.Rows)-1].Cells[0] != "catch-all" {
		t.Fatalf("flowschemas table: %v %v", cols, tbl.Rows)
	}
	r = e.do("GET", "/apis/flowcontrol.apiserver.k8s.io/v1/prioritylevelconfigurations/global-default", "", "Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	if err := json.Unmarshal(r.body, &tbl); err != nil || len(tbl.Rows) != 1 || len(tbl.ColumnDefinitions) != 7 ||
		compact(mustJSON(tbl.Rows[0].Cells[:6])) != `["global-default","Limited",20,128,6,50]` {
		t.Fatalf("priority level table: %s", r.body)
	}

	// A deleted mandatory FlowSchema comes back; a changed mandatory level
	// is refused (its spec is fixed).
	old, err := fc.FlowSchemas().Get(e.ctx, "catch-all", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := fc.FlowSchemas().Delete(e.ctx, "catch-all", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, e.ctx, "catch-all restored", func() (bool, error) {
		got, err := fc.FlowSchemas().Get(e.ctx, "catch-all", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil && got.UID != old.UID && got.Spec.PriorityLevelConfiguration.Name == "catch-all", err
	})
	pl, err := fc.PriorityLevelConfigurations().Get(e.ctx, "catch-all", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pl.Spec.Limited.NominalConcurrencyShares = ptr(int32(6))
	_, err = fc.PriorityLevelConfigurations().Update(e.ctx, pl, metav1.UpdateOptions{})
	if want := `PriorityLevelConfiguration.flowcontrol.apiserver.k8s.io "catch-all" is invalid: spec: Invalid value: {"Type":"Limited","Limited":{"NominalConcurrencyShares":6,"LimitResponse":{"Type":"Reject","Queuing":null},"LendablePercent":0,"BorrowingLimitPercent":null},"Exempt":null}: spec of 'catch-all' must equal the fixed value`; err == nil || err.Error() != want {
		t.Fatalf("changed catch-all: %v", err)
	}

	// A suggested level changed by hand and marked so stays as changed.
	wl, err := fc.PriorityLevelConfigurations().Get(e.ctx, "workload-low", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wl.Annotations[flowcontrolv1.AutoUpdateAnnotationKey] = "false"
	wl.Spec.Limited.NominalConcurrencyShares = ptr(int32(7))
	if _, err := fc.PriorityLevelConfigurations().Update(e.ctx, wl, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// And one changed without the annotation goes back to the suggested
	// spec, annotated.
	sys, err := fc.PriorityLevelConfigurations().Get(e.ctx, "system", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	delete(sys.Annotations, flowcontrolv1.AutoUpdateAnnotationKey)
	if _, err := fc.PriorityLevelConfigurations().Update(e.ctx, sys, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, e.ctx, "system annotated again", func() (bool, error) {
		got, err := fc.PriorityLevelConfigurations().Get(e.ctx, "system", metav1.GetOptions{})
		return err == nil && got.Annotations[flowcontrolv1.AutoUpdateAnnotationKey] == "true", err
	})
	got, err := fc.PriorityLevelConfigurations().Get(e.ctx, "workload-low", metav1.GetOptions{})
	if err != nil || *got.Spec.Limited.NominalConcurrencyShares != 7 || got.Annotations[flowcontrolv1.AutoUpdateAnnotationKey] != "false" {
		t.Fatalf("workload-low: %v %+v", err, got)
	}
}

// Invalid objects are refused with Kubernetes' messages (taken from
// kube-apiserver 1.37).
func TestPriorityAndFairnessValidation(t *testing.T) {
	e := start(t, withAPF)
	tests := []struct{ body, want string }{
		{`{"apiVersion":"flowcontrol.apiserver.k8s.io/v1","kind":"PriorityLevelConfiguration","metadata":{"name":"bad"},"spec":{"exempt":{"nominalConcurrencyShares":-1},"limited":{"limitResponse":{"queuing":{"queues":0}}}}}`,
			`PriorityLevelConfiguration.flowcontrol.apiserver.k8s.io "bad" is invalid: [spec.exempt: Forbidden, spec.limited: Forbidden, spec.type: Required value, spec.limited.limitResponse.queuing: Forbidden, spec.limited.limitResponse.type: Required value]`},
		{`{"apiVersion":"flowcontrol.apiserver.k8s.io/v1","kind":"PriorityLevelConfiguration","metadata":{"name":"bad"},"spec":{"type":"Limited","limited":{"nominalConcurrencyShares":-1,"borrowingLimitPercent":-2,"limitResponse":{"type":"Queue"}}}}`,
			`PriorityLevelConfiguration.flowcontrol.apiserver.k8s.io "bad" is invalid: [spec.limited.nominalConcurrencyShares: Invalid value: -1: must be a non-negative integer, spec.limited.borrowingLimitPercent: Invalid value: -2: if specified, must be a non-negative integer, spec.limited.limitResponse.queuing: Required value]`},
		{`{"apiVersion":"flowcontrol.apiserver.k8s.io/v1","kind":"FlowSchema","metadata":{"name":"bad"},"spec":{"matchingPrecedence":1,"distinguisherMethod":{"type":"Nope"},"priorityLevelConfiguration":{"name":""},"rules":[{"subjects":[{"kind":"User"}],"nonResourceRules":[{"verbs":["*","get"],"nonResourceURLs":["noslash"]}]}]}}`,
			`FlowSchema.flowcontrol.apiserver.k8s.io "bad" is invalid: [spec.matchingPrecedence: Invalid value: 1: only the schema named 'exempt' may have matchingPrecedence 1, spec.distinguisherMethod.type: Unsupported value: {"Type":"Nope"}: supported values: "ByNamespace", "ByUser", spec.priorityLevelConfiguration.name: Required value: must reference a priority level, spec.rules[0].subjects[0].user: Required value: user is required when subject kind is 'User', spec.rules[0].nonResourceRules[0].verbs: Invalid value: ["*","get"]: if '*' is present, must not specify other verbs, spec.rules[0].nonResourceRules[0].nonResourceURLs[0]: Invalid value: "noslash": must start with slash]`},
	}
	for _, tt := range tests {
		var err error
		if strings.Contains(tt.body, `"FlowSchema"`) {
			var fs flowcontrolv1.FlowSchema
			if err := json.Unmarshal([]byte(tt.body), &fs); err != nil {
				t.Fatal(err)
			}
			_, err = e.kube.FlowcontrolV1().FlowSchemas().Create(e.ctx, &fs, metav1.CreateOptions{})
		} else {
			var pl flowcontrolv1.PriorityLevelConfiguration
			if err := json.Unmarshal([]byte(tt.body), &pl); err != nil {
				t.Fatal(err)
			}
			_, err = e.kube.FlowcontrolV1().PriorityLevelConfigurations().Create(e.ctx, &pl, metav1.CreateOptions{})
		}
		if !apierrors.IsInvalid(err) || err.Error() != tt.want {
			t.Errorf("got  %v\nwant %s", err, tt.want)
		}
	}
}

// blockingWebhook is a validating admission webhook on 127.0.0.1 that holds
// the creation of a ConfigMap named "block" until released.
type blockingWebhook struct {
	url     string
	caPEM   []byte
	arrived chan struct{}
	release chan struct{}
}

func startBlockingWebhook(t *testing.T) *blockingWebhook {
	t.Helper()
	cert, certPEM, err := selfSigned("apf-webhook")
	if err != nil {
		t.Fatal(err)
	}
	w := &blockingWebhook{caPEM: certPEM, arrived: make(chan struct{}, 1), release: make(chan struct{})}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			var ar admissionv1.AdmissionReview
			if err := json.Unmarshal(body, &ar); err != nil || ar.Request == nil {
				http.Error(rw, "bad review", http.StatusBadRequest)
				return
			}
			if ar.Request.Name == "block" {
				w.arrived <- struct{}{}
				select {
				case <-w.release:
				case <-time.After(30 * time.Second):
				}
			}
			ar.Response = &admissionv1.AdmissionResponse{UID: ar.Request.UID, Allowed: true}
			ar.Request = nil
			_ = json.NewEncoder(rw).Encode(ar)
		})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { _ = srv.Close() })
	w.url = "https://" + ln.Addr().String()
	return w
}

// A user whose FlowSchema sends them to a level of one seat that rejects
// beyond it gets 429 with Retry-After while a request of theirs is being
// served; others are served meanwhile. Responses name the FlowSchema and
// level; the metrics count the rejection; the debug dumps show the level.
func TestPriorityAndFairnessRejects(t *testing.T) {
	// 100 seats in all: the test level's 1 share of 246 is one seat.
	e := start(t, withAPF, func(c *server.Config) { c.MaxRequestsInFlight, c.MaxMutatingRequestsInFlight = 100, -1 })
	fc := e.kube.FlowcontrolV1()
	pl, err := fc.PriorityLevelConfigurations().Create(e.ctx, &flowcontrolv1.PriorityLevelConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "one-seat"},
		Spec: flowcontrolv1.PriorityLevelConfigurationSpec{Type: flowcontrolv1.PriorityLevelEnablementLimited, Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{
			NominalConcurrencyShares: ptr(int32(1)), BorrowingLimitPercent: ptr(int32(0)),
			LimitResponse: flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeReject},
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fs, err := fc.FlowSchemas().Create(e.ctx, &flowcontrolv1.FlowSchema{
		ObjectMeta: metav1.ObjectMeta{Name: "noisy"},
		Spec: flowcontrolv1.FlowSchemaSpec{
			PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: "one-seat"},
			MatchingPrecedence:         200,
			Rules: []flowcontrolv1.PolicyRulesWithSubjects{{
				Subjects:      []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindUser, User: &flowcontrolv1.UserSubject{Name: "noisy"}}},
				ResourceRules: []flowcontrolv1.ResourcePolicyRule{{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}, Namespaces: []string{"*"}, ClusterScope: true}},
			}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.kube.RbacV1().ClusterRoleBindings().Create(e.ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "noisy"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "noisy"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	hook := startBlockingWebhook(t)
	if _, err := e.kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(e.ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "block"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    "block.apf.example.com",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: ptr(hook.url), CABundle: hook.caPEM},
			Rules:                   []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create}, Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}}},
			SideEffects:             ptr(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr(int32(30)),
		}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	noisyCfg := rest.CopyConfig(e.cfg)
	noisyCfg.Impersonate = rest.ImpersonationConfig{UserName: "noisy"}
	noisy := kubernetes.NewForConfigOrDie(noisyCfg)
	asNoisy := func(method, path string) response {
		return e.do(method, path, "", "Impersonate-User", "noisy")
	}
	// The filter follows the new configuration (and the webhook is in
	// place: a ConfigMap named other than "block" passes it).
	eventually(t, e.ctx, "noisy classified", func() (bool, error) {
		r := asNoisy("GET", "/api/v1/namespaces/default/configmaps")
		return r.code == 200 && r.header.Get(flowcontrolv1.ResponseHeaderMatchedFlowSchemaUID) == string(fs.UID) &&
			r.header.Get(flowcontrolv1.ResponseHeaderMatchedPriorityLevelConfigurationUID) == string(pl.UID), nil
	})
	// The level has its one seat once the filter has seen every level of
	// the configuration (the suggested ones are created while the test
	// starts; until then the level's share is larger).
	eventually(t, e.ctx, "one-seat has one seat", func() (bool, error) {
		m := string(e.do("GET", "/metrics", "").body)
		return strings.Contains(m, `apiserver_flowcontrol_nominal_limit_seats{priority_level="one-seat"} 1`+"\n"), nil
	})
	eventually(t, e.ctx, "webhook in place", func() (bool, error) {
		_, err := e.kube.CoreV1().ConfigMaps("default").Create(e.ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "probe-"}}, metav1.CreateOptions{})
		return err == nil, nil
	})
	// A watch of noisy's holds its seat only until it starts.
	w, err := noisy.CoreV1().ConfigMaps("default").Watch(e.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	// (Its seat is freed a moment after the response starts.)
	eventually(t, e.ctx, "a get beside a watch", func() (bool, error) {
		return asNoisy("GET", "/api/v1/namespaces/default/configmaps").code == 200, nil
	})

	created := make(chan error, 1)
	go func() {
		_, err := noisy.CoreV1().ConfigMaps("default").Create(e.ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "block"}}, metav1.CreateOptions{})
		created <- err
	}()
	select {
	case <-hook.arrived:
	case err := <-created:
		t.Fatalf("create returned before the webhook held it: %v", err)
	case <-e.ctx.Done():
		t.Fatal("the webhook was not called")
	}
	r := asNoisy("GET", "/api/v1/namespaces/default/configmaps")
	if r.code != http.StatusTooManyRequests || string(r.body) != "Too many requests, please try again later.\n" {
		t.Errorf("noisy while its seat is taken: %d %q", r.code, r.body)
	}
	if n, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || n < 1 {
		t.Errorf("Retry-After %q", r.header.Get("Retry-After"))
	}
	if r.header.Get(flowcontrolv1.ResponseHeaderMatchedFlowSchemaUID) != string(fs.UID) || r.header.Get(flowcontrolv1.ResponseHeaderMatchedPriorityLevelConfigurationUID) != string(pl.UID) {
		t.Errorf("429 headers: %v", r.header)
	}
	if r := e.do("GET", "/api/v1/namespaces/default/configmaps", ""); r.code != 200 {
		t.Errorf("admin meanwhile: %d %s", r.code, r.body)
	}
	close(hook.release)
	if err := <-created; err != nil {
		t.Fatalf("held create: %v", err)
	}
	if r := asNoisy("GET", "/api/v1/namespaces/default/configmaps/block"); r.code != 200 {
		t.Fatalf("noisy after: %d %s", r.code, r.body)
	}

	metrics := string(e.do("GET", "/metrics", "").body)
	for _, want := range []string{
		`apiserver_flowcontrol_rejected_requests_total{flow_schema="noisy",priority_level="one-seat",reason="concurrency-limit"}`,
		`apiserver_flowcontrol_dispatched_requests_total{flow_schema="noisy",priority_level="one-seat"}`,
		`apiserver_flowcontrol_nominal_limit_seats{priority_level="one-seat"} 1`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	r = e.do("GET", "/debug/api_priority_and_fairness/dump_priority_levels", "")
	if r.code != 200 || !strings.Contains(string(r.body), "PriorityLevelName") || !strings.Contains(string(r.body), "one-seat") {
		t.Errorf("dump_priority_levels: %d %s", r.code, r.body)
	}
	for _, p := range []string{"/debug/api_priority_and_fairness/dump_queues", "/debug/api_priority_and_fairness/dump_requests"} {
		if r := e.do("GET", p, ""); r.code != 200 || !strings.Contains(string(r.body), "PriorityLevelName") {
			t.Errorf("%s: %d %s", p, r.code, r.body)
		}
	}
	// The dumps are non-resource URLs only some may get.
	if r := e.do("GET", "/debug/api_priority_and_fairness/dump_queues", "", "Impersonate-User", "nobody"); r.code != http.StatusForbidden {
		t.Errorf("dump_queues as nobody: %d %s", r.code, r.body)
	}
}

// A FlowSchema naming a level that does not exist is Dangling until the
// level is made.
func TestPriorityAndFairnessDangling(t *testing.T) {
	e := start(t, withAPF)
	fc := e.kube.FlowcontrolV1()
	if _, err := fc.FlowSchemas().Create(e.ctx, &flowcontrolv1.FlowSchema{
		ObjectMeta: metav1.ObjectMeta{Name: "dangling"},
		Spec: flowcontrolv1.FlowSchemaSpec{
			PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: "later"},
			Rules: []flowcontrolv1.PolicyRulesWithSubjects{{
				Subjects:         []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindGroup, Group: &flowcontrolv1.GroupSubject{Name: "nobody-at-all"}}},
				NonResourceRules: []flowcontrolv1.NonResourcePolicyRule{{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz"}}},
			}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dangling := func(want corev1.ConditionStatus, reason string) func() (bool, error) {
		return func() (bool, error) {
			fs, err := fc.FlowSchemas().Get(e.ctx, "dangling", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			for _, c := range fs.Status.Conditions {
				if c.Type == flowcontrolv1.FlowSchemaConditionDangling {
					return string(c.Status) == string(want) && c.Reason == reason, nil
				}
			}
			return false, nil
		}
	}
	eventually(t, e.ctx, "Dangling True", dangling(corev1.ConditionTrue, "NotFound"))
	if _, err := fc.PriorityLevelConfigurations().Create(e.ctx, &flowcontrolv1.PriorityLevelConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "later"},
		Spec: flowcontrolv1.PriorityLevelConfigurationSpec{Type: flowcontrolv1.PriorityLevelEnablementLimited, Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{
			LimitResponse: flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeReject},
		}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, e.ctx, "Dangling False", dangling(corev1.ConditionFalse, "Found"))
	r := e.do("GET", "/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas/dangling", "", "Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	if !strings.Contains(string(r.body), `"False"]`) {
		t.Errorf("MissingPL: %s", r.body)
	}
}

// With priority and fairness off, responses carry no classification.
func TestPriorityAndFairnessOff(t *testing.T) {
	e := start(t, func(c *server.Config) { c.DisablePriorityAndFairness = true })
	r := e.do("GET", "/api/v1/namespaces", "", "Impersonate-User", "someone", "Impersonate-Group", "system:authenticated")
	if r.header.Get(flowcontrolv1.ResponseHeaderMatchedFlowSchemaUID) != "" {
		t.Errorf("classified with APF off: %v", r.header)
	}
	if r := e.do("GET", "/debug/api_priority_and_fairness/dump_queues", ""); r.code != http.StatusNotFound {
		t.Errorf("dump with APF off: %d", r.code)
	}
}

// withAPF turns API Priority and Fairness on (crdtest's servers have it
// off).
func withAPF(c *server.Config) { c.DisablePriorityAndFairness = false }
