package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
)

// The replica tests run crdserver as operators run several replicas: a
// 3-member etcd cluster of processes on loopback, and 2 or 3 crdserver
// processes on it, all trusting one CA. Each test puts a fault to it (lost
// quorum, a frozen member, a killed replica, a killed controller leader,
// concurrent same-kind CRDs) and checks that nothing acknowledged is lost,
// nothing is done more than once, and the service goes on. The figures
// they log are in the README's "Running several replicas".

var widgetsGVR = schema.GroupVersionResource{Group: "replicas.example.com", Version: "v1", Resource: "widgets"}

// replica is one crdserver process of a replicated deployment.
type replica struct {
	*server
	dyn  dynamic.Interface
	crds apiextensionsclient.Interface
}

// startReplicas starts n crdserver processes on one etcd cluster. The
// first makes the CA (in its data dir); the others are given it with
// --ca-cert-file and --ca-key-file, as the README says.
func startReplicas(t *testing.T, etcd *etcdCluster, n int) []*replica {
	t.Helper()
	var out []*replica
	first := startServer(t, "--etcd-servers", etcd.endpoints())
	out = append(out, newReplica(t, first))
	pki := filepath.Join(first.dataDir, "pki")
	for i := 1; i < n; i++ {
		s := startServer(t, "--etcd-servers", etcd.endpoints(),
			"--ca-cert-file", filepath.Join(pki, "ca.crt"), "--ca-key-file", filepath.Join(pki, "ca.key"))
		out = append(out, newReplica(t, s))
	}
	return out
}

func newReplica(t *testing.T, s *server) *replica {
	t.Helper()
	cfg := s.restConfig(t)
	cfg.QPS, cfg.Burst = -1, 0
	return &replica{server: s, dyn: dynamic.NewForConfigOrDie(cfg), crds: apiextensionsclient.NewForConfigOrDie(cfg)}
}

// widgetCRD is a namespaced CRD of group replicas.example.com, with v1
// (and v2, for migrations) served.
func widgetCRD(plural, kind string, versions ...string) *apiextensionsv1.CustomResourceDefinition {
	if len(versions) == 0 {
		versions = []string{"v1"}
	}
	preserve := true
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + ".replicas.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "replicas.example.com",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Singular: strings.TrimSuffix(plural, "s"), Kind: kind, ListKind: kind + "List"},
			Scope: apiextensionsv1.NamespaceScoped,
		},
	}
	for i, v := range versions {
		crd.Spec.Versions = append(crd.Spec.Versions, apiextensionsv1.CustomResourceDefinitionVersion{
			Name: v, Served: true, Storage: i == 0,
			Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
				Type: "object", XPreserveUnknownFields: &preserve,
			}},
		})
	}
	return crd
}

// createCRD creates a CRD through r and waits until every replica serves
// its resource.
func createCRD(t *testing.T, r *replica, crd *apiextensionsv1.CustomResourceDefinition, all []*replica) {
	t.Helper()
	if _, err := r.crds.ApiextensionsV1().CustomResourceDefinitions().Create(context.Background(), crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	gvr := schema.GroupVersionResource{Group: crd.Spec.Group, Version: crd.Spec.Versions[0].Name, Resource: crd.Spec.Names.Plural}
	for _, o := range all {
		waitServed(t, o, gvr, time.Minute)
	}
}

// waitServed waits until r lists gvr, and returns how long that took.
func waitServed(t *testing.T, r *replica, gvr schema.GroupVersionResource, timeout time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		_, err := r.dyn.Resource(gvr).Namespace("default").List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("%s is not served by %s after %v", gvr.Resource, r.url, timeout)
	}
	return time.Since(start)
}

func widget(ns, name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "replicas.example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec":     map[string]any{"size": 1},
	}}
}

