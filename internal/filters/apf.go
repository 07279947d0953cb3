package filters

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/runtime/schema"
	apirequest "k8s.io/apiserver/pkg/endpoints/request"
	genericfilters "k8s.io/apiserver/pkg/server/filters"
	"k8s.io/apiserver/pkg/server/mux"
	storage "k8s.io/apiserver/pkg/storage"
	utilflowcontrol "k8s.io/apiserver/pkg/util/flowcontrol"
	fcmetrics "k8s.io/apiserver/pkg/util/flowcontrol/metrics"
	fcrequest "k8s.io/apiserver/pkg/util/flowcontrol/request"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/crdserver/crdserver/internal/auth"
	"github.com/crdserver/crdserver/internal/registry"
	"github.com/crdserver/crdserver/internal/request"
	"github.com/crdserver/crdserver/internal/store"
)

// APF is API Priority and Fairness as kube-apiserver runs it, with
// k8s.io/apiserver's own implementation: requests are classified by the
// FlowSchemas, queued fairly and served within the seats of their
// PriorityLevelConfigurations (429 with Retry-After when a level is full),
// and the FlowSchemas' Dangling condition is kept up to date. It reads
// its configuration through informers on the server's own loopback
// client.
type APF struct {
	gate      *clientGate
	ctl       utilflowcontrol.Interface
	factory   informers.SharedInformerFactory
	estimator fcrequest.WorkEstimatorFunc
	debug     *mux.PathRecorderMux
	stats     *objectStats
}

// APFDebugPaths are the debug dumps APF serves (under /debug/, authorized
// as non-resource URLs).
var APFDebugPaths = []string{
	"/debug/api_priority_and_fairness/dump_priority_levels",
	"/debug/api_priority_and_fairness/dump_queues",
	"/debug/api_priority_and_fairness/dump_requests",
}

// APFConcurrency is the server's total concurrency limit under APF, as
// kube-apiserver computes it from --max-requests-inflight and
// --max-mutating-requests-inflight (negative limits, which crdserver reads
// as no limit, count 0): their sum. 0 means no APF.
func APFConcurrency(readOnly, mutating int) int {
	return max(readOnly, 0) + max(mutating, 0)
}

var registerAPFMetrics sync.Once

// NewAPF makes the APF of a server with concurrency seats in all. loop is
// the server's loopback client config; index gives what the server serves
// (for the cost of lists, by the number and size of their objects).
func NewAPF(loop *rest.Config, concurrency int, index func() *registry.Index) (*APF, error) {
	gate := &clientGate{}
	loop = rest.CopyConfig(loop)
	loop.Wrap(func(rt http.RoundTripper) http.RoundTripper { gate.next = rt; return gate })
	clients, err := kubernetes.NewForConfig(loop)
	if err != nil {
		return nil, err
	}
	registerAPFMetrics.Do(fcmetrics.Register)
	a := &APF{gate: gate, factory: informers.NewSharedInformerFactory(clients, 0), stats: &objectStats{index: index, seen: map[string]statsEntry{}}}
	a.ctl = utilflowcontrol.New(a.factory, clients.FlowcontrolV1(), concurrency)
	a.estimator = fcrequest.NewWorkEstimator(a.stats.get, a.ctl.GetInterestedWatchCount, fcrequest.DefaultWorkEstimatorConfig(), a.ctl.GetMaxSeats)
	a.debug = mux.NewPathRecorderMux("apf")
	a.ctl.Install(a.debug)
	return a, nil
}

// Run follows the configuration until ctx ends, and returns once the
// requests of its own client (status updates) are done.
func (a *APF) Run(ctx context.Context) {
	a.factory.Start(ctx.Done())
	genericfilters.StartPriorityAndFairnessWatermarkMaintenance(ctx.Done())
	go func() { _ = a.ctl.Run(ctx.Done()) }()
	<-ctx.Done()
	a.gate.close()
	a.factory.Shutdown()
}

// clientGate passes the requests of APF's own client until closed, and
// refuses them after: close waits for those in flight, so that none
// reaches a server that is stopping.
type clientGate struct {
	next    http.RoundTripper
	mu      sync.Mutex
	closed  bool
	running sync.WaitGroup
}

func (g *clientGate) RoundTrip(r *http.Request) (*http.Response, error) {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil, errAPFStopped
	}
	g.running.Add(1)
	g.mu.Unlock()
	defer g.running.Done()
	return g.next.RoundTrip(r)
}

func (g *clientGate) close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	g.running.Wait()
}

var errAPFStopped = errors.New("priority and fairness has stopped")

// ServeDebug serves the APFDebugPaths.
func (a *APF) ServeDebug(w http.ResponseWriter, r *http.Request) { a.debug.ServeHTTP(w, r) }

