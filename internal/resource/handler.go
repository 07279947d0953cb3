package resource

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/warning"

	"github.com/crdserver/crdserver/internal/conversion"
	"github.com/crdserver/crdserver/internal/jsonraw"
	"github.com/crdserver/crdserver/internal/request"
	"github.com/crdserver/crdserver/internal/store"
)

// NamespaceChecker says whether objects may be created in a namespace
// (Kubernetes' NamespaceLifecycle admission).
type NamespaceChecker interface {
	CheckCreate(ctx context.Context, gr schema.GroupResource, name, namespace string) error
}

// Handler serves the REST verbs of every resource. It holds no per-resource
// state: each request brings its Resource.
type Handler struct {
	Store      store.Interface
	Namespaces NamespaceChecker
	Log        *slog.Logger
	// MinRequestTimeout is the shortest server-chosen watch timeout; a
	// watch without timeoutSeconds lasts between it and twice it.
	MinRequestTimeout time.Duration
	// Now is the clock (tests may replace it).
	Now func() time.Time
	// Stopping is closed when the server shuts down: watches end.
	Stopping <-chan struct{}
	// Admission, when set, admits every write (dynamic admission).
	Admission AdmissionControl
}

func (h *Handler) now() metav1.Time {
	if h.Now != nil {
		return metav1.NewTime(h.Now().UTC().Truncate(time.Second))
	}
	return metav1.NewTime(time.Now().UTC().Truncate(time.Second))
}

// Serve answers one request for res in version ver.
func (h *Handler) Serve(w http.ResponseWriter, r *http.Request, info *request.Info, res *Resource, ver *Version) {
	if info.Extra {
		request.WriteError(w, r, request.NotFound())
		return
	}
	// A namespaced resource is addressed in a namespace, except for lists
	// and watches across all of them; a cluster-scoped one never is.
	if res.Namespaced && info.Namespace == "" && info.Verb != "list" && info.Verb != "watch" {
		request.WriteError(w, r, request.NotFound())
		return
	}
	if !res.Namespaced && info.Namespace != "" && !info.NamespaceIsObject {
		request.WriteError(w, r, request.NotFound())
		return
	}
	if ver.Deprecated {
		request.AddWarning(w, ver.Warning)
		info.Deprecated = true
	}
	if res.Custom != nil {
		res.Custom(w, r, info, ver)
		return
	}
	// Warnings that Kubernetes' libraries add to the context (CEL rules that
	// ratchet, for one) become Warning headers.
	ctx := withMemo(warning.WithWarningRecorder(r.Context(), headerWarnings{w}))
	rc := &call{h: h, w: w, r: r, info: info, res: res, ver: ver, ctx: ctx}
	if !res.Namespaced {
		rc.namespace = ""
	} else {
		rc.namespace = info.Namespace
	}
	if writes[info.Verb] && (info.Subresource == "" || info.Subresource == "status") {
		// The answer's media type is negotiated before anything is
		// written, as Kubernetes does: a write is not made for an answer
		// the client would refuse.
		t, err := request.Negotiate(r, rc.offer(readOffer))
		if err != nil {
			rc.fail(err)
			return
		}
		rc.answer = &t
	}
	switch info.Subresource {
	case "":
		switch info.Verb {
		case "get":
			rc.get()
		case "list":
			rc.list()
		case "watch":
			rc.watch()
		case "create":
			if info.Name != "" {
				rc.fail(request.MethodNotAllowed("create", res.GroupResource()))
				return
			}
			rc.create()
		case "update", "patch":
			if info.Name == "" {
				rc.fail(request.MethodNotAllowed(info.Verb, res.GroupResource()))
				return
			}
			if info.Verb == "update" {
				rc.update("")
			} else {
				rc.patch("")
			}
		case "delete":
			rc.delete()
		case "deletecollection":
			rc.deleteCollection()
		default:
			rc.fail(request.MethodNotAllowed(info.Verb, res.GroupResource()))
		}
	case "status":
		if !ver.Status {
			rc.fail(request.NotFound())
			return
		}
		switch info.Verb {
		case "get":
			rc.get()
		case "update":
			rc.update("status")
		case "patch":
			rc.patch("status")
		default:
			rc.fail(request.MethodNotAllowed(info.Verb, res.GroupResource()))
		}
	case "scale":
		if ver.Scale == nil {
			rc.fail(request.NotFound())
			return
		}
		switch info.Verb {
		case "get":
			rc.getScale()
		case "update":
			rc.updateScale(scalePut)
		case "patch":
			rc.updateScale(scalePatch)
		default:
			rc.fail(request.MethodNotAllowed(info.Verb, res.GroupResource()))
		}
	case "finalize":
		if _, ok := res.Strategy.(FinalizeStrategy); !ok {
			rc.fail(request.NotFound())
			return
		}
		if info.Verb != "update" {
			rc.fail(request.MethodNotAllowed(info.Verb, res.GroupResource()))
			return
		}
		rc.update("finalize")
	default:
		for _, sub := range res.Subresources {
			if sub.Name != info.Subresource {
				continue
			}
			if !slices.Contains(sub.Verbs, info.Verb) {
				rc.fail(request.MethodNotAllowed(info.Verb, res.GroupResource()))
				return
			}
			sub.Serve(w, r.WithContext(ctx), info, res, ver)
			return
		}
		rc.fail(request.NotFound())
	}
}

