package robustness

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/time/rate"

	"github.com/crdserver/crdserver/e2e/robustness/check"
)

// Knobs, from the environment (robustness/run.sh sets them):
//
//	ROBUSTNESS_RUNS     how many runs (default: the short set CI runs)
//	ROBUSTNESS_FAULTS   only these faults (comma-separated names)
//	ROBUSTNESS_SETUPS   only these setups (cluster, embedded)
//	ROBUSTNESS_SEED     the first run's seed (default: from the clock)
//	ROBUSTNESS_RPS      requests per second of the traffic (default 300)
//	ROBUSTNESS_TRAFFIC  seconds of traffic before and after the fault (default 4)
//	ROBUSTNESS_RACE     1: crdserver built with the race detector
//	ROBUSTNESS_OUT      where the summary stays, and the history, truth, report
//	                    and logs of a run that failed (default: a temporary folder,
//	                    removed when every run passed)
//	ROBUSTNESS_KEEP     1: keep every run's folder whole, data folders too (etcd's
//	                    preallocated logs make that half a GiB a run)
func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

// planned is one run to make.
type planned struct {
	setup, fault string
	seed         uint64
}

func (p planned) name() string { return p.setup + "-" + p.fault }

// plan lists the runs: every (setup, fault) pair in turn; by default (CI's
// short version) the embedded store's restart and two faults of the
// cluster chosen by the seed.
func plan() []planned {
	seed := uint64(time.Now().UnixNano())
	if v, err := strconv.ParseUint(os.Getenv("ROBUSTNESS_SEED"), 10, 64); err == nil {
		seed = v
	}
	only := func(env, v string) bool {
		list := os.Getenv(env)
		return list == "" || slices.Contains(strings.Split(list, ","), v)
	}
	var pairs []planned
	for _, f := range faults {
		for _, s := range f.setups {
			if only("ROBUSTNESS_FAULTS", f.name) && only("ROBUSTNESS_SETUPS", s) {
				pairs = append(pairs, planned{setup: s, fault: f.name})
			}
		}
	}
	n := envInt("ROBUSTNESS_RUNS", 0)
	filtered := os.Getenv("ROBUSTNESS_FAULTS") != "" || os.Getenv("ROBUSTNESS_SETUPS") != ""
	var out []planned
	switch {
	case len(pairs) == 0:
	case n <= 0 && !filtered:
		var clusterPairs []planned
		for _, p := range pairs {
			if p.setup == cluster {
				clusterPairs = append(clusterPairs, p)
			}
		}
		a := int(seed % uint64(len(clusterPairs)))
		b := (a + 1 + int(seed/7%uint64(len(clusterPairs)-1))) % len(clusterPairs)
		out = []planned{{setup: embedded, fault: "restart-embedded"}, clusterPairs[a], clusterPairs[b]}
	default:
		if n <= 0 {
			n = len(pairs)
		}
		for i := range n {
			out = append(out, pairs[i%len(pairs)])
		}
	}
	for i := range out {
		out[i].seed = seed + uint64(i)
	}
	return out
}

// result is one run's line of the summary.
type result struct {
	Setup      string         `json:"setup"`
	Fault      string         `json:"fault"`
	Seed       uint64         `json:"seed"`
	Seconds    float64        `json:"seconds"` // of traffic
	Requests   int            `json:"requests"`
	Violations int            `json:"violations"`
	ByCheck    map[string]int `json:"byCheck,omitempty"`
	Error      string         `json:"error,omitempty"`
	Stats      check.Stats    `json:"stats"`
	Dir        string         `json:"dir,omitempty"`
}

// TestRobustness drives traffic through crdserver while one fault is
// injected per run, and checks every recorded history against etcd's
// (package check).
func TestRobustness(t *testing.T) {
	readSources()
	out := os.Getenv("ROBUSTNESS_OUT")
	keep := os.Getenv("ROBUSTNESS_KEEP") == "1"
	temporary := out == ""
	if temporary {
		var err error
		if out, err = os.MkdirTemp("", "crdserver-robustness-"); err != nil {
			t.Fatal(err)
		}
	}
	var results []result
	for i, p := range plan() {
		name := fmt.Sprintf("%03d-%s", i, p.name())
		dir := filepath.Join(out, name)
		t.Run(name, func(t *testing.T) {
			res := runOnce(t, p, dir)
			switch {
			case keep:
				res.Dir = dir
			case t.Failed():
				// The history, truth, report and logs; not the data.
				removeData(dir)
				res.Dir = dir
				t.Logf("history, truth, report and logs kept in %s", dir)
			default:
				_ = os.RemoveAll(dir)
			}
			results = append(results, res)
		})
	}
	summary := summarize(results)
	t.Log("\n" + summary)
	b, _ := json.MarshalIndent(results, "", "  ")
	_ = writeFile(out, "results.json", b)
	_ = writeFile(out, "summary.txt", []byte(summary))
	if temporary && !keep && !t.Failed() {
		_ = os.RemoveAll(out)
	}
}

