package integration

import (
	"encoding/json"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	batchv1apply "k8s.io/client-go/applyconfigurations/batch/v1"
	corev1apply "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/rest"

	"github.com/crdserver/crdserver/server"
)

// groupKind is one kind of the batch, policy, autoscaling, networking and
// discovery groups, with the least body kube-apiserver accepts.
type groupKind struct {
	kind, collection, body string
}

var (
	jobKind = groupKind{"Job", "/apis/batch/v1/namespaces/default/jobs",
		`{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"pi"},"spec":{"template":{"spec":{"containers":[{"name":"c","image":"busybox"}],"restartPolicy":"Never"}}}}`}
	cronJobKind = groupKind{"CronJob", "/apis/batch/v1/namespaces/default/cronjobs",
		`{"apiVersion":"batch/v1","kind":"CronJob","metadata":{"name":"hello"},"spec":{"schedule":"*/5 * * * *","jobTemplate":{"spec":{"template":{"spec":{"containers":[{"name":"c","image":"busybox"}],"restartPolicy":"OnFailure"}}}}}}`}
	pdbKind = groupKind{"PodDisruptionBudget", "/apis/policy/v1/namespaces/default/poddisruptionbudgets",
		`{"apiVersion":"policy/v1","kind":"PodDisruptionBudget","metadata":{"name":"web"},"spec":{"minAvailable":1,"selector":{"matchLabels":{"app":"web"}}}}`}
	hpaKind = groupKind{"HorizontalPodAutoscaler", "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers",
		`{"apiVersion":"autoscaling/v2","kind":"HorizontalPodAutoscaler","metadata":{"name":"web"},"spec":{"scaleTargetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"web"},"maxReplicas":5}}`}
	ingressKind = groupKind{"Ingress", "/apis/networking.k8s.io/v1/namespaces/default/ingresses",
		`{"apiVersion":"networking.k8s.io/v1","kind":"Ingress","metadata":{"name":"web"},"spec":{"defaultBackend":{"service":{"name":"web","port":{"number":80}}}}}`}
	ingressClassKind = groupKind{"IngressClass", "/apis/networking.k8s.io/v1/ingressclasses",
		`{"apiVersion":"networking.k8s.io/v1","kind":"IngressClass","metadata":{"name":"nginx"},"spec":{"controller":"example.com/ingress-controller"}}`}
	netpolKind = groupKind{"NetworkPolicy", "/apis/networking.k8s.io/v1/namespaces/default/networkpolicies",
		`{"apiVersion":"networking.k8s.io/v1","kind":"NetworkPolicy","metadata":{"name":"deny"},"spec":{"podSelector":{}}}`}
	sliceKind = groupKind{"EndpointSlice", "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices",
		`{"apiVersion":"discovery.k8s.io/v1","kind":"EndpointSlice","metadata":{"name":"web-abc"},"addressType":"IPv4","endpoints":[{"addresses":["10.0.0.1"]}],"ports":[{"name":"http","port":80}]}`}
)

// withBody is k's body changed by edit (on its decoded JSON).
func (k groupKind) withBody(t *testing.T, edit func(m map[string]any)) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(k.body), &m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	return mustJSON(m)
}

func (k groupKind) name(t *testing.T) string {
	t.Helper()
	var m struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
	}
	if err := json.Unmarshal([]byte(k.body), &m); err != nil {
		t.Fatal(err)
	}
	return m.Metadata.Name
}

