package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestParseProcStat(t *testing.T) {
	// Fields 3..: state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt cmajflt utime stime cutime cstime ...
	rest := "S 1 4575 4575 0 -1 4194560 9731 0 12 0 1234 567 8 9 20 0 14 0 123456 2000000000 20000 18446744073709551615"
	for _, tc := range []struct {
		name, line   string
		utime, stime uint64
		bad          bool
	}{
		{name: "plain", line: "4575 (crdserver) " + rest, utime: 1234, stime: 567},
		{name: "spaces and parens in comm", line: "42 (a) b (c)) " + rest + "\n", utime: 1234, stime: 567},
		{name: "empty comm", line: "42 () " + rest, utime: 1234, stime: 567},
		{name: "no paren", line: "42 crdserver " + rest, bad: true},
		{name: "too short", line: "42 (x) S 1 2 3 4 5 6 7 8 9 10 11", bad: true},
		{name: "not a number", line: "42 (x) S 1 2 3 4 5 6 7 8 9 10 x 12 13", bad: true},
	} {
		u, s, err := parseProcStat([]byte(tc.line))
		if (err != nil) != tc.bad {
			t.Errorf("%s: error %v, want error %v", tc.name, err, tc.bad)
			continue
		}
		if !tc.bad && (u != tc.utime || s != tc.stime) {
			t.Errorf("%s: utime %d stime %d, want %d %d", tc.name, u, s, tc.utime, tc.stime)
		}
	}
	if b, err := os.ReadFile("/proc/self/stat"); err == nil {
		if _, _, err := parseProcStat(b); err != nil {
			t.Errorf("/proc/self/stat %q: %v", b, err)
		}
	}
}

func TestCPUBetween(t *testing.T) {
	t0 := time.Unix(1000, 0)
	pids := []pidSpec{{"kube-apiserver", 10, true}, {"etcd", 11, true}, {"kcm", 12, false}}
	a := cpuSnap{at: t0, ticks: []uint64{1000, 500, 100}, errs: []string{"", "", ""}}
	b := cpuSnap{at: t0.Add(30 * time.Second), ticks: []uint64{1600, 650, 400}, errs: []string{"", "", ""}}
	m := cpuMeter(pids)
	w := m.between(a, b)
	if w.WallSec != 30 || w.TotalSec != 7.5 || w.Error != "" {
		t.Fatalf("window %+v: want 30 s wall, 7.5 s CPU (kcm not counted)", w)
	}
	if w.CorePct != 25 {
		t.Errorf("CorePct %v, want 25", w.CorePct)
	}
	if w.Procs[2].CPUSec != 3 || w.Procs[2].Counted {
		t.Errorf("side process %+v, want 3 s, not counted", w.Procs[2])
	}

	// A counted process that vanished, or whose ticks went down, makes the window's Error.
	b.errs[1] = "open /proc/11/stat: no such file or directory"
	if w := m.between(a, b); !strings.Contains(w.Error, "etcd") || w.TotalSec != 6 {
		t.Errorf("vanished etcd: %+v", w)
	}
	b.errs[1] = ""
	b.ticks[0] = 10
	if w := m.between(a, b); !strings.Contains(w.Error, "went down") {
		t.Errorf("ticks down: %+v", w)
	}
	// A side process that vanished is only noted on its own line.
	b.ticks[0] = 1600
	b.errs[2] = "gone"
	if w := m.between(a, b); w.Error != "" || w.Procs[2].Error == "" {
		t.Errorf("vanished side process: %+v", w)
	}
	// No wall time: no percentage.
	if w := m.between(a, a); w.CorePct != 0 || math.IsNaN(w.CorePct) {
		t.Errorf("zero wall: %+v", w)
	}
}

func TestTickPlan(t *testing.T) {
	ticks, off := tickPlan(1000, 2*time.Second, 30*time.Second)
	if ticks != 15 {
		t.Errorf("ticks %d, want 15", ticks)
	}
	if off(0) != 0 || off(1) != 2*time.Millisecond || off(500) != time.Second || off(999) != 1998*time.Millisecond {
		t.Errorf("offsets %v %v %v %v, want 0 2ms 1s 1.998s", off(0), off(1), off(500), off(999))
	}
	if ticks, _ := tickPlan(3, 2*time.Second, 3*time.Second); ticks != 1 {
		t.Errorf("3s / 2s: ticks %d, want 1", ticks)
	}
	if ticks, off := tickPlan(3, time.Second, 500*time.Millisecond); ticks != 1 || off(2) != 666666666 {
		t.Errorf("duration below the period: ticks %d, off(2) %v", ticks, off(2))
	}
}

