package e2e

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
)

// The chart of the Helm test: a Gizmo CRD in crds/, and templates for a
// Gizmo, a ConfigMap and a Secret built from the values, with NOTES.txt.
const (
	helmChart     = "testdata/helm/gizmos"
	helmNamespace = "helm-e2e"
	gizmoCRDName  = "gizmos.helm.e2e.example.com"
	// helmWait is helm's own --timeout, for its waits (CRDs Established,
	// --wait, --atomic); commandTimeout bounds the whole command.
	helmWait = "60s"
)

var gizmosGVR = schema.GroupVersionResource{Group: "helm.e2e.example.com", Version: "v1", Resource: "gizmos"}

// badConfigKeyMessage is Kubernetes' message for the ConfigMap key that the
// failing install sets (extraConfigKey), as kube-apiserver v1.37 writes it.
const badConfigKeyMessage = `ConfigMap "%s-config" is invalid: data[bad key!]: Invalid value: "bad key!": ` +
	`a valid config key must consist of alphanumeric characters, '-', '_' or '.' ` +
	`(e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')`

// TestHelm plays a release's life with the real Helm v3 CLI (the version
// go.mod pins, built by TestMain) and its default Secrets storage driver:
// install (with a CRD from crds/), list, upgrade, history, rollback,
// uninstall, install --wait, and installs that Kubernetes' validation makes
// fail, with and without --atomic. Every step is checked against the server
// with client-go. The outputs and objects asserted are those Helm gives and
// leaves with a kube-apiserver v1.37.
func TestHelm(t *testing.T) {
	srv := startServer(t)
	h := newHelm(t, srv)
	c := newHelmCluster(t, srv)

	// The steps share the server's state: a step that sets up state for
	// the rest ends the scenario when it fails.
	must := func(name string, f func(t *testing.T)) {
		t.Helper()
		if !t.Run(name, f) {
			t.FailNow()
		}
	}

	must("install", func(t *testing.T) {
		out := h.run(t, "install", "demo", helmChart, "-n", helmNamespace, "--create-namespace", "--timeout", helmWait)
		for _, want := range []string{
			"NAME: demo\n",
			"NAMESPACE: " + helmNamespace + "\n",
			"STATUS: deployed\n",
			"REVISION: 1\n",
			"NOTES:\nGizmo demo-gizmo in namespace " + helmNamespace + ` says "hello".` + "\n",
			// The chart's NOTES.txt asks .Capabilities, which Helm reads by
			// discovery once it has installed the CRD.
			"The server serves helm.e2e.example.com/v1 Gizmo: true.\n",
		} {
			mustContain(t, out, want)
		}
		// Helm created the namespace (--create-namespace) and the CRD, and
		// waited for the CRD to be Established before it went on.
		if _, err := c.cs.CoreV1().Namespaces().Get(context.Background(), helmNamespace, metav1.GetOptions{}); err != nil {
			t.Fatalf("namespace %s: %v", helmNamespace, err)
		}
		c.checkCRD(t)
		c.checkObjects(t, "demo", "hello", 1)
		c.checkReleases(t, "demo", map[int]string{1: "deployed"})
	})

	must("list", func(t *testing.T) {
		h.checkList(t, []helmListed{{Name: "demo", Namespace: helmNamespace, Revision: "1", Status: "deployed", Chart: "gizmos-0.1.0", AppVersion: "1.0.0"}})
		// The table, as users read it.
		out := h.run(t, "list", "-n", helmNamespace)
		if row := tableRow(t, out, "demo"); !slices.Contains(row, "deployed") || !slices.Contains(row, "gizmos-0.1.0") {
			t.Errorf("helm list: row %q, want the release deployed with chart gizmos-0.1.0; output:\n%s", row, out)
		}
		out = h.run(t, "status", "demo", "-n", helmNamespace)
		mustContain(t, out, "STATUS: deployed\n")
		mustContain(t, out, "REVISION: 1\n")
	})

	must("upgrade", func(t *testing.T) {
		out := h.run(t, "upgrade", "demo", helmChart, "-n", helmNamespace, "--set", "greeting=bonjour", "--set", "size=2", "--timeout", helmWait)
		mustContain(t, out, `Release "demo" has been upgraded. Happy Helming!`)
		mustContain(t, out, "STATUS: deployed\n")
		mustContain(t, out, "REVISION: 2\n")
		mustContain(t, out, `says "bonjour".`)
		c.checkObjects(t, "demo", "bonjour", 2)
		c.checkReleases(t, "demo", map[int]string{1: "superseded", 2: "deployed"})
		values := h.run(t, "get", "values", "demo", "-n", helmNamespace, "-o", "json")
		mustEqual(t, "helm get values", strings.TrimSpace(values), `{"greeting":"bonjour","size":2}`)
	})

	must("history", func(t *testing.T) {
		h.checkHistory(t, "demo", []helmRevision{
			{Revision: 1, Status: "superseded", Chart: "gizmos-0.1.0", AppVersion: "1.0.0", Description: "Install complete"},
			{Revision: 2, Status: "deployed", Chart: "gizmos-0.1.0", AppVersion: "1.0.0", Description: "Upgrade complete"},
		})
	})

	must("rollback", func(t *testing.T) {
		out := h.run(t, "rollback", "demo", "1", "-n", helmNamespace, "--timeout", helmWait)
		mustContain(t, out, "Rollback was a success! Happy Helming!")
		c.checkObjects(t, "demo", "hello", 1)
		c.checkReleases(t, "demo", map[int]string{1: "superseded", 2: "superseded", 3: "deployed"})
		h.checkHistory(t, "demo", []helmRevision{
			{Revision: 1, Status: "superseded", Chart: "gizmos-0.1.0", AppVersion: "1.0.0", Description: "Install complete"},
			{Revision: 2, Status: "superseded", Chart: "gizmos-0.1.0", AppVersion: "1.0.0", Description: "Upgrade complete"},
			{Revision: 3, Status: "deployed", Chart: "gizmos-0.1.0", AppVersion: "1.0.0", Description: "Rollback to 1"},
		})
		h.checkList(t, []helmListed{{Name: "demo", Namespace: helmNamespace, Revision: "3", Status: "deployed", Chart: "gizmos-0.1.0", AppVersion: "1.0.0"}})
	})

	must("uninstall", func(t *testing.T) {
		out := h.run(t, "uninstall", "demo", "-n", helmNamespace)
		mustEqual(t, "helm uninstall", out, "release \"demo\" uninstalled\n")
		// Helm deletes with propagationPolicy=Background and does not wait;
		// objects without finalizers are gone when the DELETE answers.
		c.checkGone(t, "demo", "config", "secret", "gizmo")
		c.checkReleases(t, "demo", map[int]string{})
		h.checkList(t, []helmListed{})
		// Helm never deletes the CRDs of crds/, nor the namespace it made.
		c.checkCRD(t)
		if _, err := c.cs.CoreV1().Namespaces().Get(context.Background(), helmNamespace, metav1.GetOptions{}); err != nil {
			t.Errorf("namespace %s after uninstall: %v", helmNamespace, err)
		}
	})

	must("install --wait", func(t *testing.T) {
		// The CRD is there already (Helm skips it). Helm's --wait polls
		// the readiness of Deployments, Pods, Services and the like every
		// 2 seconds; ConfigMaps, Secrets and custom resources are ready as
		// soon as they exist, so the first poll ends the wait.
		start := time.Now()
		out := h.run(t, "install", "waited", helmChart, "-n", helmNamespace, "--wait", "--wait-for-jobs", "--timeout", helmWait)
		t.Logf("helm install --wait took %v", time.Since(start).Round(time.Millisecond))
		mustContain(t, out, "STATUS: deployed\n")
		mustContain(t, out, "REVISION: 1\n")
		c.checkObjects(t, "waited", "hello", 1)
		c.checkReleases(t, "waited", map[int]string{1: "deployed"})
	})

	t.Run("failed install", func(t *testing.T) {
		r := h.fail(t, "install", "bad", helmChart, "-n", helmNamespace, "--set", "extraConfigKey=bad key!", "--timeout", helmWait)
		mustContain(t, r.stderr, "Error: INSTALLATION FAILED: 1 error occurred:\n\t* "+fmt.Sprintf(badConfigKeyMessage, "bad")+"\n")
		// Helm records the release as failed, never as deployed. It
		// created each of the chart's objects on its own: the Secret and
		// the Gizmo are there, the ConfigMap is not.
		c.checkReleases(t, "bad", map[int]string{1: "failed"})
		h.checkList(t, []helmListed{{Name: "bad", Namespace: helmNamespace, Revision: "1", Status: "failed", Chart: "gizmos-0.1.0", AppVersion: "1.0.0"}}, "--failed")
		c.checkGone(t, "bad", "config")
		if _, err := c.cs.CoreV1().Secrets(helmNamespace).Get(context.Background(), "bad-secret", metav1.GetOptions{}); err != nil {
			t.Errorf("Secret bad-secret after the failed install: %v", err)
		}
		if _, err := c.dyn.Resource(gizmosGVR).Namespace(helmNamespace).Get(context.Background(), "bad-gizmo", metav1.GetOptions{}); err != nil {
			t.Errorf("Gizmo bad-gizmo after the failed install: %v", err)
		}
		// A failed release uninstalls like any other.
		mustEqual(t, "helm uninstall", h.run(t, "uninstall", "bad", "-n", helmNamespace), "release \"bad\" uninstalled\n")
		c.checkGone(t, "bad", "config", "secret", "gizmo")
		c.checkReleases(t, "bad", map[int]string{})
	})

	t.Run("failed install --atomic", func(t *testing.T) {
		r := h.fail(t, "install", "bad2", helmChart, "-n", helmNamespace, "--set", "extraConfigKey=bad key!", "--atomic", "--timeout", helmWait)
		mustContain(t, r.stderr, "Error: INSTALLATION FAILED: release bad2 failed, and has been uninstalled due to atomic being set: 1 error occurred:\n\t* "+
			fmt.Sprintf(badConfigKeyMessage, "bad2")+"\n")
		// --atomic uninstalls what it installed, release history included.
		c.checkGone(t, "bad2", "config", "secret", "gizmo")
		c.checkReleases(t, "bad2", map[int]string{})
	})

	t.Run("only the waited release is left", func(t *testing.T) {
		h.checkList(t, []helmListed{{Name: "waited", Namespace: helmNamespace, Revision: "1", Status: "deployed", Chart: "gizmos-0.1.0", AppVersion: "1.0.0"}}, "--all")
	})
}

