package store

import (
	"context"
	"log/slog"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// compactKey is where replicas agree on compactions, as kube-apiserver's
// compactor does: only the replica whose transaction on this key wins
// compacts, so several replicas sharing one etcd compact once per interval.
const compactKey = "compact_rev_key"

// RunCompactor compacts the store every interval, keeping one interval of
// history: each round compacts to the revision seen at the previous round.
// It returns when ctx ends.
func RunCompactor(ctx context.Context, s *Store, interval time.Duration, log *slog.Logger) {
	if interval <= 0 {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	var version, prevRev int64
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		v, rev, err := s.compactOnce(ctx, version, prevRev)
		if err != nil {
			if ctx.Err() == nil {
				log.Warn("etcd compaction failed", "err", err)
			}
			continue
		}
		version, prevRev = v, rev
	}
}

// compactOnce claims the compaction whose agreed version is version and, if
// it wins, compacts to rev. It returns the new agreed version and the current
// revision, the target of the next round.
func (s *Store) compactOnce(ctx context.Context, version, rev int64) (int64, int64, error) {
	resp, err := s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.Version(compactKey), "=", version)).
		Then(clientv3.OpPut(compactKey, strconv.FormatInt(rev, 10))).
		Else(clientv3.OpGet(compactKey)).
		Commit()
	if err != nil {
		return version, rev, err
	}
	cur := resp.Header.Revision
	s.saw(cur)
	if !resp.Succeeded {
		kvs := resp.Responses[0].GetResponseRange().Kvs
		if len(kvs) > 0 {
			return kvs[0].Version, cur, nil
		}
		return 0, cur, nil
	}
	if rev > 0 {
		if _, err := s.cli.Compact(ctx, rev); err != nil && interpret(err) != ErrCompacted {
			return version + 1, cur, err
		}
	}
	return version + 1, cur, nil
}

// Compact compacts the store's history up to rev now. Tests use it.
func (s *Store) Compact(ctx context.Context, rev int64) error {
	_, err := s.cli.Compact(ctx, rev)
	if err != nil && interpret(err) == ErrCompacted {
		return nil
	}
	return err
}
