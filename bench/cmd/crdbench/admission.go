package main

// crdbench admission: the cost of dynamic admission on creates of a custom
// resource, on one server (crdserver or kube-apiserver), over the same
// HTTPS/HTTP2 client as load.
//
// Configurations, each measured in every round: no admission (0 policies),
// 1 and 10 ValidatingAdmissionPolicies bound (each `object.spec.size <= 100`,
// which every created object passes, bound with validationActions [Deny]),
// and one validating admission webhook that crdbench serves itself on
// loopback (HTTPS, AdmissionReview v1, allows everything). Per round and
// configuration: n creates with -concurrency workers, then the objects are
// deleted again (not timed). Policies and webhook configurations take effect
// asynchronously, so after every change crdbench waits (bounded) until a
// probe shows the new set in force: a probe policy, created after the
// change, denies a dry-run probe object; the probe policy is deleted again
// and the probe is then admitted, reaching the webhook if and only if the
// webhook is configured; and a dry-run object that the measured policies
// refuse (spec.size 101) is denied if and only if policies are bound.

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"maps"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	admGroup      = "admission.crdbench.example.com"
	admCRDName    = "widgets." + admGroup
	admPrefix     = "crdbench-admission-" // policies, bindings and the webhook configuration
	admProbeName  = admPrefix + "probe"   // the probe policy and its binding
	admHookName   = admPrefix + "webhook" // the ValidatingWebhookConfiguration
	admProbeObj   = "crdbench-probe"      // the probe object (dry runs only)
	admProbeBig   = "crdbench-probe-big"  // spec.size 101: refused by the measured policies
	admExpression = "object.spec.size <= 100"
	vapPath       = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies"
	vapbPath      = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings"
	vwcPath       = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"
)

// admRound is one round of one configuration.
type admRound struct {
	Round        int        `json:"round"`
	Create       phase      `json:"create"`
	CPU          *cpuWindow `json:"cpu,omitempty"`
	CPUPerCreate float64    `json:"server_cpu_us_per_create,omitempty"`
	WebhookCalls int64      `json:"webhook_calls"`
	SettleSec    float64    `json:"settle_seconds"` // the change before it until the probe showed it in force
	Load1        float64    `json:"load1_after"`    // 1-minute load average right after the creates
	DeleteSec    float64    `json:"delete_seconds"`
	DeleteErrors int        `json:"delete_errors"`
}

// admConfig is one admission configuration over all rounds.
type admConfig struct {
	Key      string     `json:"key"`
	Name     string     `json:"name"`
	Policies int        `json:"policies"`
	Webhook  bool       `json:"webhook"`
	Rounds   []admRound `json:"rounds"`
	// Medians over the rounds that had no failed create.
	PerSecond    float64 `json:"creates_per_second_median"`
	P50Ms        float64 `json:"p50_ms_median"`
	P99Ms        float64 `json:"p99_ms_median"`
	CPUPerCreate float64 `json:"server_cpu_us_per_create_median,omitempty"`
	GoodRounds   int     `json:"good_rounds"`
}

type admissionResult struct {
	Server      string         `json:"server"`
	Name        string         `json:"name"`
	Protocol    string         `json:"protocol"`
	ClientCert  bool           `json:"client_cert"`
	Date        string         `json:"date"`
	Namespace   string         `json:"namespace"`
	CRD         string         `json:"crd"`
	N           int            `json:"creates_per_round"`
	Rounds      int            `json:"rounds"`
	Concurrency int            `json:"concurrency"`
	Warmup      int            `json:"warmup_creates"`
	BodyBytes   int            `json:"create_body_bytes"`
	Expression  string         `json:"policy_expression"`
	WebhookURL  string         `json:"webhook_url"`
	HookProtos  map[string]int `json:"webhook_protocols,omitempty"`
	ClockTicks  float64        `json:"clock_ticks_per_second"`
	Existing    map[string]int `json:"admission_objects_before"` // others' policies, bindings and webhook configurations at the start
	LoadStart   string         `json:"loadavg_start"`
	LoadEnd     string         `json:"loadavg_end"`
	Order       []string       `json:"order_in_each_round"`
	Configs     []admConfig    `json:"configurations"`
	Removed     string         `json:"admission_objects_removed,omitempty"`
	Cleanup     string         `json:"cleanup,omitempty"`
	Failures    []failure      `json:"failures,omitempty"`
	Error       string         `json:"error,omitempty"`
}

func (r *admissionResult) config(key string) *admConfig {
	return find(r.Configs, func(x *admConfig) bool { return x.Key == key })
}

