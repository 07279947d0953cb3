package e2e

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The fixture of the subresources scenario: widgets.sub.example.com, with
// the status and scale subresources, printer columns, categories, a short
// name and a selectable field.
const (
	subCRDFile = "testdata/sub-widgets-crd.yaml"
	subCRDName = "widgets.sub.example.com"
	subWidget  = "widget.sub.example.com" // kubectl's name for the kind
)

// subWidgetYAML is a Widget manifest; spec holds the lines of its spec
// ("color: red"), and metadata extra lines of its metadata.
func subWidgetYAML(name string, metadata []string, spec ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: sub.example.com/v1\nkind: Widget\nmetadata:\n  name: %s\n", name)
	for _, l := range metadata {
		b.WriteString("  " + l + "\n")
	}
	b.WriteString("spec:\n")
	for _, l := range spec {
		b.WriteString("  " + l + "\n")
	}
	return b.String()
}

// subAge matches what kubectl prints in an AGE column ("0s", "12s", "3m4s").
var subAge = regexp.MustCompile(`^[0-9]+[smhdy]`)

// TestKubectlSubresources drives a CRD's extras with kubectl: printer
// columns (with a priority column for -o wide), categories, field selectors
// on a selectable field (with a watch), the status and scale subresources
// (with generation, preconditions, validation of the replicas paths and
// managed fields), server-side apply conflicts, deletion held by a
// finalizer, and server-side dry runs. The expected texts are what
// Kubernetes 1.37's apiextensions-apiserver answers the same kubectl.
func TestKubectlSubresources(t *testing.T) {
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
	// get prints fields of a Widget in default with a jsonpath template.
	get := func(t *testing.T, name, template string) string {
		t.Helper()
		return k.run(t, "get", subWidget, name, "-o", "jsonpath="+template)
	}
	// failStdin runs kubectl with stdin, fails the test unless kubectl
	// fails, and returns stderr.
	failStdin := func(t *testing.T, stdin string, args ...string) string {
		t.Helper()
		r := k.exec(stdin, args...)
		if r.err == nil {
			t.Fatalf("kubectl succeeded, but it should have failed:\n%s", r)
		}
		return r.stderr
	}

	must("apply CRD and wait for Established", func(t *testing.T) {
		out := k.run(t, "apply", "-f", subCRDFile)
		mustEqual(t, "kubectl apply of the CRD", out, "customresourcedefinition.apiextensions.k8s.io/"+subCRDName+" created\n")
		out = k.run(t, "wait", "--for=condition=Established", "crd/"+subCRDName, "--timeout=60s")
		mustContain(t, out, "customresourcedefinition.apiextensions.k8s.io/"+subCRDName+" condition met")
	})

	// sprocket and gizmo live in default, gadget in namespace sub-other.
	must("create widgets", func(t *testing.T) {
		mustEqual(t, "create sprocket", k.runStdin(t, subWidgetYAML("sprocket", nil, "replicas: 2", "color: green", "size: small"), "create", "-f", "-"),
			subWidget+"/sprocket created\n")
		mustEqual(t, "create gizmo", k.runStdin(t, subWidgetYAML("gizmo", nil, "replicas: 1", "color: blue", "size: large"), "create", "-f", "-"),
			subWidget+"/gizmo created\n")
		mustEqual(t, "create namespace", k.run(t, "create", "namespace", "sub-other"), "namespace/sub-other created\n")
		mustEqual(t, "create gadget", k.runStdin(t, subWidgetYAML("gadget", nil, "replicas: 7", "color: green", "size: medium"), "create", "-n", "sub-other", "-f", "-"),
			subWidget+"/gadget created\n")
	})

	t.Run("printer columns", func(t *testing.T) {
		check := func(t *testing.T, args []string, header string, rows map[string][]string) {
			t.Helper()
			out := k.run(t, args...)
			if got := tableHeader(t, out); got != header {
				t.Errorf("kubectl %s: header %q, want %q; output:\n%s", shellQuote(args), got, header, out)
			}
			if n := len(lines(out)) - 1; n != len(rows) {
				t.Errorf("kubectl %s: %d rows, want %d; output:\n%s", shellQuote(args), n, len(rows), out)
			}
			for name, want := range rows {
				row := tableRow(t, out, name)
				if len(row) != len(want)+1 || !slices.Equal(row[:len(want)], want) || !subAge.MatchString(row[len(want)]) {
					t.Errorf("kubectl %s: row %q, want %q and an age; output:\n%s", shellQuote(args), row, want, out)
				}
			}
		}
		narrow := map[string][]string{
			"sprocket": {"sprocket", "green", "2"},
			"gizmo":    {"gizmo", "blue", "1"},
		}
		check(t, []string{"get", "widgets"}, "NAME COLOR REPLICAS AGE", narrow)
		check(t, []string{"get", "wdg"}, "NAME COLOR REPLICAS AGE", narrow)
		// Size has priority 1: only -o wide shows it.
		check(t, []string{"get", "widgets", "-o", "wide"}, "NAME COLOR REPLICAS SIZE AGE", map[string][]string{
			"sprocket": {"sprocket", "green", "2", "small"},
			"gizmo":    {"gizmo", "blue", "1", "large"},
		})
		check(t, []string{"get", "widget", "gizmo"}, "NAME COLOR REPLICAS AGE", map[string][]string{"gizmo": {"gizmo", "blue", "1"}})
		check(t, []string{"get", "widgets", "-n", "sub-other", "-o", "wide"}, "NAME COLOR REPLICAS SIZE AGE", map[string][]string{
			"gadget": {"gadget", "green", "7", "medium"},
		})
		out := k.run(t, "get", "widgets", "-A")
		if got := tableHeader(t, out); got != "NAMESPACE NAME COLOR REPLICAS AGE" {
			t.Errorf("get widgets -A: header %q, want NAMESPACE NAME COLOR REPLICAS AGE; output:\n%s", got, out)
		}
		if row := tableRow(t, out, "sub-other"); !slices.Equal(row[:4], []string{"sub-other", "gadget", "green", "7"}) {
			t.Errorf("get widgets -A: row %q, want sub-other gadget green 7 <age>; output:\n%s", row, out)
		}
	})

	t.Run("categories", func(t *testing.T) {
		want := subWidget + "/gizmo\n" + subWidget + "/sprocket\n"
		mustEqual(t, "get toys -o name", k.run(t, "get", "toys", "-o", "name"), want)
		// The namespace is default: kube-apiserver's own Service is there
		// too, as on Kubernetes.
		mustEqual(t, "get all -o name", k.run(t, "get", "all", "-o", "name"), "service/kubernetes\n"+want)
		out := k.run(t, "get", "toys")
		if got := tableHeader(t, out); got != "NAME COLOR REPLICAS AGE" {
			t.Errorf("get toys: header %q, want NAME COLOR REPLICAS AGE; output:\n%s", got, out)
		}
		tableRow(t, out, "sprocket")
		mustEqual(t, "get toys -n sub-other -o name", k.run(t, "get", "toys", "-n", "sub-other", "-o", "name"), subWidget+"/gadget\n")
		out = k.run(t, "api-resources", "--categories=toys")
		if row := tableRow(t, out, "widgets"); !slices.Equal(row, []string{"widgets", "wdg", "sub.example.com/v1", "true", "Widget"}) {
			t.Errorf("api-resources --categories=toys: row %q; output:\n%s", row, out)
		}
		out = k.run(t, "api-resources", "-o", "wide", "--api-group=sub.example.com")
		if row := tableRow(t, out, "widgets"); len(row) != 7 || row[6] != "all,toys" {
			t.Errorf("api-resources -o wide: row %q, want the categories all,toys last; output:\n%s", row, out)
		}
	})

	t.Run("field selectors", func(t *testing.T) {
		for _, c := range []struct{ selector, want string }{
			{"spec.color=green", "sprocket"},
			{"spec.color==blue", "gizmo"},
			{"spec.color!=green", "gizmo"},
			{"metadata.name=gizmo", "gizmo"},
			{"metadata.name!=gizmo", "sprocket"},
			{"metadata.namespace=default", "gizmo sprocket"},
			{"spec.color=blue,metadata.name!=gizmo", ""},
			{"spec.color!=red,metadata.name!=gizmo", "sprocket"},
		} {
			r := k.exec("", "get", "widgets", "--field-selector", c.selector, "-o", "jsonpath={.items[*].metadata.name}")
			if r.err != nil || r.stdout != c.want {
				t.Errorf("get widgets --field-selector %s: want %q:\n%s", c.selector, c.want, r)
			}
		}
		// The table of a selected list.
		out := k.run(t, "get", "widgets", "--field-selector", "spec.color=green")
		if l := lines(out); len(l) != 2 || tableHeader(t, out) != "NAME COLOR REPLICAS AGE" || !slices.Equal(tableRow(t, out, "sprocket")[:3], []string{"sprocket", "green", "2"}) {
			t.Errorf("get widgets --field-selector spec.color=green: want the header and sprocket's row:\n%s", out)
		}
		// Across namespaces.
		out = k.run(t, "get", "widgets", "-A", "--field-selector", "spec.color=green", "-o", `jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name}{"\n"}{end}`)
		mustEqual(t, "get widgets -A --field-selector spec.color=green", out, "default/sprocket\nsub-other/gadget\n")
		out = k.run(t, "get", "widgets", "-A", "--field-selector", "metadata.namespace=sub-other", "-o", "name")
		mustEqual(t, "get widgets -A --field-selector metadata.namespace=sub-other", out, subWidget+"/gadget\n")
		// With a label selector too.
		k.run(t, "label", subWidget, "sprocket", "tier=front")
		out = k.run(t, "get", "widgets", "-l", "tier=front", "--field-selector", "spec.color=green", "-o", "name")
		mustEqual(t, "label and field selector", out, subWidget+"/sprocket\n")
		out = k.run(t, "get", "widgets", "-l", "tier!=front", "--field-selector", "spec.color=green", "-o", "name")
		mustEqual(t, "label and field selector that match nothing", out, "")
		k.run(t, "label", subWidget, "sprocket", "tier-")
		// Nothing matches.
		r := k.exec("", "get", "widgets", "--field-selector", "spec.color=purple")
		if r.err != nil || r.stdout != "" || r.stderr != "No resources found in default namespace.\n" {
			t.Errorf("a field selector that matches nothing should print only \"No resources found in default namespace.\":\n%s", r)
		}
		// A field that is not selectable.
		stderr := k.fail(t, "get", "widgets", "--field-selector", "spec.size=x")
		mustEqual(t, "field selector on spec.size", stderr,
			`Error from server (BadRequest): Unable to find "sub.example.com/v1, Resource=widgets" that match label selector "", field selector "spec.size=x": field label not supported: spec.size`+"\n")
		stderr = k.fail(t, "get", "--raw", "/apis/sub.example.com/v1/namespaces/default/widgets?fieldSelector=spec.size%3Dx")
		mustEqual(t, "raw list with fieldSelector=spec.size=x", stderr, "Error from server (BadRequest): field label not supported: spec.size\n")
		stderr = k.fail(t, "get", "--raw", "/apis/sub.example.com/v1/widgets?fieldSelector=status.replicas%3D1")
		mustEqual(t, "raw list with fieldSelector=status.replicas=1", stderr, "Error from server (BadRequest): field label not supported: status.replicas\n")
	})

	t.Run("watch with a field selector", func(t *testing.T) {
		mustEqual(t, "create chameleon", k.runStdin(t, subWidgetYAML("chameleon", nil, "replicas: 1", "color: lime"), "create", "-f", "-"),
			subWidget+"/chameleon created\n")
		w := k.background(t, "get", "widgets", "--field-selector", "spec.color=lime", "--watch", "--output-watch-events")
		w.waitForLine(t, regexp.MustCompile(`^ADDED\s+chameleon\s+lime\s+1\s`))
		patch := func(p string) {
			t.Helper()
			mustEqual(t, "patch chameleon "+p, k.run(t, "patch", subWidget, "chameleon", "--type=merge", "-p", p), subWidget+"/chameleon patched\n")
		}
		patch(`{"spec":{"replicas":2}}`)
		w.waitForLine(t, regexp.MustCompile(`^MODIFIED\s+chameleon\s+lime\s+2\s`))
		// No longer selected: the watch says DELETED.
		patch(`{"spec":{"color":"white"}}`)
		w.waitForLine(t, regexp.MustCompile(`^DELETED\s+chameleon\s`))
		// A change while it is not selected is not sent.
		patch(`{"spec":{"replicas":9}}`)
		patch(`{"spec":{"color":"lime"}}`)
		out := w.waitForLine(t, regexp.MustCompile(`^ADDED\s+chameleon\s+lime\s+9\s`))
		w.stop()
		var got []string
		for _, l := range lines(strings.Join(out, "\n")) {
			if f := strings.Fields(l); len(f) >= 4 {
				got = append(got, strings.Join(f[:4], " "))
			}
		}
		want := []string{
			"EVENT NAME COLOR REPLICAS",
			"ADDED chameleon lime 1",
			"MODIFIED chameleon lime 2",
			"DELETED chameleon lime 2",
			"ADDED chameleon lime 9",
		}
		if !slices.Equal(got, want) {
			t.Errorf("watch with --field-selector spec.color=lime printed\n%s\nwant (name, color, replicas)\n%s\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"), w)
		}
		mustEqual(t, "delete chameleon", k.run(t, "delete", subWidget, "chameleon"), subWidget+` "chameleon" deleted from default namespace`+"\n")
	})

	t.Run("status subresource", func(t *testing.T) {
		const fields = "{.spec.color} {.spec.replicas} {.status.replicas} {.status.selector} {.metadata.generation}"
		mustEqual(t, "sprocket before", get(t, "sprocket", fields), "green 2   1")

		out := k.run(t, "patch", subWidget, "sprocket", "--subresource=status", "--type=merge", "-p", `{"status":{"replicas":3,"selector":"app=sprocket"}}`)
		mustEqual(t, "patch --subresource=status", out, subWidget+"/sprocket patched\n")
		mustEqual(t, "after the status patch (generation unchanged)", get(t, "sprocket", fields), "green 2 3 app=sprocket 1")

		// The main resource ignores status.
		out = k.run(t, "patch", subWidget, "sprocket", "--type=merge", "-p", `{"status":{"replicas":9}}`)
		mustEqual(t, "patch of status on the main resource", out, subWidget+"/sprocket patched (no change)\n")
		mustEqual(t, "after a status patch on the main resource", get(t, "sprocket", fields), "green 2 3 app=sprocket 1")
		out = k.run(t, "patch", subWidget, "sprocket", "--type=merge", "-p", `{"spec":{"color":"teal"},"status":{"replicas":9}}`)
		mustEqual(t, "patch of spec and status on the main resource", out, subWidget+"/sprocket patched\n")
		mustEqual(t, "after a spec and status patch on the main resource (generation +1)", get(t, "sprocket", fields), "teal 2 3 app=sprocket 2")

		// The status subresource ignores everything but status.
		out = k.run(t, "patch", subWidget, "sprocket", "--subresource=status", "--type=merge", "-p", `{"spec":{"color":"pink"},"status":{"replicas":4}}`)
		mustEqual(t, "patch of spec and status on /status", out, subWidget+"/sprocket patched\n")
		mustEqual(t, "after a spec and status patch on /status", get(t, "sprocket", fields), "teal 2 4 app=sprocket 2")

		// PUT on /status.
		obj := parseYAML(t, k.run(t, "get", subWidget, "sprocket", "-o", "yaml"))
		if err := unstructured.SetNestedField(obj.Object, int64(5), "status", "replicas"); err != nil {
			t.Fatal(err)
		}
		if err := unstructured.SetNestedField(obj.Object, "pink", "spec", "color"); err != nil {
			t.Fatal(err)
		}
		body, err := obj.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		out = k.runStdin(t, string(body), "replace", "--subresource=status", "-f", "-")
		mustEqual(t, "replace --subresource=status", out, subWidget+"/sprocket replaced\n")
		mustEqual(t, "after replace --subresource=status", get(t, "sprocket", fields), "teal 2 5 app=sprocket 2")

		// Metadata changes do not bump the generation either.
		k.run(t, "label", subWidget, "sprocket", "tier=front")
		k.run(t, "annotate", subWidget, "sprocket", "note=hello")
		mustEqual(t, "after label and annotate", get(t, "sprocket", fields), "teal 2 5 app=sprocket 2")

		// Status on create is dropped.
		out = k.runStdin(t, subWidgetYAML("statusless", nil, "replicas: 1", "color: red")+"status:\n  replicas: 1\n", "create", "-f", "-")
		mustEqual(t, "create with status", out, subWidget+"/statusless created\n")
		mustEqual(t, "status of a Widget created with status", get(t, "statusless", "[{.status}] {.metadata.generation}"), "[] 1")

		// kubectl get --subresource=status prints the Widget's columns.
		out = k.run(t, "get", subWidget, "sprocket", "--subresource=status")
		if h := tableHeader(t, out); h != "NAME COLOR REPLICAS AGE" {
			t.Errorf("get --subresource=status: header %q, want NAME COLOR REPLICAS AGE; output:\n%s", h, out)
		}
		if row := tableRow(t, out, "sprocket"); !slices.Equal(row[:3], []string{"sprocket", "teal", "2"}) {
			t.Errorf("get --subresource=status: row %q, want sprocket teal 2 <age>", row)
		}

		// The managers of the status writes are recorded with subresource status.
		mf := get(t, "sprocket", `{range .metadata.managedFields[*]}{.manager}/{.operation}/{.subresource}: {.fieldsV1}{"\n"}{end}`)
		for _, want := range []string{
			`kubectl-patch/Update/status: {"f:status":{".":{},"f:selector":{}}}`,
			`kubectl-replace/Update/status: {"f:status":{"f:replicas":{}}}`,
		} {
			if !slices.Contains(lines(mf), want) {
				t.Errorf("managed fields of sprocket lack %q:\n%s", want, mf)
			}
		}
	})

	t.Run("scale subresource", func(t *testing.T) {
		const fields = "{.spec.replicas} {.status.replicas} {.metadata.generation}"
		k.run(t, "patch", subWidget, "gizmo", "--subresource=status", "--type=merge", "-p", `{"status":{"replicas":1,"selector":"app=gizmo"}}`)

		out := k.run(t, "scale", "--replicas=5", subWidget+"/gizmo")
		mustEqual(t, "kubectl scale", out, subWidget+"/gizmo scaled\n")
		mustEqual(t, "gizmo after scale (generation +1)", get(t, "gizmo", fields), "5 1 2")

		// The Scale, read raw: autoscaling/v1 with the Widget's metadata.
		obj := parseYAML(t, k.run(t, "get", subWidget, "gizmo", "-o", "yaml"))
		raw := k.run(t, "get", "--raw", "/apis/sub.example.com/v1/namespaces/default/widgets/gizmo/scale")
		var scale map[string]any
		if err := json.Unmarshal([]byte(raw), &scale); err != nil {
			t.Fatalf("the scale subresource is not JSON: %v\n%s", err, raw)
		}
		want := map[string]any{
			"kind":       "Scale",
			"apiVersion": "autoscaling/v1",
			"metadata": map[string]any{
				"name":              "gizmo",
				"namespace":         "default",
				"uid":               string(obj.GetUID()),
				"resourceVersion":   obj.GetResourceVersion(),
				"creationTimestamp": nestedString(obj, "metadata", "creationTimestamp"),
			},
			"spec":   map[string]any{"replicas": float64(5)},
			"status": map[string]any{"replicas": float64(1), "selector": "app=gizmo"},
		}
		if !reflect.DeepEqual(scale, want) {
			t.Errorf("GET .../widgets/gizmo/scale:\n got: %v\nwant: %v", scale, want)
		}
		out = k.run(t, "get", "--subresource=scale", subWidget, "gizmo", "-o", "jsonpath={.apiVersion} {.kind} {.spec.replicas} {.status.replicas} {.status.selector}")
		mustEqual(t, "get --subresource=scale", out, "autoscaling/v1 Scale 5 1 app=gizmo")

		// Preconditions, checked by kubectl against the Scale.
		stderr := k.fail(t, "scale", "--current-replicas=4", "--replicas=6", subWidget+"/gizmo")
		mustEqual(t, "scale --current-replicas=4", stderr, "error: Expected replicas to be 4, was 5\n")
		stderr = k.fail(t, "scale", "--resource-version=1", "--replicas=6", subWidget+"/gizmo")
		mustEqual(t, "scale --resource-version=1", stderr, "error: Expected resource version to be 1, was "+obj.GetResourceVersion()+"\n")
		mustEqual(t, "gizmo after failed preconditions", get(t, "gizmo", fields), "5 1 2")
		out = k.run(t, "scale", "--current-replicas=5", "--resource-version="+obj.GetResourceVersion(), "--replicas=6", subWidget+"/gizmo")
		mustEqual(t, "scale --current-replicas=5", out, subWidget+"/gizmo scaled\n")
		mustEqual(t, "gizmo after scale --current-replicas=5", get(t, "gizmo", fields), "6 1 3")

		// A patch of the Scale: spec.replicas goes through, status is ignored.
		out = k.run(t, "patch", subWidget, "gizmo", "--subresource=scale", "--type=merge", "-p", `{"spec":{"replicas":4}}`)
		mustEqual(t, "patch --subresource=scale", out, "scale.autoscaling/gizmo patched\n")
		out = k.run(t, "patch", subWidget, "gizmo", "--subresource=scale", "--type=merge", "-p", `{"status":{"replicas":30}}`)
		mustEqual(t, "patch of the Scale's status", out, "scale.autoscaling/gizmo patched (no change)\n")
		mustEqual(t, "gizmo after the Scale patches", get(t, "gizmo", fields), "4 1 4")

		// A Widget without spec.replicas has no Scale to read, but kubectl
		// scale (a patch of the Scale) sets spec.replicas.
		k.runStdin(t, subWidgetYAML("unscaled", nil, "color: gray"), "create", "-f", "-")
		stderr = k.fail(t, "get", "--raw", "/apis/sub.example.com/v1/namespaces/default/widgets/unscaled/scale")
		mustEqual(t, "Scale of a Widget without spec.replicas", stderr,
			`Error from server (InternalError): Internal error occurred: the spec replicas field ".spec.replicas" does not exist`+"\n")
		out = k.run(t, "scale", "--replicas=2", subWidget+"/unscaled")
		mustEqual(t, "scale of a Widget without spec.replicas", out, subWidget+"/unscaled scaled\n")
		mustEqual(t, "unscaled after scale", get(t, "unscaled", "{.spec.replicas} {.spec.color}"), "2 gray")

		stderr = k.fail(t, "scale", "--replicas=2", subWidget+"/nothing")
		mustEqual(t, "scale of a missing Widget", stderr, `Error from server (NotFound): widgets.sub.example.com "nothing" not found`+"\n")
	})

	t.Run("get --subresource=scale prints DESIRED and AVAILABLE", func(t *testing.T) {
		// Kubernetes' table for a CRD's Scale: the spec and status replicas.
		out := k.run(t, "get", "--subresource=scale", subWidget, "gizmo")
		if h := tableHeader(t, out); h != "NAME DESIRED AVAILABLE AGE" {
			t.Errorf("get --subresource=scale: header %q, want NAME DESIRED AVAILABLE AGE; output:\n%s", h, out)
		}
		if row := tableRow(t, out, "gizmo"); len(row) != 4 || !slices.Equal(row[:3], []string{"gizmo", "4", "1"}) {
			t.Errorf("get --subresource=scale: row %q, want gizmo 4 1 <age>; output:\n%s", row, out)
		}
	})

	t.Run("scale records its field manager", func(t *testing.T) {
		k.runStdin(t, subWidgetYAML("tracked", nil, "color: gold", "replicas: 2", "size: small"), "create", "-f", "-")
		managers := func() string {
			t.Helper()
			mf := get(t, "tracked", `{range .metadata.managedFields[*]}{.manager}/{.operation}/{.subresource}: {.fieldsV1}{"\n"}{end}`)
			l := lines(mf)
			slices.Sort(l)
			return strings.Join(l, "\n")
		}
		k.run(t, "scale", "--replicas=3", subWidget+"/tracked")
		if got, want := managers(), `kubectl-create/Update/: {"f:spec":{".":{},"f:color":{},"f:size":{}}}`+"\n"+
			`kubectl/Update/scale: {"f:spec":{"f:replicas":{}}}`; got != want {
			t.Errorf("managed fields after kubectl scale:\n got:\n%s\nwant:\n%s", got, want)
		}
		k.run(t, "patch", subWidget, "tracked", "--subresource=scale", "--type=merge", "-p", `{"spec":{"replicas":4}}`)
		if got, want := managers(), `kubectl-create/Update/: {"f:spec":{".":{},"f:color":{},"f:size":{}}}`+"\n"+
			`kubectl-patch/Update/scale: {"f:spec":{"f:replicas":{}}}`; got != want {
			t.Errorf("managed fields after a patch of the Scale:\n got:\n%s\nwant:\n%s", got, want)
		}
	})

	t.Run("replicas paths are validated", func(t *testing.T) {
		// A Widget of its own: the checks leave it as it is only if the
		// server rejects every patch.
		k.runStdin(t, subWidgetYAML("checked", nil, "color: black", "replicas: 4"), "create", "-f", "-")
		k.run(t, "patch", subWidget, "checked", "--subresource=status", "--type=merge", "-p", `{"status":{"replicas":1}}`)
		const fields = "{.spec.replicas} {.status.replicas} {.metadata.generation}"
		mustEqual(t, "checked before", get(t, "checked", fields), "4 1 1")
		for _, c := range []struct {
			args []string
			want string
		}{
			{[]string{"--type=merge", "-p", `{"spec":{"replicas":-1}}`},
				`The Widget "checked" is invalid: .spec.replicas: Invalid value: -1: should be a non-negative integer`},
			{[]string{"--type=merge", "-p", `{"spec":{"replicas":3000000000}}`},
				`The Widget "checked" is invalid: .spec.replicas: Invalid value: 3000000000: should be less than or equal to 2147483647`},
			{[]string{"--subresource=status", "--type=merge", "-p", `{"status":{"replicas":-2}}`},
				`The Widget "checked" is invalid: .status.replicas: Invalid value: -2: should be a non-negative integer`},
			{[]string{"--subresource=scale", "--type=merge", "-p", `{"spec":{"replicas":-3}}`},
				`The Widget "checked" is invalid: .spec.replicas: Invalid value: -3: should be a non-negative integer`},
		} {
			args := append([]string{"patch", subWidget, "checked"}, c.args...)
			r := k.exec("", args...)
			if r.err == nil || r.stderr != c.want+"\n" {
				t.Errorf("want the patch to fail with %q:\n%s", c.want, r)
			}
		}
		if after := get(t, "checked", fields); after != "4 1 1" {
			t.Errorf("checked changed by rejected patches: %q, was \"4 1 1\"", after)
		}
		out := k.run(t, "get", "--subresource=scale", subWidget, "checked", "-o", "jsonpath={.spec.replicas} {.status.replicas}")
		mustEqual(t, "the Scale after rejected patches", out, "4 1")
	})

	t.Run("server-side apply conflicts", func(t *testing.T) {
		alice := subWidgetYAML("shared", nil, "color: red", "size: small")
		bob := subWidgetYAML("shared", nil, "color: blue")
		out := k.runStdin(t, alice, "apply", "--server-side", "--field-manager=alice", "-f", "-")
		mustEqual(t, "alice's apply", out, subWidget+"/shared serverside-applied\n")

		stderr := failStdin(t, bob, "apply", "--server-side", "--field-manager=bob", "-f", "-")
		if first, _, _ := strings.Cut(stderr, "\n"); first != `error: Apply failed with 1 conflict: conflict with "alice": .spec.color` {
			t.Errorf("bob's apply: first line of stderr %q, want %q:\n%s", first, `error: Apply failed with 1 conflict: conflict with "alice": .spec.color`, stderr)
		}
		mustContain(t, stderr, "re-run the apply\n  command with the `--force-conflicts` flag.")
		mustEqual(t, "shared after the conflict", get(t, "shared", "{.spec.color} {.spec.size} {.metadata.generation}"), "red small 1")

		out = k.runStdin(t, bob, "apply", "--server-side", "--field-manager=bob", "--force-conflicts", "-f", "-")
		mustEqual(t, "bob's apply --force-conflicts", out, subWidget+"/shared serverside-applied\n")
		mustEqual(t, "shared after the forced apply", get(t, "shared", "{.spec.color} {.spec.size} {.metadata.generation}"), "blue small 2")

		out = k.run(t, "get", subWidget, "shared", "-o", "yaml", "--show-managed-fields")
		obj := parseYAML(t, out)
		var got []string
		for _, m := range obj.GetManagedFields() {
			fields := ""
			if m.FieldsV1 != nil {
				fields = m.FieldsV1.GetRawString()
			}
			got = append(got, fmt.Sprintf("%s %s %s %s %s", m.Manager, m.Operation, m.APIVersion, m.FieldsType, fields))
			if m.Time == nil || m.Time.IsZero() {
				t.Errorf("manager %s has no time", m.Manager)
			}
		}
		slices.Sort(got)
		want := []string{
			`alice Apply sub.example.com/v1 FieldsV1 {"f:spec":{"f:size":{}}}`,
			`bob Apply sub.example.com/v1 FieldsV1 {"f:spec":{"f:color":{}}}`,
		}
		if !slices.Equal(got, want) {
			t.Errorf("managed fields after the forced apply:\n got: %q\nwant: %q\n%s", got, want, out)
		}
		if strings.Contains(k.run(t, "get", subWidget, "shared", "-o", "yaml"), "managedFields") {
			t.Errorf("get -o yaml without --show-managed-fields shows managedFields")
		}

		// Now alice conflicts with bob, and applying the same again is fine.
		stderr = failStdin(t, alice, "apply", "--server-side", "--field-manager=alice", "-f", "-")
		if first, _, _ := strings.Cut(stderr, "\n"); first != `error: Apply failed with 1 conflict: conflict with "bob": .spec.color` {
			t.Errorf("alice's second apply: first line of stderr %q:\n%s", first, stderr)
		}
		out = k.runStdin(t, bob, "apply", "--server-side", "--field-manager=bob", "-f", "-")
		mustEqual(t, "bob's apply again", out, subWidget+"/shared serverside-applied\n")
		mustEqual(t, "shared after bob's apply again", get(t, "shared", "{.spec.color} {.spec.size} {.metadata.generation}"), "blue small 2")
	})

	t.Run("deletion waits for finalizers", func(t *testing.T) {
		// (Not "y": kubectl's YAML reads a bare y as true.)
		out := k.runStdin(t, subWidgetYAML("held", []string{"finalizers:", "- example.com/hold"}, "color: red"), "create", "-f", "-")
		mustEqual(t, "create held", out, subWidget+"/held created\n")

		out = k.run(t, "delete", subWidget, "held", "--wait=false")
		mustEqual(t, "delete held", out, subWidget+` "held" deleted from default namespace`+"\n")
		const fields = "{.metadata.deletionTimestamp} {.metadata.deletionGracePeriodSeconds} {.metadata.finalizers}"
		got := get(t, "held", fields)
		ts, rest, _ := strings.Cut(got, " ")
		if _, err := time.Parse(time.RFC3339, ts); err != nil {
			t.Errorf("deletionTimestamp of held: %q is not an RFC 3339 time (%v)", ts, err)
		}
		mustEqual(t, "deletionGracePeriodSeconds and finalizers of held", rest, `0 ["example.com/hold"]`)
		tableRow(t, k.run(t, "get", "widgets"), "held")

		// Setting deletionTimestamp bumps the generation (Kubernetes'
		// BeforeDelete); a second delete changes nothing.
		if g := get(t, "held", "{.metadata.generation}"); g != "2" {
			t.Errorf("generation of held after delete = %s, want 2 (the first graceful deletion bumps it)", g)
		}
		rv := get(t, "held", "{.metadata.resourceVersion} {.metadata.generation}")
		out = k.run(t, "delete", subWidget, "held", "--wait=false")
		mustEqual(t, "delete held again", out, subWidget+` "held" deleted from default namespace`+"\n")
		mustEqual(t, "held after the second delete", get(t, "held", fields), got)
		mustEqual(t, "resourceVersion and generation after the second delete", get(t, "held", "{.metadata.resourceVersion} {.metadata.generation}"), rv)

		// No new finalizers while it is being deleted.
		stderr := k.fail(t, "patch", subWidget, "held", "--type=merge", "-p", `{"metadata":{"finalizers":["example.com/hold","example.com/other"]}}`)
		mustEqual(t, "adding a finalizer during deletion", stderr,
			`The Widget "held" is invalid: metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{"example.com/other"}`+"\n")
		// A dry run of the removal keeps it.
		out = k.run(t, "patch", subWidget, "held", "--type=json", "-p", `[{"op":"remove","path":"/metadata/finalizers"}]`, "--dry-run=server")
		mustEqual(t, "dry run of the finalizer removal", out, subWidget+"/held patched\n")
		mustEqual(t, "held after the dry run", get(t, "held", fields), got)

		out = k.run(t, "patch", subWidget, "held", "--type=json", "-p", `[{"op":"remove","path":"/metadata/finalizers"}]`)
		mustEqual(t, "remove the finalizer", out, subWidget+"/held patched\n")
		mustEqual(t, "get held after its finalizer is gone", k.fail(t, "get", subWidget, "held"),
			`Error from server (NotFound): widgets.sub.example.com "held" not found`+"\n")
	})

	t.Run("server-side dry run", func(t *testing.T) {
		const snapshot = "{.metadata.resourceVersion} {.metadata.generation} {.spec} {.status} {.metadata.labels} [{.metadata.deletionTimestamp}]"
		notFound := func(t *testing.T, name string) {
			t.Helper()
			mustEqual(t, "get "+name, k.fail(t, "get", subWidget, name),
				`Error from server (NotFound): widgets.sub.example.com "`+name+`" not found`+"\n")
		}
		dry := subWidgetYAML("dry", nil, "color: red", "replicas: 1")

		// Create.
		out := k.runStdin(t, dry, "create", "-f", "-", "--dry-run=server")
		mustEqual(t, "create --dry-run=server", out, subWidget+"/dry created (server dry run)\n")
		out = k.runStdin(t, dry, "create", "-f", "-", "--dry-run=server", "-o", "jsonpath={.metadata.name}|{.metadata.resourceVersion}|{.metadata.generation}|{.spec.color}")
		mustEqual(t, "the object of create --dry-run=server", out, "dry||1|red")
		if uid := k.runStdin(t, dry, "create", "-f", "-", "--dry-run=server", "-o", "jsonpath={.metadata.uid}"); uid == "" {
			t.Errorf("create --dry-run=server returned no uid")
		}
		notFound(t, "dry")

		// Apply, client side and server side.
		out = k.runStdin(t, dry, "apply", "-f", "-", "--dry-run=server")
		mustEqual(t, "apply --dry-run=server", out, subWidget+"/dry created (server dry run)\n")
		out = k.runStdin(t, dry, "apply", "--server-side", "-f", "-", "--dry-run=server")
		mustEqual(t, "apply --server-side --dry-run=server", out, subWidget+"/dry serverside-applied (server dry run)\n")
		notFound(t, "dry")
		before := get(t, "shared", snapshot)
		out = k.runStdin(t, subWidgetYAML("shared", nil, "color: green"), "apply", "--server-side", "--field-manager=bob", "-f", "-", "--dry-run=server")
		mustEqual(t, "apply --server-side --dry-run=server of shared", out, subWidget+"/shared serverside-applied (server dry run)\n")
		mustEqual(t, "shared after a dry-run apply", get(t, "shared", snapshot), before)

		// Patch, label, scale, status and delete of gizmo.
		before = get(t, "gizmo", snapshot)
		out = k.run(t, "patch", subWidget, "gizmo", "--type=merge", "-p", `{"spec":{"color":"orange"}}`, "--dry-run=server", "-o", "jsonpath={.spec.color} {.metadata.generation}")
		mustEqual(t, "the object of patch --dry-run=server", out, "orange 5")
		out = k.run(t, "patch", subWidget, "gizmo", "--type=merge", "-p", `{"spec":{"color":"orange"}}`, "--dry-run=server")
		mustEqual(t, "patch --dry-run=server", out, subWidget+"/gizmo patched\n")
		out = k.run(t, "patch", subWidget, "gizmo", "--subresource=status", "--type=merge", "-p", `{"status":{"replicas":7}}`, "--dry-run=server")
		mustEqual(t, "patch --subresource=status --dry-run=server", out, subWidget+"/gizmo patched\n")
		out = k.run(t, "label", subWidget, "gizmo", "a=b", "--dry-run=server")
		mustEqual(t, "label --dry-run=server", out, subWidget+"/gizmo labeled (server dry run)\n")
		out = k.run(t, "scale", subWidget+"/gizmo", "--replicas=9", "--dry-run=server")
		mustEqual(t, "scale --dry-run=server", out, subWidget+"/gizmo scaled (server dry run)\n")
		out = k.run(t, "delete", subWidget, "gizmo", "--dry-run=server")
		mustEqual(t, "delete --dry-run=server", out, subWidget+` "gizmo" deleted from default namespace (server dry run)`+"\n")
		mustEqual(t, "gizmo after the dry runs", get(t, "gizmo", snapshot), before)

		// A dry-run create of an existing name fails as the create would.
		r := k.exec(subWidgetYAML("gizmo", nil, "color: red"), "create", "-f", "-", "--dry-run=server")
		if want := `Error from server (AlreadyExists): error when creating "STDIN": widgets.sub.example.com "gizmo" already exists` + "\n"; r.err == nil || r.stderr != want {
			t.Errorf("create --dry-run=server of an existing Widget: want it to fail with %q:\n%s", want, r)
		}
		mustEqual(t, "gizmo after a dry-run create of its name", get(t, "gizmo", snapshot), before)

		// A dry-run delete of a Widget with a finalizer does not mark it.
		k.runStdin(t, subWidgetYAML("kept", []string{"finalizers:", "- example.com/hold"}, "color: red"), "create", "-f", "-")
		before = get(t, "kept", snapshot)
		out = k.run(t, "delete", subWidget, "kept", "--dry-run=server", "--wait=false")
		mustEqual(t, "delete --dry-run=server of kept", out, subWidget+` "kept" deleted from default namespace (server dry run)`+"\n")
		mustEqual(t, "kept after a dry-run delete", get(t, "kept", snapshot), before)
		k.run(t, "patch", subWidget, "kept", "--type=json", "-p", `[{"op":"remove","path":"/metadata/finalizers"}]`)

		// A real create still works, and a dry-run apply does not change it.
		mustEqual(t, "create dry for real", k.runStdin(t, dry, "apply", "-f", "-"), subWidget+"/dry created\n")
		before = get(t, "dry", snapshot)
		out = k.runStdin(t, strings.Replace(dry, "color: red", "color: black", 1), "apply", "-f", "-", "--dry-run=server")
		mustEqual(t, "apply --dry-run=server of a change", out, subWidget+"/dry configured (server dry run)\n")
		mustEqual(t, "dry after a dry-run apply", get(t, "dry", snapshot), before)
	})
}
