package main

import (
	"fmt"
	"path/filepath"
)

// convSide is the conversion benchmark of one server (convert-NAME.json).
type convSide struct {
	res *convertResult
	why string // why there is none
}

func loadConvSide(dir, name string) convSide {
	var r convertResult
	if err := readJSON(filepath.Join(dir, "convert-"+name+".json"), &r); err != nil {
		return convSide{why: "not measured"}
	}
	return convSide{res: &r}
}

// listVal is a figure of one measured collection, or why there is none.
func (s convSide) listVal(name string, f func(*convList) float64, prec int, unit string) val {
	if s.res == nil {
		return none(s.why)
	}
	cl := s.res.list(name)
	if cl == nil {
		return none("not reached")
	}
	for _, f := range s.res.Failures {
		if f.Phase == "list "+name {
			return none("**failed** (see Failures)")
		}
	}
	if len(cl.Samples) == 0 {
		return none("not reached")
	}
	return num(f(cl), prec, unit)
}

// ratioVal is webhook-v1 ÷ none-v1 (medians).
func (s convSide) ratioVal() val {
	w := s.listVal("webhook-v1", func(c *convList) float64 { return c.MedianMs }, 1, "")
	n := s.listVal("none-v1", func(c *convList) float64 { return c.MedianMs }, 1, "")
	if !w.ok {
		return w
	}
	if !n.ok || n.v == 0 {
		return n
	}
	return num(w.v/n.v, 2, "×")
}