// admissionHook is the validating webhook: it allows every AdmissionReview
// v1 it gets, counting calls, and the calls for the probe object apart.
type admissionHook struct {
	calls  atomic.Int64
	probes atomic.Int64
	bad    atomic.Int64
	mu     sync.Mutex
	protos map[string]int
}

func newAdmissionHook() *admissionHook {
	return &admissionHook{protos: map[string]int{}}
}

func (h *admissionHook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.calls.Add(1)
	h.mu.Lock()
	h.protos[r.Proto]++
	h.mu.Unlock()
	body, err := io.ReadAll(io.LimitReader(r.Body, 8<<20))
	var review admissionv1.AdmissionReview
	if err == nil {
		err = json.Unmarshal(body, &review)
	}
	if err != nil || review.Request == nil {
		h.bad.Add(1)
		http.Error(w, "not an AdmissionReview v1 request", http.StatusBadRequest)
		return
	}
	if strings.HasPrefix(review.Request.Name, admProbeObj) {
		h.probes.Add(1)
	}
	out, _ := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Response: &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true},
	})
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(out)
}

// admWidgetCRD is the Widget CRD of the admission group: v1 only, spec with
// size (integer), color and tags.
func admWidgetCRD() []byte {
	crd := map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": admCRDName, "labels": map[string]string{"bench": "crdbench"}},
		"spec": map[string]any{
			"group": admGroup, "scope": "Namespaced",
			"names": map[string]any{"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
			"versions": []any{map[string]any{"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "properties": map[string]any{
					"spec": map[string]any{"type": "object", "properties": map[string]any{
						"size":  map[string]any{"type": "integer"},
						"color": map[string]any{"type": "string"},
						"tags":  map[string]any{"type": "array", "items": map[string]any{"type": "string"}},
					}},
				}}}}},
		},
	}
	b, _ := json.Marshal(crd)
	return b
}

// admRules are the rules of every policy and of the webhook: creates of the
// Widgets of the admission group.
func admRules() []any {
	return []any{map[string]any{"apiGroups": []string{admGroup}, "apiVersions": []string{"v1"},
		"operations": []string{"CREATE"}, "resources": []string{"widgets"}, "scope": "Namespaced"}}
}

// admPolicy is a ValidatingAdmissionPolicy with one validation.
func admPolicy(name, expression, message string) []byte {
	b, _ := json.Marshal(map[string]any{
		"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
		"metadata": map[string]any{"name": name, "labels": map[string]string{"bench": "crdbench"}},
		"spec": map[string]any{
			"failurePolicy":    "Fail",
			"matchConstraints": map[string]any{"resourceRules": admRules()},
			"validations":      []any{map[string]any{"expression": expression, "message": message}},
		},
	})
	return b
}

// admBinding binds the policy of the same name, validationActions [Deny].
func admBinding(name string) []byte {
	b, _ := json.Marshal(map[string]any{
		"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
		"metadata": map[string]any{"name": name, "labels": map[string]string{"bench": "crdbench"}},
		"spec":     map[string]any{"policyName": name, "validationActions": []string{"Deny"}},
	})
	return b
}

// admWebhookConfig is the ValidatingWebhookConfiguration of crdbench's
// webhook: url and caBundle, sideEffects None, admissionReviewVersions [v1].
func admWebhookConfig(url string, caPEM []byte) []byte {
	b, _ := json.Marshal(map[string]any{
		"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
		"metadata": map[string]any{"name": admHookName, "labels": map[string]string{"bench": "crdbench"}},
		"webhooks": []any{map[string]any{
			"name":                    "allow." + admGroup,
			"clientConfig":            map[string]any{"url": url, "caBundle": base64.StdEncoding.EncodeToString(caPEM)},
			"rules":                   admRules(),
			"failurePolicy":           "Fail",
			"matchPolicy":             "Equivalent",
			"sideEffects":             "None",
			"timeoutSeconds":          10,
			"admissionReviewVersions": []string{"v1"},
		}},
	})
	return b
}

func admPolicyName(i int) string { return fmt.Sprintf("%s%02d", admPrefix, i) }

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

func load1() float64 {
	f := strings.Fields(loadavg())
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

// parseCounts parses "0,1,10" into distinct counts in [0, 50].
func parseCounts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		v, err := strconv.Atoi(f)
		if err != nil || v < 0 || v > 50 {
			return nil, fmt.Errorf("-policies: %q is not a count from 0 to 50", f)
		}
		if slices.Contains(out, v) {
			return nil, fmt.Errorf("-policies: %d given twice", v)
		}
		out = append(out, v)
	}
	return out, nil
}

