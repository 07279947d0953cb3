package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/crdserver/crdserver/examples/crontab-conversion/crontab"
)

// crdbench rules (crdserver only): the same CronTab list converted three
// ways — by declarative ConversionRules in process, through the example
// webhook, and by None — cold (the first GET after the objects were
// written: every object converted) and warm (the converted objects
// shared), round by round in fresh namespaces.

const (
	rulesGroup   = "rules." + crontab.Group // rules.example.com
	rulesCRDName = "crontabs." + rulesGroup
)

// rulesColl is the measured GETs of one CRD's collection in v1.
type rulesColl struct {
	Name       string    `json:"name"`
	CRD        string    `json:"crd"`
	Conversion string    `json:"conversion"`
	ColdMs     []float64 `json:"cold_ms"` // one per round
	WarmMs     []float64 `json:"warm_ms"`
	ColdMedian float64   `json:"cold_median_ms"`
	WarmMedian float64   `json:"warm_median_ms"`
	// Webhook calls and objects during each cold GET (Webhook only).
	ColdCalls   []int64 `json:"cold_webhook_calls,omitempty"`
	ColdObjects []int64 `json:"cold_webhook_objects,omitempty"`
	Items       int     `json:"items"`
	Bytes       int     `json:"bytes"`
}

type rulesResult struct {
	Server      string      `json:"server"`
	Protocol    string      `json:"protocol"`
	N           int         `json:"objects"`
	Rounds      int         `json:"rounds"`
	Warm        int         `json:"warm_gets_per_round"`
	Concurrency int         `json:"concurrency"`
	WebhookURL  string      `json:"webhook_url"`
	Phases      []phase     `json:"phases"`
	Colls       []rulesColl `json:"collections"`
	// Ratios of medians.
	ColdRulesOverNone    float64   `json:"cold_rules_over_none"`
	ColdWebhookOverRules float64   `json:"cold_webhook_over_rules"`
	WarmRulesOverNone    float64   `json:"warm_rules_over_none"`
	WarmWebhookOverRules float64   `json:"warm_webhook_over_rules"`
	Failures             []failure `json:"failures,omitempty"`
	Error                string    `json:"error,omitempty"`
}

func (r *rulesResult) coll(name string) *rulesColl {
	return find(r.Colls, func(x *rulesColl) bool { return x.Name == name })
}

// rulesCRD is crontabCRD for the rules group with what makes the split of
// hostPort into host and port lossless written into the schemas (as in
// examples/declarative-conversion): crdserver proves ConversionRules on
// objects made from the schemas and refuses lossy ones.
func rulesCRD() []byte {
	return crontabCRDOf(rulesGroup, `{"strategy":"None"}`, `"hostPort":{"type":"string","pattern":"^[a-z0-9.-]+:[0-9]+$"}`,
		`"host":{"type":"string","pattern":"^[a-z0-9.-]+$"},"port":{"type":"string","pattern":"^[0-9]+$"}`,
		`,"x-kubernetes-validations":[{"rule":"has(self.host) == has(self.port)"}]`)
}

// rulesObject is the ConversionRules of the rules CRD: v1beta1's hostPort
// split at ":" into v1's host and port.
var rulesObject = []byte(`{"apiVersion":"conversion.crdserver.io/v1alpha1","kind":"ConversionRules",
 "metadata":{"name":"` + rulesCRDName + `"},
 "spec":{"hub":"v1","versions":[{"name":"v1beta1","toHub":[{"split":{"from":".hostPort","to":[".host",".port"],"separator":":"}}]}]}}`)

