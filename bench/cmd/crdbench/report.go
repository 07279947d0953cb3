package main

import (
	"cmp"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// sideOf is one server's result of a workload, read from its JSON file,
// or why there is none.
type sideOf[T any] struct {
	res *T
	why string
}

func readSide[T any](dir, file string) sideOf[T] {
	var r T
	if err := readJSON(filepath.Join(dir, file), &r); err != nil {
		return sideOf[T]{why: "not measured"}
	}
	return sideOf[T]{res: &r}
}

// side is everything measured for one server.
type side struct {
	name    string
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
	s := side{name: name}
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

// workloadFailures are a workload's error and failures on one server (name)
// as lines of the Failures section.
func workloadFailures(name, what, errText string, fs []failure) []string {
	var out []string
	if errText != "" {
		out = append(out, fmt.Sprintf("- %s %s: %s\n", name, what, errText))
	}
	return append(out, failureLines(name+" "+what+",", fs)...)
}

// yesNo is a target's verdict.
func yesNo(ok bool) string { return map[bool]string{true: "**yes**", false: "**no**"}[ok] }

// startVal is an aggregate (agg) of a figure f of a server's starts that
// reached ready, times scale, or why there is none.
func (s side) startVal(f func(startResult) float64, agg func([]float64) float64, prec int, unit string, scale float64) val {
	var v []float64
	for _, st := range s.okStarts() {
		v = append(v, f(st))
	}
	switch {
	case len(v) > 0:
		return num(agg(v)*scale, prec, unit)
	case len(s.starts) > 0:
		return none("**failed**: " + s.starts[0].Error)
	}
	return none("not measured")
}

// loadCell picks a value from a load phase, or says why it is missing.
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

// listCell is a figure of the load's lists, or why there is none.
func listCell(s side, f func(*loadResult) float64, prec int, unit string) val {
	switch {
	case s.load == nil:
		return none("not measured")
	case s.load.phase("populate") == nil:
		return none("not reached")
	case len(s.load.Lists) == 0 || s.load.ListMedianMs == 0 || slices.ContainsFunc(s.load.Failures, func(f failure) bool { return f.Phase == "list" }):
		return none("**failed** (see Failures)")
	}
	return num(f(s.load), prec, unit)
}

// resultFigs are the rows of the start-up and load table.
func resultFigs(c, r side) []fig[side] {
	var fs []fig[side]
	add := func(metric string, rt func(a, b val) string, cell func(side) val) {
		fs = append(fs, fig[side]{metric, cell, rt})
	}
	minf := func(v []float64) float64 { return slices.Min(v) }
	ready := func(st startResult) float64 { return st.ReadyMs }
	readyT0 := func(st startResult) float64 { return cmp.Or(st.SinceT0Ms, st.ReadyMs) }
	total := func(st startResult) float64 { return st.TotalRSSMiB }
	mem := func(name string) func(startResult) float64 {
		return func(st startResult) float64 {
			if m := find(st.Mem, func(m *procMem) bool { return m.Name == name }); m != nil {
				return m.VMRSSMiB
			}
			return 0
		}
	}
	start := func(f func(startResult) float64, agg func([]float64) float64, prec int, unit string, scale float64) func(side) val {
		return func(s side) val { return s.startVal(f, agg, prec, unit, scale) }
	}
	idleSec := 0.0
	if st := c.okStarts(); len(st) > 0 {
		idleSec = st[0].IdleSec
	}
	add(fmt.Sprintf("start-up, launch → /readyz ok, min (crdserver %d starts, reference %d)", len(c.okStarts()), len(r.okStarts())), ratio, start(ready, minf, 3, " s", 0.001))
	add("start-up, launch → /readyz ok, median", ratio, start(ready, median, 3, " s", 0.001))
	add("start-up incl. etcd, median (reference: etcd launch → apiserver /readyz ok; crdserver embeds etcd, same as above)", ratio, start(readyT0, median, 3, " s", 0.001))
	add(fmt.Sprintf("idle RSS %.0f s after ready, no CRDs: server process, median (crdserver includes its embedded etcd)", idleSec), ratio, func(s side) val {
		name := map[bool]string{true: "crdserver", false: "apiextensions-apiserver"}[s.name == "crdserver"]
		return s.startVal(mem(name), median, 1, " MiB", 1)
	})
	add("idle RSS: etcd, median", nil, func(s side) val {
		if s.name == "crdserver" {
			return label("(embedded, in the row above)")
		}
		return s.startVal(mem("etcd"), median, 1, " MiB", 1)
	})
	add("idle RSS: total, median (reference: apiserver + etcd)", ratio, start(total, median, 1, " MiB", 1))

	phaseOf := func(name string, sides ...side) *phase {
		for _, s := range sides {
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
		}{{"req/s", func(p *phase) float64 { return p.PerSecond }, 1, ""}, {"p50", func(p *phase) float64 { return p.P50Ms }, 2, " ms"},
			{"p99", func(p *phase) float64 { return p.P99Ms }, 2, " ms"}, {"wall time", func(p *phase) float64 { return p.WallSec }, 3, " s"}} {
			add(fmt.Sprintf("%s sequential %ss: %s", commas(n), ph, x.what), ratio, func(s side) val { return loadCell(s, ph, x.f, x.prec, x.unit) })
		}
		// The req/s of every round of the phase (create-1, create-2, …).
		rates := func(s side) val {
			var rates []string
			for k := 1; s.load != nil && s.load.phase(fmt.Sprintf("%s-%d", ph, k)) != nil; k++ {
				rates = append(rates, fmt.Sprintf("%.1f", s.load.phase(fmt.Sprintf("%s-%d", ph, k)).PerSecond))
			}
			return label(strings.Join(rates, ", "))
		}
		if rates(c).why != "" || rates(r).why != "" {
			add(fmt.Sprintf("%s sequential %ss: req/s of each round (the rows above are the median round)", commas(n), ph), nil, rates)
		}
	}
	listN := phaseOf("populate", c, r).Requests
	nl := 0
	if r.load != nil {
		nl = len(r.load.Lists)
	}
	list := func(f func(*loadResult) float64, prec int, unit string) func(side) val {
		return func(s side) val { return listCell(s, f, prec, unit) }
	}
	add(fmt.Sprintf("list of %s objects (plain GET, no limit): median of %d", commas(listN), nl), ratio, list(func(l *loadResult) float64 { return l.ListMedianMs }, 1, " ms"))
	add("list: min", ratio, list(func(l *loadResult) float64 { return l.ListMinMs }, 1, " ms"))
	add("list: max", ratio, list(func(l *loadResult) float64 { return l.ListMaxMs }, 1, " ms"))
	add("list: items returned", ratio, list(func(l *loadResult) float64 { return float64(l.ListItems) }, 0, ""))
	add("list: response size", ratio, list(func(l *loadResult) float64 { return float64(l.ListBytes) / 1e6 }, 2, " MB"))
	add("list: bytes per object", ratio, list(func(l *loadResult) float64 { return float64(l.ListBytes) / float64(max(1, l.ListItems)) }, 0, " B"))
	add("created objects carry `metadata.managedFields` (as kube-apiserver records them)", nil, func(s side) val {
		if s.load == nil || s.load.Sample == "" {
			return label("not measured")
		}
		return label(map[bool]string{true: "yes", false: "no"}[s.load.ManagedFields])
	})
	add(fmt.Sprintf("(setup, not a target) %s creates with %d workers: req/s", commas(listN), phaseOf("populate", r, c).Concurrency), ratio,
		func(s side) val { return loadCell(s, "populate", func(p *phase) float64 { return p.PerSecond }, 1, "") })
	add(fmt.Sprintf("(not a target) RSS right after the lists, %s objects stored (reference: apiserver + etcd)", commas(listN)), ratio, func(s side) val {
		if s.load == nil || len(s.load.RSSAfter) == 0 {
			return none("not measured")
		}
		return num(s.load.RSSAfterMiB, 1, " MiB")
	})
	return fs
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

	p("## Results\n\n")
	t := newTable("metric", "crdserver", "reference", "ratio")
	figs(t, resultFigs(c, r), c, r)
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
	fails = append(fails, apfReport(*dir, p)...)
	usageReport(*dir, p)
	objectsReport(*dir, p)
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
	target("start-up (launch → /readyz ok, median) under 1 s", c.startVal(func(st startResult) float64 { return st.ReadyMs }, median, 3, " s", 0.001), func(x float64) bool { return x < 1 })
	target("idle RSS (median) under 100 MiB", c.startVal(func(st startResult) float64 { return st.TotalRSSMiB }, median, 1, " MiB", 1), func(x float64) bool { return x < 100 })
	perSec := func(p *phase) float64 { return p.PerSecond }
	cc, rc := loadCell(c, "create", perSec, 1, " req/s"), loadCell(r, "create", perSec, 1, " req/s")
	if cc.ok && rc.ok {
		t.row("create throughput at least the reference's", fmt.Sprintf("%s vs %s (%s)", cc, rc, ratio(cc, rc)), yesNo(cc.v >= rc.v))
	} else {
		t.row("create throughput at least the reference's", fmt.Sprintf("crdserver: %s; reference: %s", cc, rc), "**no** (not measurable)")
	}
	t.rows = append(append(append(t.rows, convTargets...), rulesTargets...), goTargets...)
	p("%s\n", t)

	var loadFails []string
	for _, s := range []side{c, r} {
		for _, st := range s.starts {
			if st.Error != "" {
				loadFails = append(loadFails, fmt.Sprintf("- %s start: %s\n", s.name, st.Error))
			}
		}
		if s.load == nil {
			loadFails = append(loadFails, fmt.Sprintf("- %s load: %s\n", s.name, s.loadErr))
			continue
		}
		if s.load.Error != "" {
			loadFails = append(loadFails, fmt.Sprintf("- %s load: %s\n", s.name, s.load.Error))
		}
		loadFails = append(loadFails, failureLines(s.name+", phase", s.load.Failures)...)
	}
	if fails = append(loadFails, fails...); len(fails) > 0 {
		p("## Failures\n\n%s\n", strings.Join(fails, ""))
	}
	if t := text("failures-extra.md"); t != "" {
		p("%s\n\n", t)
	}

	p("## Start-ups, one by one\n\n")
	t = newTable("server", "#", "launch → ready", "etcd launch → ready", "VmRSS per process after idle", "total")
	for _, s := range []side{c, r} {
		for i, st := range s.starts {
			if st.Error != "" {
				t.row(s.name, i+1, "failed: "+st.Error, nil, nil, nil)
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
			t.row(s.name, i+1, fmt.Sprintf("%.3f s", st.ReadyMs/1000), t0, strings.Join(mems, ", "), fmt.Sprintf("%.1f MiB", st.TotalRSSMiB))
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

// usageReport copies the section bench/usage.sh wrote (usage.md), if it
// ran: what recording who calls each version costs.
func usageReport(dir string, p func(string, ...any)) {
	if b, err := os.ReadFile(filepath.Join(dir, "usage.md")); err == nil {
		p("%s\n", strings.TrimSpace(string(b))+"\n")
	}
}

// objectsReport copies the section bench/objects.sh wrote (objects.md), if
// it ran: many objects' memory, lists, watches and restart.
func objectsReport(dir string, p func(string, ...any)) {
	if b, err := os.ReadFile(filepath.Join(dir, "objects.md")); err == nil {
		p("%s\n", strings.TrimSpace(string(b))+"\n")
	}
}