// createUntilAccepted creates obj through r, trying again while etcd has no
// quorum; it returns once the create is acknowledged.
func createUntilAccepted(t *testing.T, r *replica, gvr schema.GroupVersionResource, obj *unstructured.Unstructured, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := r.dyn.Resource(gvr).Namespace(obj.GetNamespace()).Create(ctx, obj, metav1.CreateOptions{})
		cancel()
		if err == nil || apierrors.IsAlreadyExists(err) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("create %s: %v", obj.GetName(), err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// eventWatcher follows a resource on one replica as a client would: it
// resumes from the last resourceVersion it saw whenever the watch ends (a
// 410 Expired ends it for good), and records the names of ADDED objects.
type eventWatcher struct {
	mu     sync.Mutex
	added  map[string]time.Time
	errors []string
	stop   context.CancelFunc
}

func watchAdded(t *testing.T, r *replica, gvr schema.GroupVersionResource) *eventWatcher {
	t.Helper()
	list, err := r.dyn.Resource(gvr).Namespace("default").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &eventWatcher{added: map[string]time.Time{}, stop: cancel}
	rw, err := watchtools.NewRetryWatcherWithContext(ctx, list.GetResourceVersion(), &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return r.dyn.Resource(gvr).Namespace("default").Watch(ctx, opts)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); rw.Stop() })
	go func() {
		for ev := range rw.ResultChan() {
			w.mu.Lock()
			switch ev.Type {
			case watch.Added:
				if u, ok := ev.Object.(*unstructured.Unstructured); ok {
					w.added[u.GetName()] = time.Now()
				}
			case watch.Error:
				w.errors = append(w.errors, fmt.Sprint(apierrors.FromObject(ev.Object)))
			}
			w.mu.Unlock()
		}
	}()
	return w
}

// missing returns the names the watcher has not seen ADDED.
func (w *eventWatcher) missing(names []string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, n := range names {
		if _, ok := w.added[n]; !ok {
			out = append(out, n)
		}
	}
	return out
}

