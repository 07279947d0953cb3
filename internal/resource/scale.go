package resource

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/crdserver/crdserver/internal/request"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Scale is a version's scale subresource: where replicas and the label
// selector live in the object (JSON paths like .spec.replicas).
type Scale struct {
	SpecReplicasPath   string
	StatusReplicasPath string
	LabelSelectorPath  string
}

func splitPath(p string) []string { return strings.Split(strings.TrimPrefix(p, "."), ".") }

// toScale builds the autoscaling/v1 Scale of an object.
func (s *Scale) toScale(obj map[string]any) (*autoscalingv1.Scale, bool, error) {
	u := &unstructured.Unstructured{Object: obj}
	spec, found, err := unstructured.NestedInt64(obj, splitPath(s.SpecReplicasPath)...)
	if err != nil {
		return nil, false, err
	}
	status, _, err := unstructured.NestedInt64(obj, splitPath(s.StatusReplicasPath)...)
	if err != nil {
		return nil, false, err
	}
	var selector string
	if s.LabelSelectorPath != "" {
		if selector, _, err = unstructured.NestedString(obj, splitPath(s.LabelSelectorPath)...); err != nil {
			return nil, false, err
		}
	}
	return &autoscalingv1.Scale{
		TypeMeta: metav1.TypeMeta{APIVersion: "autoscaling/v1", Kind: "Scale"},
		ObjectMeta: metav1.ObjectMeta{
			Name: u.GetName(), Namespace: u.GetNamespace(), UID: u.GetUID(),
			ResourceVersion: u.GetResourceVersion(), CreationTimestamp: u.GetCreationTimestamp(),
		},
		Spec:   autoscalingv1.ScaleSpec{Replicas: int32(spec)},
		Status: autoscalingv1.ScaleStatus{Replicas: int32(status), Selector: selector},
	}, found, nil
}

// respondScale sends the Scale of a stored object.
func (c *call) respondScale(code int, raw []byte) {
	t, err := request.Negotiate(c.r, request.Offer{})
	if err != nil {
		c.fail(err)
		return
	}
	out, err := c.convert([][]byte{raw})
	if err != nil {
		c.fail(err)
		return
	}
	var obj map[string]any
	if err := utiljson.Unmarshal(out[0], &obj); err != nil {
		c.fail(apierrors.NewInternalError(err))
		return
	}
	scale, found, err := c.ver.Scale.toScale(obj)
	if err != nil {
		c.fail(apierrors.NewInternalError(err))
		return
	}
	if !found {
		c.fail(apierrors.NewInternalError(fmt.Errorf("the spec replicas field %q does not exist", c.ver.Scale.SpecReplicasPath)))
		return
	}
	request.WriteObject(c.w, c.r, code, t, scale)
}

// getScale answers GET of the scale subresource.
func (c *call) getScale() {
	it, err := c.read(c.res.Key(c.namespace, c.info.Name))
	if err != nil {
		c.fail(c.storeError(err, c.info.Name))
		return
	}
	c.respondScale(http.StatusOK, it.Raw)
}

// updateScale answers PUT and PATCH of the scale subresource: the new
// replicas go to the object's spec replicas path, through the object's own
// update rules.
func (c *call) updateScale(patch bool) {
	dry, err := c.dryRun()
	if err != nil {
		c.fail(err)
		return
	}
	body, err := request.ReadBody(c.r)
	if err != nil {
		c.fail(err)
		return
	}
	mt := request.MediaType(c.r)
	// newScale computes the requested Scale from the current one.
	newScale := func(cur *autoscalingv1.Scale) (*autoscalingv1.Scale, error) {
		var doc []byte
		switch {
		case !patch:
			j, err := request.ToJSON(body, mt, "Scale")
			if err != nil {
				return nil, err
			}
			doc = j
		case mt == request.MergePatch || mt == request.JSONPatch:
			curJSON, _ := json.Marshal(cur)
			if mt == request.MergePatch {
				doc, err = jsonpatch.MergePatch(curJSON, body)
			} else {
				var ops jsonpatch.Patch
				if ops, err = jsonpatch.DecodePatch(body); err == nil {
					doc, err = ops.Apply(curJSON)
				}
			}
			if err != nil {
				return nil, apierrors.NewBadRequest(err.Error())
			}
		default:
			return nil, request.UnsupportedMediaType(request.JSONPatch + ", " + request.MergePatch)
		}
		s := &autoscalingv1.Scale{}
		if err := json.Unmarshal(doc, s); err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("the object provided is unrecognized (must be of type Scale): %v", err))
		}
		if s.Kind != "" && s.Kind != "Scale" {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("wrong object passed to Scale update: kind %s", s.Kind))
		}
		if s.Spec.Replicas < 0 {
			return nil, apierrors.NewInvalid(schema.GroupKind{Group: "autoscaling", Kind: "Scale"}, c.info.Name,
				field.ErrorList{field.Invalid(field.NewPath("spec", "replicas"), s.Spec.Replicas, "must be greater than or equal to 0")})
		}
		return s, nil
	}
	raw, err := c.guaranteedUpdate(c.info.Name, "", dry, func(cur *Object) (*Object, error) {
		m := cur.ToUnstructured()
		old, _, err := c.ver.Scale.toScale(m)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		s, err := newScale(old)
		if err != nil {
			return nil, err
		}
		if err := unstructured.SetNestedField(m, int64(s.Spec.Replicas), splitPath(c.ver.Scale.SpecReplicasPath)...); err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		next, errs := NewObject(m)
		if len(errs) > 0 {
			return nil, apierrors.NewInternalError(errs.ToAggregate())
		}
		if s.ResourceVersion != "" {
			next.Meta.ResourceVersion = s.ResourceVersion
		}
		return next, nil
	})
	if err != nil {
		c.fail(err)
		return
	}
	c.respondScale(http.StatusOK, raw)
}
