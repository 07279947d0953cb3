package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"text/template"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
)

// The fixtures of the version life cycle.
const (
	versionsCRDTemplate = "testdata/versions-crontab-crd.yaml.tmpl"
	versionsBetaObjects = "testdata/versions-crontabs-v1beta1.yaml" // db-backup, cache-flush
	versionsV1Object    = "testdata/versions-crontab-v1.yaml"       // queue-drain
	versionsCRDName     = "crontabs.example.com"
	versionsGroup       = "example.com"
)

var (
	exampleCronTabsV1      = schema.GroupVersionResource{Group: versionsGroup, Version: "v1", Resource: "crontabs"}
	exampleCronTabsV1beta1 = schema.GroupVersionResource{Group: versionsGroup, Version: "v1beta1", Resource: "crontabs"}
)

// crdStage is the state of the CRD at one step: what v1beta1 is. v1 is
// always served, and is the storage version whenever v1beta1 is not.
type crdStage struct {
	URL, CABundle  string // the webhook's clientConfig
	Beta           bool   // v1beta1 is in spec.versions
	BetaServed     bool
	BetaStorage    bool
	BetaDeprecated bool
}

// endpoint is what a CronTab points at: hostPort in v1beta1, host and
// port in v1.
type endpoint struct{ host, port string }

func (e endpoint) hostPort() string { return net.JoinHostPort(e.host, e.port) }

