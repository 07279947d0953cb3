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
	row := func(metric string, cv, rv val) {
		p("| %s | %s | %s | %s |\n", metric, cv, rv, ratio(cv, rv))
	}
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
	minf := func(v []float64) float64 { return slices.Min(v) }
	ready := func(st startResult) float64 { return st.ReadyMs }
	readyT0 := func(st startResult) float64 {
		if st.SinceT0Ms > 0 {
			return st.SinceT0Ms
		}
		return st.ReadyMs
	}

	p("## Results\n\n")
	p("| metric | crdserver | reference | ratio |\n|---|---|---|---|\n")
	row(fmt.Sprintf("start-up, launch → /readyz ok, min (crdserver %d starts, reference %d)", nC, nR),
		startVal(c, ready, minf, 3, " s", 0.001), startVal(r, ready, minf, 3, " s", 0.001))
	row("start-up, launch → /readyz ok, median",
		startVal(c, ready, median, 3, " s", 0.001), startVal(r, ready, median, 3, " s", 0.001))
	row("start-up incl. etcd, median (reference: etcd launch → apiserver /readyz ok; crdserver embeds etcd, same as above)",
		startVal(c, readyT0, median, 3, " s", 0.001), startVal(r, readyT0, median, 3, " s", 0.001))
	idleSec := 0.0
	if st := c.okStarts(); len(st) > 0 {
		idleSec = st[0].IdleSec
	}
	row(fmt.Sprintf("idle RSS %.0f s after ready, no CRDs: server process, median (crdserver includes its embedded etcd)", idleSec),
		startVal(c, func(st startResult) float64 { return memOf(st, "crdserver") }, median, 1, " MiB", 1),
		startVal(r, func(st startResult) float64 { return memOf(st, "apiextensions-apiserver") }, median, 1, " MiB", 1))
	p("| idle RSS: etcd, median | (embedded, in the row above) | %s | – |\n",
		startVal(r, func(st startResult) float64 { return memOf(st, "etcd") }, median, 1, " MiB", 1))
	row("idle RSS: total, median (reference: apiserver + etcd)",
		startVal(c, func(st startResult) float64 { return st.TotalRSSMiB }, median, 1, " MiB", 1),
		startVal(r, func(st startResult) float64 { return st.TotalRSSMiB }, median, 1, " MiB", 1))

	perSec := func(p *phase) float64 { return p.PerSecond }
	p50 := func(p *phase) float64 { return p.P50Ms }
	p99 := func(p *phase) float64 { return p.P99Ms }
	wall := func(p *phase) float64 { return p.WallSec }
	n := 0
	if c.load != nil && c.load.phase("create") != nil {
		n = c.load.phase("create").Requests
	} else if r.load != nil && r.load.phase("create") != nil {
		n = r.load.phase("create").Requests
	}
	for _, ph := range []string{"create", "delete"} {
		row(fmt.Sprintf("%s sequential %ss: req/s", commas(n), ph), loadCell(c, ph, perSec, 1, ""), loadCell(r, ph, perSec, 1, ""))
		row(fmt.Sprintf("%s sequential %ss: p50", commas(n), ph), loadCell(c, ph, p50, 2, " ms"), loadCell(r, ph, p50, 2, " ms"))
		row(fmt.Sprintf("%s sequential %ss: p99", commas(n), ph), loadCell(c, ph, p99, 2, " ms"), loadCell(r, ph, p99, 2, " ms"))
		row(fmt.Sprintf("%s sequential %ss: wall time", commas(n), ph), loadCell(c, ph, wall, 3, " s"), loadCell(r, ph, wall, 3, " s"))
		if cr, rr := roundRates(c, ph), roundRates(r, ph); cr != "" || rr != "" {
			p("| %s sequential %ss: req/s of each round (the rows above are the median round) | %s | %s | – |\n", commas(n), ph, cr, rr)
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
	listN := 0
	if c.load != nil && c.load.phase("populate") != nil {
		listN = c.load.phase("populate").Requests
	} else if r.load != nil && r.load.phase("populate") != nil {
		listN = r.load.phase("populate").Requests
	}
	nl := 0
	if r.load != nil {
		nl = len(r.load.Lists)
	}
	row(fmt.Sprintf("list of %s objects (plain GET, no limit): median of %d", commas(listN), nl),
		listCell(c, func(l *loadResult) float64 { return l.ListMedianMs }, 1, " ms"), listCell(r, func(l *loadResult) float64 { return l.ListMedianMs }, 1, " ms"))
	row("list: min", listCell(c, func(l *loadResult) float64 { return l.ListMinMs }, 1, " ms"), listCell(r, func(l *loadResult) float64 { return l.ListMinMs }, 1, " ms"))
	row("list: max", listCell(c, func(l *loadResult) float64 { return l.ListMaxMs }, 1, " ms"), listCell(r, func(l *loadResult) float64 { return l.ListMaxMs }, 1, " ms"))
	row("list: items returned", listCell(c, func(l *loadResult) float64 { return float64(l.ListItems) }, 0, ""), listCell(r, func(l *loadResult) float64 { return float64(l.ListItems) }, 0, ""))
	row("list: response size", listCell(c, func(l *loadResult) float64 { return float64(l.ListBytes) / 1e6 }, 2, " MB"), listCell(r, func(l *loadResult) float64 { return float64(l.ListBytes) / 1e6 }, 2, " MB"))
	row("list: bytes per object", listCell(c, func(l *loadResult) float64 { return float64(l.ListBytes) / float64(max(1, l.ListItems)) }, 0, " B"),
		listCell(r, func(l *loadResult) float64 { return float64(l.ListBytes) / float64(max(1, l.ListItems)) }, 0, " B"))
	mf := func(s side) string {
		if s.load == nil || s.load.Sample == "" {
			return "not measured"
		}
		return map[bool]string{true: "yes", false: "no"}[s.load.ManagedFields]
	}
	p("| created objects carry `metadata.managedFields` (as kube-apiserver records them) | %s | %s | – |\n", mf(c), mf(r))
	conc := 0
	if r.load != nil && r.load.phase("populate") != nil {
		conc = r.load.phase("populate").Concurrency
	} else if c.load != nil && c.load.phase("populate") != nil {
		conc = c.load.phase("populate").Concurrency
	}
	row(fmt.Sprintf("(setup, not a target) %s creates with %d workers: req/s", commas(listN), conc),
		loadCell(c, "populate", perSec, 1, ""), loadCell(r, "populate", perSec, 1, ""))
	rssAfter := func(s side) val {
		if s.load == nil || len(s.load.RSSAfter) == 0 {
			return none("not measured")
		}
		return num(s.load.RSSAfterMiB, 1, " MiB")
	}
	row(fmt.Sprintf("(not a target) RSS right after the lists, %s objects stored (reference: apiserver + etcd)", commas(listN)), rssAfter(c), rssAfter(r))
	p("\n")
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

	// Webhook conversion (convert-*.json), if measured.
	convTargets, convFails := convertReport(*dir, p)
	// Declarative conversion (rules-crdserver.json), if measured.
	rulesTargets, rulesFails := rulesReport(*dir, p)
	convTargets = append(convTargets, rulesTargets...)
	convFails = append(convFails, rulesFails...)
	// Core types against kube-apiserver (core-*.json), if measured.
	coreFails := coreReport(*dir, p)
	// Dynamic admission on creates (admission-*.json), if measured.
	coreFails = append(coreFails, admissionReport(*dir, p)...)
	// The paths of the performance issue (paths-*.json), if measured.
	coreFails = append(coreFails, pathsReport(*dir, p)...)
	// Thousands of CRDs (crds-*.json), if measured.
	coreFails = append(coreFails, crdsReport(*dir, p)...)
	// In-process benchmarks (gobench.txt), if run.
	goTargets, goFails := goBenchReport(*dir, p)

	// Targets.
	p("## Targets\n\n| target | measured | met? |\n|---|---|---|\n")
	target := func(name string, v val, met func(float64) bool) {
		m := "not measured"
		if v.ok {
			m = map[bool]string{true: "**yes**", false: "**no**"}[met(v.v)]
		}
		p("| %s | %s | %s |\n", name, v, m)
	}
	target("start-up (launch → /readyz ok, median) under 1 s", startVal(c, ready, median, 3, " s", 0.001), func(x float64) bool { return x < 1 })
	target("idle RSS (median) under 100 MiB", startVal(c, func(st startResult) float64 { return st.TotalRSSMiB }, median, 1, " MiB", 1), func(x float64) bool { return x < 100 })
	cc, rc := loadCell(c, "create", perSec, 1, " req/s"), loadCell(r, "create", perSec, 1, " req/s")
	if cc.ok && rc.ok {
		p("| create throughput at least the reference's | %s vs %s (%s) | %s |\n", cc, rc, ratio(cc, rc),
			map[bool]string{true: "**yes**", false: "**no**"}[cc.v >= rc.v])
	} else {
		p("| create throughput at least the reference's | crdserver: %s; reference: %s | **no** (not measurable) |\n", cc, rc)
	}
	for _, t := range append(convTargets, goTargets...) {
		p("%s", t)
	}
	p("\n")

	// Failures.
	var fails []string
	for _, x := range []struct {
		name string
		s    side
	}{{"crdserver", c}, {"reference", r}} {
		for _, st := range x.s.starts {
			if st.Error != "" {
				fails = append(fails, fmt.Sprintf("- %s start: %s\n", x.name, st.Error))
			}
		}
		if x.s.load == nil {
			fails = append(fails, fmt.Sprintf("- %s load: %s\n", x.name, x.s.loadErr))
			continue
		}
		if x.s.load.Error != "" {
			fails = append(fails, fmt.Sprintf("- %s load: %s\n", x.name, x.s.load.Error))
		}
		for _, f := range x.s.load.Failures {
			s := fmt.Sprintf("- %s, phase `%s`: `%s %s` → HTTP %d", x.name, f.Phase, f.Method, f.Path, f.Status)
			if f.Error != "" {
				s += " (" + f.Error + ")"
			}
			if f.Body != "" {
				s += "\n\n  ```\n  " + strings.ReplaceAll(strings.TrimSpace(f.Body), "\n", "\n  ") + "\n  ```"
			}
			fails = append(fails, s+"\n")
		}
	}
	fails = append(fails, convFails...)
	fails = append(fails, coreFails...)
	fails = append(fails, goFails...)
	if len(fails) > 0 {
		p("## Failures\n\n%s\n", strings.Join(fails, ""))
	}
	if t := text("failures-extra.md"); t != "" {
		p("%s\n\n", t)
	}

	// Per-start details.
	p("## Start-ups, one by one\n\n| server | # | launch → ready | etcd launch → ready | VmRSS per process after idle | total |\n|---|---|---|---|---|---|\n")
	for _, x := range []struct {
		name string
		s    side
	}{{"crdserver", c}, {"reference", r}} {
		for i, st := range x.s.starts {
			if st.Error != "" {
				p("| %s | %d | failed: %s | | | |\n", x.name, i+1, st.Error)
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
			p("| %s | %d | %.3f s | %s | %s | %.1f MiB |\n", x.name, i+1, st.ReadyMs/1000, t0, strings.Join(mems, ", "), st.TotalRSSMiB)
		}
	}
	p("\n")
	if t := text("notes.md"); t != "" {
		p("## How it was measured\n\n%s\n\n", t)
	}
	if t := text("commands.txt"); t != "" {
		p("## Commands (exactly as run)\n\n```sh\n%s\n```\n", t)
	}
	return os.WriteFile(*out, []byte(b.String()), 0o644)
}
