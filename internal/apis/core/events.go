package core

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	eventsv1beta1 "k8s.io/api/events/v1beta1"
	"k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/crdserver/crdserver/internal/conversion"
	"github.com/crdserver/crdserver/internal/jsonraw"
	"github.com/crdserver/crdserver/internal/resource"
	"github.com/crdserver/crdserver/internal/store"
)

// EventPrefix is where Events live in etcd (both APIs' Events: they are
// the same objects, stored as core v1 Events).
const EventPrefix = "/registry/events/"

// Events is the core v1 events resource, served from cache; ttl is how
// long an Event lives after its last write (--event-ttl).
func Events(cache *store.Cache, ttl time.Duration) *resource.Resource {
	return &resource.Resource{
		Plural:                   "events",
		Singular:                 "event",
		Kind:                     "Event",
		ListKind:                 "EventList",
		ShortNames:               []string{"ev"},
		Namespaced:               true,
		Versions:                 []*resource.Version{{Name: "v1", FieldLabels: EventFieldLabels}},
		StorageVersion:           "v1",
		KeyPrefix:                EventPrefix,
		Cache:                    cache,
		TTL:                      ttl,
		Strategy:                 EventStrategy{Version: corev1.SchemeGroupVersion},
		Converter:                conversion.None{},
		Table:                    EventTable{},
		FieldManagers:            EventFieldManagers(""),
		AllowUnconditionalUpdate: true,
		AllowCreateOnUpdate:      true,
		Protobuf:                 true,
		StrategicMergeType:       &corev1.Event{},
		Verbs:                    resource.DefaultVerbs,
	}
}

// EventFieldLabels are the field selector labels of core v1 Events, read
// from a stored Event, as Kubernetes' event strategy gives them.
var EventFieldLabels = map[string]resource.FieldLabel{
	"involvedObject.kind":            resource.ScalarField("involvedObject", "kind"),
	"involvedObject.namespace":       resource.ScalarField("involvedObject", "namespace"),
	"involvedObject.name":            resource.ScalarField("involvedObject", "name"),
	"involvedObject.uid":             resource.ScalarField("involvedObject", "uid"),
	"involvedObject.apiVersion":      resource.ScalarField("involvedObject", "apiVersion"),
	"involvedObject.resourceVersion": resource.ScalarField("involvedObject", "resourceVersion"),
	"involvedObject.fieldPath":       resource.ScalarField("involvedObject", "fieldPath"),
	"reason":                         resource.ScalarField("reason"),
	"reportingComponent":             resource.ScalarField("reportingComponent"),
	"type":                           resource.ScalarField("type"),
	"source": func(raw []byte) string {
		if v, _ := jsonraw.Scalar(raw, []string{"source", "component"}); v != "" {
			return v
		}
		v, _ := jsonraw.Scalar(raw, []string{"reportingComponent"})
		return v
	},
}

// EventStrategy holds Kubernetes' rules for Events written through the
// API of Version: core v1 takes the lax legacy checks, events.k8s.io/v1
// the strict ones. It works on core v1 Events (the stored form); the
// events.k8s.io API converts to it.
type EventStrategy struct{ Version schema.GroupVersion }

// Normalize decodes a body through the core Event type.
func (s EventStrategy) Normalize(obj *resource.Object) ([]error, error) {
	return resource.NormalizeTyped[corev1.Event](obj, "Event", s.Version.Version, nil)
}

// PrepareForCreate changes nothing, as Kubernetes' event strategy.
func (EventStrategy) PrepareForCreate(context.Context, *resource.Object) {}

// PrepareForUpdate changes nothing either.
func (EventStrategy) PrepareForUpdate(context.Context, *resource.Object, *resource.Object) {}

// Validate checks a new Event.
func (s EventStrategy) Validate(_ context.Context, obj *resource.Object) field.ErrorList {
	ev, err := resource.Typed[corev1.Event](obj)
	if err != nil {
		return field.ErrorList{field.Invalid(field.NewPath(""), nil, err.Error())}
	}
	return ValidateEventCreate(ev, s.Version)
}

