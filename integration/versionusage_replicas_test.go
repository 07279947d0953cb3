package integration

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/crdserver/crdserver/internal/apis/versionreport"
	"github.com/crdserver/crdserver/internal/pki"
	"github.com/crdserver/crdserver/internal/usage"
	"github.com/crdserver/crdserver/server"
)

// onlyAAgent is the user agent of the client that calls replica A only.
const onlyAAgent = "only-a-client/1.0"

var betaGizmos = schema.GroupVersionResource{Group: "retire.example.com", Version: "v1beta1", Resource: "gizmos"}

// TestVersionUsageAcrossReplicas: two replicas on one external etcd, each
// with a data folder of its own. A client that calls replica A only is in
// replica B's VersionReport of v1beta1 (A's counts reach B through A's
// record in etcd), with its user, its user agent and its requests by verb,
// exactly. After both replicas stop and start again on the same data
// folders, both report it with the same counts: each replica's record is
// under the id its data folder keeps, the records are summed once, A goes
// on counting from its record (not from twice it), and what A counted
// since its last periodic write reaches its record as it stops.
func TestVersionUsageAcrossReplicas(t *testing.T) {
	endpoint := startExternalEtcd(t)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	dirA, dirB := t.TempDir(), t.TempDir()
	// A replica on the test's etcd, with its data in dir, writing its
	// record every interval.
	const flush = 200 * time.Millisecond
	replica := func(dir string, interval time.Duration) func(*server.Config) {
		return func(c *server.Config) {
			c.EtcdServers = []string{endpoint}
			c.DataDir = dir
			c.VersionUsageFlushInterval = interval
		}
	}
	// Seen times are whole seconds.
	begin := time.Now().Truncate(time.Second)
	a, b := start(t, replica(dirA, flush)), start(t, replica(dirB, flush))
	idA, idB := replicaID(t, dirA), replicaID(t, dirB)
	if idA == idB {
		t.Fatalf("both replicas are %q", idA)
	}
	a.createCRD(gizmosCRD("v1"))
	b.waitEstablished("gizmos.retire.example.com")

	// The client calls A only, on v1beta1.
	c := agentClient(t, a, onlyAAgent)
	for _, name := range []string{"g1", "g2", "g3"} {
		obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "retire.example.com/v1beta1", "kind": "Gizmo",
			"metadata": map[string]any{"name": name, "namespace": "default"}, "spec": map[string]any{"size": 1}}}
		if _, err := c.Resource(betaGizmos).Namespace("default").Create(a.ctx, obj, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"g1", "g2"} {
		if _, err := c.Resource(betaGizmos).Namespace("default").Get(a.ctx, name, metav1.GetOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if l, err := c.Resource(betaGizmos).Namespace("default").List(a.ctx, metav1.ListOptions{}); err != nil || len(l.Items) != 3 {
		t.Fatalf("list: %v", err)
	}
	if err := c.Resource(betaGizmos).Namespace("default").Delete(a.ctx, "g3", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"create": 3, "get": 2, "list": 1, "delete": 1}
	sent := time.Now()

	// B reports A's client once A has written its record. B's own reads
	// of VersionReports (crdserver.io) are not the gizmos' clients.
	onB := waitBetaClient(t, b, "replica b", want)
	checkClient(t, "replica b", onB, want, begin, sent)
	onA := waitBetaClient(t, a, "replica a", want)
	checkClient(t, "replica a", onA, want, begin, sent)
	if !onA.FirstSeen.Equal(&onB.FirstSeen) {
		t.Errorf("first seen: %v on replica a, %v on replica b", onA.FirstSeen, onB.FirstSeen)
	}
	// Nothing called v1.
	if cs := reportClients(t, b, "v1.gizmos.retire.example.com"); len(cs) != 0 {
		t.Errorf("v1's clients on replica b: %+v", cs)
	}

	// Both stop (each writes its record as it does), and start again on
	// the same data folders and etcd; A now writes its record only when
	// it stops.
	for name, e := range map[string]*env{"a": a, "b": b} {
		if err := e.srv.Close(); err != nil {
			t.Fatalf("stop replica %s: %v", name, err)
		}
	}
	a, b = start(t, replica(dirA, time.Hour)), start(t, replica(dirB, flush))
	if id := replicaID(t, dirA); id != idA {
		t.Errorf("replica a was %q, is %q after its restart", idA, id)
	}
	if id := replicaID(t, dirB); id != idB {
		t.Errorf("replica b was %q, is %q after its restart", idB, id)
	}
	a.waitEstablished("gizmos.retire.example.com")
	b.waitEstablished("gizmos.retire.example.com")
	// One record a replica, A's with the client's counts once.
	checkRecords(t, cli, map[string]map[string]int64{idA: want, idB: nil})
	afterA := waitBetaClient(t, a, "replica a after the restart", want)
	checkClient(t, "replica a after the restart", afterA, want, begin, sent)
	afterB := waitBetaClient(t, b, "replica b after the restart", want)
	checkClient(t, "replica b after the restart", afterB, want, begin, sent)
	for what, got := range map[string]versionreport.Client{"replica a": afterA, "replica b": afterB} {
		if !got.FirstSeen.Equal(&onA.FirstSeen) {
			t.Errorf("%s after the restart: first seen %v, was %v", what, got.FirstSeen, onA.FirstSeen)
		}
	}
	if !afterA.LastSeen.Equal(&afterB.LastSeen) {
		t.Errorf("after the restart, last seen: %v on replica a, %v on replica b", afterA.LastSeen, afterB.LastSeen)
	}

	// A counts on from its record: one more get. B sees it once A has
	// written its record, which it does as it stops.
	c = agentClient(t, a, onlyAAgent)
	if _, err := c.Resource(betaGizmos).Namespace("default").Get(a.ctx, "g1", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	before := maps.Clone(want)
	want["get"]++
	sent = time.Now()
	checkClient(t, "replica a after one more get", waitBetaClient(t, a, "replica a after one more get", want), want, begin, sent)
	checkClient(t, "replica b before replica a writes its record", waitBetaClient(t, b, "replica b before replica a writes its record", before), before, begin, sent)
	if err := a.srv.Close(); err != nil {
		t.Fatalf("stop replica a: %v", err)
	}
	checkRecords(t, cli, map[string]map[string]int64{idA: want, idB: nil})
	checkClient(t, "replica b once replica a stopped", waitBetaClient(t, b, "replica b once replica a stopped", want), want, begin, sent)

	// A starts from the record it wrote as it stopped.
	a = start(t, replica(dirA, flush))
	a.waitEstablished("gizmos.retire.example.com")
	checkClient(t, "replica a after its second restart", waitBetaClient(t, a, "replica a after its second restart", want), want, begin, sent)
	checkClient(t, "replica b after replica a's second restart", waitBetaClient(t, b, "replica b after replica a's second restart", want), want, begin, sent)
	checkRecords(t, cli, map[string]map[string]int64{idA: want, idB: nil})
}

// replicaID is the id a replica's data folder keeps.
func replicaID(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "replica-id"))
	if err != nil {
		t.Fatal(err)
	}
	id := strings.TrimSpace(string(b))
	if id == "" {
		t.Fatalf("%s: an empty replica id", dir)
	}
	return id
}