// TestVersionLifecycle plays the life of an API version from the
// Kubernetes documentation ("Versions in CustomResourceDefinitions") with
// kubectl and client-go: the CronTab CRD starts with v1beta1 (hostPort) as
// its storage version and v1 (host, port) served beside it, converted by
// the example conversion webhook; objects written in v1beta1 are read in
// both versions; the storage version moves to v1; objects of both storage
// versions are listed and watched in either version; v1beta1 is
// deprecated, its objects migrated, then it stops being served, and is
// finally removed.
func TestVersionLifecycle(t *testing.T) {
	hook := startWebhook(t)
	srv := startServer(t)
	k := newKubectl(t, srv)
	dyn, err := dynamic.NewForConfig(srv.restConfig(t))
	if err != nil {
		t.Fatal(err)
	}

	// Every step builds on the state the steps before it left: a step that
	// fails ends the scenario.
	step := func(name string, f func(t *testing.T)) {
		t.Helper()
		if !t.Run(name, f) {
			t.FailNow()
		}
	}
	stage := crdStage{
		URL:      hook.url,
		CABundle: base64.StdEncoding.EncodeToString(hook.caPEM),
		Beta:     true, BetaServed: true, BetaStorage: true,
	}
	// want is where each CronTab points, whatever version it is read in.
	want := map[string]endpoint{
		"db-backup":   {"db.internal", "5432"},
		"cache-flush": {"cache.internal", "6379"},
	}
	images := map[string]string{
		"db-backup":   "db-backup-image",
		"cache-flush": "cache-flush-image",
		"queue-drain": "queue-drain-image",
	}
	// checkAll reads every CronTab in both versions, one by one, with
	// kubectl -o yaml.
	checkAll := func(t *testing.T, versions ...string) {
		t.Helper()
		for _, name := range slices.Sorted(maps.Keys(want)) {
			for _, v := range versions {
				obj := parseYAML(t, k.run(t, "get", "crontabs."+v+"."+versionsGroup, name, "-o", "yaml"))
				checkCronTab(t, v, obj, want[name], images[name])
			}
		}
	}

	step("1 apply the CRD with v1beta1 as storage and webhook conversion", func(t *testing.T) {
		out := applyCRD(t, k, stage)
		mustContain(t, out, "customresourcedefinition.apiextensions.k8s.io/"+versionsCRDName+" created")
		out = k.run(t, "wait", "--for=condition=Established", "crd/"+versionsCRDName, "--timeout=60s")
		mustContain(t, out, "customresourcedefinition.apiextensions.k8s.io/"+versionsCRDName+" condition met")
		mustEqual(t, "conversion", k.run(t, "get", "crd", versionsCRDName, "-o",
			"jsonpath={.spec.conversion.strategy} {.spec.conversion.webhook.clientConfig.url} {.spec.conversion.webhook.conversionReviewVersions}"),
			`Webhook `+hook.url+` ["v1","v1beta1"]`)
		mustEqual(t, "status.storedVersions", storedVersions(t, k), `["v1beta1"]`)
		// Both versions are served; v1 is preferred (GA before beta).
		versions := lines(k.run(t, "api-versions"))
		for _, v := range []string{"example.com/v1", "example.com/v1beta1"} {
			if !slices.Contains(versions, v) {
				t.Errorf("api-versions does not list %s:\n%s", v, strings.Join(versions, "\n"))
			}
		}
	})

	step("2 create CronTabs in v1beta1", func(t *testing.T) {
		out := k.run(t, "apply", "-f", versionsBetaObjects)
		mustContain(t, out, "crontab.example.com/db-backup created")
		mustContain(t, out, "crontab.example.com/cache-flush created")
	})

	step("3 read each CronTab in v1 and in v1beta1", func(t *testing.T) {
		checkAll(t, "v1", "v1beta1")
		// A read in another version converts the response only: the
		// stored object, and so its resourceVersion, stays as it was.
		for name := range want {
			rv := func(v string) string {
				return k.run(t, "get", "crontabs."+v+"."+versionsGroup, name, "-o", "jsonpath={.metadata.resourceVersion}")
			}
			before := rv("v1beta1")
			if after := rv("v1"); after != before {
				t.Errorf("%s: resourceVersion %s in v1beta1, %s in v1; a read must not rewrite the object", name, before, after)
			}
			if again := rv("v1beta1"); again != before {
				t.Errorf("%s: resourceVersion went from %s to %s after a read in v1", name, before, again)
			}
		}
	})

	step("4 switch the storage version to v1", func(t *testing.T) {
		stage.BetaStorage = false
		mustContain(t, applyCRD(t, k, stage), "customresourcedefinition.apiextensions.k8s.io/"+versionsCRDName+" configured")
		mustEqual(t, "storage version", k.run(t, "get", "crd", versionsCRDName, "-o",
			"jsonpath={.spec.versions[?(@.storage==true)].name}"), "v1")
		mustEqual(t, "status.storedVersions", storedVersions(t, k), `["v1beta1","v1"]`)
		// The objects written in v1beta1 still read the same in both.
		checkAll(t, "v1", "v1beta1")
	})

	step("5 create a CronTab in v1 and list all in both versions", func(t *testing.T) {
		mustContain(t, k.run(t, "apply", "-f", versionsV1Object), "crontab.example.com/queue-drain created")
		want["queue-drain"] = endpoint{"queue.internal", "5672"}
		for _, v := range []string{"v1", "v1beta1"} {
			// kubectl
			out := k.run(t, "get", "crontabs."+v+"."+versionsGroup, "-o", "json")
			list := &unstructured.UnstructuredList{}
			if err := list.UnmarshalJSON([]byte(out)); err != nil {
				t.Fatalf("kubectl get crontabs.%s.%s -o json: not a list: %v\n%s", v, versionsGroup, err, out)
			}
			checkList(t, "kubectl get crontabs."+v+"."+versionsGroup, v, list.Items, want, images)
			// client-go
			gvr := exampleCronTabsV1
			if v == "v1beta1" {
				gvr = exampleCronTabsV1beta1
			}
			got, err := dyn.Resource(gvr).Namespace("default").List(t.Context(), metav1.ListOptions{})
			if err != nil {
				t.Fatalf("client-go list in %s: %v", v, err)
			}
			checkList(t, "client-go list in "+v, v, got.Items, want, images)
		}
	})

	step("6 watch in v1 while writing in v1beta1", func(t *testing.T) {
		// client-go's watch starts from a list in v1.
		list, err := dyn.Resource(exampleCronTabsV1).Namespace("default").List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatalf("list in v1: %v", err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		w, err := dyn.Resource(exampleCronTabsV1).Namespace("default").Watch(ctx, metav1.ListOptions{ResourceVersion: list.GetResourceVersion()})
		if err != nil {
			t.Fatalf("watch in v1: %v", err)
		}
		defer w.Stop()
		// kubectl's watch lists first (ADDED for each object), then watches.
		kw := k.background(t, "get", "crontabs.v1."+versionsGroup, "-w", "--output-watch-events", "-o", "json")
		for name := range want {
			ev := waitJSONEvent(t, kw, func(ev jsonEvent) bool { return ev.Type == "ADDED" && ev.Object.GetName() == name })
			checkCronTab(t, "v1", ev.Object, want[name], images[name])
		}

		out := k.run(t, "patch", "crontabs.v1beta1."+versionsGroup, "db-backup", "--type=merge", "-p", `{"hostPort":"db-replica.internal:15432"}`)
		mustContain(t, out, "crontab.example.com/db-backup patched")
		want["db-backup"] = endpoint{"db-replica.internal", "15432"}

		ev := waitJSONEvent(t, kw, func(ev jsonEvent) bool { return ev.Type == "MODIFIED" && ev.Object.GetName() == "db-backup" })
		checkCronTab(t, "v1", ev.Object, want["db-backup"], images["db-backup"])

		deadline := time.After(eventTimeout)
		for {
			var ev watch.Event
			select {
			case ev = <-w.ResultChan():
			case <-deadline:
				t.Fatalf("client-go's watch in v1 had no MODIFIED event for db-backup within %v", eventTimeout)
			}
			obj, ok := ev.Object.(*unstructured.Unstructured)
			if !ok {
				t.Fatalf("client-go's watch in v1: %s event carries a %T: %v", ev.Type, ev.Object, ev.Object)
			}
			if ev.Type == watch.Modified && obj.GetName() == "db-backup" {
				checkCronTab(t, "v1", obj, want["db-backup"], images["db-backup"])
				break
			}
		}
		kw.stop()
		// The write is there in both versions.
		checkAll(t, "v1", "v1beta1")
	})

	step("7 deprecate v1beta1", func(t *testing.T) {
		stage.BetaDeprecated = true
		mustContain(t, applyCRD(t, k, stage), "customresourcedefinition.apiextensions.k8s.io/"+versionsCRDName+" configured")
		const warning = "Warning: example.com/v1beta1 CronTab is deprecated; use example.com/v1 CronTab"
		// The server may take a moment to serve the new definition.
		kubectlUntil(t, k, "a request for v1beta1 prints the deprecation warning", func(r result) bool {
			return r.err == nil && strings.Contains(r.stderr, warning)
		}, "get", "crontabs.v1beta1."+versionsGroup, "db-backup")
		r := k.exec("", "get", "crontabs.v1beta1."+versionsGroup)
		if r.err != nil || !strings.Contains(r.stderr, warning) {
			t.Errorf("a list in v1beta1 should succeed and print %q:\n%s", warning, r)
		}
		for _, args := range [][]string{
			{"get", "crontabs.v1." + versionsGroup, "db-backup"},
			{"get", "crontabs.v1." + versionsGroup},
		} {
			r := k.exec("", args...)
			if r.err != nil || strings.Contains(r.stderr, "Warning:") || strings.Contains(r.stderr, "deprecated") {
				t.Errorf("a request for v1 should succeed with no warning:\n%s", r)
			}
		}
	})

	step("9 v1beta1 cannot leave spec.versions while it is in status.storedVersions", func(t *testing.T) {
		noBeta := stage
		noBeta.Beta, noBeta.BetaServed, noBeta.BetaDeprecated = false, false, false
		r := k.exec(renderCRD(t, noBeta), "apply", "-f", "-")
		if r.err == nil {
			t.Fatalf("removing v1beta1 from spec.versions before the migration was accepted:\n%s", r)
		}
		for _, s := range []string{"status.storedVersions", "missing from spec.versions"} {
			if !strings.Contains(r.stderr, s) {
				t.Errorf("the rejection does not mention %q:\n%s", s, r)
			}
		}
		mustEqual(t, "spec.versions after the rejected apply",
			k.run(t, "get", "crd", versionsCRDName, "-o", "jsonpath={.spec.versions[*].name}"), "v1beta1 v1")
		mustEqual(t, "status.storedVersions after the rejected apply", storedVersions(t, k), `["v1beta1","v1"]`)
	})

	step("8 migrate the stored objects to v1", func(t *testing.T) {
		stdout, stderr, err := runCrdserver("migrate", versionsCRDName, "--kubeconfig", srv.kubeconfig)
		report := fmt.Sprintf("$ crdserver migrate %s --kubeconfig %s\n--- stdout:\n%s--- stderr:\n%s--- exit: %v",
			versionsCRDName, srv.kubeconfig, stdout, stderr, err)
		if err != nil {
			t.Fatalf("crdserver migrate failed:\n%s", report)
		}
		out := lines(stdout)
		if len(out) == 0 || !regexp.MustCompile(`^storageversionmigration\.storagemigration\.k8s\.io/`+regexp.QuoteMeta(versionsCRDName)+`-\S+ created$`).MatchString(out[0]) {
			t.Errorf("crdserver migrate should first print the migration it created:\n%s", report)
		}
		if !slices.ContainsFunc(out, func(l string) bool { return strings.HasPrefix(l, "running: ") }) {
			t.Errorf("crdserver migrate printed no progress (running: ...):\n%s", report)
		}
		m := regexp.MustCompile(`^succeeded: migrated (\d+) objects`).FindStringSubmatch(out[len(out)-1])
		if m == nil {
			t.Fatalf("crdserver migrate should end with \"succeeded: migrated N objects ...\":\n%s", report)
		}
		// Only cache-flush is still stored in v1beta1: queue-drain was
		// created and db-backup written after the switch to v1. The count
		// is 1 if it is what had to be rewritten, 3 if it is every object.
		if n, _ := strconv.Atoi(m[1]); n != 1 && n != len(want) {
			t.Errorf("crdserver migrate migrated %d objects, want 1 (the one still stored in v1beta1) or %d (all):\n%s", n, len(want), report)
		}
		mustEqual(t, "status.storedVersions after the migration", storedVersions(t, k), `["v1"]`)
		// Nothing changed for clients of either version.
		checkAll(t, "v1", "v1beta1")
	})

	step("10 stop serving v1beta1, then remove it", func(t *testing.T) {
		stage.BetaServed = false
		mustContain(t, applyCRD(t, k, stage), "customresourcedefinition.apiextensions.k8s.io/"+versionsCRDName+" configured")
		kubectlUntil(t, k, "v1beta1 is no longer served", func(r result) bool {
			return r.err != nil && (strings.Contains(r.stderr, "the server doesn't have a resource type") ||
				strings.Contains(r.stderr, "NotFound") || strings.Contains(r.stderr, "could not find the requested resource"))
		}, "get", "crontabs.v1beta1."+versionsGroup)
		kubectlUntil(t, k, "discovery lists example.com/v1 and not example.com/v1beta1", func(r result) bool {
			l := lines(r.stdout)
			return r.err == nil && slices.Contains(l, "example.com/v1") && !slices.Contains(l, "example.com/v1beta1")
		}, "api-versions")
		// v1 clients see everything, as before.
		out := k.run(t, "get", "crontabs.v1."+versionsGroup, "-o", "json")
		list := &unstructured.UnstructuredList{}
		if err := list.UnmarshalJSON([]byte(out)); err != nil {
			t.Fatalf("kubectl get crontabs.v1.%s -o json: not a list: %v\n%s", versionsGroup, err, out)
		}
		checkList(t, "kubectl get crontabs.v1."+versionsGroup, "v1", list.Items, want, images)

		stage.Beta, stage.BetaDeprecated = false, false
		mustContain(t, applyCRD(t, k, stage), "customresourcedefinition.apiextensions.k8s.io/"+versionsCRDName+" configured")
		mustEqual(t, "spec.versions", k.run(t, "get", "crd", versionsCRDName, "-o", "jsonpath={.spec.versions[*].name}"), "v1")
		mustEqual(t, "status.storedVersions", storedVersions(t, k), `["v1"]`)
		checkAll(t, "v1")
		got, err := dyn.Resource(exampleCronTabsV1).Namespace("default").List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatalf("client-go list in v1: %v", err)
		}
		checkList(t, "client-go list in v1", "v1", got.Items, want, images)
		if _, err := dyn.Resource(exampleCronTabsV1beta1).Namespace("default").List(t.Context(), metav1.ListOptions{}); err == nil {
			t.Errorf("client-go list in v1beta1 succeeded after v1beta1 was removed")
		}
	})
}

