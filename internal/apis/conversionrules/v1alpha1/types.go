// Package v1alpha1 holds the types of conversion.crdserver.io/v1alpha1,
// crdserver's API for declarative conversion: ConversionRules, one per CRD
// (named after it), whose spec (RuleSet) says how the CRD's versions
// convert. They are plain data: internal/apis/conversionrules serves and
// checks them, internal/conversion compiles a RuleSet into a Converter.
//
// A CRD's versions are converted by rules that are data, in process,
// without a webhook. A RuleSet names a hub version; every
// other version says how its objects become hub objects (ToHub) and, when
// that cannot be derived, how hub objects become its objects (FromHub).
// An object goes from version A to version B through the hub: A's ToHub,
// then B's FromHub. Every named rule has an inverse, so FromHub is derived
// from ToHub (inverses in reverse order) unless the version gives it, which
// it must when ToHub uses a CEL expression.
//
// Paths are dot-separated fields from the object's root: ".spec.host".
// They name object fields only (no list indexes).
package v1alpha1

import (
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Group and Version of the API.
const (
	Group   = "conversion.crdserver.io"
	Version = "v1alpha1"
)

// ConversionRules are the conversion rules of one CRD, named after it.
type ConversionRules struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              RuleSet `json:"spec"`
}

// RuleSet is the spec of a ConversionRules object.
type RuleSet struct {
	// Hub is the version conversions go through.
	Hub string `json:"hub"`
	// Versions are the rules of every served version but the hub.
	Versions []VersionRules `json:"versions"`
}

// VersionRules say how one version's objects become hub objects and back.
type VersionRules struct {
	Name    string `json:"name"`
	ToHub   []Rule `json:"toHub,omitempty"`
	FromHub []Rule `json:"fromHub,omitempty"`
}

// Rule is one conversion step: exactly one of its fields is set.
type Rule struct {
	// Rename moves a field: the value at From goes to To.
	Rename *RenameRule `json:"rename,omitempty"`
	// MapValues replaces string values at Path by their image in Values
	// (an enum renamed); others stay as they are.
	MapValues *MapValuesRule `json:"mapValues,omitempty"`
	// Split cuts the string at From at each Separator into the fields of
	// To (the last takes the rest); Join is its inverse.
	Split *SplitRule `json:"split,omitempty"`
	Join  *JoinRule  `json:"join,omitempty"`
	// Wrap puts the value at Path into an object, as its Field; Unwrap is
	// its inverse.
	Wrap   *WrapRule `json:"wrap,omitempty"`
	Unwrap *WrapRule `json:"unwrap,omitempty"`
	// Default sets Path to Value where it is absent (a field the source
	// version does not have); its inverse removes Path.
	Default *DefaultRule `json:"default,omitempty"`
	// Remove drops Path (what the target version cannot hold; lossy unless
	// kept elsewhere).
	Remove *PathRule `json:"remove,omitempty"`
	// Annotation restores Path from the annotation Key, where the other
	// direction keeps it: a field with no counterpart in the source
	// version, kept as Kubernetes authors keep them. Its inverse stores
	// Path's value (JSON) in the annotation.
	Annotation *AnnotationRule `json:"annotation,omitempty"`
	// CEL sets Path to the value of a CEL expression over the object
	// (self); it has no inverse.
	CEL *CELRule `json:"cel,omitempty"`
}

// RenameRule is a Rename.
type RenameRule struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// MapValuesRule is a MapValues.
type MapValuesRule struct {
	Path   string            `json:"path"`
	Values map[string]string `json:"values"`
}

// SplitRule is a Split.
type SplitRule struct {
	From      string   `json:"from"`
	To        []string `json:"to"`
	Separator string   `json:"separator"`
}

// JoinRule is a Join.
type JoinRule struct {
	From      []string `json:"from"`
	To        string   `json:"to"`
	Separator string   `json:"separator"`
}

// WrapRule is a Wrap or an Unwrap.
type WrapRule struct {
	Path  string `json:"path"`
	Field string `json:"field"`
}

// DefaultRule is a Default.
type DefaultRule struct {
	Path  string          `json:"path"`
	Value json.RawMessage `json:"value"`
}

// PathRule names one field.
type PathRule struct {
	Path string `json:"path"`
}

// AnnotationRule is an Annotation.
type AnnotationRule struct {
	Path string `json:"path"`
	Key  string `json:"key"`
}

// CELRule is a CEL.
type CELRule struct {
	Path       string `json:"path"`
	Expression string `json:"expression"`
}

// ConversionRulesList is a list of ConversionRules.
type ConversionRulesList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ConversionRules `json:"items"`
}

// SchemeGroupVersion is the API's group and version.
var SchemeGroupVersion = schema.GroupVersion{Group: Group, Version: Version}

// AddToScheme registers the API's types (for OpenAPI).
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(SchemeGroupVersion, &ConversionRules{}, &ConversionRulesList{})
	metav1.AddToGroupVersion(s, SchemeGroupVersion)
	return nil
}

// DeepCopyObject implements runtime.Object.
func (c *ConversionRules) DeepCopyObject() runtime.Object { return deepCopy(c) }

// DeepCopyObject implements runtime.Object.
func (l *ConversionRulesList) DeepCopyObject() runtime.Object { return deepCopy(l) }

// deepCopy copies an object through JSON (these types are plain data).
func deepCopy[T any](in *T) *T {
	b, err := json.Marshal(in)
	if err != nil {
		panic(err)
	}
	out := new(T)
	if err := json.Unmarshal(b, out); err != nil {
		panic(err)
	}
	return out
}

// OpenAPIModelName names the type in OpenAPI documents.
func (ConversionRules) OpenAPIModelName() string {
	return "io.crdserver.conversion.v1alpha1.ConversionRules"
}

// OpenAPIModelName names the type in OpenAPI documents.
func (ConversionRulesList) OpenAPIModelName() string {
	return "io.crdserver.conversion.v1alpha1.ConversionRulesList"
}

// SwaggerDoc describes the fields (kubectl explain).
func (ConversionRules) SwaggerDoc() map[string]string {
	return map[string]string{
		"":         "ConversionRules convert the objects of the CustomResourceDefinition they are named after between its versions, in crdserver itself, without a webhook: every version converts to and from a hub version by named rules (rename, mapValues, split, join, wrap, unwrap, default, remove, annotation) and CEL expressions. A rule set is accepted only if it loses nothing on sample objects of every version.",
		"metadata": "Standard object's metadata; the name is the CRD's.",
		"spec":     "The hub version and each other version's rules.",
	}
}

// SwaggerDoc describes the fields (kubectl explain).
func (ConversionRulesList) SwaggerDoc() map[string]string {
	return map[string]string{"": "A list of ConversionRules.", "metadata": "Standard list metadata.", "items": "The ConversionRules."}
}
