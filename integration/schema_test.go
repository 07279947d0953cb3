package integration

// Table-driven tests of CRD schemas, from the fixtures of
// testdata/crd-fixtures.yaml (the examples of Kubernetes' documentation
// "Extending the Kubernetes API with CustomResourceDefinitions") and the
// behaviour Kubernetes documents for them and for field validation:
// structural schemas, pruning, x-kubernetes-preserve-unknown-fields,
// int-or-string, embedded resources, OpenAPI validation and ratcheting, CEL
// rules (messages, reasons, field paths, transition rules, cost budget),
// defaulting (on write and on read) and fieldValidation.
//
// The expected status codes, field paths and messages are Kubernetes'
// (checked against kube-apiserver's CRD server v1.37.2). CRD validation
// errors are compared on the part after "openAPIV3Schema": Kubernetes reports
// a single version's schema as spec.validation.openAPIV3Schema, and
// spec.versions[0].schema.openAPIV3Schema is accepted as well.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/yaml"

	"github.com/crdserver/crdserver/internal/fixtures"
)

// ---------------------------------------------------------------------------
// Fixtures

// schemaFixtures holds the YAML documents of testdata/crd-fixtures.yaml by the
// id in their "# fixture: <id>" comment, in file order.
type schemaFixtures struct {
	docs  map[string]string
	order []string
}

var (
	schemaFixtureID   = regexp.MustCompile(`(?m)^# fixture: (\S+)\s*$`)
	schemaFixtureKind = regexp.MustCompile(`(?m)^# kind: (\S+)`)
)

func loadSchemaFixtures(t *testing.T) *schemaFixtures {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "crd-fixtures.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	f := &schemaFixtures{docs: map[string]string{}}
	var cur []string
	flush := func() {
		doc := strings.Join(cur, "\n")
		cur = nil
		m := schemaFixtureID.FindStringSubmatch(doc)
		if m == nil {
			return // the file's header
		}
		if _, dup := f.docs[m[1]]; dup {
			t.Fatalf("fixture %s appears twice", m[1])
		}
		f.docs[m[1]] = doc
		f.order = append(f.order, m[1])
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.TrimRight(line, " \r") == "---" {
			flush()
			continue
		}
		cur = append(cur, line)
	}
	flush()
	if len(f.order) == 0 {
		t.Fatal("no fixtures found in testdata/crd-fixtures.yaml")
	}
	return f
}

func (f *schemaFixtures) doc(t *testing.T, id string) string {
	t.Helper()
	d, ok := f.docs[id]
	if !ok {
		t.Fatalf("no fixture %q in testdata/crd-fixtures.yaml", id)
	}
	return d
}

// kind is the value of the document's "# kind:" comment ("schema-fragment",
// "value"), or "".
func (f *schemaFixtures) kind(id string) string {
	if m := schemaFixtureKind.FindStringSubmatch(f.docs[id]); m != nil {
		return m[1]
	}
	return ""
}

func (f *schemaFixtures) crd(t *testing.T, id string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	return fixtures.DecodeCRD(t, f.doc(t, id))
}

func (f *schemaFixtures) schema(t *testing.T, id string) apiextensionsv1.JSONSchemaProps {
	t.Helper()
	var s apiextensionsv1.JSONSchemaProps
	if err := yaml.UnmarshalStrict([]byte(f.doc(t, id)), &s); err != nil {
		t.Fatalf("fixture %s: %v", id, err)
	}
	return s
}

// value decodes an object or value fixture with JSON number semantics (int64
// for integers), like the bodies the server sends.
func (f *schemaFixtures) value(t *testing.T, id string) map[string]any {
	t.Helper()
	j, err := yaml.YAMLToJSON([]byte(f.doc(t, id)))
	if err != nil {
		t.Fatalf("fixture %s: %v", id, err)
	}
	var m map[string]any
	if err := utiljson.Unmarshal(j, &m); err != nil {
		t.Fatalf("fixture %s: %v", id, err)
	}
	return m
}

// schemaCronTabCRD wraps a schema fragment as the openAPIV3Schema of
// crontabs.stable.example.com (kind CronTab, version v1), as the fixture
// file's header says.
func schemaCronTabCRD(s apiextensionsv1.JSONSchemaProps) *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"},
		ObjectMeta: metav1.ObjectMeta{Name: "crontabs.stable.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "stable.example.com",
			Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{
				Plural: "crontabs", Singular: "crontab", Kind: "CronTab", ShortNames: []string{"ct"},
			},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &s},
			}},
		},
	}
}

// schemaUnderSpec places a property sub-schema at spec.properties[prop].
func schemaUnderSpec(prop string, s apiextensionsv1.JSONSchemaProps) apiextensionsv1.JSONSchemaProps {
	return apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
		"spec": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{prop: s}},
	}}
}

// schemaJSONSchema parses a schema written as JSON (for schemas that are not
// in the fixture file).
func schemaJSONSchema(t *testing.T, s string) apiextensionsv1.JSONSchemaProps {
	t.Helper()
	var p apiextensionsv1.JSONSchemaProps
	if err := yaml.UnmarshalStrict([]byte(s), &p); err != nil {
		t.Fatalf("schema %s: %v", s, err)
	}
	return p
}

// ---------------------------------------------------------------------------
// Helpers for requests and answers

const schemaCRDPath = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"

// schemaCRBody is a CronTab named name with the given top-level fields (a JSON
// object; a "metadata" in it is kept and gets the name).
func schemaCRBody(t *testing.T, name, fields string) string {
	t.Helper()
	obj := map[string]any{}
	if fields != "" {
		if err := utiljson.Unmarshal([]byte(fields), &obj); err != nil {
			t.Fatalf("fields %s: %v", fields, err)
		}
	}
	md, _ := obj["metadata"].(map[string]any)
	if md == nil {
		md = map[string]any{}
	}
	md["name"] = name
	obj["metadata"] = md
	obj["apiVersion"] = "stable.example.com/v1"
	obj["kind"] = "CronTab"
	return mustJSON(obj)
}

// schemaUserFields is an object without apiVersion, kind and metadata, as
// canonical JSON.
func schemaUserFields(obj map[string]any) string {
	rest := map[string]any{}
	for k, v := range obj {
		if k != "apiVersion" && k != "kind" && k != "metadata" {
			rest[k] = v
		}
	}
	return mustJSON(rest)
}

// schemaCanonical re-encodes a JSON text with sorted keys.
func schemaCanonical(t *testing.T, s string) string {
	t.Helper()
	var v any
	if err := utiljson.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("JSON %s: %v", s, err)
	}
	return mustJSON(v)
}

// schemaWarning is a Warning header value as Kubernetes writes it.
func schemaWarning(text string) string {
	return `299 - "` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(text) + `"`
}

func schemaCheckWarnings(t *testing.T, what string, r response, want []string) {
	t.Helper()
	got := r.header.Values("Warning")
	wantHdr := make([]string, len(want))
	for i, w := range want {
		wantHdr[i] = schemaWarning(w)
	}
	if strings.Join(got, "\n") != strings.Join(wantHdr, "\n") {
		t.Errorf("%s: Warning headers\n got %q\nwant %q", what, got, wantHdr)
	}
}

// schemaCause is an expected Status cause: field and type exactly, and the
// message exactly (msg) or a part of it (part).
type schemaCause struct {
	field string
	typ   metav1.CauseType
	msg   string
	part  string
}

func (c schemaCause) String() string {
	if c.msg != "" {
		return fmt.Sprintf("{%s %s %q}", c.field, c.typ, c.msg)
	}
	return fmt.Sprintf("{%s %s ...%q...}", c.field, c.typ, c.part)
}

// schemaCheckCauses compares the causes as a multiset: every wanted cause
// once, nothing else. norm rewrites fields and messages before comparing.
func schemaCheckCauses(t *testing.T, got []metav1.StatusCause, want []schemaCause, norm func(string) string) {
	t.Helper()
	if norm == nil {
		norm = func(s string) string { return s }
	}
	used := make([]bool, len(got))
	var missing []schemaCause
	for _, w := range want {
		found := false
		for i, g := range got {
			if used[i] || norm(g.Field) != w.field || g.Type != w.typ {
				continue
			}
			m := norm(g.Message)
			if (w.msg != "" && m != w.msg) || (w.part != "" && !strings.Contains(m, w.part)) {
				continue
			}
			used[i], found = true, true
			break
		}
		if !found {
			missing = append(missing, w)
		}
	}
	var extra []string
	for i, g := range got {
		if !used[i] {
			extra = append(extra, fmt.Sprintf("{%s %s %q}", norm(g.Field), g.Type, norm(g.Message)))
		}
	}
	if len(missing) > 0 || len(extra) > 0 {
		t.Errorf("causes differ\n missing: %v\n unexpected: %v", missing, extra)
	}
}

// schemaExpectCRInvalid checks a 422 Invalid answer for the CronTab name:
// the Status message is `CronTab.stable.example.com "<name>" is invalid: <invalid>`.
func schemaExpectCRInvalid(t *testing.T, r response, name, invalid string, causes []schemaCause) {
	t.Helper()
	if r.code != http.StatusUnprocessableEntity {
		t.Errorf("code %d, want 422: %s", r.code, r.body)
		return
	}
	st := r.status(t)
	if st.Status != metav1.StatusFailure || st.Code != http.StatusUnprocessableEntity || st.Reason != metav1.StatusReasonInvalid {
		t.Errorf("status %+v, want Failure 422 Invalid", st)
	}
	prefix := `CronTab.stable.example.com "` + name + `" is invalid: `
	if want := prefix + invalid; st.Message != want && !schemaListMessage(st.Message, prefix, causes) {
		t.Errorf("message\n got %s\nwant %s", st.Message, want)
	}
	if st.Details == nil {
		t.Errorf("no details: %s", r.body)
		return
	}
	if st.Details.Name != name || st.Details.Group != "stable.example.com" || st.Details.Kind != "CronTab" {
		t.Errorf("details name/group/kind = %q/%q/%q, want %q/stable.example.com/CronTab", st.Details.Name, st.Details.Group, st.Details.Kind, name)
	}
	schemaCheckCauses(t, st.Details.Causes, causes, nil)
}

