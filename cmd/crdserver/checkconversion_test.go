package main

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/crdserver/crdserver/conversion/webhook"
	"github.com/crdserver/crdserver/crdtest"
	"github.com/crdserver/crdserver/internal/fixtures"
)

// The lossy Widgets of internal/fixtures: ccWebhook converts them, losing
// the three things fixtures.PlantedLossErrors looks for.

type ccStatus struct {
	Phase string `json:"phase,omitempty"`
}

type ccHub struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Tier, Code        string
	Replicas          *int32
	Tags              []string
	Status            *ccStatus
}

type ccV1 struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              struct {
		Tier       string   `json:"tier,omitempty"`
		Code       string   `json:"code,omitempty"`
		LegacyNote string   `json:"legacyNote,omitempty"`
		Replicas   *int32   `json:"replicas,omitempty"`
		Tags       []string `json:"tags,omitempty"`
	} `json:"spec"`
	Status *ccStatus `json:"status,omitempty"`
}

type ccV2 struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              struct {
		Level    string   `json:"level,omitempty"`
		Code     int64    `json:"code"`
		Replicas *int32   `json:"replicas,omitempty"`
		Tags     []string `json:"tags,omitempty"`
	} `json:"spec"`
	Status *ccStatus `json:"status,omitempty"`
}

// ccWebhook serves the lossy conversion on a loopback port over TLS.
func ccWebhook(t *testing.T) (url string, caPEM []byte) {
	t.Helper()
	s := webhook.NewScheme[ccHub]()
	webhook.AddVersion(s, "lossy.example.com/v1",
		func(v *ccV1) (*ccHub, error) {
			return &ccHub{ObjectMeta: v.ObjectMeta, Tier: v.Spec.Tier, Code: v.Spec.Code, Replicas: v.Spec.Replicas, Tags: v.Spec.Tags, Status: v.Status}, nil
		},
		func(h *ccHub) (*ccV1, error) {
			v := &ccV1{ObjectMeta: h.ObjectMeta, Status: h.Status}
			v.Spec.Tier, v.Spec.Code, v.Spec.Replicas, v.Spec.Tags = h.Tier, h.Code, h.Replicas, h.Tags
			return v, nil
		})
	webhook.AddVersion(s, "lossy.example.com/v2",
		func(v *ccV2) (*ccHub, error) {
			tier := map[string]string{"high": "gold", "low": "silver"}[v.Spec.Level]
			return &ccHub{ObjectMeta: v.ObjectMeta, Tier: tier, Code: strconv.FormatInt(v.Spec.Code, 10), Replicas: v.Spec.Replicas, Tags: v.Spec.Tags, Status: v.Status}, nil
		},
		func(h *ccHub) (*ccV2, error) {
			v := &ccV2{ObjectMeta: h.ObjectMeta, Status: h.Status}
			v.Spec.Level = map[string]string{"gold": "high", "platinum": "high", "silver": "low", "bronze": "low"}[h.Tier]
			v.Spec.Code, _ = strconv.ParseInt(h.Code, 10, 64)
			v.Spec.Replicas, v.Spec.Tags = h.Replicas, h.Tags
			return v, nil
		})
	srv := httptest.NewUnstartedServer(s)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the test without the CA
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv.URL + "/convert", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
}

