package main

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// goBench is every run of one benchmark of one package (go test -bench
// -count), each run its figures by unit: ns/op, MB/s, B/op, allocs/op and
// the benchmark's own (b.ReportMetric).
type goBench struct {
	Pkg    string // from the "pkg:" line before it
	Name   string // without the GOMAXPROCS suffix, e.g. BenchmarkTable500
	Procs  int    // the -N suffix (GOMAXPROCS); 1 when there is none
	Runs   []map[string]float64
	Failed bool // a "--- FAIL" line named it
}

// goBenchUnits are the units go test itself prints.
var goBenchUnits = []string{"ns/op", "MB/s", "B/op", "allocs/op"}

// FullName is the name as go test prints it, e.g. BenchmarkTable500-2.
func (g *goBench) FullName() string {
	if g.Procs > 1 {
		return fmt.Sprintf("%s-%d", g.Name, g.Procs)
	}
	return g.Name
}

// stat is the median, min and max of a unit over the runs (0 in a run
// without it).
func (g *goBench) stat(unit string) (med, lo, hi float64) {
	var v []float64
	for _, r := range g.Runs {
		v = append(v, r[unit])
	}
	if len(v) == 0 {
		return 0, 0, 0
	}
	return median(v), slices.Min(v), slices.Max(v)
}

// allocs is the median allocs/op as "1,234", if -benchmem figures were printed.
func (g *goBench) allocs() (string, float64, bool) {
	_, b := g.Runs[0]["B/op"]
	_, ok := g.Runs[0]["allocs/op"]
	a, _, _ := g.stat("allocs/op")
	return commas(int(a + 0.5)), a, b && ok
}

// extraMedians writes the median of each of the benchmark's own metrics,
// "**1273 slowest-ms**, **16.7 MiB/server**", in the order of their units.
func (g *goBench) extraMedians() string {
	var units, parts []string
	for _, r := range g.Runs {
		for u := range r {
			if !slices.Contains(goBenchUnits, u) && !slices.Contains(units, u) {
				units = append(units, u)
			}
		}
	}
	slices.Sort(units)
	for _, u := range units {
		m, _, _ := g.stat(u)
		parts = append(parts, "**"+strconv.FormatFloat(m, 'g', 4, 64)+" "+u+"**")
	}
	return strings.Join(parts, ", ")
}

// splitProcs splits "BenchmarkX-2" into "BenchmarkX" and 2. go test leaves
// the suffix out when GOMAXPROCS is 1.
func splitProcs(s string) (string, int) {
	if i := strings.LastIndexByte(s, '-'); i > 0 {
		if n, err := strconv.Atoi(s[i+1:]); err == nil && n > 0 {
			return s[:i], n
		}
	}
	return s, 1
}

// parseGoBench reads `go test -bench` output and returns its benchmarks in
// the order they first appear, each with all its runs. A result line is
// "Name-PROCS ITERATIONS" and "value unit" pairs, ns/op among them; other
// lines (goos:, PASS, ok, test logs) are skipped; "--- FAIL: Name" marks a
// benchmark failed.
func parseGoBench(r io.Reader) ([]*goBench, error) {
	var out []*goBench
	get := func(pkg, full string) *goBench {
		name, procs := splitProcs(full)
		for _, g := range out {
			if g.Pkg == pkg && g.Name == name && g.Procs == procs {
				return g
			}
		}
		out = append(out, &goBench{Pkg: pkg, Name: name, Procs: procs})
		return out[len(out)-1]
	}
	pkg := ""
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 4*1024*1024)
	for sc.Scan() {
		line := sc.Text()
		f := strings.Fields(line)
		if p, ok := strings.CutPrefix(line, "pkg: "); ok {
			pkg = strings.TrimSpace(p)
		} else if _, failed, ok := strings.Cut(line, "--- FAIL: Benchmark"); ok {
			get(pkg, strings.Fields("Benchmark" + failed)[0]).Failed = true
		} else if strings.HasPrefix(line, "Benchmark") && len(f) >= 4 && len(f)%2 == 0 {
			if _, err := strconv.ParseInt(f[1], 10, 64); err != nil {
				continue
			}
			run := map[string]float64{}
			for i := 2; i+1 < len(f) && run != nil; i += 2 {
				v, err := strconv.ParseFloat(f[i], 64)
				if run[f[i+1]] = v; err != nil {
					run = nil
				}
			}
			if _, ok := run["ns/op"]; ok {
				g := get(pkg, f[0])
				g.Runs = append(g.Runs, run)
			}
		}
	}
	return out, sc.Err()
}

