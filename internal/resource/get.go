package resource

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/crdserver/crdserver/internal/request"
	"github.com/crdserver/crdserver/internal/store"
)

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func invalidResourceVersion(rv string, err error) error {
	return apierrors.NewBadRequest(fmt.Sprintf("invalid resource version: resourceVersion: Invalid value: %q: %v", rv, err))
}

// get answers GET of one object: the newest (resourceVersion unset: a
// quorum read from etcd, or from the cache once it reached the newest
// revision when this process is etcd's only writer), any
// (resourceVersion=0, from the cache), or one not older than the given
// resourceVersion (from the cache once it has caught up).
func (c *call) get() {
	rvs := c.r.URL.Query().Get("resourceVersion")
	rv, err := ParseResourceVersion(rvs)
	if err != nil {
		c.fail(invalidResourceVersion(rvs, err))
		return
	}
	key := c.res.Key(c.namespace, c.info.Name)
	if rvs == "" && c.h.Store.OnlyWriter() {
		// A consistent read from the cache: when this process makes every
		// write, the newest revision is known without asking etcd, and
		// the cache holds every write made before the request once it
		// reached it (most often at once).
		if cur, err := c.h.Store.CurrentRevision(c.ctx); err == nil && c.cacheReaches(cur) {
			if it, _ := c.res.Cache.Get(key); it != nil {
				c.respondItem(it)
				return
			}
		}
		// The cache lags, or does not hold the object: gone, or one it
		// cannot read (whose read fails with the reason). Read etcd.
	}
	if rvs == "" {
		kv, _, err := c.h.Store.Get(c.ctx, key, 0)
		if err != nil {
			c.fail(c.storeError(err, c.info.Name))
			return
		}
		if it := c.cachedAt(kv); it != nil {
			// The cache holds this very state: its conversion (and what
			// reading it from storage takes) is shared with its readers.
			c.respondItem(it)
			return
		}
		it, err := DecodeItem(kv.Key, kv.Value, kv.ModRevision)
		if err != nil {
			c.fail(apierrors.NewInternalError(err))
			return
		}
		c.respond(http.StatusOK, it.Bytes())
		return
	}
	if rv > 0 {
		if err := c.res.Cache.WaitFresh(c.ctx, rv); err != nil {
			c.fail(c.storeError(err, c.info.Name))
			return
		}
	} else if err := c.res.Cache.WaitReady(c.ctx); err != nil {
		c.fail(c.storeError(err, c.info.Name))
		return
	}
	it, _ := c.res.Cache.Get(key)
	if it == nil {
		c.fail(c.notFound(c.info.Name))
		return
	}
	c.respondItem(it)
}

// freshWait bounds how long a GET waits for the cache to reach the newest
// revision before it reads etcd instead: a healthy cache is there at once,
// or within a progress notification from etcd.
const freshWait = 100 * time.Millisecond

// cacheReaches reports whether the resource's cache reaches revision rev,
// waiting for it up to freshWait.
func (c *call) cacheReaches(rev int64) bool {
	if c.res.Cache.Reaches(rev) {
		return true
	}
	ctx, cancel := context.WithTimeout(c.ctx, freshWait)
	defer cancel()
	return c.res.Cache.WaitFresh(ctx, rev) == nil
}

// respondItem sends a cached object in the request's version (as a Table
// or metadata only, if asked for), converted as the cache's readers share
// it.
func (c *call) respondItem(it *store.Item) {
	t, err := request.Negotiate(c.r, c.offer(readOffer))
	if err != nil {
		c.fail(err)
		return
	}
	out, err := c.convertItems([]*store.Item{it})
	if err != nil {
		c.fail(err)
		return
	}
	if t.As != request.AsObject {
		c.transform(t, out, objectAt(it.Rev))
		return
	}
	request.Write(c.w, c.r, http.StatusOK, t, out[0])
}

// read reads the newest version of one object from etcd.
func (c *call) read(key string) (*store.Item, error) {
	kv, _, err := c.h.Store.Get(c.ctx, key, 0)
	if err != nil {
		return nil, err
	}
	return DecodeItem(kv.Key, kv.Value, kv.ModRevision)
}
