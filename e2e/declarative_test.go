package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
)

// examples/declarative-conversion: the CronTab converted by
// ConversionRules alone (no webhook), read in both versions, listed,
// watched, migrated to v1 and v1beta1 retired, as its README says; a lossy
// rule set refused with the path it loses; and the same rules served by
// `crdserver conversion-webhook` answering exactly what the server
// computes in process.

const declDir = "../examples/declarative-conversion/"

var crontabsGVR = func(version string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "example.com", Version: version, Resource: "crontabs"}
}

func TestDeclarativeConversionAsDocumented(t *testing.T) {
	srv := startServer(t)
	k := newKubectl(t, srv)
	k.run(t, "apply", "-f", declDir+"crd.yaml")
	k.run(t, "wait", "--for=condition=Established", "crd/crontabs.example.com", "--timeout=60s")

	// A rule set that keeps nothing of spec.hostPort is refused, naming it.
	r := k.exec(`apiVersion: conversion.crdserver.io/v1alpha1
kind: ConversionRules
metadata:
  name: crontabs.example.com
spec:
  hub: v1
  versions:
  - name: v1beta1
    toHub:
    - remove: {path: .spec.hostPort}
    fromHub:
    - remove: {path: .spec.host}
    - remove: {path: .spec.port}
`, "apply", "-f", "-")
	if r.err == nil || !strings.Contains(r.stderr, `is invalid`) || !strings.Contains(r.stderr, `"v1beta1→v1→v1beta1": lost spec.hostPort`) ||
		!strings.Contains(r.stderr, `"v1→v1beta1→v1": lost spec.host`) {
		t.Fatalf("lossy rules: want a refusal naming spec.hostPort:\n%s", r)
	}

	k.run(t, "apply", "-f", declDir+"rules.yaml")
	watch := k.background(t, "get", "crontabs.v1.example.com", "--watch", "-o",
		"custom-columns=NAME:.metadata.name,HOST:.spec.host,PORT:.spec.port")
	k.run(t, "apply", "-f", declDir+"crontab-v1beta1.yaml")
	if got := k.run(t, "get", "crontabs.v1beta1.example.com", "my-cron", "-o", "jsonpath={.spec.hostPort}"); got != "localhost:7070" {
		t.Fatalf("v1beta1: %q", got)
	}
	if got := k.run(t, "get", "crontabs.v1.example.com", "my-cron", "-o", "jsonpath={.spec.host} {.spec.port}"); got != "localhost 7070" {
		t.Fatalf("v1: %q", got)
	}
	watch.waitForLine(t, regexp.MustCompile(`^my-cron\s+localhost\s+7070\s*$`))

	// Objects written in v1 are stored as v1beta1 and read back in both.
	k.runStdin(t, `apiVersion: example.com/v1
kind: CronTab
metadata:
  name: other-cron
spec:
  cronSpec: "0 * * * *"
  image: other
  host: example.org
  port: "443"
`, "apply", "-f", "-")
	watch.waitForLine(t, regexp.MustCompile(`^other-cron\s+example\.org\s+443\s*$`))
	if got := k.run(t, "get", "crontabs.v1beta1.example.com", "-o", "jsonpath={range .items[*]}{.metadata.name}={.spec.hostPort} {end}"); got != "my-cron=localhost:7070 other-cron=example.org:443 " {
		t.Fatalf("v1beta1 list: %q", got)
	}
	if got := k.run(t, "get", "crontabs.v1.example.com", "-o", "jsonpath={range .items[*]}{.metadata.name}={.spec.host}/{.spec.port} {end}"); got != "my-cron=localhost/7070 other-cron=example.org/443 " {
		t.Fatalf("v1 list: %q", got)
	}
	// The v1 schema's rule holds for converted objects too.
	if msg := k.fail(t, "patch", "crontabs.v1.example.com", "other-cron", "--type=json", "-p", `[{"op":"remove","path":"/spec/port"}]`); !strings.Contains(msg, "host and port go together") {
		t.Fatalf("v1 patch without port: %s", msg)
	}

	// 1. Store v1; 2. migrate; 3. deprecate v1beta1, then stop serving it.
	k.run(t, "patch", "crd", "crontabs.example.com", "--type=json", "-p", `[
  {"op":"replace","path":"/spec/versions/0/storage","value":false},
  {"op":"replace","path":"/spec/versions/1/storage","value":true}]`)
	migrate := exec.Command(crdserverBin, "migrate", "--kubeconfig", srv.kubeconfig, "--timeout", "2m", "crontabs.example.com")
	if out, err := migrate.CombinedOutput(); err != nil {
		t.Fatalf("crdserver migrate: %v\n%s", err, out)
	}
	if got := k.run(t, "get", "crd", "crontabs.example.com", "-o", "jsonpath={.status.storedVersions}"); got != `["v1"]` {
		t.Fatalf("storedVersions after migrate: %s", got)
	}
	// Stored as v1 now: the v1beta1 reads convert the other way.
	if got := k.run(t, "get", "crontabs.v1beta1.example.com", "my-cron", "-o", "jsonpath={.spec.hostPort}"); got != "localhost:7070" {
		t.Fatalf("v1beta1 after migrate: %q", got)
	}
	k.run(t, "patch", "crd", "crontabs.example.com", "--type=json", "-p", `[{"op":"add","path":"/spec/versions/0/deprecated","value":true}]`)
	r = k.exec("", "get", "crontabs.v1beta1.example.com", "my-cron")
	if r.err != nil || !strings.Contains(r.stderr, "Warning: example.com/v1beta1 CronTab is deprecated; use example.com/v1 CronTab") {
		t.Fatalf("deprecated v1beta1:\n%s", r)
	}
	r = k.exec("", "patch", "crd", "crontabs.example.com", "--type=json", "-p", `[{"op":"replace","path":"/spec/versions/0/served","value":false}]`)
	if r.err != nil || strings.Contains(r.stderr, "version-unserved-without-deprecation") {
		t.Fatalf("unserve the deprecated v1beta1 (no warning expected):\n%s", r)
	}
	if got := k.run(t, "get", "crontabs.v1.example.com", "my-cron", "-o", "jsonpath={.spec.host} {.spec.port}"); got != "localhost 7070" {
		t.Fatalf("v1 after retiring v1beta1: %q", got)
	}
	if msg := k.fail(t, "get", "crontabs.v1beta1.example.com", "my-cron"); !strings.Contains(msg, "the server doesn't have a resource type") && !strings.Contains(msg, "NotFound") && !strings.Contains(msg, "not found") {
		t.Fatalf("v1beta1 still served: %s", msg)
	}
}

