package main

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The apf workload: API Priority and Fairness under a noisy tenant. Many
// clients (one user, "crdbench-noisy") list every object of a big custom
// resource as fast as they can, honouring Retry-After as client-go does,
// while a controller (user system:kube-controller-manager, Kubernetes'
// leader-election FlowSchema) renews a Lease every 2 s and an admin (the
// client certificate, system:masters: exempt) makes kubectl's requests.
// It reports the renewals missed (an error, or one that took longer than
// the period), the admin's p99 idle and under the noise, the noisy
// clients' answers by code, and the server's peak RSS. The noisy user and
// the controller are impersonated by the admin and bound to cluster-admin
// for the run (group crdbench:apf).

const (
	apfGroup   = "apfbench.crdbench.example.com"
	apfCRD     = "items." + apfGroup
	apfBinding = "crdbench-apf"
)

type apfResult struct {
	Server          string         `json:"server"`
	Objects         int            `json:"objects"`
	Clients         int            `json:"clients"`
	Seconds         float64        `json:"seconds"`
	Populate        phase          `json:"populate"`
	AdminIdle       phase          `json:"admin_idle"`
	AdminNoisy      phase          `json:"admin_noisy"`
	AdminP99Ratio   float64        `json:"admin_p99_ratio"`
	Renewals        int            `json:"renewals"`
	MissedRenewals  int            `json:"missed_renewals"`
	RenewMaxMs      float64        `json:"renew_max_ms"`
	NoisyCodes      map[string]int `json:"noisy_codes"`
	NoisyListsPerS  float64        `json:"noisy_lists_per_second"`
	RSS             []procMem      `json:"rss"`
	Failures        []failure      `json:"failures,omitempty"`
	LoadBefore      string         `json:"load_before"`
	LoadAfter       string         `json:"load_after"`
	Error           string         `json:"error,omitempty"`
	CleanupComplete string         `json:"cleanup,omitempty"`
}

