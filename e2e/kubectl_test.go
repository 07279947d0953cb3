package e2e

import (
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// The CronTab CRD and a CronTab: the README's examples, which the
// integration tests use too.
const (
	crdFile     = "../examples/crontab-crd.yaml"
	cronTabFile = "../examples/my-crontab.yaml"
	crdName     = "crontabs.stable.example.com"
	cronTabName = "my-new-cron-object"
)

// secondCronTab is another CronTab, labelled tier=backend, for `-f -`.
const secondCronTab = `apiVersion: stable.example.com/v1
kind: CronTab
metadata:
  name: second-cron
  labels:
    tier: backend
spec:
  cronSpec: "0 * * * *"
  image: second-image
`

// installCRD applies the CronTab CRD and waits until it is Established.
func installCRD(t *testing.T, k *kubectl) {
	t.Helper()
	out := k.run(t, "apply", "-f", crdFile)
	mustContain(t, out, "customresourcedefinition.apiextensions.k8s.io/"+crdName+" created")
	out = k.run(t, "wait", "--for=condition=Established", "crd/"+crdName, "--timeout=60s")
	mustContain(t, out, "customresourcedefinition.apiextensions.k8s.io/"+crdName+" condition met")
}

// TestKubectlCronTabs is the CRD walkthrough from the Kubernetes
// documentation, with kubectl: define CronTab, use it with every verb, and
// delete the definition again.
func TestKubectlCronTabs(t *testing.T) {
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
		installCRD(t, k)
	})

	t.Run("get crd", func(t *testing.T) {
		// Kubernetes 1.37 prints the CRD's own columns, not just NAME AGE.
		out := k.run(t, "get", "crd")
		if header := tableHeader(t, out); header != "NAME SCOPE VERSIONS CREATED AT" {
			t.Errorf("get crd: header %q, want NAME SCOPE VERSIONS CREATED AT; output:\n%s", header, out)
		}
		if row := tableRow(t, out, crdName); len(row) != 4 || row[1] != "Namespaced" || row[2] != "v1(storage)" {
			t.Errorf("get crd: row %q, want %s Namespaced v1(storage) <creation time>; output:\n%s", row, crdName, out)
		}
		out = k.run(t, "get", "crd", crdName, "-o", "jsonpath={.status.acceptedNames.kind} {.status.acceptedNames.shortNames}")
		mustEqual(t, "accepted names", out, `CronTab ["ct"]`)
	})

	t.Run("api-resources lists crontabs", func(t *testing.T) {
		out := k.run(t, "api-resources")
		row := tableRow(t, out, "crontabs")
		want := []string{"crontabs", "ct", "stable.example.com/v1", "true", "CronTab"}
		if !slices.Equal(row, want) {
			t.Errorf("api-resources row = %q, want %q; output:\n%s", row, want, out)
		}
		out = k.run(t, "api-versions")
		if !slices.Contains(lines(out), "stable.example.com/v1") {
			t.Errorf("api-versions does not list stable.example.com/v1:\n%s", out)
		}
	})

	must("create namespace", func(t *testing.T) {
		mustContain(t, k.run(t, "create", "namespace", "e2e"), "namespace/e2e created")
	})

	must("apply CronTab", func(t *testing.T) {
		out := k.run(t, "apply", "-f", cronTabFile)
		mustContain(t, out, "crontab.stable.example.com/"+cronTabName+" created")
		out = k.run(t, "apply", "-f", cronTabFile, "-n", "e2e")
		mustContain(t, out, "crontab.stable.example.com/"+cronTabName+" created")
		// Applying the same manifest again changes nothing.
		out = k.run(t, "apply", "-f", cronTabFile)
		mustContain(t, out, "crontab.stable.example.com/"+cronTabName+" unchanged")
	})

	t.Run("get by name", func(t *testing.T) {
		for _, args := range [][]string{
			{"get", "crontab", cronTabName},
			{"get", "crontabs"},
			{"get", "crontabs.stable.example.com", cronTabName},
			{"get", "crontabs.v1.stable.example.com/" + cronTabName},
		} {
			out := k.run(t, args...)
			if header := tableHeader(t, out); header != "NAME AGE" {
				t.Errorf("kubectl %s: header %q, want NAME AGE; output:\n%s", shellQuote(args), header, out)
			}
			tableRow(t, out, cronTabName)
		}
	})

	t.Run("get by short name", func(t *testing.T) {
		tableRow(t, k.run(t, "get", "ct"), cronTabName)
		tableRow(t, k.run(t, "get", "ct", cronTabName), cronTabName)
		mustEqual(t, "get ct -o name", k.run(t, "get", "ct", cronTabName, "-o", "name"),
			"crontab.stable.example.com/"+cronTabName+"\n")
	})

	t.Run("get in all namespaces", func(t *testing.T) {
		out := k.run(t, "get", "ct", "-A")
		if header := tableHeader(t, out); header != "NAMESPACE NAME AGE" {
			t.Errorf("get ct -A: header %q, want NAMESPACE NAME AGE", header)
		}
		var got []string
		for _, l := range lines(out)[1:] {
			f := strings.Fields(l)
			got = append(got, f[0]+"/"+f[1])
		}
		want := []string{"default/" + cronTabName, "e2e/" + cronTabName}
		if !slices.Equal(got, want) {
			t.Errorf("get ct -A lists %q, want %q; output:\n%s", got, want, out)
		}
	})

	t.Run("get -o yaml has the server's fields", func(t *testing.T) {
		out := k.run(t, "get", "crontab", cronTabName, "-o", "yaml")
		obj := parseYAML(t, out)
		check := func(what string, got, want any) {
			t.Helper()
			if got != want {
				t.Errorf("%s = %v, want %v; object:\n%s", what, got, want, out)
			}
		}
		check("apiVersion", obj.GetAPIVersion(), "stable.example.com/v1")
		check("kind", obj.GetKind(), "CronTab")
		check("metadata.name", obj.GetName(), cronTabName)
		check("metadata.namespace", obj.GetNamespace(), "default")
		check("metadata.generation", obj.GetGeneration(), int64(1))
		check("spec.cronSpec", nestedString(obj, "spec", "cronSpec"), "* * * * */5")
		check("spec.image", nestedString(obj, "spec", "image"), "my-awesome-cron-image")
		if obj.GetUID() == "" {
			t.Errorf("metadata.uid is missing:\n%s", out)
		}
		if obj.GetResourceVersion() == "" {
			t.Errorf("metadata.resourceVersion is missing:\n%s", out)
		}
		ts := nestedString(obj, "metadata", "creationTimestamp")
		if _, err := time.Parse(time.RFC3339, ts); err != nil {
			t.Errorf("metadata.creationTimestamp %q is not an RFC 3339 time: %v", ts, err)
		}
		// The copy in namespace e2e is another object.
		other := parseYAML(t, k.run(t, "get", "crontab", cronTabName, "-n", "e2e", "-o", "yaml"))
		check("namespace of the copy in e2e", other.GetNamespace(), "e2e")
		if other.GetUID() == obj.GetUID() {
			t.Errorf("the CronTabs in default and e2e have the same uid %s", obj.GetUID())
		}
	})

	t.Run("watch shows a later change", func(t *testing.T) {
		w := k.background(t, "get", "crontabs", "--watch", "--output-watch-events")
		added := regexp.MustCompile(`^ADDED\s+` + cronTabName + `\s`)
		modified := regexp.MustCompile(`^MODIFIED\s+` + cronTabName + `\s`)
		w.waitForLine(t, added)
		mustContain(t, k.run(t, "label", "crontab", cronTabName, "tier=frontend"),
			"crontab.stable.example.com/"+cronTabName+" labeled")
		out := w.waitForLine(t, modified)
		a := slices.IndexFunc(out, added.MatchString)
		m := slices.IndexFunc(out, modified.MatchString)
		if a > m {
			t.Errorf("MODIFIED came before ADDED:\n%s", w)
		}
		if header := tableHeader(t, strings.Join(out, "\n")); header != "EVENT NAME AGE" {
			t.Errorf("watch header %q, want EVENT NAME AGE:\n%s", header, w)
		}
		w.stop()
	})

	t.Run("label selector", func(t *testing.T) {
		k.run(t, "label", "--overwrite", "crontab", cronTabName, "tier=frontend")
		mustContain(t, k.runStdin(t, secondCronTab, "apply", "-f", "-"), "crontab.stable.example.com/second-cron created")
		for selector, want := range map[string]string{
			"tier=frontend":              "crontab.stable.example.com/my-new-cron-object\n",
			"tier=backend":               "crontab.stable.example.com/second-cron\n",
			"tier!=backend":              "crontab.stable.example.com/my-new-cron-object\n",
			"tier in (frontend,backend)": "crontab.stable.example.com/my-new-cron-object\ncrontab.stable.example.com/second-cron\n",
		} {
			mustEqual(t, "get ct -l "+selector, k.run(t, "get", "ct", "-l", selector, "-o", "name"), want)
		}
		r := k.exec("", "get", "ct", "-l", "tier=nothing")
		if r.err != nil || r.stdout != "" || !strings.Contains(r.stderr, "No resources found in default namespace.") {
			t.Errorf("a selector that matches nothing should print only \"No resources found in default namespace.\":\n%s", r)
		}
	})

	t.Run("patch --type=merge", func(t *testing.T) {
		out := k.run(t, "patch", "crontab", cronTabName, "--type=merge", "-p", `{"spec":{"replicas":3}}`)
		mustContain(t, out, "crontab.stable.example.com/"+cronTabName+" patched")
		// A change of spec bumps the generation; labels (metadata) did not.
		mustEqual(t, "replicas and generation after the merge patch",
			k.run(t, "get", "ct", cronTabName, "-o", "jsonpath={.spec.replicas} {.metadata.generation}"), "3 2")
	})

	t.Run("patch --type=json", func(t *testing.T) {
		out := k.run(t, "patch", "crontab", cronTabName, "--type=json",
			"-p", `[{"op":"replace","path":"/spec/image","value":"patched-image"},{"op":"remove","path":"/spec/replicas"}]`)
		mustContain(t, out, "crontab.stable.example.com/"+cronTabName+" patched")
		obj := parseYAML(t, k.run(t, "get", "ct", cronTabName, "-o", "yaml"))
		if got := nestedString(obj, "spec", "image"); got != "patched-image" {
			t.Errorf("spec.image = %q after the JSON patch, want patched-image", got)
		}
		if _, found, _ := unstructured.NestedFieldNoCopy(obj.Object, "spec", "replicas"); found {
			t.Errorf("spec.replicas is still there after the JSON patch removed it")
		}
		if got := obj.GetGeneration(); got != 3 {
			t.Errorf("metadata.generation = %d after the JSON patch, want 3", got)
		}
	})

	t.Run("get versionreports", func(t *testing.T) {
		// crdserver's own API: what removing each version of a CRD would
		// break, with its columns.
		out := k.run(t, "get", "versionreports", "-l", "crdserver.io/crd="+crdName)
		if header := tableHeader(t, out); header != "NAME SERVED STORAGE DEPRECATED OBJECTS CLIENTS REFERENCES REMOVABLE BLOCKERS" {
			t.Errorf("get versionreports: header %q; output:\n%s", header, out)
		}
		row := tableRow(t, out, "v1."+crdName)
		if len(row) != 9 || !slices.Equal(row[1:4], []string{"true", "true", "false"}) || row[4] == "0" || row[5] == "0" || row[7] != "false" ||
			!strings.HasPrefix(row[8], "StorageVersion,") {
			t.Errorf("get versionreports: row %q, want v1 served, storage, objects stored, clients, not removable (StorageVersion,...); output:\n%s", row, out)
		}
	})

	t.Run("delete", func(t *testing.T) {
		out := k.run(t, "delete", "crontab", "second-cron")
		mustContain(t, out, `crontab.stable.example.com "second-cron" deleted`)
		stderr := k.fail(t, "get", "crontab", "second-cron")
		mustContain(t, stderr, `Error from server (NotFound): crontabs.stable.example.com "second-cron" not found`)
		stderr = k.fail(t, "delete", "crontab", "second-cron")
		mustContain(t, stderr, `Error from server (NotFound): crontabs.stable.example.com "second-cron" not found`)
	})

	must("deleting the CRD removes its objects and its resource", func(t *testing.T) {
		out := k.run(t, "delete", "crd", crdName)
		mustContain(t, out, `customresourcedefinition.apiextensions.k8s.io "`+crdName+`" deleted`)
		mustContain(t, k.fail(t, "get", "crd", crdName),
			`Error from server (NotFound): customresourcedefinitions.apiextensions.k8s.io "`+crdName+`" not found`)
		stderr := k.fail(t, "get", "crontabs")
		if !strings.Contains(stderr, `the server doesn't have a resource type "crontabs"`) && !strings.Contains(stderr, "NotFound") {
			t.Errorf("get crontabs after the CRD is gone: want NotFound or \"doesn't have a resource type\", got:\n%s", stderr)
		}
		out = k.run(t, "api-resources")
		if strings.Contains(out, "stable.example.com") {
			t.Errorf("api-resources still lists stable.example.com after the CRD was deleted:\n%s", out)
		}
	})

	t.Run("a recreated CRD starts empty", func(t *testing.T) {
		installCRD(t, k)
		for _, ns := range []string{"default", "e2e"} {
			r := k.exec("", "get", "crontabs", "-n", ns)
			if r.err != nil || r.stdout != "" || !strings.Contains(r.stderr, "No resources found in "+ns+" namespace.") {
				t.Errorf("the recreated CRD should have no CronTabs in %s:\n%s", ns, r)
			}
		}
		mustContain(t, k.fail(t, "get", "crontab", cronTabName),
			`Error from server (NotFound): crontabs.stable.example.com "`+cronTabName+`" not found`)
	})
}

