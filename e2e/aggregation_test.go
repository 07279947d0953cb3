package e2e

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"
)

// aggregationKubeconfigEnv names the kubeconfig of a running cluster (a
// kube-apiserver with its front-proxy flags) that TestAggregatedSampleAPIServer
// runs against instead of a crdserver it starts, to check the test itself
// against Kubernetes. The kubeconfig's user must be a cluster admin; the test
// deletes what it created there.
const aggregationKubeconfigEnv = "CRDSERVER_E2E_AGGREGATION_KUBECONFIG"

// sampleAPIServerModule is Kubernetes' example aggregated API server, built
// from the Go module proxy at the version of the Kubernetes libraries that
// crdserver uses.
const sampleAPIServerModule = "k8s.io/sample-apiserver@v0.37.2"

// Where sample-apiserver's ServiceAccount, Service and APIServices are, as
// its artifacts/example manifests name them.
const (
	wardleNamespace = "wardle"
	wardleService   = "api"
	wardleGroup     = "wardle.example.com"
)

var (
	sampleBuildOnce sync.Once
	sampleBin       string // the sample-apiserver binary
	sampleModDir    string // the module's source (for its example manifests)
	sampleBuildErr  error
)

// buildSampleAPIServer downloads sample-apiserver's module and installs
// its binary next to the ones TestMain built, once.
func buildSampleAPIServer(t *testing.T) (bin, modDir string) {
	t.Helper()
	sampleBuildOnce.Do(func() {
		out, err := exec.Command("go", "mod", "download", "-json", sampleAPIServerModule).Output()
		if err != nil {
			sampleBuildErr = fmt.Errorf("go mod download %s: %w", sampleAPIServerModule, err)
			return
		}
		var mod struct{ Dir, Error string }
		if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
			sampleBuildErr = fmt.Errorf("go mod download %s: no module directory (%v %s)", sampleAPIServerModule, err, mod.Error)
			return
		}
		binDir := filepath.Dir(crdserverBin)
		cmd := exec.Command("go", "install", sampleAPIServerModule)
		cmd.Env = append(os.Environ(), "GOBIN="+binDir)
		if output, err := cmd.CombinedOutput(); err != nil {
			sampleBuildErr = fmt.Errorf("go install %s: %w\n%s", sampleAPIServerModule, err, output)
			return
		}
		sampleBin, sampleModDir = filepath.Join(binDir, "sample-apiserver"), mod.Dir
	})
	if sampleBuildErr != nil {
		t.Fatal(sampleBuildErr)
	}
	return sampleBin, sampleModDir
}

// aggPKI is a CA and the files of what it signed, written into a folder.
type aggPKI struct {
	dir   string
	cert  *x509.Certificate
	key   *ecdsa.PrivateKey
	caPEM []byte
	next  int64
}

func newAggPKI(t *testing.T, name string) *aggPKI {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	p := &aggPKI{dir: t.TempDir(), cert: cert, key: key, caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), next: 2}
	p.write(t, "ca.crt", p.caPEM)
	return p
}

