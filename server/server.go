package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/kubernetes/pkg/capabilities"

	"github.com/crdserver/crdserver/internal/admission"
	"github.com/crdserver/crdserver/internal/aggregator"
	"github.com/crdserver/crdserver/internal/apis"
	"github.com/crdserver/crdserver/internal/apis/apiextensions"
	"github.com/crdserver/crdserver/internal/apis/conversionrules"
	"github.com/crdserver/crdserver/internal/apis/core"
	"github.com/crdserver/crdserver/internal/apis/versionreport"
	"github.com/crdserver/crdserver/internal/audit"
	"github.com/crdserver/crdserver/internal/auth"
	"github.com/crdserver/crdserver/internal/auth/rbac"
	"github.com/crdserver/crdserver/internal/budget"
	"github.com/crdserver/crdserver/internal/encryption"
	"github.com/crdserver/crdserver/internal/filters"
	"github.com/crdserver/crdserver/internal/loopback"
	"github.com/crdserver/crdserver/internal/openapi"
	"github.com/crdserver/crdserver/internal/registry"
	"github.com/crdserver/crdserver/internal/resource"
	"github.com/crdserver/crdserver/internal/serviceaccount"
	"github.com/crdserver/crdserver/internal/store"
	"github.com/crdserver/crdserver/internal/usage"
)

// Server is a running crdserver.
type Server struct {
	cfg Config
	log *slog.Logger

	store       *store.Store
	builtin     *apis.Builtin
	policy      *rbac.Store
	registry    *registry.Registry
	budget      *budget.Pool
	controllers *controllers
	audit       *audit.Log
	authn       *auth.Authenticator
	authz       *auth.ConfiguredAuthorizer
	tokens      *serviceaccount.Tokens
	tls         *tlsSetup
	// usage is who called which API version (see internal/usage);
	// usageDone is closed once its writer stopped.
	usage     *usage.Persister
	usageDone chan struct{}

	handler  http.Handler
	engine   *resource.Handler
	openapi  *openapi.Publisher
	metrics  *filters.Metrics
	apf      *filters.APF
	adm      *admission.Admission
	agg      *aggregator.Aggregator
	http     *http.Server
	conns    connTracker
	listener net.Listener
	url      string
	serveErr chan error

	// cancel ends everything started in the background (caches aside,
	// which the registry stops).
	cancel   context.CancelFunc
	stopping chan struct{}
	ready    chan struct{}
	closeMu  sync.Mutex
	closed   bool
}