func TestRenewedLease(t *testing.T) {
	last := `{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"l","namespace":"n","resourceVersion":"41",` +
		`"managedFields":[{"manager":"crdbench"}]},"spec":{"holderIdentity":"old","leaseDurationSeconds":15,` +
		`"acquireTime":"2025-01-01T00:00:00.000000Z","renewTime":"2025-01-01T00:00:00.000000Z","leaseTransitions":3}}`
	now := time.Date(2026, 3, 4, 5, 6, 7, 891234567, time.FixedZone("x", 3600))
	b, err := renewedLease([]byte(last), "me", now)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Metadata struct {
			ResourceVersion string           `json:"resourceVersion"`
			ManagedFields   []map[string]any `json:"managedFields"`
		} `json:"metadata"`
		Spec map[string]any `json:"spec"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.Metadata.ResourceVersion != "41" || len(got.Metadata.ManagedFields) != 1 {
		t.Errorf("metadata not kept: %s", b)
	}
	want := map[string]any{"holderIdentity": "me", "leaseDurationSeconds": 15.0, "acquireTime": "2025-01-01T00:00:00.000000Z",
		"renewTime": "2026-03-04T04:06:07.891234Z", "leaseTransitions": 3.0}
	if fmt.Sprint(got.Spec) != fmt.Sprint(want) {
		t.Errorf("spec %v, want %v", got.Spec, want)
	}
	if _, err := renewedLease([]byte("not json"), "me", now); err == nil {
		t.Error("no error for a body that is not JSON")
	}
	b, err = renewedLease([]byte(`{"metadata":{"name":"l"}}`), "me", now)
	if err != nil || !strings.Contains(string(b), `"spec":{"holderIdentity":"me","renewTime":"2026-03-04T04:06:07.891234Z"}`) {
		t.Errorf("no spec: %s %v", b, err)
	}
}

func TestBodies(t *testing.T) {
	b, data := configMapBody("cm-00007", 7)
	if data != 200 {
		t.Errorf("ConfigMap data %d bytes, want 200", data)
	}
	var cm struct {
		Kind     string `json:"kind"`
		Metadata struct{ Name string }
		Data     map[string]string `json:"data"`
	}
	if err := json.Unmarshal(b, &cm); err != nil || cm.Kind != "ConfigMap" || cm.Metadata.Name != "cm-00007" || len(cm.Data) != 10 {
		t.Errorf("ConfigMap body %s: %v", b, err)
	}
	lb := leaseBody("lease-00001", "h", time.Unix(0, 0))
	if !strings.Contains(string(lb), `"renewTime":"1970-01-01T00:00:00.000000Z"`) || !strings.Contains(string(lb), `"kind":"Lease"`) {
		t.Errorf("lease body %s", lb)
	}
}

func TestStatusKey(t *testing.T) {
	if a, b, c := statusKey(409, nil), statusKey(0, errors.New("timeout")), statusKey(200, errors.New("body cut")); a != "409" || b != "error" || c != "error" {
		t.Errorf("409, no answer, a cut body: %q %q %q", a, b, c)
	}
}

// fakeLeases serves GET and PUT of leases with resourceVersions, as an API
// server does: a PUT whose resourceVersion is not the stored one is a 409.
type fakeLeases struct {
	mu         sync.Mutex
	rv         map[string]int
	gets, puts int
	fail       bool // answer everything with 500
}

func (f *fakeLeases) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	name := r.URL.Path[strings.LastIndexByte(r.URL.Path, '/')+1:]
	if f.fail {
		http.Error(w, "down", http.StatusInternalServerError)
		return
	}
	obj := func() []byte {
		return []byte(fmt.Sprintf(`{"kind":"Lease","metadata":{"name":%q,"resourceVersion":"%d"},"spec":{"holderIdentity":"h"}}`, name, f.rv[name]))
	}
	switch r.Method {
	case http.MethodGet:
		f.gets++
		_, _ = w.Write(obj())
	case http.MethodPut:
		f.puts++
		var body struct {
			Metadata struct{ ResourceVersion string } `json:"metadata"`
			Spec     struct{ RenewTime string }       `json:"spec"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.Spec.RenewTime == "" {
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		if body.Metadata.ResourceVersion != strconv.Itoa(f.rv[name]) {
			http.Error(w, "conflict", http.StatusConflict)
			return
		}
		f.rv[name]++
		_, _ = w.Write(obj())
	default:
		http.Error(w, "no", http.StatusMethodNotAllowed)
	}
}

