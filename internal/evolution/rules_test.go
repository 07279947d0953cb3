package evolution

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/crdserver/crdserver/internal/fixtures"
)

// Minimal pairs of CRDs, one rule each: a Route CRD of group example.com
// whose versions are given one a line by ver.

// pairCRD is a Route CRD with the given versions (lines of ver) and
// extra spec lines (such as a conversion).
func pairCRD(extra string, versions ...string) string {
	return fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: routes.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: routes, singular: route, kind: Route, listKind: RouteList}
%s  versions:
%s`, extra, strings.Join(versions, ""))
}

// v is one version: its name, its flags (served, storage, deprecated...)
// and the schema of its spec, all in YAML flow style.
func v(name, flags, spec string) string {
	return fmt.Sprintf("  - {name: %s, %s, schema: {openAPIV3Schema: {type: object, properties: {spec: %s}}}}\n", name, flags, spec)
}

const (
	stored = "served: true, storage: true"
	served = "served: true, storage: false"
	// webhook converts between versions: they do not share objects.
	webhook = `  conversion: {strategy: Webhook, webhook: {conversionReviewVersions: [v1], clientConfig: {url: "https://127.0.0.1:9443/convert"}}}
`
)

// pairKey is "<rule> <version> <path>", with " <across" for a difference
// between versions and " (info)" for an information.
func pairKey(f Finding) string {
	k := key(f)
	if f.Across != "" {
		k += " <" + f.Across
	}
	if !f.Breaking() {
		k += " (info)"
	}
	return k
}

type pairCase struct {
	name     string
	old, new string
	opts     Options
	want     []string // pairKey of each finding, in order
	has      string   // a text the first finding's message contains
}

func runPairs(t *testing.T, cases []pairCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			old, nw := fixtures.DecodeCRD(t, tc.old), fixtures.DecodeCRD(t, tc.new)
			got := CheckCRD(context.Background(), old, nw, tc.opts)
			keys := make([]string, 0, len(got))
			for _, f := range got {
				keys = append(keys, pairKey(f))
				if f.Message == "" || strings.Contains(f.Message, "\n") {
					t.Errorf("bad message in %+v", f)
				}
			}
			if strings.Join(keys, "|") != strings.Join(tc.want, "|") {
				t.Errorf("findings:\n%s\nwant:\n%s", FormatText(got), strings.Join(tc.want, "\n"))
			}
			if tc.has != "" && (len(got) == 0 || !strings.Contains(got[0].Message, tc.has)) {
				t.Errorf("first message does not contain %q:\n%s", tc.has, FormatText(got))
			}
		})
	}
}

// Versions that share objects (no conversion webhook) are compared with
// each other.
func TestAcrossVersions(t *testing.T) {
	const (
		rules16 = "{type: object, properties: {rules: {type: array, maxItems: 16, items: {type: string}}}}"
		rules1  = "{type: object, properties: {rules: {type: array, maxItems: 1, items: {type: string}}}}"
		// strict and lax differ in an enum, a bound and a required field.
		strict = "{type: object, required: [mode], properties: {mode: {type: string, enum: [a, b]}, size: {type: integer, maximum: 10}}}"
		lax    = "{type: object, properties: {mode: {type: string, enum: [a, b, c]}, size: {type: integer, maximum: 20}}}"
	)
	objectWith := func(rules ...any) func(string) []map[string]any {
		return func(string) []map[string]any {
			return []map[string]any{{
				"apiVersion": "example.com/v1alpha2", "kind": "Route",
				"metadata": map[string]any{"name": "r", "namespace": "default"},
				"spec":     map[string]any{"rules": rules},
			}}
		}
	}
	runPairs(t, []pairCase{
		{name: "a new version allows fewer items than a served one",
			old:  pairCRD("", v("v1alpha2", stored, rules16)),
			new:  pairCRD("", v("v1alpha2", stored, rules16), v("v1", served, rules1)),
			want: []string{"maxitems-lowered v1 .spec.rules <v1alpha2"},
			has:  "an object written through v1alpha2 fails updates through v1: maxItems lowered from 16 to 1"},
		{name: "one version widened while the other was not",
			old: pairCRD("", v("v1beta1", served, strict), v("v1", stored, strict)),
			new: pairCRD("", v("v1beta1", served, lax), v("v1", stored, strict)),
			want: []string{"enum-narrowed v1 .spec.mode <v1beta1", "required-added v1 .spec.mode <v1beta1",
				"maximum-lowered v1 .spec.size <v1beta1"}},
		{name: "the difference was there before (near miss)",
			old: pairCRD("", v("v1alpha2", served, rules16), v("v1", stored, rules1)),
			new: pairCRD("", v("v1alpha2", served, rules16),
				v("v1", stored, "{type: object, properties: {rules: {type: array, maxItems: 1, items: {type: string}}, extra: {type: string}}}"))},
		{name: "a narrowing the version's own comparison reports is not repeated",
			old:  pairCRD("", v("v1beta1", served, lax), v("v1", stored, lax)),
			new:  pairCRD("", v("v1beta1", served, lax), v("v1", stored, "{type: object, properties: {mode: {type: string, enum: [a, b, c]}, size: {type: integer, maximum: 10}}}")),
			want: []string{"maximum-lowered v1 .spec.size"}},
		{name: "versions converted by a webhook (near miss)",
			old: pairCRD(webhook, v("v1alpha2", stored, rules16)),
			new: pairCRD(webhook, v("v1alpha2", stored, rules16), v("v1", served, rules1))},
		{name: "the old revision converted, the new one does not",
			old:  pairCRD(webhook, v("v1alpha2", served, rules16), v("v1", stored, rules1)),
			new:  pairCRD("", v("v1alpha2", served, rules16), v("v1", stored, rules1)),
			want: []string{"maxitems-lowered v1 .spec.rules <v1alpha2"}},
		{name: "an unserved version (near miss)",
			old: pairCRD("", v("v1alpha2", stored, rules16)),
			new: pairCRD("", v("v1alpha2", stored, rules16), v("v1", "served: false, storage: false", rules1))},
		{name: "an unset list type is atomic (near miss)",
			old: pairCRD("", v("v1alpha2", served, rules16), v("v1", stored, rules16)),
			new: pairCRD("", v("v1alpha2", served, rules16),
				v("v1", stored, "{type: object, properties: {rules: {type: array, maxItems: 16, x-kubernetes-list-type: atomic, items: {type: string}}}}"))},
		{name: "a new field in one version only (near miss)",
			old: pairCRD("", v("v1beta1", served, lax), v("v1", stored, lax)),
			new: pairCRD("", v("v1beta1", served, lax),
				v("v1", stored, "{type: object, properties: {mode: {type: string, enum: [a, b, c]}, size: {type: integer, maximum: 20}, color: {type: string, enum: [red]}}}"))},
		{name: "a stored object fails the narrower version",
			old:  pairCRD("", v("v1alpha2", stored, rules16)),
			new:  pairCRD("", v("v1alpha2", stored, rules16), v("v1", served, rules1)),
			opts: Options{ExistingObjects: objectWith("a", "b", "c")},
			want: []string{"maxitems-lowered v1 .spec.rules <v1alpha2"},
			has:  "1 of 1 existing objects fail it, e.g. default/r"},
		{name: "no stored object fails the narrower version (near miss)",
			old:  pairCRD("", v("v1alpha2", stored, rules16)),
			new:  pairCRD("", v("v1alpha2", stored, rules16), v("v1", served, rules1)),
			opts: Options{ExistingObjects: objectWith("a")}},
	})
}

// Offline, constraints that only concern fields new at their place are
// judged without objects: no stored object has those fields.
func TestNewFieldConstraints(t *testing.T) {
	const (
		oldSpec = "{type: object, properties: {name: {type: string}}}"
		// withRule has the new fields mode and other, and a rule.
		withRule = "{type: object, x-kubernetes-validations: [{rule: %q}], properties: {name: {type: string}, mode: {type: string}, other: {type: string}}}"
	)
	rule := func(r string) string { return v("v1", stored, fmt.Sprintf(withRule, r)) }
	oldCRD := pairCRD("", v("v1", stored, oldSpec))
	runPairs(t, []pairCase{
		{name: "a guarded rule on a new field (near miss)", old: oldCRD,
			new: pairCRD("", rule("!has(self.mode) || self.mode != 'x'"))},
		{name: "two new fields exclusive (near miss)", old: oldCRD,
			new: pairCRD("", rule("!(has(self.mode) && has(self.other))"))},
		{name: "an optional selection of a new field (near miss)", old: oldCRD,
			new: pairCRD("", rule("self.?mode.orValue('a') == 'a'"))},
		{name: "a rule a new field must be set for", old: oldCRD,
			new:  pairCRD("", rule("self.mode == 'a'")),
			want: []string{"cel-rule-added v1 .spec"}},
		{name: "a rule that also reads an existing field, guarded by a new one (near miss)", old: oldCRD,
			new: pairCRD("", rule("!(has(self.mode) && self.name != 'x')"))},
		{name: "a rule that also reads an existing field", old: oldCRD,
			new:  pairCRD("", rule("!(!has(self.mode) && self.name == 'x')")),
			want: []string{"cel-rule-added v1 .spec"}},
		{name: "a rule on existing fields only", old: oldCRD,
			new:  pairCRD("", rule("!has(self.name) || self.name != 'x'")),
			want: []string{"cel-rule-added v1 .spec"}},
		{name: "a rule on self as a whole", old: oldCRD,
			new:  pairCRD("", rule("size(self) < 3")),
			want: []string{"cel-rule-added v1 .spec"}},
		{name: "a transition rule", old: oldCRD,
			new:  pairCRD("", rule("!has(oldSelf.mode) || has(self.mode)")),
			want: []string{"cel-rule-added v1 .spec"}},
		{name: "stored objects may hold unknown fields",
			old:  pairCRD("", v("v1", stored, "{type: object, x-kubernetes-preserve-unknown-fields: true, properties: {name: {type: string}}}")),
			new:  pairCRD("", v("v1", stored, "{type: object, x-kubernetes-preserve-unknown-fields: true, x-kubernetes-validations: [{rule: \"!has(self.mode) || self.mode != 'x'\"}], properties: {name: {type: string}, mode: {type: string}}}")),
			want: []string{"cel-rule-added v1 .spec"}},
		{name: "new fields exclusive by not (near miss)", old: oldCRD,
			new: pairCRD("", v("v1", stored, "{type: object, not: {required: [mode, other]}, properties: {name: {type: string}, mode: {type: string}, other: {type: string}}}"))},
		{name: "one of two new fields required", old: oldCRD,
			new:  pairCRD("", v("v1", stored, "{type: object, oneOf: [{required: [mode]}, {required: [other]}], properties: {name: {type: string}, mode: {type: string}, other: {type: string}}}")),
			want: []string{"combinator-narrowed v1 .spec"}},
		{name: "an allOf on a new field (near miss)", old: oldCRD,
			new: pairCRD("", v("v1", stored, "{type: object, allOf: [{properties: {mode: {enum: [a]}}}], properties: {name: {type: string}, mode: {type: string}}}"))},
		{name: "online, the stored objects decide", old: oldCRD,
			new: pairCRD("", rule("!has(self.mode) || self.mode != 'x'")),
			opts: Options{ExistingObjects: func(string) []map[string]any {
				return []map[string]any{{"apiVersion": "example.com/v1", "kind": "Route",
					"metadata": map[string]any{"name": "odd"}, "spec": map[string]any{"mode": "x"}}}
			}},
			want: []string{"cel-rule-added v1 .spec"}, has: "1 of 1 existing objects fail it, e.g. odd"},

		// allOf's constraints are the field's.
		{name: "an allOf enum folded into the field (near miss)",
			old: pairCRD("", v("v1", stored, "{type: object, properties: {mode: {type: string, allOf: [{enum: [a, b]}]}}}")),
			new: pairCRD("", v("v1", stored, "{type: object, properties: {mode: {type: string, enum: [b, a]}}}"))},
		{name: "an enum moved into allOf (near miss)",
			old: pairCRD("", v("v1", stored, "{type: object, properties: {mode: {type: string, enum: [a, b]}}}")),
			new: pairCRD("", v("v1", stored, "{type: object, properties: {mode: {type: string, allOf: [{enum: [a, b]}]}}}"))},
		{name: "an allOf enum folded into a narrower enum",
			old:  pairCRD("", v("v1", stored, "{type: object, properties: {mode: {type: string, allOf: [{enum: [a, b]}]}}}")),
			new:  pairCRD("", v("v1", stored, "{type: object, properties: {mode: {type: string, enum: [a]}}}")),
			want: []string{"enum-narrowed v1 .spec.mode"}},
		{name: "a new allOf bound",
			old:  pairCRD("", v("v1", stored, "{type: object, properties: {size: {type: integer, maximum: 10}}}")),
			new:  pairCRD("", v("v1", stored, "{type: object, properties: {size: {type: integer, maximum: 10, allOf: [{maximum: 5}]}}}")),
			want: []string{"maximum-lowered v1 .spec.size"}},
	})
}

// Changes that look like breaks and are not.
func TestSoftenedRules(t *testing.T) {
	const (
		spec      = "{type: object, properties: {name: {type: string}}}"
		otherSpec = "{type: object, properties: {name: {type: string}, legacy: {type: string}}}"
		port      = "{type: object, properties: {port: {type: integer, description: %q}}}"
		portDef   = "{type: object, properties: {port: {type: integer, default: %s, description: %q}}}"
	)
	const documented = "The port to listen on. Defaults to 80."
	runPairs(t, []pairCase{
		{name: "storage moved back to a served version of the same schema (near miss)",
			old: pairCRD("", v("v1beta1", served, spec), v("v1", stored, spec)),
			new: pairCRD("", v("v1beta1", stored, spec), v("v1", served, spec))},
		{name: "storage moved to a less stable version of another schema",
			old:  pairCRD("", v("v1beta1", served, otherSpec), v("v1", stored, spec)),
			new:  pairCRD("", v("v1beta1", stored, otherSpec), v("v1", served, spec)),
			want: []string{"storage-moved-to-less-stable v1beta1 "}},
		{name: "every version deprecated at once (near miss)",
			old: pairCRD("", v("v1beta1", served, spec), v("v1", stored, spec)),
			new: pairCRD("", v("v1beta1", served+", deprecated: true", spec), v("v1", stored+", deprecated: true", spec))},
		{name: "deprecated for a replacement in another group (near miss)",
			old: pairCRD("", v("v1beta1", served, spec), v("v1", stored, spec)),
			new: pairCRD("", v("v1beta1", served, spec),
				v("v1", stored+`, deprecated: true, deprecationWarning: "example.com/v1 Route is deprecated; use gateway.networking.k8s.io/v1 HTTPRoute"`, spec))},
		{name: "deprecated with a warning naming only its own group",
			old: pairCRD("", v("v1beta1", served, spec), v("v1", stored, spec)),
			new: pairCRD("", v("v1beta1", served, spec),
				v("v1", stored+`, deprecated: true, deprecationWarning: "example.com/v1 Route is deprecated; see https://other.example.org/v2 docs"`, spec)),
			want: []string{"deprecated-for-less-stable v1 "}},
		{name: "a documented default added (near miss)",
			old: pairCRD("", v("v1", stored, fmt.Sprintf(port, documented))),
			new: pairCRD("", v("v1", stored, fmt.Sprintf(portDef, "80", documented)))},
		{name: "a documented default added, as information",
			old:  pairCRD("", v("v1", stored, fmt.Sprintf(port, documented))),
			new:  pairCRD("", v("v1", stored, fmt.Sprintf(portDef, "80", documented))),
			opts: Options{Info: true},
			want: []string{"default-changed v1 .spec.port (info)"}, has: "as the field's description already said"},
		{name: "a default other than the documented one",
			old:  pairCRD("", v("v1", stored, fmt.Sprintf(port, documented))),
			new:  pairCRD("", v("v1", stored, fmt.Sprintf(portDef, "8080", documented))),
			opts: Options{Info: true},
			want: []string{"default-changed v1 .spec.port"}},
		{name: "an undocumented default added",
			old:  pairCRD("", v("v1", stored, fmt.Sprintf(port, "The port to listen on."))),
			new:  pairCRD("", v("v1", stored, fmt.Sprintf(portDef, "80", "The port to listen on."))),
			want: []string{"default-changed v1 .spec.port"}},
	})
}

// What keeps the checks precise.
func TestKeptRules(t *testing.T) {
	const spec = "{type: object, properties: {name: {type: string, description: %q, x-kubernetes-validations: [{rule: %q, message: %q}]}}}"
	runPairs(t, []pairCase{
		{name: "descriptions and CEL messages changed, rule text reflowed (near miss)",
			old: pairCRD("", v("v1", stored, fmt.Sprintf(spec, "The name.", "self.size() < 10", "too long"))),
			new: pairCRD("", v("v1", stored, fmt.Sprintf(spec, "The name of the route.", "  self.size() < 10\n", "must be short")))},
		{name: "a CEL rule rewritten",
			old:  pairCRD("", v("v1", stored, fmt.Sprintf(spec, "The name.", "self.size() < 10", "too long"))),
			new:  pairCRD("", v("v1", stored, fmt.Sprintf(spec, "The name.", "self.size() < 5", "too long"))),
			want: []string{"cel-rule-added v1 .spec.name"}},
		{name: "a served version removed without deprecation",
			old:  pairCRD("", v("v1beta1", served, "{type: object}"), v("v1", stored, "{type: object}")),
			new:  pairCRD("", v("v1", stored, "{type: object}")),
			want: []string{"served-version-removed v1beta1 "}},
		{name: "an unserved version's schema (near miss)",
			old: pairCRD("", v("v1beta1", "served: false, storage: false", "{type: object, properties: {name: {type: string}}}"), v("v1", stored, "{type: object}")),
			new: pairCRD("", v("v1beta1", "served: false, storage: false", "{type: object}"), v("v1", stored, "{type: object}"))},
		{name: "x-kubernetes-list-type atomic where none was (near miss)",
			old: pairCRD("", v("v1", stored, "{type: object, properties: {tags: {type: array, items: {type: string}}}}")),
			new: pairCRD("", v("v1", stored, "{type: object, properties: {tags: {type: array, x-kubernetes-list-type: atomic, items: {type: string}}}}"))},
	})
}