// Start starts a server and returns once it listens. It is ready to serve
// (/readyz ok) shortly after; WaitReady waits for that.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: cfg.Logger, stopping: make(chan struct{}), ready: make(chan struct{}), serveErr: make(chan error, 1)}
	ok := false
	defer func() {
		if !ok {
			s.stopBackground()
		}
	}()
	runCtx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go resource.WarmBuiltinTypes()

	// Storage: CRDs are stored as Kubernetes stores them (v1beta1), then
	// encrypted where the encryption configuration says.
	transformer, err := storageTransformer(runCtx, cfg)
	if err != nil {
		return nil, err
	}
	s.store, err = store.Open(ctx, store.OpenOptions{
		Dir:         filepath.Join(cfg.DataDir, "etcd"),
		NoFsync:     cfg.EtcdNoFsync,
		Log:         cfg.Logger,
		External:    store.ExternalConfig{Endpoints: cfg.EtcdServers, CAFile: cfg.EtcdCAFile, CertFile: cfg.EtcdCertFile, KeyFile: cfg.EtcdKeyFile},
		Transformer: transformer,
	})
	if err != nil {
		return nil, err
	}
	// Who calls which version: this replica's counts go on from its
	// record (its data folder names it).
	replica, err := usage.ReplicaID(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	s.usage = &usage.Persister{Store: s.store, Recorder: usage.NewRecorder(0, 0), Replica: replica,
		Window: cfg.VersionUsageWindow, Interval: cfg.VersionUsageFlushInterval, Log: s.log}
	if err := s.usage.Load(ctx); err != nil {
		s.log.Warn("version usage: reading this replica's record failed", "err", err)
	}
	if cfg.AuditLogPath != "" {
		s.audit, err = audit.Open(audit.Options{Path: cfg.AuditLogPath, PolicyFile: cfg.AuditPolicyFile,
			MaxSizeMB: cfg.AuditLogMaxSizeMB, MaxBackups: cfg.AuditLogMaxBackups, MaxAgeDays: cfg.AuditLogMaxAgeDays})
		if err != nil {
			return nil, fmt.Errorf("audit log: %w", err)
		}
	}
	newCache := func(prefix string) *store.Cache {
		return store.NewCache(s.store, prefix, resource.DecodeItem, cfg.Cache.internal(), s.log)
	}

	// The built-in APIs, and the registry of every resource made from
	// them. A CRD change is checked against the CRD's stored objects,
	// which only the registry holds: the CRDs' strategy reaches them
	// through the server (existingObjects), which has a registry before
	// it serves a request.
	issuer, err := newTokens(cfg)
	if err != nil {
		return nil, err
	}
	s.policy = rbac.NewStore()
	// Pods' privileged containers are allowed or not per process, as in
	// kube-apiserver.
	capabilities.Setup(cfg.AllowPrivileged, 0)
	s.builtin = apis.New(newCache, s.policy, apis.Options{Store: s.store, EventTTL: cfg.EventTTL, Tokens: issuer,
		Authenticator:          func() *auth.Authenticator { return s.authn },
		ServiceClusterIPRanges: cfg.ServiceClusterIPRanges, ServiceNodePortRange: cfg.ServiceNodePortRange,
		CRDChecks:      &apis.CRDChecks{Enforce: cfg.EnforceCRDCompatibility, ExistingObjects: s.existingObjects},
		VersionReports: s.versionReportInputs})
	s.tokens = issuer.WithObjects(s.builtin.TokenObjects(s.store))
	if s.builtin.All, err = applyRuntimeConfig(s.builtin.All, cfg.RuntimeConfig); err != nil {
		return nil, err
	}
	s.budget = budget.New(crdMemoryBudget(cfg.CRDMemoryBudget))
	s.openapi = openapi.New(s.builtin.All, s.budget)
	s.registry = registry.New(registry.Options{
		Storage:         s.store,
		NewCache:        newCache,
		Builtins:        s.builtin.All,
		CRDs:            s.builtin.CRDs,
		ConversionRules: s.builtin.ConversionRules,
		Conversion:      cfg.Conversion.internal(),
		Budget:          s.budget,
		Log:             s.log,
	})
	s.registry.Subscribe(s.openapi.Sync)
	if s.agg, err = s.newAggregator(); err != nil {
		return nil, err
	}
	s.openapi.Aggregated = s.agg
	s.policy.Follow(runCtx, rbacCaches(s.builtin.RBAC), s.log)

	// Who is asking.
	authnOpts := auth.Options{Insecure: cfg.Insecure, TokenFile: cfg.TokenAuthFile, Anonymous: !cfg.DisableAnonymous,
		Tokens: []authenticator.Token{s.tokens}, APIAudiences: s.tokens.Audiences()}
	if !cfg.Insecure {
		if s.tls, err = setupTLS(cfg); err != nil {
			return nil, err
		}
		authnOpts.ClientCAs = s.tls.clientCAs
		if s.tls.proxyCAs != nil {
			rh := cfg.RequestHeader
			authnOpts.RequestHeader = &auth.RequestHeaderOptions{CAs: s.tls.proxyCAs, AllowedNames: rh.AllowedNames, UsernameHeaders: rh.UsernameHeaders,
				UIDHeaders: rh.UIDHeaders, GroupHeaders: rh.GroupHeaders, ExtraHeaderPrefixes: rh.ExtraHeaderPrefixes}
		}
	}
	if err := cfg.applyAuthentication(runCtx, &authnOpts); err != nil {
		return nil, err
	}
	if s.authn, err = auth.NewAuthenticator(authnOpts); err != nil {
		return nil, err
	}
	s.metrics = filters.NewMetrics()
	s.metrics.Registry.MustRegister(budgetCollectors(s.budget)...)
	if s.authz, err = s.newAuthorizer(runCtx); err != nil {
		return nil, err
	}

	ln, err := net.Listen("tcp", net.JoinHostPort(cfg.BindAddress, strconv.Itoa(cfg.Port)))
	if err != nil {
		return nil, err
	}
	s.listener = ln
	s.url = "http://" + ln.Addr().String()
	if s.tls != nil {
		s.url = "https://" + ln.Addr().String()
	}

	// Admission and the controllers call the server itself, through the
	// handler made below (the loopback client).
	loop := loopback.Config(http.HandlerFunc(s.serveLoopback))
	s.adm, err = admission.NewLoopback(loop, admission.Options{
		OpenAPI:          s.openapi.Client(),
		Authorizer:       s.authorizer(),
		ServiceAddresses: cfg.Conversion.ServiceAddresses,
		Registerer:       s.metrics.Registry,
		Log:              s.log,
		Disabled:         cfg.DisabledAdmissionPlugins,
	})
	if err != nil {
		return nil, fmt.Errorf("admission: %w", err)
	}
	s.engine = &resource.Handler{
		Store:             s.store,
		Admission:         admission.Engine{Admission: s.adm},
		Log:               s.log,
		MinRequestTimeout: cfg.MinRequestTimeout,
		Stopping:          s.stopping,
	}
	if !slices.Contains(cfg.DisabledAdmissionPlugins, "NamespaceLifecycle") {
		s.engine.Namespaces = core.NamespaceLifecycle{Namespaces: s.builtin.Namespaces, Store: s.store, Terminations: s.builtin.NamespaceTerminations}
	}
	if n := filters.APFConcurrency(cfg.MaxRequestsInFlight, cfg.MaxMutatingRequestsInFlight); !cfg.DisablePriorityAndFairness && n > 0 {
		if s.apf, err = filters.NewAPF(loop, n, s.registry.Index); err != nil {
			return nil, fmt.Errorf("priority and fairness: %w", err)
		}
	}
	if s.handler, err = s.buildHandler(); err != nil {
		return nil, err
	}
	s.http = &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       90 * time.Second,
		MaxHeaderBytes:    1 << 20,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
		ConnState:         s.conns.track,
	}
	if s.tls != nil {
		s.http.TLSConfig = s.tls.serverConfig()
		go func() { s.serveErr <- s.http.ServeTLS(ln, "", "") }()
	} else {
		go func() { s.serveErr <- s.http.Serve(ln) }()
	}

	go store.RunCompactor(runCtx, s.store, cfg.CompactionInterval, s.log)
	s.usageDone = make(chan struct{})
	go func() {
		defer close(s.usageDone)
		s.usage.Run(runCtx)
	}()
	if err := s.registry.Start(ctx); err != nil {
		_ = s.http.Close()
		return nil, fmt.Errorf("start registry: %w", err)
	}
	// Admission follows its configuration (policies, bindings, webhooks)
	// before anything is written: the controllers' writes are admitted
	// too, as in Kubernetes.
	if err := s.adm.Start(runCtx); err != nil {
		_ = s.http.Close()
		return nil, fmt.Errorf("start admission: %w", err)
	}
	if s.controllers, err = s.startControllers(ctx, runCtx, loop); err != nil {
		_ = s.http.Close()
		return nil, fmt.Errorf("start controllers: %w", err)
	}
	close(s.ready)
	if err := s.writeKubeconfig(); err != nil {
		_ = s.http.Close()
		return nil, err
	}
	ok = true
	return s, nil
}

