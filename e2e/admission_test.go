package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/yaml"
)

// Dynamic admission (admissionregistration.k8s.io/v1) as users set it up:
// a ValidatingAdmissionPolicy with a ConfigMap parameter, bound to deny and
// then to warn; a MutatingAdmissionPolicy that labels; a kubebuilder-style
// operator's defaulting and validating webhooks served by
// controller-runtime's webhook server in this process; and webhooks whose
// server is down, with failurePolicy Fail and Ignore. The expected
// statuses, messages and warnings are kube-apiserver v1.37's, word for
// word; only ports vary.

const (
	admDir     = "testdata/admission/"
	admCRDName = "widgets.admission.example.com"
	admNS      = "default"
)

var admWidgetGVR = schema.GroupVersionResource{Group: "admission.example.com", Version: "v1", Resource: "widgets"}

// admTarget gives the API server the admission tests drive: a crdserver
// of their own. It is a variable so that the same scenarios can be pointed
// at kube-apiserver when comparing the two by hand.
var admTarget = func(t *testing.T) *server {
	t.Helper()
	return startServer(t)
}

// Bounds on the retries while an admission configuration is taking effect
// (policies and webhook configurations are read by informers, so a write
// just after them may not see them yet).
const (
	admRetryTimeout  = 30 * time.Second
	admRetryAttempts = 200
	admRetryInterval = 100 * time.Millisecond
)

// admEventually calls try until it is done, at most admRetryAttempts times
// and for at most admRetryTimeout, and fails the test with what try last
// reported if it never is.
func admEventually(t *testing.T, what string, try func() (done bool, last string)) {
	t.Helper()
	deadline := time.Now().Add(admRetryTimeout)
	for attempt := 1; ; attempt++ {
		done, last := try()
		if done {
			return
		}
		if attempt >= admRetryAttempts || time.Now().After(deadline) {
			t.Fatalf("%s: not after %d attempts (at most %v); the last one:\n%s", what, attempt, admRetryTimeout, last)
		}
		time.Sleep(admRetryInterval)
	}
}

func admFile(name string) string { return admDir + name }

// admInstallCRD applies the Widget CRD and waits until it is Established.
func admInstallCRD(t *testing.T, k *kubectl) {
	t.Helper()
	mustContain(t, k.run(t, "apply", "-f", admFile("widget-crd.yaml")), "customresourcedefinition.apiextensions.k8s.io/"+admCRDName+" created")
	k.run(t, "wait", "--for=condition=Established", "crd/"+admCRDName, "--timeout=60s")
}

// admApplyTemplate applies a testdata template with its placeholders
// replaced (old, new pairs), and returns kubectl's output.
func admApplyTemplate(t *testing.T, k *kubectl, name string, oldnew ...string) string {
	t.Helper()
	tmpl, err := os.ReadFile(admFile(name))
	if err != nil {
		t.Fatal(err)
	}
	return k.runStdin(t, strings.NewReplacer(oldnew...).Replace(string(tmpl)), "apply", "-f", "-")
}

// admReadWidget decodes a Widget manifest of testdata/admission.
func admReadWidget(t *testing.T, name string) *unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(admFile(name))
	if err != nil {
		t.Fatal(err)
	}
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &obj.Object); err != nil {
		t.Fatalf("decode %s: %v", name, err)
	}
	return obj
}

func admWidgets(t *testing.T, srv *server) dynamic.ResourceInterface {
	t.Helper()
	dyn, err := dynamic.NewForConfig(srv.restConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	return dyn.Resource(admWidgetGVR).Namespace(admNS)
}

// admExpectStatus checks that err is the API status code/reason with the
// message want, and returns the status.
func admExpectStatus(t *testing.T, what string, err error, code int32, reason metav1.StatusReason, want string) metav1.Status {
	t.Helper()
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		t.Fatalf("%s: got %v, want a %d %s status", what, err, code, reason)
	}
	s := st.Status()
	details, _ := json.Marshal(s.Details)
	t.Logf("%s: %d %s %q details %s", what, s.Code, s.Reason, s.Message, details)
	if s.Code != code || s.Reason != reason {
		t.Errorf("%s: status %d %s, want %d %s (message %q)", what, s.Code, s.Reason, code, reason, s.Message)
	}
	if s.Message != want {
		t.Errorf("%s: message\n got: %q\nwant: %q", what, s.Message, want)
	}
	return s
}

