package resource

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/admission"

	"github.com/crdserver/crdserver/internal/jsonraw"
	"github.com/crdserver/crdserver/internal/request"
	"github.com/crdserver/crdserver/internal/store"
)

// dryRun reads the dryRun query parameter: absent, or "All".
func (c *call) dryRun(optionsKind string) (bool, error) {
	vals, ok := c.r.URL.Query()["dryRun"]
	if !ok {
		return false, nil
	}
	for _, v := range vals {
		if v != metav1.DryRunAll {
			return false, apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: optionsKind}, "",
				field.ErrorList{field.NotSupported(field.NewPath("dryRun"), vals, []string{metav1.DryRunAll})})
		}
	}
	return true, nil
}

// readBody reads the dryRun and fieldValidation options and the request
// body, an Object of this resource in the request's version, pruned and
// defaulted by its schema. optionsKind names the options in errors.
func (c *call) readBody(optionsKind string) (*Object, bool, error) {
	dry, err := c.dryRun(optionsKind)
	if err != nil {
		return nil, false, err
	}
	directive, err := c.fieldValidation(optionsKind)
	if err != nil {
		return nil, false, err
	}
	body, err := request.ReadBody(c.r)
	if err != nil {
		return nil, false, err
	}
	mt := request.MediaType(c.r)
	if mt == request.Protobuf && c.res.Protobuf {
		if body, err = request.ProtobufToJSON(body, c.res.Kind); err != nil {
			return nil, false, err
		}
		mt = "application/json"
	}
	content, dups, err := request.DecodeObjectStrict(body, mt, c.res.Kind)
	if err != nil {
		return nil, false, err
	}
	s := &strictness{directive: directive}
	s.add(nil, dups)
	obj, err := c.decodeContent(content, s)
	if err != nil {
		return nil, false, err
	}
	if err := s.report(c, c.bodyStrictError); err != nil {
		return nil, false, err
	}
	return obj, dry, nil
}

// decodeContent turns a decoded body into an Object of this resource: its
// apiVersion and kind checked, pruned and defaulted by its schema (unknown
// fields recorded in s), metadata typed, built-in kinds normalized.
func (c *call) decodeContent(content map[string]any, s *strictness) (*Object, error) {
	md, _ := content["metadata"].(map[string]any)
	name, _ := md["name"].(string)
	av, _ := content["apiVersion"].(string)
	kind, _ := content["kind"].(string)
	if err := c.checkTypeMeta(av, kind, name); err != nil {
		return nil, err
	}
	if err := c.coerce(content, s); err != nil {
		return nil, err
	}
	obj, errs := NewObject(content)
	if len(errs) > 0 {
		// Metadata of the wrong shape does not decode: Kubernetes answers
		// 400 with what its JSON decoder says about it.
		if md != nil {
			if err := metadataDecodeError(md); err != nil {
				if s.decodeError != nil {
					return nil, s.decodeError(err)
				}
				return nil, c.bodyStrictError(err)
			}
		}
		return nil, c.invalid("", name, errs)
	}
	if n, ok := c.res.Strategy.(Normalizer); ok {
		strict, err := n.Normalize(obj)
		if err != nil {
			return nil, err
		}
		s.add(nil, strict)
	}
	return obj, nil
}

// create answers POST to a collection.
func (c *call) create() {
	obj, dry, err := c.readBody("CreateOptions")
	if err != nil {
		c.fail(err)
		return
	}
	if err := c.checkManagerName("CreateOptions"); err != nil {
		c.fail(err)
		return
	}
	obj = c.track(nil, obj, "")
	raw, err := c.createObject(obj, dry)
	if err != nil {
		c.fail(err)
		return
	}
	c.respond(http.StatusCreated, raw)
}

