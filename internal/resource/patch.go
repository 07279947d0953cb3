package resource

import (
	"fmt"
	"net/http"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kjson "sigs.k8s.io/json"

	"github.com/crdserver/crdserver/internal/request"
)

// maxJSONPatchOperations bounds a JSON patch, as in Kubernetes.
const maxJSONPatchOperations = 10000

// patch answers PATCH of an object or of its status: JSON patch (RFC
// 6902), merge patch (RFC 7386) and, for built-in types, strategic merge
// patch, applied to the newest object in the request's version.
func (c *call) patch(sub string) {
	dry, err := c.dryRun("PatchOptions")
	if err != nil {
		c.fail(err)
		return
	}
	directive, err := c.fieldValidation("PatchOptions")
	if err != nil {
		c.fail(err)
		return
	}
	mt := request.MediaType(c.r)
	accepted := request.JSONPatch + ", " + request.MergePatch + ", " + request.ApplyPatch
	if c.res.StrategicMergeType != nil {
		accepted = request.JSONPatch + ", " + request.MergePatch + ", " + request.StrategicMergePatch + ", " + request.ApplyPatch
	}
	switch {
	case mt == request.JSONPatch, mt == request.MergePatch:
	case mt == request.StrategicMergePatch && c.res.StrategicMergeType != nil:
	case mt == request.ApplyPatch && c.res.FieldManagers != nil:
		c.apply(sub)
		return
	default:
		c.fail(request.UnsupportedMediaType(accepted))
		return
	}
	if _, ok := c.r.URL.Query()["force"]; ok {
		c.fail(apierrors.NewInvalid(patchOptions, "", field.ErrorList{field.Forbidden(field.NewPath("force"), "may not be specified for non-apply patch")}))
		return
	}
	if err := c.checkManagerName("PatchOptions"); err != nil {
		c.fail(err)
		return
	}
	body, err := request.ReadBody(c.r)
	if err != nil {
		c.fail(err)
		return
	}
	// Duplicate fields in the patch itself count for field validation.
	var patchStrict []error
	if mt != request.JSONPatch && directive != metav1.FieldValidationIgnore {
		var m map[string]any
		if strict, err := kjson.UnmarshalStrict(body, &m, kjson.DisallowDuplicateFields); err == nil {
			patchStrict = strict
		}
	}
	var apply func(doc []byte) ([]byte, error)
	switch mt {
	case request.JSONPatch:
		ops, err := jsonpatch.DecodePatch(body)
		if err != nil {
			c.fail(apierrors.NewBadRequest(err.Error()))
			return
		}
		if len(ops) > maxJSONPatchOperations {
			c.fail(apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("The allowed maximum operations in a JSON patch is %d, got %d", maxJSONPatchOperations, len(ops))))
			return
		}
		apply = func(doc []byte) ([]byte, error) { return applyJSONPatch(ops, doc) }
	case request.MergePatch:
		apply = func(doc []byte) ([]byte, error) {
			out, err := jsonpatch.MergePatch(doc, body)
			if err != nil {
				return nil, apierrors.NewBadRequest(err.Error())
			}
			return out, nil
		}
	case request.StrategicMergePatch:
		apply = func(doc []byte) ([]byte, error) {
			out, err := strategicpatch.StrategicMergePatch(doc, body, c.res.StrategicMergeType)
			if err != nil {
				return nil, apierrors.NewBadRequest(err.Error())
			}
			return out, nil
		}
	}
	raw, err := c.guaranteedUpdate(c.info.Name, sub, dry, func(cur *Object) (*Object, error) {
		doc, err := cur.Encode()
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		patched, err := apply(doc)
		if err != nil {
			return nil, err
		}
		content, dups, err := request.DecodeObjectStrict(patched, "application/json", c.res.Kind)
		if err != nil {
			return nil, err
		}
		s := &strictness{directive: directive, decodeError: func(err error) error { return patchStrictError(patched, err) }}
		s.add(nil, append(append([]error(nil), patchStrict...), dups...))
		obj, err := c.decodeContent(content, s)
		if err != nil {
			return nil, err
		}
		obj = c.track(cur, obj, sub)
		if err := s.report(c, func(err error) error { return patchStrictError(patched, err) }); err != nil {
			return nil, err
		}
		return obj, nil
	})
	if err != nil {
		c.fail(err)
		return
	}
	c.respond(http.StatusOK, raw)
}

// applyJSONPatch applies a JSON patch to an object or its scale; what
// cannot be applied is 422, as Kubernetes answers. The library panics on
// a "test" of the whole document ("path": "") without a value; such a
// test compares the document with null, which an object never equals, so
// it fails as any failed test does. Any other panic of the library is a
// 422 too: bad input must not become a 500 (kube-apiserver drops the
// connection).
func applyJSONPatch(ops jsonpatch.Patch, doc []byte) ([]byte, error) {
	out, err := applyJSONPatchOps(ops, doc)
	if err != nil {
		return nil, apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "", schema.GroupResource{}, "", err.Error(), 0, false)
	}
	return out, nil
}

func applyJSONPatchOps(ops jsonpatch.Patch, doc []byte) (out []byte, err error) {
	for _, op := range ops {
		if op.Kind() != "test" {
			continue
		}
		if path, perr := op.Path(); perr == nil && path == "" {
			if _, hasValue := op["value"]; !hasValue {
				return nil, fmt.Errorf("testing value %s failed: %w", path, jsonpatch.ErrTestFailed)
			}
		}
	}
	defer func() {
		if p := recover(); p != nil {
			out, err = nil, fmt.Errorf("the JSON patch could not be applied: %v", p)
		}
	}()
	return ops.Apply(doc)
}
