package schema

import (
	"context"
	"fmt"

	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel/model"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	structurallisttype "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/cel/common"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// Version is the compiled schema of one CRD version: everything a request
// needs, built once when the CRD is written.
type Version struct {
	structural *structuralschema.Structural
	validator  apiservervalidation.SchemaValidator
	status     apiservervalidation.SchemaValidator // nil without a status subresource
	// check and statusCheck decide fast that a value is valid, so that
	// the validators above only run for values that may not be.
	check, statusCheck *check
	cel                *celNode // nil without CEL rules
	// celSchema is the schema CEL values and correlated objects walk.
	celSchema  *celSchema
	hasDefault bool
	// hasEmbedded: the schema has x-kubernetes-embedded-resource fields,
	// whose metadata is coerced too.
	hasEmbedded bool
	// hasListTypes: the schema has set or map lists, whose items are
	// checked for uniqueness.
	hasListTypes bool
	pruner       *pruner
}

// Compile builds the schema of version of a CRD. A CRD without a schema
// for that version (impossible for a valid v1 CRD) gets nil.
func Compile(crd *apiextensionsv1.CustomResourceDefinition, version string) (*Version, error) {
	val, err := apihelpers.GetSchemaForVersion(crd, version)
	if err != nil || val == nil || val.OpenAPIV3Schema == nil {
		return nil, err
	}
	internal := &apiextensions.CustomResourceValidation{}
	if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(val, internal, nil); err != nil {
		return nil, fmt.Errorf("converting the schema of %s: %w", version, err)
	}
	s, err := structuralschema.NewStructural(internal.OpenAPIV3Schema)
	if err != nil {
		return nil, fmt.Errorf("the schema of %s is not structural: %w", version, err)
	}
	s = s.DeepCopy()
	if err := structuraldefaulting.PruneDefaults(s); err != nil {
		return nil, fmt.Errorf("pruning the defaults of %s: %w", version, err)
	}
	v := &Version{
		structural:  s,
		hasDefault:  anyNode(s, func(n *structuralschema.Structural) bool { return n.Default.Object != nil }),
		hasEmbedded: anyNode(s, func(n *structuralschema.Structural) bool { return n.XEmbeddedResource }),
		hasListTypes: anyNode(s, func(n *structuralschema.Structural) bool {
			return n.XListType != nil && (*n.XListType == "set" || *n.XListType == "map")
		}),
		pruner: newPruner(s, true),
	}
	var openapi *spec.Schema
	if v.validator, openapi, err = apiservervalidation.NewSchemaValidator(internal.OpenAPIV3Schema); err != nil {
		return nil, err
	}
	v.check = newCheck(openapi)
	sub, err := apihelpers.GetSubresourcesForVersion(crd, version)
	if err != nil {
		return nil, err
	}
	if sub != nil && sub.Status != nil {
		if st, ok := internal.OpenAPIV3Schema.Properties["status"]; ok {
			if v.status, openapi, err = apiservervalidation.NewSchemaValidator(&st); err != nil {
				return nil, err
			}
			v.statusCheck = newCheck(openapi)
		}
	}
	v.celSchema = newCELSchema(s, true)
	if anyNode(s, func(n *structuralschema.Structural) bool { return len(n.XValidations) > 0 }) {
		v.cel = newCELNode(s, s, v.celSchema, true, model.SchemaDeclType(s, true), environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
	}
	return v, nil
}

// HasDefaults reports whether the schema defaults anything.
func (v *Version) HasDefaults() bool { return v != nil && v.hasDefault }

// Coerce drops what the schema does not know from a decoded object
// (apiVersion, kind and metadata stay; embedded resources keep theirs) and
// normalizes metadata, as Kubernetes' decoder does. With track, it returns
// the paths of the unknown fields it dropped, for field validation.
func (v *Version) Coerce(obj map[string]any, track bool) ([]string, error) {
	if v == nil {
		return nil, nil
	}
	av, kind, md := obj["apiVersion"], obj["kind"], obj["metadata"]
	// Metadata is ObjectMeta: what it does not know is unknown too. (Malformed
	// metadata is left for validation to report.)
	var meta *metav1.ObjectMeta
	var found bool
	var unknown []string
	if m, ok := md.(map[string]any); !ok || !plainMeta(m) {
		var err error
		meta, found, unknown, err = schemaobjectmeta.GetObjectMetaWithOptions(obj, schemaobjectmeta.ObjectMetaOptions{ReturnUnknownFieldPaths: track})
		if err != nil {
			found, unknown = false, nil
		}
	}
	unknown = append(unknown, v.pruner.prune(obj, track)...)
	if hasNull(obj) {
		structuraldefaulting.PruneNonNullableNullsWithoutDefaults(obj, v.structural)
	}
	// Only embedded resources have metadata to coerce below the root.
	if v.hasEmbedded {
		ferr, paths := schemaobjectmeta.CoerceWithOptions(nil, obj, v.structural, false, schemaobjectmeta.CoerceOptions{ReturnUnknownFieldPaths: track})
		if ferr != nil {
			return nil, ferr
		}
		unknown = append(unknown, paths...)
	}
	if av != nil {
		obj["apiVersion"] = av
	}
	if kind != nil {
		obj["kind"] = kind
	}
	switch {
	case found:
		if err := schemaobjectmeta.SetObjectMeta(obj, meta); err != nil {
			return nil, err
		}
	case md != nil:
		obj["metadata"] = md
	}
	return unknown, nil
}

// plainMeta reports metadata that going through ObjectMeta would leave as
// it is: only non-empty name, generateName and namespace strings and
// non-empty label and annotation maps of strings. (Anything else, such as
// a null, an empty string or an unknown field, takes the round trip.)
func plainMeta(m map[string]any) bool {
	if len(m) == 0 {
		return false
	}
	for k, v := range m {
		switch k {
		case "name", "generateName", "namespace":
			if s, ok := v.(string); !ok || s == "" {
				return false
			}
		case "labels", "annotations":
			vm, ok := v.(map[string]any)
			if !ok || len(vm) == 0 {
				return false
			}
			for _, x := range vm {
				if _, ok := x.(string); !ok {
					return false
				}
			}
		default:
			return false
		}
	}
	return true
}

// CoerceStored prunes an object read from storage (and converted) for
// this version. Its metadata was checked when it was written, so only the
// fields the schema does not know go, and embedded resources are coerced.
func (v *Version) CoerceStored(obj map[string]any) error {
	if v == nil {
		return nil
	}
	av, kind, md := obj["apiVersion"], obj["kind"], obj["metadata"]
	v.pruner.prune(obj, false)
	if hasNull(obj) {
		structuraldefaulting.PruneNonNullableNullsWithoutDefaults(obj, v.structural)
	}
	if v.hasEmbedded {
		if ferr, _ := schemaobjectmeta.CoerceWithOptions(nil, obj, v.structural, false, schemaobjectmeta.CoerceOptions{}); ferr != nil {
			return ferr
		}
	}
	if av != nil {
		obj["apiVersion"] = av
	}
	if kind != nil {
		obj["kind"] = kind
	}
	if md != nil {
		obj["metadata"] = md
	}
	return nil
}

// Default applies the schema's defaults.
func (v *Version) Default(obj map[string]any) {
	if v == nil || !v.hasDefault {
		return
	}
	structuraldefaulting.Default(obj, v.structural)
}

// Validate checks a new object against the schema: OpenAPI validation,
// embedded resources, list types and CEL rules, every violation with its
// field path.
func (v *Version) Validate(ctx context.Context, obj map[string]any) field.ErrorList {
	if v == nil {
		return nil
	}
	var errs field.ErrorList
	if !v.check.valid(obj) {
		errs = apiservervalidation.ValidateCustomResource(nil, obj, v.validator)
	}
	if v.hasEmbedded {
		errs = append(errs, schemaobjectmeta.Validate(ctx, nil, obj, v.structural, false)...)
	}
	if v.hasListTypes {
		errs = append(errs, structurallisttype.ValidateListSetsAndMaps(nil, v.structural, obj)...)
	}
	return append(errs, v.validateCEL(ctx, obj, nil, errs, ratchet{})...)
}

// ValidateUpdate checks an updated object, ratcheting: a value the update
// does not change may stay invalid.
func (v *Version) ValidateUpdate(ctx context.Context, obj, old map[string]any) field.ErrorList {
	if v == nil {
		return nil
	}
	correlated := common.NewCorrelatedObject(obj, old, v.celSchema)
	var errs field.ErrorList
	if !v.check.valid(obj) {
		errs = apiservervalidation.ValidateCustomResourceUpdate(nil, obj, old, v.validator, apiservervalidation.WithRatcheting(correlated))
	}
	if v.hasEmbedded {
		errs = append(errs, schemaobjectmeta.Validate(ctx, nil, obj, v.structural, false)...)
	}
	if v.hasListTypes && len(structurallisttype.ValidateListSetsAndMaps(nil, v.structural, old)) == 0 {
		errs = append(errs, structurallisttype.ValidateListSetsAndMaps(nil, v.structural, obj)...)
	}
	return append(errs, v.validateCEL(ctx, obj, old, errs, ratchet{current: correlated})...)
}

// ValidateStatus checks a status update against the status schema.
func (v *Version) ValidateStatus(ctx context.Context, obj, old map[string]any) field.ErrorList {
	if v == nil {
		return nil
	}
	var errs field.ErrorList
	correlated := common.NewCorrelatedObject(obj, old, v.celSchema)
	if st, ok := obj["status"]; ok && v.status != nil && !v.statusCheck.valid(st) {
		errs = apiservervalidation.ValidateCustomResourceUpdate(field.NewPath("status"), st, old["status"], v.status, apiservervalidation.WithRatcheting(correlated.Key("status")))
	}
	// CEL rules ratchet on status writes too: a value the write leaves as
	// it was may stay invalid.
	return append(errs, v.validateCEL(ctx, obj, old, errs, ratchet{current: correlated})...)
}

// validateCEL runs the CEL rules unless earlier errors make them
// meaningless (a wrong type blocks them, as in Kubernetes).
func (v *Version) validateCEL(ctx context.Context, obj, old map[string]any, prior field.ErrorList, r ratchet) field.ErrorList {
	if v.cel == nil {
		return nil
	}
	for _, e := range prior {
		switch e.Type {
		case field.ErrorTypeNotSupported, field.ErrorTypeRequired, field.ErrorTypeTooLong, field.ErrorTypeTooMany, field.ErrorTypeTypeInvalid:
			return field.ErrorList{field.Invalid(nil, nil, "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation")}
		}
	}
	var oldObj any
	if old != nil {
		oldObj = old
	}
	errs, _ := v.cel.validate(ctx, nil, obj, oldObj, r, celconfig.RuntimeCELCostBudget)
	return errs
}

// anyNode reports whether some node of s (properties, items and
// additionalProperties, all the way down) satisfies is.
func anyNode(s *structuralschema.Structural, is func(*structuralschema.Structural) bool) bool {
	if s == nil {
		return false
	}
	if is(s) {
		return true
	}
	for name := range s.Properties {
		p := s.Properties[name]
		if anyNode(&p, is) {
			return true
		}
	}
	if s.AdditionalProperties != nil && anyNode(s.AdditionalProperties.Structural, is) {
		return true
	}
	return anyNode(s.Items, is)
}

// hasNull reports a null anywhere in a decoded object: without one,
// dropping the nulls the schema does not allow has nothing to do.
func hasNull(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case map[string]any:
		for _, x := range v {
			if hasNull(x) {
				return true
			}
		}
	case []any:
		for _, x := range v {
			if hasNull(x) {
				return true
			}
		}
	}
	return false
}
