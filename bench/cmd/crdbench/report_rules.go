package main

import (
	"fmt"
	"path/filepath"
	"strings"
)

// rulesReport writes the declarative conversion section (rules-crdserver.json,
// crdbench rules) and returns its rows for the Targets table and its
// failures.
func rulesReport(dir string, p func(string, ...any)) (targets [][]string, fails []string) {
	var r rulesResult
	if err := readJSON(filepath.Join(dir, "rules-crdserver.json"), &r); err != nil {
		return nil, nil
	}
	p("## Declarative conversion (crdserver only)\n\n")
	p("The same CronTabs (%s objects stored in v1beta1, read as v1) in three CRDs: converted by **ConversionRules** in process "+
		"(`hostPort` split into `host` and `port`), through the **example webhook** (as in \"Webhook conversion\"), and by **None**. "+
		"Each of %d rounds creates the objects in a fresh namespace, then GETs each collection once **cold** (nothing converted yet: "+
		"every object goes through its conversion and the v1 schema) and %d times **warm** (the converted objects shared); "+
		"medians over the rounds. %s.\n\n", commas(r.N), r.Rounds, r.Warm, r.Protocol)
	t := newTable("collection", "cold median", "cold GETs", "warm median")
	for _, c := range r.Colls {
		var cold []string
		for _, x := range c.ColdMs {
			cold = append(cold, fmt.Sprintf("%.0f", x))
		}
		extra := ""
		if len(c.ColdCalls) > 0 {
			extra = fmt.Sprintf(" (webhook calls per cold GET: %v)", c.ColdCalls)
		}
		t.row(fmt.Sprintf("%s (`%s`)", c.Conversion, c.CRD), fmt.Sprintf("%.1f ms", c.ColdMedian), strings.Join(cold, ", ")+" ms"+extra, fmt.Sprintf("%.1f ms", c.WarmMedian))
	}
	x := func(v float64) string { return fmt.Sprintf("%.2f×", v) }
	p("%s\n", t)
	t = newTable("ratio (medians)", "cold", "warm")
	t.row("ConversionRules ÷ None", x(r.ColdRulesOverNone), x(r.WarmRulesOverNone))
	t.row("webhook ÷ ConversionRules", x(r.ColdWebhookOverRules), x(r.WarmWebhookOverRules))
	p("%s\n", t)
	if r.Error == "" && len(r.Failures) == 0 {
		targets = append(targets,
			[]string{fmt.Sprintf("declarative conversion within 1.3× None (cold list of %s, medians)", commas(r.N)), x(r.ColdRulesOverNone), yesNo(r.ColdRulesOverNone <= 1.3)},
			[]string{fmt.Sprintf("declarative conversion ≥ 3× faster than the webhook (cold list of %s, medians)", commas(r.N)), x(r.ColdWebhookOverRules), yesNo(r.ColdWebhookOverRules >= 3)})
	}
	if r.Error != "" {
		fails = append(fails, fmt.Sprintf("- crdserver declarative conversion: %s\n", r.Error))
	}
	for _, f := range r.Failures {
		fails = append(fails, fmt.Sprintf("- crdserver declarative conversion, `%s`: `%s %s` → HTTP %d (%s)\n", f.Phase, f.Method, f.Path, f.Status, f.Error))
	}
	return targets, fails
}