func runRules(args []string) error {
	fs := flag.NewFlagSet("rules", flag.ExitOnError)
	var t tlsFlags
	t.register(fs)
	var (
		server  = fs.String("server", "", "crdserver base URL, https:// (loopback only)")
		n       = fs.Int("n", 10000, "objects created in v1beta1 in each CRD, per round")
		rounds  = fs.Int("rounds", 3, "rounds, each in a namespace of its own: creates, one cold GET of each collection, then -warm warm GETs")
		warm    = fs.Int("warm", 3, "warm GETs of each collection per round")
		conc    = fs.Int("concurrency", 8, "workers for the creates")
		waitFor = fs.Duration("wait", 60*time.Second, "how long to wait for the CRDs to be Established and the rules in use")
		jsonOut = fs.String("json", "", "write the results as JSON to this file")
	)
	_ = fs.Parse(args)
	if err := checkFlags([]bound{{*n < 1 || *n > 100000 || *rounds < 1 || *rounds > 20 || *warm < 1 || *warm > 50 || *conc < 1 || *conc > 64,
		"1 <= -n <= 100000, 1 <= -rounds <= 20, 1 <= -warm <= 50, 1 <= -concurrency <= 64"}}); err != nil {
		return err
	}
	l, err := connect(*server, t, *conc)
	if err != nil {
		return err
	}
	base, ctx := l.base, context.Background()
	res := &rulesResult{Server: base, N: *n, Rounds: *rounds, Warm: *warm, Concurrency: *conc}
	hook, hookURL, certPEM, hsrv, err := serveCronTabWebhook()
	if err != nil {
		return err
	}
	defer hsrv.Close()
	res.WebhookURL = hookURL
	finish := func(err error) error {
		res.Protocol = l.protocol()
		res.Failures = append(res.Failures, firstError(res.Phases...)...)
		return done(*jsonOut, res, &res.Error, res.Failures, err)
	}
	// post creates an object, which must not exist (a fresh crdserver).
	post := func(what, path string, body []byte) error {
		f, err := l.create(ctx, what, what, base+path, body)
		if err != nil {
			res.Failures = append(res.Failures, *f)
		}
		return err
	}

	crds := []struct {
		group string
		body  []byte
		coll  rulesColl
	}{
		{rulesGroup, rulesCRD(), rulesColl{Name: "conversionrules", CRD: rulesCRDName, Conversion: "ConversionRules"}},
		{crontab.Group, crontabCRD(crontab.Group, res.WebhookURL, certPEM), rulesColl{Name: "webhook", CRD: webhookCRDName, Conversion: "Webhook"}},
		{noneGroup, crontabCRD(noneGroup, "", nil), rulesColl{Name: "none", CRD: noneCRDName, Conversion: "None"}},
	}
	for _, c := range crds {
		if err := post("create-crd "+c.coll.CRD, crdPath, c.body); err != nil {
			return finish(fmt.Errorf("%w (run on a fresh crdserver)", err))
		}
		res.Colls = append(res.Colls, c.coll)
	}
	for _, c := range crds {
		if err := l.waitEstablished(ctx, c.coll.CRD, *waitFor); err != nil {
			return finish(err)
		}
	}
	// The rules are followed asynchronously: wait until a v1 read of a probe
	// object (in default, outside the measured namespaces) has host and port.
	if err := post("create-rules", "/apis/conversion.crdserver.io/v1alpha1/conversionrules", rulesObject); err != nil {
		return finish(err)
	}
	if err := post("create-probe", "/apis/"+rulesGroup+"/v1beta1/namespaces/default/crontabs", crontabBody(rulesGroup, "probe", 1)); err != nil {
		return finish(err)
	}
	for deadline := time.Now().Add(*waitFor); ; time.Sleep(100 * time.Millisecond) {
		code, b, err := l.do(ctx, http.MethodGet, base+"/apis/"+rulesGroup+"/v1/namespaces/default/crontabs/probe", nil)
		if err == nil && code == http.StatusOK && strings.Contains(string(b), `"port":"8001"`) {
			break
		}
		if time.Now().After(deadline) {
			return finish(fmt.Errorf("the ConversionRules were not in use within %v (last: %d %s)", *waitFor, code, truncate(b, 300)))
		}
	}

	for r := range *rounds {
		ns := fmt.Sprintf("crdbench-rules-%d", r+1)
		if err := post("create-namespace", "/api/v1/namespaces", namespaceBody(ns)); err != nil {
			return finish(err)
		}
		coll := func(k int, version string) string {
			return base + "/apis/" + crds[k].group + "/" + version + "/namespaces/" + ns + "/crontabs"
		}
		for k := range crds {
			label := fmt.Sprintf("populate-%s-%d", res.Colls[k].Name, r+1)
			p := populate(ctx, l, label, crds[k].group, coll(k, "v1beta1"), *n, *conc)
			if res.Phases = append(res.Phases, p); p.Errors > 0 {
				return finish(fmt.Errorf("%s: %d of %d creates failed", label, p.Errors, p.Requests))
			}
		}
		// One cold GET of each collection, in an order that turns round by
		// round, then the warm ones.
		for g := range 1 + *warm {
			for j := range crds {
				k := j
				if g == 0 {
					k = (j + r) % len(crds)
				}
				c := &res.Colls[k]
				s, _, f := getCronTabs(ctx, l, hook, "list "+c.Name, coll(k, "v1"), crds[k].group+"/v1", *n, c.Conversion != "None")
				if f != nil {
					res.Failures = append(res.Failures, *f)
					return finish(fmt.Errorf("%s list of %s failed", map[bool]string{true: "cold", false: "warm"}[g == 0], c.Name))
				}
				c.Items, c.Bytes = *n, s.Bytes
				if g > 0 {
					c.WarmMs = append(c.WarmMs, s.Ms)
				} else if c.ColdMs = append(c.ColdMs, s.Ms); c.Conversion == "Webhook" {
					c.ColdCalls, c.ColdObjects = append(c.ColdCalls, s.Webhook.Calls), append(c.ColdObjects, s.Webhook.Objects)
				}
			}
		}
	}
	for i := range res.Colls {
		c := &res.Colls[i]
		c.ColdMedian, c.WarmMedian = median(c.ColdMs), median(c.WarmMs)
	}
	ratio := func(a, b float64) float64 {
		if b == 0 {
			return 0
		}
		return math3(a / b)
	}
	rules, hookC, none := res.coll("conversionrules"), res.coll("webhook"), res.coll("none")
	res.ColdRulesOverNone, res.ColdWebhookOverRules = ratio(rules.ColdMedian, none.ColdMedian), ratio(hookC.ColdMedian, rules.ColdMedian)
	res.WarmRulesOverNone, res.WarmWebhookOverRules = ratio(rules.WarmMedian, none.WarmMedian), ratio(hookC.WarmMedian, rules.WarmMedian)
	return finish(nil)
}

