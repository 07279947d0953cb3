package resource

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apiserver/pkg/admission"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/crdserver/crdserver/internal/conversion"
	"github.com/crdserver/crdserver/internal/request"
)

// Scale is a version's scale subresource: where replicas and the label
// selector live in the object (JSON paths like .spec.replicas).
type Scale struct {
	SpecReplicasPath   string
	StatusReplicasPath string
	LabelSelectorPath  string
	// Selector, when set, gives the Scale's status.selector from the
	// object instead of LabelSelectorPath (a built-in kind's, formatted
	// from its spec.selector).
	Selector func(obj map[string]any) (string, error)
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
	if s.Selector != nil {
		if selector, err = s.Selector(obj); err != nil {
			return nil, false, err
		}
	} else if s.LabelSelectorPath != "" {
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
	t, err := request.Negotiate(c.r, scaleOffer)
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
	switch t.As {
	case request.AsTable:
		tbl, err := c.scaleTable(t, scale)
		if err != nil {
			c.fail(err)
			return
		}
		request.WriteObject(c.w, c.r, code, t, tbl)
	case request.AsPartialObjectMetadata:
		request.WriteObject(c.w, c.r, code, t, &metav1.PartialObjectMetadata{
			TypeMeta:   metav1.TypeMeta{Kind: "PartialObjectMetadata", APIVersion: t.Group + "/" + t.Version},
			ObjectMeta: scale.ObjectMeta,
		})
	default:
		request.WriteObject(c.w, c.r, code, t, scale)
	}
}

// scaleOffer is what a Scale can be turned into.
var scaleOffer = request.Offer{Transforms: map[request.As][]string{
	request.AsTable:                 {"meta.k8s.io/v1", "meta.k8s.io/v1beta1"},
	request.AsPartialObjectMetadata: {"meta.k8s.io/v1", "meta.k8s.io/v1beta1"},
}}

// scaleTable is the Table of a Scale, with Kubernetes' columns for it:
// Name, Desired (and Available with a status replicas path), Age.
func (c *call) scaleTable(t request.Target, scale *autoscalingv1.Scale) (*metav1.Table, error) {
	include, err := c.includeObject()
	if err != nil {
		return nil, err
	}
	md := metav1.ObjectMeta{}.SwaggerDoc()
	tbl := &metav1.Table{TypeMeta: metav1.TypeMeta{Kind: "Table", APIVersion: t.Group + "/" + t.Version}}
	tbl.ResourceVersion = scale.ResourceVersion
	tbl.ColumnDefinitions = []metav1.TableColumnDefinition{{Name: "Name", Type: "string", Format: "name", Description: md["name"]}}
	cells := []any{scale.Name}
	if c.ver.Scale.SpecReplicasPath != "" {
		tbl.ColumnDefinitions = append(tbl.ColumnDefinitions, metav1.TableColumnDefinition{Name: "Desired", Type: "integer", Description: "Number of desired replicas"})
		cells = append(cells, int64(scale.Spec.Replicas))
	}
	if c.ver.Scale.StatusReplicasPath != "" {
		tbl.ColumnDefinitions = append(tbl.ColumnDefinitions, metav1.TableColumnDefinition{Name: "Available", Type: "integer", Description: "Number of actual replicas"})
		cells = append(cells, int64(scale.Status.Replicas))
	}
	tbl.ColumnDefinitions = append(tbl.ColumnDefinitions, metav1.TableColumnDefinition{Name: "Age", Type: "date", Description: md["creationTimestamp"]})
	cells = append(cells, Age(scale.CreationTimestamp))
	row := metav1.TableRow{Cells: cells}
	switch include {
	case metav1.IncludeObject:
		row.Object = runtime.RawExtension{Raw: mustJSON(scale)}
	case metav1.IncludeMetadata:
		row.Object = runtime.RawExtension{Raw: mustJSON(&metav1.PartialObjectMetadata{
			TypeMeta:   metav1.TypeMeta{Kind: "PartialObjectMetadata", APIVersion: t.Group + "/" + t.Version},
			ObjectMeta: scale.ObjectMeta,
		})}
	}
	tbl.Rows = []metav1.TableRow{row}
	return tbl, nil
}

// getScale answers GET of the scale subresource.
func (c *call) getScale() {
	it, err := c.read(c.res.Key(c.namespace, c.info.Name))
	if err != nil {
		c.fail(c.storeError(err, c.info.Name))
		return
	}
	c.respondScale(http.StatusOK, it.Bytes())
}

// scaleWrite is how a request writes the scale subresource.
type scaleWrite int

const (
	scalePut   scaleWrite = iota // a whole Scale
	scalePatch                   // a patch of the current Scale
)

// updateScale answers PUT and PATCH of the scale subresource: the new
// replicas go to the object's spec replicas path, through the object's own
// update rules.
func (c *call) updateScale(how scaleWrite) {
	patch := how == scalePatch
	optionsKind := "UpdateOptions"
	if patch {
		optionsKind = "PatchOptions"
	}
	dry, err := c.dryRun(optionsKind)
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
	var applied *scaleApply
	if patch && mt == request.ApplyPatch && c.res.FieldManagers != nil {
		if applied, err = c.scaleApplied(body); err != nil {
			c.fail(err)
			return
		}
	}
	// newScale computes the requested Scale from the current one.
	newScale := func(cur *autoscalingv1.Scale) (*autoscalingv1.Scale, error) {
		var doc []byte
		switch {
		case !patch && mt == request.Protobuf && c.res.Protobuf:
			// client-go's typed clients send built-in kinds' Scales
			// as protobuf.
			if doc, err = request.ProtobufToJSON(body, "Scale"); err != nil {
				return nil, err
			}
		case !patch:
			j, err := request.ToJSON(body, mt, "Scale")
			if err != nil {
				return nil, err
			}
			doc = j
		case mt == request.MergePatch || mt == request.JSONPatch:
			curJSON, _ := json.Marshal(cur)
			if mt == request.MergePatch {
				if doc, err = jsonpatch.MergePatch(curJSON, body); err != nil {
					return nil, apierrors.NewBadRequest(err.Error())
				}
			} else {
				ops, err := jsonpatch.DecodePatch(body)
				if err != nil {
					return nil, apierrors.NewBadRequest(err.Error())
				}
				if doc, err = applyJSONPatch(ops, curJSON); err != nil {
					return nil, err
				}
			}
		default:
			if c.res.FieldManagers != nil {
				return nil, request.UnsupportedMediaType(request.JSONPatch + ", " + request.MergePatch + ", " + request.ApplyPatch)
			}
			return nil, request.UnsupportedMediaType(request.JSONPatch + ", " + request.MergePatch)
		}
		s := &autoscalingv1.Scale{}
		if err := json.Unmarshal(doc, s); err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("the object provided is unrecognized (must be of type Scale): %v", err))
		}
		if s.Kind != "" && s.Kind != "Scale" {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("wrong object passed to Scale update: kind %s", s.Kind))
		}
		return s, nil
	}
	raw, err := c.guaranteedUpdate(c.info.Name, "", dry, func(cur *Object) (*Object, error) {
		m := cur.ToUnstructured()
		old, _, err := c.ver.Scale.toScale(m)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		// managedFields as Kubernetes keeps them for a scale: the Scale's
		// own, made from the object's, updated by the Scale's field
		// manager, then given back to the object (whoever wrote the
		// replicas through the scale owns them, in every version).
		mf := managedfields.NewScaleHandler(cur.Meta.ManagedFields, schema.GroupVersion{Group: c.res.Group, Version: c.ver.Name}, c.replicasPaths())
		if c.res.FieldManagers != nil {
			if old.ManagedFields, err = mf.ToSubresource(); err != nil {
				return nil, apierrors.NewInternalError(err)
			}
		}
		var s *autoscalingv1.Scale
		if applied != nil {
			s, err = applied.to(old)
		} else {
			s, err = newScale(old)
		}
		if err != nil {
			return nil, err
		}
		// Admission sees the Scale, as in Kubernetes.
		if s, err = c.admitScale(admission.Update, s, old, dry, true); err != nil {
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
		switch {
		case applied != nil:
			// The apply already made the Scale's managedFields.
			entries, err := mf.ToParent(s.ManagedFields)
			if err != nil {
				return nil, apierrors.NewInternalError(err)
			}
			next.Meta.ManagedFields = entries
		case c.res.FieldManagers != nil:
			entries, err := c.trackScale(old, s, mf)
			if err != nil {
				return nil, err
			}
			next.Meta.ManagedFields = entries
		}
		return next, nil
	}, updateHooks{ownAdmission: true, validate: func(next, cur *Object) error {
		s, _, err := c.ver.Scale.toScale(next.ToUnstructured())
		if err != nil {
			return apierrors.NewInternalError(err)
		}
		old, _, err := c.ver.Scale.toScale(cur.ToUnstructured())
		if err != nil {
			return apierrors.NewInternalError(err)
		}
		_, err = c.admitScale(admission.Update, s, old, dry, false)
		return err
	}})
	if err != nil {
		c.fail(err)
		return
	}
	c.respondScale(http.StatusOK, raw)
}