// schemaListMessage says whether msg is prefix followed by the causes as
// Kubernetes lists several errors, "[<field>: <message>, ...]", in any order:
// Kubernetes itself reports errors of sibling properties in map order.
func schemaListMessage(msg, prefix string, causes []schemaCause) bool {
	if len(causes) < 2 || !strings.HasPrefix(msg, prefix) {
		return false
	}
	rest := strings.TrimPrefix(msg, prefix)
	if !strings.HasPrefix(rest, "[") || !strings.HasSuffix(rest, "]") {
		return false
	}
	rest = rest[1 : len(rest)-1]
	used := make([]bool, len(causes))
	var match func(rest string, n int) bool
	match = func(rest string, n int) bool {
		if n == len(causes) {
			return rest == ""
		}
		for i, c := range causes {
			item := c.field + ": " + c.msg
			if n < len(causes)-1 {
				item += ", "
			}
			if used[i] || c.msg == "" || !strings.HasPrefix(rest, item) {
				continue
			}
			used[i] = true
			if match(rest[len(item):], n+1) {
				return true
			}
			used[i] = false
		}
		return false
	}
	return match(rest, 0)
}

// schemaPathNorm replaces the schema's path prefix by "<schema>".
func schemaPathNorm(s string) string {
	return strings.NewReplacer(
		"spec.validation.openAPIV3Schema", "<schema>",
		"spec.versions[0].schema.openAPIV3Schema", "<schema>",
	).Replace(s)
}

// schemaExpectCRDInvalid checks a 422 Invalid answer to a CRD write of
// crontabs.stable.example.com.
func schemaExpectCRDInvalid(t *testing.T, r response, causes []schemaCause) {
	t.Helper()
	if r.code != http.StatusUnprocessableEntity {
		t.Errorf("code %d, want 422: %s", r.code, r.body)
		return
	}
	st := r.status(t)
	if st.Reason != metav1.StatusReasonInvalid || st.Code != http.StatusUnprocessableEntity {
		t.Errorf("status %+v, want 422 Invalid", st)
	}
	const prefix = `CustomResourceDefinition.apiextensions.k8s.io "crontabs.stable.example.com" is invalid: `
	if !strings.HasPrefix(st.Message, prefix) {
		t.Errorf("message %q, want prefix %q", st.Message, prefix)
	}
	if st.Details == nil {
		t.Errorf("no details: %s", r.body)
		return
	}
	if st.Details.Name != "crontabs.stable.example.com" || st.Details.Group != "apiextensions.k8s.io" || st.Details.Kind != "CustomResourceDefinition" {
		t.Errorf("details %+v", st.Details)
	}
	schemaCheckCauses(t, st.Details.Causes, causes, schemaPathNorm)
}

// schemaCRCase is one create of a CronTab against a CRD.
type schemaCRCase struct {
	name     string   // object name and subtest name
	fields   string   // the body's fields besides apiVersion and kind (JSON)
	want     string   // on success: the user fields of the response and of a later GET (JSON); "" = fields
	warnings []string // on success: the Warning texts, in order
	invalid  string   // if set: 422, with this Status message after `is invalid: `
	causes   []schemaCause
}

func schemaRunCRCases(t *testing.T, e *env, query string, cases []schemaCRCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.do("POST", ctPath+query, schemaCRBody(t, c.name, c.fields))
			if c.invalid != "" {
				schemaExpectCRInvalid(t, r, c.name, c.invalid, c.causes)
				return
			}
			if r.code != http.StatusCreated {
				t.Fatalf("create: code %d, want 201: %s", r.code, r.body)
			}
			want := c.want
			if want == "" {
				want = c.fields
			}
			want = schemaCanonical(t, want)
			if got := schemaUserFields(r.object(t)); got != want {
				t.Errorf("create response\n got %s\nwant %s", got, want)
			}
			schemaCheckWarnings(t, "create", r, c.warnings)
			g := e.do("GET", ctPath+"/"+c.name, "")
			if g.code != http.StatusOK {
				t.Fatalf("get: %d %s", g.code, g.body)
			}
			if got := schemaUserFields(g.object(t)); got != want {
				t.Errorf("GET\n got %s\nwant %s", got, want)
			}
		})
	}
}

// schemaPutSpec reads a CronTab, replaces its spec and PUTs it back.
func schemaPutSpec(t *testing.T, e *env, name, spec, query string) response {
	t.Helper()
	g := e.do("GET", ctPath+"/"+name, "")
	if g.code != http.StatusOK {
		t.Fatalf("get %s: %d %s", name, g.code, g.body)
	}
	obj := g.object(t)
	if spec == "" {
		delete(obj, "spec")
	} else {
		var s any
		if err := utiljson.Unmarshal([]byte(spec), &s); err != nil {
			t.Fatal(err)
		}
		obj["spec"] = s
	}
	return e.do("PUT", ctPath+"/"+name+query, mustJSON(obj))
}

// schemaSetVersionSchema replaces the schema of the CRD's only version.
func schemaSetVersionSchema(t *testing.T, e *env, name string, s *apiextensionsv1.CustomResourceValidation) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		crd, err := e.ext.ApiextensionsV1().CustomResourceDefinitions().Get(e.ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		crd.Spec.Versions[0].Schema = s
		_, err = e.ext.ApiextensionsV1().CustomResourceDefinitions().Update(e.ctx, crd, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("update CRD %s: %v", name, err)
	}
}

// schemaWaitFor polls until cond holds (a CRD change may reach the serving
// path a moment after the CRD write returns); it fails the test if cond does
// not hold within 10 seconds.
func schemaWaitFor(t *testing.T, e *env, what string, cond func() bool) {
	t.Helper()
	if !schemaPoll(e, cond) {
		t.Fatalf("%s: not seen within 10s", what)
	}
}

