package robustness

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/crdserver/crdserver/e2e/robustness/check"
)

// Setups a run is made on.
const (
	// cluster: three crdserver replicas on a three-member etcd, each
	// replica reaching every member through a proxy of its own.
	cluster = "cluster"
	// embedded: one crdserver on its embedded store.
	embedded = "embedded"
)

// fault is one fault a run injects while the traffic runs. inject
// returns once the fault has healed.
type fault struct {
	name   string
	setups []string
	what   string // for the README's table
	inject func(ctx context.Context, r *run) error
}

// faults is every fault, in the order runs cycle through them.
var faults = []fault{
	{"kill-replica", []string{cluster}, "SIGKILL of a crdserver replica, started again 1-3 s later", killReplica},
	{"restart-embedded", []string{embedded}, "crdserver on its embedded store killed (SIGKILL) or stopped (SIGTERM) and started again", killReplica},
	{"stop-replica", []string{cluster, embedded}, "SIGSTOP of a crdserver replica for 2-6 s, then SIGCONT", stopReplica},
	{"kill-etcd-member", []string{cluster}, "SIGKILL of an etcd member that does not lead, started again 1-3 s later", killEtcd(false)},
	{"kill-etcd-leader", []string{cluster}, "SIGKILL of the etcd leader, started again 1-3 s later", killEtcd(true)},
	{"delay-etcd", []string{cluster}, "100-400 ms added to every chunk between a replica and etcd, for 3-6 s", delayEtcd},
	{"drop-etcd", []string{cluster}, "a replica's etcd connections reset every 300 ms, for 3-6 s", dropEtcd},
	{"partition-etcd", []string{cluster}, "a replica cut off from every etcd member for 3-8 s (bytes held, then delivered)", partitionEtcd},
	{"compact-etcd", []string{cluster}, "etcd compacted three times, 2 s apart, to 0-30 revisions before its newest, while watches run", compactEtcd},
	{"edit-crd", []string{cluster, embedded}, "the CRDs' schemas edited three times, 1.5 s apart", editCRDs},
	{"fail-webhook", []string{cluster, embedded}, "the conversion webhook answers 500 for 2-5 s, then recovers", failWebhook},
}

