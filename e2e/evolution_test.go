package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"
)

// The compatibility checks of CRD changes (internal/evolution), end to end:
// for every rule, a CRD update that breaks it, with kubectl against
// crdserver (a Warning; with enforcement a 422 with one cause per finding
// and the CRD left as it was) and with `crdserver check-crd` on the same
// two files (the same finding; exit status 1).
//
// Each case is a folder of testdata/evolution: old.yaml and new.yaml, two
// revisions of one small CRD (widgets.<case>.evolution.example.com), and,
// for the rules that only count when an existing object fails them,
// object.yaml, an object the old revision accepts and the new one does not.

const (
	evoTestdata = "testdata/evolution"
	// evoEnforceAnnotation refuses a CRD's incompatible changes.
	evoEnforceAnnotation = "crdserver.io/enforce-compatibility"
	// evoObjectFails ends a server finding's message when an existing
	// object fails it: the server counts the objects (testdata's one,
	// default/existing), check-crd sees none.
	evoObjectFails = "; 1 of 1 existing objects fail it, e.g. default/existing ("
)

// evoCase is one folder of testdata/evolution.
type evoCase struct {
	dir string
	// want is the findings check-crd reports, as "<rule> version=<v>
	// path=<p>", and the server too unless noted below.
	want []string
	// notEstablished: the old revision never gets Established (its
	// conversion webhook's caBundle is no PEM bundle), as Kubernetes
	// refuses scope and kind changes of an Established CRD.
	notEstablished bool
	// refusedBy is the error of Kubernetes' own CRD validation, which
	// refuses the update before the compatibility checks run: the server
	// has no finding to report, only check-crd does.
	refusedBy string
	// unfailed: no existing object fails the new constraint, so the server
	// reports nothing (and accepts the change even where enforced) while
	// check-crd, which sees no objects, reports it.
	unfailed bool
	// flag: also run the enforced steps on a server started with
	// --enforce-crd-compatibility, without the annotation.
	flag bool
}