func schemaPoll(e *env, cond func() bool) bool {
	err := wait.PollUntilContextTimeout(e.ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	return err == nil
}

// ---------------------------------------------------------------------------
// CRDs and schema fragments: accepted or rejected

const (
	costRuleOver = "Forbidden: estimated rule cost exceeds budget by factor of more than 100x (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"
	costContrib  = "Forbidden: contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema"
	costTotal    = "Forbidden: x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema exceeds budget by factor of more than 100x (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"
)

func TestSchemaFixtureCRDs(t *testing.T) {
	fx := loadSchemaFixtures(t)
	fromFile := func(id string) func(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
		return func(t *testing.T) *apiextensionsv1.CustomResourceDefinition { return fx.crd(t, id) }
	}
	wrapped := func(id string) func(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
		return func(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
			return schemaCronTabCRD(fx.schema(t, id))
		}
	}
	cases := []struct {
		id     string // the fixture
		name   string // subtest name if not id
		crd    func(t *testing.T) *apiextensionsv1.CustomResourceDefinition
		causes []schemaCause // nil: accepted
	}{
		{id: "crd-crontab-basic", crd: fromFile("crd-crontab-basic")},
		{id: "crd-crontab-validation", crd: fromFile("crd-crontab-validation")},
		{id: "crd-crontab-defaulting", crd: fromFile("crd-crontab-defaulting")},
		{id: "crd-crontab-printer-columns", crd: fromFile("crd-crontab-printer-columns")},
		{id: "crd-shirt", crd: fromFile("crd-shirt")},
		{id: "crd-crontab-subresources", crd: fromFile("crd-crontab-subresources")},
		{id: "crd-crontab-categories", crd: fromFile("crd-crontab-categories")},

		// A non-structural schema is rejected for all six reasons: types missing
		// at the root and for a specified field, a property of anyOf not
		// specified outside it, a type and a description inside anyOf, and
		// metadata specified beyond name and generateName.
		{id: "schema-nonstructural-example3", crd: wrapped("schema-nonstructural-example3"), causes: []schemaCause{
			{"<schema>.type", metav1.CauseTypeFieldValueRequired, "Required value: must not be empty at the root", ""},
			{"<schema>.properties[foo].type", metav1.CauseTypeFieldValueRequired, "Required value: must not be empty for specified object fields", ""},
			{"<schema>.properties[bar]", metav1.CauseTypeFieldValueRequired, "Required value: because it is defined in <schema>.anyOf[0].properties[bar]", ""},
			{"<schema>.anyOf[0].properties[bar].type", metav1.CauseTypeForbidden, "Forbidden: must be empty to be structural", ""},
			{"<schema>.anyOf[0].description", metav1.CauseTypeForbidden, "Forbidden: must be empty to be structural", ""},
			{"<schema>.properties[metadata]", metav1.CauseTypeForbidden, "Forbidden: must not specify anything other than name and generateName, but metadata is implicitly specified", ""},
		}},
		{id: "schema-structural-example3", crd: wrapped("schema-structural-example3")},
		{id: "schema-preserve-unknown-any", crd: wrapped("schema-preserve-unknown-any")},
		{id: "schema-preserve-unknown-object", crd: wrapped("schema-preserve-unknown-object")},
		{id: "schema-preserve-unknown-nested", crd: wrapped("schema-preserve-unknown-nested")},
		{id: "schema-int-or-string", crd: wrapped("schema-int-or-string")},
		// An embedded resource as the documentation gives it (no type: object)
		// is rejected...
		{id: "schema-embedded-resource", crd: wrapped("schema-embedded-resource"), causes: []schemaCause{
			{"<schema>.properties[foo].type", metav1.CauseTypeFieldValueRequired, "Required value: must be object if x-kubernetes-embedded-resource is true", ""},
		}},
		// ...and accepted with type: object.
		{id: "schema-embedded-resource", name: "schema-embedded-resource-type-object", crd: func(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
			s := fx.schema(t, "schema-embedded-resource")
			foo := s.Properties["foo"]
			foo.Type = "object"
			s.Properties["foo"] = foo
			return schemaCronTabCRD(s)
		}},
		{id: "schema-cel-replicas", crd: wrapped("schema-cel-replicas")},
		{id: "schema-cel-root", crd: wrapped("schema-cel-root")},
		{id: "schema-cel-has", crd: wrapped("schema-cel-has")},
		{id: "schema-cel-map", crd: wrapped("schema-cel-map")},
		{id: "schema-cel-array", crd: wrapped("schema-cel-array")},
		{id: "schema-cel-scalar", crd: wrapped("schema-cel-scalar")},
		{id: "schema-transition-low-high", crd: func(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
			return schemaCronTabCRD(schemaUnderSpec("level", fx.schema(t, "schema-transition-low-high")))
		}},
		// The CEL cost budget: a rule over unbounded strings, or run once per
		// element of an unbounded list, is over it (and so is the schema's
		// total); with maxItems and maxLength, or over integers, it is within.
		{id: "schema-cost-unbounded-rejected", crd: wrapped("schema-cost-unbounded-rejected"), causes: []schemaCause{
			{"<schema>.properties[foo].x-kubernetes-validations[0].rule", metav1.CauseTypeForbidden, costRuleOver, ""},
			{"<schema>.properties[foo].x-kubernetes-validations[0].rule", metav1.CauseTypeForbidden, costContrib, ""},
			{"<schema>", metav1.CauseTypeForbidden, costTotal, ""},
		}},
		{id: "schema-cost-bounded-allowed", crd: wrapped("schema-cost-bounded-allowed")},
		{id: "schema-cost-item-level", crd: wrapped("schema-cost-item-level")},
		{id: "schema-cost-flat-int-allowed", crd: wrapped("schema-cost-flat-int-allowed")},
		{id: "schema-cost-nested-rejected", crd: wrapped("schema-cost-nested-rejected"), causes: []schemaCause{
			{"<schema>.properties[foo].items.x-kubernetes-validations[0].rule", metav1.CauseTypeForbidden, costRuleOver, ""},
			{"<schema>.properties[foo].items.x-kubernetes-validations[0].rule", metav1.CauseTypeForbidden, costContrib, ""},
			{"<schema>", metav1.CauseTypeForbidden, costTotal, ""},
		}},
		{id: "schema-defaulting-nullable", crd: wrapped("schema-defaulting-nullable")},
	}

	// Every CRD and every schema fragment of the file has a case.
	covered := map[string]bool{}
	for _, c := range cases {
		covered[c.id] = true
	}
	for _, id := range fx.order {
		if (strings.HasPrefix(id, "crd-") || fx.kind(id) == "schema-fragment") && !covered[id] {
			t.Errorf("fixture %s has no case", id)
		}
	}

	for _, c := range cases {
		name := c.name
		if name == "" {
			name = c.id
		}
		t.Run(name, func(t *testing.T) {
			e := start(t)
			crd := c.crd(t)
			if c.causes != nil {
				schemaExpectCRDInvalid(t, e.do("POST", schemaCRDPath, mustJSON(crd)), c.causes)
				if g := e.do("GET", schemaCRDPath+"/"+crd.Name, ""); g.code != http.StatusNotFound {
					t.Errorf("rejected CRD was stored: GET %d %s", g.code, g.body)
				}
				return
			}
			got := e.createCRD(crd)
			if cond := condition(got, apiextensionsv1.NonStructuralSchema); cond != nil && cond.Status == apiextensionsv1.ConditionTrue {
				t.Errorf("NonStructuralSchema condition on an accepted CRD: %+v", cond)
			}
			path := "/apis/" + got.Spec.Group + "/" + got.Spec.Versions[0].Name + "/"
			if got.Spec.Scope == apiextensionsv1.NamespaceScoped {
				path += "namespaces/default/"
			}
			if r := e.do("GET", path+got.Spec.Names.Plural, ""); r.code != http.StatusOK {
				t.Errorf("list %s: %d %s", path+got.Spec.Names.Plural, r.code, r.body)
			}
		})
	}
}

// ---------------------------------------------------------------------------
// Pruning

func TestSchemaPruning(t *testing.T) {
	fx := loadSchemaFixtures(t)
	want := fx.value(t, "cr-crontab-pruning-expected")
	for _, c := range []struct {
		name     string
		query    string
		warnings []string
	}{
		// The seed's kubectl --validate=false sends fieldValidation=Ignore.
		{"validate=false", "?fieldValidation=Ignore", nil},
		{"server default", "", []string{`unknown field "spec.someRandomField"`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := start(t)
			e.createCRD(fx.crd(t, "crd-crontab-basic"))
			r := e.do("POST", ctPath+c.query, mustJSON(fx.value(t, "cr-crontab-pruning")))
			if r.code != http.StatusCreated {
				t.Fatalf("create: %d, want 201: %s", r.code, r.body)
			}
			schemaCheckWarnings(t, "create", r, c.warnings)
			check := func(what string, got map[string]any) {
				t.Helper()
				if gu, wu := schemaUserFields(got), schemaUserFields(want); gu != wu {
					t.Errorf("%s: got %s, want %s", what, gu, wu)
				}
				if got["apiVersion"] != want["apiVersion"] || got["kind"] != want["kind"] {
					t.Errorf("%s: apiVersion/kind %v/%v", what, got["apiVersion"], got["kind"])
				}
				md, _ := got["metadata"].(map[string]any)
				wmd := want["metadata"].(map[string]any)
				for _, k := range []string{"name", "namespace", "generation"} {
					if fmt.Sprint(md[k]) != fmt.Sprint(wmd[k]) {
						t.Errorf("%s: metadata.%s = %v, want %v", what, k, md[k], wmd[k])
					}
				}
				for _, k := range []string{"uid", "resourceVersion", "creationTimestamp"} {
					if s, _ := md[k].(string); s == "" {
						t.Errorf("%s: metadata.%s not set", what, k)
					}
				}
			}
			check("create response", r.object(t))
			g := e.do("GET", ctPath+"/my-new-cron-object", "")
			if g.code != http.StatusOK {
				t.Fatalf("get: %d %s", g.code, g.body)
			}
			check("GET", g.object(t))
		})
	}
}

// ---------------------------------------------------------------------------
// x-kubernetes-preserve-unknown-fields, int-or-string

func TestSchemaPreserveUnknownAndIntOrString(t *testing.T) {
	fx := loadSchemaFixtures(t)
	nestedIn := mustJSON(fx.value(t, "schema-preserve-unknown-nested-input"))
	nestedWant := mustJSON(fx.value(t, "schema-preserve-unknown-nested-expected"))
	typeErr := func(field, typ, want string) (string, []schemaCause) {
		msg := fmt.Sprintf(`Invalid value: %q: %s in body must be of type %s: %q`, typ, field, want, typ)
		return field + ": " + msg, []schemaCause{{field, metav1.CauseTypeTypeInvalid, msg, ""}}
	}
	objInt, objIntC := typeErr("json", "integer", "object")
	objStr, objStrC := typeErr("json", "string", "object")
	objArr, objArrC := typeErr("json", "array", "object")
	iosNum, iosNumC := typeErr("foo", "number", "integer,string")
	iosBool, iosBoolC := typeErr("foo", "boolean", "integer,string")
	iosObj, iosObjC := typeErr("foo", "object", "integer,string")

	for _, s := range []struct {
		fixture string
		cases   []schemaCRCase
	}{
		// Without a type: any JSON value, unpruned.
		{"schema-preserve-unknown-any", []schemaCRCase{
			{name: "integer", fields: `{"json":1}`},
			{name: "string", fields: `{"json":"s"}`},
			{name: "boolean", fields: `{"json":true}`},
			{name: "array", fields: `{"json":[1,{"a":2,"b":[null]}]}`},
			{name: "object", fields: `{"json":{"a":{"b":[1]},"c":"d"}}`},
			{name: "null", fields: `{"json":null}`, want: `{}`},
		}},
		// With type: object: only objects, with unpruned contents.
		{"schema-preserve-unknown-object", []schemaCRCase{
			{name: "object", fields: `{"json":{"a":{"b":[1]},"c":"d"}}`},
			{name: "integer", fields: `{"json":1}`, invalid: objInt, causes: objIntC},
			{name: "string", fields: `{"json":"s"}`, invalid: objStr, causes: objStrC},
			{name: "array", fields: `{"json":[1]}`, invalid: objArr, causes: objArrC},
		}},
		// Pruning switches back on under the specified json.spec.
		{"schema-preserve-unknown-nested", []schemaCRCase{
			{name: "documented-example", fields: nestedIn, want: nestedWant, warnings: []string{`unknown field "json.spec.something"`}},
		}},
		// x-kubernetes-int-or-string: integers and strings only.
		{"schema-int-or-string", []schemaCRCase{
			{name: "integer", fields: `{"foo":1}`},
			{name: "string", fields: `{"foo":"a"}`},
			{name: "fraction", fields: `{"foo":1.5}`, invalid: iosNum, causes: iosNumC},
			{name: "boolean", fields: `{"foo":true}`, invalid: iosBool, causes: iosBoolC},
			{name: "object", fields: `{"foo":{"a":1}}`, invalid: iosObj, causes: iosObjC},
			{name: "null", fields: `{"foo":null}`, want: `{}`},
		}},
	} {
		t.Run(s.fixture, func(t *testing.T) {
			e := start(t)
			e.createCRD(schemaCronTabCRD(fx.schema(t, s.fixture)))
			schemaRunCRCases(t, e, "", s.cases)
		})
	}
}

// ---------------------------------------------------------------------------
// x-kubernetes-embedded-resource

func TestSchemaEmbeddedResource(t *testing.T) {
	fx := loadSchemaFixtures(t)
	e := start(t)
	s := fx.schema(t, "schema-embedded-resource")
	foo := s.Properties["foo"]
	foo.Type = "object" // Kubernetes requires it of an embedded resource
	s.Properties["foo"] = foo
	e.createCRD(schemaCronTabCRD(s))

	const badLabel = `Invalid value: "-bad-": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')`
	schemaRunCRCases(t, e, "", []schemaCRCase{
		{
			// apiVersion, kind and metadata are kept; nothing else inside foo is
			// pruned; unknown metadata fields are.
			name:     "pod",
			fields:   `{"foo":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","labels":{"a":"b"},"bogus":1},"spec":{"containers":[{"name":"c","anything":{"x":[1]}}]},"extra":true}}`,
			want:     `{"foo":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","labels":{"a":"b"}},"spec":{"containers":[{"name":"c","anything":{"x":[1]}}]},"extra":true}}`,
			warnings: []string{`unknown field "foo.metadata.bogus"`},
		},
		{name: "no-metadata", fields: `{"foo":{"apiVersion":"stable.example.com/v1","kind":"CronTab","spec":{"a":1}}}`},
		{name: "no-apiversion", fields: `{"foo":{"kind":"Pod"}}`, invalid: "foo.apiVersion: Required value",
			causes: []schemaCause{{"foo.apiVersion", metav1.CauseTypeFieldValueRequired, "Required value", ""}}},
		{name: "no-kind", fields: `{"foo":{"apiVersion":"v1"}}`, invalid: "foo.kind: Required value",
			causes: []schemaCause{{"foo.kind", metav1.CauseTypeFieldValueRequired, "Required value", ""}}},
		// (Kubernetes reports these two in map order, so one at a time.)
		{name: "empty-apiversion", fields: `{"foo":{"apiVersion":"","kind":"Pod"}}`,
			invalid: `foo.apiVersion: Invalid value: "": must not be empty`,
			causes:  []schemaCause{{"foo.apiVersion", metav1.CauseTypeFieldValueInvalid, `Invalid value: "": must not be empty`, ""}}},
		{name: "empty-kind", fields: `{"foo":{"apiVersion":"v1","kind":""}}`,
			invalid: `foo.kind: Invalid value: "": must not be empty`,
			causes:  []schemaCause{{"foo.kind", metav1.CauseTypeFieldValueInvalid, `Invalid value: "": must not be empty`, ""}}},
		{name: "bad-label", fields: `{"foo":{"apiVersion":"v1","kind":"Pod","metadata":{"labels":{"a":"-bad-"}}}}`,
			invalid: "foo.metadata.labels: " + badLabel,
			causes:  []schemaCause{{"foo.metadata.labels", metav1.CauseTypeFieldValueInvalid, badLabel, ""}}},
		// Kubernetes validates embedded labels but not the embedded name.
		{name: "any-name", fields: `{"foo":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"Bad_Name"}}}`},
	})
}

// ---------------------------------------------------------------------------
// OpenAPI validation

func TestSchemaValidation(t *testing.T) {
	fx := loadSchemaFixtures(t)
	e := start(t)
	e.createCRD(fx.crd(t, "crd-crontab-validation"))

	const pattern = `^(\d+|\*)(/\d+)?(\s+(\d+|\*)(/\d+)?){4}$`
	cronMsg := `Invalid value: "* * * *": spec.cronSpec in body should match '` + pattern + `'`
	replMsg := `Invalid value: 15: spec.replicas in body should be less than or equal to 10`
	r := e.do("POST", ctPath, mustJSON(fx.value(t, "cr-crontab-invalid")))
	schemaExpectCRInvalid(t, r, "my-new-cron-object",
		"[spec.cronSpec: "+cronMsg+", spec.replicas: "+replMsg+"]",
		[]schemaCause{
			{"spec.cronSpec", metav1.CauseTypeFieldValueInvalid, cronMsg, ""},
			{"spec.replicas", metav1.CauseTypeFieldValueInvalid, replMsg, ""},
		})
	if g := e.do("GET", ctPath+"/my-new-cron-object", ""); g.code != http.StatusNotFound {
		t.Errorf("invalid object was stored: %d %s", g.code, g.body)
		e.do("DELETE", ctPath+"/my-new-cron-object", "") // so that the next create stands alone
	}

	valid := fx.value(t, "cr-crontab-valid")
	r = e.do("POST", ctPath, mustJSON(valid))
	if r.code != http.StatusCreated {
		t.Fatalf("cr-crontab-valid: %d, want 201: %s", r.code, r.body)
	}
	if got, want := schemaUserFields(r.object(t)), schemaUserFields(valid); got != want {
		t.Errorf("cr-crontab-valid: got %s, want %s", got, want)
	}

	// More OpenAPI checks on the same schema: minimum, maximum and type.
	schemaRunCRCases(t, e, "", []schemaCRCase{
		{name: "replicas-zero", fields: `{"spec":{"replicas":0}}`,
			invalid: "spec.replicas: Invalid value: 0: spec.replicas in body should be greater than or equal to 1",
			causes:  []schemaCause{{"spec.replicas", metav1.CauseTypeFieldValueInvalid, "Invalid value: 0: spec.replicas in body should be greater than or equal to 1", ""}}},
		{name: "replicas-string", fields: `{"spec":{"replicas":"string"}}`,
			invalid: `spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string"`,
			causes:  []schemaCause{{"spec.replicas", metav1.CauseTypeTypeInvalid, `Invalid value: "string": spec.replicas in body must be of type integer: "string"`, ""}}},
		{name: "bounds", fields: `{"spec":{"cronSpec":"0 */2 * * *","replicas":10}}`},
	})
}

// ---------------------------------------------------------------------------
// Validation ratcheting

func TestSchemaValidationRatcheting(t *testing.T) {
	fx := loadSchemaFixtures(t)
	e := start(t)
	e.createCRD(fx.crd(t, "crd-crontab-basic"))
	for name, spec := range map[string]string{
		"openapi": `{"cronSpec":"bad","image":"i","replicas":15}`,
		"cel":     `{"image":"forbidden","replicas":1}`,
	} {
		if r := e.do("POST", ctPath, schemaCRBody(t, name, `{"spec":`+spec+`}`)); r.code != http.StatusCreated {
			t.Fatalf("create %s: %d %s", name, r.code, r.body)
		}
	}

	// The schema gets stricter: the pattern, 1 <= replicas <= 10, and a CEL
	// rule on image. Both objects are now invalid.
	v := fx.crd(t, "crd-crontab-validation").Spec.Versions[0].Schema
	spec := v.OpenAPIV3Schema.Properties["spec"]
	image := spec.Properties["image"]
	image.XValidations = apiextensionsv1.ValidationRules{{Rule: `self != "forbidden"`, Message: "image forbidden"}}
	spec.Properties["image"] = image
	v.OpenAPIV3Schema.Properties["spec"] = spec
	schemaSetVersionSchema(t, e, "crontabs.stable.example.com", v)
	// Wait until the new schema rejects a create; if it never does, report
	// that and run the steps anyway.
	if !schemaPoll(e, func() bool {
		return e.do("POST", ctPath+"?dryRun=All", schemaCRBody(t, "probe", `{"spec":{"replicas":15}}`)).code == http.StatusUnprocessableEntity
	}) {
		t.Errorf("after the CRD update a create with spec.replicas=15 is still not rejected (10s)")
	}

	const pattern = `^(\d+|\*)(/\d+)?(\s+(\d+|\*)(/\d+)?){4}$`
	invalid := func(field, msg string) (string, []schemaCause) {
		return field + ": " + msg, []schemaCause{{field, metav1.CauseTypeFieldValueInvalid, msg, ""}}
	}
	repl20, repl20C := invalid("spec.replicas", "Invalid value: 20: spec.replicas in body should be less than or equal to 10")
	repl15, repl15C := invalid("spec.replicas", "Invalid value: 15: spec.replicas in body should be less than or equal to 10")
	cron, cronC := invalid("spec.cronSpec", `Invalid value: "bad2": spec.cronSpec in body should match '`+pattern+`'`)
	img, imgC := invalid("spec.image", `Invalid value: "forbidden": image forbidden`)

	steps := []struct {
		name     string
		object   string
		spec     string
		invalid  string // "" = 200
		causes   []schemaCause
		warnings []string
	}{
		// Unchanged invalid values are accepted while another field changes.
		{"openapi: unchanged invalid values ratchet", "openapi", `{"cronSpec":"bad","image":"j","replicas":15}`, "", nil, nil},
		// A changed value must be valid.
		{"openapi: another invalid replicas", "openapi", `{"cronSpec":"bad","image":"j","replicas":20}`, repl20, repl20C, nil},
		{"openapi: another invalid cronSpec", "openapi", `{"cronSpec":"bad2","image":"j","replicas":15}`, cron, cronC, nil},
		{"openapi: fixed replicas", "openapi", `{"cronSpec":"bad","image":"j","replicas":5}`, "", nil, nil},
		{"openapi: back to the old invalid replicas", "openapi", `{"cronSpec":"bad","image":"j","replicas":15}`, repl15, repl15C, nil},
		// A CEL rule without oldSelf ratchets; its error becomes a warning.
		{"cel: unchanged invalid image ratchets with a warning", "cel", `{"image":"forbidden","replicas":2}`, "", nil,
			[]string{`spec.image: Invalid value: "forbidden": image forbidden`}},
		{"cel: fixed image", "cel", `{"image":"allowed","replicas":2}`, "", nil, nil},
		{"cel: invalid image again", "cel", `{"image":"forbidden","replicas":2}`, img, imgC, nil},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			r := schemaPutSpec(t, e, s.object, s.spec, "")
			if s.invalid != "" {
				schemaExpectCRInvalid(t, r, s.object, s.invalid, s.causes)
				return
			}
			if r.code != http.StatusOK {
				t.Fatalf("update: %d, want 200: %s", r.code, r.body)
			}
			if got := schemaUserFields(r.object(t)); got != schemaCanonical(t, `{"spec":`+s.spec+`}`) {
				t.Errorf("update response spec %s, want %s", got, s.spec)
			}
			schemaCheckWarnings(t, "update", r, s.warnings)
		})
	}
	// Ratcheting never applies to create.
	t.Run("create with the old invalid values", func(t *testing.T) {
		r := e.do("POST", ctPath, schemaCRBody(t, "new", `{"spec":{"image":"forbidden","replicas":15}}`))
		schemaExpectCRInvalid(t, r, "new", "[spec.replicas: Invalid value: 15: spec.replicas in body should be less than or equal to 10, spec.image: Invalid value: \"forbidden\": image forbidden]",
			append(repl15C, imgC...))
	})
}

