package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// goBenchRun is one line of `go test -bench` output: one run of a benchmark.
type goBenchRun struct {
	Iterations  int64
	NsPerOp     float64
	MBPerSec    float64 // 0 when the benchmark does not call b.SetBytes
	BytesPerOp  float64 // with -benchmem or b.ReportAllocs
	AllocsPerOp float64
	HasMem      bool // B/op and allocs/op were printed
	// Extra are the benchmark's own metrics (b.ReportMetric), by unit.
	Extra map[string]float64
}

// goBench is every run of one benchmark of one package.
type goBench struct {
	Pkg    string // from the "pkg:" line before it
	Name   string // without the GOMAXPROCS suffix, e.g. BenchmarkTable500
	Procs  int    // the -N suffix (GOMAXPROCS); 1 when there is none
	Runs   []goBenchRun
	Failed bool // a "--- FAIL" line named it
}

// FullName is the name as go test prints it, e.g. BenchmarkTable500-2.
func (g *goBench) FullName() string {
	if g.Procs > 1 {
		return fmt.Sprintf("%s-%d", g.Name, g.Procs)
	}
	return g.Name
}

func (g *goBench) stat(f func(goBenchRun) float64) (med, lo, hi float64) {
	var v []float64
	for _, r := range g.Runs {
		v = append(v, f(r))
	}
	if len(v) == 0 {
		return 0, 0, 0
	}
	return median(v), slices.Min(v), slices.Max(v)
}

// extraMedians writes the median of each of the benchmark's own metrics,
// "1273 slowest-ms, 16.7 MiB/server", in the order of their units.
func (g *goBench) extraMedians() string {
	var units []string
	for _, r := range g.Runs {
		for u := range r.Extra {
			if !slices.Contains(units, u) {
				units = append(units, u)
			}
		}
	}
	slices.Sort(units)
	var parts []string
	for _, u := range units {
		m, _, _ := g.stat(func(r goBenchRun) float64 { return r.Extra[u] })
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
// the order they first appear, each with all its runs (-count). Result lines
// are "Name-PROCS  ITERATIONS  V ns/op  [V MB/s]  [V B/op  V allocs/op]" and
// any other "value unit" pairs (ignored). Lines that are not results (goos:,
// PASS, ok, test logs) are skipped; "--- FAIL: Name" marks a benchmark failed.
func parseGoBench(r io.Reader) ([]*goBench, error) {
	var out []*goBench
	byKey := map[string]*goBench{}
	get := func(pkg, full string) *goBench {
		name, procs := splitProcs(full)
		key := pkg + "\x00" + name + "\x00" + strconv.Itoa(procs)
		g := byKey[key]
		if g == nil {
			g = &goBench{Pkg: pkg, Name: name, Procs: procs}
			byKey[key] = g
			out = append(out, g)
		}
		return g
	}
	pkg := ""
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 4*1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if p, ok := strings.CutPrefix(line, "pkg: "); ok {
			pkg = strings.TrimSpace(p)
			continue
		}
		if i := strings.Index(line, "--- FAIL: Benchmark"); i >= 0 {
			f := strings.Fields(line[i+len("--- FAIL: "):])
			get(pkg, f[0]).Failed = true
			continue
		}
		if !strings.HasPrefix(line, "Benchmark") {
			continue
		}
		f := strings.Fields(line)
		// A result has the name, the iterations and at least one "value unit" pair.
		if len(f) < 4 || len(f)%2 != 0 {
			continue
		}
		n, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			continue
		}
		run := goBenchRun{Iterations: n}
		hasNs, hasB, hasAllocs := false, false, false
		bad := false
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				bad = true
				break
			}
			switch f[i+1] {
			case "ns/op":
				run.NsPerOp, hasNs = v, true
			case "MB/s":
				run.MBPerSec = v
			case "B/op":
				run.BytesPerOp, hasB = v, true
			case "allocs/op":
				run.AllocsPerOp, hasAllocs = v, true
			default:
				if run.Extra == nil {
					run.Extra = map[string]float64{}
				}
				run.Extra[f[i+1]] = v
			}
		}
		if bad || !hasNs {
			continue
		}
		run.HasMem = hasB && hasAllocs
		g := get(pkg, f[0])
		g.Runs = append(g.Runs, run)
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

// fmtNs writes a duration in ns in the unit that fits: ns, µs or ms.
func fmtNs(ns float64) string {
	return fmtNsIn(ns, ns)
}

// fmtNsIn writes ns in the unit that fits ref, so a range reads in one unit.
func fmtNsIn(ns, ref float64) string {
	switch {
	case ref >= 1e6:
		return fmt.Sprintf("%.2f ms", ns/1e6)
	case ref >= 1e3:
		return fmt.Sprintf("%.1f µs", ns/1e3)
	default:
		return fmt.Sprintf("%.0f ns", ns)
	}
}