// admNotStored checks that kubectl finds no Widget name.
func admNotStored(t *testing.T, k *kubectl, name string) {
	t.Helper()
	stderr := k.fail(t, "get", "widget", name)
	mustEqual(t, "kubectl get of a refused widget", strings.TrimSpace(stderr), `Error from server (NotFound): widgets.admission.example.com "`+name+`" not found`)
}

// TestAdmissionValidatingPolicy: a ValidatingAdmissionPolicy whose limit
// is a ConfigMap's data, bound with validationActions [Deny], refuses the
// widgets over the limit on create and on update, with the policy's
// message, and stores nothing; bound with [Warn] it lets them through with
// a warning.
func TestAdmissionValidatingPolicy(t *testing.T) {
	srv := admTarget(t)
	k := newKubectl(t, srv)
	admInstallCRD(t, k)

	out := k.run(t, "apply", "-f", admFile("max-replicas-policy.yaml"), "-f", admFile("max-replicas-binding-deny.yaml"), "-f", admFile("max-replicas-limits.yaml"))
	mustContain(t, out, "validatingadmissionpolicy.admissionregistration.k8s.io/max-replicas created")
	mustContain(t, out, "validatingadmissionpolicybinding.admissionregistration.k8s.io/max-replicas created")
	mustContain(t, out, "configmap/widget-limits created")

	const deniedBig = `ValidatingAdmissionPolicy 'max-replicas' with binding 'max-replicas' denied request: spec.replicas is 9, more than the limit of 5`
	admEventually(t, "the policy denies the big widget", func() (bool, string) {
		r := k.exec("", "apply", "--dry-run=server", "-f", admFile("widget-big.yaml"))
		return r.err != nil && strings.Contains(r.stderr, deniedBig), r.String()
	})

	t.Run("deny on create", func(t *testing.T) {
		stderr := k.fail(t, "apply", "-f", admFile("widget-big.yaml"))
		// kubectl words a 422 Invalid status by its causes: the policy
		// gives one without a field.
		mustEqual(t, "kubectl apply of the big widget", strings.TrimSpace(stderr), `The widgets "big" is invalid: : `+deniedBig)
		admNotStored(t, k, "big")

		_, err := admWidgets(t, srv).Create(t.Context(), admReadWidget(t, "widget-big.yaml"), metav1.CreateOptions{})
		st := admExpectStatus(t, "create of the big widget", err, 422, metav1.StatusReasonInvalid,
			`widgets.admission.example.com "big" is forbidden: `+deniedBig)
		if d := st.Details; d == nil || d.Name != "big" || d.Group != "admission.example.com" || d.Kind != "widgets" ||
			len(d.Causes) != 1 || d.Causes[0].Message != deniedBig || d.Causes[0].Field != "" || d.Causes[0].Type != "" {
			t.Errorf("status details: %+v, want widgets big with one cause %q", d, deniedBig)
		}
		admNotStored(t, k, "big")
	})

	t.Run("allow and deny on update", func(t *testing.T) {
		mustContain(t, k.run(t, "apply", "-f", admFile("widget-small.yaml")), "widget.admission.example.com/small created")
		stderr := k.fail(t, "patch", "widget", "small", "--type=merge", "-p", `{"spec":{"replicas":6}}`)
		mustEqual(t, "kubectl patch to 6 replicas", strings.TrimSpace(stderr),
			`The widgets "small" is invalid: : ValidatingAdmissionPolicy 'max-replicas' with binding 'max-replicas' denied request: spec.replicas is 6, more than the limit of 5`)
		mustEqual(t, "stored replicas", k.run(t, "get", "widget", "small", "-o", "jsonpath={.spec.replicas}"), "2")
		mustContain(t, k.run(t, "patch", "widget", "small", "--type=merge", "-p", `{"spec":{"replicas":5}}`), "widget.admission.example.com/small patched")
		mustEqual(t, "stored replicas", k.run(t, "get", "widget", "small", "-o", "jsonpath={.spec.replicas}"), "5")
	})

	t.Run("policy type checked", func(t *testing.T) {
		// The type checker (kube-controller-manager's, in Kubernetes)
		// finds no error in the policy's expressions against the Widget
		// schema.
		admEventually(t, "the policy's status", func() (bool, string) {
			r := k.exec("", "get", "validatingadmissionpolicies", "max-replicas", "-o", "jsonpath={.status}")
			return r.err == nil && r.stdout == `{"observedGeneration":1,"typeChecking":{}}`, r.String()
		})
	})

	t.Run("warn", func(t *testing.T) {
		mustContain(t, k.run(t, "apply", "-f", admFile("max-replicas-binding-warn.yaml")), "validatingadmissionpolicybinding.admissionregistration.k8s.io/max-replicas configured")
		admEventually(t, "the policy only warns", func() (bool, string) {
			r := k.exec("", "apply", "--dry-run=server", "-f", admFile("widget-big.yaml"))
			return r.err == nil, r.String()
		})
		r := k.exec("", "apply", "-f", admFile("widget-big.yaml"))
		if r.err != nil {
			t.Fatalf("kubectl failed:\n%s", r)
		}
		mustEqual(t, "kubectl apply's output", strings.TrimSpace(r.stdout), "widget.admission.example.com/big created")
		mustEqual(t, "kubectl apply's warning", strings.TrimSpace(r.stderr),
			"Warning: Validation failed for ValidatingAdmissionPolicy 'max-replicas' with binding 'max-replicas': spec.replicas is 9, more than the limit of 5")
		mustEqual(t, "stored replicas", k.run(t, "get", "widget", "big", "-o", "jsonpath={.spec.replicas}"), "9")
	})
}