// TestKubectlDeleteNamespace checks that deleting a namespace deletes the
// custom resources in it, and only those.
func TestKubectlDeleteNamespace(t *testing.T) {
	srv := startServer(t)
	k := newKubectl(t, srv)
	installCRD(t, k)

	k.run(t, "create", "namespace", "team-a")
	k.run(t, "apply", "-f", cronTabFile, "-n", "team-a")
	k.runStdin(t, secondCronTab, "apply", "-n", "team-a", "-f", "-")
	k.run(t, "apply", "-f", cronTabFile) // in default, which must survive

	listAll := func(t *testing.T) string {
		t.Helper()
		return k.run(t, "get", "crontabs", "-A", "-o", `jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name}{"\n"}{end}`)
	}
	mustEqual(t, "CronTabs before the namespace is deleted", listAll(t),
		"default/my-new-cron-object\nteam-a/my-new-cron-object\nteam-a/second-cron\n")

	// kubectl delete waits until the namespace is gone, that is, until the
	// namespace controller has deleted everything in it.
	mustContain(t, k.run(t, "delete", "namespace", "team-a"), `namespace "team-a" deleted`)
	mustContain(t, k.fail(t, "get", "namespace", "team-a"), `Error from server (NotFound): namespaces "team-a" not found`)
	mustEqual(t, "CronTabs after the namespace is deleted", listAll(t), "default/my-new-cron-object\n")

	// Objects cannot be created in a namespace that does not exist.
	stderr := k.fail(t, "apply", "-f", cronTabFile, "-n", "team-a")
	mustContain(t, stderr, `namespaces "team-a" not found`)

	// A namespace of the same name starts empty.
	k.run(t, "create", "namespace", "team-a")
	r := k.exec("", "get", "crontabs", "-n", "team-a")
	if r.err != nil || r.stdout != "" || !strings.Contains(r.stderr, "No resources found in team-a namespace.") {
		t.Errorf("the recreated namespace should have no CronTabs:\n%s", r)
	}
}

