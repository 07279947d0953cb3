package resource

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversionscheme "k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/warning"

	"github.com/crdserver/crdserver/internal/conversion"
	"github.com/crdserver/crdserver/internal/jsonraw"
	"github.com/crdserver/crdserver/internal/request"
	"github.com/crdserver/crdserver/internal/store"
)

// deleteOptions reads DeleteOptions from the query and the body.
func (c *call) deleteOptions() (*metav1.DeleteOptions, bool, error) {
	opts := &metav1.DeleteOptions{}
	if err := metainternalversionscheme.ParameterCodec.DecodeParameters(c.r.URL.Query(), metav1.SchemeGroupVersion, opts); err != nil {
		return nil, false, apierrors.NewBadRequest(err.Error())
	}
	body, err := request.ReadBody(c.r)
	if err != nil {
		return nil, false, err
	}
	if len(body) > 0 {
		mt := request.MediaType(c.r)
		if mt == request.Protobuf {
			if body, err = request.ProtobufToJSON(body, "DeleteOptions"); err != nil {
				return nil, false, err
			}
			mt = "application/json"
		}
		j, err := request.ToJSON(body, mt, "DeleteOptions")
		if err != nil {
			return nil, false, err
		}
		if err := json.Unmarshal(j, opts); err != nil {
			return nil, false, apierrors.NewBadRequest(fmt.Sprintf("the object provided is unrecognized (must be of type DeleteOptions): %v", err))
		}
	}
	// The query's and the body's options are checked together, as
	// Kubernetes checks them (a dryRun in either is named as
	// DeleteOptions').
	if errs := metav1validation.ValidateDeleteOptions(opts); len(errs) > 0 {
		return nil, false, apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "DeleteOptions"}, "", errs)
	}
	// A negative grace period is taken as 1 second
	// (k8s.io/apiserver/pkg/registry/rest.BeforeDelete).
	if opts.GracePeriodSeconds != nil && *opts.GracePeriodSeconds < 0 {
		one := int64(1)
		opts.GracePeriodSeconds = &one
	}
	dry := len(opts.DryRun) > 0
	return opts, dry, nil
}

// delete answers DELETE of one object.
func (c *call) delete() {
	opts, dry, err := c.deleteOptions()
	if err != nil {
		c.fail(err)
		return
	}
	if err := c.admitMutating(admissionRequest{op: admission.Delete, options: deleteOptionsObject(opts), dry: dry}); err != nil {
		c.fail(err)
		return
	}
	c.warnOrphaning(opts)
	raw, uid, deleted, err := c.deleteObject(c.info.Name, opts, dry)
	if err != nil {
		c.fail(err)
		return
	}
	if deleted && !c.res.ReturnDeletedObject {
		c.respondDeleted(c.info.Name, uid)
		return
	}
	// The object stays (finalizers, a graceful deletion), or is gone and
	// the resource answers with its last state: it is answered in the
	// request's version, or, when that conversion fails (a webhook that
	// is down), with a Status: the deletion happened all the same.
	if _, err := c.convert([][]byte{raw}); err != nil {
		c.h.Log.Warn("delete: the object is answered as a Status", "resource", c.res.String(), "name", c.info.Name, "err", err)
		c.respondDeleted(c.info.Name, uid)
		return
	}
	status := http.StatusOK
	// An object kept after a delete that asked for its dependents to be
	// deleted (the deprecated orphanDependents=false) is answered 202
	// Accepted, as kube-apiserver answers it.
	if !deleted && opts.OrphanDependents != nil && !*opts.OrphanDependents { //nolint:staticcheck // still honoured, as in Kubernetes
		status = http.StatusAccepted
	}
	c.respond(status, raw)
}

func (c *call) respondDeleted(name string, uid types.UID) {
	t, err := request.Negotiate(c.r, c.offer(request.Offer{}))
	if err != nil {
		c.fail(err)
		return
	}
	request.WriteObject(c.w, c.r, http.StatusOK, request.Target{Format: t.Format, Pretty: t.Pretty}, &metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusSuccess,
		Details:  &metav1.StatusDetails{Name: name, Group: c.res.Group, Kind: c.res.Plural, UID: uid},
	})
}