// TestAdmissionMutatingPolicy: a MutatingAdmissionPolicy's
// ApplyConfiguration labels the widgets created (and only on create, as
// its rules say); an expression that fails denies the write.
func TestAdmissionMutatingPolicy(t *testing.T) {
	srv := admTarget(t)
	k := newKubectl(t, srv)
	admInstallCRD(t, k)

	out := k.run(t, "apply", "-f", admFile("owner-label-policy.yaml"), "-f", admFile("owner-label-binding.yaml"))
	mustContain(t, out, "mutatingadmissionpolicy.admissionregistration.k8s.io/owner-label created")
	mustContain(t, out, "mutatingadmissionpolicybinding.admissionregistration.k8s.io/owner-label created")
	admEventually(t, "the policy labels new widgets", func() (bool, string) {
		r := k.exec("", "create", "--dry-run=server", "-f", admFile("widget-blue.yaml"), "-o", "jsonpath={.metadata.labels.owner}")
		return r.err == nil && r.stdout == "team-blue", r.String()
	})

	mustContain(t, k.run(t, "apply", "-f", admFile("widget-blue.yaml")), "widget.admission.example.com/blue created")
	mustEqual(t, "labels of the stored widget", k.run(t, "get", "widget", "blue", "-o", "jsonpath={.metadata.labels}"), `{"owner":"team-blue"}`)

	// The policy matches CREATE only: an update keeps another owner.
	mustContain(t, k.run(t, "label", "widget", "blue", "owner=someone-else", "--overwrite"), "widget.admission.example.com/blue labeled")
	mustEqual(t, "label after the update", k.run(t, "get", "widget", "blue", "-o", "jsonpath={.metadata.labels.owner}"), "someone-else")

	// object.spec.color is missing: the expression fails, and the policy's
	// failurePolicy Fail refuses the write.
	const failed = "policy 'owner-label' with binding 'owner-label' denied request: expression 'Object{\n" +
		"  metadata: Object.metadata{\n" +
		"    labels: {\"owner\": \"team-\" + object.spec.color}\n" +
		"  }\n" +
		"}\n" +
		"' resulted in error: no such key: color"
	stderr := k.fail(t, "create", "-f", admFile("widget-no-color.yaml"))
	mustEqual(t, "kubectl create of a widget without a color", strings.TrimSpace(stderr), `The widgets "nocolor" is invalid: : `+failed)
	_, err := admWidgets(t, srv).Create(t.Context(), admReadWidget(t, "widget-no-color.yaml"), metav1.CreateOptions{})
	// kube-apiserver answers 403 with reason Invalid, and the message
	// without the "<resource> <name> is forbidden: " of the validating policies.
	st := admExpectStatus(t, "create of a widget without a color", err, 403, metav1.StatusReasonInvalid, failed)
	if d := st.Details; d == nil || d.Name != "nocolor" || d.Group != "admission.example.com" || d.Kind != "widgets" ||
		len(d.Causes) != 1 || d.Causes[0].Message != failed || d.Causes[0].Field != "" || d.Causes[0].Type != "" {
		t.Errorf("status details: %+v, want widgets nocolor with one cause %q", d, failed)
	}
	admNotStored(t, k, "nocolor")
}