// goBenchAbout says what each benchmark measures (from its doc comment).
var goBenchAbout = map[string]string{
	"BenchmarkServerSideApply2KiB": "server-side apply (`application/apply-patch+yaml`, `fieldManager=bench`) of a 2 KiB object (50 string fields) " +
		"that changes one field each time, sent straight to the server's handler (no network): decoding, schema, managed fields, the etcd write, encoding",
	"BenchmarkMergePatch2KiB": "the same 2 KiB write as a JSON merge patch (`application/merge-patch+json`), through the handler with its etcd write: " +
		"the difference from the row above is what server-side apply costs on top",
	"BenchmarkTable500": "Table rendering of a 500-item list: `GET …/crontabs?limit=500` of 500 CronTabs with " +
		"`Accept: application/json;as=Table;v=v1;g=meta.k8s.io`, as `kubectl get` asks, through the handler; four printer columns (one of priority 1); MB/s is the Table's size per second",
	"BenchmarkPipelineCronTab": "the schema pipeline a create runs on its body, no server and no etcd: strict JSON decode, prune, default, " +
		"validate (OpenAPI and CEL) of the CronTab CRD's example object (about 200 B), the schema compiled once beforehand",
	"BenchmarkPipelineWide2KiB": "the same pipeline on a 2 KiB object: 50 string fields (`maxLength: 64`) and 5 CEL rules on `spec`",
	"BenchmarkServer": "one test's server from `crdtest`: start (embedded etcd without fsync), ready, its CRD Established, " +
		"a create and a list through client-go, Close (issue 15's target: ≤ 100 ms)",
	"BenchmarkServer8Parallel": "eight such servers at once in one process; time/op is a round of eight, slowest-ms the longest " +
		"any one server took over all rounds (target: ≤ 250 ms)",
	"BenchmarkIdleMemory":         "the Go heap and stacks an idle `crdtest` server holds, with its CRD and one object, over four servers (target: ≤ 20 MiB)",
	"BenchmarkCompressedList":     "gzip of a 9 MB list response (10,000 objects of ~1 KiB) as client-go asks for it (level 1, klauspost/compress, pooled writers)",
	"BenchmarkConvertList":        "a cold conversion of 10,000 stored CronTabs to v1 in process, by None and by declarative rules, each followed by the target schema",
	"BenchmarkList10000":          "a list of 10,000 custom resources in their stored version, from the watch cache through the handler",
	"BenchmarkList10000Converted": "the same list in another version (None conversion), once every object remembers its conversion",
}

// fmtNsIn writes ns in the unit (ns, µs or ms) that fits ref, so that a
// range reads in one unit.
func fmtNsIn(ns, ref float64) string {
	switch {
	case ref >= 1e6:
		return fmt.Sprintf("%.2f ms", ns/1e6)
	case ref >= 1e3:
		return fmt.Sprintf("%.1f µs", ns/1e3)
	}
	return fmt.Sprintf("%.0f ns", ns)
}

// fmtBytes writes a B/op figure: bytes below 10 KiB, then KiB, then MiB.
func fmtBytes(b float64) string {
	switch {
	case b >= 1024*1024:
		return fmt.Sprintf("%.2f MiB", b/(1024*1024))
	case b >= 10*1024:
		return fmt.Sprintf("%.0f KiB", b/1024)
	}
	return fmt.Sprintf("%.0f B", b)
}

func shortPkg(pkg string) string { return strings.TrimPrefix(pkg, "github.com/crdserver/crdserver/") }

