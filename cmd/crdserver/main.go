// Command crdserver runs a Kubernetes-compatible API server for
// CustomResourceDefinitions and custom resources.
//
//	go run ./cmd/crdserver                      # serve; embedded etcd in ./crdserver-data
//	kubectl --kubeconfig crdserver-data/admin.kubeconfig get crd
//	go run ./cmd/crdserver migrate crontabs.stable.example.com
//	                                            # rewrite stored objects in the storage version
//	go run ./cmd/crdserver check-crd old.yaml new.yaml
//	                                            # changes that break a CRD's clients (exit 1 if any)
//	go run ./cmd/crdserver conversion-webhook --rules rules.yaml
//	                                            # declarative conversion rules as a conversion webhook
//	go run ./cmd/crdserver versions crontabs.stable.example.com --check-remove v1beta1
//	                                            # what removing a version would break (exit 1 if anything)
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/klog/v2"

	"github.com/crdserver/crdserver/server"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "crdserver:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) > 0 {
		switch args[0] {
		case "migrate":
			return runMigrate(args[1:], os.Stdout)
		case "check-crd":
			os.Exit(runCheck(args[1:], os.Stdin, os.Stdout, os.Stderr))
		case "check-conversion":
			os.Exit(checkConversion(args[1:], os.Stdout, os.Stderr))
		case "conversion-webhook":
			return runConversionWebhook(args[1:], os.Stderr)
		case "versions":
			os.Exit(runVersions(args[1:], os.Stdout, os.Stderr))
		case "serve":
			args = args[1:]
		}
	}
	fs := flag.NewFlagSet("crdserver", flag.ContinueOnError)
	var (
		dataDir       = fs.String("data-dir", "crdserver-data", "folder for the embedded etcd's data and admin.kubeconfig")
		bind          = fs.String("bind-address", "127.0.0.1", "address to listen on")
		port          = fs.Int("port", 6443, "port to listen on (0: any free port)")
		etcdServers   = fs.String("etcd-servers", "", "comma-separated URLs of an external etcd cluster to use instead of the embedded one")
		etcdCA        = fs.String("etcd-cafile", "", "CA bundle to verify the external etcd's certificates")
		etcdCert      = fs.String("etcd-certfile", "", "client certificate for the external etcd")
		etcdKey       = fs.String("etcd-keyfile", "", "client key for the external etcd")
		compaction    = fs.Duration("etcd-compaction-interval", 5*time.Minute, "how often to compact old etcd revisions (0 disables)")
		shutdown      = fs.Duration("shutdown-timeout", 60*time.Second, "how long to wait for requests in flight on SIGINT/SIGTERM")
		minReqTimout  = fs.Duration("min-request-timeout", 30*time.Minute, "shortest timeout of a watch that sets none (watches last between it and twice it)")
		logLevel      = fs.String("log-level", "info", "debug, info, warn or error")
		services      = serviceAddresses{}
		auditLog      = fs.String("audit-log-path", "", "append audit.k8s.io/v1 Events to this file as JSON lines (\"-\": standard output)")
		auditPolicy   = fs.String("audit-policy-file", "", "audit.k8s.io/v1 Policy choosing what is logged at which level (default: every request at Metadata)")
		auditMaxSize  = fs.Int("audit-log-maxsize", 0, "rotate the audit log when it reaches this many megabytes (0: never)")
		auditBackups  = fs.Int("audit-log-maxbackup", 0, "rotated audit logs to keep (0: all)")
		auditMaxAge   = fs.Int("audit-log-maxage", 0, "days to keep rotated audit logs (0: forever)")
		insecure      = fs.Bool("insecure-http", false, "serve plain HTTP, trusting every request with everything (loopback bind address only)")
		tlsCert       = fs.String("tls-cert-file", "", "serving certificate (PEM, with its chain); default: one crdserver makes in <data-dir>/pki")
		tlsKey        = fs.String("tls-private-key-file", "", "key of --tls-cert-file")
		caCert        = fs.String("ca-cert-file", "", "CA certificate (PEM) to sign the serving and admin certificates with and to trust client certificates of, instead of the CA crdserver makes; give every replica the same one")
		caKey         = fs.String("ca-key-file", "", "key of --ca-cert-file")
		clientCA      = fs.String("client-ca-file", "", "more CAs whose client certificates authenticate users (CN user, O groups)")
		proxyCA       = fs.String("requestheader-client-ca-file", "", "CAs of front proxies (an aggregator) whose client certificates may name the user in request headers")
		proxyNames    = listFlag{}
		proxyUser     = listFlag{}
		proxyUID      = listFlag{}
		proxyGroup    = listFlag{}
		proxyExtra    = listFlag{}
		tokenFile     = fs.String("token-auth-file", "", "static bearer tokens, Kubernetes' CSV format: token,user,uid,\"group1,group2\"")
		anonymous     = fs.Bool("anonymous-auth", true, "serve requests without credentials as system:anonymous (false: 401)")
		advertise     = fs.String("advertise-address", "", "address clients reach the server on (added to the serving certificate)")
		tlsSANs       = listFlag{}
		maxInFlight   = fs.Int("max-requests-inflight", 400, "read-only requests served at once before 429 (watches and system:masters not counted; 0: no limit)")
		maxMutating   = fs.Int("max-mutating-requests-inflight", 200, "mutating requests served at once before 429 (0: no limit)")
		enableAPF     = priorityAndFairnessFlag(fs)
		leaseDur      = fs.Duration("leader-elect-lease-duration", 10*time.Second, "how long replicas wait for a controller leader that stopped renewing its lease before one of them takes over")
		renewDead     = fs.Duration("leader-elect-renew-deadline", 7*time.Second, "how long the leader tries to renew its lease before it stops leading")
		retryPeriod   = fs.Duration("leader-elect-retry-period", 2*time.Second, "how often replicas try to acquire or renew the controller lease")
		reqTimeout    = fs.Duration("request-timeout", 60*time.Second, "time after which a request other than a watch is ended with 504 (0: none)")
		eventTTL      = fs.Duration("event-ttl", time.Hour, "how long an Event is kept after its last write")
		crdBudget     = fs.String("crd-memory-budget", "160Mi", "bound on the memory of what is built for CRDs when a request first needs it (compiled schemas, CEL programs, type converters, OpenAPI documents); beyond it the least recently used are released and built again when needed (a quantity: 512Mi, 1Gi; 0: no bound)")
		profile       = fs.Bool("profiling", true, "serve Go's profiles at /debug/pprof/ to clients allowed those non-resource URLs (cluster-admin)")
		enforceCompat = fs.Bool("enforce-crd-compatibility", false, "refuse (422) every CRD change that breaks the deprecation policy or existing clients (default: Warning headers, and refusal only for CRDs annotated crdserver.io/enforce-compatibility: \"true\")")
		encryption    = fs.String("encryption-provider-config", "", "Kubernetes EncryptionConfiguration file: the resources it names (Secrets, usually) are encrypted in etcd")
		saSigningKey  = fs.String("service-account-signing-key-file", "", "private key (PEM, RSA or ECDSA) ServiceAccount tokens are signed with; default one crdserver makes in <data-dir>/pki/sa.key (give every replica the same one)")
		saMaxExpiry   = fs.Duration("service-account-max-token-expiration", 0, "longest a requested ServiceAccount token may live (0: no bound)")
		usageWindow   = fs.Duration("version-usage-window", 30*24*time.Hour, "how long who called an API version is remembered after their last request (crdserver versions, VersionReports)")
		usageFlush    = fs.Duration("version-usage-flush-interval", time.Minute, "how often each replica writes who called which API version to etcd, when it changed")
		recheck       = fs.Duration("conversion-webhook-recheck-interval", 10*time.Second, "how long a conversion webhook's answer for an unchanged object is served again before the next read of it asks the webhook anew (0: every read asks)")
		saKeyFiles    = listFlag{}
		saIssuers     = listFlag{}
		apiAuds       = listFlag{}
	)
	fs.Var(&saKeyFiles, "service-account-key-file", "more public keys (PEM) that verify ServiceAccount tokens (repeatable)")
	fs.Var(&saIssuers, "service-account-issuer", "issuer of ServiceAccount tokens; the first is written into new tokens, all are accepted (repeatable; default https://kubernetes.default.svc.cluster.local)")
	fs.Var(&apiAuds, "api-audiences", "audiences a ServiceAccount token must name to authenticate here (comma-separated; default the first issuer)")
	fs.Var(&proxyNames, "requestheader-allowed-names", "common names of the front proxies' client certificates (comma-separated; empty: any the --requestheader-client-ca-file signed)")
	fs.Var(&proxyUser, "requestheader-username-headers", "request headers to read the user name from, in order (X-Remote-User is usual)")
	fs.Var(&proxyUID, "requestheader-uid-headers", "request headers to read the user's uid from (X-Remote-Uid is usual)")
	fs.Var(&proxyGroup, "requestheader-group-headers", "request headers to read the user's groups from (X-Remote-Group is usual)")
	fs.Var(&proxyExtra, "requestheader-extra-headers-prefix", "request header prefixes to read the user's extra from (X-Remote-Extra- is usual)")
	fs.Var(&tlsSANs, "tls-san", "another name or address for the serving certificate (repeatable, or comma-separated)")
	aggregator := aggregatorFlags(fs)
	authn := addAuthnFlags(fs)
	fs.Var(services, "webhook-service-address", "where a conversion webhook, admission webhook or APIService service is, for a server without cluster DNS: namespace/name:port=host:port (repeatable)")
	authorization := authorizationFlags(fs)
	kube := addKubeAPIServerFlags(fs, port)
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage(fs, os.Stdout)
			return nil
		}
		return parseError(err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q (crdserver --help lists the flags)", fs.Arg(0))
	}
	flagSet := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { flagSet[f.Name] = true })
	ks, err := kube.settings(*tlsCert != "" || *tlsKey != "")
	if err != nil {
		return err
	}
	if *recheck < 0 {
		return fmt.Errorf("--conversion-webhook-recheck-interval %v: want a duration of 0 (every read asks the webhook) or more", *recheck)
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	if ks.verbosity >= 4 && !flagSet["log-level"] {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	slog.SetDefault(log)
	// client-go's logs (leader election, for one) go the same way, those
	// of klog's level --v and below.
	klog.SetSlogLogger(log)
	if err := setKlogVerbosity(ks.verbosity); err != nil {
		return err
	}

	// --cert-dir: the serving certificate there, made when missing, as
	// kube-apiserver does.
	if ks.certFile != "" {
		if err := os.MkdirAll(filepath.Dir(ks.certFile), 0o755); err != nil {
			return fmt.Errorf("--cert-dir: %w", err)
		}
		made, err := ensureSelfSignedCert(ks.certFile, ks.keyFile, *bind, ks.serviceIPRanges)
		if err != nil {
			return fmt.Errorf("--cert-dir: %w", err)
		}
		if made {
			log.Info("generated a self-signed serving certificate", "cert", ks.certFile, "key", ks.keyFile)
		}
		*tlsCert, *tlsKey = ks.certFile, ks.keyFile
	}
	// With an external etcd and --cert-dir, as kube-apiserver is run, no
	// data directory is needed: crdserver's own files (its CA and the
	// admin certificate, the admin kubeconfig, a ServiceAccount key when
	// none is given) go to a temporary one, removed on exit.
	if !flagSet["data-dir"] && flagSet["cert-dir"] && *etcdServers != "" {
		tmp, err := os.MkdirTemp("", "crdserver-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		*dataDir = tmp
	}

	cfg := server.Config{
		DataDir:                   *dataDir,
		BindAddress:               *bind,
		Port:                      *port,
		EtcdCAFile:                *etcdCA,
		EtcdCertFile:              *etcdCert,
		EtcdKeyFile:               *etcdKey,
		CompactionInterval:        *compaction,
		ShutdownTimeout:           *shutdown,
		VersionUsageWindow:        *usageWindow,
		VersionUsageFlushInterval: *usageFlush,
		MinRequestTimeout:         *minReqTimout,
		Conversion:                server.ConversionOptions{ServiceAddresses: services, RecheckInterval: *recheck},
		AuditLogPath:              *auditLog,
		AuditPolicyFile:           *auditPolicy,
		AuditLogMaxSizeMB:         *auditMaxSize,
		AuditLogMaxBackups:        *auditBackups,
		AuditLogMaxAgeDays:        *auditMaxAge,
		Logger:                    log,
		Insecure:                  *insecure,
		TLSCertFile:               *tlsCert,
		TLSKeyFile:                *tlsKey,
		ClientCAFile:              *clientCA,
		RequestHeader: server.RequestHeaderConfig{ClientCAFile: *proxyCA, AllowedNames: proxyNames, UsernameHeaders: proxyUser,
			UIDHeaders: proxyUID, GroupHeaders: proxyGroup, ExtraHeaderPrefixes: proxyExtra},
		CACertFile:                  *caCert,
		CAKeyFile:                   *caKey,
		TokenAuthFile:               *tokenFile,
		DisableAnonymous:            !*anonymous,
		AdvertiseAddress:            *advertise,
		TLSSANs:                     tlsSANs,
		MaxRequestsInFlight:         orNoLimit(*maxInFlight),
		MaxMutatingRequestsInFlight: orNoLimit(*maxMutating),
		DisablePriorityAndFairness:  !*enableAPF,
		RequestTimeout:              *reqTimeout,
		LeaderElection:              server.LeaderElectionOptions{LeaseDuration: *leaseDur, RenewDeadline: *renewDead, RetryPeriod: *retryPeriod},
		EventTTL:                    *eventTTL,
		EncryptionProviderConfig:    *encryption,
		EnforceCRDCompatibility:     *enforceCompat,
		AllowPrivileged:             ks.allowPrivileged,
		ServiceClusterIPRanges:      ks.serviceIPRanges,
		ServiceNodePortRange:        ks.nodePortRange,
		DisabledAdmissionPlugins:    ks.disabledAdmission,
		RuntimeConfig:               ks.runtimeConfig,
		Aggregator:                  *aggregator,
		ServiceAccounts: server.ServiceAccountOptions{
			SigningKeyFile:     *saSigningKey,
			KeyFiles:           saKeyFiles,
			Issuers:            saIssuers,
			APIAudiences:       apiAuds,
			MaxTokenExpiration: *saMaxExpiry,
		},
	}
	cfg.Authentication = authn.options(fs)
	cfg.Authorization = authorization()
	if *reqTimeout == 0 {
		cfg.RequestTimeout = -1
	}
	if *recheck == 0 {
		cfg.Conversion.RecheckInterval = -1
	}
	budget, err := resource.ParseQuantity(*crdBudget)
	if err != nil || budget.Sign() < 0 {
		return fmt.Errorf("--crd-memory-budget %q: want a quantity such as 256Mi or 1Gi, or 0 for no bound", *crdBudget)
	}
	if cfg.CRDMemoryBudget = budget.Value(); cfg.CRDMemoryBudget == 0 {
		cfg.CRDMemoryBudget = -1
	}
	if *profile {
		cfg.Debug = profiling()
	}
	if *compaction == 0 {
		cfg.CompactionInterval = -1
	}
	if *etcdServers != "" {
		cfg.EtcdServers = strings.Split(*etcdServers, ",")
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	srv, err := server.Start(ctx, cfg)
	if err != nil {
		return err
	}
	if err := srv.WaitReady(ctx); err != nil {
		_ = srv.Close()
		return err
	}
	log.Info("crdserver is serving", "url", srv.URL(), "kubeconfig", srv.KubeconfigPath(), "startup", time.Since(start).Round(time.Millisecond))
	go releaseStartupMemory(ctx)
	<-ctx.Done()
	log.Info("shutting down")
	if err := srv.Close(); err != nil {
		return err
	}
	log.Info("stopped")
	return nil
}

// releaseStartupMemory hands the memory that starting took (schemas,
// OpenAPI, CEL environments built and dropped) back to the system once the
// controllers have settled, instead of as the Go scavenger does it, over
// minutes: an idle server's resident memory drops by about a third.
func releaseStartupMemory(ctx context.Context) {
	select {
	case <-ctx.Done():
		return
	case <-time.After(2 * time.Second):
		debug.FreeOSMemory()
	}
	// Afterwards, whenever the heap shrank a lot (a CRD and its objects
	// deleted) or a burst of work is over, the memory the heap no longer
	// uses goes back at once too, rather than over the scavenger's
	// minutes.
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	samples := []metrics.Sample{
		{Name: "/memory/classes/heap/free:bytes"},
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/gc/heap/live:bytes"},
		{Name: "/gc/heap/allocs:bytes"},
	}
	metrics.Read(samples)
	r := releaser{last: samples[3].Value.Uint64(), released: samples[3].Value.Uint64()}
	_, governed := os.LookupEnv("GOGC")
	governed = !governed
	percent := 100
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			metrics.Read(samples)
			if p := gcPercent(samples[2].Value.Uint64()); governed && p != percent {
				percent = p
				debug.SetGCPercent(p)
			}
			if r.release(samples[0].Value.Uint64()+samples[1].Value.Uint64(), samples[2].Value.Uint64(), samples[3].Value.Uint64()) {
				debug.FreeOSMemory()
			}
		}
	}
}

// What a quiet second allocates at most, what a burst of work allocates at
// least, and what the heap must hold beyond the live memory to be worth
// giving back after one.
const (
	quietAllocs  = 2 << 20
	burstAllocs  = 32 << 20
	releaseExtra = 16 << 20
)

// releaser decides, once a second, whether to give the heap's unused
// memory back: when the heap shrank a lot (shouldRelease), or when a burst
// of work (burstAllocs allocated since the last release) is followed by a
// quiet second. A busy server's heap grows to about twice its live memory
// (GOGC=100) and stays there; an idle one needs only what is live.
type releaser struct {
	// last and released are the bytes allocated so far at the previous
	// second and at the last release.
	last, released uint64
}

// release is given the heap's size (objects, dead or alive, and free
// memory not yet given back), what the last collection found live, and
// the bytes allocated so far.
func (r *releaser) release(heap, live, allocs uint64) bool {
	quiet := allocs-r.last < quietAllocs
	worked := allocs-r.released >= burstAllocs
	r.last = allocs
	if shouldRelease(heap, live) || (quiet && worked && heap >= live+releaseExtra) {
		r.released = allocs
		return true
	}
	return false
}

// shouldRelease says whether the heap (its objects, dead or alive, and its
// free memory not yet given back) holds enough more than what the last
// collection found live to give it back now: 64 MiB and twice what is
// live. A busy server's heap stays within about twice its live memory
// (GOGC=100), so only a heap that shrank qualifies.
func shouldRelease(heap, live uint64) bool {
	return heap >= live+64<<20 && heap > 3*live
}

// gcPercent is the GOGC for a heap with live bytes live: the heap grows
// past what is live by gcRoom before a collection, or a quarter of what is
// live if that is more (GOGC=100 up to gcRoom live; 25 from four times
// gcRoom). A server holding a million objects would otherwise hold as
// much again in garbage between collections; what it holds is mostly
// encoded objects, which a collection marks without reading them. Set
// GOGC in the environment to choose it yourself.
func gcPercent(live uint64) int {
	if live <= gcRoom {
		return 100
	}
	return max(int(100*gcRoom/live), 25)
}

const gcRoom = 128 << 20

// orNoLimit maps the flags' 0 (no limit) to the Config's negative.
func orNoLimit(n int) int {
	if n == 0 {
		return -1
	}
	return n
}

// listFlag is a repeatable flag whose values may also be comma-separated.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*l = append(*l, s)
		}
	}
	return nil
}

// serviceAddresses is the repeatable --webhook-service-address flag.
type serviceAddresses map[string]string

func (s serviceAddresses) String() string {
	var parts []string
	for k, v := range s {
		parts = append(parts, k+"="+v)
	}
	return strings.Join(parts, ",")
}

func (s serviceAddresses) Set(v string) error {
	key, addr, ok := strings.Cut(v, "=")
	ns, rest, ok2 := strings.Cut(key, "/")
	name, port, ok3 := strings.Cut(rest, ":")
	if !ok || !ok2 || !ok3 || ns == "" || name == "" || port == "" || addr == "" {
		return fmt.Errorf("want namespace/name:port=host:port, got %q", v)
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return fmt.Errorf("%q: %v", addr, err)
	}
	s[key] = addr
	return nil
}
