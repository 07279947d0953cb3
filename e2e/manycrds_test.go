package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/crdserver/crdserver/internal/fixtures"
)

// unpackCorpus writes the CRDs of the repository's sample of a real
// Crossplane provider (internal/fixtures) to a folder, one YAML file each.
func unpackCorpus(t *testing.T) string {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "internal", "fixtures", "corpus-sample.tar.zst"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	files, err := fixtures.Files(f)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, file := range files {
		if err := os.WriteFile(filepath.Join(dir, file.Name), file.Data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// metric reads one value of /metrics.
func metric(t *testing.T, k *kubectl, name string) float64 {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`).FindStringSubmatch(k.run(t, "get", "--raw", "/metrics"))
	if m == nil {
		t.Fatalf("no metric %s", name)
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestManyCRDs follows the README's "Thousands of CRDs" with kubectl: a
// provider's CRDs (the repository's sample of one) installed with
// server-side apply, Established; api-resources, explain and a create of
// one of its kinds; every CRD's first request (a server-side dry run) with
// a memory budget so small that what was built for one CRD is released for
// the next, and built again; the OpenAPI documents; a CRD changed, and
// explain showing the change.
func TestManyCRDs(t *testing.T) {
	t.Parallel()
	srv := startServer(t, "--crd-memory-budget=1Mi")
	k := newKubectl(t, srv)
	dir := unpackCorpus(t)

	k.run(t, "apply", "--server-side", "-f", dir)
	k.run(t, "wait", "--for=condition=Established", "--timeout=120s", "crd", "--all")
	if n := len(lines(k.run(t, "get", "crd", "-o", "name"))); n != 15 {
		t.Fatalf("%d CRDs, want the sample's 15", n)
	}

	// kubectl's discovery, explain (from /openapi/v3) and a create.
	out := k.run(t, "api-resources", "--api-group", "eventhub.azure.upbound.io")
	if !strings.Contains(out, "consumergroups") || !strings.Contains(out, "ConsumerGroup") {
		t.Errorf("api-resources:\n%s", out)
	}
	out = k.run(t, "explain", "consumergroups.spec.forProvider", "--api-version", "eventhub.azure.upbound.io/v1beta1")
	if !strings.Contains(out, "KIND:       ConsumerGroup") || !strings.Contains(out, "userMetadata") {
		t.Errorf("explain:\n%s", out)
	}
	group := `{"apiVersion":"eventhub.azure.upbound.io/v1beta1","kind":"ConsumerGroup","metadata":{"name":"observed"},` +
		`"spec":{"forProvider":{"userMetadata":"made by e2e"},"managementPolicies":["Observe"]}}`
	k.runStdin(t, group, "create", "-f", "-")
	if out := k.run(t, "get", "consumergroups.eventhub.azure.upbound.io", "observed", "-o", "jsonpath={.spec.forProvider.userMetadata}"); out != "made by e2e" {
		t.Errorf("the created ConsumerGroup: %q", out)
	}
	// A request the schema refuses is refused as Kubernetes refuses it.
	bad := strings.Replace(group, `"managementPolicies":["Observe"]`, `"managementPolicies":["Sometimes"]`, 1)
	if r := k.exec(bad, "create", "--dry-run=server", "-f", "-"); r.err == nil || !strings.Contains(r.stderr, `spec.managementPolicies[0]: Unsupported value: "Sometimes"`) {
		t.Errorf("an invalid ConsumerGroup: %s", r)
	}

	// Every CRD's first request, within a budget of 1 MiB.
	releases := metric(t, k, "crdserver_crd_memory_releases_total")
	crds := lines(k.run(t, "get", "crd", "-o", `jsonpath={range .items[*]}{.spec.group}/{.spec.versions[?(@.storage==true)].name} {.spec.names.kind} {.spec.names.plural} {.spec.scope}{"\n"}{end}`))
	for _, line := range crds {
		f := strings.Fields(line)
		if len(f) != 4 {
			t.Fatalf("a CRD line %q", line)
		}
		ns := ""
		if f[3] == "Namespaced" {
			ns = `"namespace":"default",`
		}
		obj := `{"apiVersion":"` + f[0] + `","kind":"` + f[1] + `","metadata":{` + ns + `"name":"first"},"spec":{"forProvider":{},"managementPolicies":["Observe"]}}`
		r := k.exec(obj, "create", "--dry-run=server", "-f", "-")
		// Some kinds ask more of a valid object, or have no forProvider:
		// their answer is the schema's, which is what is built.
		if r.err != nil && !strings.Contains(r.stderr, "is invalid") && !strings.Contains(r.stderr, "strict decoding error: unknown field") {
			t.Errorf("%s: %s", f[2], r)
		}
	}
	if got := metric(t, k, "crdserver_crd_memory_releases_total"); got <= releases {
		t.Errorf("the budget released nothing (%v releases)", got)
	}
	if used, limit := metric(t, k, "crdserver_crd_memory_used_bytes"), metric(t, k, "crdserver_crd_memory_budget_bytes"); limit != 1<<20 || used > 8<<20 {
		t.Errorf("the budget holds %v bytes of %v", used, limit)
	}
	// The ConsumerGroup reads back the same after all that.
	if out := k.run(t, "get", "consumergroups.eventhub.azure.upbound.io", "observed", "-o", "jsonpath={.spec.forProvider.userMetadata}"); out != "made by e2e" {
		t.Errorf("the ConsumerGroup read again: %q", out)
	}

	// The OpenAPI documents: every group/version listed, one fetched, v2.
	root := k.run(t, "get", "--raw", "/openapi/v3")
	if !strings.Contains(root, `"apis/eventhub.azure.upbound.io/v1beta1"`) || !strings.Contains(root, `"apis/web.azure.upbound.io/v1beta2"`) {
		t.Errorf("/openapi/v3 lists:\n%.500s", root)
	}
	if doc := k.run(t, "get", "--raw", "/openapi/v3/apis/web.azure.upbound.io/v1beta2"); !strings.Contains(doc, "io.upbound.azure.web.v1beta2.LinuxFunctionApp") {
		t.Errorf("the web.azure.upbound.io/v1beta2 document: %.300s", doc)
	}
	if v2 := k.run(t, "get", "--raw", "/openapi/v2"); !strings.Contains(v2, "io.upbound.azure.eventhub.v1beta1.ConsumerGroup") || !strings.Contains(v2, "io.k8s.api.core.v1.ConfigMap") {
		t.Errorf("/openapi/v2 lacks a CRD's or a built-in definition (%d bytes)", len(v2))
	}

	// A changed CRD is served changed: explain reads the new description.
	k.run(t, "patch", "crd", "consumergroups.eventhub.azure.upbound.io", "--type=json",
		"-p", `[{"op":"replace","path":"/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/forProvider/properties/userMetadata/description","value":"Changed by e2e."}]`)
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := k.exec("", "explain", "consumergroups.spec.forProvider.userMetadata", "--api-version", "eventhub.azure.upbound.io/v1beta1")
		if r.err == nil && strings.Contains(r.stdout, "Changed by e2e.") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("explain does not show the changed description: %s", r)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
