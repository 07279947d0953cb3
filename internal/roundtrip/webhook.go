package roundtrip

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/crdserver/crdserver/internal/conversion"
	"github.com/crdserver/crdserver/internal/schema"
)

// Webhook converts by calling a conversion webhook directly, the way
// crdserver calls one: ConversionReview apiextensions.k8s.io/v1 requests
// (desiredAPIVersion, the objects) over TLS verified with a CA, the answer
// checked as the server checks it (uid, result, count, apiVersion, kind,
// metadata), then the target version's schema prunes and defaults the
// converted objects, as the server does.
type Webhook struct{ inner conversion.Converter }

// NewWebhook returns the converter of crd's objects through the webhook
// at url (https), whose certificate caPEM (PEM) verifies; without caPEM,
// the system's roots do. crd's own spec.conversion does not matter.
func NewWebhook(crd *apiextensionsv1.CustomResourceDefinition, url string, caPEM []byte, timeout time.Duration) (*Webhook, error) {
	c := crd.DeepCopy()
	c.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{
		Strategy: apiextensionsv1.WebhookConverter,
		Webhook: &apiextensionsv1.WebhookConversion{
			ClientConfig:             &apiextensionsv1.WebhookClientConfig{URL: &url, CABundle: caPEM},
			ConversionReviewVersions: []string{"v1"},
		},
	}
	inner, err := inProcess(c, timeout)
	if err != nil {
		return nil, err
	}
	return &Webhook{inner: inner}, nil
}

// Convert implements Converter.
func (w *Webhook) Convert(ctx context.Context, objs []map[string]any, toAPIVersion string) ([]map[string]any, error) {
	return convertEncoded(ctx, w.inner, objs, toAPIVersion)
}

// Close releases the webhook's idle connections.
func (w *Webhook) Close() { conversion.Close(w.inner) }

// Strategy converts in process as crdserver does with a CRD's own
// spec.conversion: None (apiVersion only) or Webhook (its url, or its
// service reached by its cluster DNS name), then the target version's
// schema prunes and defaults.
type Strategy struct{ inner conversion.Converter }

// NewStrategy returns the converter of crd's own spec.conversion.
func NewStrategy(crd *apiextensionsv1.CustomResourceDefinition, timeout time.Duration) (*Strategy, error) {
	inner, err := inProcess(crd, timeout)
	if err != nil {
		return nil, err
	}
	return &Strategy{inner: inner}, nil
}

// Convert implements Converter.
func (s *Strategy) Convert(ctx context.Context, objs []map[string]any, toAPIVersion string) ([]map[string]any, error) {
	return convertEncoded(ctx, s.inner, objs, toAPIVersion)
}

// Close releases a webhook's idle connections.
func (s *Strategy) Close() { conversion.Close(s.inner) }

// Rules converts with declarative conversion rules in process, as
// crdserver does for a CRD that has ConversionRules: the rules, then the
// target version's schema prunes and defaults.
type Rules struct{ inner conversion.Converter }

// NewRules returns the converter of crd's objects by rules (compiled for
// crd's versions); crd's own spec.conversion does not matter.
func NewRules(crd *apiextensionsv1.CustomResourceDefinition, rules *conversion.Rules) (*Rules, error) {
	schemas, err := versionSchemas(crd)
	if err != nil {
		return nil, err
	}
	return &Rules{inner: &conversion.WithSchemas{Inner: rules, Schemas: schemas}}, nil
}

// Convert implements Converter.
func (r *Rules) Convert(ctx context.Context, objs []map[string]any, toAPIVersion string) ([]map[string]any, error) {
	return convertEncoded(ctx, r.inner, objs, toAPIVersion)
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

// inProcess is crdserver's converter of crd: its strategy followed by the
// schemas of its versions.
func inProcess(crd *apiextensionsv1.CustomResourceDefinition, timeout time.Duration) (conversion.Converter, error) {
	schemas, err := versionSchemas(crd)
	if err != nil {
		return nil, err
	}
	inner, err := conversion.ForCRD(crd, schemas, 0, conversion.Options{Timeout: timeout})
	if err != nil {
		return nil, fmt.Errorf("the conversion of CRD %s: %w", crd.Name, err)
	}
	return inner, nil
}

// convertEncoded converts decoded objects with a converter of encoded
// ones.
func convertEncoded(ctx context.Context, inner conversion.Converter, objs []map[string]any, to string) ([]map[string]any, error) {
	raw := make([][]byte, len(objs))
	for i, o := range objs {
		var err error
		if raw[i], err = json.Marshal(o); err != nil {
			return nil, err
		}
	}
	res, err := inner.Convert(ctx, raw, to)
	if err != nil {
		return nil, err
	}
	out := make([]map[string]any, len(res.Objects))
	for i, b := range res.Objects {
		if err := utiljson.Unmarshal(b, &out[i]); err != nil {
			return nil, fmt.Errorf("converted object %d: %w", i, err)
		}
	}
	return out, nil
}
