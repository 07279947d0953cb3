package conversion

import (
	"context"
	"fmt"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	rulesv1alpha1 "github.com/crdserver/crdserver/internal/apis/conversionrules/v1alpha1"
	"github.com/crdserver/crdserver/internal/jsonraw"
	"github.com/crdserver/crdserver/internal/schema"
)

// Converter converts encoded objects of one resource between its versions.
type Converter interface {
	// Convert converts objs to the apiVersion to. Objects already in that
	// version come back as they are.
	Convert(ctx context.Context, objs [][]byte, to string) (Result, error)
}

// Result is what a conversion returns.
type Result struct {
	// Objects are the objects in the wanted version, in order.
	Objects [][]byte
	// Changed says which of Objects are new encodings made by the
	// conversion rather than the input as it was (nil: none is).
	Changed []bool
	// answers are the webhook answers Objects hold, when they were taken
	// from or kept in the memo (nil: none).
	answers []*answer
}

// changedAt reports whether Objects[i] was made by the conversion.
func (r Result) changedAt(i int) bool { return r.Changed != nil && r.Changed[i] }

// answerAt is the webhook answer Objects[i] holds, if any.
func (r Result) answerAt(i int) *answer {
	if r.answers == nil {
		return nil
	}
	return r.answers[i]
}

// unchanged is the Result of a conversion that had nothing to do.
func unchanged(objs [][]byte) Result { return Result{Objects: objs} }

// Closer is a converter that holds resources (a webhook's connections).
type Closer interface {
	// Close releases idle resources; conversions in flight may go on.
	Close()
}

// Close closes c if it holds resources.
func Close(c Converter) {
	if cl, ok := c.(Closer); ok {
		cl.Close()
	}
}

// None converts between versions whose schemas hold the same fields by
// changing apiVersion only: Kubernetes' None strategy, and every built-in
// resource's conversion here.
type None struct{}

// Convert implements Converter.
func (None) Convert(_ context.Context, objs [][]byte, to string) (Result, error) {
	res := unchanged(objs)
	for i, o := range objs {
		cur, _, err := jsonraw.String(o, "apiVersion")
		if err != nil {
			return Result{}, err
		}
		if cur == to {
			continue
		}
		if res.Changed == nil {
			res.Objects = append([][]byte(nil), objs...)
			res.Changed = make([]bool, len(objs))
		}
		if res.Objects[i], err = jsonraw.SetString(o, "apiVersion", to); err != nil {
			return Result{}, err
		}
		res.Changed[i] = true
	}
	return res, nil
}

// Failing answers every conversion with the error that kept a CRD's
// converter from being built; objects already in the wanted version pass.
type Failing struct{ Err error }

// Convert implements Converter.
func (f Failing) Convert(_ context.Context, objs [][]byte, to string) (Result, error) {
	for _, o := range objs {
		if av, _, _ := jsonraw.String(o, "apiVersion"); av != to {
			return Result{}, apierrors.NewInternalError(fmt.Errorf("conversion to %s failed: %v", to, f.Err))
		}
	}
	return unchanged(objs), nil
}

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
	// RecheckInterval is how long a webhook's answer for an object is
	// served from the memo before a reader of the object asks the webhook
	// again (default DefaultRecheckInterval); below zero, answers are not
	// kept: every read asks.
	RecheckInterval time.Duration
}

// DefaultRecheckInterval is the default Options.RecheckInterval.
const DefaultRecheckInterval = 10 * time.Second

func (o Options) withDefaults() Options {
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Second
	}
	if o.MaxObjectsPerCall <= 0 {
		o.MaxObjectsPerCall = 1000
	}
	if o.RecheckInterval == 0 {
		o.RecheckInterval = DefaultRecheckInterval
	}
	return o
}

// Strategy returns the converter spec.conversion of a CRD asks for: None,
// or a Webhook.
func Strategy(crd *apiextensionsv1.CustomResourceDefinition, opts Options) (Converter, error) {
	opts = opts.withDefaults()
	if crd.Spec.Conversion == nil {
		return None{}, nil
	}
	switch crd.Spec.Conversion.Strategy {
	case apiextensionsv1.NoneConverter, "":
		return None{}, nil
	case apiextensionsv1.WebhookConverter:
		return newWebhook(crd, opts)
	}
	return nil, fmt.Errorf("unknown conversion strategy %q for CRD %s", crd.Spec.Conversion.Strategy, crd.Name)
}

// ForRules returns the converter of a CRD whose conversion declarative
// rules replace: the rules, with the schemas of its versions around them
// (see WithSchemas). Rules
// that do not compile for the CRD's versions (it changed since they were
// accepted) give a Failing converter and the error.
func ForRules(crd *apiextensionsv1.CustomResourceDefinition, rs rulesv1alpha1.RuleSet, schemas map[string]*schema.Version, schemaRev int64) (Converter, error) {
	var versions []string
	for _, v := range crd.Spec.Versions {
		versions = append(versions, v.Name)
	}
	var inner Converter
	rules, errs := NewRules(rs, crd.Spec.Group, versions)
	err := errs.ToAggregate()
	if err != nil {
		inner = Failing{Err: fmt.Errorf("the conversion rules of %s: %w", crd.Name, err)}
	} else {
		inner = rules
	}
	return &WithSchemas{Inner: inner, Schemas: schemas, SchemaRev: schemaRev, StorageVersion: storageAPIVersion(crd)}, err
}

// storageAPIVersion is the apiVersion a CRD's objects are stored in.
func storageAPIVersion(crd *apiextensionsv1.CustomResourceDefinition) string {
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			return crd.Spec.Group + "/" + v.Name
		}
	}
	return ""
}

// ForCRD returns the converter of a CRD's objects: its strategy, with the
// schemas of its versions around it (see WithSchemas). schemaRev is the
// revision of the CRD write that brought schemas. A strategy that cannot
// be built gives a Failing converter and the error, for the log.
func ForCRD(crd *apiextensionsv1.CustomResourceDefinition, schemas map[string]*schema.Version, schemaRev int64, opts Options) (Converter, error) {
	inner, err := Strategy(crd, opts)
	if err != nil {
		inner = Failing{Err: err}
	}
	return WithStrategy(crd, inner, schemas, schemaRev), err
}

// WithStrategy is ForCRD with the strategy's converter given: one made
// before for the same spec.conversion, group and kind (Strategy) survives
// a change of the CRD's schemas, and so do the answers it gave, which the
// cached objects remember (see Items).
func WithStrategy(crd *apiextensionsv1.CustomResourceDefinition, inner Converter, schemas map[string]*schema.Version, schemaRev int64) Converter {
	return &WithSchemas{Inner: inner, Schemas: schemas, SchemaRev: schemaRev, StorageVersion: storageAPIVersion(crd)}
}
