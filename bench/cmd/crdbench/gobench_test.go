package main

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// gobenchSample is go test -bench output of two packages, -count 3, with a
// benchmark without -benchmem figures, one whose GOMAXPROCS is 1 (no
// suffix), a custom metric, a failed benchmark and noise between lines.
const gobenchSample = `goos: linux
goarch: amd64
pkg: github.com/crdserver/crdserver/integration
cpu: AMD EPYC
BenchmarkServerSideApply2KiB-2   	     500	   2453102 ns/op	 1227874 B/op	   11616 allocs/op
BenchmarkServerSideApply2KiB-2   	     480	   2600000 ns/op	 1227900 B/op	   11618 allocs/op
BenchmarkServerSideApply2KiB-2   	     510	   2400000 ns/op	 1227800 B/op	   11614 allocs/op
BenchmarkTable500-2              	      24	  10846758 ns/op	  24.65 MB/s	 4272073 B/op	   92715 allocs/op
BenchmarkTable500-2              	      25	  10000000 ns/op	  26.00 MB/s	 4272000 B/op	   92716 allocs/op
BenchmarkBroken-2                	--- FAIL: BenchmarkBroken-2
    bench_test.go:12: boom
PASS
ok  	github.com/crdserver/crdserver/integration	42.1s
goos: linux
goarch: amd64
pkg: github.com/crdserver/crdserver/internal/schema
cpu: AMD EPYC
BenchmarkPipelineCronTab      	    7392	     38027 ns/op	   5.18 MB/s	   22663 B/op	     259 allocs/op
BenchmarkPipelineCronTab      	    7000	     39000.5 ns/op	   5.00 MB/s	   22670 B/op	     260 allocs/op
BenchmarkNoMem-2   	 1000000	      1050 ns/op	  3.00 widgets/op
BenchmarkNoMem-2   	 1000000	      1100 ns/op	  3.00 widgets/op
BenchmarkNotAResult-2 is not a result line
BenchmarkOdd-2   	     100	      abc ns/op
ok  	github.com/crdserver/crdserver/internal/schema	12.0s
`

func TestParseGoBench(t *testing.T) {
	got, err := parseGoBench(strings.NewReader(gobenchSample))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, g := range got {
		names = append(names, fmt.Sprintf("%s %s runs=%d failed=%v", shortPkg(g.Pkg), g.FullName(), len(g.Runs), g.Failed))
	}
	want := []string{
		"integration BenchmarkServerSideApply2KiB-2 runs=3 failed=false",
		"integration BenchmarkTable500-2 runs=2 failed=false",
		"integration BenchmarkBroken-2 runs=0 failed=true",
		"internal/schema BenchmarkPipelineCronTab runs=2 failed=false",
		"internal/schema BenchmarkNoMem-2 runs=2 failed=false",
	}
	if strings.Join(names, "\n") != strings.Join(want, "\n") {
		t.Fatalf("benchmarks:\n%s\nwant:\n%s", strings.Join(names, "\n"), strings.Join(want, "\n"))
	}

	ssa, table, cron, noMem := got[0], got[1], got[3], got[4]
	if ssa.Name != "BenchmarkServerSideApply2KiB" || ssa.Procs != 2 {
		t.Errorf("name %q procs %d", ssa.Name, ssa.Procs)
	}
	if r := ssa.Runs[0]; !reflect.DeepEqual(r, map[string]float64{"ns/op": 2453102, "B/op": 1227874, "allocs/op": 11616}) {
		t.Errorf("first run %+v", r)
	}
	for _, tc := range []struct {
		g           *goBench
		unit        string
		med, lo, hi float64
	}{
		{ssa, "ns/op", 2453102, 2400000, 2600000}, {ssa, "allocs/op", 11616, 11614, 11618},
		{table, "ns/op", 10423379, 10000000, 10846758}, {table, "MB/s", 25.325, 24.65, 26},
		{cron, "ns/op", 38513.75, 38027, 39000.5}, {noMem, "MB/s", 0, 0, 0},
	} {
		if med, lo, hi := tc.g.stat(tc.unit); med != tc.med || lo != tc.lo || hi != tc.hi {
			t.Errorf("%s %s: %v %v %v, want %v %v %v", tc.g.Name, tc.unit, med, lo, hi, tc.med, tc.lo, tc.hi)
		}
	}
	if s, a, ok := ssa.allocs(); s != "11,616" || a != 11616 || !ok {
		t.Errorf("allocs %q %v %v", s, a, ok)
	}
	if cron.Procs != 1 || cron.FullName() != "BenchmarkPipelineCronTab" {
		t.Errorf("CronTab %+v", cron)
	}
	if _, _, ok := noMem.allocs(); ok || noMem.extraMedians() != "**3 widgets/op**" {
		t.Errorf("NoMem %+v", noMem.Runs)
	}
	if got, err := parseGoBench(strings.NewReader("")); err != nil || len(got) != 0 {
		t.Errorf("empty input: %v, %v", got, err)
	}
}

