package evolution

import (
	"reflect"
	"sync"

	"github.com/google/cel-go/cel"
	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiserver/pkg/cel/environment"
)

// Constraints on fields new at their place.
//
// A stored object, read with the old schema, has only the fields that
// schema lists at a node (unknown ones are pruned), unless the node keeps
// unknown fields or is a map. A new CEL rule or combinator on an existing
// node that only looks at properties the old schema did not list sees, on
// every stored object, those properties absent: whether it holds for one
// stored object it holds for all, and it is decided on an object without
// them.

// newFieldsOnly returns the test "is this property name new at the node",
// or nil when stored objects may hold properties the old schema does not
// list there.
func newFieldsOnly(o, n *apiextensionsv1.JSONSchemaProps, root bool) func(string) bool {
	if o.Type != "object" || n.Type != "object" || isTrue(o.XPreserveUnknownFields) || o.XEmbeddedResource {
		return nil
	}
	if a := o.AdditionalProperties; a != nil && (a.Allows || a.Schema != nil) {
		return nil
	}
	return func(name string) bool {
		if root && isMetaField(name) {
			return false // every object has them
		}
		_, ok := o.Properties[name]
		return !ok
	}
}

// onlyNewFields reports whether the subschemas ss (of a combinator of the
// node) look only at properties new at the node: they hold nothing but
// properties and required of new names, and combinators of such.
func onlyNewFields(o, n *apiextensionsv1.JSONSchemaProps, root bool, ss ...apiextensionsv1.JSONSchemaProps) bool {
	isNew := newFieldsOnly(o, n, root)
	if isNew == nil {
		return false
	}
	var only func(s *apiextensionsv1.JSONSchemaProps) bool
	only = func(s *apiextensionsv1.JSONSchemaProps) bool {
		c := s.DeepCopy()
		stripDocs(c)
		for _, r := range c.Required {
			if !isNew(r) {
				return false
			}
		}
		for name := range c.Properties {
			if !isNew(name) {
				return false
			}
		}
		for _, list := range [][]apiextensionsv1.JSONSchemaProps{c.AllOf, c.AnyOf, c.OneOf} {
			for i := range list {
				if !only(&list[i]) {
					return false
				}
			}
		}
		if c.Not != nil && !only(c.Not) {
			return false
		}
		c.Required, c.Properties, c.AllOf, c.AnyOf, c.OneOf, c.Not = nil, nil, nil, nil, nil, nil
		if c.Type == "object" {
			c.Type = ""
		}
		return reflect.DeepEqual(*c, apiextensionsv1.JSONSchemaProps{})
	}
	for i := range ss {
		if !only(&ss[i]) {
			return false
		}
	}
	return true
}

// passesWithout reports whether an object without the properties s looks
// at passes s (s holds only properties, required and combinators, as
// onlyNewFields checks): the properties' own schemas do not apply to
// absent properties.
func passesWithout(s *apiextensionsv1.JSONSchemaProps) bool {
	if len(s.Required) > 0 {
		return false
	}
	for i := range s.AllOf {
		if !passesWithout(&s.AllOf[i]) {
			return false
		}
	}
	if len(s.AnyOf) > 0 {
		some := false
		for i := range s.AnyOf {
			some = some || passesWithout(&s.AnyOf[i])
		}
		if !some {
			return false
		}
	}
	if len(s.OneOf) > 0 {
		count := 0
		for i := range s.OneOf {
			if passesWithout(&s.OneOf[i]) {
				count++
			}
		}
		if count != 1 {
			return false
		}
	}
	return s.Not == nil || !passesWithout(s.Not)
}

// celEnv is Kubernetes' CEL environment for stored rules, with self of
// any type.
var celEnv = sync.OnceValues(func() (*cel.Env, error) {
	base := environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()).StoredExpressionsEnv()
	return base.Extend(cel.Variable("self", cel.DynType))
})

// celCostLimit bounds the evaluation of a rule on an empty object.
const celCostLimit = 1_000_000

// celOnlyNewFields reports whether a CEL rule of the node holds on every
// stored object: it reads self only as self.x, has(self.x) or self.?x (no
// oldSelf, nothing else of self), and it evaluates to true on an object
// without the properties new at the node whatever the values of the
// others (those are left unknown: a rule such as
// "!(has(self.cors) && self.type != 'CORS')", cors new, holds however
// type is set).
func celOnlyNewFields(rule string, o, n *apiextensionsv1.JSONSchemaProps, root bool) bool {
	isNew := newFieldsOnly(o, n, root)
	if isNew == nil {
		return false
	}
	env, err := celEnv()
	if err != nil {
		return false
	}
	ast, iss := env.Compile(rule)
	if iss.Err() != nil {
		return false
	}
	names, ok := selfFields(ast.NativeRep().Expr())
	if !ok {
		return false
	}
	var unknown []*cel.AttributePatternType
	for _, name := range names {
		if !isNew(name) {
			unknown = append(unknown, cel.AttributePattern("self").QualString(name))
		}
	}
	prg, err := env.Program(ast, cel.CostLimit(celCostLimit), cel.EvalOptions(cel.OptPartialEval))
	if err != nil {
		return false
	}
	vars, err := cel.PartialVars(map[string]any{"self": map[string]any{}}, unknown...)
	if err != nil {
		return false
	}
	out, _, err := prg.Eval(vars)
	return err == nil && out == types.True
}

// selfFields returns the property names an expression selects on self,
// and false if it uses self in any other way or uses oldSelf.
func selfFields(e celast.Expr) ([]string, bool) {
	var names []string
	ok := true
	var walk func(e celast.Expr)
	walk = func(e celast.Expr) {
		if !ok || e == nil {
			return
		}
		switch e.Kind() {
		case celast.IdentKind:
			// self or oldSelf other than as the operand of a selection.
			if name := e.AsIdent(); name == "self" || name == "oldSelf" {
				ok = false
			}
		case celast.SelectKind:
			sel := e.AsSelect()
			if op := sel.Operand(); op.Kind() == celast.IdentKind && op.AsIdent() == "self" {
				names = append(names, sel.FieldName())
				return
			}
			walk(sel.Operand())
		case celast.CallKind:
			call := e.AsCall()
			args := call.Args()
			if call.FunctionName() == operators.OptSelect && len(args) == 2 &&
				args[0].Kind() == celast.IdentKind && args[0].AsIdent() == "self" && args[1].Kind() == celast.LiteralKind {
				if s, isString := args[1].AsLiteral().Value().(string); isString {
					names = append(names, s)
					return
				}
			}
			if call.IsMemberFunction() {
				walk(call.Target())
			}
			for _, a := range args {
				walk(a)
			}
		case celast.ListKind:
			for _, x := range e.AsList().Elements() {
				walk(x)
			}
		case celast.MapKind:
			for _, x := range e.AsMap().Entries() {
				walk(x.AsMapEntry().Key())
				walk(x.AsMapEntry().Value())
			}
		case celast.StructKind:
			for _, x := range e.AsStruct().Fields() {
				walk(x.AsStructField().Value())
			}
		case celast.ComprehensionKind:
			c := e.AsComprehension()
			walk(c.IterRange())
			walk(c.AccuInit())
			walk(c.LoopCondition())
			walk(c.LoopStep())
			walk(c.Result())
		}
	}
	walk(e)
	return names, ok
}
