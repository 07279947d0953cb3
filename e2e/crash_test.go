package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
)

// The crash test's shape: writers, SIGKILLs, and how many acknowledged
// writes each phase of load lasts (drawn from the seeded generator).
const (
	crashWriters          = 6
	crashObjectsPerWriter = 30
	crashKills            = 5
	crashMinAcks          = 50
	crashMaxAcks          = 1200
	// crashMinWrites is how many writes the whole run acknowledges at least.
	crashMinWrites = 3000
	// crashNamespace holds the writers' CronTabs, and nothing else.
	crashNamespace = "default"
)

// TestCrashLosesNothing writes CronTabs from several client-go writers at
// once, kills crdserver with SIGKILL at random moments and starts it again
// on the same data folder, then stops it once with SIGTERM under load. After
// every restart each CronTab must hold the last write the server
// acknowledged for it, or a later write whose answer never came; every
// object must be whole (its spec carries a checksum of itself); no
// acknowledged create may be missing.
//
// The moments of the kills come from a seeded generator; the seed is
// logged, and E2E_CRASH_SEED=<seed> replays the same choices (the
// interleaving of the writers still differs from run to run).
func TestCrashLosesNothing(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("E2E_CRASH_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("E2E_CRASH_SEED=%q: %v", s, err)
		}
	}
	t.Logf("seed %d (E2E_CRASH_SEED=%d replays it)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 0xc4a54))
	began := time.Now()

	srv := startServer(t)
	cfg := srv.restConfig(t)
	if _, err := newCRDClient(t, cfg).Create(t.Context(), readCRD(t), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create CRD: %v", err)
	}
	waitEstablished(t, cfg)

	ld := newCrashLoad(t, seed)
	ld.connect(t, srv)
	ld.startWriters()

	for kill := 1; kill <= crashKills; kill++ {
		ld.waitAcks(t, srv, crashMinAcks+rng.IntN(crashMaxAcks-crashMinAcks+1))
		time.Sleep(time.Duration(rng.IntN(2000)) * time.Microsecond) // land between or inside requests
		ld.disrupt("SIGKILL")
		ld.down()
		srv.kill()
		checkNoPanic(t, srv, fmt.Sprintf("before SIGKILL %d", kill))
		ld.waitParked()
		t.Logf("SIGKILL %d: %s", kill, ld.phaseSummary())
		srv.start(t) // waits for /readyz
		ld.verify(t, srv, fmt.Sprintf("after SIGKILL %d", kill))
		ld.connect(t, srv)
	}

	// Once with SIGTERM: the server stops accepting, lets the requests in
	// flight finish, and exits 0 (srv.stop checks the exit status). The
	// writers keep going while it shuts down.
	ld.waitAcks(t, srv, crashMinAcks+rng.IntN(crashMaxAcks-crashMinAcks+1))
	time.Sleep(time.Duration(rng.IntN(2000)) * time.Microsecond)
	ld.disrupt("SIGTERM")
	ld.sigterm.Store(true)
	srv.stop(t)
	checkNoPanic(t, srv, "until SIGTERM")
	ld.down()
	ld.waitParked()
	t.Logf("SIGTERM: %s", ld.phaseSummary())
	inflight := ld.inflightAtTerm()
	t.Logf("requests in flight when SIGTERM was sent: %s", inflight)
	srv.start(t)
	ld.verify(t, srv, "after SIGTERM")
	// The server takes writes again after all of that.
	ld.connect(t, srv)
	ld.waitAcks(t, srv, max(100, crashMinWrites-int(ld.acks.Load())))
	ld.stopWriters()
	ld.verify(t, srv, "at the end")
	checkNoPanic(t, srv, "at the end")

	if ld.reportErrors(t) {
		t.Logf("crdserver's log since the last start:\n%s", srv.log)
	}
	t.Logf("%d writes attempted, %d acknowledged, %d without an answer or failed; %d SIGKILLs and 1 SIGTERM; %d objects; %v",
		ld.attempts.Load(), ld.acks.Load(), ld.attempts.Load()-ld.acks.Load(), crashKills, ld.objectCount(), time.Since(began).Round(time.Millisecond))
}