// replicasPaths are the spec replicas paths of the resource's versions
// with a scale subresource, by group/version, as Kubernetes' scale
// handler takes them.
func (c *call) replicasPaths() managedfields.ResourcePathMappings {
	out := managedfields.ResourcePathMappings{}
	for _, v := range c.res.Versions {
		if v.Scale != nil {
			out[c.res.APIVersion(v.Name)] = fieldpath.MakePathOrDie(toInterfaces(splitPath(v.Scale.SpecReplicasPath))...)
		}
	}
	return out
}

func toInterfaces(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// scaleFieldManagers track the autoscaling/v1 Scale objects of every
// scale subresource. Their fields are deduced from the objects: a Scale
// has no lists or maps of its own whose merge strategy would matter.
var scaleFieldManagers = &FieldManagers{Group: autoscalingv1.GroupName, Kind: "Scale", Converter: conversion.None{}}

// trackScale updates the managedFields of the Scale old (made by mf) for
// the write that made s, and returns them as the object's.
func (c *call) trackScale(old, s *autoscalingv1.Scale, mf *managedfields.ScaleHandler) ([]metav1.ManagedFieldsEntry, error) {
	u, err := manageScale(old, func(fm *managedfields.FieldManager, live runtime.Object) (runtime.Object, error) {
		newObj, err := scaleObject(s)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		out, err := fm.Update(live, newObj, c.managerName())
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		return out, nil
	})
	if err != nil {
		return nil, err
	}
	entries, err := mf.ToParent(u.GetManagedFields())
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	return entries, nil
}

// manageScale runs write, the Scale field manager's Update or Apply, on
// the Scale live (whose managedFields are the Scale's), and returns the
// Scale it made, with its managedFields. write's errors are answered as
// they are.
func manageScale(live *autoscalingv1.Scale, write func(fm *managedfields.FieldManager, live runtime.Object) (runtime.Object, error)) (*unstructured.Unstructured, error) {
	fm, err := scaleFieldManagers.FieldManager("v1", "scale")
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	liveObj, err := scaleObject(live)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	out, err := write(fm, liveObj)
	if err != nil {
		return nil, err
	}
	u, ok := out.(*unstructured.Unstructured)
	if !ok {
		return nil, apierrors.NewInternalError(fmt.Errorf("unexpected %T", out))
	}
	return u, nil
}

// scaleObject is sc as an unstructured autoscaling/v1 Scale.
func scaleObject(sc *autoscalingv1.Scale) (*unstructured.Unstructured, error) {
	sc = sc.DeepCopy()
	sc.APIVersion, sc.Kind = scaleKind.GroupVersion().String(), scaleKind.Kind
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(sc)
	return &unstructured.Unstructured{Object: m}, err
}

// scaleApply is a server-side apply of a Scale: the applied configuration,
// its manager and force.
type scaleApply struct {
	patch   *unstructured.Unstructured
	manager string
	force   bool
}

// scaleApplied reads the apply of a Scale in body. Kubernetes takes only
// autoscaling/v1 Scales there ("invalid object type" for anything else).
func (c *call) scaleApplied(body []byte) (*scaleApply, error) {
	manager, force, err := c.applyOptions()
	if err != nil {
		return nil, err
	}
	content, err := request.DecodeObject(body, "application/yaml", scaleKind.Kind)
	if err != nil {
		return nil, err
	}
	patch := &unstructured.Unstructured{Object: content}
	if gvk := patch.GroupVersionKind(); gvk != scaleKind {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid object type: %s", gvk))
	}
	if patch.GetName() != "" && patch.GetName() != c.info.Name {
		return nil, apierrors.NewBadRequest("the name of the object (" + patch.GetName() + ") does not match the name on the URL (" + c.info.Name + ")")
	}
	return &scaleApply{patch: patch, manager: manager, force: force}, nil
}

// to applies a to the Scale old, whose managedFields are the Scale's, and
// returns the result with its managedFields.
func (a *scaleApply) to(old *autoscalingv1.Scale) (*autoscalingv1.Scale, error) {
	u, err := manageScale(old, func(fm *managedfields.FieldManager, live runtime.Object) (runtime.Object, error) {
		out, err := fm.Apply(live, a.patch, a.manager, a.force)
		if err != nil {
			return nil, applyError(err)
		}
		return out, nil
	})
	if err != nil {
		return nil, err
	}
	s := &autoscalingv1.Scale{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, s); err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	return s, nil
}

// scaleKind is the kind of the scale subresource's objects.
var scaleKind = autoscalingv1.SchemeGroupVersion.WithKind("Scale")

// admitScale runs mutating (mutate) or validating admission on an update
// of the scale subresource, with its Scale objects, and returns the Scale
// as mutating admission left it.
func (c *call) admitScale(op admission.Operation, s, old *autoscalingv1.Scale, dry, mutate bool) (*autoscalingv1.Scale, error) {
	if c.h.Admission == nil {
		return s, nil
	}
	toObj := func(sc *autoscalingv1.Scale) (*Object, error) {
		sc = sc.DeepCopy()
		sc.APIVersion, sc.Kind = scaleKind.GroupVersion().String(), scaleKind.Kind
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(sc)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		o, errs := NewObject(m)
		if len(errs) > 0 {
			return nil, apierrors.NewInternalError(errs.ToAggregate())
		}
		return o, nil
	}
	obj, err := toObj(s)
	if err != nil {
		return nil, err
	}
	oldObj, err := toObj(old)
	if err != nil {
		return nil, err
	}
	req := admissionRequest{op: op, sub: "scale", obj: obj, old: oldObj, options: c.updateOptions(dry), dry: dry, kind: &scaleKind}
	if !mutate {
		return s, c.admitValidating(req)
	}
	if err := c.admitMutating(req); err != nil {
		return nil, err
	}
	out := &autoscalingv1.Scale{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.ToUnstructured(), out); err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the Scale admission returned does not decode: %v", err))
	}
	return out, nil
}
