package main

// crdbench core: built-in types against one server (crdserver or
// kube-apiserver), over the same HTTPS/HTTP2 client as load.
//
//   - ConfigMaps: n sequential creates (10 keys, 200 bytes of data) in a
//     namespace it creates, n sequential gets of them, then -lists plain GETs
//     of the whole collection (no limit).
//   - Lease renewals: -leases Leases, each renewed every -lease-period for
//     -lease-duration, their renewals spread evenly over the period. A
//     renewal is what client-go's leader election does with a
//     resourcelock.LeaseLock while it leads: a PUT of the lease it got back
//     from its last write (so with that resourceVersion) with spec.renewTime
//     and spec.holderIdentity set; if that PUT fails, a GET and a PUT of what
//     the GET returned (tryAcquireOrRenew's slow path).
//
// The server's CPU time (utime+stime of /proc/PID/stat, for every -pid) is
// read before and after each phase, and its VmRSS at the end of the renewals.

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// cpuProc is the CPU time one process used over a window.
type cpuProc struct {
	Name    string  `json:"name"`
	PID     int     `json:"pid"`
	Counted bool    `json:"counted"` // in TotalSec (a -pid); a -side-pid is only recorded
	CPUSec  float64 `json:"cpu_seconds"`
	Error   string  `json:"error,omitempty"`
}

// cpuWindow is the CPU time of the server's processes over a stretch of
// wall-clock time.
type cpuWindow struct {
	WallSec  float64   `json:"wall_seconds"`
	Procs    []cpuProc `json:"procs"`
	TotalSec float64   `json:"total_cpu_seconds"`         // the counted processes
	CorePct  float64   `json:"total_percent_of_one_core"` // TotalSec / WallSec × 100
	Error    string    `json:"error,omitempty"`           // a counted process could not be read
}

// pidSpec is a process whose CPU time and memory are read.
type pidSpec struct {
	name    string
	pid     int
	counted bool
}

// cpuSnap is the CPU time of each process at one instant, in clock ticks.
type cpuSnap struct {
	at    time.Time
	ticks []uint64
	errs  []string
}

// parseProcStat returns utime and stime (fields 14 and 15, in clock ticks)
// of a /proc/PID/stat line. The command name (field 2) is in parentheses
// and may itself hold spaces and parentheses, so fields are counted from
// the last ')'.
func parseProcStat(b []byte) (utime, stime uint64, err error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, errors.New("no ')' in /proc/PID/stat")
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state), so field 14 is f[11] and field 15 is f[12].
	if len(f) < 13 {
		return 0, 0, fmt.Errorf("/proc/PID/stat has %d fields after the command, want at least 13", len(f))
	}
	if utime, err = strconv.ParseUint(f[11], 10, 64); err != nil {
		return 0, 0, fmt.Errorf("utime: %w", err)
	}
	if stime, err = strconv.ParseUint(f[12], 10, 64); err != nil {
		return 0, 0, fmt.Errorf("stime: %w", err)
	}
	return utime, stime, nil
}

// atClkTck is the auxiliary vector entry holding sysconf(_SC_CLK_TCK).
const atClkTck = 17

// parseAuxvClkTck finds AT_CLKTCK in a /proc/PID/auxv of native-endian
// (type, value) word pairs of wordSize bytes.
func parseAuxvClkTck(b []byte, wordSize int) (uint64, bool) {
	word := func(p []byte) uint64 {
		if wordSize == 4 {
			return uint64(binary.NativeEndian.Uint32(p))
		}
		return binary.NativeEndian.Uint64(p)
	}
	for i := 0; i+2*wordSize <= len(b); i += 2 * wordSize {
		typ, v := word(b[i:]), word(b[i+wordSize:])
		if typ == 0 { // AT_NULL
			break
		}
		if typ == atClkTck && v > 0 {
			return v, true
		}
	}
	return 0, false
}

// clockTicks is the kernel's USER_HZ, the unit of /proc/PID/stat's times
// (100 on every Linux this runs on; read from the auxiliary vector anyway).
func clockTicks() float64 {
	if b, err := os.ReadFile("/proc/self/auxv"); err == nil {
		if v, ok := parseAuxvClkTck(b, strconv.IntSize/8); ok {
			return float64(v)
		}
	}
	return 100
}

type cpuMeter struct {
	pids []pidSpec
	hz   float64
}

func (m cpuMeter) snap() cpuSnap {
	s := cpuSnap{at: time.Now(), ticks: make([]uint64, len(m.pids)), errs: make([]string, len(m.pids))}
	for i, p := range m.pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.pid))
		if err == nil {
			var u, st uint64
			u, st, err = parseProcStat(b)
			s.ticks[i] = u + st
		}
		if err != nil {
			s.errs[i] = err.Error()
		}
	}
	return s
}