// admConfigs are the configurations measured: each number of policies,
// then the webhook if asked for; and their keys in that order.
func admConfigs(policyCounts []int, webhook bool) ([]admConfig, []string) {
	var configs []admConfig
	for _, k := range policyCounts {
		label := fmt.Sprintf("%d policies", k)
		switch k {
		case 0:
			label = "no admission (0 policies)"
		case 1:
			label = "1 policy"
		}
		configs = append(configs, admConfig{Key: "p" + strconv.Itoa(k), Name: label, Policies: k})
	}
	if webhook {
		configs = append(configs, admConfig{Key: "webhook", Name: "1 webhook (0 policies)", Webhook: true})
	}
	order := make([]string, 0, len(configs))
	for _, cf := range configs {
		order = append(order, cf.Key)
	}
	return configs, order
}

// countExisting records how many admission objects of others the server
// has (they are evaluated too).
func (a *admRun) countExisting() error {
	for _, x := range []struct{ key, path string }{
		{"validatingadmissionpolicies", vapPath}, {"validatingadmissionpolicybindings", vapbPath},
		{"validatingwebhookconfigurations", vwcPath},
		{"mutatingwebhookconfigurations", "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"},
	} {
		code, b, err := a.do(http.MethodGet, a.c.base+x.path, nil, 30*time.Second)
		if err != nil || code != http.StatusOK {
			a.fail("list-"+x.key, http.MethodGet, a.c.base+x.path, code, b, err)
			return fmt.Errorf("could not list %s", x.key)
		}
		var list struct{ Items []json.RawMessage }
		_ = json.Unmarshal(b, &list)
		a.res.Existing[x.key] = len(list.Items)
	}
	return nil
}

// createFailures are the first failed create of each round of each
// configuration.
func (r *admissionResult) createFailures() []failure {
	var out []failure
	for _, cf := range r.Configs {
		for _, round := range cf.Rounds {
			if round.Create.FirstError != nil {
				out = append(out, *round.Create.FirstError)
			}
		}
	}
	return out
}