func ccRun(args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = checkConversion(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func ccDecodeReport(t *testing.T, stdout string) conversionReport {
	t.Helper()
	var rep conversionReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("%v:\n%s", err, stdout)
	}
	return rep
}

// ccCheckPlantedLosses checks that the report has the three losses of the
// webhook, from v1 objects only, and nothing else.
func ccCheckPlantedLosses(t *testing.T, rep conversionReport) {
	t.Helper()
	losses := make([]fixtures.Loss, len(rep.Losses))
	for i, l := range rep.Losses {
		losses[i] = fixtures.Loss{Kind: string(l.Kind), From: l.From, To: l.To, Path: l.Path, Original: l.Original, After: l.After}
	}
	for _, e := range fixtures.PlantedLossErrors(losses) {
		t.Error(e)
	}
	if rep.Failed != 0 || rep.RoundTrips != rep.Objects || rep.Lossless <= 0 || rep.Lossless >= rep.RoundTrips {
		t.Errorf("report: %+v", rep)
	}
}

func TestCheckConversionThroughWebhook(t *testing.T) {
	url, caPEM := ccWebhook(t)
	dir := t.TempDir()
	crdFile := filepath.Join(dir, "crd.yaml")
	caFile := filepath.Join(dir, "ca.crt")
	// The file's clientConfig does not matter: --webhook says where.
	if err := os.WriteFile(crdFile, []byte("# a comment\n---\n"+fixtures.LossyWidgetsCRD("https://unused.example.com", nil)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(caFile, caPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := ccRun(crdFile, "--webhook", url, "--ca", caFile, "--samples", "30", "-o", "json")
	if code != 1 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	rep := ccDecodeReport(t, stdout)
	if rep.Via != "webhook" || rep.Samples["v1"] != 30 || rep.Samples["v2"] != 30 {
		t.Errorf("report: %+v", rep)
	}
	ccCheckPlantedLosses(t, rep)

	// The text output, the same every time.
	code, text, _ := ccRun("--samples=30", crdFile, "--webhook", url, "--ca", caFile)
	_, again, _ := ccRun("--samples=30", crdFile, "--webhook", url, "--ca", caFile)
	if code != 1 || text != again {
		t.Fatalf("exit %d, or two runs differ:\n%s\n%s", code, text, again)
	}
	ls := strings.Split(strings.TrimSpace(text), "\n")
	line := regexp.MustCompile(`^(lost|changed) v1→v2→v1 object=widget-v1-\d{3} path=spec\.(legacyNote|tier|code) original=.+ after=.+$`)
	for _, l := range ls[:len(ls)-1] {
		if !line.MatchString(l) {
			t.Errorf("line %q", l)
		}
	}
	if s := ls[len(ls)-1]; !strings.HasPrefix(s, "summary: crd=widgets.lossy.example.com via=webhook versions=v1,v2 objects=60 round-trips=60 ") {
		t.Errorf("summary %q", s)
	}

	// Another seed, other samples; the same seed, the same.
	_, other, _ := ccRun("--samples=30", "--seed=2", crdFile, "--webhook", url, "--ca", caFile)
	if other == text {
		t.Error("another seed found the same")
	}

	// Without the CA, the webhook's certificate is not trusted.
	code, stdout, _ = ccRun(crdFile, "--webhook", url, "--samples", "2", "-o", "json")
	if code != 1 || ccDecodeReport(t, stdout).Failed == 0 {
		t.Errorf("exit %d without the CA:\n%s", code, stdout)
	}
}

func TestCheckConversionUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"-h"}, 0, "usage: crdserver check-conversion"},
		{nil, 2, "name one CRD"},
		{[]string{"a", "b"}, 2, "name one CRD"},
		{[]string{"x", "-o", "xml"}, 2, "-o is text or json"},
		{[]string{"x", "--ca", "c"}, 2, "--ca goes with --webhook"},
		{[]string{"x", "--webhook", "http://127.0.0.1:1/"}, 2, "https"},
		{[]string{"x", "--samples", "-1"}, 2, "negative"},
		{[]string{"x", "--bogus"}, 2, "flag provided but not defined"},
		{[]string{filepath.Join(t.TempDir(), "missing.yaml")}, 2, "no CRD file"},
		{[]string{"things.example.com", "--kubeconfig", filepath.Join(t.TempDir(), "none")}, 2, "kubeconfig"},
	} {
		code, _, stderr := ccRun(tc.args...)
		if code != tc.code || !strings.Contains(stderr, tc.want) {
			t.Errorf("%q: exit %d, stderr:\n%s", tc.args, code, stderr)
		}
	}
	// A file that is not a CRD.
	f := filepath.Join(t.TempDir(), "cm.yaml")
	if err := os.WriteFile(f, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := ccRun(f, "--webhook", "https://127.0.0.1:1/"); code != 2 || !strings.Contains(stderr, "no CustomResourceDefinition") {
		t.Errorf("exit %d: %s", code, stderr)
	}
}

func TestCheckConversionThroughServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv := crdtest.Start(t, crdtest.Options{})
	cfg := srv.RESTConfig()
	ext := apiextensionsclient.NewForConfigOrDie(cfg)
	dyn := dynamic.NewForConfigOrDie(cfg)
	url, caPEM := ccWebhook(t)
	crd := fixtures.DecodeCRD(t, fixtures.LossyWidgetsCRD(url, caPEM))
	if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A live object in another namespace, for --from-cluster.
	nsGVR := schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	if _, err := dyn.Resource(nsGVR).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "prod"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	widgets := schema.GroupVersionResource{Group: "lossy.example.com", Version: "v1", Resource: "widgets"}
	live := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "lossy.example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "live", "namespace": "prod", "labels": map[string]any{"app": "x"}, "finalizers": []any{"example.com/keep"}},
		"spec":     map[string]any{"tier": "gold", "code": "0042"},
	}}
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := dyn.Resource(widgets).Namespace("prod").Create(ctx, live, metav1.CreateOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := srv.KubeconfigPath()

	code, stdout, stderr := ccRun("widgets.lossy.example.com", "--kubeconfig", kubeconfig, "--samples", "20", "--from-cluster", "-o", "json")
	if code != 1 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	rep := ccDecodeReport(t, stdout)
	if rep.Via != "server" || rep.Live["v1"] != 1 || rep.Live["v2"] != 1 || rep.Objects != 42 {
		t.Errorf("report: %+v", rep)
	}
	ccCheckPlantedLosses(t, rep)
	var liveLoss bool
	for _, l := range rep.Losses {
		if l.Object == "prod/live" && l.Path == "spec.code" && string(l.Original) == `"0042"` && string(l.After) == `"42"` {
			liveLoss = true
		}
	}
	if !liveLoss {
		t.Errorf("the live object's code is not reported:\n%s", stdout)
	}

	// Everything made is gone; the live object is still there.
	for _, v := range []string{"v1", "v2"} {
		gvr := widgets
		gvr.Version = v
		list, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Items) != 1 || list.Items[0].GetName() != "live" {
			var names []string
			for _, it := range list.Items {
				names = append(names, it.GetNamespace()+"/"+it.GetName())
			}
			t.Errorf("widgets left in %s: %v", v, names)
		}
	}
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := dyn.Resource(nsGVR).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, ns := range list.Items {
			if strings.HasPrefix(ns.GetName(), "crdserver-check-") {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Errorf("a scratch namespace is left: %v", err)
	}

	// A CRD file through the server: the server's copy converts.
	crdFile := filepath.Join(t.TempDir(), "crd.yaml")
	if err := os.WriteFile(crdFile, []byte(fixtures.LossyWidgetsCRD("https://unused.example.com", nil)), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, stdout, stderr := ccRun(crdFile, "--kubeconfig", kubeconfig, "--samples", "5"); code != 1 || !strings.Contains(stdout, "via=server") {
		t.Errorf("exit %d\n%s\n%s", code, stdout, stderr)
	}

	// The webhook directly, with the server's objects (--from-cluster):
	// the live object's code loses its leading zeros there too.
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(caFile, caPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr = ccRun(crdFile, "--webhook", url, "--ca", caFile, "--kubeconfig", kubeconfig, "--from-cluster", "--samples", "0", "-o", "json")
	rep = ccDecodeReport(t, stdout)
	if code != 1 || rep.Via != "webhook" || rep.Objects != 2 || len(rep.Losses) != 1 || rep.Losses[0].Object != "prod/live" || rep.Losses[0].Path != "spec.code" {
		t.Errorf("exit %d\n%s\n%s", code, stdout, stderr)
	}

	// A CRD the server does not have.
	if code, _, stderr := ccRun("nopes.example.com", "--kubeconfig", kubeconfig); code != 2 || !strings.Contains(stderr, "not found") {
		t.Errorf("exit %d: %s", code, stderr)
	}

	// A CRD of one version has nothing to convert; None between
	// versions of the same fields loses nothing.
	for _, c := range []*apiextensionsv1.CustomResourceDefinition{ccSimpleCRD("ones", false), ccSimpleCRD("twos", true)} {
		if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, c, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		gvr := schema.GroupVersionResource{Group: "cc.example.com", Version: "v1", Resource: c.Spec.Names.Plural}
		err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			_, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{})
			return err == nil, nil
		})
		if err != nil {
			t.Fatalf("%s is not served: %v", c.Name, err)
		}
		if code, stdout, stderr := ccRun(c.Name, "--kubeconfig", kubeconfig, "--samples", "5"); code != 0 {
			t.Errorf("%s: exit %d\n%s\n%s", c.Name, code, stdout, stderr)
		}
		// Cluster-scoped objects are deleted one by one.
		list, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{})
		if err != nil || len(list.Items) != 0 {
			t.Errorf("%s left: %v %v", c.Name, list, err)
		}
	}
}

// ccSimpleCRD is a cluster-scoped CRD with one version, or two with the
// same schema (None conversion).
func ccSimpleCRD(plural string, two bool) *apiextensionsv1.CustomResourceDefinition {
	props := &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
		Type: "object",
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"spec": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
				"a": {Type: "string"}, "n": {Type: "integer"},
				"l": {Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{Type: "string"}}},
			}},
		},
	}}
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + ".cc.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "cc.example.com", Scope: apiextensionsv1.ClusterScoped,
			Names:    apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Kind: strings.ToUpper(plural[:1]) + plural[1:len(plural)-1]},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true, Schema: props}},
		},
	}
	if two {
		crd.Spec.Versions = append(crd.Spec.Versions, apiextensionsv1.CustomResourceDefinitionVersion{Name: "v2", Served: true, Schema: props})
	}
	return crd
}
