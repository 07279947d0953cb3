// Package apiregistration is the built-in apiregistration.k8s.io/v1 API:
// APIServices, which say which server serves a group/version. A local one
// (spec.service null) is this server's own; one with a service is served
// by an aggregated API server that crdserver proxies to
// (internal/aggregator), and internal/controller/apiservice keeps its
// Available condition. Defaults, validation and the table are
// kube-aggregator's own (k8s.io/kube-aggregator), applied to the typed
// object.
package apiregistration

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/validate/content"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/kube-aggregator/pkg/apis/apiregistration"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	"k8s.io/kube-aggregator/pkg/apis/apiregistration/v1/helper"
	"k8s.io/kube-aggregator/pkg/apis/apiregistration/validation"
	aggapply "k8s.io/kube-aggregator/pkg/client/applyconfiguration"

	"github.com/crdserver/crdserver/internal/conversion"
	"github.com/crdserver/crdserver/internal/request"
	"github.com/crdserver/crdserver/internal/resource"
	"github.com/crdserver/crdserver/internal/store"
)

// Prefix is where APIServices live in etcd (kube-apiserver's key).
const Prefix = "/registry/apiregistration.k8s.io/apiservices/"

// Group is the API group of APIServices.
const Group = apiregistrationv1.GroupName

// AddToScheme registers the APIService types (for protobuf bodies and
// server-side apply).
var AddToScheme = apiregistrationv1.AddToScheme

// APIServices is the apiservices resource, served from cache.
func APIServices(cache *store.Cache) *resource.Resource {
	return &resource.Resource{
		Group:          Group,
		Plural:         "apiservices",
		Singular:       "apiservice",
		Kind:           "APIService",
		ListKind:       "APIServiceList",
		Categories:     []string{"api-extensions"},
		Versions:       []*resource.Version{{Name: "v1", Status: true}},
		StorageVersion: "v1",
		KeyPrefix:      Prefix,
		Cache:          cache,
		Strategy:       strategy{},
		Converter:      conversion.None{},
		Table:          table{},
		FieldManagers: &resource.FieldManagers{
			Group:     Group,
			Kind:      "APIService",
			Converter: conversion.None{},
			// What server-side apply makes is defaulted as a request
			// body is.
			Default: setDefaults,
			TypeConverter: func() (managedfields.TypeConverter, int64, error) {
				return aggapply.NewTypeConverter(request.Scheme()), 0, nil
			},
			ResetFields: func(sub, _ string) []string {
				if sub == "status" {
					return []string{"metadata", "spec"}
				}
				return []string{"status"}
			},
		},
		Protobuf:     true,
		ValidateName: func(name string, _ bool) []string { return content.IsPathSegmentName(name) },
		Verbs:        []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"},
	}
}

// setDefaults applies kube's defaults to an APIService's content
// (spec.service.port 443).
func setDefaults(obj map[string]any) {
	svc, ok, _ := unstructured.NestedMap(obj, "spec", "service")
	if !ok || svc == nil {
		return
	}
	if _, ok := svc["port"]; !ok {
		_ = unstructured.SetNestedField(obj, int64(443), "spec", "service", "port")
	}
}

// Typed decodes a stored or request APIService.
func Typed(obj *resource.Object) (*apiregistrationv1.APIService, error) {
	return resource.Typed[apiregistrationv1.APIService](obj)
}

type strategy struct{}

// Normalize decodes a body through the APIService type and applies
// kube's defaults (spec.service.port 443).
func (strategy) Normalize(obj *resource.Object) ([]error, error) {
	return resource.NormalizeTyped(obj, "APIService", obj.APIVersion(), apiregistrationv1.SetObjectDefaults_APIService)
}

// PrepareForCreate drops the status a client sent; a local APIService
// is available from the start, as kube's strategy makes it.
func (strategy) PrepareForCreate(_ context.Context, obj *resource.Object) {
	resource.EditTyped(obj, func(a *apiregistrationv1.APIService) {
		a.Status = apiregistrationv1.APIServiceStatus{}
		if a.Spec.Service == nil {
			helper.SetAPIServiceCondition(a, helper.NewLocalAvailableAPIServiceCondition())
		}
	})
}