// waitAll waits until the watcher saw every name, or timeout; it returns
// the names it missed.
func (w *eventWatcher) waitAll(names []string, timeout time.Duration) []string {
	deadline := time.Now().Add(timeout)
	for {
		m := w.missing(names)
		if len(m) == 0 || time.Now().After(deadline) {
			return m
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestReplicasShareOneCA: a kubeconfig of one replica works on another,
// and a client certificate signed by the shared CA too.
func TestReplicasShareOneCA(t *testing.T) {
	etcd := startEtcdCluster(t, 3)
	rs := startReplicas(t, etcd, 2)
	cfg := rs[0].restConfig(t)
	cfg.Host = rs[1].url
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Namespaces().Get(context.Background(), "default", metav1.GetOptions{}); err != nil {
		t.Fatalf("replica 0's kubeconfig on replica 1: %v", err)
	}
}

// TestReplicasQuorumLoss: while etcd has lost its quorum, every replica's
// watch of etcd fails; once it is back, every change made since reaches
// every watcher on every replica (none is skipped), and a CRD created as
// the cluster came back is served everywhere.
func TestReplicasQuorumLoss(t *testing.T) {
	etcd := startEtcdCluster(t, 3)
	rs := startReplicas(t, etcd, 2)
	createCRD(t, rs[0], widgetCRD("widgets", "Widget"), rs)
	var watchers []*eventWatcher
	for _, r := range rs {
		watchers = append(watchers, watchAdded(t, r, widgetsGVR))
	}
	createUntilAccepted(t, rs[0], widgetsGVR, widget("default", "before"), time.Minute)

	// Two of three members gone: no quorum. Wait until the replicas see it.
	etcd.stop(1)
	etcd.stop(2)
	for _, r := range rs {
		waitReadyz(t, r, false, time.Minute)
	}
	time.Sleep(3 * time.Second) // the caches' etcd watches fail meanwhile
	etcd.start(1)
	etcd.start(2)

	// As soon as writes go through again, through both replicas.
	var names []string
	for i := 0; i < 4; i++ {
		name := fmt.Sprintf("after-%d", i)
		createUntilAccepted(t, rs[i%2], widgetsGVR, widget("default", name), 2*time.Minute)
		names = append(names, name)
	}
	created := time.Now()
	gadgets := widgetCRD("gadgets", "Gadget")
	for {
		_, err := rs[0].crds.ApiextensionsV1().CustomResourceDefinitions().Create(context.Background(), gadgets, metav1.CreateOptions{})
		if err == nil || apierrors.IsAlreadyExists(err) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	names = append(names, "before")
	missed := 0
	for i, w := range watchers {
		m := w.waitAll(names, time.Minute)
		missed += len(m)
		if len(m) > 0 {
			t.Errorf("the watcher on replica %d missed %v (errors %v); its log:\n%s", i, m, w.errors, rs[i].log)
		}
	}
	gvr := schema.GroupVersionResource{Group: "replicas.example.com", Version: "v1", Resource: "gadgets"}
	var propagation []string
	for i, r := range rs {
		waitServed(t, r, gvr, time.Minute)
		propagation = append(propagation, fmt.Sprintf("replica %d %v", i, time.Since(created).Round(time.Millisecond)))
	}
	t.Logf("after a quorum loss: %d events missed by %d watchers; the CRD created on replica 0 served after %s", missed, len(watchers), strings.Join(propagation, ", "))
}

// waitReadyz waits until /readyz on r is ok (or not ok).
func waitReadyz(t *testing.T, r *replica, ready bool, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if readyz(t, r) == ready {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("/readyz of %s did not become ready=%v within %v", r.url, ready, timeout)
}

func readyz(t *testing.T, r *replica) bool {
	t.Helper()
	client, err := rest.HTTPClientFor(r.restConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	defer client.CloseIdleConnections()
	client.Timeout = 10 * time.Second
	resp, err := client.Get(r.url + "/readyz")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode == http.StatusOK
}

var requestTotal = regexp.MustCompile(`^apiserver_request_total\{([^}]*)\} (\d+)`)

// requests sums apiserver_request_total of r for a verb, resource and
// scope ("resource": one object; "namespace": a collection, as
// deletecollection is counted, verb DELETE, in Kubernetes' metrics).
func requests(t *testing.T, r *replica, verb, resource, scope string) int {
	t.Helper()
	client, err := rest.HTTPClientFor(r.restConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	defer client.CloseIdleConnections()
	resp, err := client.Get(r.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	total := 0
	for _, line := range strings.Split(string(data), "\n") {
		m := requestTotal.FindStringSubmatch(line)
		if m == nil || !strings.Contains(m[1], `verb="`+verb+`"`) || !strings.Contains(m[1], `resource="`+resource+`"`) || !strings.Contains(m[1], `scope="`+scope+`"`) {
			continue
		}
		n, _ := strconv.Atoi(m[2])
		total += n
	}
	return total
}

// leaderOf returns the index of the replica whose log says it leads.
func leaderOf(t *testing.T, rs []*replica) int {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		for i, r := range rs {
			if r.running() && strings.Contains(r.log.String(), "leading: starting the controllers") {
				return i
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal("no replica leads")
	return -1
}

// TestReplicasRunControllersOnce: with three replicas, a storage migration
// is run by one of them (its status reports the real totals), and the
// namespace controller and the garbage collector work from one replica: the
// deletes they send are not multiplied by the number of replicas.
func TestReplicasRunControllersOnce(t *testing.T) {
	etcd := startEtcdCluster(t, 3)
	rs := startReplicas(t, etcd, 3)
	ctx := context.Background()
	leader := leaderOf(t, rs)

	// A migration of 300 objects, v1 → v2.
	crd := widgetCRD("widgets", "Widget", "v1", "v2")
	createCRD(t, rs[0], crd, rs)
	const n = 300
	var wg sync.WaitGroup
	for w := 0; w < 6; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 6 {
				createUntilAccepted(t, rs[i%3], widgetsGVR, widget("default", fmt.Sprintf("m-%03d", i)), time.Minute)
			}
		}()
	}
	wg.Wait()
	crds := rs[1].crds.ApiextensionsV1().CustomResourceDefinitions()
	got, err := crds.Get(ctx, crd.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got.Spec.Versions[0].Storage, got.Spec.Versions[1].Storage = false, true
	if _, err := crds.Update(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // every replica sees the new storage version
	svms := rs[2].dyn.Resource(schema.GroupVersionResource{Group: "storagemigration.k8s.io", Version: "v1", Resource: "storageversionmigrations"})
	if _, err := svms.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "storagemigration.k8s.io/v1", "kind": "StorageVersionMigration",
		"metadata": map[string]any{"name": "widgets"},
		"spec":     map[string]any{"resource": map[string]any{"group": "replicas.example.com", "resource": "widgets"}},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var conds []any
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		m, err := svms.Get(ctx, "widgets", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		conds, _, _ = unstructured.NestedSlice(m.Object, "status", "conditions")
		for _, c := range conds {
			if c := c.(map[string]any); (c["type"] == "Succeeded" || c["type"] == "Failed") && c["status"] == "True" {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("the migration did not end: %v", conds)
	}
	status := map[string]string{}
	for _, c := range conds {
		c := c.(map[string]any)
		status[c["type"].(string)] = fmt.Sprint(c["status"], " ", c["message"])
	}
	if status["Succeeded"] != "True migrated 300 objects to the storage version" || status["Running"] != "False migrated 300 objects" {
		t.Fatalf("migration status: %v", status)
	}

	// A namespace of 50 widgets deleted, and a widget owning 50 others.
	cs, err := kubernetes.NewForConfig(rs[0].restConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "doomed"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 50; i++ {
		createUntilAccepted(t, rs[i%3], widgetsGVR, widget("doomed", fmt.Sprintf("d-%02d", i)), time.Minute)
	}
	owner, err := rs[0].dyn.Resource(widgetsGVR).Namespace("default").Create(ctx, widget("default", "owner"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 50; i++ {
		dep := widget("default", fmt.Sprintf("dep-%02d", i))
		dep.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "replicas.example.com/v1", Kind: "Widget", Name: "owner", UID: owner.GetUID()}})
		createUntilAccepted(t, rs[i%3], widgetsGVR, dep, time.Minute)
	}
	before := make([]int, len(rs))
	for i, r := range rs {
		before[i] = requests(t, r, "DELETE", "widgets", "resource")
	}
	if err := cs.CoreV1().Namespaces().Delete(ctx, "doomed", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := rs[1].dyn.Resource(widgetsGVR).Namespace("default").Delete(ctx, "owner", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, nsErr := cs.CoreV1().Namespaces().Get(ctx, "doomed", metav1.GetOptions{})
		deps, err := rs[2].dyn.Resource(widgetsGVR).Namespace("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		left := 0
		for _, d := range deps.Items {
			if strings.HasPrefix(d.GetName(), "dep-") {
				left++
			}
		}
		return apierrors.IsNotFound(nsErr) && left == 0, nil
	})
	if err != nil {
		t.Fatal("the namespace or the dependents are still there")
	}
	deleteCollections, deletes := make([]int, len(rs)), make([]int, len(rs))
	for i, r := range rs {
		deleteCollections[i] = requests(t, r, "DELETE", "widgets", "namespace")
		deletes[i] = requests(t, r, "DELETE", "widgets", "resource") - before[i]
	}
	t.Logf("controller leader: replica %d; deletecollection of widgets by replica: %v; deletes of widgets by replica (50 dependents + the owner): %v", leader, deleteCollections, deletes)
	sumDC, sumD := 0, 0
	for i := range rs {
		sumDC += deleteCollections[i]
		sumD += deletes[i]
		if i != leader && deleteCollections[i] > 0 {
			t.Errorf("replica %d, not the leader, sent %d deletecollections", i, deleteCollections[i])
		}
	}
	if sumDC == 0 || sumDC > 10 {
		t.Errorf("%d deletecollection calls emptied one namespace", sumDC)
	}
	if sumD < 51 || sumD > 60 {
		t.Errorf("%d deletes for 50 dependents and their owner", sumD)
	}
}

// TestReplicasControllerFailover: when the replica that runs the
// controllers is killed, another takes over (and its controllers work).
func TestReplicasControllerFailover(t *testing.T) {
	etcd := startEtcdCluster(t, 3)
	rs := startReplicas(t, etcd, 3)
	leader := leaderOf(t, rs)
	killed := time.Now()
	rs[leader].kill()
	var rest []*replica
	for i, r := range rs {
		if i != leader {
			rest = append(rest, r)
		}
	}
	next := leaderOf(t, rest)
	failover := time.Since(killed)
	createCRD(t, rest[0], widgetCRD("widgets", "Widget"), rest)
	t.Logf("controller leader replaced %v after SIGKILL (lease duration 10 s); replica %d now leads", failover.Round(time.Millisecond), next)
}

// load writes widgets through replicas for a while and counts what was
// acknowledged, per second.
type load struct {
	acked atomic.Int64
	names sync.Map // name → replica index
	times sync.Map // name → when it was acknowledged
	fails atomic.Int64
	stop  chan struct{}
	wg    sync.WaitGroup
}

func startLoad(t *testing.T, rs []*replica, perReplica int, prefix string) *load {
	ld := &load{stop: make(chan struct{})}
	for ri, r := range rs {
		for w := 0; w < perReplica; w++ {
			ld.wg.Add(1)
			go func() {
				defer ld.wg.Done()
				for i := 0; ; i++ {
					select {
					case <-ld.stop:
						return
					default:
					}
					name := fmt.Sprintf("%s-%d-%d-%d", prefix, ri, w, i)
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					_, err := r.dyn.Resource(widgetsGVR).Namespace("default").Create(ctx, widget("default", name), metav1.CreateOptions{})
					cancel()
					if err == nil {
						ld.acked.Add(1)
						ld.names.Store(name, ri)
						ld.times.Store(name, time.Now())
					} else {
						ld.fails.Add(1)
						time.Sleep(50 * time.Millisecond)
					}
				}
			}()
		}
	}
	return ld
}

func (ld *load) halt() { close(ld.stop); ld.wg.Wait() }

// rate counts the acknowledged writes over d.
func (ld *load) rate(d time.Duration) float64 {
	before := ld.acked.Load()
	time.Sleep(d)
	return float64(ld.acked.Load()-before) / d.Seconds()
}

// TestReplicasFrozenEtcdMember: with quorum intact, one frozen etcd member
// (the leader, then a follower) neither stops writes on any replica nor
// makes /readyz flap.
func TestReplicasFrozenEtcdMember(t *testing.T) {
	etcd := startEtcdCluster(t, 3)
	rs := startReplicas(t, etcd, 2)
	createCRD(t, rs[0], widgetCRD("widgets", "Widget"), rs)
	var watchers []*eventWatcher
	for _, r := range rs {
		watchers = append(watchers, watchAdded(t, r, widgetsGVR))
	}
	ld := startLoad(t, rs, 4, "frozen")
	defer ld.halt()
	time.Sleep(2 * time.Second) // warm up
	before := ld.rate(8 * time.Second)

	for _, which := range []string{"leader", "follower"} {
		victim := etcd.leader()
		if which == "follower" {
			victim = (victim + 1) % 3
		}
		// /readyz of each replica, every 250 ms, while the member is frozen.
		var notReady atomic.Int64
		probing := make(chan struct{})
		var probes sync.WaitGroup
		for _, r := range rs {
			probes.Add(1)
			go func() {
				defer probes.Done()
				for {
					select {
					case <-probing:
						return
					case <-time.After(250 * time.Millisecond):
						if !readyz(t, r) {
							notReady.Add(1)
						}
					}
				}
			}()
		}
		frozenAt := time.Now()
		etcd.freeze(victim)
		during := ld.rate(15 * time.Second)
		close(probing)
		probes.Wait()
		thawedAt := time.Now()
		etcd.thaw(victim)
		// How late the watchers saw what was written while it was frozen.
		var late time.Duration
		ld.times.Range(func(k, v any) bool {
			acked := v.(time.Time)
			if acked.Before(frozenAt) || acked.After(thawedAt) {
				return true
			}
			for _, w := range watchers {
				w.mu.Lock()
				seen, ok := w.added[k.(string)]
				w.mu.Unlock()
				if !ok {
					seen = time.Now() // not yet: at least this late
				}
				late = max(late, seen.Sub(acked))
			}
			return true
		})
		t.Logf("etcd %s frozen for 15 s: %.0f writes/s before, %.0f during (%.0f%%); /readyz not ready %d times; watch events at most %v late",
			which, before, during, 100*during/before, notReady.Load(), late.Round(time.Millisecond))
		if late > 10*time.Second {
			t.Errorf("with the %s frozen, a watch event came %v after its write", which, late)
			for i, r := range rs {
				t.Logf("replica %d's log:\n%s", i, r.log)
			}
		}
		if during < 0.3*before {
			t.Errorf("with the %s frozen, writes fell to %.0f/s from %.0f/s", which, during, before)
		}
		if notReady.Load() > 0 {
			t.Errorf("/readyz said not ready %d times while etcd had a quorum", notReady.Load())
		}
		etcd.waitHealthy(time.Minute)
		time.Sleep(3 * time.Second)
	}
}

// TestReplicasKillUnderLoad: a replica SIGKILLed under write load loses no
// write it acknowledged; the others serve them all.
func TestReplicasKillUnderLoad(t *testing.T) {
	etcd := startEtcdCluster(t, 3)
	rs := startReplicas(t, etcd, 2)
	createCRD(t, rs[0], widgetCRD("widgets", "Widget"), rs)
	ld := startLoad(t, rs, 4, "kill")
	time.Sleep(3 * time.Second)
	rs[1].kill()
	time.Sleep(2 * time.Second)
	ld.halt()
	list, err := rs[0].dyn.Resource(widgetsGVR).Namespace("default").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, it := range list.Items {
		have[it.GetName()] = true
	}
	var lost []string
	acked := 0
	ld.names.Range(func(k, _ any) bool {
		acked++
		if !have[k.(string)] {
			lost = append(lost, k.(string))
		}
		return true
	})
	sort.Strings(lost)
	t.Logf("replica 1 killed under load: %d writes acknowledged, %d lost", acked, len(lost))
	if len(lost) > 0 {
		t.Fatalf("acknowledged writes lost: %v", lost)
	}
}

// TestReplicasNamesRace: of two CRDs with one kind, created at the same
// instant on two replicas, exactly one is accepted — 20 pairs.
func TestReplicasNamesRace(t *testing.T) {
	etcd := startEtcdCluster(t, 3)
	rs := startReplicas(t, etcd, 2)
	ctx := context.Background()
	const pairs = 20
	var wg sync.WaitGroup
	for i := 0; i < pairs; i++ {
		for j, plural := range []string{"racers", "runners"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				crd := widgetCRD(plural, "Racer")
				crd.Spec.Group = fmt.Sprintf("race%d.example.com", i)
				crd.Name = plural + "." + crd.Spec.Group
				crd.Spec.Names.ListKind = plural + "List"
				if _, err := rs[j].crds.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil {
					t.Error(err)
				}
			}()
		}
	}
	wg.Wait()
	crds := rs[0].crds.ApiextensionsV1().CustomResourceDefinitions()
	both := 0
	for i := 0; i < pairs; i++ {
		var accepted, conflict int
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			accepted, conflict = 0, 0
			for _, plural := range []string{"racers", "runners"} {
				c, err := crds.Get(ctx, fmt.Sprintf("%s.race%d.example.com", plural, i), metav1.GetOptions{})
				if err != nil {
					return false, nil
				}
				for _, cond := range c.Status.Conditions {
					if cond.Type == apiextensionsv1.NamesAccepted {
						if cond.Status == apiextensionsv1.ConditionTrue {
							accepted++
						} else if cond.Reason == "KindConflict" {
							conflict++
						}
					}
				}
			}
			return accepted+conflict == 2, nil
		})
		if err != nil || accepted != 1 {
			both++
			t.Errorf("pair %d: %d accepted, %d with KindConflict", i, accepted, conflict)
		}
	}
	t.Logf("%d same-kind CRD pairs created on two replicas at once: %d with both or neither accepted", pairs, both)
}