// cpuBetween is the CPU time each process used from a to b.
func cpuBetween(pids []pidSpec, a, b cpuSnap, hz float64) *cpuWindow {
	w := &cpuWindow{WallSec: b.at.Sub(a.at).Seconds()}
	for i, p := range pids {
		c := cpuProc{Name: p.name, PID: p.pid, Counted: p.counted}
		switch {
		case a.errs[i] != "":
			c.Error = "before: " + a.errs[i]
		case b.errs[i] != "":
			c.Error = "after: " + b.errs[i]
		case b.ticks[i] < a.ticks[i]:
			c.Error = "CPU time went down (another process with this PID?)"
		default:
			c.CPUSec = float64(b.ticks[i]-a.ticks[i]) / hz
		}
		if p.counted {
			if c.Error != "" && w.Error == "" {
				w.Error = fmt.Sprintf("%s (pid %d): %s", p.name, p.pid, c.Error)
			}
			w.TotalSec += c.CPUSec
		}
		w.Procs = append(w.Procs, c)
	}
	if w.WallSec > 0 {
		w.CorePct = w.TotalSec / w.WallSec * 100
	}
	return w
}

// corePhase is one phase with the server's CPU time over it.
type corePhase struct {
	phase
	CPU *cpuWindow `json:"cpu,omitempty"`
}

// leaseResult is the lease renewal run.
type leaseResult struct {
	Leases          int            `json:"leases"`
	PeriodSec       float64        `json:"period_seconds"`
	DurationSec     float64        `json:"duration_seconds"`
	TicksPerLease   int            `json:"ticks_per_lease"`
	Scheduled       int            `json:"renewals_scheduled"`
	OK              int            `json:"renewals_ok"`
	Failed          int            `json:"renewals_failed"`
	FastPathRefused int            `json:"fast_path_refused"` // the PUT with the last resourceVersion failed: GET + PUT
	Missed          int            `json:"ticks_missed"`      // the lease's previous renewal still ran a period later
	FailedStatuses  map[string]int `json:"failed_statuses,omitempty"`
	FastStatuses    map[string]int `json:"fast_path_statuses,omitempty"`
	PutBodyBytes    int            `json:"put_body_bytes"`
	Latency         phase          `json:"latency"` // of every renewal done, GET + PUT included
	LagP50Ms        float64        `json:"start_lag_p50_ms"`
	LagP99Ms        float64        `json:"start_lag_p99_ms"`
	LagMaxMs        float64        `json:"start_lag_max_ms"`
	Idle            *cpuWindow     `json:"idle_cpu,omitempty"`
	CPU             *cpuWindow     `json:"cpu,omitempty"`
	RSSEnd          []procMem      `json:"rss_end,omitempty"`
	RSSEndMiB       float64        `json:"rss_end_counted_mib,omitempty"`
	Aborted         string         `json:"aborted,omitempty"`
}

type coreResult struct {
	Server         string       `json:"server"`
	Name           string       `json:"name"`
	Protocol       string       `json:"protocol"`
	ClientCert     bool         `json:"client_cert"`
	Namespace      string       `json:"namespace"`
	ClockTicks     float64      `json:"clock_ticks_per_second"`
	ConfigMapBytes int          `json:"configmap_body_bytes"`
	ConfigMapData  int          `json:"configmap_data_bytes"`
	Phases         []corePhase  `json:"phases"`
	Lists          []listSample `json:"lists"`
	ListCPU        *cpuWindow   `json:"lists_cpu,omitempty"`
	ListItems      int          `json:"list_items"`
	ListBytes      int          `json:"list_bytes"`
	ListMedianMs   float64      `json:"list_median_ms"`
	ListMinMs      float64      `json:"list_min_ms"`
	ListMaxMs      float64      `json:"list_max_ms"`
	Sample         string       `json:"first_created_configmap,omitempty"`
	ManagedFields  bool         `json:"configmaps_have_managed_fields"`
	Lease          *leaseResult `json:"lease,omitempty"`
	Cleanup        string       `json:"cleanup,omitempty"`
	Failures       []failure    `json:"failures,omitempty"`
	Error          string       `json:"error,omitempty"`
}

func (r *coreResult) phase(name string) *corePhase {
	return find(r.Phases, func(x *corePhase) bool { return x.Name == name })
}

