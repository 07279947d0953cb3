package integration

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/crdserver/crdserver/server"
)

// startExternalEtcd runs an etcd server on a loopback port, as an operator's
// cluster would be, and returns its client URL.
func startExternalEtcd(t *testing.T) string {
	t.Helper()
	// Both ports are picked while both listeners are open, so the kernel
	// cannot hand out the same one twice (it would, to listeners opened
	// one after the other's close).
	var ls []net.Listener
	port := func() int {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		return l.Addr().(*net.TCPAddr).Port
	}
	clientPort, peerPort := port(), port()
	for _, l := range ls {
		_ = l.Close()
	}
	cfg := embed.NewConfig()
	cfg.Dir = t.TempDir()
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	client, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", clientPort))
	peer, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", peerPort))
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*client}, []url.URL{*client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*peer}, []url.URL{*peer}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		t.Fatal("etcd did not start")
	}
	return client.String()
}

// Two crdserver replicas on one external etcd serve the same state: what
// one writes, the other lists and watches.
func TestReplicasShareExternalEtcd(t *testing.T) {
	endpoint := startExternalEtcd(t)
	external := func(c *server.Config) { c.EtcdServers = []string{endpoint} }
	a := start(t, external)
	b := start(t, external)
	a.createCRD(cronTabCRD(t))
	b.waitEstablished("crontabs.stable.example.com")

	w, err := b.dyn.Resource(crontabs).Namespace("default").Watch(b.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if _, err := a.dyn.Resource(crontabs).Namespace("default").Create(a.ctx, cronTab("shared", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if ev := next(t, w); ev.Type != "ADDED" {
		t.Fatalf("replica b saw %s", ev.Type)
	}
	got, err := b.dyn.Resource(crontabs).Namespace("default").Get(b.ctx, "shared", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// A write through b with a's resourceVersion works: one revision space.
	got.SetLabels(map[string]string{"via": "b"})
	if _, err := b.dyn.Resource(crontabs).Namespace("default").Update(b.ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(a.ctx, 10*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		l, err := a.dyn.Resource(crontabs).Namespace("default").List(ctx, metav1.ListOptions{LabelSelector: "via=b"})
		return err == nil && len(l.Items) == 1, err
	})
	if err != nil {
		t.Fatal("replica a did not see b's write")
	}
}
