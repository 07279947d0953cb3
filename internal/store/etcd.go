package store

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3client"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// Embedded is an etcd server running inside this process.
type Embedded struct {
	etcd   *embed.Etcd
	Client *clientv3.Client
}

// StartEmbedded starts a single-member etcd whose data lives in dir and
// returns once it serves. It listens on no socket: the returned client calls
// the server in-process.
func StartEmbedded(ctx context.Context, dir string) (*Embedded, error) {
	return startEmbedded(ctx, dir, false)
}

// startEmbedded is StartEmbedded; noFsync skips fsync of etcd's log and
// database (a crash may lose the latest writes: for tests only).
func startEmbedded(ctx context.Context, dir string, noFsync bool) (*Embedded, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	cfg := embed.NewConfig()
	cfg.Name = "crdserver"
	cfg.Dir = dir
	cfg.LogLevel = "error"
	cfg.ListenClientUrls = nil
	cfg.AdvertiseClientUrls = nil
	cfg.ListenPeerUrls = nil
	// The single member advertises a peer URL that it never listens on: no
	// other member will ever dial it.
	peer, _ := url.Parse("http://127.0.0.1:2380")
	cfg.AdvertisePeerUrls = []url.URL{*peer}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	if _, err := os.Stat(filepath.Join(dir, "member")); err == nil {
		cfg.ClusterState = embed.ClusterStateFlagExisting
	}
	// A new single member elects itself 1 to 5 ticks after it starts
	// (etcd advances all but one tick of its randomized election timeout),
	// which only delays the start: with 5 ms ticks, 5-25 ms. Shorter ticks
	// cost idle CPU (5 ms: some 0.5% of a core more than 10 ms), and the
	// election timeout must be 5 ticks at least.
	cfg.TickMs = 5
	cfg.ElectionMs = 25
	cfg.WatchProgressNotifyInterval = 5 * time.Second
	cfg.MaxRequestBytes = 2 * 1024 * 1024
	cfg.QuotaBackendBytes = 8 * 1024 * 1024 * 1024
	cfg.EnableGRPCGateway = false
	cfg.Metrics = "basic"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cfg.UnsafeNoFsync = noFsync
	// etcd keeps the raft log in memory up to a snapshot, and some entries
	// after it for slow followers: by default 10,000 and 5,000 writes,
	// some 15 MiB of memory with 1-KiB objects, and gigabytes with large
	// CRDs (a provider's are 30-400 KiB each). A single embedded member
	// has no followers: a snapshot every 100 writes, 20 entries kept.
	cfg.SnapshotCount = 100
	cfg.SnapshotCatchUpEntries = 20

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("start embedded etcd in %s: %w", dir, err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("embedded etcd: %w", err)
	case <-ctx.Done():
		e.Close()
		return nil, ctx.Err()
	case <-time.After(60 * time.Second):
		e.Close()
		return nil, errors.New("embedded etcd did not become ready within 60s")
	}
	return &Embedded{etcd: e, Client: v3client.New(e.Server)}, nil
}

// Close stops the client and the server, waiting for the server to persist
// its state.
func (e *Embedded) Close() {
	_ = e.Client.Close()
	e.etcd.Close()
}

// OpenOptions say which etcd to store in.
type OpenOptions struct {
	// Log receives what the store notices of etcd's members.
	Log *slog.Logger
	// Dir is the embedded etcd's data folder, used when External has no
	// endpoints.
	Dir string
	// External is an etcd cluster to use instead.
	External ExternalConfig
	// NoFsync makes the embedded etcd skip fsync: much faster writes, but
	// a crash of the machine may lose the latest ones (for tests).
	NoFsync bool
	// Transformer, when set, transforms every value the store writes and
	// reads (encryption at rest).
	Transformer Transformer
}