// checkPreconditions checks a delete's preconditions on cur, worded as
// Kubernetes words them: on the object first read, as its
// rest.BeforeDelete does (the resource named by kind); on an object that
// changed in between, as its storage layer does.
func (c *call) checkPreconditions(p *metav1.Preconditions, cur *Object, name string, first bool) error {
	if p == nil {
		return nil
	}
	if first {
		gr := schema.GroupResource{Group: c.res.Group, Resource: c.res.Kind}
		if p.UID != nil && *p.UID != cur.Meta.UID {
			return apierrors.NewConflict(gr, name, fmt.Errorf("the UID in the precondition (%s) does not match the UID in record (%s). The object might have been deleted and then recreated", *p.UID, cur.Meta.UID))
		}
		if p.ResourceVersion != nil && *p.ResourceVersion != cur.Meta.ResourceVersion {
			return apierrors.NewConflict(gr, name, fmt.Errorf("the ResourceVersion in the precondition (%s) does not match the ResourceVersion in record (%s). The object might have been modified", *p.ResourceVersion, cur.Meta.ResourceVersion))
		}
		return nil
	}
	if p.UID != nil && *p.UID != cur.Meta.UID {
		return apierrors.NewConflict(c.res.GroupResource(), name,
			//nolint:staticcheck // Kubernetes' exact message
			fmt.Errorf("Precondition failed: UID in precondition: %v, UID in object meta: %v", *p.UID, cur.Meta.UID))
	}
	if p.ResourceVersion != nil && *p.ResourceVersion != cur.Meta.ResourceVersion {
		return apierrors.NewConflict(c.res.GroupResource(), name,
			//nolint:staticcheck // Kubernetes' exact message
			fmt.Errorf("Precondition failed: ResourceVersion in precondition: %v, ResourceVersion in object meta: %v", *p.ResourceVersion, cur.Meta.ResourceVersion))
	}
	return nil
}

