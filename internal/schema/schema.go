package schema

import (
	"log/slog"

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

	"github.com/crdserver/crdserver/internal/budget"
)

// Version is the compiled schema of one CRD version: everything a request
// needs, in three parts that are each built when first needed (with
// Compile, all at once) and, in a budget.Pool, released again when
// unused: what reads need (the structural schema and its pruner), what
// writes need (validators, CEL programs) and what status writes need (the
// status validator).
type Version struct {
	base   *budget.Value[*base]
	valid  *budget.Value[*validation]
	status *budget.Value[*validation]
}

// base is what reading and coercing objects needs.
type base struct {
	structural *structuralschema.Structural
	hasDefault bool
	// hasEmbedded: the schema has x-kubernetes-embedded-resource fields,
	// whose metadata is coerced too.
	hasEmbedded bool
	// hasListTypes: the schema has set or map lists, whose items are
	// checked for uniqueness.
	hasListTypes bool
	pruner       *pruner
}

// validation is what validating a whole object (or its status) needs.
type validation struct {
	validator apiservervalidation.SchemaValidator
	// check decides fast that a value is valid, so that the validator only
	// runs for values that may not be.
	check *check
	cel   *celNode // nil without CEL rules
	// celSchema is the schema CEL values and correlated objects walk.
	celSchema *celSchema
}

// Source gives the schema of one CRD version, in the internal version
// Kubernetes' schema code takes, and whether the version has the status
// subresource; nil schema: the version has none.
type Source func() (*apiextensions.JSONSchemaProps, bool, error)

// VersionSource is the Source of version of a decoded CRD.
func VersionSource(crd *apiextensionsv1.CustomResourceDefinition, version string) Source {
	return func() (*apiextensions.JSONSchemaProps, bool, error) {
		val, err := apihelpers.GetSchemaForVersion(crd, version)
		if err != nil || val == nil || val.OpenAPIV3Schema == nil {
			return nil, false, err
		}
		internal := &apiextensions.CustomResourceValidation{}
		if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(val, internal, nil); err != nil {
			return nil, false, fmt.Errorf("converting the schema of %s: %w", version, err)
		}
		sub, err := apihelpers.GetSubresourcesForVersion(crd, version)
		if err != nil {
			return nil, false, err
		}
		return internal.OpenAPIV3Schema, sub != nil && sub.Status != nil, nil
	}
}

// Compile builds the schema of version of a CRD, all of it at once. A CRD
// without a schema for that version (impossible for a valid v1 CRD) gets
// nil.
func Compile(crd *apiextensionsv1.CustomResourceDefinition, version string) (*Version, error) {
	src := VersionSource(crd, version)
	props, _, err := src()
	if err != nil || props == nil {
		return nil, err
	}
	v := Lazy(nil, src)
	if _, err := v.base.Get(); err != nil {
		return nil, err
	}
	if _, err := v.valid.Get(); err != nil {
		return nil, err
	}
	if _, err := v.status.Get(); err != nil {
		return nil, err
	}
	return v, nil
}

// Lazy returns the schema src gives, built part by part when first needed
// and held in pool (nil: held once built). src is called again whenever a
// released part is built again. A part that cannot be built (a schema the
// CRD's validation would have refused) is logged and checks nothing.
func Lazy(pool *budget.Pool, src Source) *Version {
	v := &Version{}
	v.base = budget.NewValue(pool, func() (*base, int64, error) { return buildBase(src) })
	v.valid = budget.NewValue(pool, func() (*validation, int64, error) {
		props, _, err := src()
		if err != nil || props == nil {
			return nil, 0, err
		}
		b, err := v.base.Get()
		if err != nil || b == nil {
			return nil, 0, err
		}
		return buildValidation(props, b.structural, true)
	})
	v.status = budget.NewValue(pool, func() (*validation, int64, error) {
		props, hasStatus, err := src()
		if err != nil || props == nil || !hasStatus {
			return nil, 0, err
		}
		st, ok := props.Properties["status"]
		if !ok {
			return nil, 0, nil
		}
		return buildValidation(&st, nil, false)
	})
	return v
}

func buildBase(src Source) (*base, int64, error) {
	props, _, err := src()
	if err != nil || props == nil {
		return nil, 0, err
	}
	s, err := structuralschema.NewStructural(props)
	if err != nil {
		return nil, 0, fmt.Errorf("the schema is not structural: %w", err)
	}
	s = s.DeepCopy()
	if err := structuraldefaulting.PruneDefaults(s); err != nil {
		return nil, 0, fmt.Errorf("pruning the defaults: %w", err)
	}
	b := &base{
		structural:  s,
		hasDefault:  anyNode(s, func(n *structuralschema.Structural) bool { return n.Default.Object != nil }),
		hasEmbedded: anyNode(s, func(n *structuralschema.Structural) bool { return n.XEmbeddedResource }),
		hasListTypes: anyNode(s, func(n *structuralschema.Structural) bool {
			return n.XListType != nil && (*n.XListType == "set" || *n.XListType == "map")
		}),
		pruner: newPruner(s, true),
	}
	return b, int64(countNodes(props)) * baseBytesPerNode, nil
}