var evoCases = []evoCase{
	// Schema of a version served before and after.
	{dir: "field-removed", want: []string{"field-removed version=v1 path=.spec.color"}, flag: true},
	{dir: "type-changed", want: []string{"type-changed version=v1 path=.spec.size"}},
	{dir: "required-added", want: []string{"required-added version=v1 path=.spec.color"}, flag: true},
	{dir: "enum-narrowed", want: []string{"enum-narrowed version=v1 path=.spec.color"}},
	{dir: "pattern-changed", want: []string{"pattern-changed version=v1 path=.spec.name"}},
	{dir: "format-changed", want: []string{"format-changed version=v1 path=.spec.contact"}},
	{dir: "minimum-raised", want: []string{"minimum-raised version=v1 path=.spec.size"}},
	{dir: "maximum-lowered", want: []string{"maximum-lowered version=v1 path=.spec.size"}},
	{dir: "multipleof-changed", want: []string{"multipleof-changed version=v1 path=.spec.size"}},
	{dir: "maxlength-lowered", want: []string{"maxlength-lowered version=v1 path=.spec.name"}},
	{dir: "minlength-raised", want: []string{"minlength-raised version=v1 path=.spec.name"}},
	{dir: "maxitems-lowered", want: []string{"maxitems-lowered version=v1 path=.spec.tags"}},
	{dir: "minitems-raised", want: []string{"minitems-raised version=v1 path=.spec.tags"}},
	{dir: "maxproperties-lowered", want: []string{"maxproperties-lowered version=v1 path=.spec.labels"}},
	{dir: "minproperties-raised", want: []string{"minproperties-raised version=v1 path=.spec.labels"}},
	{dir: "cel-rule-added", want: []string{"cel-rule-added version=v1 path=.spec"}},
	{dir: "combinator-narrowed", want: []string{"combinator-narrowed version=v1 path=.spec"}},
	{dir: "list-type-changed", want: []string{"list-type-changed version=v1 path=.spec.tags"}},
	{dir: "list-map-keys-changed", want: []string{"list-map-keys-changed version=v1 path=.spec.ports"}},
	{dir: "map-type-changed", want: []string{"map-type-changed version=v1 path=.spec.labels"}},
	{dir: "preserve-unknown-fields-removed", want: []string{"preserve-unknown-fields-removed version=v1 path=.spec.extra"}},
	{dir: "additional-properties-narrowed", want: []string{"additional-properties-narrowed version=v1 path=.spec.labels"}},
	{dir: "embedded-resource-changed", want: []string{"embedded-resource-changed version=v1 path=.spec.template"}},
	{dir: "default-changed", want: []string{"default-changed version=v1 path=.spec.size"}},
	// Versions.
	{dir: "served-version-removed", want: []string{"served-version-removed version=v2 path="}},
	{dir: "version-unserved-without-deprecation", want: []string{"version-unserved-without-deprecation version=v2 path="}},
	{dir: "deprecated-for-less-stable", want: []string{"deprecated-for-less-stable version=v1 path="}},
	{dir: "storage-moved-to-less-stable", want: []string{"storage-moved-to-less-stable version=v1beta1 path="}},
	{dir: "storage-moved-to-new-version", want: []string{"storage-moved-to-new-version version=v2 path="}},
	{dir: "subresource-removed", want: []string{"subresource-removed version=v1 path="}},
	{dir: "scale-paths-changed", want: []string{"scale-paths-changed version=v1 path="}},
	{dir: "selectable-field-removed", want: []string{"selectable-field-removed version=v1 path=.spec.color"}},
	// The CRD.
	{dir: "scope-changed", want: []string{"scope-changed version= path="}, notEstablished: true},
	{dir: "kind-changed", want: []string{"kind-changed version= path="}, notEstablished: true},
	{dir: "listkind-changed", want: []string{"listkind-changed version= path="}, flag: true},
	{dir: "singular-changed", want: []string{"singular-changed version= path="}},
	{dir: "shortname-removed", want: []string{"shortname-removed version= path="}},
	{dir: "category-removed", want: []string{"category-removed version= path="}},
	// The CRD's name is <plural>.<group>, and a name never changes:
	// Kubernetes refuses these two changes itself, so only check-crd (which
	// compares any two files) can report them.
	{dir: "group-changed", want: []string{"group-changed version= path="},
		refusedBy: `spec.group: Invalid value: "group-changed-again.evolution.example.com": field is immutable`},
	{dir: "plural-changed", want: []string{"plural-changed version= path="},
		refusedBy: `spec.names.plural: Invalid value: "gadgets": field is immutable`},
	// No findings: a new optional field and a new served version.
	{dir: "compatible", flag: true},
	// A new maximum the existing object meets.
	{dir: "unfailed-constraint", want: []string{"maximum-lowered version=v1 path=.spec.size"}, unfailed: true},
}

// serverWant is what the server reports of the case's findings.
func (c evoCase) serverWant() []string {
	if c.refusedBy != "" || c.unfailed {
		return nil
	}
	return c.want
}

// evoConcurrency is how many cases run at once. A case mostly waits for
// kubectl and the servers, so more of them run than -parallel (the number
// of CPUs) would let through t.Parallel.
const evoConcurrency = 8

// TestCRDEvolution runs every case against three servers: one that warns,
// one where the CRDs carry the enforce annotation, and one started with
// --enforce-crd-compatibility (for the cases marked flag). The cases have
// distinct CRDs and run side by side.
func TestCRDEvolution(t *testing.T) {
	evoCheckCoverage(t)
	warn := startServer(t)
	annotated := startServer(t)
	flagged := startServer(t, "--enforce-crd-compatibility")
	var wg sync.WaitGroup
	slots := make(chan struct{}, evoConcurrency)
	for _, c := range evoCases {
		wg.Go(func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			t.Run(c.dir, func(t *testing.T) { evoRunCase(t, c, warn, annotated, flagged) })
		})
	}
	wg.Wait()
}