// TestGroupsDefaults creates every kind with its least body and compares
// what is answered and stored with what kube-apiserver v1.37.2 answered
// for the same bodies (UID stands for the object's uid: a Job's selector
// and labels are generated from it).
func TestGroupsDefaults(t *testing.T) {
	e := start(t)
	cases := []struct {
		k      groupKind
		want   string
		labels map[string]string
	}{
		{jobKind, `{"spec":{"backoffLimit":6,"completionMode":"NonIndexed","completions":1,"manualSelector":false,"parallelism":1,"podReplacementPolicy":"TerminatingOrFailed","selector":{"matchLabels":{"batch.kubernetes.io/controller-uid":"UID"}},"suspend":false,"template":{"metadata":{"labels":{"batch.kubernetes.io/controller-uid":"UID","batch.kubernetes.io/job-name":"pi","controller-uid":"UID","job-name":"pi"}},"spec":{"containers":[{"image":"busybox","imagePullPolicy":"Always","name":"c","resources":{},"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File"}],"dnsPolicy":"ClusterFirst","restartPolicy":"Never","schedulerName":"default-scheduler","securityContext":{},"terminationGracePeriodSeconds":30}}},"status":{}}`,
			map[string]string{"batch.kubernetes.io/controller-uid": "UID", "batch.kubernetes.io/job-name": "pi", "controller-uid": "UID", "job-name": "pi"}},
		{cronJobKind, `{"spec":{"concurrencyPolicy":"Allow","failedJobsHistoryLimit":1,"jobTemplate":{"metadata":{},"spec":{"template":{"metadata":{},"spec":{"containers":[{"image":"busybox","imagePullPolicy":"Always","name":"c","resources":{},"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File"}],"dnsPolicy":"ClusterFirst","restartPolicy":"OnFailure","schedulerName":"default-scheduler","securityContext":{},"terminationGracePeriodSeconds":30}}}},"schedule":"*/5 * * * *","successfulJobsHistoryLimit":3,"suspend":false},"status":{}}`, nil},
		{pdbKind, `{"spec":{"minAvailable":1,"selector":{"matchLabels":{"app":"web"}}},"status":{"currentHealthy":0,"desiredHealthy":0,"disruptionsAllowed":0,"expectedPods":0}}`, nil},
		{hpaKind, `{"spec":{"maxReplicas":5,"metrics":[{"resource":{"name":"cpu","target":{"averageUtilization":80,"type":"Utilization"}},"type":"Resource"}],"minReplicas":1,"scaleTargetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"web"}},"status":{"currentMetrics":null,"desiredReplicas":0}}`, nil},
		{ingressKind, `{"spec":{"defaultBackend":{"service":{"name":"web","port":{"number":80}}}},"status":{"loadBalancer":{}}}`, nil},
		{ingressClassKind, `{"spec":{"controller":"example.com/ingress-controller"}}`, nil},
		{netpolKind, `{"spec":{"podSelector":{},"policyTypes":["Ingress"]}}`, nil},
		{sliceKind, `{"addressType":"IPv4","endpoints":[{"addresses":["10.0.0.1"],"conditions":{}}],"ports":[{"name":"http","port":80,"protocol":"TCP"}]}`, nil},
	}
	for _, c := range cases {
		t.Run(c.k.kind, func(t *testing.T) {
			r := e.do(http.MethodPost, c.k.collection, c.k.body)
			if r.code != http.StatusCreated {
				t.Fatalf("create: %d %s", r.code, r.body)
			}
			created := r.object(t)
			uid := created["metadata"].(map[string]any)["uid"].(string)
			want := strings.ReplaceAll(c.want, "UID", uid)
			for i, got := range []map[string]any{created, e.do(http.MethodGet, c.k.collection+"/"+c.k.name(t), "").object(t)} {
				meta := got["metadata"].(map[string]any)
				if g := jsonRoundTrip(t, meta["generation"]); g != float64(1) {
					t.Errorf("%d: generation %v, want 1", i, g)
				}
				var wantLabels any
				if c.labels != nil {
					l := map[string]any{}
					for k, v := range c.labels {
						l[k] = strings.ReplaceAll(v, "UID", uid)
					}
					wantLabels = l
				}
				if g := jsonRoundTrip(t, meta["labels"]); !reflect.DeepEqual(g, wantLabels) {
					t.Errorf("%d: labels %v, want %v", i, g, wantLabels)
				}
				delete(got, "metadata")
				delete(got, "apiVersion")
				delete(got, "kind")
				var w any
				if err := json.Unmarshal([]byte(want), &w); err != nil {
					t.Fatal(err)
				}
				if g := jsonRoundTrip(t, got); !reflect.DeepEqual(g, w) {
					t.Errorf("%d: stored\n%s\nwant (kube-apiserver's)\n%s", i, mustJSON(g), want)
				}
			}
		})
	}
}