// crashVersion is one write of a CronTab: its sequence number (in
// spec.replicas), a payload (spec.image) and a checksum of both and the
// name (spec.cronSpec).
type crashVersion struct {
	seq   int64
	image string
	sum   string
	rv    string // resourceVersion the server returned; "" for an attempt
}

func (v crashVersion) String() string {
	if v.rv == "" {
		return fmt.Sprintf("seq %d", v.seq)
	}
	return fmt.Sprintf("seq %d at resourceVersion %s", v.seq, v.rv)
}

func crashSum(name string, seq int64, image string) string {
	h := sha256.Sum256([]byte(name + "\x00" + strconv.FormatInt(seq, 10) + "\x00" + image))
	return "sha256:" + hex.EncodeToString(h[:])
}

func crashObject(name string, v crashVersion, resourceVersion string) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "stable.example.com/v1",
		"kind":       "CronTab",
		"metadata":   map[string]any{"name": name, "namespace": crashNamespace},
		"spec":       map[string]any{"replicas": v.seq, "image": v.image, "cronSpec": v.sum},
	}}
	if resourceVersion != "" {
		obj.SetResourceVersion(resourceVersion)
	}
	return obj
}

// parseCrashObject reads a CronTab back and checks its checksum: an object
// that fails here is damaged (half-written, or mixed with another).
func parseCrashObject(obj *unstructured.Unstructured) (crashVersion, error) {
	seq, ok, err := unstructured.NestedInt64(obj.Object, "spec", "replicas")
	if err != nil || !ok {
		return crashVersion{}, fmt.Errorf("spec.replicas missing or not an integer (%v)", err)
	}
	image, ok, err := unstructured.NestedString(obj.Object, "spec", "image")
	if err != nil || !ok {
		return crashVersion{}, fmt.Errorf("spec.image missing or not a string (%v)", err)
	}
	sum, ok, err := unstructured.NestedString(obj.Object, "spec", "cronSpec")
	if err != nil || !ok {
		return crashVersion{}, fmt.Errorf("spec.cronSpec missing or not a string (%v)", err)
	}
	if want := crashSum(obj.GetName(), seq, image); sum != want {
		return crashVersion{}, fmt.Errorf("checksum mismatch: spec.cronSpec %q, but name, spec.replicas and spec.image sum to %q", sum, want)
	}
	if obj.GetResourceVersion() == "" {
		return crashVersion{}, errors.New("no metadata.resourceVersion")
	}
	return crashVersion{seq: seq, image: image, sum: sum, rv: obj.GetResourceVersion()}, nil
}

// crashTracked is what the test knows about one CronTab.
type crashTracked struct {
	name    string
	writer  int
	known   *crashVersion  // the last acknowledged or observed state; nil: known not to exist
	how     string         // how known was learned
	uid     types.UID      // once it exists
	pending []crashVersion // writes sent after known whose outcome is unknown
	nextSeq int64
}

// check says what is wrong with got (nil: absent) as the state of o, or "".
func (o *crashTracked) check(got *unstructured.Unstructured) string {
	if got == nil {
		if o.known != nil {
			return fmt.Sprintf("%s is gone, but %s was its %s", o.name, o.known, o.how)
		}
		return ""
	}
	v, err := parseCrashObject(got)
	if err != nil {
		return fmt.Sprintf("%s is damaged: %v; the object: %v", o.name, err, got.Object)
	}
	if o.uid != "" && got.GetUID() != o.uid {
		return fmt.Sprintf("%s has uid %s, but it was %s", o.name, got.GetUID(), o.uid)
	}
	if o.known != nil && v.seq == o.known.seq {
		if v.image != o.known.image {
			return fmt.Sprintf("%s holds seq %d with a payload other than the one written", o.name, v.seq)
		}
		if v.rv != o.known.rv {
			return fmt.Sprintf("%s holds the content of its %s (%s) but resourceVersion %s", o.name, o.how, o.known, v.rv)
		}
		return ""
	}
	for _, p := range o.pending {
		if p.seq == v.seq && p.image == v.image {
			if o.known != nil {
				if a, b := rvNumber(v.rv), rvNumber(o.known.rv); a <= b {
					return fmt.Sprintf("%s holds a later write (seq %d) at resourceVersion %s, not above the %s of its %s", o.name, v.seq, v.rv, o.known.rv, o.how)
				}
			}
			return ""
		}
	}
	var pend []string
	for _, p := range o.pending {
		pend = append(pend, strconv.FormatInt(p.seq, 10))
	}
	last := "it was never acknowledged"
	if o.known != nil {
		last = fmt.Sprintf("its %s is %s", o.how, o.known)
	}
	return fmt.Sprintf("%s holds %s, but %s, and the writes that may have been in flight are seqs [%s]", o.name, v, last, strings.Join(pend, " "))
}