func (p *aggPKI) write(t *testing.T, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(p.dir, name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// issue signs a certificate for tmpl's names and usage and writes it and
// its key as NAME.crt and NAME.key.
func (p *aggPKI) issue(t *testing.T, name string, tmpl *x509.Certificate) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tmpl.SerialNumber = big.NewInt(p.next)
	p.next++
	tmpl.NotBefore, tmpl.NotAfter = now.Add(-time.Hour), now.Add(24*time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.cert, &key.PublicKey, p.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile = p.write(t, name+".crt", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	keyFile = p.write(t, name+".key", pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
	return certFile, keyFile
}

// aggCluster is the API server the test registers sample-apiserver with:
// a crdserver it started, or the cluster of aggregationKubeconfigEnv.
type aggCluster struct {
	srv  *server // kubeconfig (and, for a crdserver, the process)
	cfg  *rest.Config
	kube kubernetes.Interface
	// hasServices: the cluster serves core/v1 Services, so the APIService's
	// service is a Service object (an ExternalName to 127.0.0.1: there are
	// no nodes and no kube-proxy). crdserver stores Services but does not
	// route to them; it is told where the service is with
	// --webhook-service-address.
	hasServices bool
	// reference: the cluster is not a crdserver this test started.
	reference bool
}

// TestAggregatedSampleAPIServer runs Kubernetes' sample-apiserver, unchanged,
// as an aggregated API server of crdserver: registered by APIServices,
// authenticating and authorizing its callers through crdserver (TokenReview,
// SubjectAccessReview, the front proxy's client certificate and X-Remote-*
// headers), with its own etcd, and used with kubectl through crdserver.
func TestAggregatedSampleAPIServer(t *testing.T) {
	sampleBin, sampleDir := buildSampleAPIServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	samplePort := mustFreePort(t)
	servingCA := newAggPKI(t, "wardle-serving-ca")
	// The aggregator checks the serving certificate for the service's name
	// (SERVICE.NAMESPACE.svc), whatever address it dials.
	servingCert, servingKey := servingCA.issue(t, "serving", &x509.Certificate{
		Subject:     pkix.Name{CommonName: wardleService + "." + wardleNamespace + ".svc"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    []string{wardleService + "." + wardleNamespace + ".svc", wardleService + "." + wardleNamespace + ".svc.cluster.local", "localhost"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
	})

	c := aggregationCluster(t, samplePort)
	k := newKubectl(t, c.srv)

	// sample-apiserver's example manifests: namespace, ServiceAccount, its
	// RBAC (auth-delegator, the authentication ConfigMap's reader, the
	// informers' reads).
	example := func(name string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(sampleDir, "artifacts", "example", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if c.reference {
		t.Cleanup(func() { aggregationCleanup(t, k) })
	}
	for _, f := range []string{"ns.yaml", "sa.yaml", "auth-delegator.yaml", "auth-reader.yaml", "rbac.yaml", "rbac-bind.yaml"} {
		k.runStdin(t, example(f), "apply", "-f", "-")
	}
	k.run(t, "apply", "-f", filepath.Join("testdata", "aggregation", "mutating-policies-rbac.yaml"))
	if c.hasServices {
		k.runStdin(t, fmt.Sprintf(`apiVersion: v1
kind: Service
metadata:
  name: %s
  namespace: %s
spec:
  type: ExternalName
  externalName: localhost
`, wardleService, wardleNamespace), "apply", "-f", "-")
	}

	// Its etcd, and the process with the ServiceAccount's token.
	etcd := startEtcdCluster(t, 1)
	token := serviceAccountToken(ctx, t, c.kube, wardleNamespace, "apiserver")
	saKubeconfig := tokenKubeconfig(t, c.cfg, token)
	sample := startSampleAPIServer(t, sampleBin,
		"--secure-port", strconv.Itoa(samplePort), "--bind-address", "127.0.0.1",
		"--tls-cert-file", servingCert, "--tls-private-key-file", servingKey,
		"--etcd-servers", etcd.endpoints(),
		"--kubeconfig", saKubeconfig, "--authentication-kubeconfig", saKubeconfig, "--authorization-kubeconfig", saKubeconfig,
		"--cert-dir", t.TempDir())

	// The example's APIService, verified with the serving CA instead of
	// insecureSkipTLSVerify, on the port sample-apiserver listens on; and one
	// for v1beta1 (the example registers only v1alpha1).
	apiService := func(version string, priority int) string {
		t.Helper()
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(example("apiservice.yaml")), &obj); err != nil {
			t.Fatal(err)
		}
		u := unstructured.Unstructured{Object: obj}
		u.SetName(version + "." + wardleGroup)
		unstructured.RemoveNestedField(u.Object, "spec", "insecureSkipTLSVerify")
		must(t, unstructured.SetNestedField(u.Object, version, "spec", "version"))
		must(t, unstructured.SetNestedField(u.Object, int64(priority), "spec", "versionPriority"))
		must(t, unstructured.SetNestedField(u.Object, base64.StdEncoding.EncodeToString(servingCA.caPEM), "spec", "caBundle"))
		must(t, unstructured.SetNestedField(u.Object, int64(samplePort), "spec", "service", "port"))
		b, err := json.Marshal(u.Object)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	k.runStdin(t, apiService("v1alpha1", 15), "apply", "-f", "-")
	k.runStdin(t, apiService("v1beta1", 20), "apply", "-f", "-")

	// kubectl get apiservices: both Available.
	for _, name := range []string{"v1alpha1." + wardleGroup, "v1beta1." + wardleGroup} {
		if r := k.exec("", "wait", "--for=condition=Available", "--timeout=90s", "apiservice/"+name); r.err != nil {
			t.Fatalf("%s never became Available:\n%s\n%s\nsample-apiserver's log:\n%s", name, r, k.exec("", "get", "apiservice", name, "-o", "yaml"), sample.log)
		}
	}
	out := k.run(t, "get", "apiservices")
	if row := tableRow(t, out, "v1alpha1."+wardleGroup); !slices.Equal(row[1:3], []string{wardleNamespace + "/" + wardleService, "True"}) {
		t.Fatalf("kubectl get apiservices: the row of v1alpha1.%s is %q, not SERVICE %s/%s AVAILABLE True:\n%s", wardleGroup, row, wardleNamespace, wardleService, out)
	}
	if h := tableHeader(t, out); h != "NAME SERVICE AVAILABLE AGE" {
		t.Fatalf("kubectl get apiservices: header %q:\n%s", h, out)
	}

	// Discovery: kubectl api-resources lists both resources of the group.
	out = k.run(t, "api-resources", "--api-group", wardleGroup)
	for name, want := range map[string][]string{
		"flunders": {"flunders", wardleGroup + "/v1beta1", "true", "Flunder"},
		"fischers": {"fischers", wardleGroup + "/v1alpha1", "false", "Fischer"},
	} {
		if row := tableRow(t, out, name); !slices.Equal(row, want) {
			t.Fatalf("kubectl api-resources: %s is %q, not %q:\n%s", name, row, want, out)
		}
	}

	// Flunders written in v1alpha1, read in v1alpha1 and v1beta1.
	k.run(t, "create", "namespace", "flunders")
	t.Cleanup(func() {
		if c.reference {
			k.exec("", "delete", "namespace", "flunders", "--ignore-not-found", "--wait=false")
		}
	})
	k.runStdin(t, `apiVersion: wardle.example.com/v1alpha1
kind: Flunder
metadata:
  name: first
  namespace: flunders
  labels:
    sample-label: "true"
spec:
  reference: second
  referenceType: Flunder
`, "create", "-f", "-")
	var alpha struct {
		APIVersion string `json:"apiVersion"`
		Spec       struct {
			Reference     string `json:"reference"`
			ReferenceType string `json:"referenceType"`
		} `json:"spec"`
	}
	getJSON(t, k, &alpha, "get", "flunders.v1alpha1."+wardleGroup, "first", "-n", "flunders", "-o", "json")
	if alpha.APIVersion != wardleGroup+"/v1alpha1" || alpha.Spec.Reference != "second" || alpha.Spec.ReferenceType != "Flunder" {
		t.Fatalf("the flunder read in v1alpha1: %+v", alpha)
	}
	var beta struct {
		APIVersion string `json:"apiVersion"`
		Metadata   struct {
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
		Spec struct {
			FlunderReference string `json:"flunderReference"`
			ReferenceType    string `json:"referenceType"`
		} `json:"spec"`
	}
	getJSON(t, k, &beta, "get", "flunders.v1beta1."+wardleGroup, "first", "-n", "flunders", "-o", "json")
	if beta.APIVersion != wardleGroup+"/v1beta1" || beta.Spec.FlunderReference != "second" || beta.Spec.ReferenceType != "Flunder" || beta.Metadata.Labels["sample-label"] != "true" {
		t.Fatalf("the flunder read in v1beta1: %+v", beta)
	}
	out = k.run(t, "get", "flunders", "-n", "flunders")
	if h := tableHeader(t, out); h != "NAME CREATED AT" {
		t.Fatalf("kubectl get flunders: header %q:\n%s", h, out)
	}
	tableRow(t, out, "first")
	out = k.run(t, "get", "flunders", "-A", "-l", "sample-label=true", "-o", "name")
	if strings.TrimSpace(out) != "flunder.wardle.example.com/first" {
		t.Fatalf("kubectl get flunders -A -l sample-label=true: %q", out)
	}

	// A watch through the aggregator sees a flunder created.
	w := k.background(t, "get", "flunders", "-n", "flunders", "-w", "--output-watch-events")
	w.waitForLine(t, regexp.MustCompile(`^ADDED\s+first\s`))
	k.runStdin(t, `{"apiVersion":"wardle.example.com/v1beta1","kind":"Flunder","metadata":{"name":"watched","namespace":"flunders"}}`, "create", "-f", "-")
	w.waitForLine(t, regexp.MustCompile(`^ADDED\s+watched\s`))
	k.run(t, "delete", "flunder", "watched", "-n", "flunders")
	w.waitForLine(t, regexp.MustCompile(`^DELETED\s+watched\s`))
	w.stop()

	// sample-apiserver's admission: a Fischer bans a name; its Forbidden
	// reaches the client as it was sent.
	k.runStdin(t, `{"apiVersion":"wardle.example.com/v1alpha1","kind":"Fischer","metadata":{"name":"ban"},"disallowedFlunders":["banned"]}`, "create", "-f", "-")
	t.Cleanup(func() {
		if c.reference {
			k.exec("", "delete", "fischer", "ban", "--ignore-not-found")
		}
	})
	banned := `{"apiVersion":"wardle.example.com/v1alpha1","kind":"Flunder","metadata":{"name":"banned","namespace":"flunders"}}`
	var r result
	// The admission plugin lists Fischers from an informer.
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		r = k.exec(banned, "create", "-f", "-")
		if r.err == nil {
			k.exec("", "delete", "flunder", "banned", "-n", "flunders")
		}
		return r.err != nil, nil
	}); err != nil {
		t.Fatalf("the banned flunder was created:\n%s", r)
	}
	if want := `Error from server (Forbidden): error when creating "STDIN": flunders.wardle.example.com "banned" is forbidden: this name may not be used, please change the resource name` + "\n"; withoutWarnings(r.stderr) != want {
		t.Fatalf("the banned flunder:\n%s\nwant stderr %q", r, want)
	}

	// kubectl explain reads the group's OpenAPI v3.
	out = k.run(t, "explain", "flunders")
	for _, re := range []string{`(?m)^GROUP:\s+wardle\.example\.com$`, `(?m)^KIND:\s+Flunder$`, `(?m)^VERSION:\s+v1beta1$`, `(?m)^\s+spec\s+<FlunderSpec>$`} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Fatalf("kubectl explain flunders: no match for %s:\n%s", re, out)
		}
	}
	out = k.run(t, "explain", "fischers.disallowedFlunders")
	if !regexp.MustCompile(`(?m)^FIELD:\s+disallowedFlunders <\[\]string>$`).MatchString(out) || !strings.Contains(out, "DisallowedFlunders holds a list of Flunder.Names that are disallowed.") {
		t.Fatalf("kubectl explain fischers.disallowedFlunders:\n%s", out)
	}

	// The user reaches sample-apiserver: its delegated authorization asks
	// the cluster about that user. One without RBAC on flunders is refused;
	// one bound to a role that allows reading them reads them.
	k.run(t, "create", "serviceaccount", "nobody", "-n", "flunders")
	k.run(t, "create", "serviceaccount", "reader", "-n", "flunders")
	nobody := &server{kubeconfig: tokenKubeconfig(t, c.cfg, serviceAccountToken(ctx, t, c.kube, "flunders", "nobody"))}
	reader := &server{kubeconfig: tokenKubeconfig(t, c.cfg, serviceAccountToken(ctx, t, c.kube, "flunders", "reader"))}
	r = newKubectl(t, nobody).exec("", "get", "flunders", "-n", "flunders")
	if want := `Error from server (Forbidden): flunders.wardle.example.com is forbidden: User "system:serviceaccount:flunders:nobody" cannot list resource "flunders" in API group "wardle.example.com" in the namespace "flunders"` + "\n"; r.err == nil || withoutWarnings(r.stderr) != want {
		t.Fatalf("a ServiceAccount without RBAC on flunders:\n%s\nwant stderr %q", r, want)
	}
	if _, err := c.kube.RbacV1().Roles("flunders").Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "flunder-reader"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{wardleGroup}, Resources: []string{"flunders"}, Verbs: []string{"get", "list"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.kube.RbacV1().RoleBindings("flunders").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "flunder-reader"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "flunder-reader"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "flunders", Name: "reader"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rk := newKubectl(t, reader)
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		r = rk.exec("", "get", "flunders", "-n", "flunders", "-o", "name")
		return r.err == nil, nil
	}); err != nil {
		t.Fatalf("the ServiceAccount bound to flunder-reader:\n%s", r)
	}
	if strings.TrimSpace(r.stdout) != "flunder.wardle.example.com/first" {
		t.Fatalf("the reader's list:\n%s", r)
	}
	// The role allows no writes: refused as well.
	r = rk.exec(`{"apiVersion":"wardle.example.com/v1alpha1","kind":"Flunder","metadata":{"name":"by-reader","namespace":"flunders"}}`, "create", "-f", "-")
	if want := `Error from server (Forbidden): error when creating "STDIN": flunders.wardle.example.com is forbidden: User "system:serviceaccount:flunders:reader" cannot create resource "flunders" in API group "wardle.example.com" in the namespace "flunders"` + "\n"; r.err == nil || withoutWarnings(r.stderr) != want {
		t.Fatalf("a create by the reader:\n%s\nwant stderr %q", r, want)
	}

	// Deleted through the aggregator, gone from both versions.
	k.run(t, "delete", "flunder", "first", "-n", "flunders")
	for _, v := range []string{"v1alpha1", "v1beta1"} {
		if out := k.run(t, "get", "flunders."+v+"."+wardleGroup, "-n", "flunders", "-o", "name"); strings.TrimSpace(out) != "" {
			t.Fatalf("flunders in %s after the delete: %q", v, out)
		}
	}
}

// aggregationCluster starts crdserver as an aggregator (a front-proxy CA
// and client certificate, the service at 127.0.0.1:samplePort), or returns
// the cluster of aggregationKubeconfigEnv.
func aggregationCluster(t *testing.T, samplePort int) *aggCluster {
	t.Helper()
	c := &aggCluster{}
	if kc := os.Getenv(aggregationKubeconfigEnv); kc != "" {
		readSources()
		c.srv = &server{kubeconfig: kc}
		c.reference = true
	} else {
		proxyCA := newAggPKI(t, "front-proxy-ca")
		proxyCert, proxyKey := proxyCA.issue(t, "front-proxy-client", &x509.Certificate{
			Subject:     pkix.Name{CommonName: "front-proxy-client"},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		})
		svc := fmt.Sprintf("%s/%s:%d=127.0.0.1:%d", wardleNamespace, wardleService, samplePort, samplePort)
		c.srv = startServer(t,
			"--requestheader-client-ca-file", filepath.Join(proxyCA.dir, "ca.crt"),
			"--requestheader-allowed-names", "front-proxy-client",
			"--requestheader-username-headers", "X-Remote-User",
			"--requestheader-group-headers", "X-Remote-Group",
			"--requestheader-extra-headers-prefix", "X-Remote-Extra-",
			"--proxy-client-cert-file", proxyCert, "--proxy-client-key-file", proxyKey,
			"--webhook-service-address", svc)
	}
	c.cfg = c.srv.restConfig(t)
	c.kube = kubernetes.NewForConfigOrDie(c.cfg)
	resources, err := c.kube.Discovery().ServerResourcesForGroupVersion("v1")
	if err != nil {
		t.Fatal(err)
	}
	c.hasServices = slices.ContainsFunc(resources.APIResources, func(r metav1.APIResource) bool { return r.Name == "services" })
	return c
}

// aggregationCleanup deletes what the test created in a cluster it did not
// start.
func aggregationCleanup(t *testing.T, k *kubectl) {
	for _, args := range [][]string{
		{"delete", "apiservice", "v1alpha1." + wardleGroup, "v1beta1." + wardleGroup, "--ignore-not-found"},
		{"delete", "clusterrolebinding", "wardle:system:auth-delegator", "sample-apiserver-clusterrolebinding", "--ignore-not-found"},
		{"delete", "clusterrolebinding", "aggregated-apiserver-mutating-policies", "--ignore-not-found"},
		{"delete", "clusterrole", "aggregated-apiserver-clusterrole", "aggregated-apiserver-mutating-policies", "--ignore-not-found"},
		{"delete", "rolebinding", "wardle-auth-reader", "-n", "kube-system", "--ignore-not-found"},
		{"delete", "namespace", wardleNamespace, "flunders", "--ignore-not-found", "--wait=false"},
	} {
		if r := k.exec("", args...); r.err != nil {
			t.Errorf("cleanup:\n%s", r)
		}
	}
}

// serviceAccountToken is a token of namespace/name (a TokenRequest).
func serviceAccountToken(ctx context.Context, t *testing.T, kube kubernetes.Interface, namespace, name string) string {
	t.Helper()
	if _, err := kube.CoreV1().ServiceAccounts(namespace).Get(ctx, name, metav1.GetOptions{}); err != nil {
		if _, err := kube.CoreV1().ServiceAccounts(namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	tr, err := kube.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// tokenKubeconfig writes a kubeconfig for cfg's server and CA with a bearer
// token, and returns its path.
func tokenKubeconfig(t *testing.T, cfg *rest.Config, token string) string {
	t.Helper()
	ca := cfg.CAData
	if len(ca) == 0 && cfg.CAFile != "" {
		b, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			t.Fatal(err)
		}
		ca = b
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: ca}
	kc.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: token}
	kc.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	kc.CurrentContext = "c"
	path := filepath.Join(t.TempDir(), "token.kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// sampleProcess is one running sample-apiserver.
type sampleProcess struct {
	cmd    *exec.Cmd
	log    *syncBuffer
	exited chan struct{}
}

// startSampleAPIServer runs sample-apiserver with args, and stops it (and
// checks that it stops) when the test ends.
func startSampleAPIServer(t *testing.T, bin string, args ...string) *sampleProcess {
	t.Helper()
	p := &sampleProcess{cmd: exec.Command(bin, args...), log: &syncBuffer{}, exited: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start sample-apiserver: %v", err)
	}
	go func() {
		_ = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(stopTimeout):
			_ = p.cmd.Process.Kill()
			<-p.exited
			t.Errorf("sample-apiserver did not exit within %v of SIGTERM; its log:\n%s", stopTimeout, p.log)
		}
		if t.Failed() {
			t.Logf("sample-apiserver's log:\n%s", p.log)
		}
	})
	return p
}

// getJSON runs kubectl (with -o json among args) and decodes its output.
func getJSON(t *testing.T, k *kubectl, into any, args ...string) {
	t.Helper()
	out := k.run(t, args...)
	if err := json.NewDecoder(bytes.NewReader([]byte(out))).Decode(into); err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// withoutWarnings drops kubectl's "Warning: " lines (sample-apiserver
// marks v1alpha1 deprecated) from its stderr.
func withoutWarnings(stderr string) string {
	var b strings.Builder
	for _, l := range strings.SplitAfter(stderr, "\n") {
		if !strings.HasPrefix(l, "Warning: ") {
			b.WriteString(l)
		}
	}
	return b.String()
}
