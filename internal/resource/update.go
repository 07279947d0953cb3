package resource

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/admission"

	"github.com/crdserver/crdserver/internal/jsonraw"
	"github.com/crdserver/crdserver/internal/store"
)

// finalized reports whether an object whose deletion was requested may go:
// no finalizer left, and no grace period to wait for (a Pod deleted
// gracefully stays until a delete with a grace period of 0, as kube's
// registry keeps it).
func (c *call) finalized(obj *Object) bool {
	if obj.Meta.DeletionTimestamp == nil || len(obj.Meta.Finalizers) > 0 {
		return false
	}
	if g := obj.Meta.DeletionGracePeriodSeconds; g != nil && *g > 0 {
		return false
	}
	if f, ok := c.res.Strategy.(Finalizer); ok {
		return f.Finalized(obj)
	}
	return true
}

// update answers PUT of an object or of its status or finalize
// subresource.
func (c *call) update(sub string) {
	obj, dry, err := c.readBody("UpdateOptions")
	if err != nil {
		c.fail(err)
		return
	}
	name := c.info.Name
	if obj.Meta.Name == "" {
		obj.Meta.Name = name
	}
	if obj.Meta.Name != name {
		c.fail(apierrors.NewBadRequest("the name of the object (" + obj.Meta.Name + ") does not match the name on the URL (" + name + ")"))
		return
	}
	if c.res.AllowCreateOnUpdate && sub == "" {
		created, err := c.createOnUpdate(obj, dry)
		if err != nil || created != nil {
			if err != nil {
				c.fail(err)
				return
			}
			c.respond(http.StatusCreated, created)
			return
		}
	}
	if obj.Meta.ResourceVersion == "" && !c.res.AllowUnconditionalUpdate {
		gk := schema.GroupKind{Group: c.res.Group, Kind: c.res.Plural}
		c.fail(apierrors.NewInvalid(gk, name, field.ErrorList{field.Invalid(field.NewPath("metadata", "resourceVersion"), 0, "must be specified for an update")}))
		return
	}
	if err := c.checkManagerName("UpdateOptions"); err != nil {
		c.fail(err)
		return
	}
	raw, err := c.guaranteedUpdate(name, sub, dry, func(cur *Object) (*Object, error) {
		// A uid in the body is a precondition on the stored object, as in
		// Kubernetes' update handler.
		if obj.Meta.UID != "" && obj.Meta.UID != cur.Meta.UID {
			return nil, apierrors.NewConflict(c.res.GroupResource(), name, fmt.Errorf(
				"StorageError: invalid object, Code: 4, Key: %s, ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: UID in precondition: %v, UID in object meta: %v",
				c.res.Key(c.namespace, name), obj.Meta.UID, cur.Meta.UID))
		}
		next := obj.DeepCopy()
		if next.Meta.ResourceVersion == "" {
			next.Meta.ResourceVersion = cur.Meta.ResourceVersion
		}
		return c.track(cur, next, sub), nil
	})
	if err != nil {
		c.fail(err)
		return
	}
	c.respond(http.StatusOK, raw)
}

// createOnUpdate creates obj if it does not exist, as a PUT may for
// resources that allow it; it returns nil when the object exists (the PUT
// is an update). A PUT with a resourceVersion of an object that does not
// exist is 404, as in Kubernetes.
func (c *call) createOnUpdate(obj *Object, dry bool) ([]byte, error) {
	key := c.res.Key(c.namespace, obj.Meta.Name)
	if _, _, err := c.h.Store.Get(c.ctx, key, 0); !errors.Is(err, store.ErrNotFound) {
		if err != nil {
			return nil, c.storeError(err, obj.Meta.Name)
		}
		return nil, nil
	}
	if obj.Meta.ResourceVersion != "" {
		return nil, c.notFound(obj.Meta.Name)
	}
	if err := c.checkManagerName("UpdateOptions"); err != nil {
		return nil, err
	}
	return c.createObject(c.track(nil, obj, ""), dry)
}

// guaranteedUpdate reads the newest object, lets fn compute its new state
// (in the request's version), runs the update path and writes it if the
// object has not changed meanwhile; otherwise it starts over. An object
// whose resourceVersion fn leaves different from the stored one is a 409.
// A write that changes nothing stores nothing. It returns the stored
// object with its resourceVersion.
func (c *call) guaranteedUpdate(name, sub string, dry bool, fn func(cur *Object) (*Object, error), hooks ...updateHooks) ([]byte, error) {
	var h updateHooks
	if len(hooks) > 0 {
		h = hooks[0]
	}
	key := c.res.Key(c.namespace, name)
	kv, cached, err := c.current(key)
	if err != nil {
		return nil, c.storeError(err, name)
	}
	for {
		var cur *Object
		if cached != nil {
			cur, err = c.decodeItem(cached)
		} else {
			cur, err = c.decodeStored(kv)
		}
		if err != nil {
			return nil, err
		}
		next, err := fn(cur.DeepCopy())
		if err != nil {
			return nil, err
		}
		if next.Meta.ResourceVersion != cur.Meta.ResourceVersion {
			if _, perr := ParseResourceVersion(next.Meta.ResourceVersion); perr != nil {
				return nil, c.invalid(next.Kind(), name, field.ErrorList{field.Invalid(field.NewPath("metadata", "resourceVersion"), next.Meta.ResourceVersion, "must be a valid resourceVersion")})
			}
			return nil, c.conflict(name)
		}
		req := admissionRequest{op: admission.Update, sub: sub, obj: next, old: cur, options: c.updateOptions(dry), dry: dry}
		if !h.ownAdmission {
			if err := c.admitMutating(req); err != nil {
				return nil, err
			}
		}
		// What the update takes (a Service's new node ports) is
		// given back unless this try writes it.
		finish := func(bool) {}
		if sub == "" {
			if finish, err = c.allocate(next, cur, dry); err != nil {
				return nil, err
			}
		}
		out, retry, err := c.writeUpdate(key, name, sub, dry, req, h, next, cur, kv, cached)
		finish(err == nil && !retry)
		if retry {
			kv, cached = out.latest, nil
			continue
		}
		return out.data, err
	}
}

