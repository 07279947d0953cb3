package main

import (
	"fmt"
	"path/filepath"
	"strings"
)

// coreSide is the core-types benchmark of one server (core-NAME.json).
type coreSide struct {
	res *coreResult
	why string // why there is none
}

func loadCoreSide(dir, name string) coreSide {
	var r coreResult
	if err := readJSON(filepath.Join(dir, "core-"+name+".json"), &r); err != nil {
		return coreSide{why: "not measured"}
	}
	return coreSide{res: &r}
}

// phaseVal is a figure of one phase, or why there is none.
func (s coreSide) phaseVal(name string, f func(*corePhase) (float64, bool), prec int, unit string) val {
	if s.res == nil {
		return none(s.why)
	}
	p := s.res.phase(name)
	if p == nil {
		return none("not reached")
	}
	if p.Errors > 0 || p.Aborted {
		return none(fmt.Sprintf("**failed** (%d/%d errors)", p.Errors, p.Requests))
	}
	v, ok := f(p)
	if !ok {
		return none("not measured")
	}
	return num(v, prec, unit)
}

// listVal is a figure of the ConfigMap lists.
func (s coreSide) listVal(f func(*coreResult) float64, prec int, unit string) val {
	if s.res == nil {
		return none(s.why)
	}
	if len(s.res.Lists) == 0 {
		return none("not reached")
	}
	for _, f := range s.res.Failures {
		if f.Phase == "configmap-list" {
			return none("**failed** (see Failures)")
		}
	}
	return num(f(s.res), prec, unit)
}

// leaseVal is a figure of the lease renewals.
func (s coreSide) leaseVal(f func(*leaseResult) (float64, bool), prec int, unit string) val {
	if s.res == nil {
		return none(s.why)
	}
	lr := s.res.Lease
	if lr == nil || lr.TicksPerLease == 0 {
		return none("not reached")
	}
	v, ok := f(lr)
	if !ok {
		return none("not measured")
	}
	return num(v, prec, unit)
}

// coreRatio is ratio, with two significant digits below 0.1 (so that a
// latency a hundred times shorter does not read 0.00×).
func coreRatio(a, b val) string {
	if a.ok && b.ok && b.v != 0 && a.v/b.v < 0.1 && a.v > 0 {
		return fmt.Sprintf("%.2g×", a.v/b.v)
	}
	return ratio(a, b)
}

// cpuOK is a CPU window whose counted processes could all be read.
func cpuOK(w *cpuWindow) bool { return w != nil && w.Error == "" }

