package v1alpha1

// The types of the spec are published in OpenAPI under the names they had
// when they lived in internal/conversion (kube-openapi names a type
// without OpenAPIModelName by its Go package path): moving them did not
// rename their definitions.
const specModelPrefix = "github.com/crdserver/crdserver/internal/conversion."

// OpenAPIModelName names the type in OpenAPI documents.
func (RuleSet) OpenAPIModelName() string { return specModelPrefix + "RuleSet" }

// OpenAPIModelName names the type in OpenAPI documents.
func (VersionRules) OpenAPIModelName() string { return specModelPrefix + "VersionRules" }

// OpenAPIModelName names the type in OpenAPI documents.
func (Rule) OpenAPIModelName() string { return specModelPrefix + "Rule" }

// OpenAPIModelName names the type in OpenAPI documents.
func (RenameRule) OpenAPIModelName() string { return specModelPrefix + "RenameRule" }

// OpenAPIModelName names the type in OpenAPI documents.
func (MapValuesRule) OpenAPIModelName() string { return specModelPrefix + "MapValuesRule" }

// OpenAPIModelName names the type in OpenAPI documents.
func (SplitRule) OpenAPIModelName() string { return specModelPrefix + "SplitRule" }

// OpenAPIModelName names the type in OpenAPI documents.
func (JoinRule) OpenAPIModelName() string { return specModelPrefix + "JoinRule" }

// OpenAPIModelName names the type in OpenAPI documents.
func (WrapRule) OpenAPIModelName() string { return specModelPrefix + "WrapRule" }

// OpenAPIModelName names the type in OpenAPI documents.
func (DefaultRule) OpenAPIModelName() string { return specModelPrefix + "DefaultRule" }

// OpenAPIModelName names the type in OpenAPI documents.
func (PathRule) OpenAPIModelName() string { return specModelPrefix + "PathRule" }

// OpenAPIModelName names the type in OpenAPI documents.
func (AnnotationRule) OpenAPIModelName() string { return specModelPrefix + "AnnotationRule" }

// OpenAPIModelName names the type in OpenAPI documents.
func (CELRule) OpenAPIModelName() string { return specModelPrefix + "CELRule" }