// helm runs the helm CLI built by TestMain against one server, with the
// server's admin kubeconfig and Helm's cache, config and data folders of
// its own: no repositories, no plugins, nothing from the user's home.
type helm struct {
	env []string
}

func newHelm(t *testing.T, srv *server) *helm {
	t.Helper()
	readHelmChart(t)
	home := t.TempDir()
	env := []string{
		"HOME=" + home,
		"KUBECONFIG=" + srv.kubeconfig,
		"KUBECACHEDIR=" + filepath.Join(home, "kube-cache"),
		"HELM_CACHE_HOME=" + filepath.Join(home, "helm-cache"),
		"HELM_CONFIG_HOME=" + filepath.Join(home, "helm-config"),
		"HELM_DATA_HOME=" + filepath.Join(home, "helm-data"),
		// Helm may reach 127.0.0.1 and nothing else: Go never proxies
		// loopback addresses, and sends every other HTTP(S) request to
		// this proxy, where nothing listens.
		"HTTP_PROXY=http://127.0.0.1:9",
		"HTTPS_PROXY=http://127.0.0.1:9",
	}
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case k == "HOME", k == "KUBECONFIG", k == "KUBECACHEDIR", strings.HasPrefix(k, "HELM_"):
		case strings.HasSuffix(strings.ToUpper(k), "_PROXY"):
		default:
			env = append(env, kv)
		}
	}
	return &helm{env: env}
}

