package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The fixtures of the schema scenario.
const (
	schemaCRDFile     = "testdata/schema-crontab-crd.yaml" // crontabs.schema.example.com
	schemaCronTabFile = "testdata/schema-crontab.yaml"     // nightly
	schemaCRDName     = "crontabs.schema.example.com"
	schemaCronTabName = "nightly"
)

// schemaCronTab is a CronTab manifest for the schema CRD. spec holds the
// lines of its spec ("image: web:2"); cronSpec and image are there unless
// spec sets them, or names them with no value ("image:") to leave them out.
func schemaCronTab(name string, spec ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: schema.example.com/v1\nkind: CronTab\nmetadata:\n  name: %s\nspec:\n", name)
	for _, field := range []string{`cronSpec: "*/5 * * * *"`, "image: web:2"} {
		key, _, _ := strings.Cut(field, ":")
		if !slices.ContainsFunc(spec, func(l string) bool { return strings.HasPrefix(l, key+":") }) {
			spec = append([]string{field}, spec...)
		}
	}
	for _, l := range spec {
		if strings.HasSuffix(l, ":") && !strings.Contains(l, " ") {
			continue // a field left out
		}
		b.WriteString("  " + strings.ReplaceAll(l, "\n", "\n  ") + "\n")
	}
	return b.String()
}