// removeData removes the data folders of a run's processes (etcd members'
// and crdservers'), keeping its files.
func removeData(dir string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.IsDir() {
			_ = os.RemoveAll(filepath.Join(dir, e.Name()))
		}
	}
}

// summarize makes the table of runs by fault: runs, violations, traffic.
func summarize(results []result) string {
	type row struct {
		runs, violations, errors, requests int
		seconds                            float64
	}
	rows := map[string]*row{}
	var keys []string
	for _, r := range results {
		k := r.Setup + " | " + r.Fault
		if rows[k] == nil {
			rows[k] = &row{}
			keys = append(keys, k)
		}
		x := rows[k]
		x.runs++
		x.violations += r.Violations
		x.requests += r.Requests
		x.seconds += r.Seconds
		if r.Error != "" {
			x.errors++
		}
	}
	sort.Strings(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "| setup | fault | runs | violations | failed runs | requests per run | requests/s |\n|---|---|---|---|---|---|---|\n")
	total := row{}
	for _, k := range keys {
		x := rows[k]
		rps := 0.0
		if x.seconds > 0 {
			rps = float64(x.requests) / x.seconds
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %.0f |\n", k, x.runs, x.violations, x.errors, x.requests/x.runs, rps)
		total.runs += x.runs
		total.violations += x.violations
		total.errors += x.errors
	}
	fmt.Fprintf(&b, "| all | | %d | %d | %d | | |\n", total.runs, total.violations, total.errors)
	return b.String()
}

// run is one run: its processes, its traffic's record, its faults.
type run struct {
	t        *testing.T
	setup    string
	dir      string
	rng      *rand.Rand
	etcd     *etcdCluster
	etcdCli  *clientv3.Client
	replicas []*replica
	webhook  *webhook
	rc       *recorder

	mu          sync.Mutex
	compactions []check.Compaction
	events      []string // what the faults did, when
}

func (r *run) logf(format string, args ...any) {
	line := fmt.Sprintf("%8.3fs ", float64(r.rc.now())/1e9) + fmt.Sprintf(format, args...)
	r.mu.Lock()
	r.events = append(r.events, line)
	r.mu.Unlock()
	r.t.Log(line)
}

func (r *run) addCompaction(c check.Compaction) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.compactions = append(r.compactions, c)
}

// admin makes one request as the admin, through the first replica.
func (r *run) admin(ctx context.Context, method, path, contentType string, body []byte) answer {
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for _, rep := range r.replicas {
		if rep.running() && !rep.frozen {
			return do(rctx, rep.client, method, rep.url, path, contentType, body)
		}
	}
	return answer{err: fmt.Errorf("no replica runs")}
}