// rulesReport writes the declarative conversion section (rules-crdserver.json,
// crdbench rules) and returns its rows for the Targets table and its
// failures.
func rulesReport(dir string, p func(string, ...any)) (targets [][]string, fails []string) {
	var r rulesResult
	if err := readJSON(filepath.Join(dir, "rules-crdserver.json"), &r); err != nil {
		return nil, nil
	}
	p("## Declarative conversion (crdserver only)\n\n")
	p("The same CronTabs (%s objects stored in v1beta1, read as v1) in three CRDs: converted by **ConversionRules** in process "+
		"(`hostPort` split into `host` and `port`), through the **example webhook** (as in \"Webhook conversion\"), and by **None**. "+
		"Each of %d rounds creates the objects in a fresh namespace, then GETs each collection once **cold** (nothing converted yet: "+
		"every object goes through its conversion and the v1 schema) and %d times **warm** (the converted objects shared); "+
		"medians over the rounds. %s.\n\n", commas(r.N), r.Rounds, r.Warm, r.Protocol)
	t := newTable("collection", "cold median", "cold GETs", "warm median")
	for _, c := range r.Colls {
		var cold []string
		for _, x := range c.ColdMs {
			cold = append(cold, fmt.Sprintf("%.0f", x))
		}
		extra := ""
		if len(c.ColdCalls) > 0 {
			extra = fmt.Sprintf(" (webhook calls per cold GET: %v)", c.ColdCalls)
		}
		t.row(fmt.Sprintf("%s (`%s`)", c.Conversion, c.CRD), fmt.Sprintf("%.1f ms", c.ColdMedian), strings.Join(cold, ", ")+" ms"+extra, fmt.Sprintf("%.1f ms", c.WarmMedian))
	}
	x := func(v float64) string { return fmt.Sprintf("%.2f×", v) }
	p("%s\n", t)
	t = newTable("ratio (medians)", "cold", "warm")
	t.row("ConversionRules ÷ None", x(r.ColdRulesOverNone), x(r.WarmRulesOverNone))
	t.row("webhook ÷ ConversionRules", x(r.ColdWebhookOverRules), x(r.WarmWebhookOverRules))
	p("%s\n", t)
	if r.Error == "" && len(r.Failures) == 0 {
		targets = append(targets,
			[]string{fmt.Sprintf("declarative conversion within 1.3× None (cold list of %s, medians)", commas(r.N)), x(r.ColdRulesOverNone), yesNo(r.ColdRulesOverNone <= 1.3)},
			[]string{fmt.Sprintf("declarative conversion ≥ 3× faster than the webhook (cold list of %s, medians)", commas(r.N)), x(r.ColdWebhookOverRules), yesNo(r.ColdWebhookOverRules >= 3)})
	}
	if r.Error != "" {
		fails = append(fails, fmt.Sprintf("- crdserver declarative conversion: %s\n", r.Error))
	}
	for _, f := range r.Failures {
		fails = append(fails, fmt.Sprintf("- crdserver declarative conversion, `%s`: `%s %s` → HTTP %d (%s)\n", f.Phase, f.Method, f.Path, f.Status, f.Error))
	}
	return targets, fails
}