// deleteObject deletes one object, or marks it deleted while finalizers,
// a graceful deletion (GracefulDeleter) or the resource's own delete hook
// keep it. It returns the object as stored (as marked, or its last state
// when it is gone) and whether it is gone.
func (c *call) deleteObject(name string, opts *metav1.DeleteOptions, dry bool) ([]byte, types.UID, bool, error) {
	key := c.res.Key(c.namespace, name)
	if _, ok := c.res.Strategy.(GracefulDeleter); ok {
		// Its strategy sets the grace period in the options: each object
		// deleted has its own.
		opts = opts.DeepCopy()
	}
	kv, _, err := c.h.Store.Get(c.ctx, key, 0)
	if err != nil {
		return nil, "", false, c.storeError(err, name)
	}
	admitted, first := false, true
	for {
		// Deleting needs no conversion: the object is read as Kubernetes'
		// storage decoder reads it (metadata that does not decode dropped,
		// the schema of the version it is stored in applied) and, when
		// finalizers keep it, written in that version, so that a
		// conversion webhook that is down does not block deletions
		// (kubernetes/kubernetes#71925).
		raw, err := jsonraw.SetResourceVersion(kv.Value, kv.ModRevision)
		if err != nil {
			raw = kv.Value
		} else if normalized, err := conversion.Stored(c.res.Converter, raw); err == nil {
			raw = normalized
		}
		// An object nothing can read (not JSON, metadata not an object)
		// may still go; it is never written back.
		cur, undecodable := DecodeStoredObject(raw)
		if undecodable != nil {
			cur = &Object{Content: map[string]any{}}
		}
		if err := c.checkPreconditions(opts.Preconditions, cur, name, first); err != nil {
			return nil, "", false, err
		}
		first = false
		// Validating admission sees the object being deleted, in the
		// request's version, once its preconditions hold (as Kubernetes'
		// registry validates a deletion).
		if !admitted {
			if err := c.admitDelete(raw, cur, opts, dry); err != nil {
				return nil, "", false, err
			}
			admitted = true
		}
		next := cur.DeepCopy()
		keep, gracefully, pending, err := c.markDeleted(next, opts, undecodable == nil)
		if err != nil {
			return nil, "", false, err
		}
		if pending {
			// A graceful deletion under way, not shortened by this one:
			// the object is answered as it is.
			return raw, cur.Meta.UID, false, nil
		}
		if keep && undecodable != nil {
			return nil, "", false, apierrors.NewInternalError(undecodable)
		}
		if keep {
			data, err := c.toStorage(next)
			if err != nil {
				// Only metadata changed: written in the version it is
				// stored in when it cannot be converted to the storage
				// version now.
				if data, err = next.encodeForStorage(); err != nil {
					return nil, "", false, apierrors.NewInternalError(err)
				}
			}
			if bytes := data; string(bytes) == string(kv.Value) || dry {
				out, err := jsonraw.SetResourceVersion(data, kv.ModRevision)
				return out, cur.Meta.UID, false, err
			}
			rev, latest, err := c.h.Store.Update(c.ctx, key, data, kv.ModRevision, store.WriteOptions{TTL: c.res.TTL})
			if errors.Is(err, store.ErrConflict) {
				kv = latest
				continue
			}
			if err != nil {
				return nil, "", false, c.storeError(err, name)
			}
			out, err := jsonraw.SetResourceVersion(data, rev)
			return out, cur.Meta.UID, false, err
		}
		if gracefully {
			// A graceful delete with no grace period left: the object is
			// written marked (a watcher sees it), then deleted.
			data, err := c.toStorage(next)
			if err != nil {
				return nil, "", false, apierrors.NewInternalError(err)
			}
			rev := kv.ModRevision
			if !dry {
				var latest *store.KV
				rev, latest, err = c.h.Store.Update(c.ctx, key, data, kv.ModRevision, store.WriteOptions{TTL: c.res.TTL})
				if errors.Is(err, store.ErrConflict) {
					kv = latest
					continue
				}
				if err != nil {
					return nil, "", false, c.storeError(err, name)
				}
				kv = &store.KV{Key: key, Value: data, ModRevision: rev, CreateRevision: kv.CreateRevision}
			}
			if raw, err = jsonraw.SetResourceVersion(data, rev); err != nil {
				return nil, "", false, apierrors.NewInternalError(err)
			}
			cur = next
		}
		if dry {
			return raw, cur.Meta.UID, true, nil
		}
		_, latest, err := c.h.Store.Delete(c.ctx, key, kv.ModRevision)
		if errors.Is(err, store.ErrConflict) {
			kv = latest
			continue
		}
		if err != nil {
			return nil, "", false, c.storeError(err, name)
		}
		if undecodable == nil {
			c.released(cur)
		}
		return raw, cur.Meta.UID, true, nil
	}
}