// readHelmChart reads the chart's files, so that `go test` reruns TestHelm
// when the chart changes (helm reads it in another process).
func readHelmChart(t *testing.T) {
	t.Helper()
	err := filepath.WalkDir(helmChart, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		_, err = os.ReadFile(path)
		return err
	})
	if err != nil {
		t.Fatalf("read the chart: %v", err)
	}
}

// exec runs one helm command to its end.
func (h *helm) exec(args ...string) result {
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, helmBin, args...)
	cmd.Env = h.env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("killed after %v: %w", commandTimeout, err)
	}
	return result{cmdline: "helm " + shellQuote(args), stdout: stdout.String(), stderr: stderr.String(), err: err}
}

// run runs helm, fails the test unless it exits with status 0 and prints
// nothing on stderr (no warning), and returns stdout.
func (h *helm) run(t *testing.T, args ...string) string {
	t.Helper()
	r := h.exec(args...)
	if r.err != nil {
		t.Fatalf("helm failed:\n%s", r)
	}
	if r.stderr != "" {
		t.Fatalf("helm succeeded with output on stderr:\n%s", r)
	}
	return r.stdout
}

// fail runs helm and fails the test unless helm exits with status 1 (the
// status of every error of Helm's) and prints nothing on stdout.
func (h *helm) fail(t *testing.T, args ...string) result {
	t.Helper()
	r := h.exec(args...)
	var exitErr *exec.ExitError
	if !errors.As(r.err, &exitErr) || exitErr.ExitCode() != 1 {
		t.Fatalf("helm should have failed with exit status 1:\n%s", r)
	}
	if r.stdout != "" {
		t.Errorf("helm failed with output on stdout:\n%s", r)
	}
	return r
}