// settle records got (nil: absent) as known; the server is up and nothing
// else writes o, so no earlier write can still land.
func (o *crashTracked) settle(got *unstructured.Unstructured, how string) {
	o.pending = nil
	if got == nil {
		o.known, o.uid, o.how = nil, "", how
		return
	}
	v, err := parseCrashObject(got)
	if err != nil {
		// Reported by check; carry on from what the server holds.
		v = crashVersion{seq: -1, rv: got.GetResourceVersion()}
	}
	o.known, o.uid, o.how = &v, got.GetUID(), how
}

func rvNumber(rv string) uint64 {
	n, _ := strconv.ParseUint(rv, 10, 64)
	return n
}

// crashConn is one server process as the writers reach it.
type crashConn struct {
	epoch     int
	h2, h1    dynamic.ResourceInterface // HTTP/2 (client-go's default) and HTTP/1.1
	disrupted atomic.Pointer[string]    // how the process was stopped, once it was
}

type crashLoad struct {
	t    *testing.T
	seed uint64

	mu      sync.Mutex // guards all below, and every crashTracked
	cond    *sync.Cond
	cur     *crashConn // nil while the server is down
	epoch   int
	parked  int
	done    bool
	objects []*crashTracked
	// Errors by kind and message: unexpected ones fail the test.
	unexpected []string
	tolerated  map[string]int
	// Phase counters, reset by phaseSummary.
	phaseAttempts, phaseAcks int
	phaseStart               time.Time
	// Requests in flight when SIGTERM was sent, by outcome.
	termInflight     map[string]int
	termInflightErrs []string

	attempts, acks atomic.Int64
	sigterm        atomic.Bool
	wg             sync.WaitGroup
	stop           chan struct{}
}

func newCrashLoad(t *testing.T, seed uint64) *crashLoad {
	ld := &crashLoad{t: t, seed: seed, tolerated: map[string]int{}, termInflight: map[string]int{}, stop: make(chan struct{})}
	ld.cond = sync.NewCond(&ld.mu)
	t.Cleanup(ld.stopWriters)
	return ld
}

// connect points the writers at the server's current URL and lets them go.
func (ld *crashLoad) connect(t *testing.T, srv *server) {
	t.Helper()
	clients := make([]dynamic.ResourceInterface, 2)
	for i, protos := range [][]string{nil, {"http/1.1"}} {
		cfg := srv.restConfig(t)
		cfg.QPS, cfg.Burst = -1, 0
		cfg.Timeout = time.Minute // only against a hang
		cfg.NextProtos = protos
		dyn, err := dynamic.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		clients[i] = dyn.Resource(cronTabs).Namespace(crashNamespace)
	}
	ld.mu.Lock()
	defer ld.mu.Unlock()
	ld.epoch++
	ld.phaseStart = time.Now()
	ld.cur = &crashConn{epoch: ld.epoch, h2: clients[0], h1: clients[1]}
	ld.cond.Broadcast()
}

// disrupt marks the current process as being stopped: errors from it are
// expected from now on.
func (ld *crashLoad) disrupt(how string) {
	ld.mu.Lock()
	defer ld.mu.Unlock()
	ld.cur.disrupted.Store(&how)
}

// down makes writers wait for the next connect once their request is done.
func (ld *crashLoad) down() {
	ld.mu.Lock()
	defer ld.mu.Unlock()
	ld.cur = nil
}