// renderCRD fills in the CRD template for one stage.
func renderCRD(t *testing.T, s crdStage) string {
	t.Helper()
	tmpl, err := template.ParseFiles(versionsCRDTemplate)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := tmpl.Execute(&b, s); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// applyCRD applies the CRD of one stage with kubectl, and returns what
// kubectl printed.
func applyCRD(t *testing.T, k *kubectl, s crdStage) string {
	t.Helper()
	return k.runStdin(t, renderCRD(t, s), "apply", "-f", "-")
}

func storedVersions(t *testing.T, k *kubectl) string {
	t.Helper()
	return k.run(t, "get", "crd", versionsCRDName, "-o", "jsonpath={.status.storedVersions}")
}

// checkCronTab checks one CronTab read in version v: its apiVersion, the
// endpoint in that version's fields only, and its spec.
func checkCronTab(t *testing.T, v string, obj *unstructured.Unstructured, want endpoint, image string) {
	t.Helper()
	got := func(field string) (string, bool) {
		s, found, _ := unstructured.NestedString(obj.Object, field)
		return s, found
	}
	var errs []string
	if obj.GetAPIVersion() != versionsGroup+"/"+v || obj.GetKind() != "CronTab" {
		errs = append(errs, fmt.Sprintf("apiVersion %q kind %q, want %s/%s CronTab", obj.GetAPIVersion(), obj.GetKind(), versionsGroup, v))
	}
	switch v {
	case "v1":
		if h, _ := got("host"); h != want.host {
			errs = append(errs, fmt.Sprintf("host %q, want %q", h, want.host))
		}
		if p, _ := got("port"); p != want.port {
			errs = append(errs, fmt.Sprintf("port %q, want %q", p, want.port))
		}
		if hp, found := got("hostPort"); found {
			errs = append(errs, fmt.Sprintf("v1 has no hostPort, but it is %q", hp))
		}
	case "v1beta1":
		if hp, _ := got("hostPort"); hp != want.hostPort() {
			errs = append(errs, fmt.Sprintf("hostPort %q, want %q", hp, want.hostPort()))
		}
		for _, f := range []string{"host", "port"} {
			if s, found := got(f); found {
				errs = append(errs, fmt.Sprintf("v1beta1 has no %s, but it is %q", f, s))
			}
		}
	}
	if s := nestedString(obj, "spec", "image"); s != image {
		errs = append(errs, fmt.Sprintf("spec.image %q, want %q", s, image))
	}
	if obj.GetNamespace() != "default" || obj.GetUID() == "" || obj.GetResourceVersion() == "" {
		errs = append(errs, fmt.Sprintf("metadata.namespace %q, uid %q, resourceVersion %q", obj.GetNamespace(), obj.GetUID(), obj.GetResourceVersion()))
	}
	if len(errs) > 0 {
		j, _ := obj.MarshalJSON()
		t.Errorf("CronTab %s read in %s: %s\nobject: %s", obj.GetName(), v, strings.Join(errs, "; "), j)
	}
}

// checkList checks that a list read in version v holds exactly the wanted
// CronTabs, each converted to v.
func checkList(t *testing.T, what, v string, items []unstructured.Unstructured, want map[string]endpoint, images map[string]string) {
	t.Helper()
	got := names(items)
	slices.Sort(got)
	if w := slices.Sorted(maps.Keys(want)); !slices.Equal(got, w) {
		t.Fatalf("%s: items %q, want %q", what, got, w)
	}
	for i := range items {
		checkCronTab(t, v, &items[i], want[items[i].GetName()], images[items[i].GetName()])
	}
}

// kubectlUntil runs a kubectl command until ok accepts its result (the
// server applies a CRD change to serving a moment after it stored it), and
// fails the test with the last result when that does not happen within
// eventTimeout.
func kubectlUntil(t *testing.T, k *kubectl, what string, ok func(result) bool, args ...string) result {
	t.Helper()
	deadline := time.Now().Add(eventTimeout)
	for {
		r := k.exec("", args...)
		if ok(r) {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not so within %v; the last try:\n%s", what, eventTimeout, r)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// jsonEvent is one event of `kubectl get -w --output-watch-events -o json`.
type jsonEvent struct {
	Type   string
	Object *unstructured.Unstructured
}

// jsonEvents decodes the complete events kubectl has printed so far (the
// last one may still be on its way).
func jsonEvents(out string) ([]jsonEvent, error) {
	dec := json.NewDecoder(strings.NewReader(out))
	var evs []jsonEvent
	for {
		var raw struct {
			Type   string          `json:"type"`
			Object json.RawMessage `json:"object"`
		}
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return evs, nil
		}
		if err != nil {
			return evs, err
		}
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(raw.Object); err != nil {
			return evs, fmt.Errorf("%s event: %w", raw.Type, err)
		}
		evs = append(evs, jsonEvent{Type: raw.Type, Object: obj})
	}
}

// waitJSONEvent waits until kubectl's JSON watch prints an event that
// match accepts, and returns it.
func waitJSONEvent(t *testing.T, b *bgKubectl, match func(jsonEvent) bool) jsonEvent {
	t.Helper()
	deadline := time.After(eventTimeout)
	for {
		evs, err := jsonEvents(b.stdout.String())
		if err != nil {
			t.Fatalf("kubectl's watch output is not a stream of JSON events: %v\n%s", err, b)
		}
		if i := slices.IndexFunc(evs, match); i >= 0 {
			return evs[i]
		}
		select {
		case <-b.done:
			t.Fatalf("kubectl exited (%v) before printing the expected event:\n%s", b.err, b)
		case <-deadline:
			t.Fatalf("kubectl printed no expected event within %v:\n%s", eventTimeout, b)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// runCrdserver runs the crdserver binary with args (a subcommand such as
// migrate) to its end.
func runCrdserver(args ...string) (stdout, stderr string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, crdserverBin, args...)
	// No $KUBECONFIG from the environment: only what args say.
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "KUBECONFIG=") })
	cmd.Dir = filepath.Dir(crdserverBin)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("killed after %v: %w", commandTimeout, err)
	}
	return o.String(), e.String(), err
}