// A kubebuilder-style Widget type, with the webhooks its operator
// scaffolds: a defaulter and a validator.
type admWidget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              admWidgetSpec `json:"spec,omitempty"`
}

type admWidgetSpec struct {
	Replicas *int64 `json:"replicas,omitempty"`
	Color    string `json:"color,omitempty"`
}

func (w *admWidget) DeepCopyObject() runtime.Object {
	out := *w
	w.DeepCopyInto(&out.ObjectMeta)
	if w.Spec.Replicas != nil {
		out.Spec.Replicas = ptr.To(*w.Spec.Replicas)
	}
	return &out
}

const admMaxReplicas = 10

// admWidgetDefaulter is the operator's defaulting webhook: a widget's
// color is blue unless it says otherwise, and it has one replica.
type admWidgetDefaulter struct{}

func (admWidgetDefaulter) Default(_ context.Context, w *admWidget) error {
	if w.Spec.Color == "" {
		w.Spec.Color = "blue"
	}
	if w.Spec.Replicas == nil {
		w.Spec.Replicas = ptr.To[int64](1)
	}
	return nil
}

// admWidgetValidator is the operator's validating webhook: at most ten
// replicas, red is deprecated (a warning), and the color is immutable.
type admWidgetValidator struct{}

func (admWidgetValidator) validate(w *admWidget) (admission.Warnings, error) {
	var warnings admission.Warnings
	if w.Spec.Color == "red" {
		warnings = append(warnings, "spec.color red is deprecated, use crimson")
	}
	if r := ptr.Deref(w.Spec.Replicas, 0); r > admMaxReplicas {
		return warnings, fmt.Errorf("spec.replicas must be at most %d, not %d", admMaxReplicas, r)
	}
	return warnings, nil
}

func (v admWidgetValidator) ValidateCreate(_ context.Context, w *admWidget) (admission.Warnings, error) {
	return v.validate(w)
}

func (v admWidgetValidator) ValidateUpdate(_ context.Context, old, w *admWidget) (admission.Warnings, error) {
	if old.Spec.Color != w.Spec.Color {
		return nil, fmt.Errorf("spec.color is immutable (it is %q, not %q)", old.Spec.Color, w.Spec.Color)
	}
	return v.validate(w)
}

func (admWidgetValidator) ValidateDelete(context.Context, *admWidget) (admission.Warnings, error) {
	return nil, nil
}

// admCerts makes a CA and a serving certificate for 127.0.0.1 that it
// signs, writes the serving certificate and key into a folder as
// controller-runtime's webhook server reads them (tls.crt, tls.key), and
// returns the folder and the CA's PEM (a caBundle).
func admCerts(t *testing.T) (certDir string, caPEM []byte) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "admission-e2e-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leafTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "widget-operator-webhook"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certDir = t.TempDir()
	if err := os.WriteFile(filepath.Join(certDir, "tls.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(certDir, "tls.key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certDir, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
}

func admScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	gv := admWidgetGVR.GroupVersion()
	s.AddKnownTypeWithName(gv.WithKind("Widget"), &admWidget{})
	metav1.AddToGroupVersion(s, gv)
	return s
}

