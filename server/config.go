package server

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"time"

	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/version"

	"github.com/crdserver/crdserver/internal/controller"
	"github.com/crdserver/crdserver/internal/conversion"
	"github.com/crdserver/crdserver/internal/store"
)

// Version returns what /version reports: the Kubernetes version whose API
// crdserver serves, marked as crdserver's build.
func Version() version.Info { return serverVersion }

var serverVersion = version.Info{
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

// CacheOptions tune the watch caches. Zero values take the defaults.
type CacheOptions struct {
	// History is how many recent events a cache keeps for watches that
	// resume from a resourceVersion (default 10000).
	History int
	// HistoryBytes bounds the bytes of the replaced states a cache's
	// history holds (default 16 MiB); older events go first.
	HistoryBytes int
	// WatcherBuffer is how many events a watcher may fall behind before it
	// is closed (default 1000).
	WatcherBuffer int
	// BookmarkInterval is how often watchers that asked for bookmarks get
	// one (default one minute).
	BookmarkInterval time.Duration
	// FreshTimeout bounds how long a read waits for a cache to reach a
	// revision (default 3 seconds).
	FreshTimeout time.Duration
}

// ConversionOptions tune webhook conversion. Zero values take the
// defaults.
type ConversionOptions struct {
	// ServiceAddresses says where conversion webhook services are, for a
	// server without cluster DNS: "namespace/name:port" → "host:port".
	ServiceAddresses map[string]string
	// Timeout bounds one webhook call (default 30 seconds).
	Timeout time.Duration
	// MaxObjectsPerCall bounds the objects in one ConversionReview
	// (default 1000).
	MaxObjectsPerCall int
	// RecheckInterval is how long a conversion webhook's answer for an
	// object is served again before a reader of the object asks the
	// webhook anew (default 10 seconds; negative: every read asks).
	RecheckInterval time.Duration
}

// DefaultCRDMemoryBudget is the default Config.CRDMemoryBudget: 160 MiB.
const DefaultCRDMemoryBudget = 160 << 20

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
	// EtcdNoFsync makes the embedded etcd skip fsync: writes are much
	// faster, and a crash of the machine may lose the latest of them. The
	// certificates the server makes are not synced either. For tests
	// (package crdtest sets it), never for data you keep.
	EtcdNoFsync bool
	// CompactionInterval is how often old etcd revisions are compacted
	// (default 5 minutes; negative disables).
	CompactionInterval time.Duration
	// VersionUsageWindow is how long who called an API version is
	// remembered after their last request (default 30 days).
	VersionUsageWindow time.Duration
	// VersionUsageFlushInterval is how often a replica writes who called
	// which version to the store, when it changed (default one minute).
	VersionUsageFlushInterval time.Duration
	// ShutdownTimeout bounds how long Close waits for requests in flight
	// (default 60 seconds).
	ShutdownTimeout time.Duration
	// MinRequestTimeout: watches without timeoutSeconds last between it and
	// twice it (default 30 minutes).
	MinRequestTimeout time.Duration
	// Cache tunes the watch caches (bookmark interval, history).
	Cache CacheOptions
	// CRDMemoryBudget bounds the memory, in estimated bytes, of what is
	// built for a CRD when a request first needs it (compiled schemas and
	// CEL programs, type converters for managedFields, OpenAPI documents):
	// beyond it, the least recently used are released and built again
	// when next needed (default DefaultCRDMemoryBudget; negative: no
	// bound).
	CRDMemoryBudget int64
	// Conversion tunes webhook conversion: service addresses (for servers
	// without cluster DNS), timeout, objects per call, how long answers
	// are kept.
	Conversion ConversionOptions
	// LeaderElection tunes the election of the replica that runs the
	// controllers.
	LeaderElection LeaderElectionOptions
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
	// Debug, when set, serves the paths under /debug/ (the crdserver
	// command sets Go's profiles, net/http/pprof, as kube-apiserver's
	// --profiling does). They go through authentication and authorization
	// as non-resource URLs: by default only cluster-admin may get them.
	// Without it they are 404.
	Debug http.Handler

	// Insecure serves plain HTTP and trusts every request with everything,
	// as kube-apiserver's old insecure port did. Only for a loopback
	// BindAddress.
	Insecure bool
	// TLSCertFile and TLSKeyFile are the operator's serving certificate;
	// without them crdserver makes its own (in DataDir/pki) on first start,
	// for 127.0.0.1, ::1, localhost, the host name, AdvertiseAddress and
	// TLSSANs.
	TLSCertFile, TLSKeyFile string
	// CACertFile and CAKeyFile are a CA to sign the serving and admin
	// certificates with, and to trust client certificates of, instead of
	// the one crdserver makes in DataDir/pki: give every replica the same
	// one and they trust each other's kubeconfigs and certificates.
	CACertFile, CAKeyFile string
	// TLSSANs are more names or addresses for the serving certificate.
	TLSSANs []string
	// AdvertiseAddress is the address clients reach the server on.
	AdvertiseAddress string
	// ClientCAFile holds more CAs whose client certificates authenticate
	// users (CN the user name, O the groups); crdserver's own CA, which
	// signs the admin certificate, always does.
	ClientCAFile string
	// RequestHeader is front-proxy authentication (as kube-apiserver's
	// --requestheader-* flags): off without its ClientCAFile.
	RequestHeader RequestHeaderConfig
	// TokenAuthFile is a Kubernetes static token file (CSV: token, user,
	// uid, "group1,group2").
	TokenAuthFile string
	// DisableAnonymous refuses requests without credentials (401) instead
	// of serving them as system:anonymous.
	DisableAnonymous bool
	// Authentication adds JWT (OpenID Connect) issuers and a token
	// webhook, as kube-apiserver's --authentication-config, --oidc-* and
	// --authentication-token-webhook-* flags.
	Authentication AuthenticationOptions

	// MaxRequestsInFlight and MaxMutatingRequestsInFlight bound the
	// read-only and the mutating requests served at once (watches and
	// system:masters not counted; defaults 400 and 200; negative: no limit).
	MaxRequestsInFlight, MaxMutatingRequestsInFlight int
	// DisablePriorityAndFairness turns API Priority and Fairness off (as
	// kube-apiserver's --enable-priority-and-fairness=false): the two
	// limits above then bound requests by themselves. With it on (the
	// default), their sum is the seats FlowSchemas and
	// PriorityLevelConfigurations share out.
	DisablePriorityAndFairness bool
	// RequestTimeout ends requests other than watches with 504 (default
	// 60 seconds; negative: none).
	RequestTimeout time.Duration

	// EventTTL is how long an Event lives after its last write (default
	// one hour), as kube-apiserver's --event-ttl.
	EventTTL time.Duration
	// EncryptionProviderConfig is a Kubernetes EncryptionConfiguration file
	// (apiserver.config.k8s.io/v1): the resources it names, Secrets
	// usually, are encrypted in etcd with its providers.
	EncryptionProviderConfig string
	// ServiceAccounts configures ServiceAccount tokens.
	ServiceAccounts ServiceAccountOptions
	// Aggregator configures the proxying to aggregated API servers
	// (APIServices with a service).
	Aggregator AggregatorOptions
	// Authorization is the authorizer chain after system:masters, as
	// kube-apiserver's --authorization-config or --authorization-mode
	// (default: RBAC).
	Authorization AuthorizationOptions
	// EnforceCRDCompatibility refuses (422) every CRD change that breaks
	// the deprecation policy or existing clients; by default they are
	// Warning headers, and refused only for CRDs annotated
	// crdserver.io/enforce-compatibility: "true".
	EnforceCRDCompatibility bool

	// AllowPrivileged is kube-apiserver's --allow-privileged: whether Pods
	// may run privileged containers. Like kube-apiserver's, it is set
	// once per process (k8s.io/kubernetes/pkg/capabilities): the first
	// server started in a process decides for all.
	AllowPrivileged bool
	// ServiceClusterIPRanges are kube-apiserver's
	// --service-cluster-ip-range (one CIDR, or two of different IP
	// families): where Services' cluster IPs come from (unset:
	// 10.0.0.0/24, kube-apiserver's default).
	ServiceClusterIPRanges []*net.IPNet
	// ServiceNodePortRange is kube-apiserver's --service-node-port-range:
	// where NodePort and LoadBalancer Services' node ports come from
	// (unset: 30000-32767).
	ServiceNodePortRange utilnet.PortRange
	// DisabledAdmissionPlugins are admission plugins turned off, by
	// kube-apiserver's names: NamespaceLifecycle, MutatingAdmissionPolicy,
	// MutatingAdmissionWebhook, ValidatingAdmissionPolicy,
	// ValidatingAdmissionWebhook (the plugins crdserver implements; all
	// are on by default).
	DisabledAdmissionPlugins []string
	// RuntimeConfig is kube-apiserver's --runtime-config: keys
	// <group>/<version> (v1 or api/v1 for the core group), api/all,
	// api/ga, api/beta, api/alpha, and values "true" or "false". A group
	// version turned off is neither served nor in discovery. Keys of
	// groups neither crdserver nor Kubernetes serves are refused; a group
	// version Kubernetes serves and crdserver does not may be turned off
	// (nothing to do), not on.
	RuntimeConfig map[string]string
}

