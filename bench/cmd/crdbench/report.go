package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// side is everything measured for one server.
type side struct {
	starts  []startResult
	load    *loadResult
	loadErr string
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

func loadSide(dir, name string) side {
	var s side
	files, _ := filepath.Glob(filepath.Join(dir, "start-"+name+"-*.json"))
	slices.Sort(files)
	for _, f := range files {
		var r startResult
		if err := readJSON(f, &r); err == nil {
			s.starts = append(s.starts, r)
		}
	}
	var l loadResult
	if err := readJSON(filepath.Join(dir, "load-"+name+".json"), &l); err == nil {
		s.load = &l
	} else {
		s.loadErr = "no load results: " + err.Error()
	}
	return s
}

// okStarts are the starts that reached ready.
func (s side) okStarts() []startResult {
	var r []startResult
	for _, st := range s.starts {
		if st.Error == "" {
			r = append(r, st)
		}
	}
	return r
}

func (s side) startStat(f func(startResult) float64) []float64 {
	var v []float64
	for _, st := range s.okStarts() {
		v = append(v, f(st))
	}
	return v
}

func memOf(st startResult, name string) float64 {
	for _, m := range st.Mem {
		if m.Name == name {
			return m.VMRSSMiB
		}
	}
	return 0
}

// val is a table cell: a number, or why there is none.
type val struct {
	v    float64
	ok   bool
	why  string
	unit string
	prec int
}

func num(v float64, prec int, unit string) val { return val{v: v, ok: true, prec: prec, unit: unit} }
func none(why string) val                      { return val{why: why} }

func (v val) String() string {
	if !v.ok {
		return v.why
	}
	return fmt.Sprintf("%.*f%s", v.prec, v.v, v.unit)
}

func ratio(a, b val) string {
	if !a.ok || !b.ok || b.v == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f×", a.v/b.v)
}

// loadCell picks a value from a load phase, or says why it is missing.
// roundRates lists the req/s of every round of a load phase (create-1,
// create-2, …), "" when it ran in one round.
func roundRates(s side, phaseName string) string {
	if s.load == nil {
		return ""
	}
	var rates []string
	for k := 1; ; k++ {
		p := s.load.phase(fmt.Sprintf("%s-%d", phaseName, k))
		if p == nil {
			break
		}
		rates = append(rates, fmt.Sprintf("%.1f", p.PerSecond))
	}
	return strings.Join(rates, ", ")
}

func loadCell(s side, phaseName string, f func(*phase) float64, prec int, unit string) val {
	if s.load == nil {
		return none("not measured")
	}
	p := s.load.phase(phaseName)
	if p == nil {
		return none("not reached")
	}
	if p.Errors > 0 {
		return none(fmt.Sprintf("**failed** (%d/%d errors)", p.Errors, p.Requests))
	}
	return num(f(p), prec, unit)
}

// commas writes a count as 1,000.
func commas(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// failureLines writes failures as a Markdown list, each "- who `phase`:
// `METHOD path` → HTTP status (error)" with the answer's body below it.
func failureLines(who string, fs []failure) []string {
	var out []string
	for _, f := range fs {
		s := fmt.Sprintf("- %s `%s`: `%s %s` → HTTP %d", who, f.Phase, f.Method, f.Path, f.Status)
		if f.Error != "" {
			s += " (" + f.Error + ")"
		}
		if f.Body != "" {
			s += "\n\n  ```\n  " + strings.ReplaceAll(strings.TrimSpace(f.Body), "\n", "\n  ") + "\n  ```"
		}
		out = append(out, s+"\n")
	}
	return out
}

// yesNo is a target's verdict.
func yesNo(ok bool) string { return map[bool]string{true: "**yes**", false: "**no**"}[ok] }

func runReport(args []string) error {
	fs := flag.NewFlagSet("report", flag.ExitOnError)
	dir := fs.String("dir", "", "folder with the JSON results of one run")
	out := fs.String("out", "RESULTS.md", "Markdown file to write")
	_ = fs.Parse(args)
	c, r := loadSide(*dir, "crdserver"), loadSide(*dir, "reference")
	text := func(name string) string {
		b, _ := os.ReadFile(filepath.Join(*dir, name))
		return strings.TrimRight(string(b), "\n")
	}

	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	p("# crdserver whole-server benchmark: results\n\n")
	p("Written by `bench/run.sh` (which calls `crdbench report`); every figure below was measured in that one run.\n")
	p("Ratios are crdserver ÷ reference: below 1 is better for times and memory, above 1 is better for req/s.\n\n")
	if m := text("machine.txt"); m != "" {
		p("## Machine\n\n```\n%s\n```\n\n", m)
	}

	nC, nR := len(c.okStarts()), len(r.okStarts())
	startVal := func(s side, f func(startResult) float64, agg func([]float64) float64, prec int, unit string, scale float64) val {
		v := s.startStat(f)
		if len(v) == 0 {
			if len(s.starts) > 0 {
				return none("**failed**: " + s.starts[0].Error)
			}
			return none("not measured")
		}
		return num(agg(v)*scale, prec, unit)
	}
	startBoth := func(f func(startResult) float64, agg func([]float64) float64, prec int, unit string, scale float64) (val, val) {
		return startVal(c, f, agg, prec, unit, scale), startVal(r, f, agg, prec, unit, scale)
	}
	minf := func(v []float64) float64 { return slices.Min(v) }
	ready := func(st startResult) float64 { return st.ReadyMs }
	readyT0 := func(st startResult) float64 {
		if st.SinceT0Ms > 0 {
			return st.SinceT0Ms
		}
		return st.ReadyMs
	}
	mem := func(name string) func(startResult) float64 {
		return func(st startResult) float64 { return memOf(st, name) }
	}
	total := func(st startResult) float64 { return st.TotalRSSMiB }

	p("## Results\n\n")
	t := newTable("metric", "crdserver", "reference", "ratio")
	cv, rv := startBoth(ready, minf, 3, " s", 0.001)
	t.cmp(fmt.Sprintf("start-up, launch → /readyz ok, min (crdserver %d starts, reference %d)", nC, nR), cv, rv)
	cv, rv = startBoth(ready, median, 3, " s", 0.001)
	t.cmp("start-up, launch → /readyz ok, median", cv, rv)
	cv, rv = startBoth(readyT0, median, 3, " s", 0.001)
	t.cmp("start-up incl. etcd, median (reference: etcd launch → apiserver /readyz ok; crdserver embeds etcd, same as above)", cv, rv)
	idleSec := 0.0
	if st := c.okStarts(); len(st) > 0 {
		idleSec = st[0].IdleSec
	}
	t.cmp(fmt.Sprintf("idle RSS %.0f s after ready, no CRDs: server process, median (crdserver includes its embedded etcd)", idleSec),
		startVal(c, mem("crdserver"), median, 1, " MiB", 1), startVal(r, mem("apiextensions-apiserver"), median, 1, " MiB", 1))
	t.row("idle RSS: etcd, median", "(embedded, in the row above)", startVal(r, mem("etcd"), median, 1, " MiB", 1), "–")
	cv, rv = startBoth(total, median, 1, " MiB", 1)
	t.cmp("idle RSS: total, median (reference: apiserver + etcd)", cv, rv)

	perSec := func(p *phase) float64 { return p.PerSecond }
	phaseOf := func(name string, first, second side) *phase {
		for _, s := range []side{first, second} {
			if s.load != nil && s.load.phase(name) != nil {
				return s.load.phase(name)
			}
		}
		return &phase{}
	}
	n := phaseOf("create", c, r).Requests
	for _, ph := range []string{"create", "delete"} {
		for _, x := range []struct {
			what string
			f    func(*phase) float64
			prec int
			unit string
		}{{"req/s", perSec, 1, ""}, {"p50", func(p *phase) float64 { return p.P50Ms }, 2, " ms"},
			{"p99", func(p *phase) float64 { return p.P99Ms }, 2, " ms"}, {"wall time", func(p *phase) float64 { return p.WallSec }, 3, " s"}} {
			t.cmp(fmt.Sprintf("%s sequential %ss: %s", commas(n), ph, x.what), loadCell(c, ph, x.f, x.prec, x.unit), loadCell(r, ph, x.f, x.prec, x.unit))
		}
		if cr, rr := roundRates(c, ph), roundRates(r, ph); cr != "" || rr != "" {
			t.row(fmt.Sprintf("%s sequential %ss: req/s of each round (the rows above are the median round)", commas(n), ph), cr, rr, "–")
		}
	}
	listCell := func(s side, f func(*loadResult) float64, prec int, unit string) val {
		if s.load == nil {
			return none("not measured")
		}
		if s.load.phase("populate") == nil {
			return none("not reached")
		}
		if len(s.load.Lists) == 0 || s.load.ListMedianMs == 0 {
			return none("**failed** (see Failures)")
		}
		for _, f := range s.load.Failures {
			if f.Phase == "list" {
				return none("**failed** (see Failures)")
			}
		}
		return num(f(s.load), prec, unit)
	}
	listRow := func(metric string, f func(*loadResult) float64, prec int, unit string) {
		t.cmp(metric, listCell(c, f, prec, unit), listCell(r, f, prec, unit))
	}
	listN := phaseOf("populate", c, r).Requests
	nl := 0
	if r.load != nil {
		nl = len(r.load.Lists)
	}
	listRow(fmt.Sprintf("list of %s objects (plain GET, no limit): median of %d", commas(listN), nl), func(l *loadResult) float64 { return l.ListMedianMs }, 1, " ms")
	listRow("list: min", func(l *loadResult) float64 { return l.ListMinMs }, 1, " ms")
	listRow("list: max", func(l *loadResult) float64 { return l.ListMaxMs }, 1, " ms")
	listRow("list: items returned", func(l *loadResult) float64 { return float64(l.ListItems) }, 0, "")
	listRow("list: response size", func(l *loadResult) float64 { return float64(l.ListBytes) / 1e6 }, 2, " MB")
	listRow("list: bytes per object", func(l *loadResult) float64 { return float64(l.ListBytes) / float64(max(1, l.ListItems)) }, 0, " B")
	mf := func(s side) string {
		if s.load == nil || s.load.Sample == "" {
			return "not measured"
		}
		return map[bool]string{true: "yes", false: "no"}[s.load.ManagedFields]
	}
	t.row("created objects carry `metadata.managedFields` (as kube-apiserver records them)", mf(c), mf(r), "–")
	conc := phaseOf("populate", r, c).Concurrency
	t.cmp(fmt.Sprintf("(setup, not a target) %s creates with %d workers: req/s", commas(listN), conc),
		loadCell(c, "populate", perSec, 1, ""), loadCell(r, "populate", perSec, 1, ""))
	rssAfter := func(s side) val {
		if s.load == nil || len(s.load.RSSAfter) == 0 {
			return none("not measured")
		}
		return num(s.load.RSSAfterMiB, 1, " MiB")
	}
	t.cmp(fmt.Sprintf("(not a target) RSS right after the lists, %s objects stored (reference: apiserver + etcd)", commas(listN)), rssAfter(c), rssAfter(r))
	p("%s\n", t)
	if c.load != nil && r.load != nil && c.load.Sample != "" && r.load.Sample != "" && c.load.ManagedFields != r.load.ManagedFields {
		p("**Not like for like:** ")
		if r.load.ManagedFields {
			p("the reference records `metadata.managedFields` on every create (as kube-apiserver does) and crdserver does not yet, ")
		} else {
			p("crdserver records `metadata.managedFields` and the reference does not, ")
		}
		p("so one side does less work per write and encodes fewer bytes per object in a list (see \"bytes per object\"). " +
			"The first created object of each side is in `bench/results/load-*.json` (`first_created_object`).\n\n")
	}

	// The other workloads' sections, each if measured; their rows of the
	// Targets table and their failures.
	convTargets, fails := convertReport(*dir, p)
	rulesTargets, rulesFails := rulesReport(*dir, p)
	fails = append(fails, rulesFails...)
	fails = append(fails, coreReport(*dir, p)...)
	fails = append(fails, admissionReport(*dir, p)...)
	fails = append(fails, pathsReport(*dir, p)...)
	fails = append(fails, crdsReport(*dir, p)...)
	goTargets, goFails := goBenchReport(*dir, p)
	fails = append(fails, goFails...)

	p("## Targets\n\n")
	t = newTable("target", "measured", "met?")
	target := func(name string, v val, met func(float64) bool) {
		m := "not measured"
		if v.ok {
			m = yesNo(met(v.v))
		}
		t.row(name, v, m)
	}
	target("start-up (launch → /readyz ok, median) under 1 s", startVal(c, ready, median, 3, " s", 0.001), func(x float64) bool { return x < 1 })
	target("idle RSS (median) under 100 MiB", startVal(c, total, median, 1, " MiB", 1), func(x float64) bool { return x < 100 })
	cc, rc := loadCell(c, "create", perSec, 1, " req/s"), loadCell(r, "create", perSec, 1, " req/s")
	if cc.ok && rc.ok {
		t.row("create throughput at least the reference's", fmt.Sprintf("%s vs %s (%s)", cc, rc, ratio(cc, rc)), yesNo(cc.v >= rc.v))
	} else {
		t.row("create throughput at least the reference's", fmt.Sprintf("crdserver: %s; reference: %s", cc, rc), "**no** (not measurable)")
	}
	t.rows = append(append(append(t.rows, convTargets...), rulesTargets...), goTargets...)
	p("%s\n", t)

	var loadFails []string
	for _, x := range []struct {
		name string
		s    side
	}{{"crdserver", c}, {"reference", r}} {
		for _, st := range x.s.starts {
			if st.Error != "" {
				loadFails = append(loadFails, fmt.Sprintf("- %s start: %s\n", x.name, st.Error))
			}
		}
		switch {
		case x.s.load == nil:
			loadFails = append(loadFails, fmt.Sprintf("- %s load: %s\n", x.name, x.s.loadErr))
		case x.s.load.Error != "":
			loadFails = append(loadFails, fmt.Sprintf("- %s load: %s\n", x.name, x.s.load.Error))
		}
		if x.s.load != nil {
			loadFails = append(loadFails, failureLines(x.name+", phase", x.s.load.Failures)...)
		}
	}
	if fails = append(loadFails, fails...); len(fails) > 0 {
		p("## Failures\n\n%s\n", strings.Join(fails, ""))
	}
	if t := text("failures-extra.md"); t != "" {
		p("%s\n\n", t)
	}

	p("## Start-ups, one by one\n\n")
	t = newTable("server", "#", "launch → ready", "etcd launch → ready", "VmRSS per process after idle", "total")
	for _, x := range []struct {
		name string
		s    side
	}{{"crdserver", c}, {"reference", r}} {
		for i, st := range x.s.starts {
			if st.Error != "" {
				t.row(x.name, i+1, "failed: "+st.Error, nil, nil, nil)
				continue
			}
			var mems []string
			for _, m := range st.Mem {
				mems = append(mems, fmt.Sprintf("%s %.1f MiB", m.Name, m.VMRSSMiB))
			}
			t0 := "–"
			if st.SinceT0Ms > 0 {
				t0 = fmt.Sprintf("%.3f s", st.SinceT0Ms/1000)
			}
			t.row(x.name, i+1, fmt.Sprintf("%.3f s", st.ReadyMs/1000), t0, strings.Join(mems, ", "), fmt.Sprintf("%.1f MiB", st.TotalRSSMiB))
		}
	}
	p("%s\n", t)
	if t := text("notes.md"); t != "" {
		p("## How it was measured\n\n%s\n\n", t)
	}
	if t := text("commands.txt"); t != "" {
		p("## Commands (exactly as run)\n\n```sh\n%s\n```\n", t)
	}
	return os.WriteFile(*out, []byte(b.String()), 0o644)
}
