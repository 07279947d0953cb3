// Package events is the built-in events.k8s.io/v1 API: the same Events as
// the core v1 API (one store, one watch cache, one resourceVersion), seen
// through the newer field names (regarding, note, reportingController,
// deprecated* for the legacy fields), with the strict validation Kubernetes
// applies to Events written through it.
package events

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/crdserver/crdserver/internal/apis/core"
	"github.com/crdserver/crdserver/internal/resource"
)

// Events is the events.k8s.io events resource over the core Events' cache
// (core.Events), with the same TTL.
func Events(coreEvents *resource.Resource) *resource.Resource {
	labels := map[string]resource.FieldLabel{}
	for label, coreLabel := range fieldLabels {
		labels[label] = core.EventFieldLabels[coreLabel]
	}
	return &resource.Resource{
		Group:                    eventsv1.GroupName,
		Plural:                   "events",
		Singular:                 "event",
		Kind:                     "Event",
		ListKind:                 "EventList",
		ShortNames:               []string{"ev"},
		Namespaced:               true,
		Versions:                 []*resource.Version{{Name: "v1", FieldLabels: labels}},
		StorageVersion:           "v1",
		StorageAPIVersion:        "v1",
		KeyPrefix:                core.EventPrefix,
		Cache:                    coreEvents.Cache,
		TTL:                      coreEvents.TTL,
		Strategy:                 strategy{core.EventStrategy{Version: eventsv1.SchemeGroupVersion}},
		Converter:                core.EventConverter{},
		Table:                    core.EventTable{FromVersion: toCore},
		FieldManagers:            core.EventFieldManagers(eventsv1.GroupName),
		AllowUnconditionalUpdate: true,
		AllowCreateOnUpdate:      true,
		Protobuf:                 true,
		StrategicMergeType:       &eventsv1.Event{},
		Verbs:                    resource.DefaultVerbs,
	}
}

// fieldLabels are the field selector labels of events.k8s.io/v1 and the
// core labels they stand for, as Kubernetes maps them.
var fieldLabels = map[string]string{
	"reason":                    "reason",
	"regarding.kind":            "involvedObject.kind",
	"regarding.namespace":       "involvedObject.namespace",
	"regarding.name":            "involvedObject.name",
	"regarding.uid":             "involvedObject.uid",
	"regarding.apiVersion":      "involvedObject.apiVersion",
	"regarding.resourceVersion": "involvedObject.resourceVersion",
	"regarding.fieldPath":       "involvedObject.fieldPath",
	"reportingController":       "reportingComponent",
	"type":                      "type",
}

// strategy applies the core Event rules (with events.k8s.io/v1's strict
// validation) to events.k8s.io Events, through their core form.
type strategy struct{ core core.EventStrategy }

func (s strategy) Normalize(obj *resource.Object) ([]error, error) {
	return resource.NormalizeTyped[eventsv1.Event](obj, "Event", "v1", nil)
}

func (strategy) PrepareForCreate(context.Context, *resource.Object)                   {}
func (strategy) PrepareForUpdate(context.Context, *resource.Object, *resource.Object) {}

func asCore(obj *resource.Object) (*resource.Object, error) {
	ev, err := resource.Typed[eventsv1.Event](obj)
	if err != nil {
		return nil, err
	}
	c := core.EventToCore(ev)
	out := &resource.Object{Content: map[string]any{"apiVersion": "v1", "kind": "Event"}}
	return out, resource.FromTyped(c, out)
}

func (s strategy) Validate(ctx context.Context, obj *resource.Object) field.ErrorList {
	c, err := asCore(obj)
	if err != nil {
		return field.ErrorList{field.Invalid(field.NewPath(""), nil, err.Error())}
	}
	return s.core.Validate(ctx, c)
}

func (s strategy) ValidateUpdate(ctx context.Context, obj, old *resource.Object) field.ErrorList {
	c, err := asCore(obj)
	if err != nil {
		return field.ErrorList{field.Invalid(field.NewPath(""), nil, err.Error())}
	}
	o, err := asCore(old)
	if err != nil {
		return field.ErrorList{field.Invalid(field.NewPath(""), nil, err.Error())}
	}
	return s.core.ValidateUpdate(ctx, c, o)
}

func toCore(u *unstructured.Unstructured) (*corev1.Event, error) {
	ev := &eventsv1.Event{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, ev); err != nil {
		return nil, err
	}
	return core.EventToCore(ev), nil
}