// evoCheckCoverage checks that the cases cover every rule internal/evolution
// reports (the rule ids passed to its add functions) and every folder of
// testdata/evolution.
func evoCheckCoverage(t *testing.T) {
	t.Helper()
	sources, err := filepath.Glob("../internal/evolution/*.go")
	if err != nil || len(sources) == 0 {
		t.Fatalf("no sources of internal/evolution: %v", err)
	}
	// The rule ids are the first arguments of add (and of upper and lower,
	// which add the limits' findings).
	ruleID := regexp.MustCompile(`\b(?:add|upper|lower)\("([a-z]+(?:-[a-z]+)+)"`)
	rules := map[string]bool{}
	for _, f := range sources {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ruleID.FindAllStringSubmatch(string(b), -1) {
			rules[m[1]] = true
		}
	}
	if len(rules) < 30 {
		t.Fatalf("found only %d rule ids in internal/evolution: %v", len(rules), rules)
	}
	covered := map[string]bool{}
	dirs := map[string]bool{}
	for _, c := range evoCases {
		dirs[c.dir] = true
		for _, w := range c.want {
			covered[strings.Fields(w)[0]] = true
		}
	}
	for r := range rules {
		if !covered[r] {
			t.Errorf("rule %s of internal/evolution has no case in evolution_test.go", r)
		}
	}
	for r := range covered {
		if !rules[r] {
			t.Errorf("a case expects rule %s, which internal/evolution does not have", r)
		}
	}
	entries, err := os.ReadDir(evoTestdata)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !dirs[e.Name()] {
			t.Errorf("%s/%s has no case in evolution_test.go", evoTestdata, e.Name())
		}
		delete(dirs, e.Name())
	}
	for d := range dirs {
		t.Errorf("case %s has no folder in %s", d, evoTestdata)
	}
}

// evoFinding is one finding of check-crd -o json.
type evoFinding struct {
	Rule    string `json:"rule"`
	Version string `json:"version"`
	Path    string `json:"path"`
	Message string `json:"message"`
}

func (f evoFinding) key() string {
	return fmt.Sprintf("%s version=%s path=%s", f.Rule, f.Version, f.Path)
}

// evoLine splits a finding's text line, "<rule> version=<v> path=<p>:
// <message>", into its key (what is before ": ") and the whole line.
var evoLine = regexp.MustCompile(`^([a-z]+(?:-[a-z]+)+ version=\S* path=\S*): `)

// evoFindingLines maps the keys of the finding lines in text to the lines.
// Lines that are not findings are returned apart.
func evoFindingLines(text, prefix string) (map[string]string, []string) {
	found := map[string]string{}
	var other []string
	for _, l := range lines(text) {
		rest, ok := strings.CutPrefix(l, prefix)
		m := evoLine.FindStringSubmatch(rest)
		if !ok || m == nil {
			other = append(other, l)
			continue
		}
		found[m[1]] = rest
	}
	return found, other
}

// evoCRD is what a test needs of a case's CRD.
type evoCRD struct {
	name, group, plural string
}

func evoReadCRD(t *testing.T, file string) (evoCRD, map[string]any) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	u := unstructured.Unstructured{Object: m}
	group, _, _ := unstructured.NestedString(m, "spec", "group")
	plural, _, _ := unstructured.NestedString(m, "spec", "names", "plural")
	return evoCRD{name: u.GetName(), group: group, plural: plural}, m
}

// evoAnnotated is a CRD file with the enforce annotation, as YAML.
func evoAnnotated(t *testing.T, file string) string {
	t.Helper()
	_, m := evoReadCRD(t, file)
	u := unstructured.Unstructured{Object: m}
	u.SetAnnotations(map[string]string{evoEnforceAnnotation: "true"})
	b, err := yaml.Marshal(u.Object)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// evoCheckRun is one run of crdserver check-crd.
type evoCheckRun struct {
	cmdline        string
	stdout, stderr string
	code           int
}

func (r evoCheckRun) String() string {
	return fmt.Sprintf("$ %s\n--- stdout:\n%s--- stderr:\n%s--- exit status %d", r.cmdline, r.stdout, r.stderr, r.code)
}

// evoCheckCRD runs crdserver check-crd with args (stdin if not empty).
func evoCheckCRD(t *testing.T, stdin string, args ...string) evoCheckRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, crdserverBin, append([]string{"check-crd"}, args...)...)
	// No kubeconfig but --kubeconfig's: crd/<name> without it finds no
	// server (./crdserver-data/admin.kubeconfig does not exist here).
	cmd.Env = []string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH")}
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := evoCheckRun{cmdline: "crdserver check-crd " + shellQuote(args), stdout: stdout.String(), stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit) && ctx.Err() == nil:
		r.code = exit.ExitCode()
	default:
		t.Fatalf("%s: %v\n%s", r.cmdline, err, r)
	}
	return r
}

