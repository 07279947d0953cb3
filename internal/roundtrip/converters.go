package roundtrip

import (
	"fmt"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/crdserver/crdserver/internal/conversion"
	"github.com/crdserver/crdserver/internal/schema"
)

// The converters a round trip runs in process are crdserver's own
// (conversion.Converter), made for a CRD as the server makes them: its
// strategy or rules, then the target version's schema prunes and
// defaults the converted objects. Close them with conversion.Close.

// NewWebhook returns the converter of crd's objects through the webhook
// at url (https), whose certificate caPEM (PEM) verifies; without caPEM,
// the system's roots do. It calls the webhook the way crdserver calls one:
// ConversionReview apiextensions.k8s.io/v1 requests, the answer checked as
// the server checks it (uid, result, count, apiVersion, kind, metadata).
// crd's own spec.conversion does not matter.
func NewWebhook(crd *apiextensionsv1.CustomResourceDefinition, url string, caPEM []byte, timeout time.Duration) (conversion.Converter, error) {
	c := crd.DeepCopy()
	c.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{
		Strategy: apiextensionsv1.WebhookConverter,
		Webhook: &apiextensionsv1.WebhookConversion{
			ClientConfig:             &apiextensionsv1.WebhookClientConfig{URL: &url, CABundle: caPEM},
			ConversionReviewVersions: []string{"v1"},
		},
	}
	return NewStrategy(c, timeout)
}

// NewStrategy returns the converter of crd's own spec.conversion, as
// crdserver converts with it: None (apiVersion only) or Webhook (its url,
// or its service reached by its cluster DNS name).
func NewStrategy(crd *apiextensionsv1.CustomResourceDefinition, timeout time.Duration) (conversion.Converter, error) {
	schemas, err := versionSchemas(crd)
	if err != nil {
		return nil, err
	}
	conv, err := conversion.ForCRD(crd, schemas, 0, conversion.Options{Timeout: timeout})
	if err != nil {
		return nil, fmt.Errorf("the conversion of CRD %s: %w", crd.Name, err)
	}
	return conv, nil
}

// NewRules returns the converter of crd's objects by declarative rules
// (compiled for crd's versions), as crdserver converts for a CRD that has
// ConversionRules; crd's own spec.conversion does not matter.
func NewRules(crd *apiextensionsv1.CustomResourceDefinition, rules *conversion.Rules) (conversion.Converter, error) {
	schemas, err := versionSchemas(crd)
	if err != nil {
		return nil, err
	}
	return &conversion.WithSchemas{Inner: rules, Schemas: schemas}, nil
}

// versionSchemas compiles the schema of each of crd's versions, by
// apiVersion.
func versionSchemas(crd *apiextensionsv1.CustomResourceDefinition) (map[string]*schema.Version, error) {
	schemas := map[string]*schema.Version{}
	for _, v := range crd.Spec.Versions {
		compiled, err := schema.Compile(crd, v.Name)
		if err != nil {
			return nil, err
		}
		schemas[crd.Spec.Group+"/"+v.Name] = compiled
	}
	return schemas, nil
}
