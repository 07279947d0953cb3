package e2e

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// gizmoCRD is a CRD with v1beta1 (deprecated) and v1 (the same schema,
// conversion None), stored in storage.
func gizmoCRD(storage string) string {
	return fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gizmos.retire.example.com
spec:
  group: retire.example.com
  scope: Namespaced
  names: {plural: gizmos, singular: gizmo, kind: Gizmo, listKind: GizmoList}
  versions:
  - name: v1beta1
    served: true
    storage: %t
    deprecated: true
    schema: &schema
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
              color: {type: string}
  - name: v1
    served: true
    storage: %t
    schema: *schema
`, storage == "v1beta1", storage == "v1")
}

func gizmo(version, name string, size int) string {
	return fmt.Sprintf(`apiVersion: retire.example.com/%s
kind: Gizmo
metadata: {name: %s, namespace: default}
spec: {size: %d, color: blue}
`, version, name, size)
}

// admissionSeen is a validating webhook that allows everything and
// remembers the version of each gizmo it was asked about.
type admissionSeen struct {
	mu   sync.Mutex
	seen []string // "<operation> <version> <name>"
}

func (a *admissionSeen) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var review admissionv1.AdmissionReview
	if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
		http.Error(w, "not an AdmissionReview", http.StatusBadRequest)
		return
	}
	a.mu.Lock()
	a.seen = append(a.seen, fmt.Sprintf("%s %s %s", review.Request.Operation, review.Request.Kind.Version, review.Request.Name))
	a.mu.Unlock()
	review.Response = &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
	review.Request = nil
	_ = json.NewEncoder(w).Encode(&review)
}

func (a *admissionSeen) saw(s string) bool { return slices.Contains(a.all(), s) }

func (a *admissionSeen) all() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.seen)
}

// crdserverExpect runs a crdserver subcommand and checks its exit status.
func crdserverExpect(t *testing.T, wantOK bool, args ...string) string {
	t.Helper()
	out, errOut, err := runCrdserver(args...)
	if (err == nil) != wantOK {
		t.Fatalf("crdserver %s: err=%v, want ok=%t\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, wantOK, out, errOut)
	}
	return out
}

func containsAll(t *testing.T, out string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
}

// TestRetireVersion: a CRD's v1beta1 is used the five ways a removal
// breaks — a client-go informer running as a ServiceAccount, kubectl
// apply --server-side (managedFields at v1beta1), a ConfigMap owned
// through v1beta1, a webhook that lists only v1beta1 with matchPolicy
// Exact, and objects stored at v1beta1. `crdserver versions --check-remove`
// names each; --retire refuses while the informer runs and while the
// webhook would stop matching; once the informer has stopped for the
// usage window and the webhook lists v1, --retire walks every step, and
// afterwards server-side apply at v1 works, the garbage collector collects
// the owned ConfigMap, the webhook sees the objects at v1, and --remove
// deletes v1beta1 once nobody called it for the grace period.
func TestRetireVersion(t *testing.T) {
	const window = 6 * time.Second
	srv := startServer(t, "--version-usage-window", window.String(), "--version-usage-flush-interval", "500ms")
	k := newKubectl(t, srv)
	cfg := srv.restConfig(t)
	kube := kubernetes.NewForConfigOrDie(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const crd = "gizmos.retire.example.com"
	kc := "-kubeconfig=" + srv.kubeconfig
	versions := func(wantOK bool, args ...string) string {
		t.Helper()
		return crdserverExpect(t, wantOK, append([]string{"versions", kc, crd}, args...)...)
	}

	// v1beta1 stored, applied there with kubectl apply --server-side.
	k.runStdin(t, gizmoCRD("v1beta1"), "apply", "-f", "-")
	k.run(t, "wait", "--for=condition=Established", "crd/"+crd, "--timeout=30s")
	k.runStdin(t, gizmo("v1beta1", "a", 1)+"---\n"+gizmo("v1beta1", "b", 2), "apply", "--server-side", "--field-manager=gizmo-tool", "-f", "-")
	gvrBeta := schema.GroupVersionResource{Group: "retire.example.com", Version: "v1beta1", Resource: "gizmos"}
	gvrV1 := gvrBeta
	gvrV1.Version = "v1"
	dyn := dynamic.NewForConfigOrDie(cfg)
	a, err := dyn.Resource(gvrBeta).Namespace("default").Get(ctx, "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// A ConfigMap owned through v1beta1.
	if _, err := kube.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owned-by-a",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "retire.example.com/v1beta1", Kind: "Gizmo", Name: "a", UID: a.GetUID()}}}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// v1 becomes the storage version: a and b stay stored at v1beta1.
	k.runStdin(t, gizmoCRD("v1"), "apply", "-f", "-")

	// A webhook that lists only v1beta1, matchPolicy Exact.
	hook := &admissionSeen{}
	ts := httptest.NewTLSServer(hook)
	defer ts.Close()
	caBundle := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ts.Certificate().Raw})
	exact, fail, none := admissionregistrationv1.Exact, admissionregistrationv1.Fail, admissionregistrationv1.SideEffectClassNone
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "gizmo-guard"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "guard.retire.example.com", ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &ts.URL, CABundle: caBundle},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{"retire.example.com"}, APIVersions: []string{"v1beta1"}, Resources: []string{"gizmos"}},
			}},
			MatchPolicy: &exact, FailurePolicy: &fail, SideEffects: &none, AdmissionReviewVersions: []string{"v1"},
		}},
	}
	if _, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, vwc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The webhook sees v1beta1 writes (once its configuration is loaded):
	// c is applied at v1beta1 (and stored at v1) until it does.
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; !hook.saw("UPDATE v1beta1 c"); i++ {
		if time.Now().After(deadline) {
			t.Fatal("the webhook never saw an update of b at v1beta1")
		}
		k.runStdin(t, gizmo("v1beta1", "c", 10+i), "apply", "--server-side", "--field-manager=gizmo-tool", "-f", "-")
		time.Sleep(100 * time.Millisecond)
	}

	// A client-go informer on v1beta1, as a ServiceAccount.
	if _, err := kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "gizmo-watcher"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"retire.example.com"}, Resources: []string{"gizmos"}, Verbs: []string{"get", "list", "watch"}}}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "gizmo-watcher"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "gizmo-watcher"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "default", Name: "gizmo-watcher"}}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	saCfg := rest.AnonymousClientConfig(cfg)
	saCfg.BearerToken = serviceAccountToken(ctx, t, kube, "default", "gizmo-watcher")
	saCfg.UserAgent = "gizmo-informer/1.0"
	factory := dynamicinformer.NewDynamicSharedInformerFactory(dynamic.NewForConfigOrDie(saCfg), 0)
	informer := factory.ForResource(gvrBeta).Informer()
	stopInformer := make(chan struct{})
	factory.Start(stopInformer)
	informerStopped := false
	stop := func() {
		if !informerStopped {
			informerStopped = true
			close(stopInformer)
			factory.Shutdown()
		}
	}
	defer stop()
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		t.Fatal("the informer never synced")
	}
	if n := len(informer.GetStore().List()); n != 3 {
		t.Fatalf("the informer has %d gizmos, want 3", n)
	}

	t.Run("check-remove names each of the five", func(t *testing.T) {
		out := versions(false, "--check-remove", "v1beta1")
		containsAll(t, out, "v1beta1 of "+crd+" cannot be removed yet",
			"- Clients:", "system:serviceaccount:default:gizmo-watcher (gizmo-informer/1.0)",
			"- StoredObjects: 2 objects are stored in v1beta1: default/a, default/b",
			"- ManagedFields: managedFields entries at v1beta1: gizmo-tool on 3 objects",
			"- OwnerReferences: ownerReferences name retire.example.com/v1beta1: 1 configmaps (default/owned-by-a)",
			"- Admission: ValidatingWebhookConfiguration gizmo-guard (webhook guard.retire.example.com) lists v1beta1",
			"- StoredVersions:")
		table := crdserverExpect(t, true, "versions", kc)
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(crd) + `\s+v1beta1\s+true\s+false\s+true\s+2\s+\d+\s+3\s+blocked: Clients,StoredObjects,ManagedFields,OwnerReferences,Admission,StoredVersions$`).MatchString(table) {
			t.Errorf("crdserver versions' row of v1beta1 is not as expected:\n%s", table)
		}
	})

	t.Run("retire refuses while the informer runs", func(t *testing.T) {
		out := versions(false, "--retire", "v1beta1")
		containsAll(t, out, "storage version: v1 is the storage version", "clients:", "STOPPED: clients called v1beta1 within the window (6s)",
			"system:serviceaccount:default:gizmo-watcher (gizmo-informer/1.0): ", "watch ",
			"crdserver-admin (kubectl/", "fix: move them to v1")
		// A dry run ignoring every client says what it would do, and stops
		// at the webhook.
		out = versions(false, "--retire", "v1beta1", "--dry-run", "--ignore-client", "system:serviceaccount:default:gizmo-watcher", "--ignore-client", "crdserver-admin")
		containsAll(t, out, "dry run: nothing is changed", "none within 6s but those ignored", "STOPPED: these list v1beta1 and no other served version of gizmos",
			"ValidatingWebhookConfiguration gizmo-guard (webhook guard.retire.example.com), matchPolicy Exact", "crdserver does not edit them for you")
	})

	stop()
	t.Run("once the window passed, retire stops at the webhook and changes nothing", func(t *testing.T) {
		deadline := time.Now().Add(window + 30*time.Second)
		var out string
		for {
			out = versions(false, "--retire", "v1beta1")
			if !strings.Contains(out, "STOPPED: clients") || time.Now().After(deadline) {
				break
			}
			time.Sleep(500 * time.Millisecond)
		}
		containsAll(t, out, "clients:         none within 6s", "admission:       STOPPED:")
		if obj, err := dyn.Resource(gvrV1).Namespace("default").Get(ctx, "a", metav1.GetOptions{}); err != nil || !hasManaged(obj, "retire.example.com/v1beta1") {
			t.Fatalf("a changed before the retirement could go on: %v %v", err, obj)
		}
	})

	// The user adds v1 to the webhook's rules.
	vwc, err = kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "gizmo-guard", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	vwc.Webhooks[0].Rules[0].APIVersions = []string{"v1beta1", "v1"}
	if _, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Update(ctx, vwc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	t.Run("retire walks every step", func(t *testing.T) {
		dry := versions(true, "--retire", "v1beta1", "--dry-run")
		containsAll(t, dry, "stored objects:  would migrate 2 objects from v1beta1 to v1 (default/a, default/b)",
			"managedFields:   would rewrite the entries at retire.example.com/v1beta1 to retire.example.com/v1: gizmo-tool on 3 objects",
			"ownerReferences: would rewrite the ownerReferences to retire.example.com/v1beta1 Gizmo of 1 configmaps",
			"storedVersions:  would drop v1beta1", "served:          would set served: false on v1beta1")
		out := versions(true, "--retire", "v1beta1")
		containsAll(t, out, "admission:       no webhook or policy would stop matching gizmos",
			"stored objects:  migrating 2 objects from v1beta1 to v1", "succeeded: migrated 2 objects",
			"managedFields:   rewrote the entries at retire.example.com/v1beta1 to retire.example.com/v1 on 3 objects",
			"ownerReferences: rewrote the ownerReferences to retire.example.com/v1beta1 Gizmo of 1 configmaps to retire.example.com/v1",
			"storedVersions:  v1beta1 is not listed (the migration dropped it)",
			"served:          set served: false on v1beta1",
			"v1beta1 of "+crd+" is retired")
		// Again: every step is done already.
		again := versions(true, "--retire", "v1beta1")
		containsAll(t, again, "stored objects:  none in v1beta1", "managedFields:   no entry at v1beta1", "storedVersions:  v1beta1 is not listed", "served:          v1beta1 is not served")
		out = versions(true, "--check-remove", "v1beta1")
		containsAll(t, out, "v1beta1 of "+crd+" can be removed")
		if got := k.run(t, "get", "crd", crd, "-o", `jsonpath={.status.storedVersions} {.spec.versions[0].served}`); got != `["v1"] false` {
			t.Errorf("storedVersions and v1beta1's served: %s", got)
		}
		cm, err := kube.CoreV1().ConfigMaps("default").Get(ctx, "owned-by-a", metav1.GetOptions{})
		if err != nil || cm.OwnerReferences[0].APIVersion != "retire.example.com/v1" {
			t.Fatalf("the ConfigMap's owner: %v %v", err, cm.OwnerReferences)
		}
	})

	t.Run("server-side apply at v1 still works", func(t *testing.T) {
		k.runStdin(t, gizmo("v1", "a", 7), "apply", "--server-side", "--field-manager=gizmo-tool", "-f", "-")
		obj, err := dyn.Resource(gvrV1).Namespace("default").Get(ctx, "a", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if size, _, _ := unstructured.NestedInt64(obj.Object, "spec", "size"); size != 7 {
			t.Errorf("spec.size = %d, want 7", size)
		}
		if hasManaged(obj, "retire.example.com/v1beta1") {
			t.Errorf("managedFields still at v1beta1: %v", obj.GetManagedFields())
		}
		if !hook.saw("UPDATE v1 a") {
			t.Errorf("the webhook did not see the update at v1; it saw %v", hook.all())
		}
	})

	t.Run("the garbage collector collects the owned ConfigMap", func(t *testing.T) {
		k.run(t, "delete", "gizmo.v1.retire.example.com", "a", "-n", "default", "--wait=true", "--timeout=30s")
		deadline := time.Now().Add(30 * time.Second)
		for {
			_, err := kube.CoreV1().ConfigMaps("default").Get(ctx, "owned-by-a", metav1.GetOptions{})
			if err != nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the owned ConfigMap was never collected")
			}
			time.Sleep(100 * time.Millisecond)
		}
	})

	t.Run("remove after the grace period", func(t *testing.T) {
		// A client that still calls v1beta1 gets 404, and is counted.
		if r := k.exec("", "get", "--raw", "/apis/retire.example.com/v1beta1/namespaces/default/gizmos"); r.err == nil || !strings.Contains(r.stderr, "NotFound") {
			t.Fatalf("v1beta1 is still served:\n%s", r)
		}
		out := versions(false, "--retire", "v1beta1", "--remove", "--grace", "1h")
		containsAll(t, out, "STOPPED: clients called v1beta1", "1 while not served")
		// Past that client, the removal waits for the grace period.
		out = versions(false, "--retire", "v1beta1", "--remove", "--grace", "1h", "--ignore-client", "kubectl/")
		containsAll(t, out, "served:          v1beta1 is not served", "remove:          STOPPED:", "called v1beta1 at", "within the grace period (1h0m0s)")
		time.Sleep(time.Second)
		out = versions(true, "--retire", "v1beta1", "--remove", "--grace", "1s", "--ignore-client", "kubectl/")
		containsAll(t, out, "remove:          deleted v1beta1 from spec.versions")
		if got := k.run(t, "get", "crd", crd, "-o", `jsonpath={.spec.versions[*].name}`); got != "v1" {
			t.Errorf("versions left: %q", got)
		}
		out = versions(true, "--retire", "v1beta1", "--remove")
		containsAll(t, out, "has no version v1beta1")
	})
}

func hasManaged(obj *unstructured.Unstructured, apiVersion string) bool {
	for _, e := range obj.GetManagedFields() {
		if e.APIVersion == apiVersion {
			return true
		}
	}
	return false
}