// evoRunCase runs one case: check-crd on the files, then the update
// against the warning server and the enforcing ones.
func evoRunCase(t *testing.T, c evoCase, warn, annotated, flagged *server) {
	dir := filepath.Join(evoTestdata, c.dir)
	// Reading the folder makes go test rerun a cached result when one of
	// its files changes (check-crd and kubectl read them, not the test).
	_, _ = os.ReadDir(dir)
	oldFile, newFile, objFile := filepath.Join(dir, "old.yaml"), filepath.Join(dir, "new.yaml"), filepath.Join(dir, "object.yaml")
	if _, err := os.Stat(objFile); err != nil {
		objFile = ""
	}
	crd, _ := evoReadCRD(t, oldFile)

	// check-crd on the two files: the case's findings, in text and JSON.
	check := evoCheckCRD(t, "", oldFile, newFile)
	wantCode := 1
	if len(c.want) == 0 {
		wantCode = 0
	}
	if check.code != wantCode || check.stderr != "" {
		t.Fatalf("check-crd should exit %d, silently on stderr:\n%s", wantCode, check)
	}
	checkLines, other := evoFindingLines(check.stdout, "")
	if len(other) > 0 || !evoSameKeys(checkLines, c.want) {
		t.Fatalf("check-crd should print exactly the findings %q:\n%s", c.want, check)
	}
	js := evoCheckCRD(t, "", "-o", "json", oldFile, newFile)
	var findings []evoFinding
	if err := json.Unmarshal([]byte(js.stdout), &findings); err != nil || js.code != wantCode || findings == nil {
		t.Fatalf("check-crd -o json should print a JSON list and exit %d (%v):\n%s", wantCode, err, js)
	}
	if len(findings) != len(c.want) {
		t.Fatalf("check-crd -o json should list %d findings:\n%s", len(c.want), js)
	}
	for _, f := range findings {
		if line := checkLines[f.key()]; line != f.key()+": "+f.Message {
			t.Fatalf("check-crd -o json has %+v, its text output %q:\n%s", f, line, js)
		}
	}

	// Against the server that warns.
	t.Run("warn", func(t *testing.T) {
		k := newKubectl(t, warn)
		evoInstall(t, k, warn, c, crd, oldFile, "", objFile)
		// check-crd on the live CRD (crd/<name>) and the new file reads
		// the stored objects as the server does: it reports what the
		// server warns of (a tightened constraint no stored object fails
		// is no finding), worded as on the files, a finding perhaps
		// naming the stored objects the new schema refuses ("; 1 of 1
		// existing objects fail it, e.g. ...").
		live := evoCheckCRD(t, "", "--kubeconfig", warn.kubeconfig, "crd/"+crd.name, newFile)
		liveLines, liveOther := evoFindingLines(live.stdout, "")
		liveCode := 0
		if c.refusedBy == "" && len(c.serverWant()) > 0 {
			liveCode = 1
		}
		liveWant := c.serverWant()
		if c.refusedBy != "" {
			liveWant = c.want
			liveCode = check.code
		}
		if live.code != liveCode || live.stderr != "" || len(liveOther) > 0 || !evoSameKeys(liveLines, liveWant) {
			t.Fatalf("check-crd on the live CRD should print the findings %q (exit %d):\n%s\n%s", liveWant, liveCode, live, check)
		}
		for key, l := range liveLines {
			if line := checkLines[key]; l != line && !strings.HasPrefix(l, line+"; ") {
				t.Fatalf("check-crd on the live CRD says %q where on the files it says %q:\n%s", l, line, live)
			}
		}
		r := k.exec("", "apply", "-f", newFile)
		if c.refusedBy != "" {
			if r.err == nil || !strings.Contains(r.stderr, c.refusedBy) || strings.Contains(r.stderr, c.want[0]) {
				t.Fatalf("Kubernetes' validation should refuse the update with %q, before any finding:\n%s", c.refusedBy, r)
			}
			return
		}
		if r.err != nil {
			t.Fatalf("the update should succeed with warnings:\n%s", r)
		}
		mustContain(t, r.stdout, "customresourcedefinition.apiextensions.k8s.io/"+crd.name+" configured")
		warnings, _ := evoFindingLines(r.stderr, "Warning: ")
		if !evoSameKeys(warnings, c.serverWant()) || (len(c.serverWant()) == 0 && strings.Contains(r.stderr, "Warning:")) {
			t.Fatalf("kubectl should print the warnings %q, and no other:\n%s", c.serverWant(), r)
		}
		evoSameText(t, warnings, checkLines, objFile != "")
	})

	if c.refusedBy != "" {
		// The enforcing servers refuse it as the warning one does.
		return
	}
	enforced := func(t *testing.T, srv *server, annotate bool) {
		k := newKubectl(t, srv)
		oldYAML, newYAML := "", ""
		if annotate {
			oldYAML, newYAML = evoAnnotated(t, oldFile), evoAnnotated(t, newFile)
		}
		evoInstall(t, k, srv, c, crd, oldFile, oldYAML, objFile)
		before := evoGetSpec(t, srv, crd)
		var r result
		if annotate {
			r = k.exec(newYAML, "apply", "-f", "-")
		} else {
			r = k.exec("", "apply", "-f", newFile)
		}
		generation := k.run(t, "get", "crd", crd.name, "-o", "jsonpath={.metadata.generation}")
		if len(c.serverWant()) == 0 {
			// Nothing to refuse.
			if r.err != nil || strings.Contains(r.stderr, "Warning:") || generation != "2" {
				t.Fatalf("the update should succeed without warnings (generation 2, got %q):\n%s", generation, r)
			}
			return
		}
		if r.err == nil || !strings.Contains(r.stderr, fmt.Sprintf("The CustomResourceDefinition %q is invalid: ", crd.name)) {
			t.Fatalf("the update should be refused as invalid:\n%s", r)
		}
		if generation != "1" {
			t.Fatalf("a refused update changed the CRD: generation %s", generation)
		}
		// The same update through client-go: 422 Invalid, one cause per
		// finding, which kubectl printed.
		causes := evoCauses422(t, srv, crd, newFile)
		if !evoSameKeys(causes, c.serverWant()) {
			t.Fatalf("the 422 should have one cause per finding %q, got %q", c.serverWant(), causes)
		}
		evoSameText(t, causes, checkLines, objFile != "")
		for key, text := range causes {
			if want := evoCauseField(key) + ": Forbidden: " + text; !strings.Contains(r.stderr, want) {
				t.Fatalf("kubectl should print the cause %q:\n%s", want, r)
			}
		}
		if after := evoGetSpec(t, srv, crd); !reflect.DeepEqual(after, before) {
			t.Fatalf("a refused update changed the CRD's spec:\nbefore: %v\n after: %v", before, after)
		}
	}
	t.Run("enforce-annotation", func(t *testing.T) { enforced(t, annotated, true) })
	if c.flag {
		t.Run("enforce-flag", func(t *testing.T) { enforced(t, flagged, false) })
	}
}