// helmListed is one release in `helm list -o json`.
type helmListed struct {
	Name       string `json:"name"`
	Namespace  string `json:"namespace"`
	Revision   string `json:"revision"`
	Status     string `json:"status"`
	Chart      string `json:"chart"`
	AppVersion string `json:"app_version"`
}

// checkList checks the releases that `helm list -n helm-e2e` shows with
// the flags given.
func (h *helm) checkList(t *testing.T, want []helmListed, flags ...string) {
	t.Helper()
	out := h.run(t, append([]string{"list", "-n", helmNamespace, "-o", "json"}, flags...)...)
	var got []helmListed
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("helm list -o json: %v\n%s", err, out)
	}
	if !slices.Equal(got, want) {
		t.Errorf("helm list %s:\n got: %+v\nwant: %+v", strings.Join(flags, " "), got, want)
	}
}

// helmRevision is one revision in `helm history -o json`.
type helmRevision struct {
	Revision    int    `json:"revision"`
	Status      string `json:"status"`
	Chart       string `json:"chart"`
	AppVersion  string `json:"app_version"`
	Description string `json:"description"`
}

func (h *helm) checkHistory(t *testing.T, release string, want []helmRevision) {
	t.Helper()
	out := h.run(t, "history", release, "-n", helmNamespace, "-o", "json")
	var got []helmRevision
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("helm history -o json: %v\n%s", err, out)
	}
	if !slices.Equal(got, want) {
		t.Errorf("helm history %s:\n got: %+v\nwant: %+v", release, got, want)
	}
}

// helmCluster reads what Helm did from the server, with client-go.
type helmCluster struct {
	cs  kubernetes.Interface
	dyn dynamic.Interface
	srv *server
}

func newHelmCluster(t *testing.T, srv *server) *helmCluster {
	t.Helper()
	cfg := srv.restConfig(t)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &helmCluster{cs: cs, dyn: dyn, srv: srv}
}