// markDeleted applies a delete to next, a copy of the stored object
// (decodable says whether it decoded): a graceful deletion
// (GracefulDeleter), the resource's delete hook, the finalizers the
// propagation policy asks for. It returns whether the object stays
// (written as next), whether a graceful delete marked it (with no grace
// period left when it does not stay: it is written, then deleted), and
// whether a graceful deletion under way is left as it is (pending).
func (c *call) markDeleted(next *Object, opts *metav1.DeleteOptions, decodable bool) (keep, gracefully, pending bool, err error) {
	wasDeleting := next.Meta.DeletionTimestamp != nil
	if g, ok := c.res.Strategy.(GracefulDeleter); ok && decodable {
		if gracefully, pending, err = g.BeforeGracefulDelete(c.ctx, next, opts); err != nil || pending {
			return false, false, pending, err
		}
	}
	hookKeeps := false
	if hook, ok := c.res.Strategy.(DeleteHook); ok {
		if hookKeeps, err = hook.BeforeDelete(c.ctx, next); err != nil {
			return false, false, false, err
		}
	}
	// Orphan and Foreground propagation hand the object to the garbage
	// collector through a finalizer, as in Kubernetes.
	f := propagationFinalizer(opts)
	if f == "" && c.orphansByDefault(opts) && !slices.Contains(next.Meta.Finalizers, metav1.FinalizerDeleteDependents) {
		f = metav1.FinalizerOrphanDependents
	}
	if f != "" && !hookKeeps && !slices.Contains(next.Meta.Finalizers, f) {
		next.Meta.Finalizers = append(next.Meta.Finalizers, f)
	}
	// A grace period to wait for keeps the object, as finalizers do.
	keep = hookKeeps || gracefully && next.Meta.DeletionGracePeriodSeconds != nil && *next.Meta.DeletionGracePeriodSeconds > 0
	if !keep && len(next.Meta.Finalizers) > 0 {
		keep = true
		if next.Meta.DeletionTimestamp == nil {
			now := c.h.now()
			zero := int64(0)
			next.Meta.DeletionTimestamp = &now
			next.Meta.DeletionGracePeriodSeconds = &zero
		}
	}
	// Starting deletion is a change of the object: Kubernetes counts it
	// in the generation (a graceful delete has counted it).
	if keep && !gracefully && !wasDeleting && next.Meta.DeletionTimestamp != nil && next.Meta.Generation > 0 {
		next.Meta.Generation++
	}
	return keep, gracefully, false, nil
}

// deleteCollection answers DELETE of a collection: every object the
// selectors match is deleted (or marked deleted), and the list of them is
// returned.
func (c *call) deleteCollection() {
	lopts, err := c.listOptions()
	if err != nil {
		c.fail(err)
		return
	}
	dopts, dry, err := c.deleteOptions()
	if err != nil {
		c.fail(err)
		return
	}
	if err := c.admitMutating(admissionRequest{op: admission.Delete, options: deleteOptionsObject(dopts), dry: dry}); err != nil {
		c.fail(err)
		return
	}
	c.warnOrphaning(dopts)
	lopts.Limit, lopts.Continue = 0, ""
	p, err := c.collect(lopts)
	if err != nil {
		c.fail(c.storeError(err, ""))
		return
	}
	out, err := c.deleteItems(p.stored(), dopts, dry)
	if err != nil {
		c.fail(err)
		return
	}
	items, err := c.convert(out)
	if err != nil {
		// They are deleted: what could not be converted is answered as
		// stored rather than failing a deletion that happened.
		c.h.Log.Warn("deletecollection: objects answered as stored", "resource", c.res.String(), "err", err)
		items = out
	}
	t, err := request.Negotiate(c.r, c.offer(request.Offer{}))
	if err != nil {
		c.fail(err)
		return
	}
	request.Write(c.w, c.r, http.StatusOK, t, c.encodeList(items, wholeListAt(p.rev)))
}

// deleteWorkers is how many objects a DELETE of a collection deletes at
// once. Each is still its own write, with its own resourceVersion and
// watch event, as one by one; etcd commits concurrent writes together
// (one WAL sync for several), so deleting a CRD's or a namespace's objects
// takes a fraction of the time.
const deleteWorkers = 16

