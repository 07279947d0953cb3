// Package events is the built-in events.k8s.io/v1 API: the same Events as
// the core v1 API (one store, one watch cache, one resourceVersion), seen
// through the newer field names (regarding, note, reportingController,
// deprecated* for the legacy fields), with the strict validation Kubernetes
// applies to Events written through it.
package events

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/crdserver/crdserver/internal/apis/core"
	"github.com/crdserver/crdserver/internal/conversion"
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
		Converter:                Converter{},
		Table:                    core.EventTable{FromVersion: toCore},
		FieldManagers:            resource.BuiltinFieldManagers(eventsv1.GroupName, "Event", false),
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
	c := ToCore(ev)
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

// ToCore is an events.k8s.io/v1 Event as a core v1 Event.
func ToCore(in *eventsv1.Event) *corev1.Event {
	out := &corev1.Event{
		TypeMeta:            metav1.TypeMeta{APIVersion: "v1", Kind: "Event"},
		ObjectMeta:          in.ObjectMeta,
		InvolvedObject:      in.Regarding,
		Reason:              in.Reason,
		Message:             in.Note,
		Source:              in.DeprecatedSource,
		FirstTimestamp:      in.DeprecatedFirstTimestamp,
		LastTimestamp:       in.DeprecatedLastTimestamp,
		Count:               in.DeprecatedCount,
		Type:                in.Type,
		EventTime:           in.EventTime,
		Related:             in.Related,
		Action:              in.Action,
		ReportingController: in.ReportingController,
		ReportingInstance:   in.ReportingInstance,
	}
	if in.Series != nil {
		out.Series = &corev1.EventSeries{Count: in.Series.Count, LastObservedTime: in.Series.LastObservedTime}
	}
	return out
}

// FromCore is a core v1 Event as an events.k8s.io/v1 Event.
func FromCore(in *corev1.Event) *eventsv1.Event {
	out := &eventsv1.Event{
		TypeMeta:                 metav1.TypeMeta{APIVersion: eventsv1.SchemeGroupVersion.String(), Kind: "Event"},
		ObjectMeta:               in.ObjectMeta,
		EventTime:                in.EventTime,
		ReportingController:      in.ReportingController,
		ReportingInstance:        in.ReportingInstance,
		Action:                   in.Action,
		Reason:                   in.Reason,
		Regarding:                in.InvolvedObject,
		Related:                  in.Related,
		Note:                     in.Message,
		Type:                     in.Type,
		DeprecatedSource:         in.Source,
		DeprecatedFirstTimestamp: in.FirstTimestamp,
		DeprecatedLastTimestamp:  in.LastTimestamp,
		DeprecatedCount:          in.Count,
	}
	if in.Series != nil {
		out.Series = &eventsv1.EventSeries{Count: in.Series.Count, LastObservedTime: in.Series.LastObservedTime}
	}
	return out
}

func toCore(u *unstructured.Unstructured) (*corev1.Event, error) {
	ev := &eventsv1.Event{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, ev); err != nil {
		return nil, err
	}
	return ToCore(ev), nil
}

// Converter converts Events between core v1 ("v1", how they are stored)
// and events.k8s.io/v1.
type Converter struct{}

var _ conversion.Converter = Converter{}

// Convert implements conversion.Converter.
func (Converter) Convert(_ context.Context, objs [][]byte, to string) (conversion.Result, error) {
	out := conversion.Result{Objects: make([][]byte, len(objs)), Changed: make([]bool, len(objs))}
	for i, raw := range objs {
		var tm struct {
			APIVersion string `json:"apiVersion"`
		}
		if err := json.Unmarshal(raw, &tm); err != nil {
			return conversion.Result{}, err
		}
		if tm.APIVersion == to {
			out.Objects[i] = raw
			continue
		}
		var conv any
		switch {
		case tm.APIVersion == "v1" && to == eventsv1.SchemeGroupVersion.String():
			ev := &corev1.Event{}
			if err := json.Unmarshal(raw, ev); err != nil {
				return conversion.Result{}, err
			}
			conv = FromCore(ev)
		case tm.APIVersion == eventsv1.SchemeGroupVersion.String() && to == "v1":
			ev := &eventsv1.Event{}
			if err := json.Unmarshal(raw, ev); err != nil {
				return conversion.Result{}, err
			}
			conv = ToCore(ev)
		default:
			return conversion.Result{}, fmt.Errorf("cannot convert an Event from %q to %q", tm.APIVersion, to)
		}
		b, err := json.Marshal(conv)
		if err != nil {
			return conversion.Result{}, err
		}
		out.Objects[i], out.Changed[i] = b, true
	}
	return out, nil
}