// goBenchReport writes the "In-process benchmarks" section from
// DIR/gobench.txt and returns rows for the Targets table and failures.
func goBenchReport(dir string, p func(string, ...any)) (targets [][]string, fails []string) {
	var benches []*goBench
	why := "not measured (no `bench/results/gobench.txt`; GOBENCH=0?)"
	if f, err := os.Open(filepath.Join(dir, "gobench.txt")); err == nil {
		benches, err = parseGoBench(f)
		f.Close()
		if err != nil {
			why = "not measured (gobench.txt: " + err.Error() + ")"
		} else if len(benches) == 0 {
			why = "**failed**: no benchmark results in `bench/results/gobench.txt`"
			fails = append(fails, "- in-process benchmarks: no benchmark results in `bench/results/gobench.txt`\n")
		}
	}
	if len(benches) > 0 {
		p("## In-process benchmarks (go test -bench)\n\n")
		p("`go test -run '^$' -bench . -benchmem` of the packages named in each row (the exact command is under \"Commands\"; " +
			"raw output in `bench/results/gobench.txt`). Each row is one benchmark over its runs (`-count`): the median ns/op, " +
			"the fastest and slowest run, and the median B/op and allocs/op. The suffix of each name is GOMAXPROCS.\n\n")
		t := newTable("benchmark", "package", "runs", "time/op (median)", "min – max", "B/op", "allocs/op", "MB/s", "what it measures")
		for _, g := range benches {
			parent, _, _ := strings.Cut(g.Name, "/")
			about := cmp.Or(goBenchAbout[g.Name], goBenchAbout[parent], "(see the benchmark's doc comment)")
			if extra := g.extraMedians(); extra != "" {
				about += "; its own metrics (medians): " + extra
			}
			if len(g.Runs) == 0 {
				t.row(g.FullName(), shortPkg(g.Pkg), 0, "**failed**", nil, nil, nil, nil, about)
				continue
			}
			med, lo, hi := g.stat("ns/op")
			mem, allocs := "–", "–"
			if a, _, ok := g.allocs(); ok {
				b, _, _ := g.stat("B/op")
				mem, allocs = fmtBytes(b), a
			}
			mbs := "–"
			if m, _, _ := g.stat("MB/s"); m > 0 {
				mbs = fmt.Sprintf("%.2f", m)
			}
			runs := strconv.Itoa(len(g.Runs)) + map[bool]string{true: " (**a run failed**)"}[g.Failed]
			t.row(g.FullName(), shortPkg(g.Pkg), runs, fmtNsIn(med, med), fmtNsIn(lo, med)+" – "+fmtNsIn(hi, med), mem, allocs, mbs, about)
		}
		p("%s\n", t)
		p("The write benchmarks (`BenchmarkServerSideApply2KiB`, `BenchmarkMergePatch2KiB`) run the server in-process on its embedded etcd " +
			"(data in the benchmark's temp dir), so their ns/op includes etcd's commit of each write, an fsync of its WAL, on this machine's disk. " +
			"`BenchmarkTable500` reads only; the `internal/schema` pipelines touch no storage.\n\n")
		for _, g := range benches {
			if g.Failed {
				fails = append(fails, fmt.Sprintf("- in-process benchmark `%s` (%s) failed: see `bench/results/gobench.txt`\n", g.FullName(), shortPkg(g.Pkg)))
			}
		}
	}

	// measured is a benchmark with runs, or why there is none.
	measured := func(name string) (*goBench, string) {
		g := find(benches, func(g **goBench) bool { return (*g).Name == name })
		switch {
		case g == nil && len(benches) == 0:
			return nil, why
		case g == nil:
			return nil, "not measured (no `" + name + "` in gobench.txt)"
		case len((*g).Runs) == 0:
			return nil, "**failed** (see Failures)"
		}
		return *g, ""
	}
	// The schema pipeline's target is per 2 KiB object: under 50 µs and under 200 allocations.
	timeCell, allocCell, timeMet, allocMet := "", "", "not measured", "not measured"
	if g, m := measured("BenchmarkPipelineWide2KiB"); g == nil {
		timeCell, allocCell = m, m
	} else {
		ns, lo, hi := g.stat("ns/op")
		timeCell = fmt.Sprintf("%s/op (median; runs %s – %s)", fmtNsIn(ns, ns), fmtNsIn(lo, ns), fmtNsIn(hi, ns))
		timeMet = yesNo(ns < 50e3)
		allocCell = "not measured (no allocs/op)"
		if s, a, ok := g.allocs(); ok {
			allocCell, allocMet = s+" allocs/op (median)", yesNo(a < 200)
		}
	}
	targets = append(targets,
		[]string{"schema pipeline 2 KiB object with 50 fields and 5 CEL rules (`BenchmarkPipelineWide2KiB`): under 50 µs per object", timeCell, timeMet},
		[]string{"schema pipeline the same 2 KiB object: under 200 allocations per object", allocCell, allocMet})
	for _, x := range [][2]string{
		{"BenchmarkPipelineCronTab", "schema pipeline CronTab object (`BenchmarkPipelineCronTab`; the target is per 2 KiB object)"},
		{"BenchmarkServerSideApply2KiB", "server-side apply of a 2 KiB object, etcd write included (`BenchmarkServerSideApply2KiB`)"},
		{"BenchmarkTable500", "Table rendering of a 500-item list (`BenchmarkTable500`)"},
	} {
		g, m := measured(x[0])
		if g != nil {
			ns, _, _ := g.stat("ns/op")
			m = fmtNsIn(ns, ns) + "/op"
			if s, _, ok := g.allocs(); ok {
				m += ", " + s + " allocs/op"
			}
			m += " (medians)"
		}
		targets = append(targets, []string{x[1], m, "recorded, no target"})
	}
	return targets, fails
}
