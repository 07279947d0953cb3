package robustness

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/crdserver/crdserver/e2e/robustness/check"
)

func quietZap() *zap.Logger { return zap.NewNop() }

// trafficKey maps an etcd key of the traffic's resources to the checks'
// key (resource/namespace/name), false for keys of anything else.
func trafficKey(etcdKey string) (string, bool) {
	parts := strings.Split(strings.TrimPrefix(etcdKey, "/registry/"), "/")
	var res, ns, name string
	switch {
	case len(parts) == 4 && parts[0] == group:
		res, ns, name = parts[1], parts[2], parts[3]
	case len(parts) == 3 && parts[0] == "configmaps":
		res, ns, name = parts[0], parts[1], parts[2]
	default:
		return "", false
	}
	// Every namespace: a list or watch of all namespaces sees them all.
	if !slices.ContainsFunc(resources, func(r *resource) bool { return r.name == res }) {
		return "", false
	}
	return check.Key(res, ns, name), true
}

// change turns one etcd state of a traffic key into the truth's terms.
func change(key string, value []byte, rev int64, deleted bool) check.Change {
	c := check.Change{Key: key, Version: check.Version{Rev: rev, Deleted: deleted}}
	if !deleted {
		var o wireObject
		_ = json.Unmarshal(value, &o)
		res, _, _ := check.SplitKey(key)
		ob := o.obj(res)
		c.WriteID, c.Group = ob.WriteID, ob.Group
	}
	return c
}

// truthWatcher records etcd's history of the traffic's keys as it
// happens, on an etcd watch of its own (not through any proxy): it is
// there when compaction removes the history from etcd.
type truthWatcher struct {
	cli    *clientv3.Client
	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	truth    check.Truth
	progress int64 // every change up to it is recorded
	err      error
}

func watchTruth(cli *clientv3.Client) (*truthWatcher, error) {
	ctx, cancel := context.WithCancel(context.Background())
	gctx, gcancel := context.WithTimeout(ctx, 30*time.Second)
	defer gcancel()
	resp, err := cli.Get(gctx, "/registry/", clientv3.WithPrefix())
	if err != nil {
		cancel()
		return nil, fmt.Errorf("read etcd's state: %w", err)
	}
	tw := &truthWatcher{cli: cli, cancel: cancel, done: make(chan struct{})}
	tw.truth.Start = resp.Header.Revision
	tw.progress = tw.truth.Start
	for _, kv := range resp.Kvs {
		if k, ok := trafficKey(string(kv.Key)); ok {
			tw.truth.Initial = append(tw.truth.Initial, change(k, kv.Value, kv.ModRevision, false))
		}
	}
	go tw.follow(ctx)
	return tw, nil
}