func runAdmission(args []string) error {
	fs := flag.NewFlagSet("admission", flag.ExitOnError)
	var t tlsFlags
	t.register(fs)
	var (
		server      = fs.String("server", "", "API server base URL, https:// or http:// (loopback only)")
		name        = fs.String("name", "server", "name of the server in the results")
		namespace   = fs.String("namespace", "crdbench-admission", "namespace to create for the objects (must not exist)")
		n           = fs.Int("n", 2000, "creates per round and configuration")
		rounds      = fs.Int("rounds", 3, "rounds; each measures every configuration once, in turn")
		conc        = fs.Int("concurrency", 8, "workers for the creates (and the deletes after them)")
		warmup      = fs.Int("warmup", 200, "unmeasured creates (and deletes) before the first round, no admission configured")
		counts      = fs.String("policies", "0,1,10", "numbers of bound policies to measure, comma-separated (0 to 50)")
		webhook     = fs.Bool("webhook", true, "also measure one validating webhook (no policies)")
		waitFor     = fs.Duration("wait", 60*time.Second, "how long to wait for the CRD, and for each admission change to be in force")
		phaseLimit  = fs.Duration("phase-timeout", 5*time.Minute, "time limit of each round's creates, and of its deletes")
		cleanup     = fs.Bool("cleanup", false, "delete the namespace and the CRD afterwards (policies, bindings and the webhook configuration are always deleted)")
		cleanupWait = fs.Duration("cleanup-wait", 2*time.Minute, "how long to wait for the namespace and the CRD to go")
		jsonOut     = fs.String("json", "", "write the results as JSON to this file")
		pids        namedPIDs
	)
	fs.Var(&pids, "pid", "name=PID of a server process whose CPU time is counted (repeatable; kube: kube-apiserver and etcd)")
	_ = fs.Parse(args)
	policyCounts, err := parseCounts(*counts)
	if err != nil {
		return err
	}
	if err := checkFlags([]bound{
		{*n < 1 || *n > 100000, "1 <= -n <= 100000"},
		{*rounds < 1 || *rounds > 20, "1 <= -rounds <= 20"},
		{*conc < 1 || *conc > 64, "1 <= -concurrency <= 64"},
		{*warmup < 0 || *warmup > 100000, "0 <= -warmup <= 100000"},
		{*waitFor < time.Second || *waitFor > 10*time.Minute, "1s <= -wait <= 10m"},
		{*phaseLimit < time.Second || *phaseLimit > time.Hour, "1s <= -phase-timeout <= 1h"},
		{*cleanupWait < 0 || *cleanupWait > 10*time.Minute, "0 <= -cleanup-wait <= 10m"},
		{*namespace == "", "-namespace"},
	}); err != nil {
		return err
	}
	if len(policyCounts) == 0 && !*webhook {
		return errors.New("nothing to measure: -policies is empty and -webhook=false")
	}
	c, err := connect(*server, t, *conc)
	if err != nil {
		return err
	}
	// Interrupted, crdbench still removes what it configured.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	base := c.base
	var procs []pidSpec
	for _, p := range pids {
		procs = append(procs, pidSpec{p.name, p.pid, true})
	}
	meter := cpuMeter{pids: procs, hz: clockTicks()}
	ns := *namespace
	nsURL := base + "/api/v1/namespaces/" + ns
	coll := base + "/apis/" + admGroup + "/v1/namespaces/" + ns + "/widgets"
	crdURL := base + "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/" + admCRDName
	l := &loader{apiVersion: admGroup + "/v1", kind: "Widget"}
	res := &admissionResult{Server: base, Name: *name, ClientCert: t.cert != "", Date: time.Now().UTC().Format(time.RFC3339),
		Namespace: ns, CRD: admCRDName, N: *n, Rounds: *rounds, Concurrency: *conc, Warmup: *warmup,
		BodyBytes: len(l.body("w-webhook-1-00000", 0)), Expression: admExpression, ClockTicks: meter.hz,
		LoadStart: loadavg(), Existing: map[string]int{}}
	res.Configs, res.Order = admConfigs(policyCounts, *webhook)
	maxPolicies := slices.Max(append(slices.Clone(policyCounts), 0))

	// The webhook, on loopback over TLS.
	hook := newAdmissionHook()
	hookBase, certPEM, hsrv, err := serveTLS("crdbench-admission-webhook", hook)
	if err != nil {
		return err
	}
	defer hsrv.Close()
	res.WebhookURL = hookBase + "/"

	a := &admRun{ctx: ctx, c: c, res: res, hook: hook, caPEM: certPEM, coll: coll, waitFor: *waitFor, maxPolicies: maxPolicies}
	nsCreated, crdCreated := false, false

	finish := func(err error) error {
		a.removeAll()
		if *cleanup {
			var parts []string
			if nsCreated {
				parts = append(parts, c.deleteAndWait("namespace", nsURL, *cleanupWait))
			}
			if crdCreated {
				parts = append(parts, c.deleteAndWait("CRD "+admCRDName, crdURL, *cleanupWait))
			}
			res.Cleanup = strings.Join(parts, "; ")
			log.Printf("cleanup: %s", res.Cleanup)
		}
		res.Protocol = c.protocol()
		hook.mu.Lock()
		res.HookProtos = maps.Clone(hook.protos)
		hook.mu.Unlock()
		res.LoadEnd = loadavg()
		if err == nil && ctx.Err() != nil {
			err = errors.New("interrupted")
		}
		res.Failures = append(res.Failures, res.createFailures()...)
		return done(*jsonOut, res, &res.Error, res.Failures, err)
	}

	// Others' admission objects, for the record (they would be evaluated too).
	if err := a.countExisting(); err != nil {
		return finish(err)
	}

	// The namespace and the CRD: neither may exist (they could be someone else's).
	if f, err := c.create(ctx, "namespace", "namespace "+ns, base+"/api/v1/namespaces", namespaceBody(ns)); err != nil {
		res.Failures = append(res.Failures, *f)
		return finish(err)
	}
	nsCreated = true
	if f, err := c.create(ctx, "create-crd", "CRD "+admCRDName, base+crdPath, admWidgetCRD()); err != nil {
		res.Failures = append(res.Failures, *f)
		return finish(err)
	}
	crdCreated = true
	if err := c.waitEstablished(ctx, admCRDName, *waitFor); err != nil {
		return finish(err)
	}

	// Creates and deletes of one round (or the warm-up).
	names := func(key string, round int) func(i int) string {
		return func(i int) string { return fmt.Sprintf("w-%s-%d-%05d", key, round, i) }
	}
	creates := func(label string, count int, name func(int) string) phase {
		bodies := make([][]byte, count)
		for i := range bodies {
			bodies[i] = l.body(name(i), i)
		}
		return c.phase(ctx, label, count, *conc, *phaseLimit, func(i int) request {
			return request{http.MethodPost, coll, bodies[i], []int{http.StatusCreated}}
		}, nil)
	}
	deletes := func(label string, count int, name func(int) string) phase {
		return c.phase(ctx, label, count, *conc, *phaseLimit, func(i int) request {
			return request{http.MethodDelete, coll + "/" + name(i), nil, []int{http.StatusOK, http.StatusAccepted, http.StatusNotFound}}
		}, nil)
	}
	if *warmup > 0 {
		log.Printf("warm-up: %d creates and deletes, no admission configured", *warmup)
		p := creates("warmup-create", *warmup, names("warmup", 0))
		d := deletes("warmup-delete", *warmup, names("warmup", 0))
		if p.Errors > 0 || d.Errors > 0 {
			for _, f := range []*failure{p.FirstError, d.FirstError} {
				if f != nil {
					res.Failures = append(res.Failures, *f)
				}
			}
			return finish(fmt.Errorf("warm-up: %d of %d creates and %d of %d deletes failed", p.Errors, p.Requests, d.Errors, d.Requests))
		}
	}

	for r := 1; r <= *rounds; r++ {
		for k := range res.Configs {
			cf := &res.Configs[k]
			t0 := time.Now()
			if err := a.configure(cf); err != nil {
				return finish(fmt.Errorf("round %d, %s: %w", r, cf.Name, err))
			}
			rd := admRound{Round: r, SettleSec: math3(time.Since(t0).Seconds())}
			name := names(cf.Key, r)
			log.Printf("round %d, %s (in force after %.2f s): %d creates with %d workers", r, cf.Name, rd.SettleSec, *n, *conc)
			calls := hook.calls.Load()
			s := meter.snap()
			rd.Create = creates(fmt.Sprintf("create-%s-%d", cf.Key, r), *n, name)
			if len(procs) > 0 {
				rd.CPU = cpuBetween(procs, s, meter.snap(), meter.hz)
				if rd.CPU.Error == "" && rd.Create.Requests > 0 {
					rd.CPUPerCreate = math3(rd.CPU.TotalSec * 1e6 / float64(rd.Create.Requests))
				}
			}
			rd.WebhookCalls = hook.calls.Load() - calls
			rd.Load1 = load1()
			d := deletes(fmt.Sprintf("delete-%s-%d", cf.Key, r), *n, name)
			rd.DeleteSec, rd.DeleteErrors = math3(d.WallSec), d.Errors
			cf.Rounds = append(cf.Rounds, rd)
			log.Printf("round %d, %s: %.1f creates/s, p50 %.2f ms, p99 %.2f ms, %d errors, %d webhook calls, load %.2f",
				r, cf.Name, rd.Create.PerSecond, rd.Create.P50Ms, rd.Create.P99Ms, rd.Create.Errors, rd.WebhookCalls, rd.Load1)
			if d.Errors > 0 && d.FirstError != nil {
				res.Failures = append(res.Failures, *d.FirstError)
			}
			if rd.Create.Aborted || ctx.Err() != nil {
				return finish(fmt.Errorf("round %d, %s: creates aborted", r, cf.Name))
			}
			if want := int64(0); cf.Webhook {
				want = int64(rd.Create.Requests)
				if rd.WebhookCalls < want-int64(rd.Create.Errors) {
					res.Failures = append(res.Failures, failure{Phase: rd.Create.Name,
						Error: fmt.Sprintf("the webhook was called %d times for %d creates", rd.WebhookCalls, rd.Create.Requests)})
				}
			} else if rd.WebhookCalls != 0 {
				res.Failures = append(res.Failures, failure{Phase: rd.Create.Name,
					Error: fmt.Sprintf("the webhook was called %d times with no webhook configured", rd.WebhookCalls)})
			}
		}
	}
	for k := range res.Configs {
		res.Configs[k].medians()
	}
	return finish(nil)
}

