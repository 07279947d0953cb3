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
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/crdserver/crdserver/internal/audit"
	"github.com/crdserver/crdserver/internal/auth"
	"github.com/crdserver/crdserver/internal/conversion"
	"github.com/crdserver/crdserver/internal/discovery"
	"github.com/crdserver/crdserver/internal/filters"
	"github.com/crdserver/crdserver/internal/health"
	"github.com/crdserver/crdserver/internal/loopback"
	"github.com/crdserver/crdserver/internal/openapi"
	"github.com/crdserver/crdserver/internal/registry"
	"github.com/crdserver/crdserver/internal/request"
	"github.com/crdserver/crdserver/internal/resource"
	"github.com/crdserver/crdserver/internal/store"
	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Version is what /version reports: the Kubernetes version whose API
// crdserver serves, marked as crdserver's build.
var Version = version.Info{
	Major:                 "1",
	Minor:                 "37",
	EmulationMajor:        "1",
	EmulationMinor:        "37",
	MinCompatibilityMajor: "1",
	MinCompatibilityMinor: "36",
	GitVersion:            "v1.37.0+crdserver",
	GitTreeState:          "clean",
	BuildDate:             "1970-01-01T00:00:00Z",
	GoVersion:             runtime.Version(),
	Compiler:              runtime.Compiler,
	Platform:              runtime.GOOS + "/" + runtime.GOARCH,
}

// CacheOptions tune the watch caches.
type CacheOptions = store.CacheOptions

// ConversionOptions tune webhook conversion.
type ConversionOptions = conversion.Options

// Config configures a server. The zero value, with DataDir set, runs an
// embedded etcd and listens on a random loopback port.
type Config struct {
	// DataDir holds the embedded etcd's data and admin.kubeconfig.
	DataDir string
	// BindAddress is the address to listen on (default 127.0.0.1).
	BindAddress string
	// Port to listen on; 0 picks a free one.
	Port int
	// EtcdServers, when set, are an external etcd cluster to use instead of
	// the embedded one.
	EtcdServers  []string
	EtcdCAFile   string
	EtcdCertFile string
	EtcdKeyFile  string
	// CompactionInterval is how often old etcd revisions are compacted
	// (default 5 minutes; negative disables).
	CompactionInterval time.Duration
	// ShutdownTimeout bounds how long Close waits for requests in flight
	// (default 60 seconds).
	ShutdownTimeout time.Duration
	// MinRequestTimeout: watches without timeoutSeconds last between it and
	// twice it (default 30 minutes).
	MinRequestTimeout time.Duration
	// Cache tunes the watch caches (bookmark interval, history).
	Cache CacheOptions
	// Conversion tunes webhook conversion: service addresses (for servers
	// without cluster DNS), timeout, objects per call.
	Conversion ConversionOptions
	// AuditLogPath, when set, is where audit.k8s.io/v1 Events are appended
	// as JSON lines ("-": standard output), as AuditPolicyFile chooses
	// (without one: every request at the Metadata level).
	AuditLogPath    string
	AuditPolicyFile string
	// AuditLogMaxSizeMB rotates the audit log past this size (0: never);
	// AuditLogMaxBackups and AuditLogMaxAgeDays bound the rotated files.
	AuditLogMaxSizeMB, AuditLogMaxBackups, AuditLogMaxAgeDays int
	// Logger receives the server's logs (default slog.Default()).
	Logger *slog.Logger

	// Insecure serves plain HTTP and trusts every request with everything,
	// as kube-apiserver's old insecure port did. Only for a loopback
	// BindAddress.
	Insecure bool
	// TLSCertFile and TLSKeyFile are the operator's serving certificate;
	// without them crdserver makes its own (in DataDir/pki) on first start,
	// for 127.0.0.1, ::1, localhost, the host name, AdvertiseAddress and
	// TLSSANs.
	TLSCertFile, TLSKeyFile string
	// TLSSANs are more names or addresses for the serving certificate.
	TLSSANs []string
	// AdvertiseAddress is the address clients reach the server on.
	AdvertiseAddress string
	// ClientCAFile holds more CAs whose client certificates authenticate
	// users (CN the user name, O the groups); crdserver's own CA, which
	// signs the admin certificate, always does.
	ClientCAFile string
	// TokenAuthFile is a Kubernetes static token file (CSV: token, user,
	// uid, "group1,group2").
	TokenAuthFile string
	// DisableAnonymous refuses requests without credentials (401) instead
	// of serving them as system:anonymous.
	DisableAnonymous bool

	// MaxRequestsInFlight and MaxMutatingRequestsInFlight bound the
	// read-only and the mutating requests served at once (watches and
	// system:masters not counted; defaults 400 and 200; negative: no limit).
	MaxRequestsInFlight, MaxMutatingRequestsInFlight int
	// RequestTimeout ends requests other than watches with 504 (default
	// 60 seconds; negative: none).
	RequestTimeout time.Duration
}