// offer adds the protobuf encoding to what a response can be turned into,
// for the built-in types.
func (c *call) offer(o request.Offer) request.Offer {
	o.Protobuf = c.res.Protobuf
	return o
}

// writes are the verbs that answer with the object they wrote.
var writes = map[string]bool{"create": true, "update": true, "patch": true}

// headerWarnings records warnings as Warning headers.
type headerWarnings struct{ w http.ResponseWriter }

func (h headerWarnings) AddWarning(_, text string) { request.AddWarning(h.w, text) }

// call is one request in progress.
type call struct {
	h         *Handler
	w         http.ResponseWriter
	r         *http.Request
	ctx       context.Context
	info      *request.Info
	res       *Resource
	ver       *Version
	namespace string
	// written is what the request last wrote with a stamp, for the
	// conversion of its answer.
	written *store.Written
	// answer, once negotiated (before a write), is what the request's
	// answer is sent as.
	answer *request.Target
}

// writeOptions are the options of the write of obj, prepared by the
// strategy's rules: the resource's TTL, and the strategy's stamp.
func (c *call) writeOptions(obj *Object) store.WriteOptions {
	opts := store.WriteOptions{TTL: c.res.TTL}
	if s, ok := c.res.Strategy.(Stamper); ok {
		opts.Stamp = s.WriteStamp(obj)
	}
	return opts
}

// wrote records that the request wrote data with opts at rev.
func (c *call) wrote(data []byte, rev int64, opts store.WriteOptions) {
	if opts.Stamp == nil {
		c.written = nil
		return
	}
	c.written = &store.Written{Value: data, Rev: rev, Stamp: *opts.Stamp}
}

// answerContext is the context the request's answer is converted in: it
// knows what the request wrote.
func (c *call) answerContext() context.Context {
	if c.written == nil {
		return c.ctx
	}
	return store.WithWritten(c.ctx, *c.written)
}

func (c *call) fail(err error) { request.WriteError(c.w, c.r, err) }

func (c *call) apiVersion() string { return c.res.APIVersion(c.ver.Name) }

func (c *call) storageAPIVersion() string {
	if c.res.StorageAPIVersion != "" {
		return c.res.StorageAPIVersion
	}
	return c.res.APIVersion(c.res.StorageVersion)
}

// Errors named for this resource, worded as Kubernetes words them.