// configMapBody is a ConfigMap of 10 keys and 200 bytes of data.
func configMapBody(name string, i int) ([]byte, int) {
	data := map[string]string{}
	size := 0
	for k := 0; k < 10; k++ {
		key, v := fmt.Sprintf("key-%d", k), fmt.Sprintf("value-%d-%07d", k, i)
		data[key] = v
		size += len(key) + len(v)
	}
	b, _ := json.Marshal(map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": name, "labels": map[string]string{"bench": "crdbench"}},
		"data":     data,
	})
	return b, size
}

// microTime is metav1.MicroTime's JSON form.
func microTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000000Z07:00") }

// leaseBody is the Lease client-go's LeaseLock.Create makes for a new holder.
func leaseBody(name, holder string, now time.Time) []byte {
	b, _ := json.Marshal(map[string]any{
		"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{
			"holderIdentity": holder, "leaseDurationSeconds": 15,
			"acquireTime": microTime(now), "renewTime": microTime(now), "leaseTransitions": 0,
		},
	})
	return b
}

// renewedLease is what LeaseLock.Update sends: the lease as last read from
// the server (metadata, resourceVersion included) with the holder's record
// written to its spec (renewTime now; holderIdentity, the rest kept).
func renewedLease(last []byte, holder string, now time.Time) ([]byte, error) {
	var obj map[string]any
	if err := json.Unmarshal(last, &obj); err != nil {
		return nil, err
	}
	spec, _ := obj["spec"].(map[string]any)
	if spec == nil {
		spec = map[string]any{}
		obj["spec"] = spec
	}
	spec["holderIdentity"] = holder
	spec["renewTime"] = microTime(now)
	return json.Marshal(obj)
}

// tickPlan is when the ticks of a renewal run are due: lease i's k-th
// renewal at start + offset(i) + k×period, offsets spread evenly over one
// period; ticks per lease = duration / period (at least 1).
func tickPlan(leases int, period, duration time.Duration) (ticks int, offset func(i int) time.Duration) {
	ticks = max(1, int(duration/period))
	return ticks, func(i int) time.Duration { return time.Duration(int64(period) * int64(i) / int64(leases)) }
}

// statusKey names a failed answer for the counters: its HTTP status, or
// "error" when there was none.
func statusKey(code int, err error) string {
	if err != nil || code == 0 {
		return "error"
	}
	return strconv.Itoa(code)
}