// evoInstall applies a case's old revision (the file, or yaml if not
// empty), waits until it is Established (or, for the cases that need it
// not to be, until it is refused for its caBundle), and creates the case's
// object if it has one. The waits poll with client-go, which costs less
// than more kubectl processes.
func evoInstall(t *testing.T, k *kubectl, srv *server, c evoCase, crd evoCRD, oldFile, yaml, objFile string) {
	t.Helper()
	if yaml != "" {
		k.runStdin(t, yaml, "apply", "-f", "-")
	} else {
		k.run(t, "apply", "-f", oldFile)
	}
	want := "True"
	if c.notEstablished {
		want = "False InvalidCABundle"
	}
	crds := evoCRDClient(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), eventTimeout)
	defer cancel()
	var last string
	for {
		cur, err := crds.Get(ctx, crd.name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("CRD %s was not Established %q (last %q): %v", crd.name, want, last, err)
		}
		conditions, _, _ := unstructured.NestedSlice(cur.Object, "status", "conditions")
		for _, cond := range conditions {
			if m, _ := cond.(map[string]any); m["type"] == "Established" {
				last = fmt.Sprint(m["status"])
				if want != "True" {
					last += fmt.Sprint(" ", m["reason"])
				}
			}
		}
		if last == want {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("CRD %s was not Established %q within %v (last %q)", crd.name, want, eventTimeout, last)
		case <-time.After(20 * time.Millisecond):
		}
	}
	if objFile == "" {
		return
	}
	k.run(t, "apply", "-f", objFile)
	// A list (without resourceVersion) waits until the server's cache has
	// the object: the compatibility checks read the objects from it.
	dyn, err := dynamic.NewForConfig(srv.restConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	list, err := dyn.Resource(schema.GroupVersionResource{Group: crd.group, Version: "v1", Resource: crd.plural}).List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != 1 || list.Items[0].GetName() != "existing" {
		t.Fatalf("the list of %s should have the object existing: %v %v", crd.plural, list, err)
	}
}

