package store

import (
	"context"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Keys written with a TTL share etcd leases, as kube-apiserver's do: one
// lease is granted for a little more than the TTL and used for every write
// of that TTL while it still has at least the TTL to run, so a burst of
// events costs one lease, and each key lives between its TTL and its TTL
// plus the reuse window.
const (
	leaseReuseFraction = 0.05
	leaseReuseMax      = time.Minute
)

type lease struct {
	id      clientv3.LeaseID
	expires time.Time
}

// lease returns a lease under which a key lives at least ttl from now.
func (s *Store) lease(ctx context.Context, ttl time.Duration) (clientv3.LeaseID, error) {
	ttl = max(ttl, time.Second).Round(time.Second)
	reuse := min(time.Duration(float64(ttl)*leaseReuseFraction), leaseReuseMax).Round(time.Second)
	s.leaseMu.Lock()
	defer s.leaseMu.Unlock()
	now := time.Now()
	if l := s.leases[ttl]; l != nil && l.expires.Sub(now) > ttl {
		return l.id, nil
	}
	var resp *clientv3.LeaseGrantResponse
	err := s.attempts(ctx, func(ctx context.Context) (err error) {
		resp, err = s.cli.Grant(ctx, int64((ttl+reuse)/time.Second))
		return err
	})
	if err != nil {
		return 0, interpret(err)
	}
	if s.leases == nil {
		s.leases = map[time.Duration]*lease{}
	}
	s.leases[ttl] = &lease{id: resp.ID, expires: now.Add(time.Duration(resp.TTL) * time.Second)}
	return resp.ID, nil
}
