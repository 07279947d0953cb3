package rbac

import (
	"context"
	"log/slog"

	"github.com/crdserver/crdserver/internal/store"
)

// Follow keeps the store in step with the watch caches of the four RBAC
// resources, by kind (KindClusterRole, KindRole, KindClusterRoleBinding,
// KindRoleBinding), until ctx ends. Every replica follows: authorization
// decides from it.
func (s *Store) Follow(ctx context.Context, caches map[string]*store.Cache, log *slog.Logger) {
	for kind, c := range caches {
		go store.Follow(ctx, c, func(items []*store.Item, _ int64) {
			s.Reset(kind)
			for _, it := range items {
				if err := s.Set(kind, it.Bytes(), false); err != nil {
					log.Warn("rbac", "object", it.Key, "err", err)
				}
			}
		}, func(ev store.Event) {
			if err := s.Set(kind, ev.Item.Bytes(), ev.Type == store.Deleted); err != nil {
				log.Warn("rbac", "object", ev.Item.Key, "err", err)
			}
		})
	}
}