func runAPF(args []string) error {
	fs := flag.NewFlagSet("apf", flag.ExitOnError)
	var t tlsFlags
	t.register(fs)
	server := fs.String("server", "", "API server base URL (loopback only); the client certificate must be system:masters")
	jsonOut := fs.String("json", "", "write the results as JSON to this file")
	var objects, clients int
	var dur, idle time.Duration
	checkInts := rangedFlags(fs.IntVar,
		ranged[int]{&objects, "objects", 5000, 1, 50000, "objects of the custom resource the noisy clients list"},
		ranged[int]{&clients, "clients", 200, 1, 1000, "noisy clients"})
	checkDurs := rangedFlags(fs.DurationVar,
		ranged[time.Duration]{&dur, "duration", 30 * time.Second, 5 * time.Second, 10 * time.Minute, "how long the noisy clients list"},
		ranged[time.Duration]{&idle, "idle", 5 * time.Second, time.Second, time.Minute, "how long the admin's requests are timed before the noise"})
	var rssPIDs namedPIDs
	fs.Var(&rssPIDs, "rss-pid", "name=PID of a server process whose peak RSS (VmHWM) is read after the run (repeatable)")
	_ = fs.Parse(args)
	if err := checkInts(); err != nil {
		return err
	}
	if err := checkDurs(); err != nil {
		return err
	}
	// The noisy clients share one client (a process with many workers);
	// the admin and the controller have theirs.
	c, err := connect(*server, t, clients)
	if err != nil {
		return err
	}
	ac, err := connect(*server, t, 1)
	if err != nil {
		return err
	}
	lc, err := connect(*server, t, 1)
	if err != nil {
		return err
	}
	ctx := context.Background()
	res := &apfResult{Server: c.base, Objects: objects, Clients: clients, Seconds: dur.Seconds(), NoisyCodes: map[string]int{}, LoadBefore: loadavg()}
	finish := func(err error) error {
		res.LoadAfter = loadavg()
		res.CleanupComplete = apfCleanup(c)
		res.Failures = append(res.Failures, firstError(res.Populate, res.AdminIdle, res.AdminNoisy)...)
		return done(*jsonOut, res, &res.Error, res.Failures, err)
	}
	if err := apfSetup(ctx, c); err != nil {
		return finish(err)
	}
	coll := c.base + "/apis/" + apfGroup + "/v1/namespaces/default/items"
	res.Populate = c.phase(ctx, "populate", objects, 16, 0, func(i int) request {
		body := fmt.Sprintf(`{"apiVersion":"%s/v1","kind":"Item","metadata":{"name":"item-%05d","labels":{"bench":"apf"}},"spec":{"n":%d,"text":"%0100d"}}`, apfGroup, i, i, i)
		return request{http.MethodPost, coll, []byte(body), []int{http.StatusCreated, http.StatusConflict}}
	}, nil)
	if res.Populate.Errors > 0 {
		return finish(fmt.Errorf("populating: %d errors", res.Populate.Errors))
	}

	// The admin's requests, as kubectl get configmaps makes them.
	// Every 50 ms for d; a slow server answers fewer (the phase ends at d
	// and is not a failure for that).
	admin := func(name string, d time.Duration) phase {
		p := run(ctx, name, int(d/(50*time.Millisecond)), 1, 0, d, adminOp(ac, name))
		if p.FirstError != nil && strings.HasPrefix(p.FirstError.Error, "phase time limit") {
			p.FirstError = nil
		}
		return p
	}
	log.Printf("admin idle for %v", idle)
	res.AdminIdle = admin("admin-idle", idle)

	noisyCtx, stop := context.WithTimeout(ctx, dur)
	defer stop()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var lists atomic.Int64
	log.Printf("%d noisy clients for %v", clients, dur)
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for noisyCtx.Err() == nil {
				code, _, hdr, err := c.call(noisyCtx, http.MethodGet, coll, nil, "Impersonate-User", "crdbench-noisy", "Impersonate-Group", "crdbench:apf")
				key := strconv.Itoa(code)
				if err != nil {
					if noisyCtx.Err() != nil {
						return // cut off at the end
					}
					key = "error"
				}
				mu.Lock()
				res.NoisyCodes[key]++
				mu.Unlock()
				if code == http.StatusOK {
					lists.Add(1)
				}
				if code == http.StatusTooManyRequests {
					wait, _ := strconv.Atoi(hdr.Get("Retry-After"))
					select {
					case <-noisyCtx.Done():
					case <-time.After(time.Duration(min(max(wait, 1), 10)) * time.Second):
					}
				}
			}
		}()
	}
	// The controller's renewals, every 2 s.
	wg.Add(1)
	go func() {
		defer wg.Done()
		lease := c.base + "/apis/coordination.k8s.io/v1/namespaces/default/leases/crdbench-apf"
		imp := []string{"Impersonate-User", "system:kube-controller-manager", "Impersonate-Group", "crdbench:apf"}
		tick := time.NewTicker(2 * time.Second)
		defer tick.Stop()
		for noisyCtx.Err() == nil {
			t0 := time.Now()
			rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			code, err := renew(rctx, lc, lease, t0, imp)
			cancel()
			d := time.Since(t0)
			res.Renewals++
			res.RenewMaxMs = max(res.RenewMaxMs, ms(d))
			if err != nil || code >= 300 || d > 2*time.Second {
				res.MissedRenewals++
			}
			select {
			case <-noisyCtx.Done():
			case <-tick.C:
			}
		}
	}()
	res.AdminNoisy = admin("admin-noisy", dur-time.Second)
	wg.Wait()
	res.NoisyListsPerS = math3(float64(lists.Load()) / dur.Seconds())
	if res.AdminIdle.P99Ms > 0 {
		res.AdminP99Ratio = math3(res.AdminNoisy.P99Ms / res.AdminIdle.P99Ms)
	}
	res.RSS, _ = readRSS(rssPIDs)
	return finish(nil)
}