func runCore(args []string) error {
	fs := flag.NewFlagSet("core", flag.ExitOnError)
	var t tlsFlags
	t.register(fs)
	var (
		server      = fs.String("server", "", "API server base URL, https:// or http:// (loopback only)")
		name        = fs.String("name", "server", "name of the server in the results")
		namespace   = fs.String("namespace", "crdbench-core", "namespace to create for the objects (must not exist)")
		n           = fs.Int("n", 1000, "ConfigMaps: sequential creates, then sequential gets of the same")
		lists       = fs.Int("lists", 5, "measured GETs of the whole ConfigMap collection; the median is reported")
		leases      = fs.Int("leases", 1000, "Leases renewed (0 skips the renewals)")
		period      = fs.Duration("lease-period", 2*time.Second, "each lease is renewed this often")
		duration    = fs.Duration("lease-duration", 30*time.Second, "how long the renewals run")
		renewTO     = fs.Duration("renew-timeout", 10*time.Second, "time limit of one renewal (client-go's default RenewDeadline)")
		idle        = fs.Duration("idle", 5*time.Second, "before the renewals, read the server's CPU time over this idle pause (0: skip)")
		conc        = fs.Int("concurrency", 8, "workers creating the leases (setup)")
		phaseLimit  = fs.Duration("phase-timeout", 5*time.Minute, "time limit of each ConfigMap or setup phase")
		cleanup     = fs.Bool("cleanup", false, "delete the namespace afterwards and wait (at most -cleanup-wait) until it is gone")
		cleanupWait = fs.Duration("cleanup-wait", 2*time.Minute, "how long to wait for the namespace to go")
		jsonOut     = fs.String("json", "", "write the results as JSON to this file")
		pids, side  namedPIDs
	)
	fs.Var(&pids, "pid", "name=PID of a server process whose CPU time and VmRSS are counted (repeatable; kube: kube-apiserver and etcd)")
	fs.Var(&side, "side-pid", "name=PID of another process whose CPU time and VmRSS are recorded but not counted (repeatable)")
	_ = fs.Parse(args)
	if err := checkFlags([]bound{
		{*n < 1 || *n > 100000, "1 <= -n <= 100000"},
		{*lists < 1 || *lists > 100, "1 <= -lists <= 100"},
		{*leases < 0 || *leases > 20000, "0 <= -leases <= 20000"},
		{*period < 100*time.Millisecond || *period > time.Minute, "100ms <= -lease-period <= 1m"},
		{*duration < *period || *duration > 10*time.Minute, "-lease-period <= -lease-duration <= 10m"},
		{*renewTO < 100*time.Millisecond || *renewTO > time.Minute, "100ms <= -renew-timeout <= 1m"},
		{*idle < 0 || *idle > time.Minute, "0 <= -idle <= 1m"},
		{*conc < 1 || *conc > 64, "1 <= -concurrency <= 64"},
		{*phaseLimit < time.Second || *phaseLimit > time.Hour, "1s <= -phase-timeout <= 1h"},
		{*cleanupWait < 0 || *cleanupWait > 10*time.Minute, "0 <= -cleanup-wait <= 10m"},
		{*namespace == "", "-namespace"},
	}); err != nil {
		return err
	}
	c, err := connect(*server, t, *conc)
	if err != nil {
		return err
	}
	base := c.base
	var procs []pidSpec
	for _, p := range pids {
		procs = append(procs, pidSpec{p.name, p.pid, true})
	}
	for _, p := range side {
		procs = append(procs, pidSpec{p.name, p.pid, false})
	}
	meter := cpuMeter{pids: procs, hz: clockTicks()}
	window := func(a cpuSnap) *cpuWindow {
		if len(procs) == 0 {
			return nil
		}
		return cpuBetween(procs, a, meter.snap(), meter.hz)
	}

	ns := *namespace
	nsURL := base + "/api/v1/namespaces/" + ns
	cmColl := nsURL + "/configmaps"
	leaseColl := base + "/apis/coordination.k8s.io/v1/namespaces/" + ns + "/leases"
	res := &coreResult{Server: base, Name: *name, ClientCert: t.cert != "", Namespace: ns, ClockTicks: meter.hz}
	cmName := func(i int) string { return "cm-" + strconv.Itoa(100000 + i)[1:] }
	leaseName := func(i int) string { return "lease-" + strconv.Itoa(100000 + i)[1:] }
	holder := func(i int) string { return "crdbench-holder-" + strconv.Itoa(100000 + i)[1:] }
	b0, dataBytes := configMapBody(cmName(0), 0)
	res.ConfigMapBytes, res.ConfigMapData = len(b0), dataBytes
	nsCreated := false

	finish := func(err error) error {
		if nsCreated && *cleanup {
			res.Cleanup = c.deleteAndWait("namespace", nsURL, *cleanupWait)
			log.Printf("cleanup: %s", res.Cleanup)
		}
		res.Protocol = c.protocol()
		for _, p := range res.Phases {
			res.Failures = append(res.Failures, firstError(p.phase)...)
		}
		return done(*jsonOut, res, &res.Error, res.Failures, err)
	}

	// The namespace: it must not exist (it could be someone else's).
	if f, err := c.create(context.Background(), "namespace", "namespace "+ns, base+"/api/v1/namespaces", namespaceBody(ns)); err != nil {
		res.Failures = append(res.Failures, *f)
		return finish(err)
	}
	nsCreated = true

	// ConfigMaps.
	measured := func(name string, nreq, workers int, req func(i int) request, after func(i int, ok bool, b []byte)) corePhase {
		s := meter.snap()
		p := corePhase{phase: c.phase(context.Background(), name, nreq, workers, *phaseLimit, req, after)}
		p.CPU = window(s)
		res.Phases = append(res.Phases, p)
		return p
	}
	log.Printf("%d sequential ConfigMap creates", *n)
	cr := measured("configmap-create", *n, 1, func(i int) request {
		b, _ := configMapBody(cmName(i), i)
		return request{http.MethodPost, cmColl, b, []int{http.StatusCreated}}
	}, func(i int, ok bool, b []byte) {
		if ok && i == 0 {
			res.Sample = truncate(b, 4000)
			var obj struct {
				Metadata struct {
					ManagedFields []json.RawMessage `json:"managedFields"`
				} `json:"metadata"`
			}
			_ = json.Unmarshal(b, &obj)
			res.ManagedFields = len(obj.Metadata.ManagedFields) > 0
		}
	})
	if cr.Aborted {
		return finish(nil)
	}
	log.Printf("%d sequential ConfigMap gets", *n)
	measured("configmap-get", *n, 1, func(i int) request {
		return request{http.MethodGet, cmColl + "/" + cmName(i), nil, []int{http.StatusOK}}
	}, nil)

	log.Printf("%d lists of the ConfigMaps", *lists)
	l := &loader{client: c, coll: cmColl}
	var ds []float64
	s := meter.snap()
	for i := 0; i < *lists; i++ {
		smp, f := l.list()
		res.Lists = append(res.Lists, smp)
		if f != nil {
			f.Phase = "configmap-list"
			res.Failures = append(res.Failures, *f)
			break
		}
		ds = append(ds, smp.Ms)
		res.ListItems, res.ListBytes = smp.Items, smp.Bytes
	}
	res.ListCPU = window(s)
	if len(ds) > 0 {
		res.ListMedianMs, res.ListMinMs, res.ListMaxMs = median(ds), slices.Min(ds), slices.Max(ds)
		if res.ListItems < cr.Requests-cr.Errors {
			res.Failures = append(res.Failures, failure{Phase: "configmap-list", Method: http.MethodGet, Path: strings.TrimPrefix(cmColl, base), Status: 200,
				Error: fmt.Sprintf("list returned %d items, want at least %d", res.ListItems, cr.Requests-cr.Errors)})
		}
	}

	if *leases == 0 {
		return finish(nil)
	}

	// Leases: created (setup), then renewed.
	lr := &leaseResult{Leases: *leases, PeriodSec: period.Seconds(), DurationSec: duration.Seconds()}
	res.Lease = lr
	last := make([][]byte, *leases) // each lease as the server last returned it
	log.Printf("%d Lease creates with %d workers (setup)", *leases, *conc)
	now := time.Now()
	setup := measured("lease-create", *leases, *conc, func(i int) request {
		return request{http.MethodPost, leaseColl, leaseBody(leaseName(i), holder(i), now), []int{http.StatusCreated}}
	}, func(i int, ok bool, b []byte) {
		if ok {
			last[i] = b
		}
	})
	if setup.Aborted || setup.Errors > 0 {
		lr.Aborted = "not all leases could be created"
		return finish(nil)
	}
	if *idle > 0 && len(procs) > 0 {
		log.Printf("idle %v (server CPU baseline)", *idle)
		s := meter.snap()
		time.Sleep(*idle)
		lr.Idle = window(s)
	}
	renewLeases(c, lr, last, leaseColl, leaseName, holder, *period, *duration, *renewTO, meter, window)
	for _, p := range procs {
		m := readMem(p.name, p.pid)
		lr.RSSEnd = append(lr.RSSEnd, m)
		if p.counted {
			lr.RSSEndMiB += m.VMRSSMiB
		}
	}
	if lr.Failed > 0 || lr.Aborted != "" {
		f := failure{Phase: "lease-renew"}
		if lr.Latency.FirstError != nil {
			f = *lr.Latency.FirstError
		}
		f.Error = strings.TrimSpace(f.Error + fmt.Sprintf(" (%d of %d renewals failed: %v)", lr.Failed, lr.OK+lr.Failed, lr.FailedStatuses))
		if lr.Aborted != "" {
			f.Error += "; aborted: " + lr.Aborted
		}
		res.Failures = append(res.Failures, f)
	}
	return finish(nil)
}