// deleteItems deletes (or, where finalizers keep them, marks deleted) the
// objects of items, raw as listed, deleteWorkers at a time. It returns
// them in the order of items, each as deleted or as marked, without those
// already gone. After the first error no more deletions start; the
// error is returned once those under way have ended.
func (c *call) deleteItems(items [][]byte, opts *metav1.DeleteOptions, dry bool) ([][]byte, error) {
	out := make([][]byte, len(items))
	// The workers' warnings (from admission) reach the response one at a
	// time.
	ctx := warning.WithWarningRecorder(c.ctx, &lockedWarnings{next: headerWarnings{c.w}})
	var (
		mu       sync.Mutex
		next     int
		firstErr error
		wg       sync.WaitGroup
	)
	take := func() (int, bool) {
		mu.Lock()
		defer mu.Unlock()
		if firstErr != nil || next == len(items) {
			return 0, false
		}
		next++
		return next - 1, true
	}
	for range min(deleteWorkers, len(items)) {
		wg.Go(func() {
			for {
				i, ok := take()
				if !ok {
					return
				}
				var m itemMeta
				if err := json.Unmarshal(items[i], &m); err != nil {
					continue
				}
				dc := *c
				dc.ctx, dc.namespace = ctx, m.Metadata.Namespace
				obj, _, deleted, err := dc.deleteObject(m.Metadata.Name, opts, dry)
				switch {
				case apierrors.IsNotFound(err):
				case err != nil:
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				case deleted:
					out[i] = items[i]
				default:
					out[i] = obj
				}
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	return slices.DeleteFunc(out, func(b []byte) bool { return b == nil }), nil
}

// lockedWarnings passes warnings on to next one at a time.
type lockedWarnings struct {
	mu   sync.Mutex
	next warning.Recorder
}

func (l *lockedWarnings) AddWarning(agent, text string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.next.AddWarning(agent, text)
}

// admitDelete runs validating admission on the deletion of cur (raw as
// read from storage). The plugins get the object in the request's version;
// when it cannot be converted (a conversion webhook that is down), they
// get it as stored, so that deleting never depends on conversion.
func (c *call) admitDelete(raw []byte, cur *Object, opts *metav1.DeleteOptions, dry bool) error {
	ac := c.h.Admission
	if ac == nil || !ac.Handles(admission.Delete) {
		return nil
	}
	old := cur
	if served, err := c.convert([][]byte{raw}); err == nil {
		if o, err := DecodeStoredObject(served[0]); err == nil {
			old = o
		}
	}
	return c.admitValidating(admissionRequest{op: admission.Delete, old: old, options: deleteOptionsObject(opts), dry: dry})
}

// deleteOptionsObject is the DeleteOptions admission sees.
func deleteOptionsObject(opts *metav1.DeleteOptions) runtime.Object {
	o := opts.DeepCopy()
	o.SetGroupVersionKind(metav1.SchemeGroupVersion.WithKind("DeleteOptions"))
	return o
}

// orphansByDefault says whether a delete with opts orphans the object's
// dependents because it names no policy and the resource orphans them by
// default (OrphanDefaulter).
func (c *call) orphansByDefault(opts *metav1.DeleteOptions) bool {
	d, ok := c.res.Strategy.(OrphanDefaulter)
	if !ok || opts.PropagationPolicy != nil || opts.OrphanDependents != nil { //nolint:staticcheck // still honoured, as in Kubernetes
		return false
	}
	_, orphan := d.OrphansByDefault()
	return orphan
}

// warnOrphaning sends the resource's warning when a delete orphans
// dependents by default.
func (c *call) warnOrphaning(opts *metav1.DeleteOptions) {
	if c.orphansByDefault(opts) {
		text, _ := c.res.Strategy.(OrphanDefaulter).OrphansByDefault()
		request.AddWarning(c.w, text)
	}
}

// propagationFinalizer is the finalizer a delete's propagation policy asks
// for: orphan or foregroundDeletion, none for Background.
func propagationFinalizer(opts *metav1.DeleteOptions) string {
	if opts.PropagationPolicy != nil {
		switch *opts.PropagationPolicy {
		case metav1.DeletePropagationOrphan:
			return metav1.FinalizerOrphanDependents
		case metav1.DeletePropagationForeground:
			return metav1.FinalizerDeleteDependents
		}
		return ""
	}
	if opts.OrphanDependents != nil && *opts.OrphanDependents { //nolint:staticcheck // still honoured, as in Kubernetes
		return metav1.FinalizerOrphanDependents
	}
	return ""
}
