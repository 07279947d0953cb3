package main

// crdbench core: built-in types against one server (crdserver or
// kube-apiserver). ConfigMaps (10 keys, 200 bytes of data): n sequential
// creates in a namespace it creates, n sequential gets, then -lists plain
// GETs of the collection. Leases: -leases of them, each renewed every
// -lease-period for -lease-duration, spread evenly over the period, as
// client-go's leader election renews a LeaseLock it holds: a PUT of the
// lease of its last write with spec.renewTime and spec.holderIdentity set;
// if that fails, a GET and a PUT of what the GET returned. The server's CPU
// time (utime+stime of /proc/PID/stat, every -pid) is read over each phase,
// its VmRSS at the end of the renewals.

import (
	"bytes"
	"cmp"
	"context"
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
// of a /proc/PID/stat line. The command name (field 2) may hold spaces and
// parentheses, so fields are counted from the last ')'.
func parseProcStat(b []byte) (utime, stime uint64, err error) {
	i := bytes.LastIndexByte(b, ')')
	f := strings.Fields(string(b[i+1:]))
	if i < 0 || len(f) < 13 {
		return 0, 0, errors.New("/proc/PID/stat: want a ')' and at least 13 fields after it")
	}
	utime, err = strconv.ParseUint(f[11], 10, 64) // f[0] is field 3
	if err == nil {
		stime, err = strconv.ParseUint(f[12], 10, 64)
	}
	return utime, stime, err
}

// userHZ is the unit of /proc/PID/stat's times: Linux's USER_HZ, 100 on
// every architecture this runs on (sysconf(_SC_CLK_TCK)).
const userHZ = 100

// cpuMeter reads the CPU time of the server's processes.
type cpuMeter []pidSpec

func (m cpuMeter) snap() cpuSnap {
	s := cpuSnap{at: time.Now(), ticks: make([]uint64, len(m)), errs: make([]string, len(m))}
	for i, p := range m {
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

// since is the CPU time each process used since a (nil with no processes).
func (m cpuMeter) since(a cpuSnap) *cpuWindow {
	if len(m) == 0 {
		return nil
	}
	return m.between(a, m.snap())
}

// between is the CPU time each process used from a to b.
func (m cpuMeter) between(a, b cpuSnap) *cpuWindow {
	w := &cpuWindow{WallSec: b.at.Sub(a.at).Seconds()}
	for i, p := range m {
		c := cpuProc{Name: p.name, PID: p.pid, Counted: p.counted}
		switch {
		case a.errs[i] != "":
			c.Error = "before: " + a.errs[i]
		case b.errs[i] != "":
			c.Error = "after: " + b.errs[i]
		case b.ticks[i] < a.ticks[i]:
			c.Error = "CPU time went down (another process with this PID?)"
		default:
			c.CPUSec = float64(b.ticks[i]-a.ticks[i]) / userHZ
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
	data, size := map[string]string{}, 0
	for k := range 10 {
		key, v := fmt.Sprintf("key-%d", k), fmt.Sprintf("value-%d-%07d", k, i)
		data[key], size = v, size+len(key)+len(v)
	}
	b, _ := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": name, "labels": map[string]string{"bench": "crdbench"}}, "data": data})
	return b, size
}

// microTime is metav1.MicroTime's JSON form.
func microTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000000Z07:00") }

// leaseBody is the Lease client-go's LeaseLock.Create makes for a new holder.
func leaseBody(name, holder string, now time.Time) []byte {
	return fmt.Appendf(nil, `{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":%q},"spec":{"acquireTime":%q,`+
		`"holderIdentity":%q,"leaseDurationSeconds":15,"leaseTransitions":0,"renewTime":%q}}`, name, microTime(now), holder, microTime(now))
}

// renewedLease is what LeaseLock.Update sends: the lease as last read from
// the server (metadata, resourceVersion included) with the holder's record
// written to its spec (renewTime now; holderIdentity, the rest kept).
func renewedLease(last []byte, holder string, now time.Time) ([]byte, error) {
	var obj map[string]json.RawMessage
	var spec map[string]any
	if err := json.Unmarshal(last, &obj); err != nil || obj == nil {
		return nil, cmp.Or(err, errors.New("null"))
	}
	if _ = json.Unmarshal(obj["spec"], &spec); spec == nil {
		spec = map[string]any{}
	}
	spec["holderIdentity"], spec["renewTime"] = holder, microTime(now)
	obj["spec"], _ = json.Marshal(spec)
	return json.Marshal(obj)
}

// tickPlan is when the ticks of a renewal run are due: lease i's k-th
// renewal at start + offset(i) + k×period, offsets spread evenly over one
// period; ticks per lease = duration / period (at least 1).
func tickPlan(leases int, period, duration time.Duration) (ticks int, offset func(i int) time.Duration) {
	return max(1, int(duration/period)), func(i int) time.Duration { return time.Duration(int64(period) * int64(i) / int64(leases)) }
}

// statusKey names a failed answer for the counters: its HTTP status, or
// "error" when there was none.
func statusKey(code int, err error) string {
	if err != nil || code == 0 {
		return "error"
	}
	return strconv.Itoa(code)
}

// countedPIDs are the -pid processes (counted) and the -side-pid ones (only recorded).
func countedPIDs(pids, side namedPIDs) cpuMeter {
	var m cpuMeter
	for _, p := range pids {
		m = append(m, pidSpec{p.name, p.pid, true})
	}
	for _, p := range side {
		m = append(m, pidSpec{p.name, p.pid, false})
	}
	return m
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
	meter := countedPIDs(pids, side)
	ns, nsURL := *namespace, c.base+"/api/v1/namespaces/"+*namespace
	cmColl, leaseColl := nsURL+"/configmaps", c.base+"/apis/coordination.k8s.io/v1/namespaces/"+ns+"/leases"
	res := &coreResult{Server: c.base, Name: *name, ClientCert: t.cert != "", Namespace: ns, ClockTicks: userHZ}
	num5 := func(prefix string) func(int) string {
		return func(i int) string { return prefix + strconv.Itoa(100000 + i)[1:] }
	}
	cmName, leaseName, holder := num5("cm-"), num5("lease-"), num5("crdbench-holder-")
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
	if f, err := c.create(context.Background(), "namespace", "namespace "+ns, c.base+"/api/v1/namespaces", namespaceBody(ns)); err != nil {
		res.Failures = append(res.Failures, *f)
		return finish(err)
	}
	nsCreated = true
	measured := func(name string, nreq, workers int, req func(i int) request, after func(i int, ok bool, b []byte)) corePhase {
		log.Printf("%s: %d requests with %d workers", name, nreq, workers)
		s := meter.snap()
		p := corePhase{phase: c.phase(context.Background(), name, nreq, workers, *phaseLimit, req, after)}
		p.CPU = meter.since(s)
		res.Phases = append(res.Phases, p)
		return p
	}
	cr := measured("configmap-create", *n, 1, func(i int) request {
		b, _ := configMapBody(cmName(i), i)
		return request{http.MethodPost, cmColl, b, []int{http.StatusCreated}}
	}, func(i int, ok bool, b []byte) {
		if ok && i == 0 {
			var obj struct {
				Metadata struct{ ManagedFields []json.RawMessage }
			}
			_ = json.Unmarshal(b, &obj)
			res.Sample, res.ManagedFields = truncate(b, 4000), len(obj.Metadata.ManagedFields) > 0
		}
	})
	if cr.Aborted {
		return finish(nil)
	}
	measured("configmap-get", *n, 1, func(i int) request {
		return request{http.MethodGet, cmColl + "/" + cmName(i), nil, []int{http.StatusOK}}
	}, nil)

	log.Printf("%d lists of the ConfigMaps", *lists)
	l := &loader{client: c, coll: cmColl}
	var ds []float64
	s := meter.snap()
	for range *lists {
		smp, f := l.list()
		if res.Lists = append(res.Lists, smp); f != nil {
			f.Phase = "configmap-list"
			res.Failures = append(res.Failures, *f)
			break
		}
		ds, res.ListItems, res.ListBytes = append(ds, smp.Ms), smp.Items, smp.Bytes
	}
	res.ListCPU = meter.since(s)
	if len(ds) > 0 {
		res.ListMedianMs, res.ListMinMs, res.ListMaxMs = median(ds), slices.Min(ds), slices.Max(ds)
		if want := cr.Requests - cr.Errors; res.ListItems < want {
			res.Failures = append(res.Failures, failure{Phase: "configmap-list", Method: http.MethodGet, Path: strings.TrimPrefix(cmColl, c.base), Status: 200,
				Error: fmt.Sprintf("list returned %d items, want at least %d", res.ListItems, want)})
		}
	}
	if *leases == 0 {
		return finish(nil)
	}

	// Leases: created (setup), then renewed.
	lr := &leaseResult{Leases: *leases, PeriodSec: period.Seconds(), DurationSec: duration.Seconds()}
	res.Lease = lr
	last := make([][]byte, *leases) // each lease as the server last returned it
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
	if *idle > 0 && len(meter) > 0 {
		log.Printf("idle %v (server CPU baseline)", *idle)
		s := meter.snap()
		time.Sleep(*idle)
		lr.Idle = meter.since(s)
	}
	renewLeases(c, lr, last, leaseColl, leaseName, holder, *period, *duration, *renewTO, meter)
	for _, p := range meter {
		m := readMem(p.name, p.pid)
		if lr.RSSEnd = append(lr.RSSEnd, m); p.counted {
			lr.RSSEndMiB += m.VMRSSMiB
		}
	}
	if lr.Failed > 0 || lr.Aborted != "" {
		f := *cmp.Or(lr.Latency.FirstError, &failure{Phase: "lease-renew"})
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
func renewLeases(c *client, lr *leaseResult, last [][]byte, coll string, leaseName, holder func(int) string, period, duration, renewTO time.Duration, meter cpuMeter) {
	ticks, offset := tickPlan(len(last), period, duration)
	lr.TicksPerLease, lr.Scheduled = ticks, ticks*len(last)
	// Everything ends by this deadline, whatever the server does.
	ctx, cancel := context.WithTimeout(context.Background(), duration+renewTO+5*time.Second)
	defer cancel()
	var (
		mu       sync.Mutex
		lat, lag []time.Duration
	)
	lr.FailedStatuses, lr.FastStatuses = map[string]int{}, map[string]int{}
	fail := func(f *failure, key string) {
		mu.Lock()
		defer mu.Unlock()
		lr.Failed++
		lr.FailedStatuses[key]++
		lr.Latency.FirstError = cmp.Or(lr.Latency.FirstError, f)
		if lr.OK == 0 && lr.Failed >= 10 && lr.Aborted == "" {
			lr.Aborted = "the first 10 renewals failed"
			cancel()
		}
	}
	// put sends a renewal of lease i made from the lease as last read (prev).
	put := func(ctx context.Context, i int, prev []byte) (int, []byte, []byte, error) {
		body, err := renewedLease(prev, holder(i), time.Now())
		if err != nil {
			return 0, nil, nil, fmt.Errorf("previous answer: %w", err)
		}
		code, b, err := c.do(ctx, http.MethodPut, coll+"/"+leaseName(i), body)
		return code, b, body, err
	}
	// renew is one renewal of lease i: the fast path (PUT of the last
	// answer), then if that fails the slow path (GET, PUT).
	renew := func(i int) {
		rctx, rcancel := context.WithTimeout(ctx, renewTO)
		defer rcancel()
		url, t0 := coll+"/"+leaseName(i), time.Now()
		code, b, body, err := put(rctx, i, last[i])
		if err != nil || code != http.StatusOK {
			mu.Lock()
			lr.FastPathRefused++
			lr.FastStatuses[statusKey(code, err)]++
			mu.Unlock()
			m := http.MethodGet
			if code, b, err = c.do(rctx, m, url, nil); err == nil && code == http.StatusOK {
				m = http.MethodPut
				code, b, body, err = put(rctx, i, b)
			}
			if err != nil || code != http.StatusOK {
				fail(c.fail("lease-renew (slow path "+m+")", m, url, code, b, err), m+" "+statusKey(code, err))
				return
			}
		}
		d := time.Since(t0)
		last[i] = b
		mu.Lock()
		defer mu.Unlock()
		lr.OK++
		lat = append(lat, d)
		lr.PutBodyBytes = cmp.Or(lr.PutBodyBytes, len(body))
	}

	log.Printf("renewing %d leases every %v for %v (%d renewals)", len(last), period, duration, lr.Scheduled)
	start := time.Now().Add(50 * time.Millisecond)
	s := meter.snap()
	var wg sync.WaitGroup
	for i := range last {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range ticks {
				due := start.Add(offset(i) + time.Duration(k)*period)
				select {
				case <-ctx.Done():
				case <-time.After(time.Until(due)):
				}
				if ctx.Err() != nil {
					return
				}
				// A tick a period late (the lease's previous renewal still
				// ran into it) is skipped.
				late := time.Since(due)
				mu.Lock()
				if late >= period {
					lr.Missed++
				} else {
					lag = append(lag, max(0, late))
				}
				mu.Unlock()
				if late < period {
					renew(i)
				}
			}
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	lr.CPU = meter.since(s)
	if ctx.Err() != nil && lr.Aborted == "" {
		lr.Aborted = "time limit reached: " + ctx.Err().Error()
	}
	first := lr.Latency.FirstError
	lr.Latency = summarize("lease-renew", lat, wall)
	lr.Latency.Concurrency, lr.Latency.Errors, lr.Latency.Aborted, lr.Latency.FirstError = len(last), lr.Failed, lr.Aborted != "", first
	slices.Sort(lag)
	lr.LagP50Ms, lr.LagP99Ms, lr.LagMaxMs = ms(percentile(lag, 0.5)), ms(percentile(lag, 0.99)), ms(percentile(lag, 1))
	if len(lr.FailedStatuses) == 0 {
		lr.FailedStatuses = nil
	}
	if len(lr.FastStatuses) == 0 {
		lr.FastStatuses = nil
	}
}

// coreSide is the core-types benchmark of one server (core-NAME.json).
type coreSide sideOf[coreResult]

// val is f of the result as a figure; f says why there is none instead
// ("not reached", "**failed** …", "not measured").
func (s coreSide) val(prec int, unit string, f func(*coreResult) (float64, string)) val {
	if s.res == nil {
		return none(s.why)
	}
	v, why := f(s.res)
	if why != "" {
		return none(why)
	}
	return num(v, prec, unit)
}

// phaseVal is a figure of one phase; ok false: not measured.
func phaseVal(name string, f func(*corePhase) (float64, bool)) func(*coreResult) (float64, string) {
	return func(r *coreResult) (float64, string) {
		p := r.phase(name)
		switch {
		case p == nil:
			return 0, "not reached"
		case p.Errors > 0 || p.Aborted:
			return 0, fmt.Sprintf("**failed** (%d/%d errors)", p.Errors, p.Requests)
		}
		return measuredOr(f(p))
	}
}

// leaseVal is a figure of the lease renewals; ok false: not measured.
func leaseVal(f func(*leaseResult) (float64, bool)) func(*coreResult) (float64, string) {
	return func(r *coreResult) (float64, string) {
		if r.Lease == nil || r.Lease.TicksPerLease == 0 {
			return 0, "not reached"
		}
		return measuredOr(f(r.Lease))
	}
}

func measuredOr(v float64, ok bool) (float64, string) {
	if !ok {
		return 0, "not measured"
	}
	return v, ""
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

// procList is "name 1.2 s (3.0%), name 0.3 s (1.0%)" for the processes of a window.
func procList(w *cpuWindow, counted bool) string {
	var parts []string
	for _, p := range w.Procs {
		switch {
		case p.Counted != counted:
		case p.Error != "":
			parts = append(parts, fmt.Sprintf("%s: %s", p.Name, p.Error))
		default:
			parts = append(parts, fmt.Sprintf("%s %.2f s (%.1f%%)", p.Name, p.CPUSec, p.CPUSec/max(w.WallSec, 1e-9)*100))
		}
	}
	return strings.Join(parts, ", ")
}

// coreFigs are the rows of the core types table.
func coreFigs(n, lists, leases, conc int, period, duration, idle float64) []fig[coreSide] {
	var fs []fig[coreSide]
	add := func(metric string, r func(a, b val) string, prec int, unit string, f func(*coreResult) (float64, string)) {
		fs = append(fs, fig[coreSide]{metric, func(s coreSide) val { return s.val(prec, unit, f) }, r})
	}
	text := func(metric string, f func(*coreResult) string) {
		fs = append(fs, fig[coreSide]{metric, func(s coreSide) val {
			if s.res == nil {
				return label(s.why)
			}
			return label(f(s.res))
		}, nil})
	}
	for _, x := range [][2]string{{"configmap-create", "ConfigMap creates"}, {"configmap-get", "ConfigMap gets"}} {
		ph := func(f func(p *corePhase) float64) func(*coreResult) (float64, string) {
			return phaseVal(x[0], func(p *corePhase) (float64, bool) { return f(p), true })
		}
		add(fmt.Sprintf("%s sequential %s: req/s", commas(n), x[1]), coreRatio, 1, "", ph(func(p *corePhase) float64 { return p.PerSecond }))
		add("… p50", coreRatio, 2, " ms", ph(func(p *corePhase) float64 { return p.P50Ms }))
		add("… p99", coreRatio, 2, " ms", ph(func(p *corePhase) float64 { return p.P99Ms }))
		add("… server CPU time per request", coreRatio, 3, " ms", phaseVal(x[0], func(p *corePhase) (float64, bool) {
			return orZero(p.CPU).TotalSec * 1000 / float64(max(1, p.Requests)), cpuOK(p.CPU) && p.Requests > 0
		}))
	}
	list := func(f func(*coreResult) float64) func(*coreResult) (float64, string) {
		return func(r *coreResult) (float64, string) {
			if len(r.Lists) == 0 {
				return 0, "not reached"
			}
			if slices.ContainsFunc(r.Failures, func(f failure) bool { return f.Phase == "configmap-list" }) {
				return 0, "**failed** (see Failures)"
			}
			return f(r), ""
		}
	}
	add(fmt.Sprintf("list of the %s ConfigMaps (plain GET, no limit): median of %d", commas(n), lists), coreRatio, 1, " ms", list(func(r *coreResult) float64 { return r.ListMedianMs }))
	add("… min", coreRatio, 1, " ms", list(func(r *coreResult) float64 { return r.ListMinMs }))
	add("… max", coreRatio, 1, " ms", list(func(r *coreResult) float64 { return r.ListMaxMs }))
	add("… items returned", nil, 0, "", list(func(r *coreResult) float64 { return float64(r.ListItems) }))
	add("… bytes per item", coreRatio, 0, " B", list(func(r *coreResult) float64 { return float64(r.ListBytes) / float64(max(1, r.ListItems)) }))
	text("created ConfigMaps carry `metadata.managedFields`", func(r *coreResult) string {
		if r.Sample == "" {
			return "not measured"
		}
		return map[bool]string{true: "yes", false: "no"}[r.ManagedFields]
	})
	text(fmt.Sprintf("%s Leases renewed every %.0f s for %.0f s: renewals done / scheduled", commas(leases), period, duration), func(r *coreResult) string {
		lr := r.Lease
		switch {
		case lr != nil && lr.TicksPerLease == 0 && lr.Aborted != "":
			return "**not run**: " + lr.Aborted
		case lr == nil || lr.TicksPerLease == 0:
			return "not reached"
		case lr.Aborted != "":
			return fmt.Sprintf("%s / %s (**aborted**: %s)", commas(lr.OK), commas(lr.Scheduled), lr.Aborted)
		}
		return fmt.Sprintf("%s / %s", commas(lr.OK), commas(lr.Scheduled))
	})
	// lv is a figure of the renewals; with cpu, of their CPU window, which must have been read.
	lv := func(cpu bool, f func(*leaseResult) float64) func(*coreResult) (float64, string) {
		return leaseVal(func(lr *leaseResult) (float64, bool) {
			if cpu && !cpuOK(lr.CPU) {
				return 0, false
			}
			return f(lr), true
		})
	}
	add("… renewals per second", nil, 1, "", lv(false, func(lr *leaseResult) float64 { return lr.Latency.PerSecond }))
	add("… renewal latency p50", coreRatio, 2, " ms", lv(false, func(lr *leaseResult) float64 { return lr.Latency.P50Ms }))
	add("… renewal latency p99", coreRatio, 2, " ms", lv(false, func(lr *leaseResult) float64 { return lr.Latency.P99Ms }))
	add("… renewal latency max", coreRatio, 2, " ms", lv(false, func(lr *leaseResult) float64 { return lr.Latency.MaxMs }))
	add("… **failed renewals**", nil, 0, "", lv(false, func(lr *leaseResult) float64 { return float64(lr.Failed) }))
	add("… fast path refused (the PUT with the last resourceVersion failed; GET + PUT instead)", nil, 0, "", lv(false, func(lr *leaseResult) float64 { return float64(lr.FastPathRefused) }))
	add("… renewals skipped (the lease's previous renewal still running a period later)", nil, 0, "", lv(false, func(lr *leaseResult) float64 { return float64(lr.Missed) }))
	add("… renewals started behind schedule, p99 (crdbench's own delay, or the same lease's previous renewal still running at its next tick)", nil, 2, " ms",
		lv(false, func(lr *leaseResult) float64 { return lr.LagP99Ms }))
	add("… **server CPU time** over the renewals", coreRatio, 2, " s", lv(true, func(lr *leaseResult) float64 { return lr.CPU.TotalSec }))
	add("… server CPU, % of one core", coreRatio, 1, "%", lv(true, func(lr *leaseResult) float64 { return lr.CPU.CorePct }))
	add("… server CPU time per renewal", coreRatio, 3, " ms", lv(true, func(lr *leaseResult) float64 { return lr.CPU.TotalSec * 1000 / float64(max(1, lr.OK+lr.Failed)) }))
	add(fmt.Sprintf("server CPU while idle just before (%.0f s, leases and ConfigMaps stored), %% of one core", idle), coreRatio, 1, "%",
		leaseVal(func(lr *leaseResult) (float64, bool) { return orZero(lr.Idle).CorePct, cpuOK(lr.Idle) }))
	add("… renewals' CPU above that idle rate, % of one core", coreRatio, 1, "%", leaseVal(func(lr *leaseResult) (float64, bool) {
		return orZero(lr.CPU).CorePct - orZero(lr.Idle).CorePct, cpuOK(lr.CPU) && cpuOK(lr.Idle)
	}))
	// lease is a row of text, if the renewals have what it needs.
	lease := func(metric string, has func(*leaseResult) bool, f func(lr *leaseResult) string) {
		fs = append(fs, fig[coreSide]{metric, func(s coreSide) val {
			if s.res == nil || s.res.Lease == nil || !has(s.res.Lease) {
				return label("not measured")
			}
			return label(f(s.res.Lease))
		}, nil})
	}
	hasRSS := func(lr *leaseResult) bool { return len(lr.RSSEnd) > 0 }
	lease("… CPU over the renewals by process", func(lr *leaseResult) bool { return lr.CPU != nil }, func(lr *leaseResult) string { return procList(lr.CPU, true) })
	add("RSS at the end of the renewals (kube: apiserver + etcd)", coreRatio, 1, " MiB", leaseVal(func(lr *leaseResult) (float64, bool) { return lr.RSSEndMiB, hasRSS(lr) }))
	lease("… by process", hasRSS, func(lr *leaseResult) string {
		var parts []string
		for _, m := range lr.RSSEnd {
			t := fmt.Sprintf("%s %.1f MiB", m.Name, m.VMRSSMiB)
			if m.Error != "" {
				t = m.Name + ": " + m.Error
			}
			if pc := find(orZero(lr.CPU).Procs, func(pc *cpuProc) bool { return pc.PID == m.PID }); pc != nil && !pc.Counted {
				t += " (not counted)"
			}
			parts = append(parts, t)
		}
		return strings.Join(parts, ", ")
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
	perSec := phaseVal("lease-create", func(p *corePhase) (float64, bool) { return p.PerSecond, true })
	t.cmp(fmt.Sprintf("(setup) %s Lease creates with %d workers: req/s", commas(leases), conc), c.val(1, "", perSec), k.val(1, "", perSec), coreRatio)
	p("%s\n", t)
	for i, s := range []coreSide{c, k} {
		if s.res != nil {
			name := []string{"crdserver", "kube-apiserver"}[i]
			fails = append(fails, workloadFailures(name, "core types", s.res.Error, s.res.Failures)...)
			if cl := s.res.Cleanup; cl != "" && !strings.Contains(cl, "gone after") {
				fails = append(fails, fmt.Sprintf("- %s core types, cleanup: %s\n", name, cl))
			}
		}
	}
	return fails
}