// Server is a running crdserver.
type Server struct {
	cfg      Config
	log      *slog.Logger
	etcd     *store.Embedded
	cli      *clientv3.Client
	store    *store.Store
	registry *registry.Registry
	handler  http.Handler
	authn    *auth.Authenticator
	tls      *tlsSetup
	http     *http.Server
	listener net.Listener
	url      string
	cancel   context.CancelFunc
	stopping chan struct{}
	ready    chan struct{}
	closeMu  sync.Mutex
	closed   bool
	serveErr chan error
	audit    *audit.Log
}

// Start starts a server and returns once it listens. It is ready to serve
// (/readyz ok) shortly after; WaitReady waits for that.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.DataDir == "" {
		return nil, errors.New("server: DataDir is required")
	}
	if cfg.BindAddress == "" {
		cfg.BindAddress = "127.0.0.1"
	}
	if cfg.CompactionInterval == 0 {
		cfg.CompactionInterval = 5 * time.Minute
	}
	if cfg.ShutdownTimeout <= 0 {
		cfg.ShutdownTimeout = 60 * time.Second
	}
	if cfg.MinRequestTimeout <= 0 {
		cfg.MinRequestTimeout = 30 * time.Minute
	}
	if cfg.MaxRequestsInFlight == 0 {
		cfg.MaxRequestsInFlight = 400
	}
	if cfg.MaxMutatingRequestsInFlight == 0 {
		cfg.MaxMutatingRequestsInFlight = 200
	}
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = 60 * time.Second
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: log, stopping: make(chan struct{}), ready: make(chan struct{}), serveErr: make(chan error, 1)}
	ok := false
	defer func() {
		if !ok {
			s.shutdownStorage()
		}
	}()

	if len(cfg.EtcdServers) > 0 {
		cli, err := store.Connect(ctx, store.ExternalConfig{Endpoints: cfg.EtcdServers, CAFile: cfg.EtcdCAFile, CertFile: cfg.EtcdCertFile, KeyFile: cfg.EtcdKeyFile})
		if err != nil {
			return nil, err
		}
		s.cli = cli
	} else {
		e, err := store.StartEmbedded(ctx, filepath.Join(cfg.DataDir, "etcd"))
		if err != nil {
			return nil, err
		}
		s.etcd, s.cli = e, e.Client
	}
	s.store = store.New(s.cli)
	if cfg.AuditLogPath != "" {
		l, err := audit.Open(audit.Options{Path: cfg.AuditLogPath, PolicyFile: cfg.AuditPolicyFile,
			MaxSizeMB: cfg.AuditLogMaxSizeMB, MaxBackups: cfg.AuditLogMaxBackups, MaxAgeDays: cfg.AuditLogMaxAgeDays})
		if err != nil {
			return nil, fmt.Errorf("audit log: %w", err)
		}
		s.audit = l
	}
	s.registry = registry.New(s.store, registry.Options{Cache: cfg.Cache, Conversion: cfg.Conversion}, log)
	authnOpts := auth.Options{Insecure: cfg.Insecure, TokenFile: cfg.TokenAuthFile, Anonymous: !cfg.DisableAnonymous}
	if cfg.Insecure {
		if !isLoopback(cfg.BindAddress) {
			return nil, fmt.Errorf("plain HTTP is only served on a loopback address, not %s", cfg.BindAddress)
		}
	} else {
		t, err := setupTLS(cfg)
		if err != nil {
			return nil, err
		}
		s.tls = t
		authnOpts.ClientCAs = t.clientCAs
	}
	authn, err := auth.NewAuthenticator(authnOpts)
	if err != nil {
		return nil, err
	}
	s.authn = authn

	ln, err := net.Listen("tcp", net.JoinHostPort(cfg.BindAddress, strconv.Itoa(cfg.Port)))
	if err != nil {
		return nil, err
	}
	s.listener = ln
	s.handler = s.buildHandler()
	s.http = &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       90 * time.Second,
		MaxHeaderBytes:    1 << 20,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	if s.tls != nil {
		s.url = "https://" + ln.Addr().String()
		s.http.TLSConfig = s.tls.serverConfig()
		go func() { s.serveErr <- s.http.ServeTLS(ln, "", "") }()
	} else {
		s.url = "http://" + ln.Addr().String()
		go func() { s.serveErr <- s.http.Serve(ln) }()
	}

	runCtx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go store.RunCompactor(runCtx, s.store, cfg.CompactionInterval, log)
	if err := s.registry.Start(ctx, loopback.Config(s.handler)); err != nil {
		cancel()
		_ = s.http.Close()
		return nil, fmt.Errorf("start controllers: %w", err)
	}
	close(s.ready)
	if err := s.writeKubeconfig(); err != nil {
		cancel()
		_ = s.http.Close()
		return nil, err
	}
	ok = true
	return s, nil
}

