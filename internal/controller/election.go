package controller

import (
	"context"
	"log/slog"
	"os"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Election says how replicas elect the one that runs the controllers: a
// coordination.k8s.io/v1 Lease, held and renewed as kube-controller-manager
// holds its own, with client-go's leader election.
type Election struct {
	// Namespace and Name of the Lease (default kube-system/crdserver-controllers).
	Namespace, Name string
	// Identity names this replica in the Lease (default hostname_uuid).
	Identity string
	// LeaseDuration is how long a lease not renewed keeps others waiting
	// (default 10 s): a dead leader is replaced within about that.
	LeaseDuration time.Duration
	// RenewDeadline is how long the leader tries to renew before it gives
	// up leading (default 7 s); RetryPeriod how often everyone tries
	// (default 2 s).
	RenewDeadline, RetryPeriod time.Duration
}

func (e Election) withDefaults() Election {
	if e.Namespace == "" {
		e.Namespace = "kube-system"
	}
	if e.Name == "" {
		e.Name = "crdserver-controllers"
	}
	if e.Identity == "" {
		host, _ := os.Hostname()
		e.Identity = host + "_" + string(uuid.NewUUID())
	}
	if e.LeaseDuration <= 0 {
		e.LeaseDuration = 10 * time.Second
	}
	if e.RenewDeadline <= 0 {
		e.RenewDeadline = 7 * time.Second
	}
	if e.RetryPeriod <= 0 {
		e.RetryPeriod = 2 * time.Second
	}
	return e
}

// Leader runs controllers on the replica that leads.
type Leader struct {
	election Election
	client   coordinationv1client.LeasesGetter
	newAll   func() []Controller
	log      *slog.Logger

	mu      sync.Mutex
	leading bool
	terms   int
}

// NewLeader returns a Leader that, on every term it wins, runs the
// controllers newAll makes (new ones each term: a term's controllers end
// with it).
func NewLeader(e Election, client coordinationv1client.LeasesGetter, newAll func() []Controller, log *slog.Logger) *Leader {
	return &Leader{election: e.withDefaults(), client: client, newAll: newAll, log: log}
}

// Identity is this replica's name in the Lease.
func (l *Leader) Identity() string { return l.election.Identity }

// Leading reports whether this replica leads now.
func (l *Leader) Leading() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.leading
}

// Terms counts the terms this replica has led.
func (l *Leader) Terms() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.terms
}

// Run campaigns until ctx ends; while it leads, the controllers run. When
// ctx ends the lease is released, so that another replica takes over at
// once.
func (l *Leader) Run(ctx context.Context) {
	e := l.election
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: e.Namespace, Name: e.Name},
		Client:     l.client,
		LockConfig: resourcelock.ResourceLockConfig{Identity: e.Identity},
	}
	for ctx.Err() == nil {
		var running sync.WaitGroup
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock:            lock,
			LeaseDuration:   e.LeaseDuration,
			RenewDeadline:   e.RenewDeadline,
			RetryPeriod:     e.RetryPeriod,
			ReleaseOnCancel: true,
			Name:            e.Name,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(lctx context.Context) {
					l.setLeading(true)
					l.log.Info("leading: starting the controllers", "identity", e.Identity)
					for _, c := range l.newAll() {
						running.Add(1)
						go func() {
							defer running.Done()
							c.Run(lctx)
						}()
					}
				},
				OnStoppedLeading: func() {
					l.setLeading(false)
					if ctx.Err() == nil {
						l.log.Warn("lost the lead: controllers stop", "identity", e.Identity)
					}
				},
			},
		})
		if err != nil {
			l.log.Error("leader election", "err", err)
			return
		}
		le.Run(ctx)
		// A term's controllers end before the next campaign.
		running.Wait()
	}
}

func (l *Leader) setLeading(v bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.leading = v
	if v {
		l.terms++
	}
}