// admSide is the admission benchmark of one server (admission-NAME.json).
type admSide sideOf[admissionResult]

// cfgVal is a median of one configuration, or why there is none.
func (s admSide) cfgVal(key string, f func(*admConfig) (float64, bool), prec int, unit string) val {
	if s.res == nil {
		return none(s.why)
	}
	cf := s.res.config(key)
	if cf == nil || len(cf.Rounds) == 0 {
		return none("not reached")
	}
	if cf.GoodRounds == 0 {
		return none("**failed** (see Failures)")
	}
	v, ok := f(cf)
	if !ok {
		return none("not measured")
	}
	return num(v, prec, unit)
}

// admissionReport writes the admission section (crdserver beside
// kube-apiserver) and returns its failures.
func admissionReport(dir string, p func(string, ...any)) (fails []string) {
	c, k := admSide(readSide[admissionResult](dir, "admission-crdserver.json")), admSide(readSide[admissionResult](dir, "admission-kube.json"))
	if c.res == nil && k.res == nil {
		return nil
	}
	first := cmp.Or(c.res, k.res)
	sides := []struct {
		name string
		s    admSide
	}{{"crdserver", c}, {"kube-apiserver", k}}

	var order []string
	for _, cf := range first.Configs {
		order = append(order, cf.Name)
	}
	p("## Admission: creates with 0/1/10 validating policies and one webhook\n\n")
	p("Creates of a custom resource (`%s`, a Widget of %d bytes like the load's) under each admission configuration: none; "+
		"1 and 10 ValidatingAdmissionPolicies, each one validation `%s` (every object passes) on CREATE, bound with `validationActions: [Deny]`; "+
		"and one validating webhook served by crdbench on loopback (HTTPS, `caBundle`, AdmissionReview v1, allows everything; "+
		"`sideEffects: None`, `failurePolicy: Fail`, `timeoutSeconds: 10`). Each of %d rounds measures every configuration in turn (%s): "+
		"%s creates with %d workers over one HTTP/2 connection, then the objects are deleted (not timed). Figures are medians over the rounds "+
		"of each round's nearest-rank percentiles. Before each configuration crdbench waits until it is in force (a probe policy denies a "+
		"dry-run probe, is deleted, and the probe is admitted, reaching the webhook exactly when one is configured; a dry-run `spec.size: 101` "+
		"is denied exactly when policies are bound). Server CPU is utime + stime (`/proc/PID/stat`, 10 ms ticks) of crdserver's one process, "+
		"of kube-apiserver + etcd.\n\n",
		first.CRD, first.BodyBytes, first.Expression, first.Rounds, strings.Join(order, " → "), commas(first.N), first.Concurrency)

	// Each configuration's medians, and their cost against no admission.
	t := newTable("configuration", "crdserver", "kube-apiserver", "ratio")
	var fs []fig[admSide]
	for _, cf := range first.Configs {
		get := func(f func(*admConfig) float64, prec int, unit string) func(admSide) val {
			return func(s admSide) val {
				return s.cfgVal(cf.Key, func(x *admConfig) (float64, bool) { return f(x), f(x) > 0 }, prec, unit)
			}
		}
		fs = append(fs, fig[admSide]{cf.Name + ": creates/s", get(func(x *admConfig) float64 { return x.PerSecond }, 1, ""), ratio},
			fig[admSide]{"… p50", get(func(x *admConfig) float64 { return x.P50Ms }, 2, " ms"), ratio},
			fig[admSide]{"… p99", get(func(x *admConfig) float64 { return x.P99Ms }, 2, " ms"), ratio},
			fig[admSide]{"… server CPU per create", get(func(x *admConfig) float64 { return x.CPUPerCreate / 1000 }, 3, " ms"), ratio})
		if cf.Key == "p0" {
			continue
		}
		// rel is this configuration against no admission (p0).
		rel := func(f func(b, x *admConfig) string) func(admSide) val {
			return func(s admSide) val {
				if s.res == nil {
					return label(s.why)
				}
				b, x := s.res.config("p0"), s.res.config(cf.Key)
				if b == nil || x == nil || b.GoodRounds == 0 || x.GoodRounds == 0 || b.PerSecond == 0 {
					return label("–")
				}
				return label(f(b, x))
			}
		}
		fs = append(fs, fig[admSide]{"… creates/s against no admission", rel(func(b, x *admConfig) string { return fmt.Sprintf("%.2f×", x.PerSecond/b.PerSecond) }), nil},
			fig[admSide]{"… p50 against no admission", rel(func(b, x *admConfig) string { return fmt.Sprintf("%+.2f ms", x.P50Ms-b.P50Ms) }), nil},
			fig[admSide]{"… server CPU per create against no admission", rel(func(b, x *admConfig) string {
				if b.CPUPerCreate <= 0 || x.CPUPerCreate <= 0 {
					return "–"
				}
				cpu := fmt.Sprintf("%+.0f µs", x.CPUPerCreate-b.CPUPerCreate)
				if x.Policies > 1 {
					cpu += fmt.Sprintf(" (%+.0f µs per policy)", (x.CPUPerCreate-b.CPUPerCreate)/float64(x.Policies))
				}
				return cpu
			}), nil})
	}
	figs(t, fs, c, k)
	p("%s\n", t)

	// Round by round, with the load average.
	t = newTable("server", "configuration", "creates/s by round", "p50 by round", "1-min load average after each round", "configuring + probes before it (s)")
	for _, x := range sides {
		if x.s.res == nil {
			continue
		}
		for _, cf := range x.s.res.Configs {
			var rs, p50, ld, st []string
			for _, rd := range cf.Rounds {
				rs = append(rs, fmt.Sprintf("%.0f", rd.Create.PerSecond))
				p50 = append(p50, fmt.Sprintf("%.2f", rd.Create.P50Ms))
				ld = append(ld, fmt.Sprintf("%.2f", rd.Load1))
				st = append(st, fmt.Sprintf("%.1f", rd.SettleSec))
			}
			t.row(x.name, cf.Name, strings.Join(rs, ", "), strings.Join(p50, ", ")+" ms", strings.Join(ld, ", "), strings.Join(st, ", "))
		}
	}
	p("%s\n", t)
	for _, x := range sides {
		if x.s.res == nil {
			continue
		}
		r := x.s.res
		var others []string
		for _, key := range []string{"validatingadmissionpolicies", "validatingadmissionpolicybindings", "validatingwebhookconfigurations", "mutatingwebhookconfigurations"} {
			others = append(others, fmt.Sprintf("%d %s", r.Existing[key], key))
		}
		var protos []string
		for _, pr := range slices.Sorted(maps.Keys(r.HookProtos)) {
			protos = append(protos, fmt.Sprintf("%s (%s calls)", pr, commas(r.HookProtos[pr])))
		}
		p("- %s (%s, %s): started %s; load average (1/5/15 min) %s at the start, %s at the end; others' admission objects at the start: %s; "+
			"webhook calls (probes included) arrived over %s.\n",
			x.name, r.Server, r.Protocol, r.Date, r.LoadStart, r.LoadEnd, strings.Join(others, ", "), strings.Join(protos, ", "))
		fails = append(fails, workloadFailures(x.name, "admission", r.Error, r.Failures)...)
	}
	p("\n")
	return fails
}