// ValidateUpdate checks an updated Event.
func (s EventStrategy) ValidateUpdate(_ context.Context, obj, old *resource.Object) field.ErrorList {
	ev, err := resource.Typed[corev1.Event](obj)
	if err != nil {
		return field.ErrorList{field.Invalid(field.NewPath(""), nil, err.Error())}
	}
	o, err := resource.Typed[corev1.Event](old)
	if err != nil {
		return field.ErrorList{field.Invalid(field.NewPath(""), nil, err.Error())}
	}
	return ValidateEventUpdate(ev, o, s.Version)
}

// Limits of Event fields.
const (
	reportingInstanceLengthLimit = 128
	actionLengthLimit            = 128
	reasonLengthLimit            = 128
	noteLengthLimit              = 1024
)

func legacyVersion(gv schema.GroupVersion) bool {
	return gv == corev1.SchemeGroupVersion || gv == eventsv1beta1.SchemeGroupVersion
}

// ValidateEventCreate checks a new Event written through requestVersion,
// with Kubernetes' rules and messages (field paths are those of
// Kubernetes' internal Event, whatever the version).
func ValidateEventCreate(ev *corev1.Event, requestVersion schema.GroupVersion) field.ErrorList {
	errs := legacyValidateEvent(ev, requestVersion)
	if legacyVersion(requestVersion) {
		return errs
	}
	errs = append(errs, validateEventSeries(ev)...)
	if ev.EventTime.IsZero() {
		errs = append(errs, field.Required(field.NewPath("eventTime"), ""))
	}
	if ev.Type != corev1.EventTypeNormal && ev.Type != corev1.EventTypeWarning {
		errs = append(errs, field.Invalid(field.NewPath("type"), "", fmt.Sprintf("has invalid value: %v", ev.Type)))
	}
	if !ev.FirstTimestamp.IsZero() {
		errs = append(errs, field.Invalid(field.NewPath("firstTimestamp"), "", "needs to be unset"))
	}
	if !ev.LastTimestamp.IsZero() {
		errs = append(errs, field.Invalid(field.NewPath("lastTimestamp"), "", "needs to be unset"))
	}
	if ev.Count != 0 {
		errs = append(errs, field.Invalid(field.NewPath("count"), "", "needs to be unset"))
	}
	if ev.Source.Component != "" || ev.Source.Host != "" {
		errs = append(errs, field.Invalid(field.NewPath("source"), "", "needs to be unset"))
	}
	return errs
}

// ValidateEventUpdate checks an updated Event, as ValidateEventCreate.
func ValidateEventUpdate(ev, old *corev1.Event, requestVersion schema.GroupVersion) field.ErrorList {
	errs := legacyValidateEvent(ev, requestVersion)
	if legacyVersion(requestVersion) {
		return errs
	}
	if !reflect.DeepEqual(ev.Series, old.Series) {
		errs = append(errs, validateEventSeries(ev)...)
	}
	immutable := func(a, b any, name string) {
		errs = append(errs, validation.ValidateImmutableField(a, b, field.NewPath(name))...)
	}
	immutable(ev.InvolvedObject, old.InvolvedObject, "involvedObject")
	immutable(ev.Reason, old.Reason, "reason")
	immutable(ev.Message, old.Message, "message")
	immutable(ev.Source, old.Source, "source")
	immutable(ev.FirstTimestamp, old.FirstTimestamp, "firstTimestamp")
	immutable(ev.LastTimestamp, old.LastTimestamp, "lastTimestamp")
	immutable(ev.Count, old.Count, "count")
	immutable(ev.Reason, old.Reason, "reason")
	immutable(ev.Type, old.Type, "type")
	if !ev.EventTime.Truncate(time.Microsecond).UTC().Equal(old.EventTime.Truncate(time.Microsecond).UTC()) {
		immutable(ev.EventTime, old.EventTime, "eventTime")
	}
	immutable(ev.Action, old.Action, "action")
	immutable(ev.Related, old.Related, "related")
	immutable(ev.ReportingController, old.ReportingController, "reportingController")
	immutable(ev.ReportingInstance, old.ReportingInstance, "reportingInstance")
	return errs
}