// ServiceAccountOptions configure the tokens of ServiceAccounts
// (TokenRequest, `kubectl create token`). Zero values take the defaults.
type ServiceAccountOptions struct {
	// SigningKeyFile is the PEM private key (RSA or ECDSA) tokens are
	// signed with; default one crdserver makes in DataDir/pki/sa.key.
	// Replicas must share it.
	SigningKeyFile string
	// KeyFiles hold more public keys that verify tokens (keys being
	// rotated out).
	KeyFiles []string
	// Issuers are the accepted token issuers; the first is the one new
	// tokens name (default https://kubernetes.default.svc.cluster.local).
	Issuers []string
	// APIAudiences are the audiences tokens must name to authenticate to
	// this server (default: the first issuer).
	APIAudiences []string
	// MaxTokenExpiration shortens token requests that ask for more (0:
	// none).
	MaxTokenExpiration time.Duration
}

// LeaderElectionOptions tune how replicas elect the one that runs the
// controllers (a coordination.k8s.io/v1 Lease kube-system/crdserver-controllers).
// Zero values take the defaults.
type LeaderElectionOptions struct {
	// LeaseDuration is how long others wait for a leader that stopped
	// renewing (default 10 s); RenewDeadline how long the leader tries to
	// renew before it stops leading (default 7 s); RetryPeriod how often
	// replicas try (default 2 s).
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Identity names this replica in the Lease (default hostname_uuid).
	Identity string
}

