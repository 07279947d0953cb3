package request

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/crdserver/crdserver/internal/jsonraw"
)

// MaxBodyBytes is the largest request body accepted, as in kube-apiserver.
const MaxBodyBytes = 3 * 1024 * 1024

// Patch types.
const (
	JSONPatch           = "application/json-patch+json"
	MergePatch          = "application/merge-patch+json"
	StrategicMergePatch = "application/strategic-merge-patch+json"
	ApplyPatch          = "application/apply-patch+yaml"
)

// ReadBody reads the whole request body, refusing more than MaxBodyBytes
// with 413.
func ReadBody(r *http.Request) ([]byte, error) {
	if r.Body == nil {
		return nil, nil
	}
	if r.ContentLength > MaxBodyBytes {
		return nil, tooLarge()
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, MaxBodyBytes+1))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, tooLarge()
		}
		return nil, apierrors.NewBadRequest(fmt.Sprintf("unable to read request body: %v", err))
	}
	if len(b) > MaxBodyBytes {
		return nil, tooLarge()
	}
	return b, nil
}

func tooLarge() error {
	return NewStatusError(http.StatusRequestEntityTooLarge, metav1.StatusReasonRequestEntityTooLarge,
		fmt.Sprintf("Request entity too large: limit is %d", MaxBodyBytes))
}

// MediaType returns the media type of the request body, without parameters.
func MediaType(r *http.Request) string {
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return "application/json"
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return strings.ToLower(strings.TrimSpace(strings.SplitN(ct, ";", 2)[0]))
	}
	return mt
}

// UnsupportedMediaType is the 415 for a body in a format not accepted.
func UnsupportedMediaType(accepted string) error {
	return NewStatusError(http.StatusUnsupportedMediaType, metav1.StatusReasonUnsupportedMediaType,
		"the body of the request was in an unknown format - accepted media types include: "+accepted)
}

// ToJSON returns a body in JSON, converting YAML; other media types get
// 415.
func ToJSON(body []byte, mediaType, kind string) ([]byte, error) {
	switch mediaType {
	case "application/json":
		return body, nil
	case "application/yaml":
		j, err := yaml.YAMLToJSON(body)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("the object provided is unrecognized (must be of type %s): %v (%x)", kind, err, snippet(body)))
		}
		return j, nil
	}
	return nil, UnsupportedMediaType(Accepted)
}

// DecodeObject decodes a request body (JSON or YAML) into an object.
// Integers decode as int64, as in Kubernetes' unstructured objects.
func DecodeObject(body []byte, mediaType, kind string) (map[string]any, error) {
	obj, _, err := DecodeObjectStrict(body, mediaType, kind)
	return obj, err
}

// DecodeObjectStrict decodes like DecodeObject and also returns the strict
// decoding errors (duplicate fields) that field validation reports.
func DecodeObjectStrict(body []byte, mediaType, kind string) (map[string]any, []error, error) {
	j, err := ToJSON(body, mediaType, kind)
	if err != nil {
		return nil, nil, err
	}
	if obj, ok := jsonraw.Decode(j); ok {
		return obj, nil, nil
	}
	var obj map[string]any
	strict, err := kjson.UnmarshalStrict(j, &obj, kjson.DisallowDuplicateFields)
	if err != nil || obj == nil {
		if err == nil {
			err = errors.New("the body is not a JSON object")
		}
		return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("the object provided is unrecognized (must be of type %s): couldn't get version/kind; json parse error: %v (%s)", kind, err, snippet(j)))
	}
	return obj, strict, nil
}

func snippet(b []byte) []byte {
	if len(b) > 50 {
		return b[:50]
	}
	return b
}