func validateEventSeries(ev *corev1.Event) field.ErrorList {
	var errs field.ErrorList
	if ev.Series != nil {
		if ev.Series.Count < 2 {
			errs = append(errs, field.Invalid(field.NewPath("series.count"), "", "should be at least 2"))
		}
		if ev.Series.LastObservedTime.IsZero() {
			errs = append(errs, field.Required(field.NewPath("series.lastObservedTime"), ""))
		}
	}
	return errs
}

func legacyValidateEvent(ev *corev1.Event, requestVersion schema.GroupVersion) field.ErrorList {
	var errs field.ErrorList
	reportingController := "reportingController"
	if requestVersion == corev1.SchemeGroupVersion {
		reportingController = "reportingComponent"
	}
	involvedNS := field.NewPath("involvedObject", "namespace")
	if ev.EventTime.IsZero() {
		if ev.InvolvedObject.Namespace == "" {
			if ev.Namespace != metav1.NamespaceNone && ev.Namespace != metav1.NamespaceDefault {
				errs = append(errs, field.Invalid(involvedNS, ev.InvolvedObject.Namespace, "does not match event.namespace"))
			}
		} else if ev.Namespace != ev.InvolvedObject.Namespace {
			errs = append(errs, field.Invalid(involvedNS, ev.InvolvedObject.Namespace, "does not match event.namespace"))
		}
		return errs
	}
	if ev.InvolvedObject.Namespace == "" && ev.Namespace != metav1.NamespaceDefault && ev.Namespace != metav1.NamespaceSystem {
		errs = append(errs, field.Invalid(involvedNS, ev.InvolvedObject.Namespace, "does not match event.namespace"))
	}
	if ev.ReportingController == "" {
		errs = append(errs, field.Required(field.NewPath(reportingController), ""))
	}
	for _, msg := range utilvalidation.IsQualifiedName(ev.ReportingController) {
		errs = append(errs, field.Invalid(field.NewPath(reportingController), ev.ReportingController, msg))
	}
	if ev.ReportingInstance == "" {
		errs = append(errs, field.Required(field.NewPath("reportingInstance"), ""))
	}
	if len(ev.ReportingInstance) > reportingInstanceLengthLimit {
		errs = append(errs, field.Invalid(field.NewPath("reportingInstance"), "", fmt.Sprintf("can have at most %v characters", reportingInstanceLengthLimit)))
	}
	if ev.Action == "" {
		errs = append(errs, field.Required(field.NewPath("action"), ""))
	}
	if len(ev.Action) > actionLengthLimit {
		errs = append(errs, field.Invalid(field.NewPath("action"), "", fmt.Sprintf("can have at most %v characters", actionLengthLimit)))
	}
	if ev.Reason == "" {
		errs = append(errs, field.Required(field.NewPath("reason"), ""))
	}
	if len(ev.Reason) > reasonLengthLimit {
		errs = append(errs, field.Invalid(field.NewPath("reason"), "", fmt.Sprintf("can have at most %v characters", reasonLengthLimit)))
	}
	if len(ev.Message) > noteLengthLimit {
		errs = append(errs, field.Invalid(field.NewPath("message"), "", fmt.Sprintf("can have at most %v characters", noteLengthLimit)))
	}
	return errs
}

// EventTable is kubectl's table of Events (either API): Last Seen, Type,
// Reason, Object, Message, and Subobject, Source, First Seen, Count and
// Name for -o wide. It reads core v1 Events.
type EventTable struct {
	// FromVersion converts a row's object to a core v1 Event (nil: it is
	// one).
	FromVersion func(u *unstructured.Unstructured) (*corev1.Event, error)
}