// URL is the server's base URL.
func (s *Server) URL() string { return s.url }

// Handler is the server's whole HTTP handler.
func (s *Server) Handler() http.Handler { return s.handler }

// RESTConfig returns a client-go config for the server with full access
// (the admin client certificate, in group system:masters).
func (s *Server) RESTConfig() *rest.Config {
	c := &rest.Config{Host: s.url, QPS: -1}
	if s.tls != nil {
		c.TLSClientConfig = rest.TLSClientConfig{CAData: s.tls.caPEM, CertData: s.tls.pki.AdminCert, KeyData: s.tls.pki.AdminKey}
	}
	return c
}

// CACert returns the PEM certificates clients trust the server with (nil
// for plain HTTP).
func (s *Server) CACert() []byte {
	if s.tls == nil {
		return nil
	}
	return s.tls.caPEM
}

// ClientCert makes a client certificate for a user and groups, signed by
// the server's CA: a way to give someone access (plain HTTP: an error).
func (s *Server) ClientCert(user string, groups ...string) (certPEM, keyPEM []byte, err error) {
	if s.tls == nil {
		return nil, nil, errors.New("the server serves plain HTTP")
	}
	return s.tls.pki.ClientCert(user, groups, time.Now())
}

// KubeconfigPath is where the admin kubeconfig is written.
func (s *Server) KubeconfigPath() string {
	p := filepath.Join(s.cfg.DataDir, "admin.kubeconfig")
	if abs, err := filepath.Abs(p); err == nil {
		return abs
	}
	return p
}

// Kubeconfig returns an admin kubeconfig for the server.
func (s *Server) Kubeconfig() ([]byte, error) {
	c := clientcmdapi.NewConfig()
	c.Clusters["crdserver"] = &clientcmdapi.Cluster{Server: s.url}
	c.AuthInfos["admin"] = &clientcmdapi.AuthInfo{}
	if s.tls != nil {
		c.Clusters["crdserver"].CertificateAuthorityData = s.tls.caPEM
		c.AuthInfos["admin"].ClientCertificateData = s.tls.pki.AdminCert
		c.AuthInfos["admin"].ClientKeyData = s.tls.pki.AdminKey
	}
	c.Contexts["crdserver"] = &clientcmdapi.Context{Cluster: "crdserver", AuthInfo: "admin", Namespace: "default"}
	c.CurrentContext = "crdserver"
	return clientcmd.Write(*c)
}

