package server

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/crdserver/crdserver/internal/health"
)

// The health checks, named as kube-apiserver names them. A check is
// called with a nil request by WaitReady.

func (s *Server) etcdCheck() health.Check {
	return health.Check{Name: "etcd", Check: func(r *http.Request) error {
		ctx := context.Background()
		if r != nil {
			ctx = r.Context()
		}
		ctx, cancel := context.WithTimeout(ctx, 4*time.Second)
		defer cancel()
		return s.store.Healthy(ctx)
	}}
}

var logCheck = health.Check{Name: "log", Check: func(*http.Request) error { return nil }}

// readyChecks are what the server waits for before it serves: CRDs loaded,
// controllers started, the default RBAC policy in place.
func (s *Server) readyChecks() []health.Check {
	return []health.Check{
		{Name: "poststarthook/crd-informer-synced", Check: func(*http.Request) error {
			if !s.registry.Synced() {
				return errors.New("CRDs not loaded yet")
			}
			return nil
		}},
		{Name: "poststarthook/start-apiextensions-controllers", Check: func(*http.Request) error {
			select {
			case <-s.ready:
				return nil
			default:
				return errors.New("controllers not started")
			}
		}},
		{Name: "poststarthook/rbac/bootstrap-roles", Check: func(*http.Request) error {
			if !s.policy.DefaultsInPlace() {
				return errors.New("default RBAC roles not in place yet")
			}
			return nil
		}},
	}
}

// healthEndpoints are /livez, /readyz and /healthz.
func (s *Server) healthEndpoints() (livez, readyz, healthz *health.Endpoint) {
	shutdown := health.Check{Name: "shutdown", Check: func(*http.Request) error {
		select {
		case <-s.stopping:
			return errors.New("server is shutting down")
		default:
			return nil
		}
	}}
	base := []health.Check{health.Ping, logCheck, s.etcdCheck()}
	ready := append(append(append([]health.Check(nil), base...), s.readyChecks()...), shutdown)
	all := append(append([]health.Check(nil), base...), s.readyChecks()...)
	return &health.Endpoint{Name: "livez", Checks: base, Log: s.log},
		&health.Endpoint{Name: "readyz", Checks: ready, Log: s.log},
		&health.Endpoint{Name: "healthz", Checks: all, Log: s.log}
}
