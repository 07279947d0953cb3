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

// decodedConverter is a Converter that can hand over the objects it
// converts decoded, which saves WithSchemas encoding and decoding them
// again.
type decodedConverter interface {
	// convertDecoded converts objs to the apiVersion to; an object it
	// left as it was is nil in the answer.
	convertDecoded(ctx context.Context, objs [][]byte, to string) ([]map[string]any, error)
}

// decodeObject decodes an encoded object as Kubernetes' decoder does
// (integers as int64), the quick way when it can.
func decodeObject(raw []byte) (map[string]any, error) {
	if m, ok := jsonraw.Decode(raw); ok {
		return m, nil
	}
	var m map[string]any
	if err := utiljson.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	return m, nil
}

// Convert implements Converter.
func (s *WithSchemas) Convert(ctx context.Context, objs [][]byte, to string) (Result, error) {
	v := s.Schemas[to]
	dc, decoded := s.Inner.(decodedConverter)
	if v == nil || !decoded {
		res, err := s.Inner.Convert(ctx, objs, to)
		if err != nil || v == nil {
			return res, err
		}
		return s.apply(v, objs, res.Objects, res.Changed, nil)
	}
	maps, err := dc.convertDecoded(ctx, objs, to)
	if err != nil {
		return Result{}, err
	}
	return s.apply(v, objs, objs, nil, maps)
}

// apply runs v over the converted objects out (changed says which the
// inner converter changed; maps holds them decoded, when it can) and over
// those stored before the schema last changed.
func (s *WithSchemas) apply(v *schema.Version, objs, out [][]byte, changed []bool, maps []map[string]any) (Result, error) {
	res := Result{Objects: out, Changed: changed}
	copied := false
	for i := range res.Objects {
		var m map[string]any
		if maps != nil {
			m = maps[i]
		}
		if m == nil && !res.changedAt(i) {
			rv, _ := jsonraw.ResourceVersion(objs[i])
			if rv == 0 || rv > s.SchemaRev {
				continue
			}
		}
		if m == nil {
			var err error
			if m, err = decodeObject(res.Objects[i]); err != nil {
				return Result{}, apierrors.NewInternalError(err)
			}
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