// TestGroupsValidation compares kube-apiserver v1.37.2's answers to
// invalid objects of every kind.
func TestGroupsValidation(t *testing.T) {
	e := start(t)
	type cause = metav1.StatusCause
	inv := func(msg, f string) cause {
		return cause{Type: metav1.CauseTypeFieldValueInvalid, Message: msg, Field: f}
	}
	req := func(msg, f string) cause {
		return cause{Type: metav1.CauseTypeFieldValueRequired, Message: msg, Field: f}
	}
	unsupported := func(msg, f string) cause {
		return cause{Type: metav1.CauseTypeFieldValueNotSupported, Message: msg, Field: f}
	}
	spec := func(m map[string]any) map[string]any { return m["spec"].(map[string]any) }
	podSpec := func(m map[string]any) map[string]any {
		return spec(m)["template"].(map[string]any)["spec"].(map[string]any)
	}
	cases := []struct {
		name   string
		k      groupKind
		edit   func(m map[string]any)
		msg    string
		causes []cause
	}{{
		name: "job without restartPolicy", k: jobKind,
		edit:   func(m map[string]any) { delete(podSpec(m), "restartPolicy") },
		msg:    `Job.batch "pi" is invalid: spec.template.spec.restartPolicy: Required value: valid values: "OnFailure", "Never"`,
		causes: []cause{req(`Required value: valid values: "OnFailure", "Never"`, "spec.template.spec.restartPolicy")},
	}, {
		name: "job negative parallelism", k: jobKind,
		edit:   func(m map[string]any) { spec(m)["parallelism"] = -1 },
		msg:    `Job.batch "pi" is invalid: spec.parallelism: Invalid value: -1: must be greater than or equal to 0`,
		causes: []cause{inv("Invalid value: -1: must be greater than or equal to 0", "spec.parallelism")},
	}, {
		name: "job manual selector without one", k: jobKind,
		edit: func(m map[string]any) { spec(m)["manualSelector"] = true },
		msg:  "Job.batch \"pi\" is invalid: [spec.selector: Required value, spec.template.metadata.labels: Invalid value: null: `selector` does not match template `labels`]",
		causes: []cause{req("Required value", "spec.selector"),
			inv("Invalid value: null: `selector` does not match template `labels`", "spec.template.metadata.labels")},
	}, {
		name: "cronjob bad schedule", k: cronJobKind,
		edit:   func(m map[string]any) { spec(m)["schedule"] = "not a schedule" },
		msg:    `CronJob.batch "hello" is invalid: spec.schedule: Invalid value: "not a schedule": expected exactly 5 fields, found 3: [not a schedule]`,
		causes: []cause{inv(`Invalid value: "not a schedule": expected exactly 5 fields, found 3: [not a schedule]`, "spec.schedule")},
	}, {
		name: "cronjob long name", k: cronJobKind,
		edit: func(m map[string]any) {
			m["metadata"].(map[string]any)["name"] = "a-very-long-cronjob-name-that-is-longer-than-fifty-two-chars"
		},
		msg:    `CronJob.batch "a-very-long-cronjob-name-that-is-longer-than-fifty-two-chars" is invalid: metadata.name: Invalid value: "a-very-long-cronjob-name-that-is-longer-than-fifty-two-chars": must be no more than 52 characters`,
		causes: []cause{inv(`Invalid value: "a-very-long-cronjob-name-that-is-longer-than-fifty-two-chars": must be no more than 52 characters`, "metadata.name")},
	}, {
		name: "cronjob bad policies", k: cronJobKind,
		edit: func(m map[string]any) {
			spec(m)["concurrencyPolicy"] = "Sometimes"
			spec(m)["jobTemplate"].(map[string]any)["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["restartPolicy"] = "Always"
		},
		msg: `CronJob.batch "hello" is invalid: [spec.concurrencyPolicy: Unsupported value: "Sometimes": supported values: "Allow", "Forbid", "Replace", spec.jobTemplate.spec.template.spec.restartPolicy: Required value: valid values: "OnFailure", "Never"]`,
		causes: []cause{unsupported(`Unsupported value: "Sometimes": supported values: "Allow", "Forbid", "Replace"`, "spec.concurrencyPolicy"),
			req(`Required value: valid values: "OnFailure", "Never"`, "spec.jobTemplate.spec.template.spec.restartPolicy")},
	}, {
		name: "pdb both set", k: pdbKind,
		edit:   func(m map[string]any) { spec(m)["maxUnavailable"] = 1; delete(spec(m), "selector") },
		msg:    `PodDisruptionBudget.policy "web" is invalid: spec: Invalid value: {"MinAvailable":1,"Selector":null,"MaxUnavailable":1,"UnhealthyPodEvictionPolicy":null}: minAvailable and maxUnavailable cannot be both set`,
		causes: []cause{inv(`Invalid value: {"MinAvailable":1,"Selector":null,"MaxUnavailable":1,"UnhealthyPodEvictionPolicy":null}: minAvailable and maxUnavailable cannot be both set`, "spec")},
	}, {
		name: "pdb over 100%", k: pdbKind,
		edit:   func(m map[string]any) { spec(m)["minAvailable"] = "120%" },
		msg:    `PodDisruptionBudget.policy "web" is invalid: spec.minAvailable: Invalid value: "120%": must not be greater than 100%`,
		causes: []cause{inv(`Invalid value: "120%": must not be greater than 100%`, "spec.minAvailable")},
	}, {
		name: "hpa without maxReplicas", k: hpaKind,
		edit: func(m map[string]any) {
			delete(spec(m), "maxReplicas")
			delete(spec(m)["scaleTargetRef"].(map[string]any), "apiVersion")
		},
		msg: "HorizontalPodAutoscaler.autoscaling \"web\" is invalid: [spec.maxReplicas: Invalid value: 0: must be greater than or equal to `minReplicas`, spec.scaleTargetRef.apiVersion: Invalid value: \"\": apiVersion must specify API group, spec.maxReplicas: Required value]",
		causes: []cause{inv("Invalid value: 0: must be greater than or equal to `minReplicas`", "spec.maxReplicas"),
			inv(`Invalid value: "": apiVersion must specify API group`, "spec.scaleTargetRef.apiVersion"),
			req("Required value", "spec.maxReplicas")},
	}, {
		name: "hpa without kind", k: hpaKind,
		edit: func(m map[string]any) { spec(m)["scaleTargetRef"] = map[string]any{"name": "web"} },
		msg:  `HorizontalPodAutoscaler.autoscaling "web" is invalid: [spec.scaleTargetRef.kind: Required value, spec.scaleTargetRef.apiVersion: Invalid value: "": apiVersion must specify API group]`,
		causes: []cause{req("Required value", "spec.scaleTargetRef.kind"),
			inv(`Invalid value: "": apiVersion must specify API group`, "spec.scaleTargetRef.apiVersion")},
	}, {
		name: "ingress empty", k: ingressKind,
		edit:   func(m map[string]any) { m["spec"] = map[string]any{} },
		msg:    "Ingress.networking.k8s.io \"web\" is invalid: spec: Invalid value: null: either `defaultBackend` or `rules` must be specified",
		causes: []cause{inv("Invalid value: null: either `defaultBackend` or `rules` must be specified", "spec")},
	}, {
		name: "ingress without pathType", k: ingressKind,
		edit: func(m map[string]any) {
			m["spec"] = map[string]any{"rules": []any{map[string]any{"http": map[string]any{"paths": []any{map[string]any{
				"path": "/", "backend": map[string]any{"service": map[string]any{"name": "web", "port": map[string]any{"number": 80}}}}}}}}}
		},
		msg:    `Ingress.networking.k8s.io "web" is invalid: spec.rules[0].http.paths[0].pathType: Required value: pathType must be specified`,
		causes: []cause{req("Required value: pathType must be specified", "spec.rules[0].http.paths[0].pathType")},
	}, {
		name: "ingressclass without controller", k: ingressClassKind,
		edit:   func(m map[string]any) { m["spec"] = map[string]any{} },
		msg:    `IngressClass.networking.k8s.io "nginx" is invalid: spec.controller: Required value`,
		causes: []cause{req("Required value", "spec.controller")},
	}, {
		name: "ingressclass bad controller", k: ingressClassKind,
		edit:   func(m map[string]any) { spec(m)["controller"] = "Not A Controller" },
		msg:    `IngressClass.networking.k8s.io "nginx" is invalid: spec.controller: Invalid value: "Not A Controller": must be a domain-prefixed path (such as "acme.io/foo")`,
		causes: []cause{inv(`Invalid value: "Not A Controller": must be a domain-prefixed path (such as "acme.io/foo")`, "spec.controller")},
	}, {
		name: "networkpolicy bad type", k: netpolKind,
		edit:   func(m map[string]any) { spec(m)["policyTypes"] = []any{"Sideways"} },
		msg:    `NetworkPolicy.networking.k8s.io "deny" is invalid: spec.policyTypes[0]: Unsupported value: "Sideways": supported values: "Ingress", "Egress"`,
		causes: []cause{unsupported(`Unsupported value: "Sideways": supported values: "Ingress", "Egress"`, "spec.policyTypes[0]")},
	}, {
		name: "networkpolicy bad cidr", k: netpolKind,
		edit: func(m map[string]any) {
			spec(m)["ingress"] = []any{map[string]any{"from": []any{map[string]any{"ipBlock": map[string]any{"cidr": "10.0.0.0/33"}}}}}
		},
		msg:    `NetworkPolicy.networking.k8s.io "deny" is invalid: spec.ingress[0].from[0].ipBlock.cidr: Invalid value: "10.0.0.0/33": must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)`,
		causes: []cause{inv(`Invalid value: "10.0.0.0/33": must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)`, "spec.ingress[0].from[0].ipBlock.cidr")},
	}, {
		name: "endpointslice bad address", k: sliceKind,
		edit:   func(m map[string]any) { m["endpoints"] = []any{map[string]any{"addresses": []any{"not-an-ip"}}} },
		msg:    `EndpointSlice.discovery.k8s.io "web-abc" is invalid: endpoints[0].addresses[0]: Invalid value: "not-an-ip": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)`,
		causes: []cause{inv(`Invalid value: "not-an-ip": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)`, "endpoints[0].addresses[0]")},
	}, {
		name: "endpointslice bad address type", k: sliceKind,
		edit:   func(m map[string]any) { m["addressType"] = "IPv5" },
		msg:    `EndpointSlice.discovery.k8s.io "web-abc" is invalid: addressType: Unsupported value: "IPv5": supported values: "FQDN", "IPv4", "IPv6"`,
		causes: []cause{unsupported(`Unsupported value: "IPv5": supported values: "FQDN", "IPv4", "IPv6"`, "addressType")},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			body := c.k.withBody(t, c.edit)
			r := e.do(http.MethodPost, c.k.collection, body)
			st := expectStatus(t, r, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid, "")
			var m struct {
				APIVersion string            `json:"apiVersion"`
				Metadata   metav1.ObjectMeta `json:"metadata"`
			}
			if err := json.Unmarshal([]byte(body), &m); err != nil {
				t.Fatal(err)
			}
			group, _, _ := strings.Cut(m.APIVersion, "/")
			want := &metav1.StatusDetails{Name: m.Metadata.Name, Group: group, Kind: c.k.kind, Causes: c.causes}
			if st.Message != c.msg || !reflect.DeepEqual(st.Details, want) {
				t.Errorf("got %s\nwant message %s\ndetails %s", r.body, c.msg, mustJSON(want))
			}
		})
	}
	// kube-apiserver checks a PodDisruptionBudget's name as a path
	// segment only.
	r := e.do(http.MethodPost, pdbKind.collection, pdbKind.withBody(t, func(m map[string]any) { m["metadata"].(map[string]any)["name"] = "Bad_Name" }))
	if r.code != http.StatusCreated {
		t.Errorf("PodDisruptionBudget Bad_Name: %d %s", r.code, r.body)
	}
}