// versionReportInputs is what the server sees now for VersionReports
// (internal/apis/versionreport): its Index, every replica's clients.
func (s *Server) versionReportInputs(ctx context.Context) (versionreport.Inputs, error) {
	// Every CRD change made before the request, whichever replica made
	// it, as a consistent read sees it.
	_ = s.registry.CatchUp(ctx)
	ix := s.registry.Index()
	clients, overflow, err := s.usage.Clients(ctx)
	if err != nil {
		return versionreport.Inputs{}, err
	}
	return versionreport.Inputs{
		CRDs: ix.CRDs,
		Objects: func(name string) *store.Cache {
			crd := ix.CRDs[name]
			if crd == nil {
				return nil
			}
			for _, v := range crd.Spec.Versions {
				if v.Storage {
					if res, _ := ix.LookupStorage(crd.Spec.Group, v.Name, crd.Spec.Names.Plural); res != nil {
						return res.Cache
					}
				}
			}
			return nil
		},
		Resources: ix.Resources,
		Rules:     conversionrules.Get(s.builtin.ConversionRules.Cache),
		Clients:   clients,
		Overflow:  overflow,
		Window:    s.cfg.VersionUsageWindow,
	}, nil
}

// existingObjects are a CRD's stored objects in a version, for the
// compatibility checks of a CRD change (Registry.ExistingObjects).
func (s *Server) existingObjects(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, version string) []map[string]any {
	return s.registry.ExistingObjects(ctx, crd, version)
}

// serveLoopback serves the server's own clients (admission, the
// controllers) with the whole handler, as any client is served.
func (s *Server) serveLoopback(w http.ResponseWriter, r *http.Request) {
	s.handler.ServeHTTP(w, r)
}