func runOnce(t *testing.T, p planned, dir string) result {
	res := result{Setup: p.setup, Fault: p.fault, Seed: p.seed}
	t.Logf("seed %d (ROBUSTNESS_SEED=%d ROBUSTNESS_FAULTS=%s ROBUSTNESS_SETUPS=%s ROBUSTNESS_RUNS=1 reruns it)", p.seed, p.seed, p.fault, p.setup)
	r := &run{t: t, setup: p.setup, dir: dir, rng: rand.New(rand.NewPCG(p.seed, 0)), rc: &recorder{start: time.Now()}}
	fail := func(format string, args ...any) result {
		res.Error = fmt.Sprintf(format, args...)
		t.Error(res.Error)
		r.keepLogs()
		return res
	}
	defer r.teardown()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var err error
	if r.webhook, err = startWebhook(); err != nil {
		return fail("webhook: %v", err)
	}
	if err := r.start(); err != nil {
		return fail("start: %v", err)
	}
	if err := r.setupAPI(); err != nil {
		return fail("set up the API: %v", err)
	}
	var tw *truthWatcher
	if p.setup == cluster {
		if tw, err = watchTruth(r.etcdCli); err != nil {
			return fail("truth: %v", err)
		}
	}

	// The traffic, with the fault in its middle.
	var f fault
	for _, x := range faults {
		if x.name == p.fault {
			f = x
		}
	}
	hc := *r.replicas[0].client
	hc.Timeout = 0
	tr := &traffic{rc: r.rc, replicas: r.replicas, hc: &hc, watchHC: &hc,
		limiter: rate.NewLimiter(rate.Limit(envInt("ROBUSTNESS_RPS", 300)), 20), seed: p.seed}
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	start := time.Now()
	wg.Go(func() { tr.run(ctx, 8, 10) })
	around := time.Duration(envInt("ROBUSTNESS_TRAFFIC", 4)) * time.Second
	time.Sleep(around)
	fctx, fcancel := context.WithTimeout(context.Background(), 2*time.Minute)
	faultErr := f.inject(fctx, r)
	fcancel()
	for _, rep := range r.replicas {
		if err := rep.waitReady(context.Background(), 2*time.Minute); err != nil && faultErr == nil {
			faultErr = err
		}
	}
	r.logf("every replica is ready")
	time.Sleep(around)
	stop()
	wg.Wait()
	res.Seconds = time.Since(start).Seconds()
	if faultErr != nil {
		return fail("the fault %s: %v", p.fault, faultErr)
	}

	// What etcd holds, and the checks.
	var truth *check.Truth
	if p.setup == cluster {
		truth, err = tw.finish(context.Background())
	} else {
		if err = r.replicas[0].terminate(); err == nil {
			truth, err = embeddedTruth(context.Background(), r.replicas[0].dataDir, dir)
		}
	}
	if err != nil {
		return fail("truth: %v", err)
	}
	truth.Compactions = r.compactions
	for _, c := range truth.Changes {
		if _, _, name := check.SplitKey(c.Key); !slices.Contains(objNames, name) {
			truth.Foreign = append(truth.Foreign, c.Key)
		}
	}
	if err := truth.Index(); err != nil {
		return fail("truth: %v", err)
	}
	h := r.rc.history()
	res.Requests = len(h.Ops) + len(h.Lists)
	for _, w := range h.Watches {
		res.Requests += len(w.Conns)
	}
	report := check.Check(h, truth, check.Options{VisualizeDir: dir})
	res.Stats = report.Stats
	res.ByCheck = map[string]int{}
	for _, v := range report.Violations {
		res.ByCheck[v.Guarantee]++
	}
	for g, n := range report.Dropped {
		res.ByCheck[g] += n
	}
	for _, n := range res.ByCheck {
		res.Violations += n
	}
	t.Logf("%d requests in %.1f s (%.0f/s): %d ops %v, %d lists (%d failed), %d watches (%d requests, %d events, %d bookmarks), %d answered 410; etcd: %d changes; %d lost answers resolved as written",
		res.Requests, res.Seconds, float64(res.Requests)/res.Seconds, len(h.Ops), opSummary(report.Stats.Ops), report.Stats.Lists, report.Stats.ListsFailed,
		report.Stats.Watches, report.Stats.Conns, report.Stats.Events, report.Stats.Bookmarks, report.Stats.Gone, report.Stats.Changes, report.Stats.Resolved)
	refused := map[string]int{}
	for _, op := range h.Ops {
		if op.Outcome() == check.Refused {
			refused[fmt.Sprintf("%s %d %s: %s", op.Kind, op.Code, op.Reason, op.Message)]++
		}
	}
	if len(refused) > 0 {
		t.Logf("refused: %v", refused)
	}
	for _, rep := range r.replicas {
		if msg := rep.panicked(); msg != "" {
			res.Violations++
			t.Errorf("%s panicked:\n%s", rep.name, msg)
		}
	}
	if res.Violations > 0 {
		for _, v := range report.Violations {
			t.Errorf("violation: %s", v)
		}
		for g, n := range report.Dropped {
			t.Errorf("and %d more violations of %s", n, g)
		}
		for k, path := range report.Visualizations {
			t.Logf("porcupine's visualization of %s: %s", k, path)
		}
		hb, _ := json.Marshal(h)
		tb, _ := json.Marshal(truth)
		rb, _ := json.MarshalIndent(report, "", "  ")
		_ = writeFile(dir, "history.json", hb)
		_ = writeFile(dir, "truth.json", tb)
		_ = writeFile(dir, "report.json", rb)
		r.keepLogs()
	}
	return res
}

func opSummary(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return strings.Join(parts, " ")
}