func (c *call) notFound(name string) error { return apierrors.NewNotFound(c.res.GroupResource(), name) }

func (c *call) conflict(name string) error {
	return apierrors.NewConflict(c.res.GroupResource(), name, errors.New(conflictMessage))
}

const conflictMessage = "the object has been modified; please apply your changes to the latest version and try again"

func (c *call) invalid(kind, name string, errs field.ErrorList) error {
	if kind == "" {
		kind = c.res.Kind
	}
	group := c.res.Group
	if c.res.StorageAPIVersion != "" {
		// Kubernetes names the type it validates, which is the stored one
		// (an events.k8s.io Event is a core Event).
		gv, _ := schema.ParseGroupVersion(c.res.StorageAPIVersion)
		group = gv.Group
	}
	return apierrors.NewInvalid(schema.GroupKind{Group: group, Kind: kind}, name, errs)
}

// storeError turns a store error into the Status a client gets.
func (c *call) storeError(err error, name string) error {
	var se apierrors.APIStatus
	if errors.As(err, &se) {
		return err
	}
	switch {
	case errors.Is(err, store.ErrNotFound):
		return c.notFound(name)
	case errors.Is(err, store.ErrExists):
		return apierrors.NewAlreadyExists(c.res.GroupResource(), name)
	case errors.Is(err, store.ErrConflict):
		return c.conflict(name)
	case errors.Is(err, store.ErrCompacted):
		return apierrors.NewResourceExpired("The resourceVersion for the provided list is too old.")
	}
	var tl *store.TooLargeError
	if errors.As(err, &tl) {
		return tooLarge(tl.Requested, tl.Current)
	}
	var to *store.TooOldError
	if errors.As(err, &to) {
		return apierrors.NewResourceExpired(to.Error())
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return apierrors.NewTimeoutError("request did not complete within the allowed duration", 0)
	}
	return apierrors.NewInternalError(err)
}

func tooLarge(requested, current int64) error {
	err := apierrors.NewTimeoutError("Too large resource version: "+itoa(requested)+", current: "+itoa(current), 1)
	err.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: metav1.CauseTypeResourceVersionTooLarge, Message: "Too large resource version"}}
	return err
}

// respond converts a stored object to the request's version and sends it
// (as a Table or metadata only, if the request asks for that: Kubernetes
// offers the same transforms for the answer of every verb).
func (c *call) respond(code int, raw []byte) {
	var t request.Target
	if c.answer != nil {
		t = *c.answer
	} else {
		var err error
		if t, err = request.Negotiate(c.r, c.offer(readOffer)); err != nil {
			c.fail(err)
			return
		}
	}
	out, err := c.convert([][]byte{raw})
	if err != nil {
		c.fail(err)
		return
	}
	if t.As != request.AsObject {
		rv, _ := jsonraw.ResourceVersion(out[0])
		c.transform(t, out, answerAt(code, rv))
		return
	}
	request.Write(c.w, c.r, code, t, out[0])
}

// convertItems converts cached objects to the request's version, sharing
// conversions between requests (see conversion.Items).
func (c *call) convertItems(items []*store.Item) ([][]byte, error) {
	out, err := conversion.Items(c.ctx, c.res.Converter, items, c.apiVersion())
	if err != nil {
		return nil, asStatus(err)
	}
	return out, nil
}

// convert converts stored objects to the request's version.
func (c *call) convert(objs [][]byte) ([][]byte, error) {
	if len(objs) == 0 {
		return objs, nil
	}
	res, err := c.res.Converter.Convert(c.answerContext(), objs, c.apiVersion())
	if err != nil {
		return nil, asStatus(err)
	}
	return res.Objects, nil
}

// asStatus passes Status errors on and makes others a 500.
func asStatus(err error) error {
	var se apierrors.APIStatus
	if errors.As(err, &se) {
		return err
	}
	return apierrors.NewInternalError(err)
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