// evoSameKeys reports whether the keys of found are want.
func evoSameKeys(found map[string]string, want []string) bool {
	if len(found) != len(want) {
		return false
	}
	for _, w := range want {
		if _, ok := found[w]; !ok {
			return false
		}
	}
	return true
}

// evoSameText checks that the server's finding texts are check-crd's. With
// an existing object that fails a finding, the server's message goes on
// with how many objects fail it, and which.
func evoSameText(t *testing.T, server, check map[string]string, objects bool) {
	t.Helper()
	for key, text := range server {
		want := check[key]
		if objects {
			want += evoObjectFails
			if !strings.HasPrefix(text, want) || !strings.HasSuffix(text, ")") {
				t.Fatalf("the server's finding should be check-crd's, with the failing object:\nserver:    %s\ncheck-crd: %s", text, check[key])
			}
		} else if text != want {
			t.Fatalf("the server's finding should be check-crd's:\nserver:    %s\ncheck-crd: %s", text, want)
		}
	}
}

// evoCauseField is the field of the cause of a finding: the version's
// entry of spec.versions, or spec for the CRD as a whole.
func evoCauseField(key string) string {
	v := strings.TrimPrefix(strings.Fields(key)[1], "version=")
	if v == "" {
		return "spec"
	}
	return "spec.versions[" + v + "]"
}