// ConvertToTable implements resource.TableConvertor.
func (t EventTable) ConvertToTable(_ context.Context, _ string, objs []*unstructured.Unstructured, noHeaders bool) (*metav1.Table, error) {
	tbl := &metav1.Table{}
	if !noHeaders {
		doc := corev1.Event{}.SwaggerDoc()
		tbl.ColumnDefinitions = []metav1.TableColumnDefinition{
			{Name: "Last Seen", Type: "string", Description: doc["lastTimestamp"]},
			{Name: "Type", Type: "string", Description: doc["type"]},
			{Name: "Reason", Type: "string", Description: doc["reason"]},
			{Name: "Object", Type: "string", Description: doc["involvedObject"]},
			{Name: "Subobject", Type: "string", Priority: 1, Description: corev1.ObjectReference{}.SwaggerDoc()["fieldPath"]},
			{Name: "Source", Type: "string", Priority: 1, Description: doc["source"]},
			{Name: "Message", Type: "string", Description: doc["message"]},
			{Name: "First Seen", Type: "string", Priority: 1, Description: doc["firstTimestamp"]},
			{Name: "Count", Type: "string", Priority: 1, Description: doc["count"]},
			{Name: "Name", Type: "string", Priority: 1, Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]},
		}
	}
	for _, o := range objs {
		var ev *corev1.Event
		var err error
		if t.FromVersion != nil {
			ev, err = t.FromVersion(o)
		} else {
			ev = &corev1.Event{}
			err = runtimeFromUnstructured(o, ev)
		}
		if err != nil {
			return nil, err
		}
		tbl.Rows = append(tbl.Rows, metav1.TableRow{Cells: eventCells(ev)})
	}
	return tbl, nil
}

func microAge(t metav1.MicroTime) string { return resource.Age(metav1.NewTime(t.Time)) }

func eventCells(ev *corev1.Event) []any {
	first := resource.Age(ev.FirstTimestamp)
	if ev.FirstTimestamp.IsZero() {
		first = microAge(ev.EventTime)
	}
	last := resource.Age(ev.LastTimestamp)
	if ev.LastTimestamp.IsZero() {
		last = first
	}
	count := ev.Count
	if ev.Series != nil {
		last = microAge(ev.Series.LastObservedTime)
		count = ev.Series.Count
	} else if count == 0 {
		count = 1
	}
	target := strings.ToLower(ev.InvolvedObject.Kind)
	if ev.InvolvedObject.Name != "" {
		target += "/" + ev.InvolvedObject.Name
	}
	component, instance := ev.Source.Component, ev.Source.Host
	if component == "" {
		component = ev.ReportingController
	}
	if instance == "" {
		instance = ev.ReportingInstance
	}
	source := component
	if instance != "" {
		source += ", " + instance
	}
	return []any{last, ev.Type, ev.Reason, target, ev.InvolvedObject.FieldPath, source, strings.TrimSpace(ev.Message), first, int64(count), ev.Name}
}

func runtimeFromUnstructured(u *unstructured.Unstructured, into any) error {
	return runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, into)
}

// EventFieldManagers track the managedFields of Events written through the
// API of group ("" or events.k8s.io): either API's managers are kept, each
// in its own version, as on Kubernetes.
func EventFieldManagers(group string) *resource.FieldManagers {
	f := resource.BuiltinFieldManagers(group, "Event", false)
	f.Converter = EventConverter{}
	return f
}

// EventToCore is an events.k8s.io/v1 Event as a core v1 Event.
func EventToCore(in *eventsv1.Event) *corev1.Event {
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

// EventFromCore is a core v1 Event as an events.k8s.io/v1 Event.
func EventFromCore(in *corev1.Event) *eventsv1.Event {
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

// EventConverter converts Events between core v1 ("v1", how they are stored)
// and events.k8s.io/v1.
type EventConverter struct{}

var _ conversion.Converter = EventConverter{}

// Convert implements conversion.Converter.
func (EventConverter) Convert(_ context.Context, objs [][]byte, to string) (conversion.Result, error) {
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
			conv = EventFromCore(ev)
		case tm.APIVersion == eventsv1.SchemeGroupVersion.String() && to == "v1":
			ev := &eventsv1.Event{}
			if err := json.Unmarshal(raw, ev); err != nil {
				return conversion.Result{}, err
			}
			conv = EventToCore(ev)
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
