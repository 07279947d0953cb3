package e2e

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/ptr"
)

// TestClientGoUnderPriorityAndFairness runs client-go against the built
// crdserver with API Priority and Fairness on (its default) and 30 seats
// in all:
//
//   - a user whose FlowSchema sends them to a level of one seat that
//     rejects beyond it gets 429 while their other request holds the seat,
//     and client-go, honouring Retry-After, retries until it is served;
//   - 40 workers of a tenant list 500 ConfigMaps as fast as they can
//     while client-go's leader election (as system:kube-controller-manager,
//     Kubernetes' leader-election FlowSchema) holds a Lease, and the admin
//     (system:masters, exempt) is served: every list is answered, the
//     leader renews and never loses the lease, and the metrics count the
//     requests in the levels they belong to.
func TestClientGoUnderPriorityAndFairness(t *testing.T) {
	srv := startServer(t, "--max-requests-inflight", "20", "--max-mutating-requests-inflight", "10")
	cfg := srv.restConfig(t)
	cfg.QPS, cfg.Burst = -1, 0 // no client-side limit: the server's is tested
	admin := kubernetes.NewForConfigOrDie(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	fc := admin.FlowcontrolV1()
	pl, err := fc.PriorityLevelConfigurations().Create(ctx, &flowcontrolv1.PriorityLevelConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "one-seat"},
		Spec: flowcontrolv1.PriorityLevelConfigurationSpec{Type: flowcontrolv1.PriorityLevelEnablementLimited, Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{
			NominalConcurrencyShares: ptr.To(int32(1)), BorrowingLimitPercent: ptr.To(int32(0)),
			LimitResponse: flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeReject},
		}},
	}, metav1.CreateOptions{})
	must(t, err)
	fs, err := fc.FlowSchemas().Create(ctx, &flowcontrolv1.FlowSchema{
		ObjectMeta: metav1.ObjectMeta{Name: "noisy"},
		Spec: flowcontrolv1.FlowSchemaSpec{
			PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: "one-seat"},
			MatchingPrecedence:         200,
			Rules: []flowcontrolv1.PolicyRulesWithSubjects{{
				Subjects:      []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindUser, User: &flowcontrolv1.UserSubject{Name: "noisy"}}},
				ResourceRules: []flowcontrolv1.ResourcePolicyRule{{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}, Namespaces: []string{"*"}, ClusterScope: true}},
			}},
		},
	}, metav1.CreateOptions{})
	must(t, err)
	// The impersonated users may do anything (RBAC is not what is tested).
	_, err = admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-apf"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "e2e:apf"}},
	}, metav1.CreateOptions{})
	must(t, err)

	// A validating webhook holds the create of the ConfigMap "hold" until
	// released: the noisy user's one seat is taken meanwhile.
	arrived, release := make(chan struct{}, 1), make(chan struct{})
	hook := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var review struct {
			Request struct {
				UID  string `json:"uid"`
				Name string `json:"name"`
			} `json:"request"`
		}
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if review.Request.Name == "hold" {
			select {
			case arrived <- struct{}{}:
			default:
			}
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":%q,"allowed":true}}`, review.Request.UID)
	}))
	defer hook.Close()
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	_, err = admin.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-apf-hold"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    "hold.apf.e2e.example.com",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: ptr.To(hook.URL), CABundle: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: hook.Certificate().Raw})},
			Rules:                   []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create}, Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}}},
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To(int32(30)),
		}},
	}, metav1.CreateOptions{})
	must(t, err)

	// The noisy user's client-go, counting the 429s it is answered.
	var noisy429 atomic.Int64
	noisyCfg := rest.CopyConfig(cfg)
	noisyCfg.Impersonate = rest.ImpersonationConfig{UserName: "noisy", Groups: []string{"e2e:apf"}}
	noisyCfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(r)
			if err == nil && resp.StatusCode == http.StatusTooManyRequests {
				noisy429.Add(1)
			}
			return resp, err
		})
	})
	noisyClient := kubernetes.NewForConfigOrDie(noisyCfg)

	// The filter follows the new configuration, the level has its one
	// seat, and the webhook is in place.
	raw, err := rest.HTTPClientFor(noisyCfg)
	must(t, err)
	admEventually(t, "noisy classified into one-seat", func() (bool, string) {
		resp, err := raw.Get(srv.url + "/api/v1/namespaces/default/configmaps")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == 200 && resp.Header.Get(flowcontrolv1.ResponseHeaderMatchedFlowSchemaUID) == string(fs.UID) &&
			resp.Header.Get(flowcontrolv1.ResponseHeaderMatchedPriorityLevelConfigurationUID) == string(pl.UID), fmt.Sprint(resp.StatusCode, resp.Header)
	})
	admEventually(t, "one-seat has one seat", func() (bool, string) {
		m := metricsText(ctx, t, admin)
		return strings.Contains(m, `apiserver_flowcontrol_nominal_limit_seats{priority_level="one-seat"} 1`+"\n"), "no such line in /metrics"
	})
	admEventually(t, "webhook in place", func() (bool, string) {
		_, err := admin.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "probe-"}}, metav1.CreateOptions{})
		return err == nil, fmt.Sprint(err)
	})

	// The noisy user's create holds its seat; their list is refused with
	// 429 meanwhile and retried by client-go, and served once the seat is
	// free again.
	held := make(chan error, 1)
	go func() {
		_, err := noisyClient.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "hold"}}, metav1.CreateOptions{})
		held <- err
	}()
	select {
	case <-arrived:
	case err := <-held:
		t.Fatalf("the create returned before the webhook held it: %v", err)
	case <-ctx.Done():
		t.Fatal("the webhook was never called")
	}
	listed := make(chan error, 1)
	go func() {
		_, err := noisyClient.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
		listed <- err
	}()
	admEventually(t, "client-go answered 429", func() (bool, string) {
		return noisy429.Load() > 0, "no 429 yet"
	})
	if _, err := admin.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("the admin while noisy's seat is taken: %v", err)
	}
	close(release)
	must(t, <-held)
	if err := <-listed; err != nil {
		t.Fatalf("client-go's list after its 429s (%d): %v", noisy429.Load(), err)
	}
	if !strings.Contains(metricsText(ctx, t, admin), `apiserver_flowcontrol_rejected_requests_total{flow_schema="noisy",priority_level="one-seat",reason="concurrency-limit"}`) {
		t.Error("/metrics does not count noisy's rejections")
	}

	// A tenant's load beside a leader and the admin.
	must(t, admin.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, "e2e-apf-hold", metav1.DeleteOptions{}))
	for i := range 500 {
		_, err := admin.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("load-%03d", i)},
			Data:       map[string]string{"text": strings.Repeat("x", 200)},
		}, metav1.CreateOptions{})
		must(t, err)
	}
	leCfg := rest.CopyConfig(cfg)
	leCfg.Impersonate = rest.ImpersonationConfig{UserName: "system:kube-controller-manager", Groups: []string{"e2e:apf"}}
	leClient := kubernetes.NewForConfigOrDie(leCfg)
	leCtx, leStop := context.WithCancel(ctx)
	defer leStop()
	var leading atomic.Bool
	lostEarly := make(chan struct{}, 1)
	leDone := make(chan struct{})
	go func() {
		defer close(leDone)
		leaderelection.RunOrDie(leCtx, leaderelection.LeaderElectionConfig{
			Lock: &resourcelock.LeaseLock{
				LeaseMeta:  metav1.ObjectMeta{Namespace: "kube-system", Name: "e2e-apf"},
				Client:     leClient.CoordinationV1(),
				LockConfig: resourcelock.ResourceLockConfig{Identity: "e2e-apf"},
			},
			LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second,
			ReleaseOnCancel: true,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(context.Context) { leading.Store(true) },
				OnStoppedLeading: func() {
					if leCtx.Err() == nil {
						lostEarly <- struct{}{}
					}
				},
			},
		})
	}()
	admEventually(t, "leading", func() (bool, string) { return leading.Load(), "not yet" })
	leases, err := admin.CoordinationV1().Leases("kube-system").Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=e2e-apf"})
	must(t, err)
	defer leases.Stop()

	tenantCfg := rest.CopyConfig(cfg)
	tenantCfg.Impersonate = rest.ImpersonationConfig{UserName: "tenant", Groups: []string{"e2e:apf"}}
	tenantCfg.QPS, tenantCfg.Burst = -1, 0 // as fast as it can
	tenant := kubernetes.NewForConfigOrDie(tenantCfg)
	var renewals atomic.Int64
	loadDone := make(chan struct{})
	var lists, listErrs atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	const workers, maxListsEach = 40, 200
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Until the leader has renewed three times while loaded, at
			// most maxListsEach lists.
			for range maxListsEach {
				if renewals.Load() >= 3 || ctx.Err() != nil {
					return
				}
				l, err := tenant.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
				lists.Add(1)
				if err != nil || len(l.Items) < 500 {
					listErrs.Add(1)
					firstErr.CompareAndSwap(nil, fmt.Sprint(err))
				}
			}
		}()
	}
	go func() { wg.Wait(); close(loadDone) }()
	// The admin's requests meanwhile, and the renewals the watch sees.
	adminErrs := 0
	last := ""
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
loaded:
	for {
		select {
		case <-loadDone:
			break loaded
		case ev, ok := <-leases.ResultChan():
			if !ok {
				t.Fatal("the Lease watch ended")
			}
			if l, isLease := ev.Object.(*coordinationv1.Lease); isLease && ev.Type == watch.Modified && l.Spec.RenewTime != nil {
				if rt := l.Spec.RenewTime.String(); rt != last {
					last = rt
					renewals.Add(1)
				}
			}
		case <-tick.C:
			if _, err := admin.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err != nil {
				adminErrs++
			}
		case <-lostEarly:
			t.Fatal("the leader lost its lease under the load")
		}
	}
	select {
	case <-lostEarly:
		t.Fatal("the leader lost its lease under the load")
	default:
	}
	t.Logf("%d lists by %d workers while the leader renewed %d times; noisy's 429s: %d", lists.Load(), workers, renewals.Load(), noisy429.Load())
	if n := listErrs.Load(); n > 0 {
		t.Errorf("%d of %d lists failed; the first: %v", n, lists.Load(), firstErr.Load())
	}
	if renewals.Load() < 3 {
		t.Errorf("the leader renewed %d times during %d lists (want 3)", renewals.Load(), lists.Load())
	}
	if adminErrs > 0 {
		t.Errorf("%d of the admin's requests failed under the load", adminErrs)
	}
	m := metricsText(ctx, t, admin)
	for _, want := range []string{
		`apiserver_flowcontrol_dispatched_requests_total{flow_schema="system-leader-election",priority_level="leader-election"}`,
		`apiserver_flowcontrol_dispatched_requests_total{flow_schema="global-default",priority_level="global-default"}`,
		`apiserver_flowcontrol_dispatched_requests_total{flow_schema="exempt",priority_level="exempt"}`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	leStop()
	<-leDone
}

// metricsText is the server's /metrics as the admin reads it.
func metricsText(ctx context.Context, t *testing.T, c kubernetes.Interface) string {
	t.Helper()
	b, err := c.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		t.Fatalf("/metrics: %v", err)
	}
	return string(b)
}