// TestGroupsStatus: a status written with the object is dropped (or
// kept, for kinds without status), the status subresource writes the
// status only, with kube's validation of it (kube-apiserver v1.37.2's
// messages).
func TestGroupsStatus(t *testing.T) {
	e := start(t)
	cases := []struct {
		k       groupKind
		patch   string
		check   func(status map[string]any) bool
		invalid string
		msg     string
	}{
		{jobKind, `{"status":{"active":2}}`, func(s map[string]any) bool { return jsonRoundTrip(t, s["active"]) == float64(2) },
			`{"status":{"active":-1}}`, `Job.batch "pi" is invalid: status.active: Invalid value: -1: must be greater than or equal to 0`},
		{cronJobKind, `{"status":{"lastScheduleTime":"2020-01-01T00:00:00Z"}}`, func(s map[string]any) bool { return s["lastScheduleTime"] == "2020-01-01T00:00:00Z" }, "", ""},
		{pdbKind, `{"status":{"disruptionsAllowed":1}}`, func(s map[string]any) bool { return jsonRoundTrip(t, s["disruptionsAllowed"]) == float64(1) },
			`{"status":{"disruptionsAllowed":-1}}`, `PodDisruptionBudget.policy "web" is invalid: status.disruptionsAllowed: Invalid value: -1: must be greater than or equal to 0`},
		{hpaKind, `{"status":{"desiredReplicas":3}}`, func(s map[string]any) bool { return jsonRoundTrip(t, s["desiredReplicas"]) == float64(3) },
			`{"status":{"desiredReplicas":-1}}`, `HorizontalPodAutoscaler.autoscaling "web" is invalid: status.desiredReplicas: Invalid value: -1: must be greater than or equal to 0`},
		{ingressKind, `{"status":{"loadBalancer":{"ingress":[{"ip":"10.0.0.9"}]}}}`, func(s map[string]any) bool {
			return strings.Contains(mustJSON(s), `"ip":"10.0.0.9"`)
		}, `{"status":{"loadBalancer":{"ingress":[{"ip":"not-an-ip"}]}}}`,
			`Ingress.networking.k8s.io "web" is invalid: status.loadBalancer.ingress[0].ip: Invalid value: "not-an-ip": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)`},
	}
	const merge = "application/merge-patch+json"
	for _, c := range cases {
		t.Run(c.k.kind, func(t *testing.T) {
			if r := e.do(http.MethodPost, c.k.collection, c.k.body); r.code != http.StatusCreated {
				t.Fatalf("create: %d %s", r.code, r.body)
			}
			path := c.k.collection + "/" + c.k.name(t)
			r := e.do(http.MethodPatch, path, c.patch, "Content-Type", merge)
			if st, _ := r.object(t)["status"].(map[string]any); r.code != http.StatusOK || c.check(st) {
				t.Fatalf("status through the main resource: %d %s", r.code, r.body)
			}
			r = e.do(http.MethodPatch, path+"/status", c.patch, "Content-Type", merge)
			if st, _ := r.object(t)["status"].(map[string]any); r.code != http.StatusOK || !c.check(st) {
				t.Fatalf("status: %d %s", r.code, r.body)
			}
			// The status subresource keeps the spec.
			r = e.do(http.MethodPatch, path+"/status", `{"metadata":{"labels":{"x":"y"}},"spec":{"changed":true}}`, "Content-Type", merge)
			if r.code != http.StatusOK || strings.Contains(string(r.body), `"changed"`) {
				t.Fatalf("spec through status: %d %s", r.code, r.body)
			}
			if c.invalid != "" {
				r = e.do(http.MethodPatch, path+"/status", c.invalid, "Content-Type", merge)
				if st := expectStatus(t, r, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid, ""); st.Message != c.msg {
					t.Errorf("message %q, want %q", st.Message, c.msg)
				}
			}
		})
	}
	// Kinds without status have no status subresource.
	for _, k := range []groupKind{ingressClassKind, netpolKind, sliceKind} {
		if r := e.do(http.MethodPost, k.collection, k.body); r.code != http.StatusCreated {
			t.Fatalf("create %s: %d %s", k.kind, r.code, r.body)
		}
		if r := e.do(http.MethodGet, k.collection+"/"+k.name(t)+"/status", ""); r.code != http.StatusNotFound {
			t.Errorf("%s status: %d %s", k.kind, r.code, r.body)
		}
	}
}