// buildValidation builds the validator of props; with s (the structural
// schema of the whole object) also its CEL rules.
func buildValidation(props *apiextensions.JSONSchemaProps, s *structuralschema.Structural, withCEL bool) (*validation, int64, error) {
	val := &validation{}
	validator, openapi, err := apiservervalidation.NewSchemaValidator(props)
	if err != nil {
		return nil, 0, err
	}
	val.validator, val.check = validator, newCheck(openapi)
	nodes := countNodes(props)
	cost := int64(nodes) * validationBytesPerNode
	if withCEL && s != nil {
		val.celSchema = newCELSchema(s, true)
		cost += int64(nodes) * celSchemaBytesPerNode
		if anyNode(s, func(n *structuralschema.Structural) bool { return len(n.XValidations) > 0 }) {
			val.cel = newCELNode(s, s, val.celSchema, true, model.SchemaDeclType(s, true), environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
			cost += int64(nodes)*celDeclBytesPerNode + int64(countRules(props))*celRuleBytes
		}
	}
	return val, cost, nil
}

// The estimated bytes of a built part, per node of the schema (a
// property, items or additionalProperties schema) and per CEL rule,
// measured on the CRDs of a real Crossplane provider (TestCostEstimates).
const (
	baseBytesPerNode       = 660
	validationBytesPerNode = 950
	celSchemaBytesPerNode  = 500
	celDeclBytesPerNode    = 880
	celRuleBytes           = 20 << 10
)

// countNodes counts the schemas in props, props included.
func countNodes(props *apiextensions.JSONSchemaProps) int {
	if props == nil {
		return 0
	}
	n := 1
	for k := range props.Properties {
		p := props.Properties[k]
		n += countNodes(&p)
	}
	if props.Items != nil {
		n += countNodes(props.Items.Schema)
		for i := range props.Items.JSONSchemas {
			n += countNodes(&props.Items.JSONSchemas[i])
		}
	}
	if props.AdditionalProperties != nil {
		n += countNodes(props.AdditionalProperties.Schema)
	}
	for _, group := range [][]apiextensions.JSONSchemaProps{props.AllOf, props.AnyOf, props.OneOf} {
		for i := range group {
			n += countNodes(&group[i])
		}
	}
	return n
}

// countRules counts the CEL rules in props.
func countRules(props *apiextensions.JSONSchemaProps) int {
	if props == nil {
		return 0
	}
	n := len(props.XValidations)
	for k := range props.Properties {
		p := props.Properties[k]
		n += countRules(&p)
	}
	if props.Items != nil {
		n += countRules(props.Items.Schema)
	}
	if props.AdditionalProperties != nil {
		n += countRules(props.AdditionalProperties.Schema)
	}
	for _, group := range [][]apiextensions.JSONSchemaProps{props.AllOf, props.AnyOf, props.OneOf} {
		for i := range group {
			n += countRules(&group[i])
		}
	}
	return n
}

// parts: b, val and status return the built parts, nil for a version
// without a schema (or a part that cannot be built, which is logged).
func (v *Version) b() *base {
	if v == nil {
		return nil
	}
	b, err := v.base.Get()
	if err != nil {
		logBuildError(err)
	}
	return b
}

func (v *Version) val() *validation {
	if v == nil {
		return nil
	}
	val, err := v.valid.Get()
	if err != nil {
		logBuildError(err)
	}
	return val
}

func (v *Version) statusVal() *validation {
	if v == nil {
		return nil
	}
	val, err := v.status.Get()
	if err != nil {
		logBuildError(err)
	}
	return val
}

func logBuildError(err error) {
	slog.Error("a CRD schema that cannot be compiled checks nothing", "err", err)
}

// Drop releases every built part now (the CRD changed).
func (v *Version) Drop() {
	if v == nil {
		return
	}
	v.base.Drop()
	v.valid.Drop()
	v.status.Drop()
}

// HasDefaults reports whether the schema defaults anything.
func (v *Version) HasDefaults() bool {
	b := v.b()
	return b != nil && b.hasDefault
}

// Coerce drops what the schema does not know from a decoded object
// (apiVersion, kind and metadata stay; embedded resources keep theirs) and
// normalizes metadata, as Kubernetes' decoder does. With track, it returns
// the paths of the unknown fields it dropped, for field validation.
func (v *Version) Coerce(obj map[string]any, track bool) ([]string, error) {
	b := v.b()
	if b == nil {
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
	unknown = append(unknown, b.pruner.prune(obj, track)...)
	if hasNull(obj) {
		structuraldefaulting.PruneNonNullableNullsWithoutDefaults(obj, b.structural)
	}
	// Only embedded resources have metadata to coerce below the root.
	if b.hasEmbedded {
		ferr, paths := schemaobjectmeta.CoerceWithOptions(nil, obj, b.structural, false, schemaobjectmeta.CoerceOptions{ReturnUnknownFieldPaths: track})
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
	b := v.b()
	if b == nil {
		return nil
	}
	av, kind, md := obj["apiVersion"], obj["kind"], obj["metadata"]
	b.pruner.prune(obj, false)
	if hasNull(obj) {
		structuraldefaulting.PruneNonNullableNullsWithoutDefaults(obj, b.structural)
	}
	if b.hasEmbedded {
		if ferr, _ := schemaobjectmeta.CoerceWithOptions(nil, obj, b.structural, false, schemaobjectmeta.CoerceOptions{}); ferr != nil {
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
	if b := v.b(); b != nil && b.hasDefault {
		structuraldefaulting.Default(obj, b.structural)
	}
}

// Validate checks a new object against the schema: OpenAPI validation,
// embedded resources, list types and CEL rules, every violation with its
// field path.
func (v *Version) Validate(ctx context.Context, obj map[string]any) field.ErrorList {
	b, val := v.b(), v.val()
	if b == nil || val == nil {
		return nil
	}
	var errs field.ErrorList
	if !val.check.valid(obj) {
		errs = apiservervalidation.ValidateCustomResource(nil, obj, val.validator)
	}
	if b.hasEmbedded {
		errs = append(errs, schemaobjectmeta.Validate(ctx, nil, obj, b.structural, false)...)
	}
	if b.hasListTypes {
		errs = append(errs, structurallisttype.ValidateListSetsAndMaps(nil, b.structural, obj)...)
	}
	return append(errs, val.validateCEL(ctx, obj, nil, errs, ratchet{})...)
}

// ValidateUpdate checks an updated object, ratcheting: a value the update
// does not change may stay invalid.
func (v *Version) ValidateUpdate(ctx context.Context, obj, old map[string]any) field.ErrorList {
	b, val := v.b(), v.val()
	if b == nil || val == nil {
		return nil
	}
	correlated := common.NewCorrelatedObject(obj, old, val.celSchema)
	var errs field.ErrorList
	if !val.check.valid(obj) {
		errs = apiservervalidation.ValidateCustomResourceUpdate(nil, obj, old, val.validator, apiservervalidation.WithRatcheting(correlated))
	}
	if b.hasEmbedded {
		errs = append(errs, schemaobjectmeta.Validate(ctx, nil, obj, b.structural, false)...)
	}
	if b.hasListTypes && len(structurallisttype.ValidateListSetsAndMaps(nil, b.structural, old)) == 0 {
		errs = append(errs, structurallisttype.ValidateListSetsAndMaps(nil, b.structural, obj)...)
	}
	return append(errs, val.validateCEL(ctx, obj, old, errs, ratchet{current: correlated})...)
}

// ValidateStatus checks a status update against the status schema.
func (v *Version) ValidateStatus(ctx context.Context, obj, old map[string]any) field.ErrorList {
	val := v.val()
	if val == nil {
		return nil
	}
	var errs field.ErrorList
	correlated := common.NewCorrelatedObject(obj, old, val.celSchema)
	if st, ok := obj["status"]; ok {
		if status := v.statusVal(); status != nil && !status.check.valid(st) {
			errs = apiservervalidation.ValidateCustomResourceUpdate(field.NewPath("status"), st, old["status"], status.validator, apiservervalidation.WithRatcheting(correlated.Key("status")))
		}
	}
	// CEL rules ratchet on status writes too: a value the write leaves as
	// it was may stay invalid.
	return append(errs, val.validateCEL(ctx, obj, old, errs, ratchet{current: correlated})...)
}

// validateCEL runs the CEL rules unless earlier errors make them
// meaningless (a wrong type blocks them, as in Kubernetes).
func (val *validation) validateCEL(ctx context.Context, obj, old map[string]any, prior field.ErrorList, r ratchet) field.ErrorList {
	if val.cel == nil {
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
	errs, _ := val.cel.validate(ctx, nil, obj, oldObj, r, celconfig.RuntimeCELCostBudget)
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