// createObject runs a new object through the create path and stores it.
// It returns the stored object with its resourceVersion.
func (c *call) createObject(obj *Object, dry bool) ([]byte, error) {
	if obj.Meta.ResourceVersion != "" {
		return nil, apierrors.NewBadRequest("resourceVersion should not be set on objects to be created")
	}
	if c.res.Terminating {
		return nil, apierrors.NewForbidden(c.res.GroupResource(), obj.Meta.Name, errors.New("create not allowed while custom resource definition is terminating"))
	}
	if c.res.Namespaced && obj.Meta.Namespace == "" {
		obj.Meta.Namespace = c.namespace // as admission sees it
	}
	req := admissionRequest{op: admission.Create, sub: c.info.Subresource, obj: obj, options: c.createOptions(dry), dry: dry}
	if err := c.admitMutating(req); err != nil {
		return nil, err
	}
	generate := obj.Meta.Name == "" && obj.Meta.GenerateName != ""
	if generate {
		obj.Meta.Name = generateName(obj.Meta.GenerateName)
	}
	finish, err := c.allocate(obj, nil, dry)
	if err != nil {
		return nil, err
	}
	stored := false
	defer func() { finish(stored) }()
	if err := c.prepareCreate(c.ctx, obj); err != nil {
		return nil, err
	}
	if c.res.Namespaced && c.h.Namespaces != nil {
		if err := c.h.Namespaces.CheckCreate(c.ctx, c.res.GroupResource(), obj.Meta.Name, obj.Meta.Namespace); err != nil {
			return nil, err
		}
	}
	if err := c.admitValidating(req); err != nil {
		return nil, err
	}
	data, err := c.toStorage(obj)
	if err != nil {
		return nil, err
	}
	opts := c.writeOptions(obj)
	for attempt := 1; ; attempt++ {
		key := c.res.Key(obj.Meta.Namespace, obj.Meta.Name)
		var rev int64
		if dry {
			// A dry run stores nothing but answers as the write would:
			// an existing name is a conflict.
			if _, _, err = c.h.Store.Get(c.ctx, key, 0); err == nil {
				err = store.ErrExists
			} else if errors.Is(err, store.ErrNotFound) {
				stored = true
				return data, nil
			}
		} else {
			rev, err = c.h.Store.Create(c.ctx, key, data, opts)
		}
		if errors.Is(err, store.ErrExists) && generate && attempt < generateNameAttempts {
			obj.Meta.Name = generateName(obj.Meta.GenerateName)
			if data, err = c.toStorage(obj); err != nil {
				return nil, err
			}
			continue
		}
		if err != nil {
			return nil, c.storeError(err, obj.Meta.Name)
		}
		c.wrote(data, rev, opts)
		stored = true
		return jsonraw.SetResourceVersion(data, rev)
	}
}

// allocate takes what obj holds from the strategy's pools (an Allocator),
// before the strategy prepares it; old is nil on create. finish ends
// the allocation with whether the write succeeded.
func (c *call) allocate(obj, old *Object, dry bool) (finish func(ok bool), err error) {
	a, ok := c.res.Strategy.(Allocator)
	if !ok {
		return func(bool) {}, nil
	}
	return a.Allocate(c.ctx, obj, old, dry)
}

// released gives back what a deleted object held (an Allocator's).
func (c *call) released(obj *Object) {
	if a, ok := c.res.Strategy.(Allocator); ok {
		a.Release(c.ctx, obj)
	}
}

// toStorage encodes an object (in the request's version) in the storage
// version, without resourceVersion.
func (c *call) toStorage(obj *Object) ([]byte, error) {
	data, err := obj.encodeForStorage()
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	if sv := c.storageAPIVersion(); obj.APIVersion() != sv {
		out, err := c.res.Converter.Convert(c.ctx, [][]byte{data}, sv)
		if err != nil {
			return nil, err
		}
		data = out.Objects[0]
		if out.Changed != nil && out.Changed[0] {
			// A converter's output is encoded its own way: store it as
			// every object is encoded, so that writing it again unchanged
			// is seen to change nothing.
			if data, err = canonical(data); err != nil {
				return nil, apierrors.NewInternalError(err)
			}
		}
	}
	if len(data) > maxObjectBytes {
		return nil, request.NewStatusError(http.StatusRequestEntityTooLarge, metav1.StatusReasonRequestEntityTooLarge,
			fmt.Sprintf("Request entity too large: limit is %d", maxObjectBytes))
	}
	return data, nil
}

// canonical re-encodes an object the way the write path encodes objects.
func canonical(data []byte) ([]byte, error) {
	obj, err := DecodeObject(data)
	if err != nil {
		return nil, err
	}
	return obj.encodeForStorage()
}

// maxObjectBytes is the largest object stored, etcd's request limit in
// Kubernetes (1.5 MiB).
const maxObjectBytes = 3 * 1024 * 1024 / 2

// metadataDecodeError is the error Kubernetes' JSON decoder gives for
// metadata that does not fit ObjectMeta (a number among the labels, say),
// or nil when it decodes.
func metadataDecodeError(md map[string]any) error {
	b, err := json.Marshal(md)
	if err != nil {
		return err
	}
	var m metav1.ObjectMeta
	return json.Unmarshal(b, &m)
}