// storageTransformer is what values go through on their way to etcd: CRDs
// to the v1beta1 Kubernetes stores them in, then encryption where the
// encryption configuration says (reloaded until ctx ends).
func storageTransformer(ctx context.Context, cfg Config) (store.Transformer, error) {
	transformers := transformerChain{apiextensions.NewCRDStorage()}
	if cfg.EncryptionProviderConfig != "" {
		tf, err := encryption.Load(ctx, cfg.EncryptionProviderConfig, apis.KeyResource)
		if err != nil {
			return nil, err
		}
		transformers = append(transformers, tf)
	}
	return transformers, nil
}

// newTokens loads the ServiceAccount signing key (made in the data dir
// when none is given) and the keys that verify tokens.
func newTokens(cfg Config) (*serviceaccount.Tokens, error) {
	o := cfg.ServiceAccounts
	signer, err := serviceaccount.LoadOrMakeSigningKey(o.SigningKeyFile, filepath.Join(cfg.DataDir, "pki"))
	if err != nil {
		return nil, err
	}
	opts := serviceaccount.Options{Issuers: o.Issuers, Audiences: o.APIAudiences, Signer: signer, MaxExpiration: o.MaxTokenExpiration}
	for _, f := range o.KeyFiles {
		keys, err := serviceaccount.LoadPublicKeys(f)
		if err != nil {
			return nil, err
		}
		opts.PublicKeys = append(opts.PublicKeys, keys...)
	}
	return serviceaccount.New(opts)
}

// rbacCaches are the caches of the RBAC resources by kind.
func rbacCaches(resources []*resource.Resource) map[string]*store.Cache {
	out := map[string]*store.Cache{}
	for _, r := range resources {
		out[r.Kind] = r.Cache
	}
	return out
}

// WaitReady waits until /readyz would answer ok.
func (s *Server) WaitReady(ctx context.Context) error {
	for {
		if s.readyErr() == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// readyErr says what the server still waits for before it is ready, or nil.
func (s *Server) readyErr() error {
	for _, c := range s.readyChecks() {
		if err := c.Check(nil); err != nil {
			return err
		}
	}
	return nil
}

// Close shuts the server down gracefully: it stops accepting connections,
// ends watches, waits for requests in flight (up to ShutdownTimeout), then
// stops etcd.
func (s *Server) Close() error {
	s.closeMu.Lock()
	if s.closed {
		s.closeMu.Unlock()
		return nil
	}
	s.closed = true
	s.closeMu.Unlock()
	// The server's own clients (controllers, admission's informers) stop
	// first, while the API still serves them: a leader hands its lease
	// back, and no informer sees its watch cut off.
	if s.cancel != nil {
		s.cancel()
	}
	if s.controllers != nil {
		s.controllers.wait()
	}
	close(s.stopping)
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.http.Shutdown(ctx) }()
	// Connections with nothing in flight are closed at once, now and as
	// requests in flight end (Shutdown alone would wait for the clients to
	// hang up HTTP/2 connections).
	var err error
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for waiting := true; waiting; {
		s.conns.closeIdle()
		select {
		case err = <-done:
			waiting = false
		case <-tick.C:
		}
	}
	if err != nil {
		_ = s.http.Close()
	}
	s.stopBackground()
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("requests still in flight after %v", s.cfg.ShutdownTimeout)
	}
	return nil
}

// stopBackground stops the controllers, the caches and etcd.
func (s *Server) stopBackground() {
	if s.cancel != nil {
		s.cancel()
	}
	if s.controllers != nil {
		s.controllers.wait()
	}
	if s.agg != nil {
		s.agg.Close()
	}
	if s.registry != nil {
		s.registry.Stop()
	}
	if s.usageDone != nil {
		<-s.usageDone
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := s.usage.Flush(ctx); err != nil {
			s.log.Warn("version usage: writing this replica's record at shutdown failed", "err", err)
		}
		cancel()
	}
	if s.store != nil {
		s.store.Close()
	}
	if s.audit != nil {
		_ = s.audit.Close()
	}
}

// transformerChain transforms values with each transformer in turn on
// their way to etcd, and in the reverse order on their way back.
type transformerChain []store.Transformer

func (c transformerChain) ToStorage(ctx context.Context, key string, value []byte) ([]byte, error) {
	for _, t := range c {
		var err error
		if value, err = t.ToStorage(ctx, key, value); err != nil {
			return nil, err
		}
	}
	return value, nil
}

func (c transformerChain) FromStorage(ctx context.Context, key string, stored []byte) ([]byte, error) {
	for i := len(c) - 1; i >= 0; i-- {
		var err error
		if stored, err = c[i].FromStorage(ctx, key, stored); err != nil {
			return nil, err
		}
	}
	return stored, nil
}