// updateTry is what one try of guaranteedUpdate wrote: the answer, or the
// newest state of the object when the write met another.
type updateTry struct {
	data   []byte
	latest *store.KV
}

// writeUpdate is one try of guaranteedUpdate, from the strategy on: it
// returns retry when the object changed meanwhile.
func (c *call) writeUpdate(key, name, sub string, dry bool, req admissionRequest, h updateHooks, next, cur *Object, kv *store.KV, cached *store.Item) (updateTry, bool, error) {
	if err := c.prepareUpdate(c.ctx, next, cur, sub); err != nil {
		return updateTry{}, false, err
	}
	if h.validate != nil {
		if err := h.validate(next, cur); err != nil {
			return updateTry{}, false, err
		}
	}
	if !h.ownAdmission {
		if err := c.admitValidating(req); err != nil {
			return updateTry{}, false, err
		}
	}
	data, err := c.toStorage(next)
	if err != nil {
		return updateTry{}, false, err
	}
	if unchanged(data, kv, cached) || dry {
		data, err = jsonraw.SetResourceVersion(data, kv.ModRevision)
		return updateTry{data: data}, false, err
	}
	if c.finalized(next) {
		// The last finalizer is gone: the object goes instead of being
		// written, as Kubernetes deletes it (watchers see it deleted
		// as it was stored), and the answer is the object as the
		// update made it.
		_, latest, err := c.h.Store.Delete(c.ctx, key, kv.ModRevision)
		if errors.Is(err, store.ErrConflict) {
			return updateTry{latest: latest}, true, nil
		}
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return updateTry{}, false, c.storeError(err, name)
		}
		if err == nil {
			c.released(next)
		}
		data, err = jsonraw.SetResourceVersion(data, kv.ModRevision)
		return updateTry{data: data}, false, err
	}
	opts := c.writeOptions(next)
	rev, latest, err := c.h.Store.Update(c.ctx, key, data, kv.ModRevision, opts)
	if errors.Is(err, store.ErrConflict) {
		return updateTry{latest: latest}, true, nil
	}
	if err != nil {
		return updateTry{}, false, c.storeError(err, name)
	}
	c.wrote(data, rev, opts)
	data, err = jsonraw.SetResourceVersion(data, rev)
	return updateTry{data: data}, false, err
}

// updateHooks change what guaranteedUpdate does around the update path.
type updateHooks struct {
	// ownAdmission: the caller runs admission itself (a subresource whose
	// admission objects are not the object, such as scale).
	ownAdmission bool
	// validate runs after the strategy's validation.
	validate func(next, cur *Object) error
}

// current returns the newest state of key: the cache's item (with a KV
// without its Value) when this process is etcd's only writer and the cache
// has every write made before the request already (it is not waited for:
// while others write, etcd answers sooner); else what etcd holds. A write
// from it is guarded by its revision either way.
func (c *call) current(key string) (*store.KV, *store.Item, error) {
	if c.res.Cache != nil && c.h.Store.OnlyWriter() {
		if cur, err := c.h.Store.CurrentRevision(c.ctx); err == nil && c.res.Cache.Reaches(cur) {
			if it, _ := c.res.Cache.Get(key); it != nil {
				return &store.KV{Key: key, ModRevision: it.Rev}, it, nil
			}
		}
	}
	kv, _, err := c.h.Store.Get(c.ctx, key, 0)
	return kv, nil, err
}

// unchanged reports whether data is what is stored: kv's value, or the
// cached item's JSON (which has the revision in it).
func unchanged(data []byte, kv *store.KV, cached *store.Item) bool {
	if cached == nil {
		return bytes.Equal(data, kv.Value)
	}
	withRV, err := jsonraw.SetResourceVersion(data, kv.ModRevision)
	return err == nil && bytes.Equal(withRV, cached.Bytes())
}

// decodeItem decodes a cached object in the request's version.
func (c *call) decodeItem(it *store.Item) (*Object, error) {
	out, err := c.convertItems([]*store.Item{it})
	if err != nil {
		return nil, err
	}
	obj, err := DecodeObject(out[0])
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	return obj, nil
}

// decodeStored decodes a stored object, in the request's version, with its
// resourceVersion. When the watch cache holds that very state, its
// conversion is shared with the cache's readers (a write after a read
// converts nothing again).
func (c *call) decodeStored(kv *store.KV) (*Object, error) {
	if it := c.cachedAt(kv); it != nil {
		return c.decodeItem(it)
	}
	raw, err := jsonraw.SetResourceVersion(kv.Value, kv.ModRevision)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	out, err := c.convert([][]byte{raw})
	if err != nil {
		return nil, err
	}
	obj, err := DecodeObject(out[0])
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	return obj, nil
}

// cachedAt returns the cache's item for kv if the cache holds that very
// state of the object.
func (c *call) cachedAt(kv *store.KV) *store.Item {
	if c.res.Cache == nil {
		return nil
	}
	if it, _ := c.res.Cache.Get(kv.Key); it != nil && it.Rev == kv.ModRevision {
		return it
	}
	return nil
}
