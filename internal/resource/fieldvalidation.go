package resource

import (
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/crdserver/crdserver/internal/request"
)

// Coercer brings a decoded request body in line with the schema of its
// version: it drops unknown fields (returning their paths when track is
// set) and applies defaults. Custom resources have one per CRD version.
type Coercer interface {
	Coerce(content map[string]any, track bool) ([]string, error)
}

// fieldValidation reads the fieldValidation query parameter: Strict, Warn
// (the default) or Ignore. optionsKind names the options in errors
// (CreateOptions, UpdateOptions, PatchOptions).
func (c *call) fieldValidation(optionsKind string) (string, error) {
	v := c.r.URL.Query().Get("fieldValidation")
	switch v {
	case "":
		return metav1.FieldValidationWarn, nil
	case metav1.FieldValidationIgnore, metav1.FieldValidationWarn, metav1.FieldValidationStrict:
		return v, nil
	}
	return "", apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: optionsKind}, "",
		field.ErrorList{field.NotSupported(field.NewPath("fieldValidation"), v, []string{"", metav1.FieldValidationIgnore, metav1.FieldValidationStrict, metav1.FieldValidationWarn})})
}

// strictness collects what field validation reports about one body.
type strictness struct {
	directive string
	errs      []error
	// decodeError words a body that does not decode into the object
	// (metadata of the wrong shape); nil: as a create or update body.
	decodeError func(error) error
}

// add records unknown field paths and other strict errors.
func (s *strictness) add(unknown []string, errs []error) {
	for _, p := range unknown {
		s.errs = append(s.errs, fmt.Errorf("unknown field %q", p))
	}
	s.errs = append(s.errs, errs...)
}

// report applies the directive: warnings under Warn; under Strict the
// error strict returns (nil when there is nothing to report).
func (s *strictness) report(c *call, strict func(error) error) error {
	if len(s.errs) == 0 {
		return nil
	}
	switch s.directive {
	case metav1.FieldValidationWarn:
		for _, e := range s.errs {
			request.AddWarning(c.w, e.Error())
		}
	case metav1.FieldValidationStrict:
		return strict(runtime.NewStrictDecodingError(s.errs))
	}
	return nil
}

// bodyStrictError is how a create or update body fails strict field
// validation: 400, as Kubernetes' decoder words it.
func (c *call) bodyStrictError(err error) error {
	return apierrors.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: %v", c.res.Kind, c.ver.Name, c.res.Kind, err))
}

// patchStrictError is how a patched object fails strict field validation:
// 422 on the field "patch".
func patchStrictError(patched []byte, err error) error {
	return apierrors.NewInvalid(schema.GroupKind{}, "", field.ErrorList{field.Invalid(field.NewPath("patch"), string(patched), err.Error())})
}

// coerce runs the resource's schema over a decoded body and records the
// unknown fields.
func (c *call) coerce(content map[string]any, s *strictness) error {
	co, ok := c.res.Strategy.(Coercer)
	if !ok {
		return nil
	}
	unknown, err := co.Coerce(content, s.directive != metav1.FieldValidationIgnore)
	if err != nil {
		return apierrors.NewBadRequest(err.Error())
	}
	s.add(unknown, nil)
	return nil
}