// waitParked waits until every writer waits for the server, its last
// outcome recorded.
func (ld *crashLoad) waitParked() {
	ld.mu.Lock()
	defer ld.mu.Unlock()
	for ld.parked < crashWriters {
		ld.cond.Wait()
	}
}

// current is the server to write to; it waits while the server is down, and
// returns nil once the writers are to stop.
func (ld *crashLoad) current() *crashConn {
	ld.mu.Lock()
	defer ld.mu.Unlock()
	for ld.cur == nil && !ld.done {
		ld.parked++
		ld.cond.Broadcast()
		ld.cond.Wait()
		ld.parked--
	}
	if ld.done {
		return nil
	}
	return ld.cur
}

func (ld *crashLoad) startWriters() {
	for w := range crashWriters {
		rng := rand.New(rand.NewPCG(ld.seed, uint64(w)+1))
		ld.wg.Go(func() { ld.writer(w, rng) })
	}
}

func (ld *crashLoad) stopWriters() {
	ld.mu.Lock()
	if !ld.done {
		ld.done = true
		close(ld.stop)
	}
	ld.cond.Broadcast()
	ld.mu.Unlock()
	ld.wg.Wait()
}

// waitAcks returns once n more writes were acknowledged.
func (ld *crashLoad) waitAcks(t *testing.T, srv *server, n int) {
	t.Helper()
	start := ld.acks.Load()
	last, lastChange := start, time.Now()
	for ld.acks.Load()-start < int64(n) {
		if a := ld.acks.Load(); a != last {
			last, lastChange = a, time.Now()
		} else if time.Since(lastChange) > eventTimeout {
			ld.stopWriters()
			ld.reportErrors(t)
			t.Fatalf("no write was acknowledged for %v (%d of %d so far); crdserver's log:\n%s", eventTimeout, last-start, n, srv.log)
		}
		time.Sleep(time.Millisecond)
	}
}

func (ld *crashLoad) writer(id int, rng *rand.Rand) {
	var mine []*crashTracked
	ctx := ld.t.Context()
	for {
		c := ld.current()
		if c == nil {
			return
		}
		res := c.h2
		if id%2 == 1 {
			res = c.h1
		}

		// After a write without an answer, read the object back first: the
		// next update needs its resourceVersion.
		var unsure *crashTracked
		ld.mu.Lock()
		for _, o := range mine {
			if len(o.pending) > 0 {
				unsure = o
				break
			}
		}
		ld.mu.Unlock()
		if unsure != nil {
			got, err := res.Get(ctx, unsure.name, metav1.GetOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				ld.noteError(c, "get", err, false)
				ld.pause()
				continue
			}
			if err != nil {
				got = nil
			}
			ld.mu.Lock()
			if p := unsure.check(got); p != "" {
				ld.unexpected = append(ld.unexpected, "read back while the server runs: "+p)
			}
			unsure.settle(got, "state read back")
			ld.mu.Unlock()
			continue
		}

		var o *crashTracked
		if len(mine) < crashObjectsPerWriter && (len(mine) == 0 || rng.IntN(4) == 0) {
			o = &crashTracked{name: fmt.Sprintf("crash-w%d-%02d", id, len(mine)), writer: id}
			mine = append(mine, o)
			ld.mu.Lock()
			ld.objects = append(ld.objects, o)
			ld.mu.Unlock()
		} else {
			o = mine[rng.IntN(len(mine))]
		}
		v := crashVersion{seq: o.nextSeq, image: crashPayload(o.name, o.nextSeq, rng)}
		o.nextSeq++
		v.sum = crashSum(o.name, v.seq, v.image)
		ld.mu.Lock()
		o.pending = append(o.pending, v)
		known := o.known
		ld.phaseAttempts++
		ld.mu.Unlock()
		ld.attempts.Add(1)

		termBefore := ld.sigterm.Load()
		var got *unstructured.Unstructured
		var err error
		verb := "create"
		if known == nil {
			got, err = res.Create(ctx, crashObject(o.name, v, ""), metav1.CreateOptions{})
		} else {
			verb = "update"
			got, err = res.Update(ctx, crashObject(o.name, v, known.rv), metav1.UpdateOptions{})
		}
		inflightAtTerm := !termBefore && ld.sigterm.Load()
		if inflightAtTerm {
			ld.mu.Lock()
			ld.termInflight[outcomeKind(err)]++
			if err != nil {
				ld.termInflightErrs = append(ld.termInflightErrs, fmt.Sprintf("%s: %v", verb, err))
			}
			ld.mu.Unlock()
		}
		if err != nil {
			ld.noteError(c, verb, err, inflightAtTerm)
			if ctx.Err() == nil {
				ld.pause()
			}
			continue
		}
		ack, perr := parseCrashObject(got)
		ld.mu.Lock()
		switch {
		case perr != nil:
			ld.unexpected = append(ld.unexpected, fmt.Sprintf("the answer to the %s of %s seq %d is damaged: %v", verb, o.name, v.seq, perr))
		case ack.seq != v.seq || ack.image != v.image:
			ld.unexpected = append(ld.unexpected, fmt.Sprintf("the answer to the %s of %s seq %d holds seq %d", verb, o.name, v.seq, ack.seq))
		}
		v.rv = got.GetResourceVersion()
		o.known, o.pending, o.how = &v, nil, "acknowledged "+verb
		if verb == "create" {
			o.uid = got.GetUID()
		}
		ld.phaseAcks++
		ld.mu.Unlock()
		ld.acks.Add(1)
	}
}

