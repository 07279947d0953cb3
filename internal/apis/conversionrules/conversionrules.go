// Package conversionrules is crdserver's own API for declarative
// conversion: conversion.crdserver.io/v1alpha1 ConversionRules, one per
// CRD (named after it), whose spec (v1alpha1.RuleSet, the types of the
// API are in v1alpha1) says how the CRD's
// versions convert through a hub version with named rules and CEL. On
// crdserver the rules replace the CRD's conversion strategy, in process; the
// same rules run as an ordinary conversion webhook (`crdserver
// conversion-webhook --rules FILE`) so that the CRD, unchanged, also works
// on a Kubernetes cluster. A rule set is accepted only if it compiles for
// the CRD's versions and converts sample objects of every version to every
// other and back without losing anything.
package conversionrules

import (
	"context"
	"reflect"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/crdserver/crdserver/internal/apis/conversionrules/v1alpha1"
	"github.com/crdserver/crdserver/internal/conversion"
	"github.com/crdserver/crdserver/internal/resource"
	"github.com/crdserver/crdserver/internal/store"
)

// Prefix is where ConversionRules live in etcd.
const Prefix = "/registry/" + v1alpha1.Group + "/conversionrules/"

// Options are what the resource checks rule sets with.
type Options struct {
	// CRD returns the stored CRD of a name as it is now, or nil.
	CRD func(ctx context.Context, name string) *apiextensionsv1.CustomResourceDefinition
}

// Resource is the conversionrules resource, served from cache.
func Resource(cache *store.Cache, o Options) *resource.Resource {
	return &resource.Resource{
		Group:          v1alpha1.Group,
		Plural:         "conversionrules",
		Singular:       "conversionrules",
		Kind:           "ConversionRules",
		ListKind:       "ConversionRulesList",
		Versions:       []*resource.Version{{Name: v1alpha1.Version}},
		StorageVersion: v1alpha1.Version,
		KeyPrefix:      Prefix,
		Cache:          cache,
		Strategy:       strategy{o},
		Converter:      conversion.None{},
		Table:          table{},
		FieldManagers:  &resource.FieldManagers{Group: v1alpha1.Group, Kind: "ConversionRules", Converter: conversion.None{}},
		Verbs:          resource.DefaultVerbs,
	}
}

// Get returns what reads the ConversionRules of a CRD from cache (nil if
// there are none, or they do not decode).
func Get(cache *store.Cache) func(crd string) *v1alpha1.ConversionRules {
	return func(crd string) *v1alpha1.ConversionRules {
		it, _ := cache.Get(Prefix + crd)
		if it == nil {
			return nil
		}
		cr, err := Decode(it.Bytes())
		if err != nil {
			return nil
		}
		return cr
	}
}

// Decode reads the rule set of a stored ConversionRules.
func Decode(raw []byte) (*v1alpha1.ConversionRules, error) {
	obj, err := resource.DecodeObject(raw)
	if err != nil {
		return nil, err
	}
	return resource.Typed[v1alpha1.ConversionRules](obj)
}

type strategy struct{ o Options }

func (strategy) Normalize(obj *resource.Object) ([]error, error) {
	return resource.NormalizeTyped[v1alpha1.ConversionRules](obj, "ConversionRules", v1alpha1.Version, nil)
}

func (strategy) PrepareForCreate(_ context.Context, obj *resource.Object) { obj.Meta.Generation = 1 }

func (strategy) PrepareForUpdate(_ context.Context, obj, old *resource.Object) {
	obj.Meta.Generation = old.Meta.Generation
	if !reflect.DeepEqual(obj.Content["spec"], old.Content["spec"]) {
		obj.Meta.Generation++
	}
}

func (s strategy) Validate(ctx context.Context, obj *resource.Object) field.ErrorList {
	cr, err := resource.Typed[v1alpha1.ConversionRules](obj)
	if err != nil {
		return field.ErrorList{field.Invalid(field.NewPath("spec"), nil, err.Error())}
	}
	crd := s.o.CRD(ctx, cr.Name)
	if crd == nil {
		return field.ErrorList{field.NotFound(field.NewPath("metadata", "name"), cr.Name)}
	}
	var versions []string
	for _, v := range crd.Spec.Versions {
		versions = append(versions, v.Name)
	}
	rules, errs := conversion.NewRules(cr.Spec, crd.Spec.Group, versions)
	if errs != nil {
		return errs
	}
	return Prove(ctx, crd, rules)
}

func (s strategy) ValidateUpdate(ctx context.Context, obj, _ *resource.Object) field.ErrorList {
	return s.Validate(ctx, obj)
}

// table is kubectl's table of ConversionRules: Name, Hub, Age.
type table struct{}

func (table) ConvertToTable(_ context.Context, _ string, objs []*unstructured.Unstructured, noHeaders bool) (*metav1.Table, error) {
	tbl := &metav1.Table{}
	if !noHeaders {
		tbl.ColumnDefinitions = []metav1.TableColumnDefinition{
			{Name: "Name", Type: "string", Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]},
			{Name: "Hub", Type: "string", Description: "The version conversions go through."},
			{Name: "Age", Type: "string", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]},
		}
	}
	for _, o := range objs {
		hub, _, _ := unstructured.NestedString(o.Object, "spec", "hub")
		tbl.Rows = append(tbl.Rows, metav1.TableRow{Cells: []any{o.GetName(), hub, resource.Age(o.GetCreationTimestamp())}})
	}
	return tbl, nil
}
