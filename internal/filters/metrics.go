package filters

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/crdserver/crdserver/internal/request"
)

// Metrics are the server's Prometheus metrics, named and labelled as
// kube-apiserver's.
type Metrics struct {
	Registry   *prometheus.Registry
	requests   *prometheus.CounterVec
	duration   *prometheus.HistogramVec
	inflight   *prometheus.GaugeVec
	deprecated *prometheus.GaugeVec
}

// NewMetrics registers the request metrics and the Go and process
// collectors in a new registry.
func NewMetrics() *Metrics {
	m := &Metrics{Registry: prometheus.NewRegistry()}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "apiserver_request_total",
		Help: "Counter of apiserver requests broken out for each verb, dry run value, group, version, resource, scope, component, and HTTP response code.",
	}, []string{"verb", "dry_run", "group", "version", "resource", "subresource", "scope", "component", "code"})
	m.duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "apiserver_request_duration_seconds",
		Help: "Response latency distribution in seconds for each verb, dry run value, group, version, resource, subresource, scope and component.",
		Buckets: []float64{0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2, 3,
			4, 5, 6, 8, 10, 15, 20, 30, 45, 60},
	}, []string{"verb", "dry_run", "group", "version", "resource", "subresource", "scope", "component"})
	m.inflight = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "apiserver_current_inflight_requests",
		Help: "Maximal number of currently used inflight request limit of this apiserver per request kind in last second.",
	}, []string{"request_kind"})
	m.deprecated = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "apiserver_requested_deprecated_apis",
		Help: "Gauge of deprecated APIs that have been requested, broken out by API group, version, resource, subresource, and removed_release.",
	}, []string{"group", "version", "resource", "subresource", "removed_release"})
	m.Registry.MustRegister(m.requests, m.duration, m.inflight, m.deprecated,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Handler serves /metrics.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{})
}

// metricVerb is the verb kube-apiserver reports: LIST, GET, WATCH, POST,
// PUT, PATCH, DELETE, APPLY, or the HTTP method for non-resource paths.
func metricVerb(r *http.Request, info *request.Info) string {
	if !info.IsResourceRequest {
		return strings.ToUpper(r.Method)
	}
	switch info.Verb {
	case "list":
		return "LIST"
	case "watch":
		return "WATCH"
	case "get":
		return "GET"
	case "create":
		return "POST"
	case "update":
		return "PUT"
	case "patch":
		if strings.HasPrefix(r.Header.Get("Content-Type"), request.ApplyPatch) {
			return "APPLY"
		}
		return "PATCH"
	case "delete", "deletecollection":
		return "DELETE"
	}
	return strings.ToUpper(r.Method)
}

func scope(info *request.Info) string {
	switch {
	case !info.IsResourceRequest:
		return ""
	case info.Name != "":
		return "resource"
	case info.Namespace != "":
		return "namespace"
	}
	return "cluster"
}

// WithMetrics counts and times every request.
func (m *Metrics) WithMetrics(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		info := request.InfoFrom(r.Context())
		kind := "readOnly"
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			kind = "mutating"
		}
		g := m.inflight.WithLabelValues(kind)
		g.Inc()
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			g.Dec()
			code := sw.code
			if code == 0 {
				code = http.StatusOK
			}
			dry := ""
			if _, ok := r.URL.Query()["dryRun"]; ok {
				dry = "All"
			}
			verb := metricVerb(r, info)
			group, version, res, sub := info.Group, info.Version, info.Resource, info.Subresource
			if !info.IsResourceRequest {
				group, version, res, sub = "", "", "", ""
			}
			m.requests.WithLabelValues(verb, dry, group, version, res, sub, scope(info), "apiserver", strconv.Itoa(code)).Inc()
			if info.Deprecated {
				m.deprecated.WithLabelValues(group, version, res, sub, "").Set(1)
			}
			if verb != "WATCH" {
				m.duration.WithLabelValues(verb, dry, group, version, res, sub, scope(info), "apiserver").Observe(time.Since(start).Seconds())
			}
		}()
		next.ServeHTTP(sw, r)
	})
}