// fmtBytes writes a B/op figure: bytes below 10 KiB, then KiB, then MiB.
func fmtBytes(b float64) string {
	switch {
	case b >= 1024*1024:
		return fmt.Sprintf("%.2f MiB", b/(1024*1024))
	case b >= 10*1024:
		return fmt.Sprintf("%.0f KiB", b/1024)
	default:
		return fmt.Sprintf("%.0f B", b)
	}
}

func shortPkg(pkg string) string {
	const mod = "github.com/crdserver/crdserver/"
	return strings.TrimPrefix(pkg, mod)
}

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
	find := func(name string) *goBench {
		for _, g := range benches {
			if g.Name == name {
				return g
			}
		}
		return nil
	}

	if len(benches) > 0 {
		p("## In-process benchmarks (go test -bench)\n\n")
		p("`go test -run '^$' -bench . -benchmem` of the packages named in each row (the exact command is under \"Commands\"; " +
			"raw output in `bench/results/gobench.txt`). Each row is one benchmark over its runs (`-count`): the median ns/op, " +
			"the fastest and slowest run, and the median B/op and allocs/op. The suffix of each name is GOMAXPROCS.\n\n")
		t := newTable("benchmark", "package", "runs", "time/op (median)", "min – max", "B/op", "allocs/op", "MB/s", "what it measures")
		for _, g := range benches {
			about := goBenchAbout[g.Name]
			if parent, _, sub := strings.Cut(g.Name, "/"); about == "" && sub {
				about = goBenchAbout[parent]
			}
			if about == "" {
				about = "(see the benchmark's doc comment)"
			}
			if extra := g.extraMedians(); extra != "" {
				about += "; its own metrics (medians): " + extra
			}
			if len(g.Runs) == 0 {
				t.row(g.FullName(), shortPkg(g.Pkg), 0, "**failed**", nil, nil, nil, nil, about)
				continue
			}
			med, lo, hi := g.stat(func(r goBenchRun) float64 { return r.NsPerOp })
			mem, allocs := "–", "–"
			if g.Runs[0].HasMem {
				b, _, _ := g.stat(func(r goBenchRun) float64 { return r.BytesPerOp })
				a, _, _ := g.stat(func(r goBenchRun) float64 { return r.AllocsPerOp })
				mem, allocs = fmtBytes(b), commas(int(a+0.5))
			}
			mbs := "–"
			if m, _, _ := g.stat(func(r goBenchRun) float64 { return r.MBPerSec }); m > 0 {
				mbs = fmt.Sprintf("%.2f", m)
			}
			runs := strconv.Itoa(len(g.Runs))
			if g.Failed {
				runs += " (**a run failed**)"
			}
			t.row(g.FullName(), shortPkg(g.Pkg), runs, fmtNs(med), fmtNsIn(lo, med)+" – "+fmtNsIn(hi, med), mem, allocs, mbs, about)
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

	// Targets.
	measured := func(name string) (string, *goBench) {
		g := find(name)
		if g == nil {
			if len(benches) == 0 {
				return why, nil
			}
			return "not measured (no `" + name + "` in gobench.txt)", nil
		}
		if len(g.Runs) == 0 {
			return "**failed** (see Failures)", nil
		}
		ns, _, _ := g.stat(func(r goBenchRun) float64 { return r.NsPerOp })
		s := fmt.Sprintf("%s/op", fmtNs(ns))
		if g.Runs[0].HasMem {
			a, _, _ := g.stat(func(r goBenchRun) float64 { return r.AllocsPerOp })
			s += fmt.Sprintf(", %s allocs/op", commas(int(a+0.5)))
		}
		return s + " (medians)", g
	}
	// The schema pipeline's target is per 2 KiB object: under 50 µs and under 200 allocations.
	timeCell, allocCell, timeMet, allocMet := "", "", "not measured", "not measured"
	if m, g := measured("BenchmarkPipelineWide2KiB"); g == nil {
		timeCell, allocCell = m, m
	} else {
		ns, lo, hi := g.stat(func(r goBenchRun) float64 { return r.NsPerOp })
		timeCell = fmt.Sprintf("%s/op (median; runs %s – %s)", fmtNs(ns), fmtNsIn(lo, ns), fmtNsIn(hi, ns))
		timeMet = yesNo(ns < 50e3)
		allocCell = "not measured (no allocs/op)"
		if g.Runs[0].HasMem {
			a, _, _ := g.stat(func(r goBenchRun) float64 { return r.AllocsPerOp })
			allocCell = fmt.Sprintf("%s allocs/op (median)", commas(int(a+0.5)))
			allocMet = yesNo(a < 200)
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
		m, _ := measured(x[0])
		targets = append(targets, []string{x[1], m, "recorded, no target"})
	}
	return targets, fails
}