func (s *Server) writeKubeconfig() error {
	b, err := s.Kubeconfig()
	if err != nil {
		return err
	}
	return os.WriteFile(s.KubeconfigPath(), b, 0o600)
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

func (s *Server) readyErr() error {
	select {
	case <-s.ready:
	default:
		return errors.New("controllers not started")
	}
	if !s.registry.Synced() {
		return errors.New("CRDs not loaded")
	}
	if !s.registry.RBACReady() {
		return errors.New("default RBAC roles not in place yet")
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
	close(s.stopping)
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer cancel()
	err := s.http.Shutdown(ctx)
	if err != nil {
		_ = s.http.Close()
	}
	s.cancel()
	s.shutdownStorage()
	if s.audit != nil {
		_ = s.audit.Close()
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("requests still in flight after %v", s.cfg.ShutdownTimeout)
	}
	return nil
}

func (s *Server) shutdownStorage() {
	if s.registry != nil {
		s.registry.Stop()
	}
	if s.etcd != nil {
		s.etcd.Close()
	} else if s.cli != nil {
		_ = s.cli.Close()
	}
}

// buildHandler assembles the filter chain and the router.
func (s *Server) buildHandler() http.Handler {
	metrics := filters.NewMetrics()
	disc := &discovery.Handler{Registry: s.registry, Version: Version}
	oapi := openapi.New()
	s.registry.Subscribe(oapi.Sync)
	res := &resource.Handler{
		Store:             s.store,
		Namespaces:        s.registry.NamespaceChecker(),
		Log:               s.log,
		MinRequestTimeout: s.cfg.MinRequestTimeout,
		Stopping:          s.stopping,
	}
	etcdCheck := health.Check{Name: "etcd", Check: func(r *http.Request) error {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		_, err := s.store.CurrentRevision(ctx)
		return err
	}}
	logCheck := health.Check{Name: "log", Check: func(*http.Request) error { return nil }}
	synced := health.Check{Name: "poststarthook/crd-informer-synced", Check: func(*http.Request) error {
		if !s.registry.Synced() {
			return errors.New("CRDs not loaded yet")
		}
		return nil
	}}
	controllers := health.Check{Name: "poststarthook/start-apiextensions-controllers", Check: func(*http.Request) error {
		select {
		case <-s.ready:
			return nil
		default:
			return errors.New("controllers not started")
		}
	}}
	rbacBootstrap := health.Check{Name: "poststarthook/rbac/bootstrap-roles", Check: func(*http.Request) error {
		if !s.registry.RBACReady() {
			return errors.New("default RBAC roles not in place yet")
		}
		return nil
	}}
	shutdown := health.Check{Name: "shutdown", Check: func(*http.Request) error {
		select {
		case <-s.stopping:
			return errors.New("server is shutting down")
		default:
			return nil
		}
	}}
	livez := &health.Endpoint{Name: "livez", Checks: []health.Check{health.Ping, logCheck, etcdCheck}, Log: s.log}
	readyz := &health.Endpoint{Name: "readyz", Checks: []health.Check{health.Ping, logCheck, etcdCheck, synced, controllers, rbacBootstrap, shutdown}, Log: s.log}
	healthz := &health.Endpoint{Name: "healthz", Checks: []health.Check{health.Ping, logCheck, etcdCheck, synced, controllers, rbacBootstrap}, Log: s.log}

	router := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		info := request.InfoFrom(r.Context())
		if info.IsResourceRequest {
			res2, ver := s.registry.Index().Lookup(info.Group, info.Version, info.Resource)
			if res2 == nil && s.registry.CatchUp(r.Context()) == nil {
				// Another replica may have established it a moment ago.
				res2, ver = s.registry.Index().Lookup(info.Group, info.Version, info.Resource)
			}
			if res2 == nil {
				request.WriteError(w, r, request.NotFound())
				return
			}
			res.Serve(w, r, info, res2, ver)
			return
		}
		p := r.URL.Path
		switch {
		case p == "/version" || p == "/version/":
			disc.ServeVersion(w, r)
		case p == "/metrics":
			metrics.Handler().ServeHTTP(w, r)
		case p == "/livez" || strings.HasPrefix(p, "/livez/"):
			livez.ServeHTTP(w, r)
		case p == "/readyz" || strings.HasPrefix(p, "/readyz/"):
			readyz.ServeHTTP(w, r)
		case p == "/healthz" || strings.HasPrefix(p, "/healthz/"):
			healthz.ServeHTTP(w, r)
		case p == "/openapi/v2" || p == "/openapi/v3" || strings.HasPrefix(p, "/openapi/v3/"):
			oapi.ServeHTTP(w, r)
		case strings.HasPrefix(p, "/api"):
			// Discovery reflects every CRD change made before the request,
			// whichever replica made it.
			_ = s.registry.CatchUp(r.Context())
			if !disc.ServeHTTP(w, r) {
				request.WriteError(w, r, request.NotFound())
			}
		default:
			request.WriteError(w, r, request.NotFound())
		}
	})
	authz := auth.Chain{auth.Privileged{}, s.registry.RBAC()}
	var h http.Handler = router
	h = filters.WithCompression(h)
	h = auth.WithAuthorization(h, authz)
	h = filters.WithMaxInFlight(h, s.cfg.MaxRequestsInFlight, s.cfg.MaxMutatingRequestsInFlight)
	h = auth.WithImpersonation(h, authz)
	h = audit.WithAudit(h, s.audit)
	h = auth.WithAuthentication(h, s.authn)
	h = filters.WithRequestTimeout(h, s.cfg.RequestTimeout)
	h = metrics.WithMetrics(h)
	h = filters.WithRequestInfo(h)
	h = filters.WithRecovery(h, s.log)
	return h
}