// ---------------------------------------------------------------------------
// Defaulting

func TestSchemaDefaulting(t *testing.T) {
	fx := loadSchemaFixtures(t)
	t.Run("crd-crontab-defaulting", func(t *testing.T) {
		e := start(t)
		e.createCRD(fx.crd(t, "crd-crontab-defaulting"))
		in := fx.value(t, "cr-crontab-defaulting-input")
		want := fx.value(t, "cr-crontab-defaulting-expected")
		r := e.do("POST", ctPath, mustJSON(in))
		if r.code != http.StatusCreated {
			t.Fatalf("create: %d %s", r.code, r.body)
		}
		got := r.object(t)
		if gu, wu := schemaUserFields(got), schemaUserFields(want); gu != wu {
			t.Errorf("create response %s, want %s", gu, wu)
		}
		if got["apiVersion"] != want["apiVersion"] || got["kind"] != want["kind"] {
			t.Errorf("apiVersion/kind %v/%v", got["apiVersion"], got["kind"])
		}
		g := e.do("GET", ctPath+"/my-new-cron-object", "")
		if gu, wu := schemaUserFields(g.object(t)), schemaUserFields(want); gu != wu {
			t.Errorf("GET %s, want %s", gu, wu)
		}
		schemaRunCRCases(t, e, "", []schemaCRCase{
			// Defaults apply only inside objects that exist.
			{name: "no-spec", fields: `{}`},
			{name: "empty-spec", fields: `{"spec":{}}`, want: `{"spec":{"cronSpec":"5 0 * * *","replicas":1}}`},
			// Nulls of non-nullable fields are dropped, then defaulted.
			{name: "nulls", fields: `{"spec":{"cronSpec":null,"replicas":null,"image":null}}`, want: `{"spec":{"cronSpec":"5 0 * * *","replicas":1}}`},
			{name: "given", fields: `{"spec":{"cronSpec":"1 2 3 4 5","replicas":7}}`},
		})
	})
	t.Run("schema-defaulting-nullable", func(t *testing.T) {
		e := start(t)
		e.createCRD(schemaCronTabCRD(fx.schema(t, "schema-defaulting-nullable")))
		schemaRunCRCases(t, e, "", []schemaCRCase{{
			name:   "documented-example",
			fields: mustJSON(fx.value(t, "schema-defaulting-nullable-input")),
			want:   mustJSON(fx.value(t, "schema-defaulting-nullable-expected")),
		}})
	})
}

