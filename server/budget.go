package server

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/crdserver/crdserver/internal/budget"
)

// budgetCollectors are the metrics of the CRD memory budget: what it holds
// of its bound, and what it built and released.
func budgetCollectors(p *budget.Pool) []prometheus.Collector {
	stat := func(f func(budget.Stats) float64) func() float64 {
		return func() float64 { return f(p.Stats()) }
	}
	return []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "crdserver_crd_memory_budget_bytes",
			Help: "The bound on the estimated bytes of what is built for CRDs when first needed (--crd-memory-budget); 0: none.",
		}, stat(func(s budget.Stats) float64 { return float64(s.Limit) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "crdserver_crd_memory_used_bytes",
			Help: "The estimated bytes of what is built for CRDs and held now: compiled schemas and CEL programs, type converters, OpenAPI documents.",
		}, stat(func(s budget.Stats) float64 { return float64(s.Used) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "crdserver_crd_memory_values",
			Help: "How many built values the CRD memory budget holds now.",
		}, stat(func(s budget.Stats) float64 { return float64(s.Values) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "crdserver_crd_memory_builds_total",
			Help: "Values built for CRDs when first needed, or again after a release.",
		}, stat(func(s budget.Stats) float64 { return float64(s.Builds) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "crdserver_crd_memory_releases_total",
			Help: "Values released to keep within the CRD memory budget (least recently used first).",
		}, stat(func(s budget.Stats) float64 { return float64(s.Releases) })),
	}
}