func TestRenewLeases(t *testing.T) {
	const leases = 4
	name := func(i int) string { return fmt.Sprintf("lease-%d", i) }
	holder := func(int) string { return "me" }
	f := &fakeLeases{rv: map[string]int{}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	hc, err := newClient(u, tlsFlags{}, leases)
	if err != nil {
		t.Fatal(err)
	}
	c := &client{hc: hc, base: srv.URL}
	coll := srv.URL + "/apis/coordination.k8s.io/v1/namespaces/ns/leases"
	last := make([][]byte, leases)
	for i := range last {
		f.rv[name(i)] = 1
		last[i] = []byte(fmt.Sprintf(`{"metadata":{"name":%q,"resourceVersion":"1"},"spec":{}}`, name(i)))
	}
	// Someone else wrote lease 2: its first fast-path PUT conflicts.
	f.rv[name(2)] = 5

	lr := &leaseResult{Leases: leases}
	renewLeases(c, lr, last, coll, name, holder, 200*time.Millisecond, 600*time.Millisecond, 5*time.Second, nil)
	if lr.TicksPerLease != 3 || lr.Scheduled != 12 {
		t.Errorf("ticks %d scheduled %d, want 3 and 12", lr.TicksPerLease, lr.Scheduled)
	}
	if lr.Failed != 0 || lr.OK+lr.Missed != lr.Scheduled || lr.Aborted != "" {
		t.Errorf("ok %d failed %d missed %d aborted %q (%v), want all renewed", lr.OK, lr.Failed, lr.Missed, lr.Aborted, lr.Latency.FirstError)
	}
	if lr.FastPathRefused != 1 || lr.FastStatuses["409"] != 1 || f.gets != 1 {
		t.Errorf("fast path refused %d %v, GETs %d; want one 409 and one GET", lr.FastPathRefused, lr.FastStatuses, f.gets)
	}
	if f.rv[name(2)] != 5+lr.OK/leases || f.rv[name(0)] != 1+lr.OK/leases {
		t.Errorf("resourceVersions %v after %d renewals", f.rv, lr.OK)
	}
	if lr.Latency.Requests != lr.OK || lr.PutBodyBytes == 0 {
		t.Errorf("latency over %d renewals, PUT body %d bytes", lr.Latency.Requests, lr.PutBodyBytes)
	}

	// A server that fails everything: the run stops after the first 10 failures.
	f.fail = true
	lr = &leaseResult{Leases: leases}
	renewLeases(c, lr, last, coll, name, holder, 200*time.Millisecond, 2*time.Second, 5*time.Second, nil)
	if lr.OK != 0 || lr.Failed < 10 || lr.Failed >= lr.Scheduled || !strings.Contains(lr.Aborted, "first 10") {
		t.Errorf("failing server: ok %d failed %d of %d, aborted %q", lr.OK, lr.Failed, lr.Scheduled, lr.Aborted)
	}
	if lr.FailedStatuses["GET 500"] != lr.Failed || lr.Latency.FirstError == nil || lr.Latency.FirstError.Status != 500 {
		t.Errorf("failing server: statuses %v, first error %+v", lr.FailedStatuses, lr.Latency.FirstError)
	}
}

func TestCoreReport(t *testing.T) {
	dir := t.TempDir()
	w := func(procs ...cpuProc) *cpuWindow {
		cw := &cpuWindow{WallSec: 30, Procs: procs}
		for _, p := range procs {
			if p.Counted {
				cw.TotalSec += p.CPUSec
			}
		}
		cw.CorePct = cw.TotalSec / cw.WallSec * 100
		return cw
	}
	side := func(name string, create float64, lr *leaseResult) *coreResult {
		return &coreResult{Name: name, ConfigMapBytes: 368, ConfigMapData: 200,
			Phases: []corePhase{
				{phase: phase{Name: "configmap-create", Requests: 1000, PerSecond: create, P50Ms: 1, P99Ms: 2}, CPU: &cpuWindow{TotalSec: 1}},
				{phase: phase{Name: "configmap-get", Requests: 1000, PerSecond: 2 * create, P50Ms: 0.5, P99Ms: 1}},
				{phase: phase{Name: "lease-create", Requests: 1000, Concurrency: 8, PerSecond: 900}},
			},
			Lists: []listSample{{Ms: 10, Items: 1001, Bytes: 800800, Status: 200}}, ListItems: 1001, ListBytes: 800800, ListMedianMs: 10,
			Sample: "{}", ManagedFields: true, Lease: lr}
	}
	c := side("crdserver", 800, &leaseResult{Leases: 1000, PeriodSec: 2, DurationSec: 30, TicksPerLease: 15, Scheduled: 15000, OK: 15000,
		Latency: phase{P50Ms: 2, P99Ms: 6}, CPU: w(cpuProc{Name: "crdserver", PID: 1, Counted: true, CPUSec: 6}),
		Idle: w(cpuProc{Name: "crdserver", PID: 1, Counted: true, CPUSec: 0.3}), RSSEnd: []procMem{{Name: "crdserver", PID: 1, VMRSSMiB: 90}}, RSSEndMiB: 90})
	k := side("kube", 400, &leaseResult{Leases: 1000, PeriodSec: 2, DurationSec: 30, TicksPerLease: 15, Scheduled: 15000, OK: 14990, Failed: 10,
		FailedStatuses: map[string]int{"PUT 409": 10}, Latency: phase{P50Ms: 400, P99Ms: 12, FirstError: &failure{Phase: "lease-renew (slow path PUT)", Status: 409}},
		CPU: w(cpuProc{Name: "kube-apiserver", PID: 2, Counted: true, CPUSec: 9}, cpuProc{Name: "etcd", PID: 3, Counted: true, CPUSec: 3},
			cpuProc{Name: "kube-controller-manager", PID: 4, CPUSec: 0.6}),
		RSSEnd:    []procMem{{Name: "kube-apiserver", PID: 2, VMRSSMiB: 300}, {Name: "etcd", PID: 3, VMRSSMiB: 60}, {Name: "kube-controller-manager", PID: 4, VMRSSMiB: 110}},
		RSSEndMiB: 360})
	k.Failures = []failure{{Phase: "lease-renew (slow path PUT)", Method: "PUT", Path: "/x", Status: 409}}
	k.Cleanup = "namespace deleted, still there (Terminating) after 2m0s"
	if err := writeJSON(filepath.Join(dir, "core-crdserver.json"), c); err != nil {
		t.Fatal(err)
	}
	if err := writeJSON(filepath.Join(dir, "core-kube.json"), k); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	fails := coreReport(dir, func(format string, a ...any) { fmt.Fprintf(&b, format, a...) })
	out := b.String()
	mustContain(t, "report", out,
		"## Core types",
		"| 1,000 sequential ConfigMap creates: req/s | 800.0 | 400.0 | 2.00× |",
		"| … server CPU time per request | 1.000 ms | 1.000 ms | 1.00× |",
		"| … server CPU time per request | not measured | not measured | – |",
		"| … items returned | 1001 | 1001 | – |",
		"| 1,000 Leases renewed every 2 s for 30 s: renewals done / scheduled | 15,000 / 15,000 | 14,990 / 15,000 | – |",
		"| … renewal latency p99 | 6.00 ms | 12.00 ms | 0.50× |",
		"| … renewal latency p50 | 2.00 ms | 400.00 ms | 0.005× |",
		"| … **failed renewals** | 0 | 10 | – |",
		"| … **server CPU time** over the renewals | 6.00 s | 12.00 s | 0.50× |",
		"| … server CPU, % of one core | 20.0% | 40.0% | 0.50× |",
		"| … renewals' CPU above that idle rate, % of one core | 19.0% | not measured | – |",
		"kube-apiserver 9.00 s (30.0%), etcd 3.00 s (10.0%) |",
		"kube-controller-manager 110.0 MiB (not counted)",
		"| (not counted) Kubernetes' other processes over the renewals | (crdserver's controllers run in its one process) | kube-controller-manager 0.60 s (2.0%) | – |",
		"| RSS at the end of the renewals (kube: apiserver + etcd) | 90.0 MiB | 360.0 MiB | 0.25× |",
	)
	if len(fails) != 2 || !strings.Contains(fails[0], "slow path PUT") || !strings.Contains(fails[1], "Terminating") {
		t.Errorf("failures %q", fails)
	}

	// Nothing measured: no section.
	b.Reset()
	if f := coreReport(t.TempDir(), func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }); f != nil || b.Len() != 0 {
		t.Errorf("empty dir: %q %q", b.String(), f)
	}
}
