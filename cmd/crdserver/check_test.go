package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/crdserver/crdserver/crdtest"
	"github.com/crdserver/crdserver/internal/evolution"
)

// checkCRDs reads testdata/check-old.yaml, a CronTab CRD, and
// testdata/check-new.yaml, which drops v1beta1 (served, not deprecated),
// removes .spec.image and lowers the maximum of .spec.replicas in v1, and
// adds a field.
func checkCRDs(t *testing.T) (checkOld, checkNew string) {
	t.Helper()
	o, err := os.ReadFile(filepath.Join("testdata", "check-old.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	n, err := os.ReadFile(filepath.Join("testdata", "check-new.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return string(o), string(n)
}

const checkWant = `field-removed version=v1 path=.spec.image: field image was removed
maximum-lowered version=v1 path=.spec.replicas: maximum lowered from 10 to 5
served-version-removed version=v1beta1 path=: served version v1beta1 was removed without being deprecated first
`

func writeCheckFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func checkYAMLToJSON(t *testing.T, doc string) string {
	t.Helper()
	b, err := yaml.YAMLToJSON([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestCheckCommand(t *testing.T) {
	checkOld, checkNew := checkCRDs(t)
	dir := t.TempDir()
	oldFile := writeCheckFile(t, dir, "old.yaml", checkOld)
	newFile := writeCheckFile(t, dir, "new.yaml", checkNew)
	newJSON := writeCheckFile(t, dir, "new.json", checkYAMLToJSON(t, checkNew))
	twoDocs := writeCheckFile(t, dir, "two.yaml", checkOld+"---\n"+checkNew)
	configMap := writeCheckFile(t, dir, "cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
	v1beta1 := writeCheckFile(t, dir, "beta.yaml", strings.Replace(checkOld, "apiextensions.k8s.io/v1", "apiextensions.k8s.io/v1beta1", 1))
	// Only a comment and a document separator around the CRD: still one.
	padded := writeCheckFile(t, dir, "padded.yaml", "# the CRD\n---\n"+checkOld+"---\n")
	// A file that leaves listKind, singular and the conversion out is the
	// same CRD once defaulted.
	defaulted := writeCheckFile(t, dir, "defaulted.yaml", strings.Replace(checkOld, "singular: crontab, ", "", 1))

	cases := []struct {
		name      string
		args      []string
		stdin     string
		code      int
		stdout    string // exact, unless json or stderrHas
		json      bool
		stderrHas string
	}{
		{name: "no change", args: []string{oldFile, oldFile}, code: 0, stdout: ""},
		{name: "no change once defaulted", args: []string{oldFile, defaulted}, code: 0, stdout: ""},
		{name: "breaking changes", args: []string{oldFile, newFile}, code: 1, stdout: checkWant},
		{name: "JSON file, flags after the files", args: []string{oldFile, newJSON, "-o", "text"}, code: 1, stdout: checkWant},
		{name: "JSON output", args: []string{"-o", "json", oldFile, newFile}, code: 1, json: true},
		{name: "JSON output, no findings", args: []string{"-o=json", oldFile, padded}, code: 0, stdout: "[]\n"},
		{name: "new from stdin", args: []string{oldFile, "-"}, stdin: checkNew, code: 1, stdout: checkWant},
		{name: "old from stdin", args: []string{"-", newFile}, stdin: checkOld, code: 1, stdout: checkWant},
		{name: "additions only", args: []string{newFile, newFile}, code: 0, stdout: ""},
		{name: "help", args: []string{"-h"}, code: 0, stderrHas: "Exit status: 0 no findings, 1 findings, 2 usage or input error"},
		{name: "one argument", args: []string{oldFile}, code: 2, stderrHas: "want OLD and NEW"},
		{name: "three arguments", args: []string{oldFile, newFile, newFile}, code: 2, stderrHas: "want OLD and NEW"},
		{name: "both stdin", args: []string{"-", "-"}, code: 2, stderrHas: "only one of OLD and NEW"},
		{name: "bad output", args: []string{"-o", "yaml", oldFile, newFile}, code: 2, stderrHas: "-o must be text or json"},
		{name: "unknown flag", args: []string{"--nope", oldFile, newFile}, code: 2, stderrHas: "flag provided but not defined"},
		{name: "missing file", args: []string{oldFile, filepath.Join(dir, "nope.yaml")}, code: 2, stderrHas: "nope.yaml"},
		{name: "two documents", args: []string{oldFile, twoDocs}, code: 2, stderrHas: "found 2 documents"},
		{name: "not a CRD", args: []string{configMap, oldFile}, code: 2, stderrHas: `kind "ConfigMap"`},
		{name: "v1beta1 CRD", args: []string{v1beta1, oldFile}, code: 2, stderrHas: "apiextensions.k8s.io/v1beta1"},
		{name: "bad YAML", args: []string{oldFile, "-"}, stdin: "apiVersion: [", code: 2, stderrHas: "crdserver check-crd: -:"},
		{name: "live CRD without a server", args: []string{"--kubeconfig", filepath.Join(dir, "nope.kubeconfig"), "crd/crontabs.stable.example.com", newFile}, code: 2, stderrHas: "crd/crontabs.stable.example.com"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := runCheck(tc.args, strings.NewReader(tc.stdin), &stdout, &stderr)
			if code != tc.code {
				t.Errorf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, stdout.String(), stderr.String())
			}
			switch {
			case tc.json:
				var got []evolution.Finding
				if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
					t.Fatalf("%v\n%s", err, stdout.String())
				}
				if evolution.FormatText(got) != checkWant {
					t.Errorf("JSON findings:\n%s", stdout.String())
				}
			case tc.stderrHas != "":
				if !strings.Contains(stderr.String(), tc.stderrHas) {
					t.Errorf("stderr does not say %q:\n%s", tc.stderrHas, stderr.String())
				}
			default:
				if stdout.String() != tc.stdout {
					t.Errorf("stdout:\n%s\nwant:\n%s\nstderr:\n%s", stdout.String(), tc.stdout, stderr.String())
				}
			}
		})
	}
}

func TestCheckCommandLiveCRD(t *testing.T) {
	checkOld, checkNew := checkCRDs(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv := crdtest.Start(t, crdtest.Options{})
	crds, err := crdtest.ReadCRDs([]string{filepath.Join("testdata", "check-old.yaml")}, true)
	if err != nil {
		t.Fatal(err)
	}
	ext := apiextensionsclient.NewForConfigOrDie(srv.RESTConfig())
	if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crds[0], metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	oldFile := writeCheckFile(t, dir, "old.yaml", checkOld)
	newFile := writeCheckFile(t, dir, "new.yaml", checkNew)
	// Against the live CRD, as the server checks a change, the new maximum
	// counts only once a stored object fails it.
	withoutObjects := strings.Replace(checkWant, "maximum-lowered version=v1 path=.spec.replicas: maximum lowered from 10 to 5\n", "", 1)
	cases := []checkCase{
		{args: []string{"--kubeconfig", srv.KubeconfigPath(), "crd/crontabs.stable.example.com", newFile}, code: 1, stdout: withoutObjects},
		{args: []string{"--kubeconfig", srv.KubeconfigPath(), "crd/crontabs.stable.example.com", oldFile}, code: 0, stdout: ""},
		{args: []string{"--kubeconfig", srv.KubeconfigPath(), "crd/nothere.example.com", oldFile}, code: 2},
	}
	checkCases(t, cases)
	dyn := dynamic.NewForConfigOrDie(srv.RESTConfig())
	gvr := schema.GroupVersionResource{Group: "stable.example.com", Version: "v1", Resource: "crontabs"}
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := dyn.Resource(gvr).Namespace("default").Create(ctx, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "stable.example.com/v1", "kind": "CronTab", "metadata": map[string]any{"name": "seven"},
			"spec": map[string]any{"replicas": int64(7)}}}, metav1.CreateOptions{})
		return err == nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	checkCases(t, []checkCase{{args: []string{"--kubeconfig", srv.KubeconfigPath(), "crd/crontabs.stable.example.com", newFile}, code: 1,
		stdout: strings.Replace(checkWant, "maximum lowered from 10 to 5", "maximum lowered from 10 to 5; 1 of 1 existing objects fail it, e.g. default/seven (spec.replicas: Invalid value: 7: spec.replicas in body should be less than or equal to 5)", 1)}})
}

// checkCase is a check-crd command line and what it must answer.
type checkCase struct {
	args   []string
	code   int
	stdout string
}

func checkCases(t *testing.T, cases []checkCase) {
	t.Helper()
	for _, tc := range cases {
		var stdout, stderr bytes.Buffer
		code := runCheck(tc.args, strings.NewReader(""), &stdout, &stderr)
		if code != tc.code || (tc.code != 2 && stdout.String() != tc.stdout) {
			t.Errorf("%v: exit code %d (want %d)\nstdout:\n%s\nwant:\n%s\nstderr:\n%s", tc.args, code, tc.code, stdout.String(), tc.stdout, stderr.String())
		}
		if tc.code == 2 && !strings.Contains(stderr.String(), "not found") {
			t.Errorf("%v: stderr:\n%s", tc.args, stderr.String())
		}
	}
}

// A finding of severity info (a default added that the description
// already stated) is printed, and alone exits 0.
func TestCheckCommandInfo(t *testing.T) {
	crd := func(port string) string {
		return `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: routes.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: routes, singular: route, kind: Route, listKind: RouteList}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              port: ` + port + "\n"
	}
	dir := t.TempDir()
	oldFile := writeCheckFile(t, dir, "old.yaml", crd(`{type: integer, description: "Defaults to 80."}`))
	documented := writeCheckFile(t, dir, "documented.yaml", crd(`{type: integer, default: 80, description: "Defaults to 80."}`))
	other := writeCheckFile(t, dir, "other.yaml", crd(`{type: integer, default: 8080, description: "Defaults to 80."}`))
	checkCases(t, []checkCase{
		{args: []string{oldFile, documented}, code: 0,
			stdout: "default-changed version=v1 path=.spec.port: info: default 80 added, as the field's description already said: objects stored without the field show it when read\n"},
		{args: []string{oldFile, other}, code: 1,
			stdout: "default-changed version=v1 path=.spec.port: default 8080 added: objects stored without the field show it when read\n"},
	})
	var stdout, stderr bytes.Buffer
	if code := runCheck([]string{"-o", "json", oldFile, documented}, strings.NewReader(""), &stdout, &stderr); code != 0 {
		t.Fatalf("exit code %d\n%s%s", code, stdout.String(), stderr.String())
	}
	var got []evolution.Finding
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil || len(got) != 1 || got[0].Severity != evolution.SeverityInfo || !strings.Contains(stdout.String(), `"severity": "info"`) {
		t.Errorf("JSON (%v):\n%s", err, stdout.String())
	}
}