// Open starts the embedded etcd in o.Dir, or connects to the external
// cluster, and returns a Store over it. Close stops it.
func Open(ctx context.Context, o OpenOptions) (*Store, error) {
	if len(o.External.Endpoints) > 0 {
		cli, err := Connect(ctx, o.External)
		if err != nil {
			return nil, err
		}
		s := New(cli)
		s.tf = o.Transformer
		hctx, stop := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			preferAnswering(hctx, cli, o.External.Endpoints, o.Log)
		}()
		s.close = func() {
			stop()
			<-done
			_ = cli.Close()
		}
		return s, nil
	}
	e, err := startEmbedded(ctx, o.Dir, o.NoFsync)
	if err != nil {
		return nil, err
	}
	s := New(e.Client)
	s.tf = o.Transformer
	s.close = e.Close
	// It listens on no socket: every write is this process's.
	s.onlyWriter = true
	return s, nil
}

// preferAnswering keeps the client on the members that answer: every
// second each member is asked for its status (one second at most), and the
// client's endpoints become those that answered with a leader. A member
// that stops answering (frozen, cut off, without a leader while the others
// have one) is left within about two seconds — its connections closed, the
// watches on them moved to another member — and taken back once it
// answers. When none answers, the client keeps them all.
func preferAnswering(ctx context.Context, cli *clientv3.Client, all []string, log *slog.Logger) {
	if len(all) < 2 {
		return
	}
	if log == nil {
		log = slog.Default()
	}
	current := slices.Clone(all)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		answered := make([]bool, len(all))
		var wg sync.WaitGroup
		for i, ep := range all {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sctx, cancel := context.WithTimeout(ctx, time.Second)
				defer cancel()
				st, err := cli.Status(sctx, ep)
				answered[i] = err == nil && st.Leader != 0
			}()
		}
		wg.Wait()
		var healthy []string
		for i, ep := range all {
			if answered[i] {
				healthy = append(healthy, ep)
			}
		}
		if len(healthy) == 0 {
			healthy = slices.Clone(all)
		}
		if slices.Equal(healthy, current) || ctx.Err() != nil {
			continue
		}
		log.Warn("etcd: using the members that answer", "endpoints", healthy, "of", all)
		cli.SetEndpoints(healthy...)
		current = healthy
	}
}

// ExternalConfig says how to reach an external etcd cluster.
type ExternalConfig struct {
	Endpoints []string
	CAFile    string
	CertFile  string
	KeyFile   string
}

// Connect dials an external etcd cluster and checks that it answers.
func Connect(ctx context.Context, c ExternalConfig) (*clientv3.Client, error) {
	cfg := clientv3.Config{
		Endpoints:   c.Endpoints,
		DialTimeout: 20 * time.Second,
		// A member that stops answering (frozen, cut off) is noticed within
		// seconds and its connection dropped, so that requests and watches
		// move to the others. 5 s is the most often etcd lets clients ping.
		DialKeepAliveTime:    5 * time.Second,
		DialKeepAliveTimeout: 2 * time.Second,
		Logger:               zap.NewNop(),
		DialOptions:          []grpc.DialOption{},
		// As kube-apiserver: large objects and lists.
		MaxCallRecvMsgSize: 0,
	}
	if c.CAFile != "" || c.CertFile != "" {
		tc := &tls.Config{MinVersion: tls.VersionTLS12}
		if c.CAFile != "" {
			pem, err := os.ReadFile(c.CAFile)
			if err != nil {
				return nil, err
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("%s holds no PEM certificate", c.CAFile)
			}
			tc.RootCAs = pool
		}
		if c.CertFile != "" || c.KeyFile != "" {
			cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
			if err != nil {
				return nil, err
			}
			tc.Certificates = []tls.Certificate{cert}
		}
		cfg.TLS = tc
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if _, err := cli.Get(cctx, "compact_rev_key", clientv3.WithCountOnly()); err != nil {
		_ = cli.Close()
		return nil, fmt.Errorf("etcd at %v: %w", c.Endpoints, err)
	}
	return cli, nil
}
