package schema

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// checkSchemas exercise every rule check decides, and some it leaves to
// Kubernetes' validator.
var checkSchemas = []string{
	`{"type":"object","properties":{"s":{"type":"string","minLength":2,"maxLength":5,"pattern":"^[a-zé]+$"},"e":{"type":"string","enum":["a","b"]},"n":{"type":"string","nullable":true}},"required":["s"]}`,
	`{"type":"object","properties":{"i":{"type":"integer","minimum":-3,"maximum":10,"exclusiveMaximum":true},"j":{"type":"integer","format":"int32","minimum":0},"k":{"type":"integer","format":"int64","multipleOf":3},"f":{"type":"number","minimum":0.5,"maximum":2.5,"exclusiveMinimum":true},"g":{"type":"number","format":"float"},"h":{"type":"integer","maximum":10.5,"exclusiveMaximum":true},"m":{"type":"number","multipleOf":0.1}}}`,
	`{"type":"object","properties":{"l":{"type":"array","minItems":1,"maxItems":3,"items":{"type":"string","maxLength":3}},"o":{"type":"object","minProperties":1,"maxProperties":2,"additionalProperties":{"type":"integer"}},"b":{"type":"boolean"},"p":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}`,
	`{"type":"object","properties":{"ios":{"x-kubernetes-int-or-string":true},"iosp":{"x-kubernetes-int-or-string":true,"anyOf":[{"type":"integer","minimum":1},{"type":"string","pattern":"^[0-9]+%$"}]},"d":{"type":"string","format":"date-time"},"u":{"type":"string","format":"uuid"},"x":{"type":"string","format":"bogus"},"ip":{"type":"string","format":"ipv4"},"q":{"type":"string","format":"byte"}}}`,
	`{"type":"object","properties":{"ne":{"type":"integer","enum":[1,2]},"nn":{"type":"object","nullable":true,"properties":{"a":{"type":"integer"}}},"all":{"type":"integer","allOf":[{"minimum":1}]},"no":{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}}}`,
}

// randomValue makes a value that may or may not fit s: the types JSON
// decoding yields, around the bounds s sets.
func randomValue(r *rand.Rand, s *spec.Schema, depth int) any {
	pick := r.Intn(12)
	switch {
	case pick == 0:
		return nil
	case pick == 1 && depth < 3:
		return map[string]any{"z": randomScalar(r)}
	case pick == 2:
		return randomScalar(r)
	}
	typ := ""
	if s != nil && len(s.Type) > 0 {
		typ = s.Type[r.Intn(len(s.Type))]
	}
	switch typ {
	case "object":
		m := map[string]any{}
		if depth < 4 {
			for name := range s.Properties {
				if r.Intn(4) > 0 {
					p := s.Properties[name]
					m[name] = randomValue(r, &p, depth+1)
				}
			}
			for i := r.Intn(3); i > 0; i-- {
				var a *spec.Schema
				if s.AdditionalProperties != nil {
					a = s.AdditionalProperties.Schema
				}
				m[fmt.Sprintf("k%d", r.Intn(5))] = randomValue(r, a, depth+1)
			}
		}
		return m
	case "array":
		var l []any
		if depth < 4 {
			for i := r.Intn(5); i > 0; i-- {
				var it *spec.Schema
				if s.Items != nil {
					it = s.Items.Schema
				}
				l = append(l, randomValue(r, it, depth+1))
			}
		}
		if l == nil && r.Intn(2) == 0 {
			l = []any{}
		}
		return l
	case "string":
		if len(s.Enum) > 0 && r.Intn(2) == 0 {
			return s.Enum[r.Intn(len(s.Enum))]
		}
		return randomString(r)
	case "integer":
		return randomInt(r, s)
	case "number":
		if r.Intn(2) == 0 {
			return randomInt(r, s)
		}
		return []float64{0.5, 0.6, 1, 2.5, 2.4999, -1.5, 0.3, 1e300}[r.Intn(8)]
	}
	return randomScalar(r)
}

func randomScalar(r *rand.Rand) any {
	switch r.Intn(5) {
	case 0:
		return randomString(r)
	case 1:
		return int64(r.Intn(20) - 5)
	case 2:
		return r.Float64() * 10
	case 3:
		return r.Intn(2) == 0
	}
	return []any{randomString(r)}
}

func randomString(r *rand.Rand) string {
	return []string{"", "a", "ab", "abcde", "abcdef", "éé", "AB", "a b", "2026-11-22T10:00:00Z", "2026-13-22", "6ba7b810-9dad-11d1-80b4-00c04fd430c8", "not-a-uuid", "127.0.0.1", "::1", "50%", "12", "aGVsbG8=", "%%%", "a", "b"}[r.Intn(20)]
}

func randomInt(r *rand.Rand, s *spec.Schema) int64 {
	var near []int64
	for _, b := range []*float64{s.Maximum, s.Minimum, s.MultipleOf} {
		if b != nil {
			near = append(near, int64(*b)-1, int64(*b), int64(*b)+1, int64(*b)*2)
		}
	}
	near = append(near, 0, 1, -1, math.MaxInt32, math.MaxInt32+1, math.MinInt32-1, 1<<53+1, math.MaxInt64)
	return near[r.Intn(len(near))]
}

// TestCheckNeverPassesAnInvalidValue: whatever check calls valid,
// Kubernetes' validator accepts too. It also has to call valid most of
// what is valid, or it would not make validation faster.
func TestCheckNeverPassesAnInvalidValue(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for i, doc := range checkSchemas {
		var v1 apiextensionsv1.JSONSchemaProps
		if err := json.Unmarshal([]byte(doc), &v1); err != nil {
			t.Fatal(err)
		}
		var internal apiextensions.JSONSchemaProps
		if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(&v1, &internal, nil); err != nil {
			t.Fatal(err)
		}
		validator, openapi, err := apiservervalidation.NewSchemaValidator(&internal)
		if err != nil {
			t.Fatal(err)
		}
		c := newCheck(openapi)
		fast, valid := 0, 0
		for n := 0; n < 20000; n++ {
			val := randomValue(r, openapi, 0)
			errs := apiservervalidation.ValidateCustomResource(nil, val, validator)
			if len(errs) == 0 {
				valid++
			}
			if c.valid(val) {
				fast++
				if len(errs) != 0 {
					b, _ := json.Marshal(val)
					t.Fatalf("schema %d: check passes %s (%#v), Kubernetes says %v", i, b, val, errs)
				}
			}
		}
		t.Logf("schema %d: %d of %d valid values decided fast", i, fast, valid)
		if valid > 100 && fast < valid/4 {
			t.Errorf("schema %d: only %d of %d valid values decided fast", i, fast, valid)
		}
	}
	// The rules check leaves alone are left alone.
	for _, doc := range []string{`{"allOf":[{"minimum":1}]}`, `{"type":"array","uniqueItems":true}`} {
		var s spec.Schema
		if err := json.Unmarshal([]byte(doc), &s); err != nil {
			t.Fatal(err)
		}
		if newCheck(&s).valid(int64(5)) || newCheck(&s).valid([]any{}) {
			t.Errorf("%s decided", doc)
		}
	}
}