func evoCRDClient(t *testing.T, srv *server) dynamic.ResourceInterface {
	t.Helper()
	dyn, err := dynamic.NewForConfig(srv.restConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	return dyn.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
}

// evoGetSpec reads a CRD's spec with client-go.
func evoGetSpec(t *testing.T, srv *server, crd evoCRD) map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	cur, err := evoCRDClient(t, srv).Get(ctx, crd.name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	spec, _, _ := unstructured.NestedMap(cur.Object, "spec")
	return spec
}

// evoCauses422 sends the new revision as an update (PUT) with client-go,
// checks that it is refused 422 Invalid with only Forbidden causes, and
// returns the causes' findings (by key), as the server's finding texts.
func evoCauses422(t *testing.T, srv *server, crd evoCRD, newFile string) map[string]string {
	t.Helper()
	crds := evoCRDClient(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	var err error
	// The server's controllers may write the CRD's status meanwhile: a
	// conflict is tried again, a few times.
	for range 5 {
		var cur *unstructured.Unstructured
		cur, err = crds.Get(ctx, crd.name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		_, m := evoReadCRD(t, newFile)
		upd := &unstructured.Unstructured{Object: m}
		upd.SetResourceVersion(cur.GetResourceVersion())
		upd.SetAnnotations(cur.GetAnnotations())
		if _, err = crds.Update(ctx, upd, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
			break
		}
	}
	var st apierrors.APIStatus
	if !apierrors.IsInvalid(err) || !errors.As(err, &st) {
		t.Fatalf("the update should be 422 Invalid, got %v", err)
	}
	status := st.Status()
	if status.Code != 422 || status.Details == nil || len(status.Details.Causes) == 0 {
		t.Fatalf("the update should be 422 Invalid with causes, got %+v", status)
	}
	causes := map[string]string{}
	for _, cause := range status.Details.Causes {
		text, ok := strings.CutPrefix(cause.Message, "Forbidden: ")
		m := evoLine.FindStringSubmatch(text)
		if cause.Type != metav1.CauseType(field.ErrorTypeForbidden) || !ok || m == nil || cause.Field != evoCauseField(m[1]) {
			t.Fatalf("a cause of the 422 is not a finding under its field: %+v", cause)
		}
		if _, dup := causes[m[1]]; dup {
			t.Fatalf("two causes of the 422 for %s: %+v", m[1], status.Details.Causes)
		}
		causes[m[1]] = text
	}
	return causes
}

// TestCRDEvolutionCheckUsage checks check-crd's other forms and its
// usage errors (exit status 2), without a server.
func TestCRDEvolutionCheckUsage(t *testing.T) {
	readSources()
	_, _ = os.ReadDir(filepath.Join(evoTestdata, "field-removed"))
	oldFile := filepath.Join(evoTestdata, "field-removed", "old.yaml")
	newFile := filepath.Join(evoTestdata, "field-removed", "new.yaml")
	want := evoCheckCRD(t, "", oldFile, newFile)
	if want.code != 1 || !strings.HasPrefix(want.stdout, "field-removed version=v1 path=.spec.color: ") {
		t.Fatalf("check-crd on field-removed:\n%s", want)
	}
	oldYAML, err := os.ReadFile(oldFile)
	if err != nil {
		t.Fatal(err)
	}
	// The same with OLD on standard input, and with the flag after the files.
	if r := evoCheckCRD(t, string(oldYAML), "-", newFile); r.code != 1 || r.stdout != want.stdout {
		t.Errorf("OLD on standard input should print what the files do:\n%s", r)
	}
	if r := evoCheckCRD(t, "", oldFile, newFile, "-o", "text"); r.code != 1 || r.stdout != want.stdout {
		t.Errorf("-o after the files should be taken:\n%s", r)
	}
	// A file compared with itself: no findings.
	if r := evoCheckCRD(t, "", oldFile, oldFile); r.code != 0 || r.stdout != "" || r.stderr != "" {
		t.Errorf("a CRD against itself should be no finding:\n%s", r)
	}
	if r := evoCheckCRD(t, "", "-o", "json", oldFile, oldFile); r.code != 0 || strings.TrimSpace(r.stdout) != "[]" {
		t.Errorf("no findings in JSON should be []:\n%s", r)
	}
	// -h is help, not an error.
	if r := evoCheckCRD(t, "", "-h"); r.code != 0 || !strings.Contains(r.stderr, "usage: crdserver check-crd") {
		t.Errorf("-h should print the usage and exit 0:\n%s", r)
	}
	for _, c := range []struct {
		args   []string
		stdin  string
		stderr string
	}{
		{args: nil, stderr: "want OLD and NEW, got 0 arguments"},
		{args: []string{oldFile}, stderr: "want OLD and NEW, got 1 arguments"},
		{args: []string{oldFile, newFile, newFile}, stderr: "want OLD and NEW, got 3 arguments"},
		{args: []string{"-o", "yaml", oldFile, newFile}, stderr: `-o must be text or json, not "yaml"`},
		{args: []string{"--no-such-flag", oldFile, newFile}, stderr: "flag provided but not defined: -no-such-flag"},
		{args: []string{"-", "-"}, stdin: string(oldYAML), stderr: "only one of OLD and NEW can be standard input"},
		{args: []string{filepath.Join(evoTestdata, "no-such-file.yaml"), newFile}, stderr: "no such file or directory"},
		{args: []string{filepath.Join(evoTestdata, "required-added", "object.yaml"), newFile}, stderr: "want an apiextensions.k8s.io/v1 CustomResourceDefinition"},
		{args: []string{"crd/widgets.field-removed.evolution.example.com", newFile}, stderr: "crd/widgets.field-removed.evolution.example.com: "},
	} {
		r := evoCheckCRD(t, c.stdin, c.args...)
		if r.code != 2 || r.stdout != "" || !strings.Contains(r.stderr, c.stderr) {
			t.Errorf("should exit 2 saying %q:\n%s", c.stderr, r)
		}
	}
}