// renewLeases renews every lease each period for duration, as client-go's
// leader election renews a LeaseLock it holds, and records the latencies,
// the failures and the server's CPU time over the run.
func renewLeases(c *client, lr *leaseResult, last [][]byte, coll string, leaseName, holder func(int) string,
	period, duration, renewTO time.Duration, meter cpuMeter, window func(cpuSnap) *cpuWindow) {
	ticks, offset := tickPlan(len(last), period, duration)
	lr.TicksPerLease, lr.Scheduled = ticks, ticks*len(last)
	// Everything ends by this deadline, whatever the server does.
	ctx, cancel := context.WithTimeout(context.Background(), duration+renewTO+5*time.Second)
	defer cancel()
	var (
		mu       sync.Mutex
		lat, lag []time.Duration
		first    *failure
		aborted  atomic.Bool
	)
	lr.FailedStatuses, lr.FastStatuses = map[string]int{}, map[string]int{}
	fail := func(f *failure, key string) {
		mu.Lock()
		defer mu.Unlock()
		lr.Failed++
		lr.FailedStatuses[key]++
		if first == nil {
			first = f
		}
		if lr.OK == 0 && lr.Failed >= 10 && !aborted.Load() {
			aborted.Store(true)
			lr.Aborted = "the first 10 renewals failed"
			cancel()
		}
	}
	// renew is one renewal of lease i: the fast path (PUT of the last
	// answer), then if that fails the slow path (GET, PUT).
	renew := func(i int) {
		rctx, rcancel := context.WithTimeout(ctx, renewTO)
		defer rcancel()
		url := coll + "/" + leaseName(i)
		t0 := time.Now()
		body, err := renewedLease(last[i], holder(i), t0)
		if err != nil {
			fail(&failure{Phase: "lease-renew", Error: "previous answer: " + err.Error()}, "error")
			return
		}
		code, b, err := c.do(rctx, http.MethodPut, url, body)
		if err != nil || code != http.StatusOK {
			mu.Lock()
			lr.FastPathRefused++
			lr.FastStatuses[statusKey(code, err)]++
			mu.Unlock()
			code, b, err = c.do(rctx, http.MethodGet, url, nil)
			if err != nil || code != http.StatusOK {
				fail(c.fail("lease-renew (slow path GET)", http.MethodGet, url, code, b, err), "GET "+statusKey(code, err))
				return
			}
			if body, err = renewedLease(b, holder(i), time.Now()); err != nil {
				fail(&failure{Phase: "lease-renew", Error: "GET answer: " + err.Error()}, "error")
				return
			}
			code, b, err = c.do(rctx, http.MethodPut, url, body)
			if err != nil || code != http.StatusOK {
				fail(c.fail("lease-renew (slow path PUT)", http.MethodPut, url, code, b, err), "PUT "+statusKey(code, err))
				return
			}
		}
		d := time.Since(t0)
		last[i] = b
		mu.Lock()
		lr.OK++
		lat = append(lat, d)
		if lr.PutBodyBytes == 0 {
			lr.PutBodyBytes = len(body)
		}
		mu.Unlock()
	}

	log.Printf("renewing %d leases every %v for %v (%d renewals)", len(last), period, duration, lr.Scheduled)
	start := time.Now().Add(50 * time.Millisecond)
	s := meter.snap()
	var wg sync.WaitGroup
	for i := range last {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < ticks; k++ {
				due := start.Add(offset(i) + time.Duration(k)*period)
				if d := time.Until(due); d > 0 {
					select {
					case <-ctx.Done():
					case <-time.After(d):
					}
				}
				if ctx.Err() != nil {
					return
				}
				late := time.Since(due)
				if late >= period {
					// The previous renewal of this lease ran into this tick's
					// successor: this one is skipped.
					mu.Lock()
					lr.Missed++
					mu.Unlock()
					continue
				}
				mu.Lock()
				lag = append(lag, max(0, late))
				mu.Unlock()
				renew(i)
			}
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	lr.CPU = window(s)
	if ctx.Err() != nil && lr.Aborted == "" {
		lr.Aborted = "time limit reached: " + ctx.Err().Error()
	}
	lr.Latency = summarize("lease-renew", lat, wall)
	lr.Latency.Concurrency = len(last)
	lr.Latency.Errors = lr.Failed
	lr.Latency.Aborted = lr.Aborted != ""
	lr.Latency.FirstError = first
	slices.Sort(lag)
	lr.LagP50Ms, lr.LagP99Ms = ms(percentile(lag, 0.5)), ms(percentile(lag, 0.99))
	if len(lag) > 0 {
		lr.LagMaxMs = ms(lag[len(lag)-1])
	}
	if len(lr.FailedStatuses) == 0 {
		lr.FailedStatuses = nil
	}
	if len(lr.FastStatuses) == 0 {
		lr.FastStatuses = nil
	}
}

// coreSide is the core-types benchmark of one server (core-NAME.json).
type coreSide sideOf[coreResult]

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

// coreFigs are the rows of the core types table.
func coreFigs(n, lists, leases, conc int, period, duration, idle float64) []fig[coreSide] {
	var fs []fig[coreSide]
	add := func(metric string, r func(a, b val) string, cell func(coreSide) val) {
		fs = append(fs, fig[coreSide]{metric, cell, r})
	}
	ph := func(name string, f func(*corePhase) (float64, bool), prec int, unit string) func(coreSide) val {
		return func(s coreSide) val { return s.phaseVal(name, f, prec, unit) }
	}
	for _, x := range []struct{ name, what string }{{"configmap-create", "ConfigMap creates"}, {"configmap-get", "ConfigMap gets"}} {
		add(fmt.Sprintf("%s sequential %s: req/s", commas(n), x.what), coreRatio, ph(x.name, func(p *corePhase) (float64, bool) { return p.PerSecond, true }, 1, ""))
		add("… p50", coreRatio, ph(x.name, func(p *corePhase) (float64, bool) { return p.P50Ms, true }, 2, " ms"))
		add("… p99", coreRatio, ph(x.name, func(p *corePhase) (float64, bool) { return p.P99Ms, true }, 2, " ms"))
		add("… server CPU time per request", coreRatio, ph(x.name, func(p *corePhase) (float64, bool) {
			return orZero(p.CPU).TotalSec * 1000 / float64(max(1, p.Requests)), cpuOK(p.CPU) && p.Requests > 0
		}, 3, " ms"))
	}
	list := func(f func(*coreResult) float64, prec int, unit string) func(coreSide) val {
		return func(s coreSide) val { return s.listVal(f, prec, unit) }
	}
	add(fmt.Sprintf("list of the %s ConfigMaps (plain GET, no limit): median of %d", commas(n), lists), coreRatio, list(func(r *coreResult) float64 { return r.ListMedianMs }, 1, " ms"))
	add("… min", coreRatio, list(func(r *coreResult) float64 { return r.ListMinMs }, 1, " ms"))
	add("… max", coreRatio, list(func(r *coreResult) float64 { return r.ListMaxMs }, 1, " ms"))
	add("… items returned", nil, list(func(r *coreResult) float64 { return float64(r.ListItems) }, 0, ""))
	add("… bytes per item", coreRatio, list(func(r *coreResult) float64 { return float64(r.ListBytes) / float64(max(1, r.ListItems)) }, 0, " B"))
	add("created ConfigMaps carry `metadata.managedFields`", nil, func(s coreSide) val {
		switch {
		case s.res == nil:
			return label(s.why)
		case s.res.Sample == "":
			return label("not measured")
		}
		return label(map[bool]string{true: "yes", false: "no"}[s.res.ManagedFields])
	})

	lease := func(f func(*leaseResult) (float64, bool), prec int, unit string) func(coreSide) val {
		return func(s coreSide) val { return s.leaseVal(f, prec, unit) }
	}
	add(fmt.Sprintf("%s Leases renewed every %.0f s for %.0f s: renewals done / scheduled", commas(leases), period, duration), nil, func(s coreSide) val {
		if s.res == nil {
			return label(s.why)
		}
		lr := s.res.Lease
		if lr == nil || lr.TicksPerLease == 0 {
			if lr != nil && lr.Aborted != "" {
				return label("**not run**: " + lr.Aborted)
			}
			return label("not reached")
		}
		t := fmt.Sprintf("%s / %s", commas(lr.OK), commas(lr.Scheduled))
		if lr.Aborted != "" {
			t += " (**aborted**: " + lr.Aborted + ")"
		}
		return label(t)
	})
	for _, x := range []struct {
		metric string
		r      func(a, b val) string
		f      func(*leaseResult) float64
		prec   int
		unit   string
	}{
		{"… renewals per second", nil, func(lr *leaseResult) float64 { return lr.Latency.PerSecond }, 1, ""},
		{"… renewal latency p50", coreRatio, func(lr *leaseResult) float64 { return lr.Latency.P50Ms }, 2, " ms"},
		{"… renewal latency p99", coreRatio, func(lr *leaseResult) float64 { return lr.Latency.P99Ms }, 2, " ms"},
		{"… renewal latency max", coreRatio, func(lr *leaseResult) float64 { return lr.Latency.MaxMs }, 2, " ms"},
		{"… **failed renewals**", nil, func(lr *leaseResult) float64 { return float64(lr.Failed) }, 0, ""},
		{"… fast path refused (the PUT with the last resourceVersion failed; GET + PUT instead)", nil, func(lr *leaseResult) float64 { return float64(lr.FastPathRefused) }, 0, ""},
		{"… renewals skipped (the lease's previous renewal still running a period later)", nil, func(lr *leaseResult) float64 { return float64(lr.Missed) }, 0, ""},
		{"… renewals started behind schedule, p99 (crdbench's own delay, or the same lease's previous renewal still running at its next tick)", nil,
			func(lr *leaseResult) float64 { return lr.LagP99Ms }, 2, " ms"},
	} {
		add(x.metric, x.r, lease(func(lr *leaseResult) (float64, bool) { return x.f(lr), true }, x.prec, x.unit))
	}
	cpu := func(f func(lr *leaseResult) float64, prec int, unit string) func(coreSide) val {
		return lease(func(lr *leaseResult) (float64, bool) {
			if !cpuOK(lr.CPU) {
				return 0, false
			}
			return f(lr), true
		}, prec, unit)
	}
	add("… **server CPU time** over the renewals", coreRatio, cpu(func(lr *leaseResult) float64 { return lr.CPU.TotalSec }, 2, " s"))
	add("… server CPU, % of one core", coreRatio, cpu(func(lr *leaseResult) float64 { return lr.CPU.CorePct }, 1, "%"))
	add("… server CPU time per renewal", coreRatio, cpu(func(lr *leaseResult) float64 { return lr.CPU.TotalSec * 1000 / float64(max(1, lr.OK+lr.Failed)) }, 3, " ms"))
	add(fmt.Sprintf("server CPU while idle just before (%.0f s, leases and ConfigMaps stored), %% of one core", idle), coreRatio,
		lease(func(lr *leaseResult) (float64, bool) { return orZero(lr.Idle).CorePct, cpuOK(lr.Idle) }, 1, "%"))
	add("… renewals' CPU above that idle rate, % of one core", coreRatio, lease(func(lr *leaseResult) (float64, bool) {
		return orZero(lr.CPU).CorePct - orZero(lr.Idle).CorePct, cpuOK(lr.CPU) && cpuOK(lr.Idle)
	}, 1, "%"))
	add("… CPU over the renewals by process", nil, func(s coreSide) val {
		if s.res == nil || s.res.Lease == nil || s.res.Lease.CPU == nil {
			return label("not measured")
		}
		return label(procList(s.res.Lease.CPU, true))
	})
	add("RSS at the end of the renewals (kube: apiserver + etcd)", coreRatio, lease(func(lr *leaseResult) (float64, bool) { return lr.RSSEndMiB, len(lr.RSSEnd) > 0 }, 1, " MiB"))
	add("… by process", nil, func(s coreSide) val {
		if s.res == nil || s.res.Lease == nil || len(s.res.Lease.RSSEnd) == 0 {
			return label("not measured")
		}
		counted := map[int]bool{}
		for _, pc := range orZero(s.res.Lease.CPU).Procs {
			counted[pc.PID] = pc.Counted
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
		return label(strings.Join(parts, ", "))
	})
	return fs
}

// coreReport writes the core types section (crdserver ÷ kube-apiserver)
// and returns its failures.
func coreReport(dir string, p func(string, ...any)) (fails []string) {
	c, k := coreSide(readSide[coreResult](dir, "core-crdserver.json")), coreSide(readSide[coreResult](dir, "core-kube.json"))
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
			leases, period, duration, idle = lr.Leases, lr.PeriodSec, lr.DurationSec, orZero(lr.Idle).WallSec
		}
		if ph := s.res.phase("lease-create"); ph != nil && conc == 0 {
			conc = ph.Concurrency
		}
	}
	first := cmp.Or(c.res, k.res)

	p("## Core types\n\n")
	p("Built-in types on kube-apiserver v1.37.2 with its etcd v3.7.3 and kube-controller-manager (`start-kube.sh`), and on crdserver; "+
		"`crdbench core` (HTTPS + HTTP/2, the admin client certificate, JSON), each in a namespace it creates. ConfigMaps (10 keys, %d bytes of data, "+
		"a %d-byte body): %s sequential creates, %s sequential gets, %d plain GETs of the collection (it also holds `kube-root-ca.crt`). "+
		"Leases: %s, each renewed every %.0f s for %.0f s, spread evenly, as client-go's leader election renews a `LeaseLock`: a PUT of the lease "+
		"of its last write with `spec.renewTime` and `spec.holderIdentity`, and only if that fails a GET and a PUT. Server CPU is utime + stime "+
		"(`/proc/PID/stat`, 10 ms ticks): crdserver's one process, kube-apiserver + etcd (the controller manager not counted).\n\n",
		first.ConfigMapData, first.ConfigMapBytes, commas(n), commas(n), lists, commas(leases), period, duration)
	t := newTable("metric", "crdserver", "kube-apiserver (+ etcd)", "ratio")
	figs(t, coreFigs(n, lists, leases, conc, period, duration, idle), c, k)
	// Processes recorded but not counted (kube-controller-manager).
	if k.res != nil && k.res.Lease != nil && k.res.Lease.CPU != nil {
		if side := procList(k.res.Lease.CPU, false); side != "" {
			t.row("(not counted) Kubernetes' other processes over the renewals", "(crdserver's controllers run in its one process)", side, "–")
		}
	}
	figs(t, []fig[coreSide]{{fmt.Sprintf("(setup) %s Lease creates with %d workers: req/s", commas(leases), conc),
		func(s coreSide) val {
			return s.phaseVal("lease-create", func(p *corePhase) (float64, bool) { return p.PerSecond, true }, 1, "")
		}, coreRatio}}, c, k)
	p("%s\n", t)

	for _, x := range []struct {
		name string
		s    coreSide
	}{{"crdserver", c}, {"kube-apiserver", k}} {
		if x.s.res == nil {
			continue
		}
		fails = append(fails, workloadFailures(x.name, "core types", x.s.res.Error, x.s.res.Failures)...)
		if cl := x.s.res.Cleanup; cl != "" && !strings.Contains(cl, "gone after") {
			fails = append(fails, fmt.Sprintf("- %s core types, cleanup: %s\n", x.name, cl))
		}
	}
	return fails
}