// apfSetup creates the CRD (and waits until it is Established) and the
// binding of the impersonated users.
func apfSetup(ctx context.Context, c *client) error {
	crd := fmt.Sprintf(`{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"%s"},
"spec":{"group":"%s","scope":"Namespaced","names":{"plural":"items","singular":"item","kind":"Item","listKind":"ItemList"},
"versions":[{"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object","properties":{"spec":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}}}]}}`, apfCRD, apfGroup)
	binding := fmt.Sprintf(`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRoleBinding","metadata":{"name":"%s"},
"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"cluster-admin"},
"subjects":[{"apiGroup":"rbac.authorization.k8s.io","kind":"Group","name":"crdbench:apf"}]}`, apfBinding)
	for _, o := range []struct{ coll, body string }{
		{"/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd},
		{"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", binding},
	} {
		code, b, err := c.do(ctx, http.MethodPost, c.base+o.coll, []byte(o.body))
		if err != nil || !slices.Contains([]int{http.StatusCreated, http.StatusConflict}, code) {
			return fmt.Errorf("create %s: %d %v %.300s", o.coll, code, err, b)
		}
	}
	if err := c.waitEstablished(ctx, apfCRD, 30*time.Second); err != nil {
		return err
	}
	time.Sleep(2 * time.Second) // the reference serves a new CRD a moment after Established
	return nil
}

// apfCleanup deletes what the run made (the CRD's objects go with it).
func apfCleanup(c *client) string {
	return c.deleteAndWait("CRD", c.base+"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"+apfCRD, 2*time.Minute) + "; " +
		c.deleteAndWait("binding", c.base+"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/"+apfBinding, 30*time.Second) + "; " +
		c.deleteAndWait("lease", c.base+"/apis/coordination.k8s.io/v1/namespaces/default/leases/crdbench-apf", 30*time.Second)
}

// renew renews the Lease at url as client-go's leader election does: a GET,
// then an update of renewTime (a create the first time).
func renew(ctx context.Context, c *client, url string, now time.Time, imp []string) (int, error) {
	code, b, err := c.do(ctx, http.MethodGet, url, nil, imp...)
	if err != nil {
		return code, err
	}
	var rv struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	method, target := http.MethodPut, url
	switch code {
	case http.StatusOK:
		if err := json.Unmarshal(b, &rv); err != nil {
			return code, err
		}
	case http.StatusNotFound:
		method, target = http.MethodPost, url[:strings.LastIndex(url, "/")]
	default:
		return code, nil
	}
	body := fmt.Sprintf(`{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"crdbench-apf","resourceVersion":%q},"spec":{"holderIdentity":"crdbench","leaseDurationSeconds":15,"renewTime":%q}}`,
		rv.Metadata.ResourceVersion, now.UTC().Format("2006-01-02T15:04:05.000000Z"))
	code, _, err = c.do(ctx, method, target, []byte(body), imp...)
	return code, err
}

// adminOp is one round of the admin's requests, as kubectl get configmaps
// makes them, one round per 50 ms at most.
func adminOp(ac *client, name string) func(ctx context.Context, i int) (time.Duration, *failure) {
	return func(ctx context.Context, i int) (time.Duration, *failure) {
		t0 := time.Now()
		defer func() { time.Sleep(time.Until(t0.Add(50 * time.Millisecond))) }()
		for _, p := range []string{"/api", "/apis", "/api/v1/namespaces/default/configmaps?limit=500"} {
			code, b, err := ac.do(ctx, http.MethodGet, ac.base+p, nil)
			if err != nil || code != http.StatusOK {
				return time.Since(t0), ac.fail(name, http.MethodGet, p, code, b, err)
			}
		}
		return time.Since(t0), nil
	}
}

// apfReport writes the section of the apf rounds (apf-crdserver-N.json,
// apf-kube-N.json): each figure the median of its rounds.
func apfReport(dir string, p func(string, ...any)) (fails []string) {
	read := func(name string) (rs []apfResult) {
		files, _ := filepath.Glob(filepath.Join(dir, "apf-"+name+"-*.json"))
		slices.Sort(files)
		for _, f := range files {
			var r apfResult
			if readJSON(f, &r) == nil {
				rs = append(rs, r)
				fails = append(fails, workloadFailures(name, "apf", r.Error, r.Failures)...)
			}
		}
		return rs
	}
	c, k := read("crdserver"), read("kube")
	if len(c) == 0 && len(k) == 0 {
		return nil
	}
	first := slices.Concat(c, k)[0]
	p("## API Priority and Fairness: a noisy tenant (crdbench apf)\n\n")
	p("%d clients of one user list all %s objects of a custom resource as fast as they can for %.0f s (honouring Retry-After as client-go does), "+
		"while a controller (system:kube-controller-manager: the leader-election FlowSchema) renews a Lease every 2 s and the admin "+
		"(system:masters: exempt) makes kubectl's requests every 50 ms on a connection of its own. Both servers with their defaults "+
		"(400 + 200 in flight: 600 seats), crdbench on the same 2 cores. Each figure is the median of the rounds: crdserver %d rounds, "+
		"each on a fresh server; kube-apiserver (`start-kube.sh`) %d rounds on one server, one after the other. A renewal is missed when it "+
		"fails or takes longer than its 2 s period. Load averages before → after each round: crdserver %s; kube-apiserver %s.\n\n",
		first.Clients, commas(first.Objects), first.Seconds, len(c), len(k), apfLoads(c), apfLoads(k))
	t := newTable("figure", "crdserver", "kube-apiserver 1.37", "ratio")
	fig := func(name string, prec int, unit string, f func(r apfResult) float64) {
		v := func(rs []apfResult) val {
			if len(rs) == 0 {
				return none("not measured")
			}
			var xs []float64
			for _, r := range rs {
				xs = append(xs, f(r))
			}
			return num(median(xs), prec, unit)
		}
		t.cmp(name, v(c), v(k))
	}
	fig("lease renewals", 0, "", func(r apfResult) float64 { return float64(r.Renewals) })
	fig("missed lease renewals", 0, "", func(r apfResult) float64 { return float64(r.MissedRenewals) })
	fig("slowest renewal", 0, " ms", func(r apfResult) float64 { return r.RenewMaxMs })
	fig("admin p99, idle", 1, " ms", func(r apfResult) float64 { return r.AdminIdle.P99Ms })
	fig("admin p99, under the noise", 1, " ms", func(r apfResult) float64 { return r.AdminNoisy.P99Ms })
	fig("admin p99 ratio, noise ÷ idle (want ≤ 2)", 1, "", func(r apfResult) float64 { return r.AdminP99Ratio })
	fig("admin rounds answered under the noise", 0, "", func(r apfResult) float64 { return float64(r.AdminNoisy.Requests) })
	fig("noisy lists answered 200, per second", 2, "", func(r apfResult) float64 { return r.NoisyListsPerS })
	fig("noisy answers 429", 0, "", func(r apfResult) float64 { return float64(r.NoisyCodes["429"]) })
	fig("populate (16 workers), creates/s", 0, "", func(r apfResult) float64 { return r.Populate.PerSecond })
	fig("server peak RSS (VmHWM)", 0, " MiB", func(r apfResult) float64 {
		var m float64
		for _, x := range r.RSS {
			m += x.VMHWMMiB
		}
		return m
	})
	p("%s\n", t)
	return fails
}

func apfLoads(rs []apfResult) string {
	var out []string
	for _, r := range rs {
		out = append(out, r.LoadBefore+" → "+r.LoadAfter)
	}
	return cmp.Or(strings.Join(out, "; "), "–")
}