// PrepareForUpdate keeps the stored status.
func (strategy) PrepareForUpdate(_ context.Context, obj, old *resource.Object) {
	if st, ok := old.Content["status"]; ok {
		obj.Content["status"] = runtime.DeepCopyJSONValue(st)
	} else {
		delete(obj.Content, "status")
	}
}

// PrepareForStatusUpdate keeps everything but the status: spec, labels,
// annotations, finalizers and owners stay the stored ones.
func (strategy) PrepareForStatusUpdate(_ context.Context, obj, old *resource.Object) {
	st, ok := obj.Content["status"]
	next := old.DeepCopy()
	if ok {
		next.Content["status"] = st
	}
	*obj = *next
}

// internal converts to kube-aggregator's internal type, which its
// validation takes.
func internal(obj *resource.Object) (*apiregistration.APIService, error) {
	v1, err := Typed(obj)
	if err != nil {
		return nil, err
	}
	out := &apiregistration.APIService{}
	if err := apiregistrationv1.Convert_v1_APIService_To_apiregistration_APIService(v1, out, nil); err != nil {
		return nil, err
	}
	return out, nil
}

// validate is kube-aggregator's ValidateAPIService without the checks of
// metadata the engine makes itself; the name must still be
// spec.version + "." + spec.group.
func validate(ctx context.Context, obj *resource.Object) field.ErrorList {
	a, err := internal(obj)
	if err != nil {
		return field.ErrorList{field.Invalid(field.NewPath("spec"), nil, err.Error())}
	}
	name := a.Name
	a.ObjectMeta = metav1.ObjectMeta{Name: "-"}
	var errs field.ErrorList
	if required := a.Spec.Version + "." + a.Spec.Group; name != "" && len(content.IsPathSegmentName(name)) == 0 && name != required {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), name, fmt.Sprintf("must be `spec.version+\".\"+spec.group`: %q", required)))
	}
	for _, e := range validation.ValidateAPIService(ctx, a) {
		if !strings.HasPrefix(e.Field, "metadata") {
			errs = append(errs, e)
		}
	}
	return errs
}

func (strategy) Validate(ctx context.Context, obj *resource.Object) field.ErrorList {
	return validate(ctx, obj)
}

func (strategy) ValidateUpdate(ctx context.Context, obj, _ *resource.Object) field.ErrorList {
	return validate(ctx, obj)
}

func (strategy) ValidateStatusUpdate(_ context.Context, obj, _ *resource.Object) field.ErrorList {
	a, err := internal(obj)
	if err != nil {
		return field.ErrorList{field.Invalid(field.NewPath("status"), nil, err.Error())}
	}
	return validation.ValidateAPIServiceStatus(&a.Status, field.NewPath("status"))
}

// table is kubectl's table of APIServices: Name, Service, Available, Age.
type table struct{}

var metaDoc = metav1.ObjectMeta{}.SwaggerDoc()

func (table) ConvertToTable(_ context.Context, _ string, objs []*unstructured.Unstructured, noHeaders bool) (*metav1.Table, error) {
	tbl := &metav1.Table{}
	if !noHeaders {
		tbl.ColumnDefinitions = []metav1.TableColumnDefinition{
			{Name: "Name", Type: "string", Format: "name", Description: metaDoc["name"]},
			{Name: "Service", Type: "string", Description: "The reference to the service that hosts this API endpoint."},
			{Name: "Available", Type: "string", Description: "Whether this service is available."},
			{Name: "Age", Type: "string", Description: metaDoc["creationTimestamp"]},
		}
	}
	for _, o := range objs {
		a := &apiregistrationv1.APIService{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, a); err != nil {
			return nil, err
		}
		service := "Local"
		if s := a.Spec.Service; s != nil {
			service = s.Namespace + "/" + s.Name
		}
		status := string(apiregistrationv1.ConditionUnknown)
		if c := helper.GetAPIServiceConditionByType(a, apiregistrationv1.Available); c != nil {
			switch {
			case c.Status == apiregistrationv1.ConditionTrue:
				status = string(c.Status)
			case c.Reason != "":
				status = fmt.Sprintf("%s (%s)", c.Status, c.Reason)
			default:
				status = string(c.Status)
			}
		}
		tbl.Rows = append(tbl.Rows, metav1.TableRow{Cells: []any{o.GetName(), service, status, resource.Age(o.GetCreationTimestamp())}})
	}
	return tbl, nil
}