// agentClient is the admin's client of e with its own user agent.
func agentClient(t *testing.T, e *env, agent string) dynamic.Interface {
	t.Helper()
	cfg := rest.CopyConfig(e.cfg)
	cfg.UserAgent = agent
	c, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// reportClients are the clients of the VersionReport name on e.
func reportClients(t *testing.T, e *env, name string) []versionreport.Client {
	t.Helper()
	r := e.do("GET", "/apis/crdserver.io/v1alpha1/versionreports/"+name, "")
	if r.code != http.StatusOK {
		t.Fatalf("versionreport %s: %d %s", name, r.code, r.body)
	}
	var rep versionreport.VersionReport
	if err := json.Unmarshal(r.body, &rep); err != nil {
		t.Fatal(err)
	}
	return rep.Status.Clients
}

// waitBetaClient waits (30s at most: a replica writes its record every
// flush interval) until e's VersionReport of gizmos v1beta1 counts as many
// requests of the only-A client as want, or more, and returns the client;
// it fails unless the client is the report's only one.
func waitBetaClient(t *testing.T, e *env, what string, want map[string]int64) versionreport.Client {
	t.Helper()
	var total int64
	for _, n := range want {
		total += n
	}
	var last []versionreport.Client
	err := wait.PollUntilContextTimeout(e.ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		last = reportClients(t, e, "v1beta1.gizmos.retire.example.com")
		for _, c := range last {
			if c.UserAgent == onlyAAgent {
				var n int64
				for _, v := range c.Requests {
					n += v
				}
				return n >= total, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("%s: the client of replica a with %d requests is not reported within 30s; clients: %s", what, total, mustJSON(last))
	}
	if len(last) != 1 {
		t.Fatalf("%s: clients %s, want the client of replica a only", what, mustJSON(last))
	}
	return last[0]
}

// checkClient checks the only-A client as a replica reports it: the
// admin, its user agent, exactly the requests sent, seen between begin
// and sent.
func checkClient(t *testing.T, what string, got versionreport.Client, want map[string]int64, begin, sent time.Time) {
	t.Helper()
	if got.User != pki.AdminUser || got.UserAgent != onlyAAgent {
		t.Errorf("%s: client %q (%q), want %q (%q)", what, got.User, got.UserAgent, pki.AdminUser, onlyAAgent)
	}
	if !maps.Equal(got.Requests, want) {
		t.Errorf("%s: requests %v, want %v", what, got.Requests, want)
	}
	if got.NotServed != 0 {
		t.Errorf("%s: %d requests not served, want none", what, got.NotServed)
	}
	if first, last := got.FirstSeen.Time, got.LastSeen.Time; first.Before(begin) || last.Before(first) || last.After(sent) {
		t.Errorf("%s: seen from %v to %v, want within %v and %v", what, got.FirstSeen, got.LastSeen, begin, sent)
	}
}

// checkRecords checks the version usage records in etcd: one a replica,
// under its id, and in each the only-A client's requests to gizmos
// v1beta1 by verb (nil: none).
func checkRecords(t *testing.T, cli *clientv3.Client, want map[string]map[string]int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, usage.Prefix, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, kv := range resp.Kvs {
		id := strings.TrimPrefix(string(kv.Key), usage.Prefix)
		keys = append(keys, id)
		var rec struct {
			Replica string        `json:"replica"`
			Entries []usage.Entry `json:"entries"`
		}
		if err := json.Unmarshal(kv.Value, &rec); err != nil {
			t.Errorf("record %s: %v", kv.Key, err)
			continue
		}
		got := map[string]int64{}
		for _, e := range rec.Entries {
			if e.Group == betaGizmos.Group && e.Version == betaGizmos.Version && e.Resource == betaGizmos.Resource && e.UserAgent == onlyAAgent {
				got[e.Verb] += e.Count
			}
		}
		if w := want[id]; rec.Replica != id || !maps.Equal(got, w) {
			t.Errorf("record %s (of %q): the client's requests %v, want %v", kv.Key, rec.Replica, got, w)
		}
	}
	slices.Sort(keys)
	if wantKeys := slices.Sorted(maps.Keys(want)); !slices.Equal(keys, wantKeys) {
		t.Errorf("records of replicas %v, want %v", keys, wantKeys)
	}
}