// procList is "name 1.2 s, name 0.3 s" for the processes of a window.
func procList(w *cpuWindow, counted bool) string {
	var parts []string
	for _, p := range w.Procs {
		if p.Counted != counted {
			continue
		}
		if p.Error != "" {
			parts = append(parts, fmt.Sprintf("%s: %s", p.Name, p.Error))
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %.2f s (%.1f%%)", p.Name, p.CPUSec, p.CPUSec/max(w.WallSec, 1e-9)*100))
	}
	return strings.Join(parts, ", ")
}

// coreReport writes the core types section (crdserver ÷ kube-apiserver)
// and returns its failures.
func coreReport(dir string, p func(string, ...any)) (fails []string) {
	c, k := loadCoreSide(dir, "crdserver"), loadCoreSide(dir, "kube")
	if c.res == nil && k.res == nil {
		return nil
	}
	var n, lists, leases, conc int
	var period, duration, idle float64
	for _, s := range []coreSide{c, k} {
		if s.res == nil {
			continue
		}
		if ph := s.res.phase("configmap-create"); ph != nil && n == 0 {
			n, lists = ph.Requests, len(s.res.Lists)
		}
		if lr := s.res.Lease; lr != nil && leases == 0 {
			leases, period, duration = lr.Leases, lr.PeriodSec, lr.DurationSec
			if lr.Idle != nil {
				idle = lr.Idle.WallSec
			}
		}
		if ph := s.res.phase("lease-create"); ph != nil && conc == 0 {
			conc = ph.Concurrency
		}
	}
	cmBytes, cmData := 0, 0
	if s := c.res; s != nil {
		cmBytes, cmData = s.ConfigMapBytes, s.ConfigMapData
	} else {
		cmBytes, cmData = k.res.ConfigMapBytes, k.res.ConfigMapData
	}

	p("## Core types\n\n")
	p("Built-in types against the real Kubernetes API server: kube-apiserver v1.37.2 with its etcd v3.7.3 and kube-controller-manager "+
		"(`start-kube.sh` of the reference). Same client for both (`crdbench core`: HTTPS + HTTP/2, the admin client certificate, JSON), "+
		"each in a namespace it creates. ConfigMaps: %s sequential creates (10 keys, %d bytes of data, a %d-byte body), "+
		"the same %s sequential gets, then %d plain GETs of the collection (no limit; it also holds the namespace's `kube-root-ca.crt`). "+
		"Leases: %s, each renewed every %.0f s for %.0f s, the renewals spread evenly over the period; a renewal is what client-go's "+
		"leader election does with a `LeaseLock` it holds: a PUT of the lease it got back from its last write (that resourceVersion) "+
		"with `spec.renewTime` and `spec.holderIdentity` set, and only if that fails a GET and a PUT. "+
		"Server CPU is utime + stime of `/proc/PID/stat` before and after (10 ms ticks): crdserver's one process, kube-apiserver + etcd "+
		"for Kubernetes (its controller manager apart, not counted). Ratios are crdserver ÷ kube-apiserver.\n\n",
		commas(n), cmData, cmBytes, commas(n), lists, commas(leases), period, duration)
	t := newTable("metric", "crdserver", "kube-apiserver (+ etcd)", "ratio")
	row := func(metric string, f func(coreSide) val) { t.cmp(metric, f(c), f(k), coreRatio) }
	text := func(metric string, f func(coreSide) string) { t.row(metric, f(c), f(k), "–") }
	// noRatio is a figure whose ratio means nothing (counts, fixed rates).
	noRatio := func(metric string, f func(coreSide) val) { t.row(metric, f(c), f(k), "–") }
	ph := func(name string, f func(*corePhase) float64, prec int, unit string) func(coreSide) val {
		return func(s coreSide) val {
			return s.phaseVal(name, func(p *corePhase) (float64, bool) { return f(p), true }, prec, unit)
		}
	}
	cpuPer := func(name string) func(coreSide) val {
		return func(s coreSide) val {
			return s.phaseVal(name, func(p *corePhase) (float64, bool) {
				if !cpuOK(p.CPU) || p.Requests == 0 {
					return 0, false
				}
				return p.CPU.TotalSec * 1000 / float64(p.Requests), true
			}, 3, " ms")
		}
	}
	for _, x := range []struct{ name, what string }{{"configmap-create", "ConfigMap creates"}, {"configmap-get", "ConfigMap gets"}} {
		row(fmt.Sprintf("%s sequential %s: req/s", commas(n), x.what), ph(x.name, func(p *corePhase) float64 { return p.PerSecond }, 1, ""))
		row("… p50", ph(x.name, func(p *corePhase) float64 { return p.P50Ms }, 2, " ms"))
		row("… p99", ph(x.name, func(p *corePhase) float64 { return p.P99Ms }, 2, " ms"))
		row("… server CPU time per request", cpuPer(x.name))
	}
	row(fmt.Sprintf("list of the %s ConfigMaps (plain GET, no limit): median of %d", commas(n), lists),
		func(s coreSide) val {
			return s.listVal(func(r *coreResult) float64 { return r.ListMedianMs }, 1, " ms")
		})
	row("… min", func(s coreSide) val { return s.listVal(func(r *coreResult) float64 { return r.ListMinMs }, 1, " ms") })
	row("… max", func(s coreSide) val { return s.listVal(func(r *coreResult) float64 { return r.ListMaxMs }, 1, " ms") })
	noRatio("… items returned", func(s coreSide) val {
		return s.listVal(func(r *coreResult) float64 { return float64(r.ListItems) }, 0, "")
	})
	row("… bytes per item", func(s coreSide) val {
		return s.listVal(func(r *coreResult) float64 { return float64(r.ListBytes) / float64(max(1, r.ListItems)) }, 0, " B")
	})
	text("created ConfigMaps carry `metadata.managedFields`", func(s coreSide) string {
		if s.res == nil {
			return s.why
		}
		if s.res.Sample == "" {
			return "not measured"
		}
		return map[bool]string{true: "yes", false: "no"}[s.res.ManagedFields]
	})

	lease := func(f func(*leaseResult) float64, prec int, unit string) func(coreSide) val {
		return func(s coreSide) val {
			return s.leaseVal(func(lr *leaseResult) (float64, bool) { return f(lr), true }, prec, unit)
		}
	}
	text(fmt.Sprintf("%s Leases renewed every %.0f s for %.0f s: renewals done / scheduled", commas(leases), period, duration), func(s coreSide) string {
		if s.res == nil {
			return s.why
		}
		lr := s.res.Lease
		if lr == nil || lr.TicksPerLease == 0 {
			if lr != nil && lr.Aborted != "" {
				return "**not run**: " + lr.Aborted
			}
			return "not reached"
		}
		t := fmt.Sprintf("%s / %s", commas(lr.OK), commas(lr.Scheduled))
		if lr.Aborted != "" {
			t += " (**aborted**: " + lr.Aborted + ")"
		}
		return t
	})
	noRatio("… renewals per second", lease(func(lr *leaseResult) float64 { return lr.Latency.PerSecond }, 1, ""))
	row("… renewal latency p50", lease(func(lr *leaseResult) float64 { return lr.Latency.P50Ms }, 2, " ms"))
	row("… renewal latency p99", lease(func(lr *leaseResult) float64 { return lr.Latency.P99Ms }, 2, " ms"))
	row("… renewal latency max", lease(func(lr *leaseResult) float64 { return lr.Latency.MaxMs }, 2, " ms"))
	noRatio("… **failed renewals**", lease(func(lr *leaseResult) float64 { return float64(lr.Failed) }, 0, ""))
	noRatio("… fast path refused (the PUT with the last resourceVersion failed; GET + PUT instead)", lease(func(lr *leaseResult) float64 { return float64(lr.FastPathRefused) }, 0, ""))
	noRatio("… renewals skipped (the lease's previous renewal still running a period later)", lease(func(lr *leaseResult) float64 { return float64(lr.Missed) }, 0, ""))
	noRatio("… renewals started behind schedule, p99 (crdbench's own delay, or the same lease's previous renewal still running at its next tick)",
		lease(func(lr *leaseResult) float64 { return lr.LagP99Ms }, 2, " ms"))
	cpuLease := func(f func(lr *leaseResult) float64, prec int, unit string) func(coreSide) val {
		return func(s coreSide) val {
			return s.leaseVal(func(lr *leaseResult) (float64, bool) {
				if !cpuOK(lr.CPU) {
					return 0, false
				}
				return f(lr), true
			}, prec, unit)
		}
	}
	row("… **server CPU time** over the renewals", cpuLease(func(lr *leaseResult) float64 { return lr.CPU.TotalSec }, 2, " s"))
	row("… server CPU, % of one core", cpuLease(func(lr *leaseResult) float64 { return lr.CPU.CorePct }, 1, "%"))
	row("… server CPU time per renewal", cpuLease(func(lr *leaseResult) float64 { return lr.CPU.TotalSec * 1000 / float64(max(1, lr.OK+lr.Failed)) }, 3, " ms"))
	row(fmt.Sprintf("server CPU while idle just before (%.0f s, leases and ConfigMaps stored), %% of one core", idle), func(s coreSide) val {
		return s.leaseVal(func(lr *leaseResult) (float64, bool) {
			if !cpuOK(lr.Idle) {
				return 0, false
			}
			return lr.Idle.CorePct, true
		}, 1, "%")
	})
	row("… renewals' CPU above that idle rate, % of one core", func(s coreSide) val {
		return s.leaseVal(func(lr *leaseResult) (float64, bool) {
			if !cpuOK(lr.CPU) || !cpuOK(lr.Idle) {
				return 0, false
			}
			return lr.CPU.CorePct - lr.Idle.CorePct, true
		}, 1, "%")
	})
	text("… CPU over the renewals by process", func(s coreSide) string {
		if s.res == nil || s.res.Lease == nil || s.res.Lease.CPU == nil {
			return "not measured"
		}
		return procList(s.res.Lease.CPU, true)
	})
	row("RSS at the end of the renewals (kube: apiserver + etcd)", func(s coreSide) val {
		return s.leaseVal(func(lr *leaseResult) (float64, bool) { return lr.RSSEndMiB, len(lr.RSSEnd) > 0 }, 1, " MiB")
	})
	text("… by process", func(s coreSide) string {
		if s.res == nil || s.res.Lease == nil || len(s.res.Lease.RSSEnd) == 0 {
			return "not measured"
		}
		counted := map[int]bool{}
		if w := s.res.Lease.CPU; w != nil {
			for _, pc := range w.Procs {
				counted[pc.PID] = pc.Counted
			}
		}
		var parts []string
		for _, m := range s.res.Lease.RSSEnd {
			t := fmt.Sprintf("%s %.1f MiB", m.Name, m.VMRSSMiB)
			if m.Error != "" {
				t = m.Name + ": " + m.Error
			}
			if c, ok := counted[m.PID]; ok && !c {
				t += " (not counted)"
			}
			parts = append(parts, t)
		}
		return strings.Join(parts, ", ")
	})
	// Processes recorded but not counted (kube-controller-manager).
	if k.res != nil && k.res.Lease != nil && k.res.Lease.CPU != nil {
		if side := procList(k.res.Lease.CPU, false); side != "" {
			t.row("(not counted) Kubernetes' other processes over the renewals", "(crdserver's controllers run in its one process)", side, "–")
		}
	}
	row(fmt.Sprintf("(setup) %s Lease creates with %d workers: req/s", commas(leases), conc), ph("lease-create", func(p *corePhase) float64 { return p.PerSecond }, 1, ""))
	p("%s\n", t)

	for _, x := range []struct {
		name string
		s    coreSide
	}{{"crdserver", c}, {"kube-apiserver", k}} {
		if x.s.res == nil {
			continue
		}
		if x.s.res.Error != "" {
			fails = append(fails, fmt.Sprintf("- %s core types: %s\n", x.name, x.s.res.Error))
		}
		fails = append(fails, failureLines(x.name+" core types,", x.s.res.Failures)...)
		if cl := x.s.res.Cleanup; cl != "" && !strings.Contains(cl, "gone after") {
			fails = append(fails, fmt.Sprintf("- %s core types, cleanup: %s\n", x.name, cl))
		}
	}
	return fails
}