// TestJobs: a Job's generated selector stays immutable, the
// status.successful field selector, server-side apply and a strategic
// merge patch, as on kube-apiserver.
func TestJobs(t *testing.T) {
	e := start(t)
	c := e.kube.BatchV1().Jobs("default")
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "pi"},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "c", Image: "busybox"}, {Name: "side", Image: "busybox"}},
		}}},
	}
	got, err := c.Create(e.ctx, job, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Spec.Selector.MatchLabels[batchv1.ControllerUidLabel] != string(got.UID) || got.Spec.Template.Labels[batchv1.JobNameLabel] != "pi" {
		t.Fatalf("generated selector %v, template labels %v", got.Spec.Selector, got.Spec.Template.Labels)
	}
	got.Spec.Selector.MatchLabels[batchv1.ControllerUidLabel] = "other"
	if _, err := c.Update(e.ctx, got, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) || !containsCause(err, "spec.selector") {
		t.Fatalf("selector change: %v, want Invalid on spec.selector", err)
	}

	// Strategic merge: containers merge by name (the template is
	// immutable, so patch a mutable field of a new Job).
	patched, err := c.Patch(e.ctx, "pi", types.StrategicMergePatchType, []byte(`{"spec":{"activeDeadlineSeconds":60}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if patched.Spec.ActiveDeadlineSeconds == nil || *patched.Spec.ActiveDeadlineSeconds != 60 || patched.Generation != 2 || len(patched.Spec.Template.Spec.Containers) != 2 {
		t.Fatalf("after a strategic merge patch: %+v generation %d", patched.Spec, patched.Generation)
	}

	// Server-side apply of a new Job, then of its status.
	ac := batchv1apply.Job("applied", "default").WithSpec(batchv1apply.JobSpec().
		WithTemplate(corev1apply.PodTemplateSpec().WithSpec(corev1apply.PodSpec().WithRestartPolicy(corev1.RestartPolicyNever).
			WithContainers(corev1apply.Container().WithName("c").WithImage("busybox")))))
	applied, err := c.Apply(e.ctx, ac, metav1.ApplyOptions{FieldManager: "applier"})
	if err != nil {
		t.Fatal(err)
	}
	if applied.Spec.Selector == nil || applied.Spec.Selector.MatchLabels[batchv1.ControllerUidLabel] != string(applied.UID) || *applied.Spec.BackoffLimit != 6 {
		t.Fatalf("applied Job: %+v", applied.Spec)
	}
	if !slices.ContainsFunc(applied.ManagedFields, func(m metav1.ManagedFieldsEntry) bool {
		return m.Manager == "applier" && m.Operation == metav1.ManagedFieldsOperationApply
	}) {
		t.Fatalf("no apply entry in managedFields: %+v", applied.ManagedFields)
	}
	st := batchv1apply.Job("applied", "default").WithStatus(batchv1apply.JobStatus().WithSucceeded(1))
	if applied, err = c.ApplyStatus(e.ctx, st, metav1.ApplyOptions{FieldManager: "controller", Force: true}); err != nil {
		t.Fatal(err)
	}
	if applied.Status.Succeeded != 1 {
		t.Fatalf("status after ApplyStatus: %+v", applied.Status)
	}

	// kube's field selector on status.successful (absent is 0).
	for sel, want := range map[string][]string{"status.successful=1": {"applied"}, "status.successful=0": {"pi"}} {
		list, err := c.List(e.ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			t.Fatalf("%s: %v", sel, err)
		}
		var names []string
		for _, j := range list.Items {
			names = append(names, j.Name)
		}
		if !slices.Equal(names, want) {
			t.Errorf("%s: %v, want %v", sel, names, want)
		}
	}
	if _, err := c.List(e.ctx, metav1.ListOptions{FieldSelector: "status.active=1"}); !apierrors.IsBadRequest(err) {
		t.Errorf("unknown field label: %v, want BadRequest", err)
	}
}

// TestGroupsTables: kubectl get's columns are kube-apiserver v1.37.2's.
func TestGroupsTables(t *testing.T) {
	e := start(t)
	type col struct {
		name     string
		priority int32
	}
	cases := []struct {
		k     groupKind
		cols  []col
		cells []any // the first cells (those without time)
	}{
		{jobKind, []col{{"Name", 0}, {"Status", 0}, {"Completions", 0}, {"Duration", 0}, {"Age", 0}, {"Containers", 1}, {"Images", 1}, {"Selector", 1}}, []any{"pi"}},
		{cronJobKind, []col{{"Name", 0}, {"Schedule", 0}, {"Timezone", 0}, {"Suspend", 0}, {"Active", 0}, {"Last Schedule", 0}, {"Age", 0}, {"Containers", 1}, {"Images", 1}, {"Selector", 1}},
			[]any{"hello", "*/5 * * * *", "<none>", "False", float64(0), "<none>"}},
		{pdbKind, []col{{"Name", 0}, {"Min Available", 0}, {"Max Unavailable", 0}, {"Allowed Disruptions", 0}, {"Age", 0}}, []any{"web", "1", "N/A", float64(0)}},
		{hpaKind, []col{{"Name", 0}, {"Reference", 0}, {"Targets", 0}, {"MinPods", 0}, {"MaxPods", 0}, {"Replicas", 0}, {"Age", 0}},
			[]any{"web", "Deployment/web", "cpu: <unknown>/80%", "1", float64(5), float64(0)}},
		{ingressKind, []col{{"Name", 0}, {"Class", 0}, {"Hosts", 0}, {"Address", 0}, {"Ports", 0}, {"Age", 0}}, []any{"web", "<none>", "*", "", "80"}},
		{ingressClassKind, []col{{"Name", 0}, {"Controller", 0}, {"Parameters", 0}, {"Age", 0}}, []any{"nginx", "example.com/ingress-controller", "<none>"}},
		{netpolKind, []col{{"Name", 0}, {"Pod-Selector", 0}, {"Age", 0}}, []any{"deny", "<none>"}},
		{sliceKind, []col{{"Name", 0}, {"AddressType", 0}, {"Ports", 0}, {"Endpoints", 0}, {"Age", 0}}, []any{"web-abc", "IPv4", "80", "10.0.0.1"}},
	}
	for _, c := range cases {
		t.Run(c.k.kind, func(t *testing.T) {
			if r := e.do(http.MethodPost, c.k.collection, c.k.body); r.code != http.StatusCreated {
				t.Fatalf("create: %d %s", r.code, r.body)
			}
			r := e.do(http.MethodGet, c.k.collection, "", "Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
			var tbl metav1.Table
			if r.code != http.StatusOK || json.Unmarshal(r.body, &tbl) != nil {
				t.Fatalf("table: %d %s", r.code, r.body)
			}
			var cols []col
			for _, cd := range tbl.ColumnDefinitions {
				cols = append(cols, col{cd.Name, cd.Priority})
			}
			if !slices.Equal(cols, c.cols) {
				t.Errorf("columns %v, want %v", cols, c.cols)
			}
			if len(tbl.Rows) != 1 || len(tbl.Rows[0].Cells) != len(c.cols) || !reflect.DeepEqual(tbl.Rows[0].Cells[:len(c.cells)], c.cells) {
				t.Errorf("rows %+v, want cells beginning %v", tbl.Rows, c.cells)
			}
		})
	}
}

// TestGroupsDiscovery: the resources of each group, with kube-apiserver
// v1.37.2's short names, categories and subresources.
func TestGroupsDiscovery(t *testing.T) {
	e := start(t)
	type res struct {
		name, kind string
		namespaced bool
		short, cat []string
	}
	want := map[string][]res{
		"batch/v1": {{"cronjobs", "CronJob", true, []string{"cj"}, []string{"all"}}, {"cronjobs/status", "CronJob", true, nil, nil},
			{"jobs", "Job", true, nil, []string{"all"}}, {"jobs/status", "Job", true, nil, nil}},
		"policy/v1": {{"poddisruptionbudgets", "PodDisruptionBudget", true, []string{"pdb"}, nil}, {"poddisruptionbudgets/status", "PodDisruptionBudget", true, nil, nil}},
		"autoscaling/v2": {{"horizontalpodautoscalers", "HorizontalPodAutoscaler", true, []string{"hpa"}, []string{"all"}},
			{"horizontalpodautoscalers/status", "HorizontalPodAutoscaler", true, nil, nil}},
		"networking.k8s.io/v1": {{"ingressclasses", "IngressClass", false, nil, nil}, {"ingresses", "Ingress", true, []string{"ing"}, nil},
			{"ingresses/status", "Ingress", true, nil, nil}, {"networkpolicies", "NetworkPolicy", true, []string{"netpol"}, nil}},
		"discovery.k8s.io/v1": {{"endpointslices", "EndpointSlice", true, nil, nil}},
	}
	// kube-apiserver v1.37.2's storage version hashes.
	hashes := map[string]string{
		"cronjobs": "sd5LIXh4Fjs=", "jobs": "mudhfqk/qZY=", "poddisruptionbudgets": "EVWiDmWqyJw=", "horizontalpodautoscalers": "qwQve8ut294=",
		"ingressclasses": "l/iqIbDgFyQ=", "ingresses": "39NQlfNR+bo=", "networkpolicies": "YpfwF18m1G8=", "endpointslices": "qgS0xkrxYAI=",
	}
	for gv, rs := range want {
		list, err := e.kube.Discovery().ServerResourcesForGroupVersion(gv)
		if err != nil {
			t.Fatalf("%s: %v", gv, err)
		}
		var got []res
		for _, r := range list.APIResources {
			got = append(got, res{r.Name, r.Kind, r.Namespaced, r.ShortNames, r.Categories})
			if h, ok := hashes[r.Name]; ok && (r.StorageVersionHash != h || r.SingularName != strings.ToLower(r.Kind)) {
				t.Errorf("%s: storageVersionHash %q singularName %q, want %q and %q", r.Name, r.StorageVersionHash, r.SingularName, h, strings.ToLower(r.Kind))
			}
		}
		if !reflect.DeepEqual(got, rs) {
			t.Errorf("%s:\n%+v\nwant\n%+v", gv, got, rs)
		}
	}
}

// TestGroupsRBAC: the default edit role writes these kinds and view reads
// them, as Kubernetes' default roles do (IngressClasses are neither's).
func TestGroupsRBAC(t *testing.T) {
	e := start(t)
	editor, viewer := e.editAndView()
	np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "deny"}}
	// The aggregated roles follow their parts' rules a moment later.
	var err error
	for i := 0; i < 100; i++ {
		if _, err = editor.NetworkingV1().NetworkPolicies("default").Create(e.ctx, np, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("create as edit: %v", err)
	}
	for _, k := range []groupKind{jobKind, cronJobKind, pdbKind, hpaKind, ingressKind} {
		r := e.doWith(transport(t, e.asServiceAccount("default", "edit-sa")), http.MethodPost, k.collection, k.body)
		if r.code != http.StatusCreated {
			t.Errorf("create %s as edit: %d %s", k.kind, r.code, r.body)
		}
	}
	viewRT := transport(t, e.asServiceAccount("default", "view-sa"))
	for _, k := range []groupKind{jobKind, cronJobKind, pdbKind, hpaKind, ingressKind, netpolKind} {
		if r := e.doWith(viewRT, http.MethodGet, k.collection+"/"+k.name(t), ""); r.code != http.StatusOK {
			t.Errorf("get %s as view: %d %s", k.kind, r.code, r.body)
		}
		if r := e.doWith(viewRT, http.MethodGet, k.collection+"/"+k.name(t)+"/status", ""); k != netpolKind && r.code != http.StatusOK {
			t.Errorf("get %s status as view: %d %s", k.kind, r.code, r.body)
		}
	}
	if _, err := viewer.DiscoveryV1().EndpointSlices("default").List(e.ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("list endpointslices as view: %v", err)
	}
	if err := viewer.BatchV1().Jobs("default").Delete(e.ctx, "pi", metav1.DeleteOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("delete a Job as view: %v, want Forbidden", err)
	}
	if r := e.doWith(transport(t, e.asServiceAccount("default", "edit-sa")), http.MethodPost, sliceKind.collection, sliceKind.body); r.code != http.StatusForbidden {
		t.Errorf("create an EndpointSlice as edit: %d, want 403", r.code)
	}
	if _, err := editor.NetworkingV1().IngressClasses().List(e.ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("list IngressClasses as edit: %v, want Forbidden", err)
	}
}

// TestGroupsRuntimeConfig: --runtime-config turns a group version off.
func TestGroupsRuntimeConfig(t *testing.T) {
	e := start(t, func(c *server.Config) { c.RuntimeConfig = map[string]string{"batch/v1": "false"} })
	if r := e.do(http.MethodGet, "/apis/batch/v1/namespaces/default/jobs", ""); r.code != http.StatusNotFound {
		t.Errorf("jobs with batch/v1 off: %d %s", r.code, r.body)
	}
	if r := e.do(http.MethodGet, "/apis/policy/v1/namespaces/default/poddisruptionbudgets", ""); r.code != http.StatusOK {
		t.Errorf("poddisruptionbudgets: %d %s", r.code, r.body)
	}
}

// transport sends raw requests with cfg's credentials.
func transport(t *testing.T, cfg *rest.Config) http.RoundTripper {
	t.Helper()
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

// TestJobDeleteOrphans: a delete of a batch/v1 Job that names no
// propagation policy orphans its pods (the orphan finalizer, which the
// garbage collector then handles) with kube-apiserver v1.37.2's warning;
// a policy silences it.
func TestJobDeleteOrphans(t *testing.T) {
	e := start(t)
	if r := e.do(http.MethodPost, jobKind.collection, jobKind.body); r.code != http.StatusCreated {
		t.Fatalf("create: %d %s", r.code, r.body)
	}
	const warning = `299 - "child pods are preserved by default when jobs are deleted; set propagationPolicy=Background to remove them or set propagationPolicy=Orphan to suppress this warning"`
	path := jobKind.collection + "/pi"
	r := e.do(http.MethodDelete, path+"?dryRun=All", "")
	var job batchv1.Job
	if r.code != http.StatusOK || json.Unmarshal(r.body, &job) != nil || !slices.Equal(job.Finalizers, []string{metav1.FinalizerOrphanDependents}) || job.DeletionTimestamp == nil {
		t.Fatalf("dry-run delete: %d %s", r.code, r.body)
	}
	if got := r.header.Values("Warning"); !slices.Equal(got, []string{warning}) {
		t.Errorf("warnings %q, want %q", got, warning)
	}
	if r := e.do(http.MethodDelete, jobKind.collection+"/nothere", ""); r.code != http.StatusNotFound || !slices.Equal(r.header.Values("Warning"), []string{warning}) {
		t.Errorf("delete of a missing Job: %d %q", r.code, r.header.Values("Warning"))
	}
	r = e.do(http.MethodDelete, path+"?dryRun=All&propagationPolicy=Background", "")
	if r.code != http.StatusOK || len(r.header.Values("Warning")) != 0 || !strings.Contains(string(r.body), `"kind":"Status"`) {
		t.Errorf("background dry-run delete: %d %q %s", r.code, r.header.Values("Warning"), r.body)
	}
	// CronJobs delete their Jobs by default.
	if r := e.do(http.MethodDelete, cronJobKind.collection+"/nothere", ""); r.code != http.StatusNotFound || len(r.header.Values("Warning")) != 0 {
		t.Errorf("delete of a missing CronJob: %d %q", r.code, r.header.Values("Warning"))
	}
	// The real delete: the garbage collector removes the orphan
	// finalizer, and the Job is gone.
	if r := e.do(http.MethodDelete, path, ""); r.code != http.StatusOK {
		t.Fatalf("delete: %d %s", r.code, r.body)
	}
	for i := 0; ; i++ {
		if _, err := e.kube.BatchV1().Jobs("default").Get(e.ctx, "pi", metav1.GetOptions{}); apierrors.IsNotFound(err) {
			break
		}
		if i == 200 {
			t.Fatal("the deleted Job is still there")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestGroupsEtcdKeys: the objects are stored under kube-apiserver's keys
// (Ingresses under the extensions group's /registry/ingress/).
func TestGroupsEtcdKeys(t *testing.T) {
	e, cli := startWithEtcd(t)
	keys := map[groupKind]string{
		jobKind: "/registry/jobs/default/pi", cronJobKind: "/registry/cronjobs/default/hello",
		pdbKind: "/registry/poddisruptionbudgets/default/web", hpaKind: "/registry/horizontalpodautoscalers/default/web",
		ingressKind: "/registry/ingress/default/web", ingressClassKind: "/registry/ingressclasses/nginx",
		netpolKind: "/registry/networkpolicies/default/deny", sliceKind: "/registry/endpointslices/default/web-abc",
	}
	for k, key := range keys {
		if r := e.do(http.MethodPost, k.collection, k.body); r.code != http.StatusCreated {
			t.Fatalf("create %s: %d %s", k.kind, r.code, r.body)
		}
		resp, err := cli.Get(e.ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Kvs) != 1 || !strings.Contains(string(resp.Kvs[0].Value), `"kind":"`+k.kind+`"`) {
			t.Errorf("%s: %s holds %v", k.kind, key, resp.Kvs)
		}
	}
}