// pause keeps a writer from spinning against a server that refuses it.
func (ld *crashLoad) pause() {
	select {
	case <-ld.stop:
	case <-time.After(5 * time.Millisecond):
	}
}

// crashPayload is spec.image: the name and sequence number, then filler of
// a random length (up to 4 KiB) so that objects span pages.
func crashPayload(name string, seq int64, rng *rand.Rand) string {
	const letters = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, rng.IntN(4096))
	for i := range b {
		b[i] = letters[rng.IntN(len(letters))]
	}
	return fmt.Sprintf("%s/%d/%s", name, seq, b)
}

// outcomeKind sorts a request's result: acknowledged, an HTTP error
// status, or no answer.
func outcomeKind(err error) string {
	if err == nil {
		return "acknowledged"
	}
	var st apierrors.APIStatus
	if errors.As(err, &st) && st.Status().Code != 0 {
		return fmt.Sprintf("HTTP %d", st.Status().Code)
	}
	return "no answer"
}

// noteError records a failed request. Failures are expected only from a
// process being stopped: with SIGKILL anything goes; under SIGTERM a
// request gets its answer, a 503/429, or no connection at all.
func (ld *crashLoad) noteError(c *crashConn, verb string, err error, inflightAtTerm bool) {
	if ld.t.Context().Err() != nil {
		return // the test is over
	}
	kind := outcomeKind(err)
	msg := fmt.Sprintf("%s: %s: %v", verb, kind, err)
	ld.mu.Lock()
	defer ld.mu.Unlock()
	how := c.disrupted.Load()
	switch {
	case kind == "HTTP 500" && strings.Contains(err.Error(), "etcdserver: request timed out"):
		// etcd took longer than its request timeout (5 s): the machine is
		// overloaded (other tests). The outcome is unknown, which the
		// read-back then checks; kube-apiserver answers 500 here too.
		ld.tolerated["etcd overloaded: "+shortError(msg)]++
	case how == nil:
		ld.unexpected = append(ld.unexpected, fmt.Sprintf("from a server that was not being stopped (epoch %d): %s", c.epoch, msg))
	case *how == "SIGTERM" && kind != "no answer" && kind != "HTTP 503" && kind != "HTTP 429":
		ld.unexpected = append(ld.unexpected, fmt.Sprintf("while shutting down on SIGTERM (in flight when it was sent: %v): %s", inflightAtTerm, msg))
	default:
		ld.tolerated[fmt.Sprintf("%s: %s", *how, shortError(msg))]++
	}
}

// shortError drops the parts of an error message that change from request
// to request (ports, object names), so that like errors count together.
func shortError(msg string) string {
	f := strings.Fields(msg)
	for i, w := range f {
		if strings.Contains(w, "127.0.0.1:") || strings.Contains(w, "crash-w") {
			f[i] = "…"
		}
	}
	return strings.Join(f, " ")
}