// follow records the changes until ctx ends; a watch that ends (a member
// gone, no leader for a while) is opened again after the last revision
// recorded.
func (tw *truthWatcher) follow(ctx context.Context) {
	defer close(tw.done)
	for ctx.Err() == nil {
		tw.mu.Lock()
		from := tw.progress + 1
		tw.mu.Unlock()
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		wch := tw.cli.Watch(wctx, "/registry/", clientv3.WithPrefix(), clientv3.WithRev(from), clientv3.WithProgressNotify())
		err := tw.drain(ctx, wch)
		cancel()
		if err != nil {
			tw.mu.Lock()
			tw.err = err
			tw.mu.Unlock()
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// drain records what one etcd watch delivers until it ends: nil, or an
// error the truth cannot recover from (etcd compacted what it had not
// recorded yet).
func (tw *truthWatcher) drain(ctx context.Context, wch clientv3.WatchChan) error {
	for {
		var resp clientv3.WatchResponse
		var ok bool
		select {
		case <-ctx.Done():
			return nil
		case resp, ok = <-wch:
		}
		if !ok {
			return nil
		}
		if resp.CompactRevision > 0 {
			return fmt.Errorf("the truth's etcd watch fell behind a compaction to %d", resp.CompactRevision)
		}
		if resp.Err() != nil {
			return nil // opened again
		}
		tw.mu.Lock()
		for _, ev := range resp.Events {
			if k, ok := trafficKey(string(ev.Kv.Key)); ok {
				tw.truth.Changes = append(tw.truth.Changes, change(k, ev.Kv.Value, ev.Kv.ModRevision, ev.Type == clientv3.EventTypeDelete))
			}
			tw.progress = max(tw.progress, ev.Kv.ModRevision)
		}
		if resp.IsProgressNotify() {
			tw.progress = max(tw.progress, resp.Header.Revision)
		}
		tw.mu.Unlock()
	}
}

// finish waits until every change up to etcd's current revision is
// recorded, and returns the truth.
func (tw *truthWatcher) finish(ctx context.Context) (*check.Truth, error) {
	defer func() { tw.cancel(); <-tw.done }()
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	resp, err := tw.cli.Get(rctx, "compact_rev_key", clientv3.WithCountOnly())
	if err != nil {
		return nil, fmt.Errorf("etcd's current revision: %w", err)
	}
	target := resp.Header.Revision
	for {
		tw.mu.Lock()
		progress, werr := tw.progress, tw.err
		tw.mu.Unlock()
		if werr != nil {
			return nil, werr
		}
		if progress >= target {
			break
		}
		_ = tw.cli.RequestProgress(clientv3.WithRequireLeader(rctx))
		select {
		case <-rctx.Done():
			return nil, fmt.Errorf("the truth's watch reached revision %d, not %d", progress, target)
		case <-time.After(100 * time.Millisecond):
		}
	}
	tw.mu.Lock()
	defer tw.mu.Unlock()
	t := tw.truth
	t.End = target
	return &t, nil
}

// embeddedTruth reads the history of an embedded store after its crdserver
// stopped: an etcd process on its data folder, watched from the first
// revision (the run never compacts it).
func embeddedTruth(ctx context.Context, dataDir, outDir string) (*check.Truth, error) {
	client, peer, err := freeURLs()
	if err != nil {
		return nil, err
	}
	m := &proc{name: "etcd-embedded", log: &logBuffer{}}
	m.args = func() []string {
		return []string{"--name", "crdserver", "--data-dir", filepath.Join(dataDir, "etcd"),
			"--listen-client-urls", client, "--advertise-client-urls", client,
			"--listen-peer-urls", peer, "--log-level", "warn"}
	}
	if err := m.start(etcdBin); err != nil {
		return nil, err
	}
	defer func() {
		m.kill()
		_ = writeFile(outDir, "etcd-embedded.log", []byte(m.log.String()))
	}()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{client}, DialTimeout: 10 * time.Second, Logger: quietZap()})
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var resp *clientv3.GetResponse
	for {
		if resp, err = cli.Get(rctx, "compact_rev_key", clientv3.WithCountOnly()); err == nil {
			break
		}
		if rctx.Err() != nil {
			return nil, fmt.Errorf("the embedded store's etcd does not answer: %w; its log:\n%s", err, tail(m.log.String(), 20))
		}
		time.Sleep(100 * time.Millisecond)
	}
	t := &check.Truth{Start: 0, End: resp.Header.Revision}
	wch := cli.Watch(rctx, "/registry/", clientv3.WithPrefix(), clientv3.WithRev(1))
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for progress := int64(0); progress < t.End; {
		select {
		case <-tick.C:
			// The last revisions may be of keys outside the prefix: only a
			// progress notification tells that the watch passed them.
			_ = cli.RequestProgress(rctx)
			continue
		case wr, ok := <-wch:
			if !ok || wr.Err() != nil {
				return nil, fmt.Errorf("reading the embedded store's history: %v", wr.Err())
			}
			for _, ev := range wr.Events {
				progress = max(progress, ev.Kv.ModRevision)
				if ev.Kv.ModRevision > t.End {
					continue
				}
				if k, ok := trafficKey(string(ev.Kv.Key)); ok {
					t.Changes = append(t.Changes, change(k, ev.Kv.Value, ev.Kv.ModRevision, ev.Type == clientv3.EventTypeDelete))
				}
			}
			if wr.IsProgressNotify() {
				progress = max(progress, wr.Header.Revision)
			}
		}
	}
	return t, nil
}