func mustContain(t *testing.T, out, want string) {
	t.Helper()
	if !strings.Contains(out, want) {
		t.Fatalf("output does not contain %q:\n%s", want, out)
	}
}

func mustEqual(t *testing.T, what, got, want string) {
	t.Helper()
	if got != want {
		t.Fatalf("%s:\n got: %q\nwant: %q", what, got, want)
	}
}

// parseYAML decodes kubectl's -o yaml output of one object.
func parseYAML(t *testing.T, out string) *unstructured.Unstructured {
	t.Helper()
	j, err := yaml.YAMLToJSON([]byte(out))
	if err != nil {
		t.Fatalf("kubectl's output is not YAML: %v\n%s", err, out)
	}
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(j); err != nil {
		t.Fatalf("kubectl's output is not an object: %v\n%s", err, out)
	}
	return obj
}

func nestedString(obj *unstructured.Unstructured, fields ...string) string {
	s, _, _ := unstructured.NestedString(obj.Object, fields...)
	return s
}

// TestKubectlCascade checks kubectl delete --cascade against the garbage
// collector: background (the default), foreground and orphan.
func TestKubectlCascade(t *testing.T) {
	srv := startServer(t)
	k := newKubectl(t, srv)
	installCRD(t, k)

	// makePair creates an owner CronTab and a dependent that refers to it.
	makePair := func(t *testing.T, owner, child string) {
		t.Helper()
		k.runStdin(t, "apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata:\n  name: "+owner+"\nspec:\n  cronSpec: \"* * * * *\"\n", "apply", "-f", "-")
		uid := k.run(t, "get", "crontab", owner, "-o", "jsonpath={.metadata.uid}")
		k.runStdin(t, "apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata:\n  name: "+child+
			"\n  ownerReferences:\n  - apiVersion: stable.example.com/v1\n    kind: CronTab\n    name: "+owner+
			"\n    uid: "+uid+"\n    blockOwnerDeletion: true\nspec:\n  cronSpec: \"* * * * *\"\n", "apply", "-f", "-")
	}
	waitGone := func(t *testing.T, name string) {
		t.Helper()
		k.run(t, "wait", "--for=delete", "crontab/"+name, "--timeout=30s")
		mustContain(t, k.fail(t, "get", "crontab", name), `Error from server (NotFound): crontabs.stable.example.com "`+name+`" not found`)
	}

	t.Run("background", func(t *testing.T) {
		makePair(t, "bg-owner", "bg-child")
		mustContain(t, k.run(t, "delete", "crontab", "bg-owner"), `crontab.stable.example.com "bg-owner" deleted`)
		waitGone(t, "bg-child")
	})
	t.Run("foreground", func(t *testing.T) {
		makePair(t, "fg-owner", "fg-child")
		// kubectl waits for the owner, which goes after its dependent.
		mustContain(t, k.run(t, "delete", "crontab", "fg-owner", "--cascade=foreground"), `crontab.stable.example.com "fg-owner" deleted`)
		mustContain(t, k.fail(t, "get", "crontab", "fg-child"), `Error from server (NotFound): crontabs.stable.example.com "fg-child" not found`)
	})
	t.Run("orphan", func(t *testing.T) {
		makePair(t, "or-owner", "or-child")
		mustContain(t, k.run(t, "delete", "crontab", "or-owner", "--cascade=orphan"), `crontab.stable.example.com "or-owner" deleted`)
		waitGone(t, "or-owner")
		mustEqual(t, "orphan's owner references", k.run(t, "get", "crontab", "or-child", "-o", "jsonpath={.metadata.ownerReferences}"), "")
	})
}