func (ld *crashLoad) phaseSummary() string {
	ld.mu.Lock()
	defer ld.mu.Unlock()
	s := fmt.Sprintf("%d writes sent in this phase, %d acknowledged, over %v", ld.phaseAttempts, ld.phaseAcks, time.Since(ld.phaseStart).Round(time.Millisecond))
	ld.phaseAttempts, ld.phaseAcks = 0, 0
	return s
}

func (ld *crashLoad) inflightAtTerm() string {
	ld.mu.Lock()
	defer ld.mu.Unlock()
	if len(ld.termInflight) == 0 {
		return "none"
	}
	var parts []string
	for k, n := range ld.termInflight {
		parts = append(parts, fmt.Sprintf("%d %s", n, k))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ") + "; " + strings.Join(ld.termInflightErrs, "; ")
}

func (ld *crashLoad) objectCount() int {
	ld.mu.Lock()
	defer ld.mu.Unlock()
	return len(ld.objects)
}

// reportErrors logs the expected failures and fails the test on the others.
func (ld *crashLoad) reportErrors(t *testing.T) (failed bool) {
	t.Helper()
	ld.mu.Lock()
	defer ld.mu.Unlock()
	var kinds []string
	for k := range ld.tolerated {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		t.Logf("expected failure, %d times: %s", ld.tolerated[k], k)
	}
	for i, u := range ld.unexpected {
		if i == 20 {
			t.Errorf("... and %d more", len(ld.unexpected)-i)
			break
		}
		t.Errorf("unexpected: %s", u)
	}
	failed = len(ld.unexpected) > 0
	ld.unexpected = nil
	return failed
}

// verify checks every CronTab against what the writers know, while they
// wait: by list (which also finds objects nobody wrote) and by get.
func (ld *crashLoad) verify(t *testing.T, srv *server, when string) {
	t.Helper()
	cfg := srv.restConfig(t)
	cfg.QPS = -1
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	res := dyn.Resource(cronTabs).Namespace(crashNamespace)
	ctx := t.Context()
	list, err := res.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("%s: list CronTabs: %v; crdserver's log:\n%s", when, err, srv.log)
	}
	listed := map[string]*unstructured.Unstructured{}
	for i := range list.Items {
		listed[list.Items[i].GetName()] = &list.Items[i]
	}

	ld.mu.Lock()
	defer ld.mu.Unlock()
	problems := 0
	report := func(format string, args ...any) {
		t.Helper()
		if problems++; problems <= 20 {
			t.Errorf(when+": "+format, args...)
		}
	}
	tracked := map[string]bool{}
	acked := 0
	for _, o := range ld.objects {
		tracked[o.name] = true
		if o.known != nil {
			acked++
		}
		inList := listed[o.name]
		if p := o.check(inList); p != "" {
			report("in the list: %s", p)
		}
		got, err := res.Get(ctx, o.name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			got = nil
		case err != nil:
			t.Fatalf("%s: get %s: %v", when, o.name, err)
		}
		if (got == nil) != (inList == nil) || (got != nil && got.GetResourceVersion() != inList.GetResourceVersion()) {
			report("get and list disagree on %s: get %v, list %v", o.name, rvOf(got), rvOf(inList))
		} else if p := o.check(got); p != "" {
			report("by get: %s", p)
		}
		o.settle(got, "state after the restart")
	}
	var strangers []string
	for name := range listed {
		if !tracked[name] {
			strangers = append(strangers, name)
		}
	}
	slices.Sort(strangers)
	if len(strangers) > 0 {
		report("objects nobody created: %q", strangers)
	}
	if problems > 20 {
		t.Errorf("%s: ... %d problems in all", when, problems)
	}
	t.Logf("%s: %d CronTabs checked, %d of them known to exist before", when, len(list.Items), acked)
}

func rvOf(obj *unstructured.Unstructured) string {
	if obj == nil {
		return "absent"
	}
	return "resourceVersion " + obj.GetResourceVersion()
}
