package v1alpha1

import (
	"reflect"
	"testing"

	"k8s.io/kube-openapi/pkg/util"
)

// The spec's types keep the OpenAPI definition names reflection gave them
// in internal/conversion: its package path and their Go names.
func TestSpecModelNames(t *testing.T) {
	for _, v := range []any{RuleSet{}, VersionRules{}, Rule{}, RenameRule{}, MapValuesRule{}, SplitRule{}, JoinRule{},
		WrapRule{}, DefaultRule{}, PathRule{}, AnnotationRule{}, CELRule{}} {
		want := "github.com/crdserver/crdserver/internal/conversion." + reflect.TypeOf(v).Name()
		if got := util.GetCanonicalTypeName(v); got != want {
			t.Errorf("%s, want %s", got, want)
		}
	}
}