// admStartOperator runs a controller-runtime manager whose webhook server
// (HTTPS on a free loopback port, with the certificate of certDir) serves
// the Widget defaulter and validator at the paths kubebuilder's markers
// name, until the test ends. It returns https://127.0.0.1:PORT once the
// server accepts TLS connections that verify against caPEM.
func admStartOperator(t *testing.T, cfg *rest.Config, scheme *runtime.Scheme, certDir string, caPEM []byte) string {
	t.Helper()
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		t.Fatal("bad CA PEM")
	}
	// The port is picked by closing a listener, so another process may
	// take it before the webhook server binds it: then try another one.
	var errs []error
	for range 3 {
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		mgr, err := manager.New(cfg, manager.Options{
			Scheme:                 scheme,
			Metrics:                metricsserver.Options{BindAddress: "0"},
			HealthProbeBindAddress: "0",
			WebhookServer:          crwebhook.NewServer(crwebhook.Options{Host: "127.0.0.1", Port: port, CertDir: certDir}),
		})
		if err != nil {
			t.Fatalf("new manager: %v", err)
		}
		err = builder.WebhookManagedBy(mgr, &admWidget{}).
			WithDefaulter(admWidgetDefaulter{}).
			WithValidator(admWidgetValidator{}).
			Complete()
		if err != nil {
			t.Fatalf("build the webhooks: %v", err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		stopped := make(chan error, 1)
		go func() { stopped <- mgr.Start(ctx) }()
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		err = admWaitTLS(addr, roots, stopped)
		if err == nil {
			t.Cleanup(func() {
				cancel()
				select {
				case err := <-stopped:
					if err != nil {
						t.Errorf("the manager stopped with an error: %v", err)
					}
				case <-time.After(stopTimeout):
					t.Errorf("the manager did not stop within %v of its context's cancel", stopTimeout)
				}
			})
			t.Logf("the operator's webhook server is serving on %s", addr)
			return "https://" + addr
		}
		cancel()
		errs = append(errs, err)
		if !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	t.Fatalf("start the webhook server: %v", errors.Join(errs...))
	return ""
}

// admWaitTLS waits until addr accepts a TLS connection that verifies
// against roots, or the manager has stopped (with its error).
func admWaitTLS(addr string, roots *x509.CertPool, stopped <-chan error) error {
	deadline := time.After(startTimeout)
	for {
		err := dialTLS(addr, roots)
		if err == nil {
			return nil
		}
		select {
		case err := <-stopped:
			return fmt.Errorf("the manager stopped: %w", err)
		case <-deadline:
			return fmt.Errorf("no TLS on %s within %v: %w", addr, startTimeout, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// admWarnings records the warnings a client receives.
type admWarnings struct {
	mu   sync.Mutex
	list []string
}

func (w *admWarnings) HandleWarningHeaderWithContext(_ context.Context, _ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.list = append(w.list, text)
}

// take returns the warnings since the last take.
func (w *admWarnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	l := w.list
	w.list = nil
	return l
}

func admTypedWidget(name string, replicas int64, color string) *admWidget {
	w := &admWidget{ObjectMeta: metav1.ObjectMeta{Namespace: admNS, Name: name}}
	if replicas >= 0 {
		w.Spec.Replicas = ptr.To(replicas)
	}
	w.Spec.Color = color
	return w
}

// TestAdmissionControllerRuntimeWebhooks: the defaulting and validating
// webhooks of a kubebuilder-style operator, served by controller-runtime's
// webhook server and registered with its builder, default and validate
// widgets on create and on update, with their messages and warnings.
func TestAdmissionControllerRuntimeWebhooks(t *testing.T) {
	crtSetLogger(t)
	srv := admTarget(t)
	k := newKubectl(t, srv)
	admInstallCRD(t, k)

	cfg := srv.restConfig(t)
	cfg.QPS = -1
	warnings := &admWarnings{}
	cfg.WarningHandlerWithContext = warnings
	scheme := admScheme(t)
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()

	certDir, caPEM := admCerts(t)
	url := admStartOperator(t, srv.restConfig(t), scheme, certDir, caPEM)
	out := admApplyTemplate(t, k, "widget-webhooks.yaml.tmpl", "BASE_URL", url, "CA_BUNDLE", base64.StdEncoding.EncodeToString(caPEM))
	mustContain(t, out, "mutatingwebhookconfiguration.admissionregistration.k8s.io/widget-operator-mutating-webhook-configuration created")
	mustContain(t, out, "validatingwebhookconfiguration.admissionregistration.k8s.io/widget-operator-validating-webhook-configuration created")

	// Both configurations take effect, each in its own time.
	admEventually(t, "the defaulting webhook defaults", func() (bool, string) {
		w := admTypedWidget("probe", -1, "")
		err := c.Create(ctx, w, client.DryRunAll)
		return err == nil && w.Spec.Color == "blue", fmt.Sprintf("err %v, spec %+v", err, w.Spec)
	})
	admEventually(t, "the validating webhook denies", func() (bool, string) {
		err := c.Create(ctx, admTypedWidget("probe", 11, "green"), client.DryRunAll)
		return apierrors.IsForbidden(err), fmt.Sprintf("err %v", err)
	})
	warnings.take()

	t.Run("create defaulted", func(t *testing.T) {
		w := admTypedWidget("plain", -1, "")
		if err := c.Create(ctx, w); err != nil {
			t.Fatalf("create: %v", err)
		}
		if w.Spec.Color != "blue" || ptr.Deref(w.Spec.Replicas, -1) != 1 {
			t.Errorf("created widget's spec %+v, want the defaults color blue and 1 replica", w.Spec)
		}
		mustEqual(t, "stored spec", k.run(t, "get", "widget", "plain", "-o", "jsonpath={.spec}"), `{"color":"blue","replicas":1}`)
		if got := warnings.take(); len(got) != 0 {
			t.Errorf("warnings %q, want none", got)
		}
	})

	t.Run("create warned", func(t *testing.T) {
		if err := c.Create(ctx, admTypedWidget("red", 2, "red")); err != nil {
			t.Fatalf("create: %v", err)
		}
		if got := warnings.take(); len(got) != 1 || got[0] != "spec.color red is deprecated, use crimson" {
			t.Errorf("warnings %q, want the validator's", got)
		}
	})

	t.Run("create denied", func(t *testing.T) {
		err := c.Create(ctx, admTypedWidget("big", 11, "green"))
		st := admExpectStatus(t, "create of 11 replicas", err, 403, metav1.StatusReasonForbidden,
			`admission webhook "vwidget-v1.kb.io" denied the request: spec.replicas must be at most 10, not 11`)
		if st.Details != nil {
			t.Errorf("status details %+v, want none", st.Details)
		}
		admNotStored(t, k, "big")
		// kubectl's words for the same.
		r := k.exec("apiVersion: admission.example.com/v1\nkind: Widget\nmetadata:\n  name: big\nspec:\n  replicas: 12\n", "create", "-f", "-")
		if r.err == nil {
			t.Fatalf("kubectl create of 12 replicas succeeded:\n%s", r)
		}
		mustEqual(t, "kubectl create of 12 replicas", strings.TrimSpace(r.stderr),
			`Error from server (Forbidden): error when creating "STDIN": admission webhook "vwidget-v1.kb.io" denied the request: spec.replicas must be at most 10, not 12`)
		admNotStored(t, k, "big")
	})

	t.Run("update", func(t *testing.T) {
		w := &admWidget{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: admNS, Name: "plain"}, w); err != nil {
			t.Fatal(err)
		}
		w.Spec.Replicas = ptr.To[int64](4)
		if err := c.Update(ctx, w); err != nil {
			t.Fatalf("valid update: %v", err)
		}
		rv := w.ResourceVersion

		bad := w.DeepCopyObject().(*admWidget)
		bad.Spec.Replicas = ptr.To[int64](12)
		admExpectStatus(t, "update to 12 replicas", c.Update(ctx, bad), 403, metav1.StatusReasonForbidden,
			`admission webhook "vwidget-v1.kb.io" denied the request: spec.replicas must be at most 10, not 12`)
		bad = w.DeepCopyObject().(*admWidget)
		bad.Spec.Color = "green"
		admExpectStatus(t, "update of the color", c.Update(ctx, bad), 403, metav1.StatusReasonForbidden,
			`admission webhook "vwidget-v1.kb.io" denied the request: spec.color is immutable (it is "blue", not "green")`)

		stderr := k.fail(t, "patch", "widget", "plain", "--type=merge", "-p", `{"spec":{"color":"crimson"}}`)
		mustEqual(t, "kubectl patch of the color", strings.TrimSpace(stderr),
			`Error from server (Forbidden): admission webhook "vwidget-v1.kb.io" denied the request: spec.color is immutable (it is "blue", not "crimson")`)

		got := &admWidget{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: admNS, Name: "plain"}, got); err != nil {
			t.Fatal(err)
		}
		if got.ResourceVersion != rv || got.Spec.Color != "blue" || ptr.Deref(got.Spec.Replicas, -1) != 4 {
			t.Errorf("stored widget: resourceVersion %s spec %+v, want %s (the valid update's) with blue and 4 replicas", got.ResourceVersion, got.Spec, rv)
		}
	})
}

// admDeadPort is a loopback port that refuses connections for as long as
// the test runs: a socket is bound to it, so no one else can take it, but
// it does not listen.
func admDeadPort(t *testing.T) int {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return sa.(*syscall.SockaddrInet4).Port
}

// TestAdmissionDeadWebhook: a validating, then a mutating webhook whose
// server is down: with failurePolicy Fail the write is refused with an
// internal error that says why, and nothing is stored; with Ignore it goes
// through.
func TestAdmissionDeadWebhook(t *testing.T) {
	srv := admTarget(t)
	k := newKubectl(t, srv)
	admInstallCRD(t, k)
	widgets := admWidgets(t, srv)
	ctx := t.Context()

	port := strconv.Itoa(admDeadPort(t))
	deadURL := "https://127.0.0.1:" + port
	widget := func(name string) *unstructured.Unstructured {
		w := admReadWidget(t, "widget-small.yaml")
		w.SetName(name)
		return w
	}

	for _, tc := range []struct {
		kind, file, webhook, path string
	}{
		{"validating", "dead-validating-webhook.yaml.tmpl", "dead-validating.admission.example.com", "/validate"},
		{"mutating", "dead-mutating-webhook.yaml.tmpl", "dead-mutating.admission.example.com", "/mutate"},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			out := admApplyTemplate(t, k, tc.file, "DEAD_URL", deadURL, "FAILURE_POLICY", "Fail")
			mustContain(t, out, tc.kind+"webhookconfiguration.admissionregistration.k8s.io/dead-"+tc.kind+" created")
			name := "down-" + tc.kind
			admEventually(t, "the dead webhook refuses", func() (bool, string) {
				_, err := widgets.Create(ctx, widget(name), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
				return apierrors.IsInternalError(err), fmt.Sprintf("err %v", err)
			})

			// Kubernetes' webhook client: the timeout (default 10s) is in
			// the URL it posts to.
			failed := `failed calling webhook "` + tc.webhook + `": failed to call webhook: Post "` + deadURL + tc.path + `?timeout=10s": dial tcp 127.0.0.1:` + port + `: connect: connection refused`
			_, err := widgets.Create(ctx, widget(name), metav1.CreateOptions{})
			st := admExpectStatus(t, "create with the webhook down", err, 500, metav1.StatusReasonInternalError, "Internal error occurred: "+failed)
			if d := st.Details; d == nil || len(d.Causes) != 1 || d.Causes[0].Message != failed {
				t.Errorf("status details %+v, want one cause %q", d, failed)
			}
			manifest := "apiVersion: admission.example.com/v1\nkind: Widget\nmetadata:\n  name: " + name + "\nspec:\n  replicas: 2\n"
			r := k.exec(manifest, "create", "-f", "-")
			if r.err == nil {
				t.Fatalf("kubectl create with the webhook down succeeded:\n%s", r)
			}
			mustEqual(t, "kubectl create with the webhook down", strings.TrimSpace(r.stderr),
				`Error from server (InternalError): error when creating "STDIN": Internal error occurred: `+failed)
			admNotStored(t, k, name)

			out = admApplyTemplate(t, k, tc.file, "DEAD_URL", deadURL, "FAILURE_POLICY", "Ignore")
			mustContain(t, out, tc.kind+"webhookconfiguration.admissionregistration.k8s.io/dead-"+tc.kind+" configured")
			admEventually(t, "the dead webhook is ignored", func() (bool, string) {
				_, err := widgets.Create(ctx, widget(name), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
				return err == nil, fmt.Sprintf("err %v", err)
			})
			r = k.exec(manifest, "create", "-f", "-")
			if r.err != nil {
				t.Fatalf("kubectl create with the webhook down and ignored failed:\n%s", r)
			}
			mustEqual(t, "kubectl create with the webhook down and ignored", r.stdout+r.stderr, "widget.admission.example.com/"+name+" created\n")
			mustEqual(t, "stored widget", k.run(t, "get", "widget", name, "-o", "jsonpath={.metadata.name} {.spec.replicas}"), name+" 2")
		})
	}
}