// Defaults are applied when reading from storage and are not written
// back.
func TestSchemaDefaultsOnRead(t *testing.T) {
	fx := loadSchemaFixtures(t)
	e := start(t)
	e.createCRD(fx.crd(t, "crd-crontab-basic"))
	r := e.do("POST", ctPath, mustJSON(fx.value(t, "cr-crontab-basic")))
	if r.code != http.StatusCreated {
		t.Fatalf("create: %d %s", r.code, r.body)
	}
	created := r.object(t)
	rv := created["metadata"].(map[string]any)["resourceVersion"]
	stored := `{"spec":{"cronSpec":"* * * * */5","image":"my-awesome-cron-image"}}`
	if got := schemaUserFields(created); got != schemaCanonical(t, stored) {
		t.Fatalf("created %s", got)
	}

	schemaSetVersionSchema(t, e, "crontabs.stable.example.com", fx.crd(t, "crd-crontab-defaulting").Spec.Versions[0].Schema)
	var got map[string]any
	schemaWaitFor(t, e, "the default on GET", func() bool {
		g := e.do("GET", ctPath+"/my-new-cron-object", "")
		got = g.object(t)
		spec, _ := got["spec"].(map[string]any)
		return spec["replicas"] != nil
	})
	// The missing replicas is defaulted; the given cronSpec is kept.
	defaulted := schemaCanonical(t, `{"spec":{"cronSpec":"* * * * */5","image":"my-awesome-cron-image","replicas":1}}`)
	if gu := schemaUserFields(got); gu != defaulted {
		t.Errorf("GET %s, want %s", gu, defaulted)
	}
	md := got["metadata"].(map[string]any)
	if md["resourceVersion"] != rv || fmt.Sprint(md["generation"]) != "1" {
		t.Errorf("GET resourceVersion %v generation %v, want %v and 1 (nothing written)", md["resourceVersion"], md["generation"], rv)
	}
	l := e.do("GET", ctPath, "")
	items, _ := l.object(t)["items"].([]any)
	if len(items) != 1 {
		t.Fatalf("list: %s", l.body)
	}
	item := items[0].(map[string]any)
	if gu := schemaUserFields(item); gu != defaulted {
		t.Errorf("list item %s, want %s", gu, defaulted)
	}
	if item["metadata"].(map[string]any)["resourceVersion"] != rv {
		t.Errorf("list item resourceVersion %v, want %v", item["metadata"].(map[string]any)["resourceVersion"], rv)
	}

	// Without the default the stored object shows again: it was never written.
	schemaSetVersionSchema(t, e, "crontabs.stable.example.com", fx.crd(t, "crd-crontab-basic").Spec.Versions[0].Schema)
	schemaWaitFor(t, e, "GET without the default", func() bool {
		got = e.do("GET", ctPath+"/my-new-cron-object", "").object(t)
		spec, _ := got["spec"].(map[string]any)
		return spec["replicas"] == nil
	})
	if gu := schemaUserFields(got); gu != schemaCanonical(t, stored) {
		t.Errorf("GET after removing the default %s, want %s", gu, stored)
	}
	if got["metadata"].(map[string]any)["resourceVersion"] != rv {
		t.Errorf("resourceVersion changed: %v, want %v", got["metadata"].(map[string]any)["resourceVersion"], rv)
	}
}

// ---------------------------------------------------------------------------
// CEL validation rules

func TestSchemaCELRules(t *testing.T) {
	fx := loadSchemaFixtures(t)
	invalid := func(field, msg string) (string, []schemaCause) {
		return field + ": " + msg, []schemaCause{{field, metav1.CauseTypeFieldValueInvalid, msg, ""}}
	}
	maxRule, maxRuleC := invalid("spec", "Invalid value: replicas should be smaller than or equal to maxReplicas.")
	minRule, minRuleC := invalid("spec", "Invalid value: replicas should be greater than or equal to minReplicas.")
	hasRule, hasRuleC := invalid("spec", "Invalid value: failed rule: has(self.foo)")
	mapRule, mapRuleC := invalid("spec", "Invalid value: failed rule: self['xyz'].foo > 0")
	mapKey, mapKeyC := invalid("spec", `Invalid value: "object": no such key: xyz evaluating rule: self['xyz'].foo > 0`)
	arrRule, arrRuleC := invalid("foo", "Invalid value: failed rule: size(self) == 1")
	scalar, scalarC := invalid("spec.foo", "Invalid value: 0: failed rule: self > 0")
	root, rootC := invalid("<nil>", "Invalid value: failed rule: self.status.availableReplicas >= self.spec.minReplicas")

	for _, s := range []struct {
		fixture string
		cases   []schemaCRCase
	}{
		// Only the failing rule is reported, at the rule's location.
		{"schema-cel-replicas", []schemaCRCase{
			{name: "my-new-cron-object", fields: mustJSON(map[string]any{"spec": fx.value(t, "cr-crontab-cel-rejected")["spec"]}), invalid: maxRule, causes: maxRuleC},
			{name: "below-min", fields: `{"spec":{"minReplicas":5,"replicas":3,"maxReplicas":10}}`, invalid: minRule, causes: minRuleC},
			{name: "ordered", fields: `{"spec":{"minReplicas":0,"replicas":3,"maxReplicas":10}}`},
		}},
		// A root rule reads spec and status.
		{"schema-cel-root", []schemaCRCase{
			{name: "too-few", fields: `{"spec":{"minReplicas":3},"status":{"availableReplicas":2}}`, invalid: root, causes: rootC},
			{name: "enough", fields: `{"spec":{"minReplicas":3},"status":{"availableReplicas":3}}`},
		}},
		// has(); null counts as absent.
		{"schema-cel-has", []schemaCRCase{
			{name: "absent", fields: `{"spec":{}}`, invalid: hasRule, causes: hasRuleC},
			{name: "null", fields: `{"spec":{"foo":null}}`, invalid: hasRule, causes: hasRuleC},
			{name: "present", fields: `{"spec":{"foo":1}}`},
		}},
		// A rule on a map.
		{"schema-cel-map", []schemaCRCase{
			{name: "zero", fields: `{"spec":{"xyz":{"foo":0}}}`, invalid: mapRule, causes: mapRuleC},
			{name: "positive", fields: `{"spec":{"xyz":{"foo":1},"abc":{"foo":-1}}}`},
			{name: "missing-key", fields: `{"spec":{"abc":{"foo":1}}}`, invalid: mapKey, causes: mapKeyC},
		}},
		// A rule on an array.
		{"schema-cel-array", []schemaCRCase{
			{name: "two", fields: `{"foo":["a","b"]}`, invalid: arrRule, causes: arrRuleC},
			{name: "none", fields: `{"foo":[]}`, invalid: arrRule, causes: arrRuleC},
			{name: "one", fields: `{"foo":["a"]}`},
		}},
		// A rule on a scalar.
		{"schema-cel-scalar", []schemaCRCase{
			{name: "zero", fields: `{"spec":{"foo":0}}`, invalid: scalar, causes: scalarC},
			{name: "one", fields: `{"spec":{"foo":1}}`},
		}},
	} {
		t.Run(s.fixture, func(t *testing.T) {
			e := start(t)
			e.createCRD(schemaCronTabCRD(fx.schema(t, s.fixture)))
			schemaRunCRCases(t, e, "", s.cases)
		})
	}
}

