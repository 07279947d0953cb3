package main

// crdbench admission: the cost of dynamic admission on creates of a custom
// resource, on one server. Configurations, each measured in every round:
// no admission, 1 and 10 bound ValidatingAdmissionPolicies (each
// `object.spec.size <= 100`, which every object passes, validationActions
// [Deny]), and one validating webhook that crdbench serves on loopback
// (allows everything). Per round and configuration: n creates with
// -concurrency workers, then the objects are deleted (not timed). Admission
// changes take effect asynchronously, so after each crdbench waits until
// probes show the new set in force (see configure).

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
	"syscall"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
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
	admPath       = "/apis/admissionregistration.k8s.io/v1/"
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
	mu                 sync.Mutex
	calls, probes, bad int64
	protos             map[string]int
}

func (h *admissionHook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 8<<20))
	var review admissionv1.AdmissionReview
	if err == nil {
		err = json.Unmarshal(body, &review)
	}
	h.mu.Lock()
	h.calls++
	h.protos[r.Proto]++
	if err != nil || review.Request == nil {
		h.bad++
		h.mu.Unlock()
		http.Error(w, "not an AdmissionReview v1 request", http.StatusBadRequest)
		return
	}
	if strings.HasPrefix(review.Request.Name, admProbeObj) {
		h.probes++
	}
	h.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":%q,"allowed":true}}`, review.Request.UID)
}

// count is one of the hook's counters, read under its lock.
func (h *admissionHook) count(c *int64) int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return *c
}

// admCRD is the Widget CRD of the admission group: v1 only, spec with size
// (integer), color and tags.
var admCRD = []byte(`{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
 "metadata":{"name":"` + admCRDName + `","labels":{"bench":"crdbench"}},
 "spec":{"group":"` + admGroup + `","scope":"Namespaced","names":{"plural":"widgets","singular":"widget","kind":"Widget","listKind":"WidgetList"},
  "versions":[{"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object","properties":{"spec":{"type":"object",
   "properties":{"size":{"type":"integer"},"color":{"type":"string"},"tags":{"type":"array","items":{"type":"string"}}}}}}}}]}}`)

// admObject is an admission object of kind (in admissionregistration.k8s.io/v1)
// labelled bench=crdbench, with the rest of its fields.
func admObject(kind, name, rest string) []byte {
	return fmt.Appendf(nil, `{"apiVersion":"admissionregistration.k8s.io/v1","kind":%q,"metadata":{"name":%q,"labels":{"bench":"crdbench"}},%s}`, kind, name, rest)
}

// admRules are the rules of every policy and of the webhook: creates of the
// Widgets of the admission group.
const admRules = `[{"apiGroups":["` + admGroup + `"],"apiVersions":["v1"],"operations":["CREATE"],"resources":["widgets"],"scope":"Namespaced"}]`

// admPolicy is a ValidatingAdmissionPolicy with one validation.
func admPolicy(name, expression, message string) []byte {
	return admObject("ValidatingAdmissionPolicy", name, fmt.Sprintf(`"spec":{"failurePolicy":"Fail","matchConstraints":{"resourceRules":%s},`+
		`"validations":[{"expression":%q,"message":%q}]}`, admRules, expression, message))
}

// admBinding binds the policy of the same name, validationActions [Deny].
func admBinding(name string) []byte {
	return admObject("ValidatingAdmissionPolicyBinding", name, fmt.Sprintf(`"spec":{"policyName":%q,"validationActions":["Deny"]}`, name))
}

// admWebhookConfig is the ValidatingWebhookConfiguration of crdbench's
// webhook: url and caBundle, sideEffects None, admissionReviewVersions [v1].
func admWebhookConfig(url string, caPEM []byte) []byte {
	return admObject("ValidatingWebhookConfiguration", admHookName, fmt.Sprintf(`"webhooks":[{"name":"allow.%s","clientConfig":{"url":%q,"caBundle":%q},`+
		`"rules":%s,"failurePolicy":"Fail","matchPolicy":"Equivalent","sideEffects":"None","timeoutSeconds":10,"admissionReviewVersions":["v1"]}]`,
		admGroup, url, base64.StdEncoding.EncodeToString(caPEM), admRules))
}