// admRun is one admission run's connection to the server: what it created
// (admission objects, in creation order, removed in reverse at the end) and
// how it waits for a configuration to be in force.
type admRun struct {
	ctx         context.Context
	c           *client
	res         *admissionResult
	hook        *admissionHook
	caPEM       []byte
	coll        string
	waitFor     time.Duration
	maxPolicies int
	created     []string
}

// do sends one request, bounded by the run's context and limit.
func (a *admRun) do(method, url string, body []byte, limit time.Duration) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(a.ctx, limit)
	defer cancel()
	return a.c.do(ctx, method, url, body)
}

func (a *admRun) fail(phaseName, method, url string, code int, b []byte, err error) {
	a.res.Failures = append(a.res.Failures, *a.c.fail(phaseName, method, url, code, b, err))
}

func (a *admRun) has(url string) bool { return slices.Contains(a.created, url) }

// createObj creates an admission object; one that exists already is left
// alone (it could be someone else's).
func (a *admRun) createObj(phaseName, collURL, objName string, body []byte) error {
	if f, err := a.c.create(a.ctx, phaseName, strings.TrimPrefix(collURL+"/"+objName, a.c.base), collURL, body); err != nil {
		a.res.Failures = append(a.res.Failures, *f)
		return err
	}
	a.created = append(a.created, collURL+"/"+objName)
	return nil
}