// A failed rule's messageExpression, message, reason and fieldPath.
func TestSchemaCELMessagesReasonsFieldPaths(t *testing.T) {
	e := start(t)
	e.createCRD(schemaCronTabCRD(schemaJSONSchema(t, `{
		"type": "object",
		"properties": {"spec": {
			"type": "object",
			"properties": {
				"x": {"type": "integer"},
				"maxLimit": {"type": "integer"},
				"name": {"type": "string"},
				"test": {"type": "object", "properties": {"x": {"type": "integer"}}},
				"m": {"type": "object", "additionalProperties": {"type": "string"}}
			},
			"x-kubernetes-validations": [
				{"rule": "self.x <= self.maxLimit", "messageExpression": "\"x exceeded max limit of %d\".format([self.maxLimit])", "message": "static message"},
				{"rule": "self.x != 7", "messageExpression": "self.name", "message": "fallback message"},
				{"rule": "self.x != 8", "messageExpression": "self.name"},
				{"rule": "self.x != 9", "messageExpression": "\"first line\\nsecond line\"", "message": "newline fallback"},
				{"rule": "self.x >= 0", "reason": "FieldValueForbidden", "message": "x must not be negative"},
				{"rule": "self.x != 3", "reason": "FieldValueRequired", "message": "x must not be 3"},
				{"rule": "self.x != 4", "reason": "FieldValueDuplicate", "message": "x must not be 4"},
				{"rule": "self.x != 6", "reason": "FieldValueInvalid", "message": "x must not be 6"},
				{"rule": "self.test.x <= self.maxLimit", "fieldPath": ".test.x", "message": "test.x too big"},
				{"rule": "self.x != 5", "fieldPath": ".m['k']", "message": "five"}
			]
		}}
	}`)))
	one := func(field string, typ metav1.CauseType, msg string) (string, []schemaCause) {
		return field + ": " + msg, []schemaCause{{field, typ, msg, ""}}
	}
	var cases []schemaCRCase
	add := func(name, spec string, field string, typ metav1.CauseType, msg string) {
		inv, c := one(field, typ, msg)
		cases = append(cases, schemaCRCase{name: name, fields: `{"spec":` + spec + `}`, invalid: inv, causes: c})
	}
	// messageExpression wins over message.
	add("message-expression", `{"x":11,"maxLimit":10,"test":{"x":1}}`, "spec", metav1.CauseTypeFieldValueInvalid, "Invalid value: x exceeded max limit of 10")
	add("message-expression-name", `{"x":7,"maxLimit":10,"name":"custom message","test":{"x":1}}`, "spec", metav1.CauseTypeFieldValueInvalid, "Invalid value: custom message")
	// An empty result falls back to message...
	add("empty-falls-back-to-message", `{"x":7,"maxLimit":10,"name":"","test":{"x":1}}`, "spec", metav1.CauseTypeFieldValueInvalid, "Invalid value: fallback message")
	// ...or, without message, to "failed rule: <rule>"; so does an evaluation error (no name).
	add("empty-without-message", `{"x":8,"maxLimit":10,"name":"","test":{"x":1}}`, "spec", metav1.CauseTypeFieldValueInvalid, "Invalid value: failed rule: self.x != 8")
	add("error-without-message", `{"x":8,"maxLimit":10,"test":{"x":1}}`, "spec", metav1.CauseTypeFieldValueInvalid, "Invalid value: failed rule: self.x != 8")
	add("error-falls-back-to-message", `{"x":7,"maxLimit":10,"test":{"x":1}}`, "spec", metav1.CauseTypeFieldValueInvalid, "Invalid value: fallback message")
	// A result with line breaks falls back too.
	add("newline-falls-back", `{"x":9,"maxLimit":10,"test":{"x":1}}`, "spec", metav1.CauseTypeFieldValueInvalid, "Invalid value: newline fallback")
	// reason sets the cause type; 422 always.
	add("reason-forbidden", `{"x":-1,"maxLimit":10,"test":{"x":1}}`, "spec", metav1.CauseTypeForbidden, "Forbidden: x must not be negative")
	add("reason-required", `{"x":3,"maxLimit":10,"test":{"x":1}}`, "spec", metav1.CauseTypeFieldValueRequired, "Required value: x must not be 3")
	add("reason-duplicate", `{"x":4,"maxLimit":10,"test":{"x":1}}`, "spec", metav1.CauseTypeFieldValueDuplicate, "Duplicate value")
	add("reason-invalid", `{"x":6,"maxLimit":10,"test":{"x":1}}`, "spec", metav1.CauseTypeFieldValueInvalid, "Invalid value: x must not be 6")
	// fieldPath sets the error's path.
	add("field-path", `{"x":1,"maxLimit":10,"test":{"x":11}}`, "spec.test.x", metav1.CauseTypeFieldValueInvalid, "Invalid value: test.x too big")
	add("field-path-map-key", `{"x":5,"maxLimit":10,"test":{"x":1}}`, "spec.m[k]", metav1.CauseTypeFieldValueInvalid, "Invalid value: five")
	cases = append(cases, schemaCRCase{name: "valid", fields: `{"spec":{"x":1,"maxLimit":10,"test":{"x":1},"m":{"k":"v"}}}`})
	schemaRunCRCases(t, e, "", cases)
}

// Transition rules (rules with oldSelf; fixture schema-transition-low-high
// at spec.level).
func TestSchemaCELTransitionRules(t *testing.T) {
	fx := loadSchemaFixtures(t)
	e := start(t)
	e.createCRD(schemaCronTabCRD(schemaUnderSpec("level", fx.schema(t, "schema-transition-low-high"))))

	// A transition rule is never applied to a create, whatever the value.
	for _, c := range []struct{ name, level string }{{"low", "low"}, {"high", "high"}, {"unset", ""}} {
		spec := `{}`
		if c.level != "" {
			spec = `{"level":"` + c.level + `"}`
		}
		if r := e.do("POST", ctPath, schemaCRBody(t, c.name, `{"spec":`+spec+`}`)); r.code != http.StatusCreated {
			t.Fatalf("create %s: %d %s", c.name, r.code, r.body)
		}
	}
	// With a schema error the rules are not run, and that is said.
	t.Run("enum error stops rules", func(t *testing.T) {
		r := e.do("POST", ctPath, schemaCRBody(t, "bogus", `{"spec":{"level":"bogus"}}`))
		const enum = `Unsupported value: "bogus": supported values: "low", "medium", "high"`
		const notChecked = "Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation"
		schemaExpectCRInvalid(t, r, "bogus", "[spec.level: "+enum+", <nil>: "+notChecked+"]", []schemaCause{
			{"spec.level", metav1.CauseTypeFieldValueNotSupported, enum, ""},
			{"<nil>", metav1.CauseTypeFieldValueInvalid, notChecked, ""},
		})
	})
	rejected := func(v string) (string, []schemaCause) {
		msg := fmt.Sprintf(`Invalid value: %q: cannot transition directly between 'low' and 'high'`, v)
		return "spec.level: " + msg, []schemaCause{{"spec.level", metav1.CauseTypeFieldValueInvalid, msg, ""}}
	}
	toHigh, toHighC := rejected("high")
	toLow, toLowC := rejected("low")
	for _, s := range []struct {
		name, object, spec string
		invalid            string
		causes             []schemaCause
	}{
		{"low to high rejected", "low", `{"level":"high"}`, toHigh, toHighC},
		{"low to medium", "low", `{"level":"medium"}`, "", nil},
		{"medium to high", "low", `{"level":"high"}`, "", nil},
		{"high to low rejected", "low", `{"level":"low"}`, toLow, toLowC},
		{"high to high", "high", `{"level":"high"}`, "", nil},
		// Not applied when the old or the new value is missing.
		{"high to unset", "high", `{}`, "", nil},
		{"unset to low", "high", `{"level":"low"}`, "", nil},
		{"none to high", "unset", `{"level":"high"}`, "", nil},
	} {
		t.Run(s.name, func(t *testing.T) {
			r := schemaPutSpec(t, e, s.object, s.spec, "")
			if s.invalid != "" {
				schemaExpectCRInvalid(t, r, s.object, s.invalid, s.causes)
				return
			}
			if r.code != http.StatusOK {
				t.Fatalf("update: %d, want 200: %s", r.code, r.body)
			}
		})
	}
}

