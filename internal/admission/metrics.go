package admission

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/component-base/metrics/legacyregistry"
)

// metricPrefixes name the metric families of the admission plugins, which
// Kubernetes registers in its process-wide legacy registry: the admission
// steps, controllers and webhooks (k8s.io/apiserver pkg/admission/metrics),
// the policies (.../policy/validating/metrics, .../policy/mutating/metrics)
// and the webhook client's certificate checks (pkg/util/webhook).
var metricPrefixes = []string{
	"apiserver_admission_",
	"apiserver_validating_admission_policy_",
	"apiserver_mutating_admission_policy_",
	"apiserver_webhooks_",
}

// metricsCollector exports the admission metric families of Kubernetes'
// legacy registry to another registry (crdserver's), as they are at each
// scrape.
type metricsCollector struct {
	desc *prometheus.Desc
}

func newMetricsCollector() metricsCollector {
	// The families are only known when gathered, so the collector describes
	// one descriptor of its own: enough for a registry to refuse the same
	// collector twice. It is never collected.
	return metricsCollector{desc: prometheus.NewDesc("crdserver_admission_metrics_export",
		"Exports the metrics of the Kubernetes admission plugins.", nil, nil)}
}

// Describe implements prometheus.Collector.
func (c metricsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector.
func (c metricsCollector) Collect(ch chan<- prometheus.Metric) {
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil && len(families) == 0 {
		ch <- prometheus.NewInvalidMetric(c.desc, err)
		return
	}
	for _, f := range families {
		if !exported(f.GetName()) {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := make([]string, 0, len(m.GetLabel()))
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName())
			}
			ch <- gatheredMetric{desc: prometheus.NewDesc(f.GetName(), f.GetHelp(), labels, nil), m: m}
		}
	}
}

func exported(name string) bool {
	for _, p := range metricPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// gatheredMetric is a metric gathered from another registry.
type gatheredMetric struct {
	desc *prometheus.Desc
	m    *dto.Metric
}

// Desc implements prometheus.Metric.
func (g gatheredMetric) Desc() *prometheus.Desc { return g.desc }

// Write implements prometheus.Metric.
func (g gatheredMetric) Write(out *dto.Metric) error {
	out.Label = g.m.Label
	out.Gauge = g.m.Gauge
	out.Counter = g.m.Counter
	out.Summary = g.m.Summary
	out.Untyped = g.m.Untyped
	out.Histogram = g.m.Histogram
	out.TimestampMs = g.m.TimestampMs
	return nil
}
