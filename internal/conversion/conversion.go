package conversion

import (
	"fmt"
	"time"

	"github.com/crdserver/crdserver/internal/resource"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// Options tune webhook conversion.
type Options struct {
	// ServiceAddresses maps a webhook service (namespace/name:port, see
	// ServiceKey) to the host:port to dial.
	ServiceAddresses map[string]string
	// Timeout bounds one webhook call (default 30 seconds).
	Timeout time.Duration
	// MaxObjectsPerCall bounds the objects in one ConversionReview
	// (default 1000).
	MaxObjectsPerCall int
}

func (o Options) withDefaults() Options {
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Second
	}
	if o.MaxObjectsPerCall <= 0 {
		o.MaxObjectsPerCall = 1000
	}
	return o
}

// ForCRD returns the converter of a CRD's objects.
func ForCRD(crd *apiextensionsv1.CustomResourceDefinition, opts Options) (resource.Converter, error) {
	opts = opts.withDefaults()
	if crd.Spec.Conversion == nil {
		return resource.ApiVersionConverter{}, nil
	}
	switch crd.Spec.Conversion.Strategy {
	case apiextensionsv1.NoneConverter, "":
		return resource.ApiVersionConverter{}, nil
	case apiextensionsv1.WebhookConverter:
		return newWebhook(crd, opts)
	}
	return nil, fmt.Errorf("unknown conversion strategy %q for CRD %s", crd.Spec.Conversion.Strategy, crd.Name)
}