// Rules are compiled and checked when the CRD is written: types, fields,
// macros, what of metadata a rule sees, messageExpression, reason,
// fieldPath, optionalOldSelf, where oldSelf may be used and the cost of
// messageExpression.
func TestSchemaCELCRDWriteChecks(t *testing.T) {
	e := start(t)
	rules := func(props, validations string) string {
		return `{"type":"object","properties":{"spec":{"type":"object","properties":` + props + `,"x-kubernetes-validations":` + validations + `}}}`
	}
	const v0 = "<schema>.properties[spec].x-kubernetes-validations[0]"
	for _, c := range []struct {
		name   string
		schema string
		causes []schemaCause // nil: accepted
	}{
		{"no matching overload", `{"type":"object","properties":{"spec":{"type":"object","properties":{"foo":{"type":"integer","x-kubernetes-validations":[{"rule":"self == true"}]}}}}}`,
			[]schemaCause{{"<schema>.properties[spec].properties[foo].x-kubernetes-validations[0].rule", metav1.CauseTypeFieldValueInvalid, "",
				"compilation failed: ERROR: <input>:1:6: found no matching overload for '_==_' applied to '(int, bool)'"}}},
		{"undefined field", rules(`{"foo":{"type":"integer"}}`, `[{"rule":"self.nonExistingField > 0"}]`),
			[]schemaCause{{v0 + ".rule", metav1.CauseTypeFieldValueInvalid, "", "compilation failed: ERROR: <input>:1:5: undefined field 'nonExistingField'"}}},
		{"invalid has argument", rules(`{"foo":{"type":"integer"}}`, `[{"rule":"has(self)"}]`),
			[]schemaCause{{v0 + ".rule", metav1.CauseTypeFieldValueInvalid, "", "compilation failed: ERROR: <input>:1:5: invalid argument to has() macro"}}},
		{"metadata labels are not accessible", `{"type":"object","x-kubernetes-validations":[{"rule":"self.metadata.labels.size() > 0"}],"properties":{"spec":{"type":"object"}}}`,
			[]schemaCause{{"<schema>.x-kubernetes-validations[0].rule", metav1.CauseTypeFieldValueInvalid, "", "compilation failed: ERROR: <input>:1:14: undefined field 'labels'"}}},
		{"metadata name is accessible", `{"type":"object","x-kubernetes-validations":[{"rule":"self.metadata.name.startsWith('a')"}],"properties":{"spec":{"type":"object"}}}`, nil},
		{"blank rule", rules(`{"foo":{"type":"integer"}}`, `[{"rule":"  "}]`),
			[]schemaCause{{v0 + ".rule", metav1.CauseTypeFieldValueRequired, "Required value: rule is not specified", ""}}},
		{"messageExpression not a string", rules(`{"foo":{"type":"integer"}}`, `[{"rule":"self.foo > 0","messageExpression":"self.foo"}]`),
			[]schemaCause{{v0 + ".messageExpression", metav1.CauseTypeFieldValueInvalid, "", "messageExpression must evaluate to a string"}}},
		// string(int) is unbounded, so the documentation's example is over budget.
		{"documented messageExpression over budget", rules(`{"x":{"type":"integer"},"maxLimit":{"type":"integer"}}`, `[{"rule":"self.x <= self.maxLimit","messageExpression":"\"x exceeded max limit of \" + string(self.maxLimit)"}]`),
			[]schemaCause{
				{v0 + ".messageExpression", metav1.CauseTypeForbidden, "Forbidden: estimated messageExpression cost exceeds budget by factor of more than 100x (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)", ""},
				{v0 + ".messageExpression", metav1.CauseTypeForbidden, costContrib, ""},
				{"<schema>", metav1.CauseTypeForbidden, costTotal, ""},
			}},
		{"unknown reason", rules(`{"foo":{"type":"integer"}}`, `[{"rule":"self.foo > 0","reason":"Bogus"}]`),
			[]schemaCause{{v0 + ".reason", metav1.CauseTypeFieldValueNotSupported, `Unsupported value: "Bogus": supported values: "FieldValueDuplicate", "FieldValueForbidden", "FieldValueInvalid", "FieldValueRequired"`, ""}}},
		{"fieldPath with an index", rules(`{"foo":{"type":"array","items":{"type":"integer"}}}`, `[{"rule":"size(self.foo) > 0","fieldPath":".foo[0]"}]`),
			[]schemaCause{{v0 + ".fieldPath", metav1.CauseTypeFieldValueInvalid, `Invalid value: ".foo[0]": must be a valid path`, ""}}},
		{"fieldPath to no field", rules(`{"foo":{"type":"integer"}}`, `[{"rule":"self.foo > 0","fieldPath":".bar"}]`),
			[]schemaCause{{v0 + ".fieldPath", metav1.CauseTypeFieldValueInvalid, `Invalid value: ".bar": must be a valid path`, ""}}},
		{"optionalOldSelf without oldSelf", rules(`{"foo":{"type":"integer"}}`, `[{"rule":"self.foo > 0","optionalOldSelf":true}]`),
			[]schemaCause{{v0 + ".optionalOldSelf", metav1.CauseTypeFieldValueInvalid, "Invalid value: true: may not be set if oldSelf is not used in rule", ""}}},
		{"optionalOldSelf with oldSelf", rules(`{"foo":{"type":"integer"}}`, `[{"rule":"!oldSelf.hasValue() || self.foo >= oldSelf.value().foo","optionalOldSelf":true}]`), nil},
		{"oldSelf under an atomic list", rules(`{"foo":{"type":"array","maxItems":10,"items":{"type":"object","properties":{"a":{"type":"string","maxLength":10,"x-kubernetes-validations":[{"rule":"self == oldSelf"}]}}}}}`, `[]`),
			[]schemaCause{{"<schema>.properties[spec].properties[foo].items.properties[a].x-kubernetes-validations[0].rule", metav1.CauseTypeFieldValueInvalid,
				`Invalid value: "self == oldSelf": oldSelf cannot be used on the uncorrelatable portion of the schema within <schema>.properties[spec].properties[foo]`, ""}}},
		{"oldSelf under a map list", rules(`{"foo":{"type":"array","x-kubernetes-list-type":"map","x-kubernetes-list-map-keys":["a"],"maxItems":10,"items":{"type":"object","required":["a"],"properties":{"a":{"type":"string","maxLength":10,"x-kubernetes-validations":[{"rule":"self == oldSelf"}]}}}}}`, `[]`), nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			crd := schemaCronTabCRD(schemaJSONSchema(t, c.schema))
			if c.causes != nil {
				schemaExpectCRDInvalid(t, e.do("POST", schemaCRDPath+"?dryRun=All", mustJSON(crd)), c.causes)
				return
			}
			if r := e.do("POST", schemaCRDPath+"?dryRun=All", mustJSON(crd)); r.code != http.StatusCreated {
				t.Errorf("dry-run create: %d, want 201: %s", r.code, r.body)
			}
		})
	}
	if g := e.do("GET", schemaCRDPath+"/crontabs.stable.example.com", ""); g.code != http.StatusNotFound {
		t.Errorf("a dry-run CRD was stored: %d %s", g.code, g.body)
	}
}

// ---------------------------------------------------------------------------
// Field validation (fieldValidation=Ignore, Warn and Strict)