// start starts etcd (for the cluster) and the replicas.
func (r *run) start() error {
	var endpoints []string
	n := 1
	if r.setup == cluster {
		var err error
		if r.etcd, err = startEtcd(r.dir, 3); err != nil {
			return err
		}
		if r.etcdCli, err = r.etcd.client(); err != nil {
			return err
		}
		endpoints, n = r.etcd.endpoints(), 3
	}
	caDir := ""
	for i := range n {
		rep, err := newReplica(i, r.dir, endpoints, caDir)
		if err != nil {
			return err
		}
		r.replicas = append(r.replicas, rep)
		if err := rep.run(2 * time.Minute); err != nil {
			return err
		}
		caDir = filepath.Join(r.replicas[0].dataDir, "pki")
	}
	return nil
}

// setupAPI makes the traffic's namespaces and CRDs, and waits until every
// replica serves them.
func (r *run) setupAPI() error {
	ctx := context.Background()
	for _, ns := range namespaces {
		body := fmt.Appendf(nil, `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":%q}}`, ns)
		if a := r.admin(ctx, http.MethodPost, "/api/v1/namespaces", "application/json", body); a.err != nil || a.code != http.StatusCreated {
			return fmt.Errorf("create namespace %s: %d %v %s", ns, a.code, a.err, a.body)
		}
	}
	for _, res := range resources {
		if res.core {
			continue
		}
		body, _ := json.Marshal(r.crd(res))
		if a := r.admin(ctx, http.MethodPost, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", "application/json", body); a.err != nil || a.code != http.StatusCreated {
			return fmt.Errorf("create CRD %s: %d %v %s", res.name, a.code, a.err, a.body)
		}
	}
	deadline := time.Now().Add(time.Minute)
	for _, rep := range r.replicas {
		for _, res := range resources {
			for _, v := range res.versions {
				for {
					a := do(ctx, rep.client, http.MethodGet, rep.url, res.path(v, namespaces[0], ""), "", nil)
					if a.err == nil && a.code == http.StatusOK {
						break
					}
					if time.Now().After(deadline) {
						return fmt.Errorf("%s does not serve %s/%s: %d %v %s", rep.name, res.name, v, a.code, a.err, a.body)
					}
					time.Sleep(50 * time.Millisecond)
				}
			}
		}
	}
	return nil
}

// crd is the CRD of a custom resource of the traffic: gadgets convert
// through the webhook.
func (r *run) crd(res *resource) map[string]any {
	var versions []any
	for i, v := range res.versions {
		field := "value"
		if v == "v2" {
			field = "data"
		}
		versions = append(versions, map[string]any{
			"name": v, "served": true, "storage": i == 0,
			"schema": map[string]any{"openAPIV3Schema": map[string]any{
				"type": "object",
				"properties": map[string]any{"spec": map[string]any{
					"type": "object",
					"properties": map[string]any{
						field: map[string]any{"type": "string"},
						"pad": map[string]any{"type": "string"},
					},
				}},
			}},
		})
	}
	spec := map[string]any{
		"group": group, "scope": "Namespaced", "versions": versions,
		"names": map[string]any{"plural": res.name, "singular": strings.TrimSuffix(res.name, "s"), "kind": res.kind, "listKind": res.kind + "List"},
	}
	if len(res.versions) > 1 {
		spec["conversion"] = map[string]any{"strategy": "Webhook", "webhook": map[string]any{
			"conversionReviewVersions": []string{"v1"},
			"clientConfig":             map[string]any{"url": r.webhook.url, "caBundle": r.webhook.caPEM},
		}}
	}
	return map[string]any{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": res.name + "." + group}, "spec": spec}
}

// keepLogs writes every process's output and the faults' log to the run's
// folder.
func (r *run) keepLogs() {
	for _, rep := range r.replicas {
		_ = writeFile(r.dir, rep.name+".log", []byte(rep.log.String()))
	}
	if r.etcd != nil {
		for _, m := range r.etcd.members {
			_ = writeFile(r.dir, m.name+".log", []byte(m.log.String()))
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	_ = writeFile(r.dir, "faults.log", []byte(strings.Join(r.events, "\n")+"\n"))
}

func (r *run) teardown() {
	for _, rep := range r.replicas {
		rep.close()
	}
	if r.etcdCli != nil {
		r.etcdCli.Close()
	}
	if r.etcd != nil {
		r.etcd.stop()
	}
	if r.webhook != nil {
		r.webhook.close()
	}
}