func TestSplitProcsAndFormats(t *testing.T) {
	var got []string
	for _, in := range []string{"BenchmarkX-2", "BenchmarkX-16", "BenchmarkX", "BenchmarkX/size-10-4", "BenchmarkX/a-b"} {
		n, p := splitProcs(in)
		got = append(got, fmt.Sprintf("%s %d", n, p))
	}
	for _, x := range [][2]float64{{950, 950}, {38027, 38027}, {770302, 770302}, {2453102, 2453102}, {999000, 1.2e6}} {
		got = append(got, fmtNsIn(x[0], x[1])) // in the unit of the second
	}
	for _, b := range []float64{512, 22663, 1048575, 1227874, 24 << 20} {
		got = append(got, fmtBytes(b))
	}
	want := "BenchmarkX 2|BenchmarkX 16|BenchmarkX 1|BenchmarkX/size-10 4|BenchmarkX/a-b 1|950 ns|38.0 µs|770.3 µs|2.45 ms|1.00 ms|" +
		"512 B|22 KiB|1024 KiB|1.17 MiB|24.00 MiB"
	if strings.Join(got, "|") != want {
		t.Errorf("got  %s\nwant %s", strings.Join(got, "|"), want)
	}
}

func TestGoBenchReport(t *testing.T) {
	dir := t.TempDir()
	out := `pkg: github.com/crdserver/crdserver/internal/schema
BenchmarkPipelineCronTab-2    	    7392	     38027 ns/op	   5.18 MB/s	   22663 B/op	     259 allocs/op
BenchmarkPipelineWide2KiB-2   	     301	    770302 ns/op	   2.67 MB/s	  475296 B/op	    4428 allocs/op
BenchmarkPipelineWide2KiB-2   	     301	    760302 ns/op	   2.67 MB/s	  475296 B/op	    4428 allocs/op
BenchmarkPipelineWide2KiB-2   	     301	    40000 ns/op	   2.67 MB/s	  475296 B/op	    150 allocs/op
`
	if err := os.WriteFile(filepath.Join(dir, "gobench.txt"), []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	targets, fails := goBenchReport(dir, func(f string, a ...any) { fmt.Fprintf(&b, f, a...) })
	text := b.String()
	mustContain(t, "section", text,
		"## In-process benchmarks (go test -bench)",
		"| BenchmarkPipelineWide2KiB-2 | internal/schema | 3 | 760.3 µs | 40.0 µs – 770.3 µs | 464 KiB | 4,428 | 2.67 |",
		"| BenchmarkPipelineCronTab-2 | internal/schema | 1 | 38.0 µs | 38.0 µs – 38.0 µs | 22 KiB | 259 | 5.18 |",
		"fsync",
	)
	if len(fails) != 0 {
		t.Errorf("failures %v", fails)
	}
	all := ""
	for _, r := range targets {
		all += line(r)
	}
	mustContain(t, "targets", all,
		"under 50 µs per object | 760.3 µs/op (median; runs 40.0 µs – 770.3 µs) | **no** |",
		"under 200 allocations per object | 4,428 allocs/op (median) | **no** |",
		"(`BenchmarkPipelineCronTab`; the target is per 2 KiB object) | 38.0 µs/op, 259 allocs/op (medians) | recorded, no target |",
		"`BenchmarkServerSideApply2KiB`) | not measured (no `BenchmarkServerSideApply2KiB` in gobench.txt) | recorded, no target |",
	)

	// Under both bounds: met.
	fast := "pkg: x\nBenchmarkPipelineWide2KiB-2 \t 30000 \t 41000 ns/op \t 199 B/op \t 199 allocs/op\n"
	if err := os.WriteFile(filepath.Join(dir, "gobench.txt"), []byte(fast), 0o644); err != nil {
		t.Fatal(err)
	}
	targets, _ = goBenchReport(dir, func(string, ...any) {})
	if !strings.HasSuffix(line(targets[0]), "| **yes** |\n") || !strings.HasSuffix(line(targets[1]), "| **yes** |\n") {
		t.Errorf("fast pipeline: %q", targets[:2])
	}

	// No gobench.txt (GOBENCH=0): no section, the targets say so.
	b.Reset()
	targets, _ = goBenchReport(t.TempDir(), func(f string, a ...any) { fmt.Fprintf(&b, f, a...) })
	if b.Len() != 0 || len(targets) != 5 || !strings.Contains(line(targets[0]), "GOBENCH=0") {
		t.Errorf("without gobench.txt: %q, %q", b.String(), targets)
	}
}