// TestSchema applies a CRD's structural schema with kubectl: defaults,
// pruning and x-kubernetes-preserve-unknown-fields, kubectl's three field
// validation modes, OpenAPI validation and CEL rules (a transition rule
// among them) on create, patch, apply and edit, and kubectl explain from
// the published OpenAPI. Every expected text is what Kubernetes 1.37's
// apiextensions-apiserver answers the same kubectl.
func TestSchema(t *testing.T) {
	srv := startServer(t)
	k := newKubectl(t, srv)

	// The steps share the server's state: a step that sets up state for
	// the rest ends the scenario when it fails.
	must := func(name string, f func(t *testing.T)) {
		t.Helper()
		if !t.Run(name, f) {
			t.FailNow()
		}
	}

	must("apply CRD and wait for Established", func(t *testing.T) {
		out := k.run(t, "apply", "-f", schemaCRDFile)
		mustEqual(t, "kubectl apply of the CRD", out, "customresourcedefinition.apiextensions.k8s.io/"+schemaCRDName+" created\n")
		out = k.run(t, "wait", "--for=condition=Established", "crd/"+schemaCRDName, "--timeout=60s")
		mustContain(t, out, "customresourcedefinition.apiextensions.k8s.io/"+schemaCRDName+" condition met")
	})

	must("defaults are applied and spec.extra is kept as it is", func(t *testing.T) {
		out := k.run(t, "apply", "-f", schemaCronTabFile)
		mustEqual(t, "kubectl apply", out, "crontab.schema.example.com/nightly created\n")
		out = k.run(t, "get", "crontab", schemaCronTabName, "-o", "yaml")
		obj := parseYAML(t, out)
		spec, _, _ := unstructured.NestedMap(obj.Object, "spec")
		want := map[string]any{
			"cronSpec":    "0 3 * * *",
			"image":       "backup:1.0",
			"replicas":    int64(1),
			"minReplicas": int64(0),
			"maxReplicas": int64(10),
			"extra": map[string]any{
				"retries": int64(3),
				"target": map[string]any{
					"bucket": "archive",
					"paths":  []any{"/var/lib", "/etc"},
				},
			},
		}
		if !reflect.DeepEqual(spec, want) {
			t.Errorf("spec = %v,\nwant %v; object:\n%s", spec, want, out)
		}
		if g := obj.GetGeneration(); g != 1 {
			t.Errorf("metadata.generation = %d, want 1", g)
		}
	})

	// spec.foo is not in the schema; spec.extra.foo is kept, because
	// spec.extra preserves unknown fields.
	withUnknownField := func(name string) string {
		return schemaCronTab(name, "foo: bar", "extra:\n  foo: kept")
	}
	// prunedSpec is the spec the server stores for withUnknownField.
	prunedSpec := `{"cronSpec":"*/5 * * * *","extra":{"foo":"kept"},"image":"web:2","maxReplicas":10,"minReplicas":0,"replicas":1}`
	getSpec := func(t *testing.T, name string) string {
		t.Helper()
		return k.run(t, "get", "crontab", name, "-o", "jsonpath={.spec}")
	}
	notFound := func(t *testing.T, name string) {
		t.Helper()
		r := k.exec("", "get", "crontab", name)
		want := `Error from server (NotFound): crontabs.schema.example.com "` + name + `" not found` + "\n"
		if r.err == nil || r.stderr != want {
			t.Errorf("CronTab %s should not exist; want stderr %q:\n%s", name, want, r)
		}
	}

	t.Run("unknown field: --validate=strict (the default) refuses the object", func(t *testing.T) {
		want := `Error from server (BadRequest): error when creating "STDIN": CronTab in version "v1" cannot be handled as a CronTab: strict decoding error: unknown field "spec.foo"` + "\n"
		for _, args := range [][]string{
			{"apply", "-f", "-"},
			{"apply", "--validate=strict", "-f", "-"},
			{"apply", "--validate=true", "-f", "-"},
		} {
			r := k.exec(withUnknownField("unknown-strict"), args...)
			if r.err == nil || r.stdout != "" || r.stderr != want {
				t.Errorf("want exit status 1, no output and stderr %q:\n%s", want, r)
			}
		}
		notFound(t, "unknown-strict")
	})

	t.Run("unknown field: --validate=warn warns and prunes it", func(t *testing.T) {
		r := k.exec(withUnknownField("unknown-warn"), "apply", "--validate=warn", "-f", "-")
		if r.err != nil || r.stdout != "crontab.schema.example.com/unknown-warn created\n" || r.stderr != `Warning: unknown field "spec.foo"`+"\n" {
			t.Errorf("want success, \"crontab.schema.example.com/unknown-warn created\" and the warning `Warning: unknown field \"spec.foo\"`:\n%s", r)
		}
		mustEqual(t, "spec of unknown-warn", getSpec(t, "unknown-warn"), prunedSpec)
	})

	t.Run("unknown field: --validate=false prunes it silently", func(t *testing.T) {
		r := k.exec(withUnknownField("unknown-off"), "apply", "--validate=false", "-f", "-")
		if r.err != nil || r.stdout != "crontab.schema.example.com/unknown-off created\n" || r.stderr != "" {
			t.Errorf("want success, \"crontab.schema.example.com/unknown-off created\" and nothing on stderr:\n%s", r)
		}
		mustEqual(t, "spec of unknown-off", getSpec(t, "unknown-off"), prunedSpec)
	})

	t.Run("unknown field: apply to an existing object", func(t *testing.T) {
		// The live object lacks spec.foo, so kubectl's patch sets it
		// again; in Strict mode the server refuses the patched object
		// and quotes it whole.
		r := k.exec(withUnknownField("unknown-warn"), "apply", "-f", "-")
		prefix := `The request is invalid: patch: Invalid value: "{\"apiVersion\":\"schema.example.com/v1\",\"kind\":\"CronTab\",`
		suffix := `\"spec\":{\"cronSpec\":\"*/5 * * * *\",\"extra\":{\"foo\":\"kept\"},\"foo\":\"bar\",\"image\":\"web:2\",\"maxReplicas\":10,\"minReplicas\":0,\"replicas\":1}}": strict decoding error: unknown field "spec.foo"` + "\n"
		if r.err == nil || r.stdout != "" || !strings.HasPrefix(r.stderr, prefix) || !strings.HasSuffix(r.stderr, suffix) || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("want exit status 1 and one line on stderr that starts with %q and ends with %q:\n%s", prefix, suffix, r)
		}
		r = k.exec(withUnknownField("unknown-warn"), "apply", "--validate=warn", "-f", "-")
		if r.err != nil || r.stdout != "crontab.schema.example.com/unknown-warn configured\n" || r.stderr != `Warning: unknown field "spec.foo"`+"\n" {
			t.Errorf("want success, \"crontab.schema.example.com/unknown-warn configured\" and the warning `Warning: unknown field \"spec.foo\"`:\n%s", r)
		}
		mustEqual(t, "spec of unknown-warn", getSpec(t, "unknown-warn"), prunedSpec)
	})

	t.Run("unknown field: server-side apply refuses it whatever the mode", func(t *testing.T) {
		// Kubernetes answers this 500 ("Error from server: ..."); crdserver
		// answers the same text as 400 BadRequest, since the mistake is the
		// client's (../shared/spec/reference-notes.md accepts a 4xx).
		want := `Error from server (BadRequest): failed to create typed patch object (default/unknown-ssa; schema.example.com/v1, Kind=CronTab): .spec.foo: field not declared in schema` + "\n"
		for _, mode := range []string{"strict", "warn"} {
			r := k.exec(withUnknownField("unknown-ssa"), "apply", "--server-side", "--validate="+mode, "-f", "-")
			if r.err == nil || r.stdout != "" || r.stderr != want {
				t.Errorf("want exit status 1, no output and stderr %q:\n%s", want, r)
			}
		}
		notFound(t, "unknown-ssa")
	})

	t.Run("invalid objects are refused with Kubernetes' messages", func(t *testing.T) {
		const notChecked = "* <nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation\n"
		for _, tc := range []struct {
			name string
			spec []string
			want string // stderr
		}{{
			name: "above-maximum",
			spec: []string{"replicas: 15", "maxReplicas: 20"},
			want: `The CronTab "above-maximum" is invalid: spec.replicas: Invalid value: 15: spec.replicas in body should be less than or equal to 10` + "\n",
		}, {
			name: "below-minimum",
			spec: []string{"replicas: -1", "minReplicas: -5"},
			want: `The CronTab "below-minimum" is invalid: spec.replicas: Invalid value: -1: spec.replicas in body should be greater than or equal to 0` + "\n",
		}, {
			name: "cel-rule",
			spec: []string{"replicas: 2", "minReplicas: 5"},
			want: `The CronTab "cel-rule" is invalid: spec: Invalid value: replicas must be between minReplicas and maxReplicas` + "\n",
		}, {
			// The maximum and the CEL rule (with maxReplicas defaulted
			// to 10) both fail.
			name: "two-errors",
			spec: []string{"replicas: 15"},
			want: `The CronTab "two-errors" is invalid: ` + "\n" +
				`* spec.replicas: Invalid value: 15: spec.replicas in body should be less than or equal to 10` + "\n" +
				`* spec: Invalid value: replicas must be between minReplicas and maxReplicas` + "\n",
		}, {
			name: "pattern",
			spec: []string{"cronSpec: every minute"},
			want: `The CronTab "pattern" is invalid: spec.cronSpec: Invalid value: "every minute": spec.cronSpec in body should match '^(\d+|\*)(/\d+)?(\s+(\d+|\*)(/\d+)?){4}$'` + "\n",
		}, {
			// A required field is missing: the CEL rules are not run.
			name: "required",
			spec: []string{"image:"},
			want: `The CronTab "required" is invalid: ` + "\n" +
				`* spec.image: Required value` + "\n" + notChecked,
		}, {
			name: "wrong-type",
			spec: []string{"replicas: three"},
			want: `The CronTab "wrong-type" is invalid: ` + "\n" +
				`* spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string"` + "\n" + notChecked,
		}} {
			manifest := schemaCronTab(tc.name, tc.spec...)
			for _, verb := range []string{"apply", "create"} {
				r := k.exec(manifest, verb, "-f", "-")
				if r.err == nil || r.stdout != "" || r.stderr != tc.want {
					t.Errorf("%s: want exit status 1, no output and stderr\n%s\n%s", tc.name, tc.want, r)
				}
			}
			notFound(t, tc.name)
		}
	})

	t.Run("patches that break the transition rule are refused", func(t *testing.T) {
		want := `The CronTab "nightly" is invalid: spec.image: Invalid value: "backup:2.0": image is immutable` + "\n"
		for _, args := range [][]string{
			{"--type=merge", "-p", `{"spec":{"image":"backup:2.0"}}`},
			{"--type=json", "-p", `[{"op":"replace","path":"/spec/image","value":"backup:2.0"}]`},
		} {
			r := k.exec("", append([]string{"patch", "crontab", schemaCronTabName}, args...)...)
			if r.err == nil || r.stdout != "" || r.stderr != want {
				t.Errorf("want exit status 1, no output and stderr %q:\n%s", want, r)
			}
		}
		// Every failing rule is reported, the transition rule last.
		r := k.exec("", "patch", "crontab", schemaCronTabName, "--type=merge", "-p", `{"spec":{"image":"backup:2.0","replicas":20}}`)
		wantAll := `The CronTab "nightly" is invalid: ` + "\n" +
			`* spec.replicas: Invalid value: 20: spec.replicas in body should be less than or equal to 10` + "\n" +
			`* spec: Invalid value: replicas must be between minReplicas and maxReplicas` + "\n" +
			`* spec.image: Invalid value: "backup:2.0": image is immutable` + "\n"
		if r.err == nil || r.stdout != "" || r.stderr != wantAll {
			t.Errorf("want exit status 1, no output and stderr\n%s\n%s", wantAll, r)
		}
		// kubectl apply of a changed image is refused the same way.
		changed, err := os.ReadFile(schemaCronTabFile)
		if err != nil {
			t.Fatal(err)
		}
		r = k.exec(strings.Replace(string(changed), "image: backup:1.0", "image: backup:2.0", 1), "apply", "-f", "-")
		if r.err == nil || r.stdout != "" || r.stderr != want {
			t.Errorf("kubectl apply: want exit status 1, no output and stderr %q:\n%s", want, r)
		}
		// A change that keeps to the rules is taken.
		out := k.run(t, "patch", "crontab", schemaCronTabName, "--type=merge", "-p", `{"spec":{"replicas":3}}`)
		mustEqual(t, "kubectl patch", out, "crontab.schema.example.com/nightly patched\n")
		mustEqual(t, "image, replicas and generation after the patches", k.run(t, "get", "crontab", schemaCronTabName,
			"-o", "jsonpath={.spec.image} {.spec.replicas} {.metadata.generation}"), "backup:1.0 3 2")
	})

	t.Run("kubectl edit that breaks the transition rule is refused", func(t *testing.T) {
		// The editor is a script that changes the file with sed. When
		// the server refuses the edit, kubectl reopens the file with the
		// errors on top; the script then changes nothing, so kubectl
		// cancels and keeps a copy in $TMPDIR.
		dir := t.TempDir()
		editor := filepath.Join(dir, "editor.sh")
		if err := os.WriteFile(editor, []byte("#!/bin/sh\nexec sed -i \"$SCHEMA_E2E_EDIT\" \"$1\"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		tmp := filepath.Join(dir, "tmp")
		if err := os.Mkdir(tmp, 0o755); err != nil {
			t.Fatal(err)
		}
		edit := func(sedScript string) result {
			ke := *k
			ke.env = append(slices.Clip(k.env), "KUBE_EDITOR="+editor, "EDITOR="+editor, "TMPDIR="+tmp, "SCHEMA_E2E_EDIT="+sedScript)
			return ke.exec("", "edit", "crontab", schemaCronTabName)
		}

		r := edit("s/image: backup:1.0/image: backup:3.0/")
		stderr := regexp.MustCompile(`^error: crontabs.schema.example.com "nightly" is invalid\n` +
			`A copy of your changes has been stored to "(.*)"\n` +
			`error: Edit cancelled, no valid changes were saved.\n$`)
		m := stderr.FindStringSubmatch(r.stderr)
		if r.err == nil || r.stdout != "" || m == nil {
			t.Fatalf("want exit status 1, no output and stderr matching %q:\n%s", stderr, r)
		}
		if filepath.Dir(m[1]) != tmp || !regexp.MustCompile(`^kubectl-edit-\d+\.yaml$`).MatchString(filepath.Base(m[1])) {
			t.Errorf("the copy of the changes is %s, want %s/kubectl-edit-NNN.yaml", m[1], tmp)
		}
		saved, err := os.ReadFile(m[1])
		if err != nil {
			t.Fatalf("the copy of the changes: %v", err)
		}
		wantHead := "# Please edit the object below. Lines beginning with a '#' will be ignored,\n" +
			"# and an empty file will abort the edit. If an error occurs while saving this file will be\n" +
			"# reopened with the relevant failures.\n" +
			"#\n" +
			"# crontabs.schema.example.com \"nightly\" was not valid:\n" +
			"# * spec.image: Invalid value: \"backup:3.0\": image is immutable\n" +
			"#\n" +
			"apiVersion: schema.example.com/v1\n"
		if !strings.HasPrefix(string(saved), wantHead) || !strings.Contains(string(saved), "\n  image: backup:3.0\n") {
			t.Errorf("the copy of the changes should start with\n%s\nand have image: backup:3.0; it is:\n%s", wantHead, saved)
		}

		r = edit("s/replicas: 3/replicas: 4/")
		if r.err != nil || r.stdout != "crontab.schema.example.com/nightly edited\n" || r.stderr != "" {
			t.Errorf("a valid edit: want success and \"crontab.schema.example.com/nightly edited\":\n%s", r)
		}
		mustEqual(t, "image and replicas after the edits", k.run(t, "get", "crontab", schemaCronTabName,
			"-o", "jsonpath={.spec.image} {.spec.replicas}"), "backup:1.0 4")
	})

	t.Run("kubectl explain", func(t *testing.T) {
		// OpenAPI v3, as kubectl explain reads it by default.
		spec := "GROUP:      schema.example.com\n" +
			"KIND:       CronTab\n" +
			"VERSION:    v1\n" +
			"\n" +
			"FIELD: spec <Object>\n" +
			"\n" +
			"\n" +
			"DESCRIPTION:\n" +
			"    Spec is the desired state of the CronTab.\n" +
			"    \n" +
			"FIELDS:\n" +
			"  cronSpec\t<string> -required-\n" +
			"    The schedule, in cron format.\n" +
			"\n" +
			"  extra\t<Object>\n" +
			"    Free-form settings, kept as they are.\n" +
			"\n" +
			"  image\t<string> -required-\n" +
			"    The container image to run. It cannot be changed.\n" +
			"\n" +
			"  maxReplicas\t<integer>\n" +
			"    The highest replicas may go.\n" +
			"\n" +
			"  minReplicas\t<integer>\n" +
			"    The lowest replicas may go.\n" +
			"\n" +
			"  replicas\t<integer>\n" +
			"    How many copies run at once.\n" +
			"\n" +
			"\n"
		replicas := "GROUP:      schema.example.com\n" +
			"KIND:       CronTab\n" +
			"VERSION:    v1\n" +
			"\n" +
			"FIELD: replicas <integer>\n" +
			"\n" +
			"\n" +
			"DESCRIPTION:\n" +
			"    How many copies run at once.\n" +
			"    \n" +
			"\n"
		recursive := "GROUP:      schema.example.com\n" +
			"KIND:       CronTab\n" +
			"VERSION:    v1\n" +
			"\n" +
			"DESCRIPTION:\n" +
			"    CronTab runs a container image on a schedule.\n" +
			"    \n" +
			"FIELDS:\n" +
			"  apiVersion\t<string>\n" +
			"  kind\t<string>\n" +
			"  metadata\t<ObjectMeta>\n" +
			"    annotations\t<map[string]string>\n" +
			"    creationTimestamp\t<string>\n" +
			"    deletionGracePeriodSeconds\t<integer>\n" +
			"    deletionTimestamp\t<string>\n" +
			"    finalizers\t<[]string>\n" +
			"    generateName\t<string>\n" +
			"    generation\t<integer>\n" +
			"    labels\t<map[string]string>\n" +
			"    managedFields\t<[]ManagedFieldsEntry>\n" +
			"      apiVersion\t<string>\n" +
			"      fieldsType\t<string>\n" +
			"      fieldsV1\t<FieldsV1>\n" +
			"      manager\t<string>\n" +
			"      operation\t<string>\n" +
			"      subresource\t<string>\n" +
			"      time\t<string>\n" +
			"    name\t<string>\n" +
			"    namespace\t<string>\n" +
			"    ownerReferences\t<[]OwnerReference>\n" +
			"      apiVersion\t<string> -required-\n" +
			"      blockOwnerDeletion\t<boolean>\n" +
			"      controller\t<boolean>\n" +
			"      kind\t<string> -required-\n" +
			"      name\t<string> -required-\n" +
			"      uid\t<string> -required-\n" +
			"    resourceVersion\t<string>\n" +
			"    selfLink\t<string>\n" +
			"    uid\t<string>\n" +
			"  spec\t<Object>\n" +
			"    cronSpec\t<string> -required-\n" +
			"    extra\t<Object>\n" +
			"    image\t<string> -required-\n" +
			"    maxReplicas\t<integer>\n" +
			"    minReplicas\t<integer>\n" +
			"    replicas\t<integer>\n" +
			"\n"
		// OpenAPI v2, which kubectl reads for plaintext-openapiv2.
		specV2 := "KIND:     CronTab\n" +
			"VERSION:  schema.example.com/v1\n" +
			"\n" +
			"RESOURCE: spec <Object>\n" +
			"\n" +
			"DESCRIPTION:\n" +
			"     Spec is the desired state of the CronTab.\n" +
			"\n" +
			"FIELDS:\n" +
			"   cronSpec\t<string> -required-\n" +
			"     The schedule, in cron format.\n" +
			"\n" +
			"   extra\t<>\n" +
			"     Free-form settings, kept as they are.\n" +
			"\n" +
			"   image\t<string> -required-\n" +
			"     The container image to run. It cannot be changed.\n" +
			"\n" +
			"   maxReplicas\t<integer>\n" +
			"     The highest replicas may go.\n" +
			"\n" +
			"   minReplicas\t<integer>\n" +
			"     The lowest replicas may go.\n" +
			"\n" +
			"   replicas\t<integer>\n" +
			"     How many copies run at once.\n" +
			"\n"
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"explain", "crontabs.spec"}, spec},
			{[]string{"explain", "crontabs.spec", "--api-version=schema.example.com/v1"}, spec},
			{[]string{"explain", "crontab.spec", "--api-version=schema.example.com/v1"}, spec},
			{[]string{"explain", "crontabs.schema.example.com.spec"}, spec},
			{[]string{"explain", "crontabs.spec.replicas", "--api-version=schema.example.com/v1"}, replicas},
			{[]string{"explain", "crontabs", "--recursive"}, recursive},
			{[]string{"explain", "crontabs.spec", "--output=plaintext-openapiv2"}, specV2},
		} {
			r := k.exec("", tc.args...)
			if r.err != nil || r.stdout != tc.want || r.stderr != "" {
				t.Errorf("want success and exactly\n%s\n%s", tc.want, r)
			}
		}
	})

	t.Run("deleting the CRD removes the CronTabs", func(t *testing.T) {
		out := k.run(t, "delete", "crd", schemaCRDName)
		mustContain(t, out, `customresourcedefinition.apiextensions.k8s.io "`+schemaCRDName+`" deleted`)
		mustContain(t, k.fail(t, "get", "crd", schemaCRDName),
			`Error from server (NotFound): customresourcedefinitions.apiextensions.k8s.io "`+schemaCRDName+`" not found`)
	})
}