func TestSchemaFieldValidation(t *testing.T) {
	fx := loadSchemaFixtures(t)
	e := start(t)
	e.createCRD(fx.crd(t, "crd-crontab-basic"))
	if r := e.do("POST", ctPath, schemaCRBody(t, "existing", `{"spec":{"image":"a"}}`)); r.code != http.StatusCreated {
		t.Fatalf("create: %d %s", r.code, r.body)
	}
	raw := func(name, spec string) string {
		return `{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"` + name + `"},"spec":` + spec + `}`
	}
	put := func(spec string) func() string {
		return func() string {
			obj := e.do("GET", ctPath+"/existing", "").object(t)
			b, _ := json.Marshal(obj["metadata"])
			return `{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":` + string(b) + `,"spec":` + spec + `}`
		}
	}
	body := func(s string) func() string { return func() string { return s } }
	const strictPrefix = `CronTab in version "v1" cannot be handled as a CronTab: strict decoding error: `
	const supported = `Unsupported value: "Bogus": supported values: "", "Ignore", "Strict", "Warn"`
	const mergePatch, jsonPatch = "application/merge-patch+json", "application/json-patch+json"

	cases := []struct {
		name     string
		method   string
		object   string // path below ctPath: "" for POST
		query    string
		ctype    string
		body     func() string
		code     int
		reason   metav1.StatusReason
		msg      string // exact Status message
		msgPart  string // or a part of it
		causes   []schemaCause
		warnings []string // on success
		spec     string   // on success: the resulting spec
	}{
		// Create.
		{name: "create strict unknown", method: "POST", query: "?fieldValidation=Strict", body: body(raw("c1", `{"image":"a","x":1}`)),
			code: 400, reason: metav1.StatusReasonBadRequest, msg: strictPrefix + `unknown field "spec.x"`},
		{name: "create default warns unknown", method: "POST", body: body(raw("c2", `{"image":"a","x":1}`)),
			code: 201, warnings: []string{`unknown field "spec.x"`}, spec: `{"image":"a"}`},
		{name: "create warn unknown", method: "POST", query: "?fieldValidation=Warn", body: body(raw("c3", `{"image":"a","x":1}`)),
			code: 201, warnings: []string{`unknown field "spec.x"`}, spec: `{"image":"a"}`},
		{name: "create ignore unknown", method: "POST", query: "?fieldValidation=Ignore", body: body(raw("c4", `{"image":"a","x":1}`)),
			code: 201, spec: `{"image":"a"}`},
		{name: "create strict duplicate", method: "POST", query: "?fieldValidation=Strict", body: body(raw("c5", `{"image":"a","image":"b"}`)),
			code: 400, reason: metav1.StatusReasonBadRequest, msg: strictPrefix + `duplicate field "spec.image"`},
		{name: "create strict duplicate and unknown", method: "POST", query: "?fieldValidation=Strict", body: body(raw("c6", `{"image":"a","image":"b","x":1}`)),
			code: 400, reason: metav1.StatusReasonBadRequest, msg: strictPrefix + `duplicate field "spec.image", unknown field "spec.x"`},
		{name: "create default warns duplicate", method: "POST", body: body(raw("c7", `{"image":"a","image":"b"}`)),
			code: 201, warnings: []string{`duplicate field "spec.image"`}, spec: `{"image":"b"}`},
		{name: "create default warns duplicate and unknown", method: "POST", body: body(raw("c8", `{"image":"a","image":"b","x":1}`)),
			code: 201, warnings: []string{`duplicate field "spec.image"`, `unknown field "spec.x"`}, spec: `{"image":"b"}`},
		{name: "create ignore duplicate", method: "POST", query: "?fieldValidation=Ignore", body: body(raw("c9", `{"image":"a","image":"b"}`)),
			code: 201, spec: `{"image":"b"}`},
		{name: "create strict unknown metadata and top-level", method: "POST", query: "?fieldValidation=Strict",
			body: body(`{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"c10","bogusMeta":1},"top":1,"spec":{}}`),
			code: 400, reason: metav1.StatusReasonBadRequest, msg: strictPrefix + `unknown field "metadata.bogusMeta", unknown field "top"`},
		{name: "create default warns unknown metadata and top-level", method: "POST",
			body: body(`{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"c12","bogusMeta":1},"top":1,"spec":{}}`),
			code: 201, warnings: []string{`unknown field "metadata.bogusMeta"`, `unknown field "top"`}, spec: `{}`},
		{name: "create invalid fieldValidation", method: "POST", query: "?fieldValidation=Bogus", body: body(raw("c11", `{"image":"a"}`)),
			code: 422, reason: metav1.StatusReasonInvalid, msg: `CreateOptions.meta.k8s.io "" is invalid: fieldValidation: ` + supported,
			causes: []schemaCause{{"fieldValidation", metav1.CauseTypeFieldValueNotSupported, supported, ""}}},
		// Update.
		{name: "update strict unknown", method: "PUT", object: "/existing", query: "?fieldValidation=Strict", body: put(`{"image":"a","y":2}`),
			code: 400, reason: metav1.StatusReasonBadRequest, msg: strictPrefix + `unknown field "spec.y"`},
		{name: "update default warns unknown", method: "PUT", object: "/existing", body: put(`{"image":"a","y":2}`),
			code: 200, warnings: []string{`unknown field "spec.y"`}, spec: `{"image":"a"}`},
		{name: "update invalid fieldValidation", method: "PUT", object: "/existing", query: "?fieldValidation=Bogus", body: put(`{"image":"a"}`),
			code: 422, reason: metav1.StatusReasonInvalid, msg: `UpdateOptions.meta.k8s.io "" is invalid: fieldValidation: ` + supported,
			causes: []schemaCause{{"fieldValidation", metav1.CauseTypeFieldValueNotSupported, supported, ""}}},
		// Patch: Strict fails as 422 Invalid on the field "patch".
		{name: "merge patch strict unknown", method: "PATCH", object: "/existing", query: "?fieldValidation=Strict", ctype: mergePatch, body: body(`{"spec":{"x":1}}`),
			code: 422, reason: metav1.StatusReasonInvalid, msgPart: `strict decoding error: unknown field "spec.x"`,
			causes: []schemaCause{{"patch", metav1.CauseTypeFieldValueInvalid, "", `strict decoding error: unknown field "spec.x"`}}},
		{name: "merge patch strict duplicate", method: "PATCH", object: "/existing", query: "?fieldValidation=Strict", ctype: mergePatch, body: body(`{"spec":{"image":"c","image":"d"}}`),
			code: 422, reason: metav1.StatusReasonInvalid, msgPart: `strict decoding error: duplicate field "spec.image"`,
			causes: []schemaCause{{"patch", metav1.CauseTypeFieldValueInvalid, "", `strict decoding error: duplicate field "spec.image"`}}},
		{name: "merge patch strict unknown everywhere", method: "PATCH", object: "/existing", query: "?fieldValidation=Strict", ctype: mergePatch, body: body(`{"spec":{"x":1},"top":2,"metadata":{"zz":1}}`),
			code: 422, reason: metav1.StatusReasonInvalid, msgPart: `strict decoding error: unknown field "metadata.zz", unknown field "spec.x", unknown field "top"`,
			causes: []schemaCause{{"patch", metav1.CauseTypeFieldValueInvalid, "", `strict decoding error: unknown field "metadata.zz", unknown field "spec.x", unknown field "top"`}}},
		{name: "json patch strict unknown", method: "PATCH", object: "/existing", query: "?fieldValidation=Strict", ctype: jsonPatch, body: body(`[{"op":"add","path":"/spec/x","value":1}]`),
			code: 422, reason: metav1.StatusReasonInvalid, msgPart: `strict decoding error: unknown field "spec.x"`,
			causes: []schemaCause{{"patch", metav1.CauseTypeFieldValueInvalid, "", `strict decoding error: unknown field "spec.x"`}}},
		{name: "merge patch default warns unknown", method: "PATCH", object: "/existing", ctype: mergePatch, body: body(`{"spec":{"x":1}}`),
			code: 200, warnings: []string{`unknown field "spec.x"`}, spec: `{"image":"a"}`},
		{name: "merge patch ignore unknown", method: "PATCH", object: "/existing", query: "?fieldValidation=Ignore", ctype: mergePatch, body: body(`{"spec":{"x":1}}`),
			code: 200, spec: `{"image":"a"}`},
		{name: "patch invalid fieldValidation", method: "PATCH", object: "/existing", query: "?fieldValidation=Bogus", ctype: mergePatch, body: body(`{"spec":{"image":"e"}}`),
			code: 422, reason: metav1.StatusReasonInvalid, msg: `PatchOptions.meta.k8s.io "" is invalid: fieldValidation: ` + supported,
			causes: []schemaCause{{"fieldValidation", metav1.CauseTypeFieldValueNotSupported, supported, ""}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var headers []string
			if c.ctype != "" {
				headers = []string{"Content-Type", c.ctype}
			}
			r := e.do(c.method, ctPath+c.object+c.query, c.body(), headers...)
			if r.code != c.code {
				t.Fatalf("code %d, want %d: %s", r.code, c.code, r.body)
			}
			if c.code >= 400 {
				st := r.status(t)
				if st.Reason != c.reason || st.Code != int32(c.code) || st.Status != metav1.StatusFailure {
					t.Errorf("status %s %d %s, want Failure %d %s", st.Status, st.Code, st.Reason, c.code, c.reason)
				}
				if c.msg != "" && st.Message != c.msg {
					t.Errorf("message\n got %s\nwant %s", st.Message, c.msg)
				}
				if c.msgPart != "" && !strings.Contains(st.Message, c.msgPart) {
					t.Errorf("message %s\nwant it to contain %s", st.Message, c.msgPart)
				}
				if c.causes != nil {
					if st.Details == nil {
						t.Fatalf("no details: %s", r.body)
					}
					schemaCheckCauses(t, st.Details.Causes, c.causes, nil)
				}
				return
			}
			schemaCheckWarnings(t, c.name, r, c.warnings)
			spec, _ := json.Marshal(r.object(t)["spec"])
			if string(spec) != schemaCanonical(t, c.spec) {
				t.Errorf("spec %s, want %s", spec, c.spec)
			}
		})
	}

	// Unknown fields under x-kubernetes-preserve-unknown-fields are
	// kept and not reported; specified objects below are checked again.
	t.Run("preserve-unknown-fields", func(t *testing.T) {
		e := start(t)
		e.createCRD(schemaCronTabCRD(fx.schema(t, "schema-preserve-unknown-nested")))
		schemaRunCRCases(t, e, "?fieldValidation=Strict", []schemaCRCase{
			{name: "kept", fields: `{"json":{"status":{"x":1},"other":[1,{"a":"b"}],"spec":{"foo":"abc"}}}`},
		})
		r := e.do("POST", ctPath+"?fieldValidation=Strict", schemaCRBody(t, "nested", mustJSON(fx.value(t, "schema-preserve-unknown-nested-input"))))
		if r.code != http.StatusBadRequest {
			t.Fatalf("code %d, want 400: %s", r.code, r.body)
		}
		if st := r.status(t); st.Reason != metav1.StatusReasonBadRequest || st.Message != strictPrefix+`unknown field "json.spec.something"` {
			t.Errorf("status %s %q", st.Reason, st.Message)
		}
	})
}