func admPolicyName(i int) string { return fmt.Sprintf("%s%02d", admPrefix, i) }

// loadavg is the 1, 5 and 15 minute load averages, "0.52 0.58 0.59".
func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}

func load1() float64 {
	v, _ := strconv.ParseFloat(strings.Fields(loadavg() + " 0")[0], 64)
	return v
}

// admConfigs are the configurations of "0,1,10" (distinct counts in [0,
// 50]) and the webhook if asked for, and their keys in that order.
func admConfigs(counts string, webhook bool) ([]admConfig, []string, error) {
	var configs []admConfig
	var order []string
	for _, f := range strings.Split(counts, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		k, err := strconv.Atoi(f)
		key := "p" + strconv.Itoa(k)
		if err != nil || k < 0 || k > 50 || slices.Contains(order, key) {
			return nil, nil, fmt.Errorf("-policies: %q: want distinct counts from 0 to 50", f)
		}
		name := cmp.Or(map[int]string{0: "no admission (0 policies)", 1: "1 policy"}[k], strconv.Itoa(k)+" policies")
		configs, order = append(configs, admConfig{Key: key, Name: name, Policies: k}), append(order, key)
	}
	if webhook {
		configs, order = append(configs, admConfig{Key: "webhook", Name: "1 webhook (0 policies)", Webhook: true}), append(order, "webhook")
	}
	if len(configs) == 0 {
		return nil, nil, errors.New("nothing to measure: -policies is empty and -webhook=false")
	}
	return configs, order, nil
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
	configs, order, err := admConfigs(*counts, *webhook)
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
	c, err := connect(*server, t, *conc)
	if err != nil {
		return err
	}
	// Interrupted, crdbench still removes what it configured.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	meter := countedPIDs(pids, nil)
	ns, base := *namespace, c.base
	coll := base + "/apis/" + admGroup + "/v1/namespaces/" + ns + "/widgets"
	l := &loader{apiVersion: admGroup + "/v1", kind: "Widget"}
	res := &admissionResult{Server: base, Name: *name, ClientCert: t.cert != "", Date: time.Now().UTC().Format(time.RFC3339),
		Namespace: ns, CRD: admCRDName, N: *n, Rounds: *rounds, Concurrency: *conc, Warmup: *warmup,
		BodyBytes: len(l.body("w-webhook-1-00000", 0)), Expression: admExpression, ClockTicks: userHZ,
		LoadStart: loadavg(), Existing: map[string]int{}, Configs: configs, Order: order}
	hook := &admissionHook{protos: map[string]int{}}
	hookBase, certPEM, hsrv, err := serveTLS("crdbench-admission-webhook", hook)
	if err != nil {
		return err
	}
	defer hsrv.Close()
	res.WebhookURL = hookBase + "/"
	a := &admRun{ctx: ctx, c: c, res: res, hook: hook, caPEM: certPEM, coll: coll, waitFor: *waitFor}
	var made [][2]string // what of the namespace and the CRD was created, and its URL
	finish := func(err error) error {
		a.removeAll()
		if *cleanup && len(made) > 0 {
			var parts []string
			for _, x := range made {
				parts = append(parts, c.deleteAndWait(x[0], x[1], *cleanupWait))
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
		for _, cf := range res.Configs {
			for _, rd := range cf.Rounds {
				res.Failures = append(res.Failures, firstError(rd.Create)...)
			}
		}
		return done(*jsonOut, res, &res.Error, res.Failures, err)
	}

	// Others' admission objects, for the record (they are evaluated too).
	for _, kind := range []string{"validatingadmissionpolicies", "validatingadmissionpolicybindings", "validatingwebhookconfigurations", "mutatingwebhookconfigurations"} {
		code, b, err := a.do(http.MethodGet, base+admPath+kind, nil)
		if err != nil || code != http.StatusOK {
			a.fail("list-"+kind, http.MethodGet, base+admPath+kind, code, b, err)
			return finish(fmt.Errorf("could not list %s", kind))
		}
		var list struct{ Items []json.RawMessage }
		_ = json.Unmarshal(b, &list)
		res.Existing[kind] = len(list.Items)
	}
	// The namespace and the CRD: neither may exist (they could be someone else's).
	for _, x := range []struct {
		phase, what, coll, name string
		body                    []byte
	}{{"namespace", "namespace", "/api/v1/namespaces", ns, namespaceBody(ns)}, {"create-crd", "CRD " + admCRDName, crdPath, admCRDName, admCRD}} {
		if f, err := c.create(ctx, x.phase, x.what, base+x.coll, x.body); err != nil {
			res.Failures = append(res.Failures, *f)
			return finish(err)
		}
		made = append(made, [2]string{x.what, base + x.coll + "/" + x.name})
	}
	if err := c.waitEstablished(ctx, admCRDName, *waitFor); err != nil {
		return finish(err)
	}

	// phases are count creates, then deletes, of objects named
	// w-KEY-ROUND-00000…, the creates measured into rd (if not nil).
	phases := func(label string, count int, key string, round int, rd *admRound) (p, d phase) {
		name := func(i int) string { return fmt.Sprintf("w-%s-%d-%05d", key, round, i) }
		bodies := make([][]byte, count)
		for i := range bodies {
			bodies[i] = l.body(name(i), i)
		}
		calls, s := hook.count(&hook.calls), meter.snap()
		p = c.phase(ctx, "create-"+label, count, *conc, *phaseLimit, func(i int) request {
			return request{http.MethodPost, coll, bodies[i], []int{http.StatusCreated}}
		}, nil)
		if rd != nil {
			rd.Create, rd.WebhookCalls, rd.Load1 = p, hook.count(&hook.calls)-calls, load1()
			if rd.CPU = meter.since(s); rd.CPU != nil && rd.CPU.Error == "" && p.Requests > 0 {
				rd.CPUPerCreate = math3(rd.CPU.TotalSec * 1e6 / float64(p.Requests))
			}
		}
		d = c.phase(ctx, "delete-"+label, count, *conc, *phaseLimit, func(i int) request {
			return request{http.MethodDelete, coll + "/" + name(i), nil, []int{http.StatusOK, http.StatusAccepted, http.StatusNotFound}}
		}, nil)
		if d.FirstError != nil {
			res.Failures = append(res.Failures, *d.FirstError)
		}
		return p, d
	}
	if *warmup > 0 {
		log.Printf("warm-up: %d creates and deletes, no admission configured", *warmup)
		if p, d := phases("warmup", *warmup, "warmup", 0, nil); p.Errors > 0 || d.Errors > 0 {
			res.Failures = append(res.Failures, firstError(p)...)
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
			cf.Rounds = append(cf.Rounds, admRound{Round: r, SettleSec: math3(time.Since(t0).Seconds())})
			rd := &cf.Rounds[len(cf.Rounds)-1]
			log.Printf("round %d, %s (in force after %.2f s): %d creates with %d workers", r, cf.Name, rd.SettleSec, *n, *conc)
			_, d := phases(fmt.Sprintf("%s-%d", cf.Key, r), *n, cf.Key, r, rd)
			rd.DeleteSec, rd.DeleteErrors = math3(d.WallSec), d.Errors
			log.Printf("round %d, %s: %.1f creates/s, p50 %.2f ms, p99 %.2f ms, %d errors, %d webhook calls, load %.2f",
				r, cf.Name, rd.Create.PerSecond, rd.Create.P50Ms, rd.Create.P99Ms, rd.Create.Errors, rd.WebhookCalls, rd.Load1)
			if rd.Create.Aborted || ctx.Err() != nil {
				return finish(fmt.Errorf("round %d, %s: creates aborted", r, cf.Name))
			}
			switch {
			case cf.Webhook && rd.WebhookCalls < int64(rd.Create.Requests-rd.Create.Errors):
				res.Failures = append(res.Failures, failure{Phase: rd.Create.Name,
					Error: fmt.Sprintf("the webhook was called %d times for %d creates", rd.WebhookCalls, rd.Create.Requests)})
			case !cf.Webhook && rd.WebhookCalls != 0:
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

// medians are the configuration's figures over the rounds that had no
// failed create.
func (cf *admConfig) medians() {
	var ps, p50, p99, cpu []float64
	for _, rd := range cf.Rounds {
		if rd.Create.Errors == 0 && !rd.Create.Aborted {
			ps, p50, p99 = append(ps, rd.Create.PerSecond), append(p50, rd.Create.P50Ms), append(p99, rd.Create.P99Ms)
			if rd.CPUPerCreate > 0 {
				cpu = append(cpu, rd.CPUPerCreate)
			}
		}
	}
	cf.GoodRounds = len(ps)
	cf.PerSecond, cf.P50Ms, cf.P99Ms = math3(median(ps)), math3(median(p50)), math3(median(p99))
	if len(cpu) == len(ps) {
		cf.CPUPerCreate = math3(median(cpu))
	}
}

// admRun is one admission run's connection to the server: what it created
// (admission objects, in creation order, removed in reverse at the end) and
// how it waits for a configuration to be in force.
type admRun struct {
	ctx     context.Context
	c       *client
	res     *admissionResult
	hook    *admissionHook
	caPEM   []byte
	coll    string
	waitFor time.Duration
	created []admObj
}

// do sends one request, bounded by the run's context and 30 s.
func (a *admRun) do(method, url string, body []byte) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(a.ctx, 30*time.Second)
	defer cancel()
	return a.c.do(ctx, method, url, body)
}

func (a *admRun) fail(phaseName, method, url string, code int, b []byte, err error) {
	a.res.Failures = append(a.res.Failures, *a.c.fail(phaseName, method, url, code, b, err))
}

// admObj is an admission object: its kind's plural (in admPath), its name,
// its short kind in failures' phases and its body.
type admObj struct {
	kind, name, short string
	body              []byte
}

func (o admObj) url(base string) string { return base + admPath + o.kind + "/" + o.name }

func admPolicyObjs(name, expression, message string) []admObj {
	return []admObj{{"validatingadmissionpolicies", name, "policy", admPolicy(name, expression, message)},
		{"validatingadmissionpolicybindings", name, "binding", admBinding(name)}}
}

// remove deletes the i-th object the run created (a 404 is fine) within
// 30 s of ctx, and forgets it; failed, it says why.
func (a *admRun) remove(ctx context.Context, i int) string {
	o := a.created[i]
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	code, b, err := a.c.do(ctx, http.MethodDelete, o.url(a.c.base), nil)
	if err != nil || (code != http.StatusOK && code != http.StatusAccepted && code != http.StatusNotFound) {
		a.fail("delete-"+o.short, http.MethodDelete, o.url(a.c.base), code, b, err)
		return fmt.Sprintf("%s%s/%s (HTTP %d %v)", admPath, o.kind, o.name, code, err)
	}
	a.created = slices.Delete(a.created, i, i+1)
	return ""
}

// sync makes the admission objects the run created those of want: the
// others deleted (latest first), the missing ones created (in order). One
// that exists already is left alone (it could be someone else's).
func (a *admRun) sync(want []admObj) error {
	same := func(o admObj) func(admObj) bool {
		return func(x admObj) bool { return x.kind == o.kind && x.name == o.name }
	}
	for i := len(a.created) - 1; i >= 0; i-- {
		if !slices.ContainsFunc(want, same(a.created[i])) {
			if why := a.remove(a.ctx, i); why != "" {
				return errors.New("could not delete " + why)
			}
		}
	}
	for _, o := range want {
		if !slices.ContainsFunc(a.created, same(o)) {
			f, err := a.c.create(a.ctx, "create-"+o.short, admPath+o.kind+"/"+o.name, a.c.base+admPath+o.kind, o.body)
			if err != nil {
				a.res.Failures = append(a.res.Failures, *f)
				return err
			}
			a.created = append(a.created, o)
		}
	}
	return nil
}

// removeAll deletes every admission object the run created, with a context
// of its own (the run's may be cancelled), and records what it did.
func (a *admRun) removeAll() {
	var left []string
	n := len(a.created)
	for i := n - 1; i >= 0; i-- {
		if why := a.remove(context.Background(), i); why != "" {
			left = append(left, why)
		}
	}
	if n > 0 {
		a.res.Removed = fmt.Sprintf("%d deleted", n-len(left))
		if len(left) > 0 {
			a.res.Removed += "; NOT deleted: " + strings.Join(left, ", ")
			a.res.Failures = append(a.res.Failures, failure{Phase: "remove-admission", Error: "left behind: " + strings.Join(left, ", ")})
		}
		log.Printf("admission objects: %s", a.res.Removed)
	}
}

// poll sends a dry-run create of a probe object (spec.size size) every 50
// ms until check holds of whether it was admitted, whether the webhook saw
// it and the answer, within -wait.
func (a *admRun) poll(what, objName string, size int, check func(admitted, sawHook bool, body string) bool) error {
	obj := fmt.Appendf(nil, `{"apiVersion":"%s/v1","kind":"Widget","metadata":{"name":%q},"spec":{"size":%d}}`, admGroup, objName, size)
	for deadline := time.Now().Add(a.waitFor); ; time.Sleep(50 * time.Millisecond) {
		before := a.hook.count(&a.hook.probes)
		code, b, err := a.do(http.MethodPost, a.coll+"?dryRun=All", obj)
		if err != nil {
			b = []byte(err.Error())
		}
		saw := a.hook.count(&a.hook.probes) > before
		if check(err == nil && code == http.StatusCreated, saw, string(b)) {
			return nil
		}
		if err := a.ctx.Err(); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not within %v (last answer: HTTP %d %s; webhook saw it: %v)", what, a.waitFor, code, truncate(b, 300), saw)
		}
	}
}

// configure makes the admission objects those of cf, then waits until
// probes show them in force: a probe policy, created after the change,
// denies a dry-run probe object (so the server's caches hold everything
// before it); once the probe policy is deleted again the probe is
// admitted, reaching the webhook exactly when one is configured; and a
// dry-run object of spec.size 101 is denied exactly when policies are bound.
func (a *admRun) configure(cf *admConfig) error {
	var want []admObj
	for i := range cf.Policies {
		want = append(want, admPolicyObjs(admPolicyName(i), admExpression, "spec.size must be at most 100")...)
	}
	if cf.Webhook {
		want = append(want, admObj{"validatingwebhookconfigurations", admHookName, "webhook-config", admWebhookConfig(a.res.WebhookURL, a.caPEM)})
	}
	probe := append(slices.Clone(want), admPolicyObjs(admProbeName, "object.metadata.name != '"+admProbeObj+"'", "crdbench probe")...)
	if err := a.sync(want); err != nil {
		return err
	}
	if err := a.sync(probe); err != nil {
		return err
	}
	if err := a.poll("the probe policy denies the probe", admProbeObj, 1, func(ok, _ bool, b string) bool {
		return !ok && strings.Contains(b, "'"+admProbeName+"'")
	}); err != nil {
		return err
	}
	if err := a.sync(want); err != nil {
		return err
	}
	if err := a.poll(fmt.Sprintf("the probe is admitted again, through the webhook: %v", cf.Webhook), admProbeObj, 1, func(ok, saw bool, _ string) bool {
		return ok && saw == cf.Webhook
	}); err != nil {
		return err
	}
	return a.poll(fmt.Sprintf("spec.size 101 denied: %v", cf.Policies > 0), admProbeBig, 101, func(ok, _ bool, b string) bool {
		return ok == (cf.Policies == 0) && (ok || strings.Contains(b, "ValidatingAdmissionPolicy '"+admPrefix))
	})
}

// admSide is the admission benchmark of one server (admission-NAME.json).
type admSide sideOf[admissionResult]

// admissionReport writes the admission section (crdserver beside
// kube-apiserver) and returns its failures.
func admissionReport(dir string, p func(string, ...any)) (fails []string) {
	c, k := admSide(readSide[admissionResult](dir, "admission-crdserver.json")), admSide(readSide[admissionResult](dir, "admission-kube.json"))
	if c.res == nil && k.res == nil {
		return nil
	}
	first := cmp.Or(c.res, k.res)
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

	// Each configuration's medians, and their cost against no admission (p0).
	t := newTable("configuration", "crdserver", "kube-apiserver", "ratio")
	var fs []fig[admSide]
	for _, cf := range first.Configs {
		get := func(metric string, f func(*admConfig) float64, prec int, unit string) {
			fs = append(fs, fig[admSide]{metric, func(s admSide) val {
				x := orZero(s.res).config(cf.Key)
				switch {
				case s.res == nil:
					return none(s.why)
				case x == nil || len(x.Rounds) == 0:
					return none("not reached")
				case x.GoodRounds == 0:
					return none("**failed** (see Failures)")
				case f(x) <= 0:
					return none("not measured")
				}
				return num(f(x), prec, unit)
			}, ratio})
		}
		get(cf.Name+": creates/s", func(x *admConfig) float64 { return x.PerSecond }, 1, "")
		get("… p50", func(x *admConfig) float64 { return x.P50Ms }, 2, " ms")
		get("… p99", func(x *admConfig) float64 { return x.P99Ms }, 2, " ms")
		get("… server CPU per create", func(x *admConfig) float64 { return x.CPUPerCreate / 1000 }, 3, " ms")
		rel := func(metric string, f func(b, x *admConfig) string) {
			fs = append(fs, fig[admSide]{metric, func(s admSide) val {
				if s.res == nil {
					return label(s.why)
				}
				b, x := s.res.config("p0"), s.res.config(cf.Key)
				if b == nil || x == nil || b.GoodRounds == 0 || x.GoodRounds == 0 || b.PerSecond == 0 {
					return label("–")
				}
				return label(f(b, x))
			}, nil})
		}
		if cf.Key != "p0" {
			rel("… creates/s against no admission", func(b, x *admConfig) string { return fmt.Sprintf("%.2f×", x.PerSecond/b.PerSecond) })
			rel("… p50 against no admission", func(b, x *admConfig) string { return fmt.Sprintf("%+.2f ms", x.P50Ms-b.P50Ms) })
			rel("… server CPU per create against no admission", func(b, x *admConfig) string {
				d := x.CPUPerCreate - b.CPUPerCreate
				switch {
				case b.CPUPerCreate <= 0 || x.CPUPerCreate <= 0:
					return "–"
				case x.Policies > 1:
					return fmt.Sprintf("%+.0f µs (%+.0f µs per policy)", d, d/float64(x.Policies))
				}
				return fmt.Sprintf("%+.0f µs", d)
			})
		}
	}
	figs(t, fs, c, k)
	p("%s\n", t)

	// Round by round, with the load average; then each server's run.
	t = newTable("server", "configuration", "creates/s by round", "p50 by round", "1-min load average after each round", "configuring + probes before it (s)")
	for i, s := range []admSide{c, k} {
		for _, cf := range orZero(s.res).Configs {
			var rs, p50, ld, st []string
			for _, rd := range cf.Rounds {
				rs, p50 = append(rs, fmt.Sprintf("%.0f", rd.Create.PerSecond)), append(p50, fmt.Sprintf("%.2f", rd.Create.P50Ms))
				ld, st = append(ld, fmt.Sprintf("%.2f", rd.Load1)), append(st, fmt.Sprintf("%.1f", rd.SettleSec))
			}
			t.row([]string{"crdserver", "kube-apiserver"}[i], cf.Name, strings.Join(rs, ", "), strings.Join(p50, ", ")+" ms", strings.Join(ld, ", "), strings.Join(st, ", "))
		}
	}
	p("%s\n", t)
	for i, s := range []admSide{c, k} {
		if r := s.res; r != nil {
			var others, protos []string
			for _, key := range []string{"validatingadmissionpolicies", "validatingadmissionpolicybindings", "validatingwebhookconfigurations", "mutatingwebhookconfigurations"} {
				others = append(others, fmt.Sprintf("%d %s", r.Existing[key], key))
			}
			for _, pr := range slices.Sorted(maps.Keys(r.HookProtos)) {
				protos = append(protos, fmt.Sprintf("%s (%s calls)", pr, commas(r.HookProtos[pr])))
			}
			name := []string{"crdserver", "kube-apiserver"}[i]
			p("- %s (%s, %s): started %s; load average (1/5/15 min) %s at the start, %s at the end; others' admission objects at the start: %s; "+
				"webhook calls (probes included) arrived over %s.\n",
				name, r.Server, r.Protocol, r.Date, r.LoadStart, r.LoadEnd, strings.Join(others, ", "), strings.Join(protos, ", "))
			fails = append(fails, workloadFailures(name, "admission", r.Error, r.Failures)...)
		}
	}
	p("\n")
	return fails
}