// WithPriorityAndFairness is k8s.io/apiserver's filter on crdserver's
// request info and user. Requests wait in their queue at most a quarter
// of their timeout (a minute at most); a watch holds its seats until its
// response starts, as kube-apiserver's do until the watch is set up.
func (a *APF) WithPriorityAndFairness(next http.Handler, requestTimeout time.Duration) http.Handler {
	longRunning := func(_ *http.Request, ri *apirequest.RequestInfo) bool { return ri.Verb == "watch" }
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isWatch(r) {
			w = &watchStarted{ResponseWriter: w, ctx: r.Context()}
		}
		next.ServeHTTP(w, r)
	})
	waitLimit := requestTimeout / 4
	if waitLimit <= 0 {
		waitLimit = time.Minute
	}
	h := genericfilters.WithPriorityAndFairness(inner, longRunning, a.ctl, a.estimator, waitLimit)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		info := request.InfoFrom(r.Context())
		u, ok := auth.UserFrom(r.Context())
		if info == nil || !ok {
			next.ServeHTTP(w, r)
			return
		}
		ctx := apirequest.WithRequestInfo(r.Context(), kubeRequestInfo(info))
		ctx = apirequest.WithUser(ctx, u)
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}

func isWatch(r *http.Request) bool {
	ri, ok := apirequest.RequestInfoFrom(r.Context())
	return ok && ri.Verb == "watch"
}

// kubeRequestInfo is k8s.io/apiserver's RequestInfo of a request.
func kubeRequestInfo(info *request.Info) *apirequest.RequestInfo {
	ri := &apirequest.RequestInfo{
		IsResourceRequest: info.IsResourceRequest,
		Path:              info.Path,
		Verb:              info.Verb,
		APIPrefix:         info.APIPrefix,
		APIGroup:          info.Group,
		APIVersion:        info.Version,
		Namespace:         info.Namespace,
		Resource:          info.Resource,
		Subresource:       info.Subresource,
		Name:              info.Name,
	}
	if info.IsResourceRequest {
		ri.Parts = []string{info.Resource}
		if info.Name != "" {
			ri.Parts = append(ri.Parts, info.Name)
		}
		if info.Subresource != "" {
			ri.Parts = append(ri.Parts, info.Subresource)
		}
	} else {
		ri.Parts = strings.Split(strings.Trim(info.Path, "/"), "/")
	}
	return ri
}

// watchStarted tells APF that a watch is set up when its response starts
// (its headers are flushed): the seats it held are free.
type watchStarted struct {
	http.ResponseWriter
	ctx  context.Context
	once sync.Once
}

func (w *watchStarted) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
	w.once.Do(func() { utilflowcontrol.WatchInitialized(w.ctx) })
}

func (w *watchStarted) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// objectStats are the number and average size of the objects of each
// resource, for the cost of lists: read from the watch caches, at most
// once a second per resource.
type objectStats struct {
	index func() *registry.Index
	mu    sync.Mutex
	seen  map[string]statsEntry
}

type statsEntry struct {
	stats storage.Stats
	at    time.Time
}

// statsSample is how many objects the average size is taken from.
const statsSample = 16

func (o *objectStats) get(key string) (storage.Stats, error) {
	o.mu.Lock()
	e, ok := o.seen[key]
	o.mu.Unlock()
	if ok && time.Since(e.at) < time.Second {
		return e.stats, nil
	}
	cache := o.cache(schema.ParseGroupResource(key))
	if cache == nil {
		return storage.Stats{}, fcrequest.ObjectCountNotFoundErr
	}
	l := cache.List(store.ListOptions{Limit: statsSample})
	st := storage.Stats{ObjectCount: int64(len(l.Items)) + l.Remaining}
	if n := len(l.Items); n > 0 {
		var size int
		for _, it := range l.Items {
			size += len(it.Bytes())
		}
		st.EstimatedAverageObjectSizeBytes = int64(size / n)
	}
	o.mu.Lock()
	o.seen[key] = statsEntry{stats: st, at: time.Now()}
	o.mu.Unlock()
	return st, nil
}

// cache finds the watch cache of a resource (nil: not served).
func (o *objectStats) cache(gr schema.GroupResource) *store.Cache {
	ix := o.index()
	if ix == nil {
		return nil
	}
	if res := ix.CRDResources[gr.String()]; res != nil {
		return res.Cache
	}
	for _, res := range ix.Resources {
		if ix.Builtin[res] && res.Group == gr.Group && res.Plural == gr.Resource {
			return res.Cache
		}
	}
	return nil
}

// apfGatherer gathers APF's metrics (apiserver_flowcontrol_*), which
// k8s.io/apiserver registers in component-base's legacy registry.
var apfGatherer = prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
	all, err := legacyregistry.DefaultGatherer.Gather()
	out := all[:0]
	for _, mf := range all {
		if strings.HasPrefix(mf.GetName(), "apiserver_flowcontrol_") {
			out = append(out, mf)
		}
	}
	return out, err
})

// HandlerWithAPF serves /metrics with APF's metrics too.
func (m *Metrics) HandlerWithAPF() http.Handler {
	return promhttp.HandlerFor(prometheus.Gatherers{m.Registry, apfGatherer}, promhttp.HandlerOpts{})
}