func (r *run) sleep(ctx context.Context, lo, hi time.Duration) {
	d := lo + time.Duration(r.rng.Int64N(int64(hi-lo)+1))
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

func (r *run) pickReplica() *replica {
	return r.replicas[r.rng.IntN(len(r.replicas))]
}

func killReplica(ctx context.Context, r *run) error {
	rep := r.pickReplica()
	if r.setup == embedded && r.rng.IntN(2) == 0 {
		r.logf("fault: SIGTERM to %s", rep.name)
		if err := rep.terminate(); err != nil {
			return err
		}
	} else {
		r.logf("fault: SIGKILL to %s", rep.name)
		rep.kill()
	}
	r.sleep(ctx, time.Second, 3*time.Second)
	r.logf("fault: %s started again", rep.name)
	return rep.run(2 * time.Minute)
}

func stopReplica(ctx context.Context, r *run) error {
	rep := r.pickReplica()
	r.logf("fault: SIGSTOP to %s", rep.name)
	rep.freeze()
	r.sleep(ctx, 2*time.Second, 6*time.Second)
	rep.thaw()
	r.logf("fault: SIGCONT to %s", rep.name)
	return nil
}

func killEtcd(leader bool) func(ctx context.Context, r *run) error {
	return func(ctx context.Context, r *run) error {
		l := r.etcd.leader()
		i := l
		if !leader || l < 0 {
			i = (max(l, 0) + 1 + r.rng.IntN(len(r.etcd.members)-1)) % len(r.etcd.members)
		}
		m := r.etcd.members[i]
		r.logf("fault: SIGKILL to %s (leader: m%d)", m.name, l)
		m.kill()
		r.sleep(ctx, time.Second, 3*time.Second)
		r.logf("fault: %s started again", m.name)
		if err := m.start(etcdBin); err != nil {
			return err
		}
		return r.etcd.waitHealthy(time.Minute)
	}
}

func delayEtcd(ctx context.Context, r *run) error {
	rep := r.pickReplica()
	d := time.Duration(100+r.rng.IntN(301)) * time.Millisecond
	r.logf("fault: %v delay between %s and etcd", d, rep.name)
	for _, p := range rep.proxies {
		p.setDelay(d)
	}
	r.sleep(ctx, 3*time.Second, 6*time.Second)
	for _, p := range rep.proxies {
		p.setDelay(0)
	}
	r.logf("fault: delay ended")
	return nil
}

func dropEtcd(ctx context.Context, r *run) error {
	rep := r.pickReplica()
	r.logf("fault: resetting the etcd connections of %s", rep.name)
	end := time.Now().Add(3*time.Second + time.Duration(r.rng.IntN(3001))*time.Millisecond)
	resets := 0
	for time.Now().Before(end) && ctx.Err() == nil {
		for _, p := range rep.proxies {
			resets += p.reset()
		}
		time.Sleep(300 * time.Millisecond)
	}
	r.logf("fault: %d connections reset", resets)
	return nil
}

func partitionEtcd(ctx context.Context, r *run) error {
	rep := r.pickReplica()
	r.logf("fault: %s partitioned from etcd", rep.name)
	for _, p := range rep.proxies {
		p.partition()
	}
	r.sleep(ctx, 3*time.Second, 8*time.Second)
	for _, p := range rep.proxies {
		p.heal()
	}
	r.logf("fault: partition healed")
	return nil
}

func compactEtcd(ctx context.Context, r *run) error {
	for i := range 3 {
		if i > 0 {
			r.sleep(ctx, 2*time.Second, 2*time.Second)
		}
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		resp, err := r.etcdCli.Get(cctx, "compact_rev_key", clientv3.WithCountOnly())
		if err != nil {
			cancel()
			return err
		}
		rev := max(resp.Header.Revision-int64(r.rng.IntN(31)), 1)
		r.addCompaction(check.Compaction{Rev: rev, At: r.rc.now()})
		_, err = r.etcdCli.Compact(cctx, rev)
		cancel()
		if err != nil {
			return fmt.Errorf("compact to %d: %w", rev, err)
		}
		r.logf("fault: etcd compacted to revision %d (newest %d)", rev, resp.Header.Revision)
	}
	return nil
}

// editCRDs edits the CRDs' schemas: a new optional field in every
// version, then another, then one removed.
func editCRDs(ctx context.Context, r *run) error {
	for i := range 3 {
		if i > 0 {
			r.sleep(ctx, 1500*time.Millisecond, 1500*time.Millisecond)
		}
		for _, res := range resources {
			if res.core {
				continue
			}
			if err := r.editCRD(ctx, res, i); err != nil {
				return err
			}
		}
		r.logf("fault: CRD schemas edited (%d)", i+1)
	}
	return nil
}

func (r *run) editCRD(ctx context.Context, res *resource, i int) error {
	path := "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/" + res.name + "." + group
	for attempt := 0; ; attempt++ {
		a := r.admin(ctx, http.MethodGet, path, "", nil)
		if a.err != nil || a.code != http.StatusOK {
			return fmt.Errorf("read CRD %s: %d %v %s", res.name, a.code, a.err, a.body)
		}
		var crd map[string]any
		if err := json.Unmarshal(a.body, &crd); err != nil {
			return err
		}
		spec := crd["spec"].(map[string]any)
		for _, v := range spec["versions"].([]any) {
			props := v.(map[string]any)["schema"].(map[string]any)["openAPIV3Schema"].(map[string]any)["properties"].(map[string]any)["spec"].(map[string]any)["properties"].(map[string]any)
			switch i {
			case 0:
				props["extra"] = map[string]any{"type": "string"}
			case 1:
				props["more"] = map[string]any{"type": "integer"}
			default:
				delete(props, "more")
			}
		}
		body, _ := json.Marshal(crd)
		a = r.admin(ctx, http.MethodPut, path, "application/json", body)
		if a.err == nil && a.code == http.StatusOK {
			return nil
		}
		if a.code != http.StatusConflict || attempt > 5 {
			return fmt.Errorf("update CRD %s: %d %v %s", res.name, a.code, a.err, a.body)
		}
	}
}

func failWebhook(ctx context.Context, r *run) error {
	r.logf("fault: the conversion webhook fails")
	r.webhook.failing.Store(true)
	r.sleep(ctx, 2*time.Second, 5*time.Second)
	r.webhook.failing.Store(false)
	r.logf("fault: the conversion webhook recovered (%d reviews refused)", r.webhook.failed.Load())
	return nil
}
