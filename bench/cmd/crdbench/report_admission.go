package main

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
)

// admSide is the admission benchmark of one server (admission-NAME.json).
type admSide struct {
	res *admissionResult
	why string // why there is none
}

func loadAdmSide(dir, name string) admSide {
	var r admissionResult
	if err := readJSON(filepath.Join(dir, "admission-"+name+".json"), &r); err != nil {
		return admSide{why: "not measured"}
	}
	return admSide{res: &r}
}

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
	c, k := loadAdmSide(dir, "crdserver"), loadAdmSide(dir, "kube")
	if c.res == nil && k.res == nil {
		return nil
	}
	first := c.res
	if first == nil {
		first = k.res
	}
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
		"1 and 10 ValidatingAdmissionPolicies, each one validation `%s` (which every object passes) on CREATE of the widgets, "+
		"bound by a ValidatingAdmissionPolicyBinding with `validationActions: [Deny]`; and one validating admission webhook "+
		"(no policies) that crdbench serves itself on loopback (HTTPS with a self-signed certificate as `caBundle`, url `https://127.0.0.1:<port>/`, "+
		"AdmissionReview v1, allows everything; `sideEffects: None`, `failurePolicy: Fail`, `timeoutSeconds: 10`). "+
		"Each of %d rounds measures every configuration in turn (%s): %s creates with %d workers over one HTTP/2 connection "+
		"(the admin client certificate), then the objects are deleted again (not timed). Figures are medians over the rounds; "+
		"latencies are each round's nearest-rank percentiles. Before each configuration is measured crdbench waits until it is in force: "+
		"a probe policy created after the change denies a dry-run probe object, is deleted, and the probe is then admitted, reaching "+
		"the webhook exactly when one is configured; a dry-run object with `spec.size: 101` is denied exactly when policies are bound. "+
		"Server CPU is utime + stime of `/proc/PID/stat` over the creates (10 ms ticks) per create: crdserver's one process; "+
		"kube-apiserver + its etcd. The webhook runs in crdbench, on the same cores.\n\n",
		first.CRD, first.BodyBytes, first.Expression, first.Rounds, strings.Join(order, " → "), commas(first.N), first.Concurrency)

	t := newTable("configuration", "crdserver creates/s", "p50", "p99", "server CPU per create", "kube-apiserver creates/s", "p50", "p99", "server CPU per create", "creates/s crdserver ÷ kube")
	for _, cf := range first.Configs {
		key := cf.Key
		get := func(s admSide, f func(*admConfig) float64, prec int, unit string) val {
			return s.cfgVal(key, func(x *admConfig) (float64, bool) { return f(x), f(x) > 0 }, prec, unit)
		}
		ps := func(x *admConfig) float64 { return x.PerSecond }
		p50 := func(x *admConfig) float64 { return x.P50Ms }
		p99 := func(x *admConfig) float64 { return x.P99Ms }
		cpu := func(x *admConfig) float64 { return x.CPUPerCreate / 1000 }
		cps, kps := get(c, ps, 1, ""), get(k, ps, 1, "")
		t.row(cf.Name, cps, get(c, p50, 2, " ms"), get(c, p99, 2, " ms"), get(c, cpu, 3, " ms"),
			kps, get(k, p50, 2, " ms"), get(k, p99, 2, " ms"), get(k, cpu, 3, " ms"), ratio(cps, kps))
	}
	p("%s\n", t)

	// The cost of each configuration against no admission, per server.
	base := "p0"
	t = newTable("cost against no admission (medians)", "crdserver creates/s", "crdserver p50", "crdserver CPU per create", "kube-apiserver creates/s", "kube-apiserver p50", "kube-apiserver CPU per create")
	rel := func(s admSide, key string) (string, string, string) {
		if s.res == nil {
			return s.why, s.why, s.why
		}
		b, x := s.res.config(base), s.res.config(key)
		if b == nil || x == nil || b.GoodRounds == 0 || x.GoodRounds == 0 || b.PerSecond == 0 {
			return "–", "–", "–"
		}
		cpu := "–"
		if b.CPUPerCreate > 0 && x.CPUPerCreate > 0 {
			cpu = fmt.Sprintf("%+.0f µs", x.CPUPerCreate-b.CPUPerCreate)
			if x.Policies > 1 {
				cpu += fmt.Sprintf(" (%+.0f µs per policy)", (x.CPUPerCreate-b.CPUPerCreate)/float64(x.Policies))
			}
		}
		return fmt.Sprintf("%.2f×", x.PerSecond/b.PerSecond), fmt.Sprintf("%+.2f ms", x.P50Ms-b.P50Ms), cpu
	}
	for _, cf := range first.Configs {
		if cf.Key == base {
			continue
		}
		a1, a2, a3 := rel(c, cf.Key)
		b1, b2, b3 := rel(k, cf.Key)
		t.row(cf.Name, a1, a2, a3, b1, b2, b3)
	}
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
	}
	p("\n")

	for _, x := range sides {
		if x.s.res == nil {
			continue
		}
		if x.s.res.Error != "" {
			fails = append(fails, fmt.Sprintf("- %s admission: %s\n", x.name, x.s.res.Error))
		}
		fails = append(fails, failureLines(x.name+" admission,", x.s.res.Failures)...)
	}
	return fails
}