// TestDeclarativeConversionWarnsOnUnservedWithoutDeprecation is the README's
// note on skipping the deprecation.
func TestDeclarativeConversionWarnsOnUnservedWithoutDeprecation(t *testing.T) {
	srv := startServer(t)
	k := newKubectl(t, srv)
	k.run(t, "apply", "-f", declDir+"crd.yaml")
	k.run(t, "wait", "--for=condition=Established", "crd/crontabs.example.com", "--timeout=60s")
	k.run(t, "apply", "-f", declDir+"rules.yaml")
	k.run(t, "patch", "crd", "crontabs.example.com", "--type=json", "-p", `[
  {"op":"replace","path":"/spec/versions/0/storage","value":false},
  {"op":"replace","path":"/spec/versions/1/storage","value":true}]`)
	r := k.exec("", "patch", "crd", "crontabs.example.com", "--type=json", "-p", `[{"op":"replace","path":"/spec/versions/0/served","value":false}]`)
	want := "Warning: version-unserved-without-deprecation version=v1beta1 path=: version v1beta1 is no longer served but was not deprecated first"
	if r.err != nil || !strings.Contains(r.stderr, want) {
		t.Fatalf("want %q:\n%s", want, r)
	}
}

// TestDeclarativeConversionWebhookIdentical converts the same objects in
// process (crdserver with the ConversionRules) and through `crdserver
// conversion-webhook --rules rules.yaml`, in both directions, and compares
// every converted object byte for byte (each encoded as canonical JSON:
// sorted keys, as Go encodes maps).
func TestDeclarativeConversionWebhookIdentical(t *testing.T) {
	srv := startServer(t)
	k := newKubectl(t, srv)
	w := startWebhookWith(t, crdserverBin, "conversion-webhook", "--rules", declDir+"rules.yaml")
	k.run(t, "apply", "-f", declDir+"crd.yaml")
	k.run(t, "wait", "--for=condition=Established", "crd/crontabs.example.com", "--timeout=60s")
	k.run(t, "apply", "-f", declDir+"rules.yaml")
	dyn, err := dynamic.NewForConfig(srv.restConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	hosts := []string{"localhost", "example.org", "10.0.0.1", "a.b-c.d"}
	for i := range 20 {
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "example.com/v1beta1",
			"kind":       "CronTab",
			"metadata": map[string]any{
				"name":        fmt.Sprintf("cron-%02d", i),
				"labels":      map[string]any{"n": fmt.Sprint(i)},
				"annotations": map[string]any{"note": fmt.Sprintf("object %d", i)},
			},
			"spec": map[string]any{"cronSpec": "*/5 * * * *", "image": "img"},
		}}
		if i%4 != 3 { // every fourth without hostPort
			_ = unstructured.SetNestedField(obj.Object, fmt.Sprintf("%s:%d", hosts[i%len(hosts)], 7000+i), "spec", "hostPort")
		}
		if _, err := dyn.Resource(crontabsGVR("v1beta1")).Namespace("default").Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	compare := func(stored, read string) {
		t.Helper()
		asStored, err := dyn.Resource(crontabsGVR(stored)).Namespace("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		inProcess, err := dyn.Resource(crontabsGVR(read)).Namespace("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(asStored.Items) != 20 || len(inProcess.Items) != 20 {
			t.Fatalf("lists: %d and %d items", len(asStored.Items), len(inProcess.Items))
		}
		var objs []map[string]any
		for _, it := range asStored.Items {
			objs = append(objs, it.Object)
		}
		byWebhook := convertReview(t, w, objs, "example.com/"+read)
		for i, it := range inProcess.Items {
			a, b := canonicalJSON(t, it.Object), canonicalJSON(t, byWebhook[i])
			if !bytes.Equal(a, b) {
				t.Fatalf("%s→%s, object %d: in process\n%s\nby the webhook\n%s", stored, read, i, a, b)
			}
		}
	}
	compare("v1beta1", "v1")

	// Store v1, migrate, and compare the other direction.
	k.run(t, "patch", "crd", "crontabs.example.com", "--type=json", "-p", `[
  {"op":"replace","path":"/spec/versions/0/storage","value":false},
  {"op":"replace","path":"/spec/versions/1/storage","value":true}]`)
	if out, err := exec.Command(crdserverBin, "migrate", "--kubeconfig", srv.kubeconfig, "--timeout", "2m", "crontabs.example.com").CombinedOutput(); err != nil {
		t.Fatalf("crdserver migrate: %v\n%s", err, out)
	}
	compare("v1", "v1beta1")

	// One object, patched in v1 so that only the webhook path could differ
	// in field order or number encoding.
	if _, err := dyn.Resource(crontabsGVR("v1")).Namespace("default").Patch(ctx, "cron-00", types.MergePatchType,
		[]byte(`{"spec":{"host":"h","port":"01"}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	compare("v1", "v1beta1")
}

// convertReview sends one apiextensions.k8s.io/v1 ConversionReview to the
// webhook and returns its converted objects.
func convertReview(t *testing.T, w *webhook, objs []map[string]any, to string) []map[string]any {
	t.Helper()
	review := map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "ConversionReview",
		"request":    map[string]any{"uid": "e2e-1", "desiredAPIVersion": to, "objects": objs},
	}
	body, err := json.Marshal(review)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(w.caPEM)
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	defer client.CloseIdleConnections()
	resp, err := client.Post(w.url, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out apiextensionsv1.ConversionReview
	if err := json.Unmarshal(raw, &out); err != nil || out.Response == nil {
		t.Fatalf("webhook answer %d: %v\n%s", resp.StatusCode, err, raw)
	}
	if out.Response.Result.Status != metav1.StatusSuccess || out.Response.UID != "e2e-1" {
		t.Fatalf("webhook answer: %s", raw)
	}
	var converted []map[string]any
	for _, o := range out.Response.ConvertedObjects {
		var m map[string]any
		if err := json.Unmarshal(o.Raw, &m); err != nil {
			t.Fatal(err)
		}
		converted = append(converted, m)
	}
	if len(converted) != len(objs) {
		t.Fatalf("webhook converted %d of %d objects", len(converted), len(objs))
	}
	return converted
}

func canonicalJSON(t *testing.T, obj map[string]any) []byte {
	t.Helper()
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
