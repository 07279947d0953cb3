package main

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// crdsReport writes the section "Thousands of CRDs" from crds-*.json:
// crdserver with the whole corpus in rounds (each figure the median, with
// the rounds beside it), then crdserver and kube-apiserver with the same
// subset.
func crdsReport(dir string, p func(string, ...any)) (fails []string) {
	files, _ := filepath.Glob(filepath.Join(dir, "crds-crdserver-[0-9]*.json"))
	slices.Sort(files)
	var rounds []*crdsResult
	for _, f := range files {
		var r crdsResult
		if err := readJSON(f, &r); err == nil {
			rounds = append(rounds, &r)
		}
	}
	var sub, kube *crdsResult
	for name, dst := range map[string]**crdsResult{"crds-crdserver-subset.json": &sub, "crds-kube-subset.json": &kube} {
		var r crdsResult
		if err := readJSON(filepath.Join(dir, name), &r); err == nil {
			*dst = &r
		}
	}
	if len(rounds) == 0 && sub == nil {
		return nil
	}
	p("## Thousands of CRDs\n\n")
	p("`crdbench crds` (bench/crds.sh): the CRDs of a real Crossplane provider (`%s`), created 4 at a time through the API "+
		"as JSON until a CRD watch has seen every one Established; memory (VmRSS of every process of the server) before, "+
		"at its peak while installing and %s after; aggregated discovery and the OpenAPI v3 document of every group/version of the corpus, in a random order, each "+
		"fetched for the first time; kubectl; one dry-run create of a minimal object of every CRD, one after another "+
		"(each CRD's first request); `/openapi/v2`; every CRD re-applied (PUT) with a changed description in every schema, "+
		"20 watches of custom resources open meanwhile (each then hears a create); every CRD deleted.\n\n",
		firstCorpus(rounds, sub), firstSettle(rounds, sub))
	if len(rounds) > 0 {
		p("crdserver with all %s CRDs, %d rounds (a fresh server each), the median and every round:\n\n", commas(rounds[0].CRDs), len(rounds))
		t := newTable("what", "median", "rounds", "target")
		row := func(what string, f func(*crdsResult) float64, prec int, unit, target string, ok func(float64) bool) {
			var vs []string
			var xs []float64
			for _, r := range rounds {
				x := f(r)
				xs = append(xs, x)
				vs = append(vs, fmt.Sprintf("%.*f", prec, x))
			}
			m := median(xs)
			mark := ""
			if ok != nil {
				mark = " ✓"
				if !ok(m) {
					mark = " ✗"
					fails = append(fails, fmt.Sprintf("thousands of CRDs: %s %.*f%s, target %s", what, prec, m, unit, target))
				}
			}
			t.row(what, fmt.Sprintf("%.*f%s", prec, m, unit), strings.Join(vs, ", "), target+mark)
		}
		le := func(limit float64) func(float64) bool { return func(x float64) bool { return x <= limit } }
		row("all Established, created 4 at a time (from the first create)", func(r *crdsResult) float64 { return r.EstablishedSec }, 1, " s", "≤ 20 s", le(20))
		row("memory empty", func(r *crdsResult) float64 { return r.RSSEmptyMiB }, 1, " MiB", "", nil)
		row("memory after all are installed, idle", func(r *crdsResult) float64 { return r.RSSInstalledMiB }, 1, " MiB", "≤ 400 MiB", le(400))
		row("memory per CRD never used (above the empty server)", func(r *crdsResult) float64 { return r.KiBPerCRD }, 0, " KiB", "≤ 150 KiB", le(150))
		row("memory at its peak while installing", func(r *crdsResult) float64 { return r.RSSPeakMiB }, 1, " MiB", "", nil)
		row("first request to each CRD (dry-run create), p50", func(r *crdsResult) float64 { return r.First.P50Ms }, 1, " ms", "", nil)
		row("first request to each CRD (dry-run create), p99", func(r *crdsResult) float64 { return r.First.P99Ms }, 1, " ms", "≤ 50 ms", le(50))
		row("memory after a request to every CRD (the budget at work)", func(r *crdsResult) float64 { return r.RSSUsedMiB }, 1, " MiB", "≤ 800 MiB", le(800))
		row("aggregated discovery (median of 5 after the first)", func(r *crdsResult) float64 { return r.DiscoveryMs }, 1, " ms", "≤ 20 ms", le(20))
		row("one group/version's OpenAPI v3 document, cold (the median of every group/version of the corpus, each fetched once)", func(r *crdsResult) float64 { return r.OpenAPIColdMs }, 1, " ms", "≤ 50 ms", le(50))
		row("… p90 of those", func(r *crdsResult) float64 { return r.OpenAPIColdP90Ms }, 1, " ms", "", nil)
		row("… the slowest (the group/versions with the most CRDs)", func(r *crdsResult) float64 { return r.OpenAPIColdMaxMs }, 1, " ms", "", nil)
		row("/openapi/v2, cold", func(r *crdsResult) float64 { return r.OpenAPIV2Ms / 1000 }, 1, " s", "", nil)
		row("memory after /openapi/v2", func(r *crdsResult) float64 { return r.RSSAfterV2MiB }, 1, " MiB", "", nil)
		row("re-applying all with a changed description: all Established again", func(r *crdsResult) float64 { return r.ReappliedSec }, 1, " s", "≤ 30 s", le(30))
		row("… custom resource watches ended meanwhile", func(r *crdsResult) float64 { return float64(r.WatchesEnded) }, 0, "", "0", func(x float64) bool { return x == 0 })
		row("deleting all (empty)", func(r *crdsResult) float64 { return r.DeleteSec }, 1, " s", "≤ 30 s", le(30))
		p("%s\n", t)
		for _, k := range rounds[len(rounds)-1].Kubectl {
			p("- `kubectl %s` (last round, all installed): %s in %.0f ms — `%s`\n", strings.Join(k.Args, " "), okText(k.OK), k.Ms, strings.ReplaceAll(truncate([]byte(k.Output), 160), "\n", " | "))
			if !k.OK {
				fails = append(fails, "thousands of CRDs: kubectl "+strings.Join(k.Args, " ")+" failed")
			}
		}
		for _, r := range rounds {
			if r.Error != "" || r.CreateErrors > 0 || r.First.Errors > 0 || r.ReapplyErrors > 0 || r.DeleteErrors > 0 {
				fails = append(fails, fmt.Sprintf("thousands of CRDs: a round had errors: %s (creates %d, first requests %d, re-applies %d, deletes %d)",
					r.Error, r.CreateErrors, r.First.Errors, r.ReapplyErrors, r.DeleteErrors))
			}
		}
		p("\n")
	}
	if sub != nil && kube != nil {
		p("The first %s of them on crdserver and on kube-apiserver v1.37.2 (its etcd and kube-controller-manager counted; one run each):\n\n", commas(sub.CRDs))
		t := newTable("what", "crdserver", "kube-apiserver", "ratio", "target")
		cmp := func(what string, c, k float64, prec int, unit, target string, limit float64) {
			r := c / k
			mark := ""
			if limit > 0 {
				mark = " ✓"
				if r > limit {
					mark = " ✗"
					fails = append(fails, fmt.Sprintf("thousands of CRDs against kube-apiserver: %s %.2f×, target %s", what, r, target))
				}
			}
			t.row(what, fmt.Sprintf("%.*f%s", prec, c, unit), fmt.Sprintf("%.*f%s", prec, k, unit), fmt.Sprintf("%.2f×", r), target+mark)
		}
		cmp("all Established", sub.EstablishedSec, kube.EstablishedSec, 1, " s", "≤ 0.25×", 0.25)
		cmp("memory per CRD (above the empty server)", sub.KiBPerCRD, kube.KiBPerCRD, 0, " KiB", "≤ 0.05×", 0.05)
		cmp("memory empty", sub.RSSEmptyMiB, kube.RSSEmptyMiB, 1, " MiB", "", 0)
		cmp("memory installed, idle", sub.RSSInstalledMiB, kube.RSSInstalledMiB, 1, " MiB", "", 0)
		cmp("first request to each CRD, p99", sub.First.P99Ms, kube.First.P99Ms, 1, " ms", "", 0)
		cmp("memory after a request to every CRD", sub.RSSUsedMiB, kube.RSSUsedMiB, 1, " MiB", "", 0)
		cmp("aggregated discovery", sub.DiscoveryMs, kube.DiscoveryMs, 1, " ms", "", 0)
		cmp("OpenAPI v3 group/version, cold (median of every group/version)", sub.OpenAPIColdMs, kube.OpenAPIColdMs, 1, " ms", "", 0)
		cmp("… the slowest", sub.OpenAPIColdMaxMs, kube.OpenAPIColdMaxMs, 1, " ms", "", 0)
		cmp("/openapi/v2", sub.OpenAPIV2Ms, kube.OpenAPIV2Ms, 0, " ms", "", 0)
		cmp("re-applying all: all Established again", sub.ReappliedSec, kube.ReappliedSec, 1, " s", "", 0)
		t.row("… custom resource watches ended meanwhile", fmt.Sprintf("%d of %d", sub.WatchesEnded, sub.Watches), fmt.Sprintf("%d of %d", kube.WatchesEnded, kube.Watches), nil, nil)
		cmp("deleting all", sub.DeleteSec, kube.DeleteSec, 1, " s", "", 0)
		p("%s\nLoad at the start and end: crdserver %s → %s; kube-apiserver %s → %s.\n\n", t, sub.Load, sub.LoadEnd, kube.Load, kube.LoadEnd)
	}
	return fails
}

func okText(ok bool) string {
	if ok {
		return "ok"
	}
	return "failed"
}

func firstCorpus(rounds []*crdsResult, sub *crdsResult) string {
	if len(rounds) > 0 {
		return filepath.Base(rounds[0].Corpus)
	}
	return filepath.Base(sub.Corpus)
}

func firstSettle(rounds []*crdsResult, sub *crdsResult) string {
	s := 0.0
	if len(rounds) > 0 {
		s = rounds[0].SettleSec
	} else {
		s = sub.SettleSec
	}
	return fmt.Sprintf("%.0f s", s)
}
