package conversion

import (
	"context"
	"encoding/json"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/crdserver/crdserver/internal/jsonraw"
	"github.com/crdserver/crdserver/internal/schema"
)

// WithSchemas runs the schema of the target version over what Inner
// returns, as Kubernetes does after conversion: unknown fields are pruned
// and defaults applied. Objects that Inner left alone are only processed if
// they were stored before the schema last changed (SchemaRev); newer ones
// were pruned and defaulted when written.
type WithSchemas struct {
	Inner Converter
	// Schemas are the compiled schemas by apiVersion.
	Schemas   map[string]*schema.Version
	SchemaRev int64
}

// Convert implements Converter.
func (s *WithSchemas) Convert(ctx context.Context, objs [][]byte, to string) (Result, error) {
	res, err := s.Inner.Convert(ctx, objs, to)
	if err != nil {
		return Result{}, err
	}
	v := s.Schemas[to]
	if v == nil {
		return res, nil
	}
	copied := false
	for i := range res.Objects {
		if !res.changedAt(i) {
			rv, _ := jsonraw.ResourceVersion(objs[i])
			if rv == 0 || rv > s.SchemaRev {
				continue
			}
		}
		var m map[string]any
		if err := utiljson.Unmarshal(res.Objects[i], &m); err != nil {
			return Result{}, apierrors.NewInternalError(err)
		}
		if err := v.CoerceStored(m); err != nil {
			return Result{}, apierrors.NewInternalError(err)
		}
		v.Default(m)
		b, err := json.Marshal(m)
		if err != nil {
			return Result{}, apierrors.NewInternalError(err)
		}
		if !copied {
			res.Objects = append([][]byte(nil), res.Objects...)
			changed := make([]bool, len(res.Objects))
			copy(changed, res.Changed)
			res.Changed = changed
			copied = true
		}
		res.Objects[i] = b
		res.Changed[i] = true
	}
	return res, nil
}

// Close closes Inner.
func (s *WithSchemas) Close() { Close(s.Inner) }