// convertReport writes the webhook conversion section and returns its rows
// for the Targets table and its failures.
func convertReport(dir string, p func(string, ...any)) (targets [][]string, fails []string) {
	c, r := loadConvSide(dir, "crdserver"), loadConvSide(dir, "reference")
	if c.res == nil && r.res == nil {
		return nil, nil
	}
	n, lists := 0, 0
	for _, s := range []convSide{c, r} {
		if s.res != nil && n == 0 {
			n, lists = s.res.N, s.res.ListsPerColl
		}
	}
	p("## Webhook conversion\n\n")
	p("CronTabs of the Kubernetes documentation: %s objects stored in v1beta1 (`hostPort`) read as v1 (`host`, `port`) through the example webhook "+
		"(`examples/crontab-conversion`, url + caBundle, `conversionReviewVersions: [v1]`), beside the same list of a second CRD with None conversion. "+
		"Each figure is over %d plain GETs of the whole collection (no limit), the four collections taken in turn round by round, after one unmeasured warm-up GET of each. "+
		"See \"How it was measured\" for the webhook and its counter.\n\n", commas(n), lists)
	t := newTable("metric", "crdserver", "reference")
	row := func(metric string, f func(convSide) val) { t.row(metric, f(c), f(r)) }
	medianOf := func(name string) func(convSide) val {
		return func(s convSide) val {
			return s.listVal(name, func(c *convList) float64 { return c.MedianMs }, 1, " ms")
		}
	}
	minOf := func(name string) func(convSide) val {
		return func(s convSide) val { return s.listVal(name, func(c *convList) float64 { return c.MinMs }, 1, " ms") }
	}
	field := func(name string, f func(*convList) float64, prec int, unit string) func(convSide) val {
		return func(s convSide) val { return s.listVal(name, f, prec, unit) }
	}
	row(fmt.Sprintf("list of %s, stored v1beta1, read as **v1 through the webhook**: median", commas(n)), medianOf("webhook-v1"))
	row("… min", minOf("webhook-v1"))
	row("… max", field("webhook-v1", func(c *convList) float64 { return c.MaxMs }, 1, " ms"))
	row("… **webhook calls** per GET (most seen in one GET)", field("webhook-v1", func(c *convList) float64 { return float64(c.CallsPerList) }, 0, ""))
	row("… objects sent to the webhook per GET", field("webhook-v1", func(c *convList) float64 { return float64(c.ObjectsPerList) }, 0, ""))
	row("… time inside the example webhook's handler per GET, median (its decode, conversion and encode; in crdbench)",
		field("webhook-v1", func(c *convList) float64 { return c.WebhookMsMed }, 1, " ms"))
	row("… reading the ConversionReview bodies in the webhook per GET, median",
		field("webhook-v1", func(c *convList) float64 { return c.WebhookReadMed }, 1, " ms"))
	row("… the counter's own time per GET, median (in the list time, not the handler's)",
		field("webhook-v1", func(c *convList) float64 { return c.CounterMsMed }, 2, " ms"))
	row("… the rest of each GET (list time − handler − body read − counter), median: the server's own work, TLS, transfer",
		field("webhook-v1", func(c *convList) float64 {
			var rest []float64
			for _, s := range c.Samples {
				rest = append(rest, s.Ms-s.Webhook.BusyMs-s.Webhook.ReadMs-s.Webhook.CountMs)
			}
			return median(rest)
		}, 1, " ms"))
	row("… items returned, all checked (v1, `host`/`port` converted from each object's `hostPort`)", field("webhook-v1", func(c *convList) float64 { return float64(c.Items) }, 0, ""))
	row("… response size", field("webhook-v1", func(c *convList) float64 { return float64(c.Bytes) / 1e6 }, 2, " MB"))
	row("first GET through the webhook (warm-up, not in the median: opens the webhook connection)", func(s convSide) val {
		if s.res == nil {
			return none(s.why)
		}
		if cl := s.res.list("webhook-v1"); cl != nil && cl.Warmup != nil && cl.Warmup.Status == 200 {
			return val{v: cl.Warmup.Ms, ok: true, prec: 1, unit: fmt.Sprintf(" ms, %d calls", cl.Warmup.Webhook.Calls)}
		}
		return none("not measured")
	})
	row(fmt.Sprintf("same list, **None conversion** (`%s`, read as v1): median", noneCRDName), medianOf("none-v1"))
	row("… min", minOf("none-v1"))
	row("**webhook ÷ None** (medians)", convSide.ratioVal)
	row("same list in the storage version v1beta1, no conversion (Webhook CRD): median", medianOf("webhook-v1beta1"))
	row("same list in v1beta1 (None CRD): median", medianOf("none-v1beta1"))
	row("webhook calls while creating the objects in v1beta1 (Webhook CRD's creates)", func(s convSide) val {
		if s.res == nil {
			return none(s.why)
		}
		h, ok := s.res.PopulateHooks["populate-webhook"]
		if !ok {
			return none("not reached")
		}
		return val{v: float64(h.Calls), ok: true, unit: fmt.Sprintf(" (%s objects)", commas(int(h.Objects)))}
	})
	row("webhook calls from the CRDs' creation to the first GET (both CRDs' creates and any conversion trailing them)", func(s convSide) val {
		if s.res == nil {
			return none(s.why)
		}
		if s.res.BeforeLists == nil {
			return none("not reached")
		}
		h := s.res.BeforeLists
		return val{v: float64(h.Calls), ok: true, unit: fmt.Sprintf(" (%s objects)", commas(int(h.Objects)))}
	})
	row("webhook calls while deleting the two CRDs afterwards (`-cleanup`, reference only)", func(s convSide) val {
		if s.res == nil {
			return none(s.why)
		}
		if s.res.CleanupHooks == nil {
			return none("not run (no -cleanup)")
		}
		h := s.res.CleanupHooks
		return val{v: float64(h.Calls), ok: true, unit: fmt.Sprintf(" (%s objects)", commas(int(h.Objects)))}
	})
	row("largest ConversionReview of the run (objects)", func(s convSide) val {
		if s.res == nil {
			return none(s.why)
		}
		return num(float64(s.res.MaxObjsPerCall), 0, "")
	})
	row("(setup) create body, v1beta1 CronTab", func(s convSide) val {
		if s.res == nil {
			return none(s.why)
		}
		return num(float64(s.res.BodyBytes), 0, " B")
	})
	row("(setup) creates with the Webhook CRD: req/s", func(s convSide) val { return convPhase(s, "populate-webhook") })
	row("(setup) creates with the None CRD: req/s", func(s convSide) val { return convPhase(s, "populate-none") })
	row("(not a target) RSS right after the lists, both CRDs' objects stored (reference: apiserver + etcd)", func(s convSide) val {
		if s.res == nil {
			return none(s.why)
		}
		if len(s.res.RSSAfter) == 0 {
			return none("not measured")
		}
		return num(s.res.RSSAfterMiB, 1, " MiB")
	})
	kept := func(s convSide) string {
		if s.res == nil {
			return s.why
		}
		if cl := s.res.list("none-v1"); cl != nil && cl.HostPortKept != nil {
			return map[bool]string{true: "yes (kept)", false: "no (pruned)"}[*cl.HostPortKept]
		}
		return "not measured"
	}
	t.row("(fidelity, not a target) a None-converted v1 answer still carries the v1beta1-only field `hostPort`", kept(c), kept(r))
	p("%s\n", t)
	if r.res != nil && c.res != nil {
		p("The two servers convert at different times: the figures say when each called the webhook " +
			"(\"while creating\" against \"per GET\"), so their list times through the webhook are not the same work.\n\n")
	}

	// Targets (crdserver).
	calls := c.listVal("webhook-v1", func(c *convList) float64 { return float64(c.CallsPerList) }, 0, " calls")
	met := func(v val, ok func(float64) bool) string {
		if !v.ok {
			return "not measured"
		}
		return yesNo(ok(v.v))
	}
	targets = append(targets, []string{fmt.Sprintf("webhook conversion: at most 10 webhook calls for a list of %s objects", commas(n)),
		calls.String(), met(calls, func(x float64) bool { return x <= 10 })})
	rv := c.ratioVal()
	m := rv.String()
	if rv.ok {
		m = fmt.Sprintf("%s vs %s (%s)", medianOf("webhook-v1")(c), medianOf("none-v1")(c), rv)
	}
	targets = append(targets, []string{fmt.Sprintf("webhook conversion within 2× the None-conversion time (list of %s, medians)", commas(n)),
		m, met(rv, func(x float64) bool { return x <= 2 })})

	for _, x := range []struct {
		name string
		s    convSide
	}{{"crdserver", c}, {"reference", r}} {
		if x.s.res == nil {
			continue
		}
		if x.s.res.Error != "" {
			fails = append(fails, fmt.Sprintf("- %s webhook conversion: %s\n", x.name, x.s.res.Error))
		}
		fails = append(fails, failureLines(x.name+" webhook conversion,", x.s.res.Failures)...)
	}
	return targets, fails
}

func convPhase(s convSide, name string) val {
	if s.res == nil {
		return none(s.why)
	}
	for _, p := range s.res.Phases {
		if p.Name == name {
			if p.Errors > 0 {
				return none(fmt.Sprintf("**failed** (%d/%d errors)", p.Errors, p.Requests))
			}
			return num(p.PerSecond, 1, "")
		}
	}
	return none("not reached")
}
