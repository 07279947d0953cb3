package conversion

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"k8s.io/apimachinery/pkg/util/version"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/cel/environment"
)

// celEnv is Kubernetes' CEL environment (the libraries CRD validation rules
// have) with the object being converted as self.
var celEnv = sync.OnceValues(func() (*cel.Env, error) {
	envSet, err := environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()).Extend(environment.VersionedOptions{
		IntroducedVersion: version.MajorMinor(1, 0),
		EnvOptions:        []cel.EnvOption{cel.Variable("self", cel.DynType)},
	})
	if err != nil {
		return nil, err
	}
	return envSet.Env(environment.NewExpressions)
})

// compileCEL compiles an expression, checked against Kubernetes' cost
// limit for one call.
func compileCEL(expr string) (cel.Program, error) {
	env, err := celEnv()
	if err != nil {
		return nil, err
	}
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		return nil, iss.Err()
	}
	return env.Program(ast, cel.CostLimit(celconfig.PerCallLimit), cel.InterruptCheckFrequency(celconfig.CheckFrequency))
}

type celStep struct {
	path []string
	prog cel.Program
}

func (s celStep) apply(obj map[string]any) error {
	out, _, err := s.prog.Eval(map[string]any{"self": celInput(obj)})
	if err != nil {
		return fmt.Errorf("cel rule for .%s: %w", strings.Join(s.path, "."), err)
	}
	v, err := celOutput(out)
	if err != nil {
		return fmt.Errorf("cel rule for .%s: %w", strings.Join(s.path, "."), err)
	}
	if v == nil {
		del(obj, s.path)
		return nil
	}
	return set(obj, s.path, v)
}

func (s celStep) inverse() step { return nil }

// celInput turns decoded JSON into values CEL takes: json.Number becomes
// an int64 or a float64.
func celInput(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, x := range t {
			out[k] = celInput(x)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = celInput(x)
		}
		return out
	case json.Number:
		if i, err := t.Int64(); err == nil {
			return i
		}
		f, _ := t.Float64()
		return f
	}
	return v
}

// celOutput turns a CEL value into JSON values (null removes the field).
func celOutput(v ref.Val) (any, error) {
	switch v.Type() {
	case types.NullType:
		return nil, nil
	case types.BoolType, types.IntType, types.UintType, types.DoubleType, types.StringType:
		switch n := v.Value().(type) {
		case int64:
			return json.Number(fmt.Sprint(n)), nil
		case uint64:
			return json.Number(fmt.Sprint(n)), nil
		case float64:
			b, err := json.Marshal(n)
			return json.Number(b), err
		}
		return v.Value(), nil
	case types.ListType:
		l := v.(traits.Lister)
		var out []any
		for it := l.Iterator(); it.HasNext() == types.True; {
			x, err := celOutput(it.Next())
			if err != nil {
				return nil, err
			}
			out = append(out, x)
		}
		if out == nil {
			out = []any{}
		}
		return out, nil
	case types.MapType:
		m := v.(traits.Mapper)
		out := map[string]any{}
		for it := m.Iterator(); it.HasNext() == types.True; {
			k := it.Next()
			ks, ok := k.Value().(string)
			if !ok {
				return nil, fmt.Errorf("a map key of type %s", k.Type())
			}
			x, err := celOutput(m.Get(k))
			if err != nil {
				return nil, err
			}
			out[ks] = x
		}
		return out, nil
	}
	if native, err := v.ConvertToNative(reflect.TypeOf("")); err == nil {
		return native, nil
	}
	return nil, fmt.Errorf("a value of type %s", v.Type())
}