func (a *admRun) deleteObj(phaseName, url string) error {
	code, b, err := a.do(http.MethodDelete, url, nil, 30*time.Second)
	if err != nil || (code != http.StatusOK && code != http.StatusAccepted && code != http.StatusNotFound) {
		a.fail(phaseName, http.MethodDelete, url, code, b, err)
		return fmt.Errorf("%s: could not delete %s (HTTP %d)", phaseName, strings.TrimPrefix(url, a.c.base), code)
	}
	a.created = slices.DeleteFunc(a.created, func(s string) bool { return s == url })
	return nil
}

// removeAll deletes every admission object the run created, with a context
// of its own (the run's may be cancelled), and records what it did.
func (a *admRun) removeAll() {
	var removed, left []string
	for i := len(a.created) - 1; i >= 0; i-- {
		u := a.created[i]
		rctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		code, b, derr := a.c.do(rctx, http.MethodDelete, u, nil)
		cancel()
		if derr != nil || (code != http.StatusOK && code != http.StatusAccepted && code != http.StatusNotFound) {
			left = append(left, fmt.Sprintf("%s (HTTP %d %v %s)", strings.TrimPrefix(u, a.c.base), code, derr, truncate(b, 200)))
			continue
		}
		removed = append(removed, u[strings.LastIndex(u, "/")+1:])
	}
	if len(removed) > 0 || len(left) > 0 {
		a.res.Removed = fmt.Sprintf("%d deleted", len(removed))
		if len(left) > 0 {
			a.res.Removed += "; NOT deleted: " + strings.Join(left, ", ")
			a.res.Failures = append(a.res.Failures, failure{Phase: "remove-admission", Error: "left behind: " + strings.Join(left, ", ")})
		}
		log.Printf("admission objects: %s", a.res.Removed)
	}
}

// probe sends one dry-run create and says whether it was admitted, whether
// the webhook saw it, and the answer.
func (a *admRun) probe(objName string, size int) (admitted, sawHook bool, code int, body []byte) {
	before := a.hook.probes.Load()
	obj, _ := json.Marshal(map[string]any{"apiVersion": admGroup + "/v1", "kind": "Widget",
		"metadata": map[string]any{"name": objName}, "spec": map[string]any{"size": size}})
	code, body, err := a.do(http.MethodPost, a.coll+"?dryRun=All", obj, 15*time.Second)
	if err != nil {
		return false, false, 0, []byte(err.Error())
	}
	return code == http.StatusCreated, a.hook.probes.Load() > before, code, body
}