func (o LeaderElectionOptions) internal() controller.Election {
	return controller.Election{LeaseDuration: o.LeaseDuration, RenewDeadline: o.RenewDeadline, RetryPeriod: o.RetryPeriod, Identity: o.Identity}
}

// withDefaults fills in what the zero Config leaves to the defaults.
func (cfg Config) withDefaults() (Config, error) {
	if cfg.DataDir == "" {
		return cfg, errors.New("server: DataDir is required")
	}
	if cfg.BindAddress == "" {
		cfg.BindAddress = "127.0.0.1"
	}
	if cfg.CompactionInterval == 0 {
		cfg.CompactionInterval = 5 * time.Minute
	}
	if cfg.VersionUsageWindow <= 0 {
		cfg.VersionUsageWindow = 30 * 24 * time.Hour
	}
	if cfg.VersionUsageFlushInterval <= 0 {
		cfg.VersionUsageFlushInterval = time.Minute
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
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.EventTTL <= 0 {
		cfg.EventTTL = time.Hour
	}
	if cfg.Insecure && !isLoopback(cfg.BindAddress) {
		return cfg, fmt.Errorf("plain HTTP is only served on a loopback address, not %s", cfg.BindAddress)
	}
	return cfg, nil
}

func (c CacheOptions) internal() store.CacheOptions {
	return store.CacheOptions{History: c.History, HistoryBytes: c.HistoryBytes, WatcherBuffer: c.WatcherBuffer, BookmarkInterval: c.BookmarkInterval, FreshTimeout: c.FreshTimeout}
}

func (c ConversionOptions) internal() conversion.Options {
	return conversion.Options{ServiceAddresses: c.ServiceAddresses, Timeout: c.Timeout, MaxObjectsPerCall: c.MaxObjectsPerCall, RecheckInterval: c.RecheckInterval}
}

// crdMemoryBudget is the limit of the CRD memory budget's pool for
// Config.CRDMemoryBudget: the default for 0, no bound (0) for a negative
// value.
func crdMemoryBudget(b int64) int64 {
	switch {
	case b == 0:
		return DefaultCRDMemoryBudget
	case b < 0:
		return 0
	}
	return b
}

// RequestHeaderConfig is front-proxy authentication: a client certificate
// signed by ClientCAFile (with one of AllowedNames as its common name, if
// any are given) may name the user in request headers, as kube-apiserver's
// aggregator does towards the servers it proxies to.
type RequestHeaderConfig struct {
	ClientCAFile                                                                 string
	AllowedNames, UsernameHeaders, UIDHeaders, GroupHeaders, ExtraHeaderPrefixes []string
}