// checkCRD checks that the chart's CRD is there and Established.
func (c *helmCluster) checkCRD(t *testing.T) {
	t.Helper()
	crd, err := newCRDClient(t, c.srv.restConfig(t)).Get(context.Background(), gizmoCRDName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("CRD %s: %v", gizmoCRDName, err)
	}
	established := false
	for _, cond := range crd.Status.Conditions {
		if cond.Type == "Established" && cond.Status == "True" {
			established = true
		}
	}
	if !established {
		t.Errorf("CRD %s is not Established: %+v", gizmoCRDName, crd.Status.Conditions)
	}
	// Helm creates the CRDs of crds/ as they are, without its labels.
	if crd.Labels["app.kubernetes.io/managed-by"] != "" {
		t.Errorf("CRD %s has labels %v, want none of Helm's", gizmoCRDName, crd.Labels)
	}
}

// checkObjects checks the release's Gizmo, ConfigMap and Secret: their
// contents come from the values, and Helm's labels and annotations tie
// them to the release.
func (c *helmCluster) checkObjects(t *testing.T, release, greeting string, size int) {
	t.Helper()
	ctx := context.Background()
	owned := func(kind string, obj metav1.Object) {
		t.Helper()
		if got := obj.GetLabels()["app.kubernetes.io/managed-by"]; got != "Helm" {
			t.Errorf("%s %s: label app.kubernetes.io/managed-by = %q, want Helm", kind, obj.GetName(), got)
		}
		if got := obj.GetAnnotations()["meta.helm.sh/release-name"]; got != release {
			t.Errorf("%s %s: annotation meta.helm.sh/release-name = %q, want %q", kind, obj.GetName(), got, release)
		}
		if got := obj.GetAnnotations()["meta.helm.sh/release-namespace"]; got != helmNamespace {
			t.Errorf("%s %s: annotation meta.helm.sh/release-namespace = %q, want %q", kind, obj.GetName(), got, helmNamespace)
		}
	}

	cm, err := c.cs.CoreV1().ConfigMaps(helmNamespace).Get(ctx, release+"-config", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("ConfigMap %s-config: %v", release, err)
	}
	owned("ConfigMap", cm)
	if want := map[string]string{"greeting": greeting, "size": strconv.Itoa(size)}; !maps.Equal(cm.Data, want) {
		t.Errorf("ConfigMap %s data = %v, want %v", cm.Name, cm.Data, want)
	}

	secret, err := c.cs.CoreV1().Secrets(helmNamespace).Get(ctx, release+"-secret", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("Secret %s-secret: %v", release, err)
	}
	owned("Secret", secret)
	if secret.Type != corev1.SecretTypeOpaque {
		t.Errorf("Secret %s type = %q, want Opaque", secret.Name, secret.Type)
	}
	// data.password from the template, data.greeting from its stringData
	// (which the server merges into data and does not keep).
	got := map[string]string{}
	for k, v := range secret.Data {
		got[k] = string(v)
	}
	if want := map[string]string{"password": "s3cret", "greeting": greeting}; !maps.Equal(got, want) {
		t.Errorf("Secret %s data = %v, want %v", secret.Name, got, want)
	}
	if len(secret.StringData) != 0 {
		t.Errorf("Secret %s keeps stringData %v", secret.Name, secret.StringData)
	}

	gizmo, err := c.dyn.Resource(gizmosGVR).Namespace(helmNamespace).Get(ctx, release+"-gizmo", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("Gizmo %s-gizmo: %v", release, err)
	}
	owned("Gizmo", gizmo)
	message, _, _ := unstructured.NestedString(gizmo.Object, "spec", "message")
	gotSize, _, _ := unstructured.NestedInt64(gizmo.Object, "spec", "size")
	if message != greeting || gotSize != int64(size) {
		t.Errorf("Gizmo %s spec = %v, want message %q and size %d", gizmo.GetName(), gizmo.Object["spec"], greeting, size)
	}
}