// poll calls check every 50 ms until it holds, within -wait.
func (a *admRun) poll(what string, check func() (bool, string)) error {
	deadline := time.Now().Add(a.waitFor)
	for {
		ok, last := check()
		if ok {
			return nil
		}
		if a.ctx.Err() != nil {
			return a.ctx.Err()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not within %v (last answer: %s)", what, a.waitFor, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func describe(code int, b []byte) string { return fmt.Sprintf("HTTP %d %s", code, truncate(b, 300)) }

// configure makes the admission objects those of cf, then waits until the
// probes show them in force.
func (a *admRun) configure(cf *admConfig) error {
	base := a.c.base
	hookURL := base + vwcPath + "/" + admHookName
	for i := range a.maxPolicies {
		pURL, bURL := base+vapPath+"/"+admPolicyName(i), base+vapbPath+"/"+admPolicyName(i)
		switch want := i < cf.Policies; {
		case want && !a.has(pURL):
			if err := a.createObj("create-policy", base+vapPath, admPolicyName(i), admPolicy(admPolicyName(i), admExpression, "spec.size must be at most 100")); err != nil {
				return err
			}
			if err := a.createObj("create-binding", base+vapbPath, admPolicyName(i), admBinding(admPolicyName(i))); err != nil {
				return err
			}
		case !want && a.has(pURL):
			if err := a.deleteObj("delete-binding", bURL); err != nil {
				return err
			}
			if err := a.deleteObj("delete-policy", pURL); err != nil {
				return err
			}
		}
	}
	switch {
	case cf.Webhook && !a.has(hookURL):
		if err := a.createObj("create-webhook-config", base+vwcPath, admHookName, admWebhookConfig(a.res.WebhookURL, a.caPEM)); err != nil {
			return err
		}
	case !cf.Webhook && a.has(hookURL):
		if err := a.deleteObj("delete-webhook-config", hookURL); err != nil {
			return err
		}
	}
	// The probe policy, created after the change: once it denies, the
	// servers' policy and binding caches hold everything before it.
	if err := a.createObj("create-probe-policy", base+vapPath, admProbeName,
		admPolicy(admProbeName, "object.metadata.name != '"+admProbeObj+"'", "crdbench probe")); err != nil {
		return err
	}
	if err := a.createObj("create-probe-binding", base+vapbPath, admProbeName, admBinding(admProbeName)); err != nil {
		return err
	}
	if err := a.poll("the probe policy denies the probe", func() (bool, string) {
		ok, _, code, b := a.probe(admProbeObj, 1)
		return !ok && strings.Contains(string(b), "'"+admProbeName+"'"), describe(code, b)
	}); err != nil {
		return err
	}
	if err := a.deleteObj("delete-probe-binding", base+vapbPath+"/"+admProbeName); err != nil {
		return err
	}
	if err := a.deleteObj("delete-probe-policy", base+vapPath+"/"+admProbeName); err != nil {
		return err
	}
	if err := a.poll(fmt.Sprintf("the probe is admitted again, through the webhook: %v", cf.Webhook), func() (bool, string) {
		ok, saw, code, b := a.probe(admProbeObj, 1)
		return ok && saw == cf.Webhook, fmt.Sprintf("%s; webhook saw it: %v", describe(code, b), saw)
	}); err != nil {
		return err
	}
	return a.poll(fmt.Sprintf("spec.size 101 denied: %v", cf.Policies > 0), func() (bool, string) {
		ok, _, code, b := a.probe(admProbeBig, 101)
		if cf.Policies > 0 {
			return !ok && strings.Contains(string(b), "ValidatingAdmissionPolicy '"+admPrefix), describe(code, b)
		}
		return ok, describe(code, b)
	})
}

// medians are the configuration's figures over the rounds that had no
// failed create.
func (cf *admConfig) medians() {
	var ps, p50, p99, cpu []float64
	for _, rd := range cf.Rounds {
		if rd.Create.Errors > 0 || rd.Create.Aborted {
			continue
		}
		ps, p50, p99 = append(ps, rd.Create.PerSecond), append(p50, rd.Create.P50Ms), append(p99, rd.Create.P99Ms)
		if rd.CPUPerCreate > 0 {
			cpu = append(cpu, rd.CPUPerCreate)
		}
	}
	cf.GoodRounds = len(ps)
	cf.PerSecond, cf.P50Ms, cf.P99Ms = math3(median(ps)), math3(median(p50)), math3(median(p99))
	if len(cpu) == len(ps) {
		cf.CPUPerCreate = math3(median(cpu))
	}
}
