// Package controller holds what crdserver's controllers share, and the
// controllers themselves, one package each below it: crdnames (CRD names
// and establishing), crdcleanup (a deleted CRD's objects), namespace
// (a deleted namespace's objects), garbagecollector (ownerReferences),
// storagemigration (StorageVersionMigrations), clusterroles (default
// RBAC policy and aggregation), serviceaccounts (a default ServiceAccount
// per namespace) and rootca (the CA bundle per namespace).
//
// A controller is a leaf: it reads what is served and stored through the
// registry's Index and the watch caches (store.Follow), queues keys in a
// client-go work queue, and writes only through the API, with a client of
// the server's own loopback config, so that every write it makes obeys the
// same rules as a user's.
package controller

import (
	"context"
	"errors"
	"log/slog"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/workqueue"

	"github.com/crdserver/crdserver/internal/registry"
)

// Controller is one of crdserver's controllers.
type Controller interface {
	// Name names it in logs.
	Name() string
	// Run works until ctx ends.
	Run(ctx context.Context)
}

// Reader is what controllers read of what the server serves.
type Reader interface {
	// Index is the current snapshot of served resources and stored CRDs.
	Index() *registry.Index
	// Subscribe calls f with every new Index (quickly, under a lock).
	Subscribe(f func(*registry.Index))
}

// Queue is a rate-limited queue of keys, each queued at most once and
// worked by one worker at a time: client-go's workqueue.
type Queue = workqueue.TypedRateLimitingInterface[string]

// NewQueue makes a Queue whose failed keys come back after 50 ms, doubling
// up to 5 s.
func NewQueue(name string) Queue {
	return workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](50*time.Millisecond, 5*time.Second),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: name},
	)
}

// Work runs workers goroutines that take keys from q and sync them, until
// ctx ends (then q shuts down). A sync that fails puts its key back with
// backoff (logged unless it is a conflict or a not-found, which only mean
// that the world moved on); one that succeeds forgets the key's failures.
func Work(ctx context.Context, name string, q Queue, workers int, log *slog.Logger, sync func(ctx context.Context, key string) error) {
	go func() {
		<-ctx.Done()
		q.ShutDown()
	}()
	done := make(chan struct{})
	for i := 0; i < workers; i++ {
		go func() {
			defer func() { done <- struct{}{} }()
			for {
				key, quit := q.Get()
				if quit {
					return
				}
				err := sync(ctx, key)
				switch {
				case err == nil:
					q.Forget(key)
				case ctx.Err() != nil:
				case errors.Is(err, errRequeue):
					q.AddAfter(key, requeueAfter)
				default:
					if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
						log.Info(name, "key", key, "err", err)
					}
					q.AddRateLimited(key)
				}
				q.Done(key)
			}
		}()
	}
	for i := 0; i < workers; i++ {
		<-done
	}
}

// errRequeue asks Work to look at a key again soon, without logging.
var errRequeue = errors.New("not done yet")

// requeueAfter is when a key that waits for something is looked at again.
const requeueAfter = 250 * time.Millisecond

// Requeue is the error a sync returns when it is waiting for something
// (objects with finalizers to go): the key comes back in a moment.
func Requeue() error { return errRequeue }