// checkGone checks that the release's objects of the given suffixes
// (config, secret, gizmo) are not there.
func (c *helmCluster) checkGone(t *testing.T, release string, suffixes ...string) {
	t.Helper()
	ctx := context.Background()
	for _, suffix := range suffixes {
		name := release + "-" + suffix
		var err error
		switch suffix {
		case "config":
			_, err = c.cs.CoreV1().ConfigMaps(helmNamespace).Get(ctx, name, metav1.GetOptions{})
		case "secret":
			_, err = c.cs.CoreV1().Secrets(helmNamespace).Get(ctx, name, metav1.GetOptions{})
		case "gizmo":
			_, err = c.dyn.Resource(gizmosGVR).Namespace(helmNamespace).Get(ctx, name, metav1.GetOptions{})
		default:
			t.Fatalf("checkGone: no object with suffix %q", suffix)
		}
		if !apierrors.IsNotFound(err) {
			t.Errorf("%s should be gone; get: %v", name, err)
		}
	}
}

// helmStoredRelease is the part of a release that the test reads from
// Helm's release Secret.
type helmStoredRelease struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	Version   int    `json:"version"`
	Info      struct {
		Status string `json:"status"`
	} `json:"info"`
	Chart struct {
		Metadata struct {
			Name    string `json:"name"`
			Version string `json:"version"`
		} `json:"metadata"`
	} `json:"chart"`
}

// checkReleases checks the release Secrets that Helm's Secrets driver
// keeps for one release: sh.helm.release.v1.<release>.v<revision>, of
// type helm.sh/release.v1, labelled with the release's name, owner,
// revision and status, each holding the release (gzipped JSON, base64)
// with the same status. want maps each revision to its status.
func (c *helmCluster) checkReleases(t *testing.T, release string, want map[int]string) {
	t.Helper()
	list, err := c.cs.CoreV1().Secrets(helmNamespace).List(context.Background(), metav1.ListOptions{LabelSelector: "owner=helm,name=" + release})
	if err != nil {
		t.Fatalf("list the release Secrets of %s: %v", release, err)
	}
	got := map[int]string{}
	for _, s := range list.Items {
		version, err := strconv.Atoi(s.Labels["version"])
		if err != nil {
			t.Errorf("release Secret %s: label version %q: %v", s.Name, s.Labels["version"], err)
			continue
		}
		got[version] = s.Labels["status"]
		if wantName := fmt.Sprintf("sh.helm.release.v1.%s.v%d", release, version); s.Name != wantName {
			t.Errorf("release Secret %s, want the name %s", s.Name, wantName)
		}
		if s.Type != "helm.sh/release.v1" {
			t.Errorf("release Secret %s has type %q, want helm.sh/release.v1", s.Name, s.Type)
		}
		rel := decodeHelmRelease(t, &s)
		if rel.Name != release || rel.Namespace != helmNamespace || rel.Version != version || rel.Info.Status != s.Labels["status"] ||
			rel.Chart.Metadata.Name != "gizmos" || rel.Chart.Metadata.Version != "0.1.0" {
			t.Errorf("release Secret %s (labels %v) holds release %+v", s.Name, s.Labels, rel)
		}
	}
	if !maps.Equal(got, want) {
		t.Errorf("release Secrets of %s: revisions and statuses %v, want %v", release, got, want)
	}
}

// decodeHelmRelease decodes data.release of a release Secret: base64 of
// gzipped JSON.
func decodeHelmRelease(t *testing.T, s *corev1.Secret) helmStoredRelease {
	t.Helper()
	var rel helmStoredRelease
	gz, err := base64.StdEncoding.DecodeString(string(s.Data["release"]))
	if err != nil {
		t.Fatalf("release Secret %s: data.release is not base64: %v", s.Name, err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		t.Fatalf("release Secret %s: data.release is not gzipped: %v", s.Name, err)
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("release Secret %s: data.release: %v", s.Name, err)
	}
	if err := json.Unmarshal(data, &rel); err != nil {
		t.Fatalf("release Secret %s: data.release is not a release: %v", s.Name, err)
	}
	return rel
}
