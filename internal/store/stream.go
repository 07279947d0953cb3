package store

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/metadata"
)

// watchStream is the one gRPC stream every watch cache of a store watches
// etcd on (the client shares a stream between watches of equal metadata):
// a thousand CRDs' caches are a thousand watches on one stream, not a
// thousand streams with their goroutines on both ends.
//
// A stream can go silent without failing: the member it is on froze (the
// connection stays open, keepalives aside) or was left for others (gRPC
// drains the connection, and a watch stream never ends by itself). So once
// every watch on the stream has said nothing for probeAfter, the store
// asks etcd for a progress notification on it (one answers for all), and
// once it has been silent for stallAfter, the stream is given up: every
// cache's watch ends and resumes, from the revision the cache applied, on
// a new stream, which the client opens on a member that answers.
type watchStream struct {
	cli *clientv3.Client

	mu     sync.Mutex
	n      int // streams opened
	ctx    context.Context
	cancel context.CancelFunc
	// heard is when something last came on the stream (unix nanoseconds).
	heard atomic.Int64
	// watches counts the caches watching on it; the monitor runs while
	// there are some.
	watches int
	stop    chan struct{}
}

const (
	probeAfter = 2 * time.Second
	stallAfter = 5 * time.Second
)

// open returns the context a cache's watch is made with (a child of the
// current stream's: cancelling it ends only that watch) and what ends it.
// The cache calls done when its watch has ended.
func (s *watchStream) open(ctx context.Context) (context.Context, context.CancelFunc, func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctx == nil || s.ctx.Err() != nil {
		s.n++
		md := metadata.AppendToOutgoingContext(clientv3.WithRequireLeader(context.Background()), "crdserver-watch", "caches#"+strconv.Itoa(s.n))
		s.ctx, s.cancel = context.WithCancel(md)
		s.heard.Store(time.Now().UnixNano())
	}
	stream, endStream := s.ctx, s.cancel
	wctx, cancel := context.WithCancel(stream)
	// The watch ends with the cache (ctx) too.
	stopWith := context.AfterFunc(ctx, cancel)
	s.watches++
	if s.watches == 1 {
		s.stop = make(chan struct{})
		go s.monitor(stream, endStream, s.stop)
	}
	var once sync.Once
	return wctx, cancel, func() {
		once.Do(func() {
			stopWith()
			cancel()
			s.mu.Lock()
			defer s.mu.Unlock()
			s.watches--
			if s.watches == 0 {
				close(s.stop)
			}
		})
	}
}

// heardNow records that the stream delivered something.
func (s *watchStream) heardNow() { s.heard.Store(time.Now().UnixNano()) }

// monitor probes a silent stream and gives up a stalled one, until stop.
func (s *watchStream) monitor(stream context.Context, endStream context.CancelFunc, stop chan struct{}) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		s.mu.Lock()
		if s.ctx != stream {
			// A new stream since: monitor that one.
			stream, endStream = s.ctx, s.cancel
		}
		s.mu.Unlock()
		switch silent := time.Since(time.Unix(0, s.heard.Load())); {
		case silent >= stallAfter:
			endStream()
		case silent >= probeAfter:
			pctx, cancel := context.WithTimeout(stream, time.Second)
			_ = s.cli.RequestProgress(pctx)
			cancel()
		}
	}
}
