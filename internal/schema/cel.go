package schema

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/interpreter"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	apiextcel "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel/model"
	"k8s.io/apiextensions-apiserver/pkg/features"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/common"
	"k8s.io/apiserver/pkg/cel/environment"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/apiserver/pkg/warning"
)

// celNode holds the compiled x-kubernetes-validations of one schema node
// and the nodes below it that have some. The rules are compiled with the
// upstream compiler (environment, libraries, cost estimates) and run here
// with the semantics of Kubernetes' CRD validator (messages, budgets,
// transition rules, ratcheting), over values whose schema is built once
// (celSchema) rather than on every field access.
type celNode struct {
	typ        string        // the node's type, for error values
	self       common.Schema // what self is typed with
	scalar     bool          // neither object nor array: errors carry the value
	rules      []apiextensionsv1.ValidationRule
	compiled   []apiextcel.CompilationResult
	compileErr error
	oldSelf    bool // some rule uses oldSelf
	mapType    *string
	listSchema common.Schema // for map-list correlation of items

	items      *celNode
	additional *celNode
	properties []namedCELNode // sorted by name
	allOf      []*celNode
}

type namedCELNode struct {
	name string
	node *celNode
}

// newCELNode compiles the rules of validation (a node of the schema, or
// one of its allOf) for the node node, whose CEL type is declType. It
// returns nil when neither holds rules.
func newCELNode(validation, node *structuralschema.Structural, sch *celSchema, resourceRoot bool, declType *apiservercel.DeclType, envSet *environment.EnvSet) *celNode {
	if validation == nil {
		return nil
	}
	n := &celNode{typ: node.Type, rules: validation.XValidations, mapType: node.XMapType, listSchema: sch}
	n.scalar = node.Type != "object" && node.Type != "array"
	n.self = common.Schema(sch)
	if resourceRoot {
		n.self = sch.WithTypeAndObjectMeta()
	}
	if len(validation.XValidations) > 0 {
		compiling := *node
		compiling.XValidations = validation.XValidations
		n.compiled, n.compileErr = apiextcel.Compile(&compiling, declType, celconfig.PerCallLimit, envSet, apiextcel.StoredExpressionsEnvLoader())
		for _, c := range n.compiled {
			n.oldSelf = n.oldSelf || c.UsesOldSelf
		}
	}
	var elem *apiservercel.DeclType
	if declType != nil {
		elem = declType.ElemType
	}
	if validation.Items != nil && node.Items != nil {
		n.items = newCELNode(validation.Items, node.Items, sch.items.(*celSchema), node.Items.XEmbeddedResource, elem, envSet)
	}
	for name, vp := range validation.Properties {
		np, ok := node.Properties[name]
		if !ok {
			continue
		}
		var fieldType *apiservercel.DeclType
		if escaped, ok := apiservercel.Escape(name); ok {
			if declType == nil {
				continue
			}
			f, ok := declType.Fields[escaped]
			if !ok {
				continue // fields of unknown type are not validated
			}
			fieldType = f.Type
		} else if fieldType = model.SchemaDeclType(&np, np.XEmbeddedResource); fieldType == nil {
			continue
		}
		vp := vp
		if c := newCELNode(&vp, &np, sch.properties[name].(*celSchema), np.XEmbeddedResource, fieldType, envSet); c != nil {
			n.properties = append(n.properties, namedCELNode{name, c})
		}
	}
	sort.Slice(n.properties, func(i, j int) bool { return n.properties[i].name < n.properties[j].name })
	if va, na := validation.AdditionalProperties, node.AdditionalProperties; va != nil && va.Structural != nil && na != nil && na.Structural != nil {
		n.additional = newCELNode(va.Structural, na.Structural, sch.additional.(*celSchemaOrBool).schema, na.Structural.XEmbeddedResource, elem, envSet)
	}
	if validation.ValueValidation != nil {
		for i := range validation.ValueValidation.AllOf {
			if c := newCELNode(nestedStructural(&validation.ValueValidation.AllOf[i]), node, sch, resourceRoot, declType, envSet); c != nil {
				n.allOf = append(n.allOf, c)
			}
		}
	}
	if len(n.compiled) == 0 && n.compileErr == nil && n.items == nil && n.additional == nil && len(n.properties) == 0 && len(n.allOf) == 0 {
		return nil
	}
	return n
}

// nestedStructural turns an allOf member into a schema whose rules
// newCELNode can read.
func nestedStructural(v *structuralschema.NestedValueValidation) *structuralschema.Structural {
	if v == nil {
		return nil
	}
	s := &structuralschema.Structural{
		ValueValidation:      &v.ValueValidation,
		ValidationExtensions: v.ValidationExtensions,
		Generic:              v.ForbiddenGenerics,
		Extensions:           v.ForbiddenExtensions,
		Items:                nestedStructural(v.Items),
	}
	if len(v.Properties) > 0 {
		s.Properties = make(map[string]structuralschema.Structural, len(v.Properties))
		for k := range v.Properties {
			p := v.Properties[k]
			s.Properties[k] = *nestedStructural(&p)
		}
	}
	if v.AdditionalProperties != nil {
		s.AdditionalProperties = &structuralschema.StructuralOrBool{Structural: nestedStructural(v.AdditionalProperties)}
	}
	return s
}

// ratchet follows the correlation of new and old values down the tree:
// an error on a value that the update leaves as it was (or below a
// correlatable ancestor that is unchanged) is only a warning.
type ratchet struct {
	current, parent *common.CorrelatedObject
}

func (r ratchet) unchanged() bool {
	if r.current != nil {
		return r.current.CachedDeepEqual()
	}
	return r.parent.CachedDeepEqual()
}

func (r ratchet) key(k string) ratchet {
	if r.current == nil {
		return r
	}
	if r.parent == nil && (k == "apiVersion" || k == "kind") {
		return ratchet{}
	}
	return ratchet{current: r.current.Key(k), parent: r.current}
}

func (r ratchet) index(i int) ratchet {
	if r.current == nil {
		return r
	}
	return ratchet{current: r.current.Index(i), parent: r.current}
}

// activation resolves self and oldSelf.
type activation struct {
	self, oldSelf ref.Val
	hasOldSelf    bool
}

func (a *activation) ResolveName(name string) (any, bool) {
	switch name {
	case apiextcel.ScopedVarName:
		return a.self, true
	case apiextcel.OldScopedVarName:
		return a.oldSelf, a.hasOldSelf
	}
	return nil, false
}

func (a *activation) Parent() interpreter.Activation { return nil }

const outOfBudget = "validation failed due to running out of cost budget, no further validation rules will be run"

// validate runs the rules of n and below on obj (old: its previous value,
// nil on create). A negative remaining budget means evaluation stopped.
func (n *celNode) validate(ctx context.Context, path *field.Path, obj, old any, r ratchet, budget int64) (field.ErrorList, int64) {
	if n == nil || obj == nil {
		return nil, budget
	}
	errs, budget := n.validateRules(ctx, path, obj, old, r, budget)
	if budget < 0 {
		return errs, budget
	}
	for _, a := range n.allOf {
		var e field.ErrorList
		// allOf errors are not ratcheted, as in schema validation.
		e, budget = a.validate(ctx, path, obj, old, ratchet{parent: r.parent}, budget)
		errs = append(errs, e...)
		if budget < 0 {
			return errs, budget
		}
	}
	switch obj := obj.(type) {
	case map[string]any:
		oldMap, _ := old.(map[string]any)
		correlatable := apiextcel.MapIsCorrelatable(n.mapType)
		if n.additional != nil {
			keys := make([]string, 0, len(obj))
			for k := range obj {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				var oldV any
				if correlatable && oldMap != nil {
					oldV = oldMap[k]
				}
				var e field.ErrorList
				e, budget = n.additional.validate(ctx, path.Key(k), obj[k], oldV, r.key(k), budget)
				errs = append(errs, e...)
				if budget < 0 {
					return errs, budget
				}
			}
		}
		for _, p := range n.properties {
			v, ok := obj[p.name]
			if !ok {
				continue
			}
			var oldV any
			if correlatable && oldMap != nil {
				oldV = oldMap[p.name]
			}
			var e field.ErrorList
			e, budget = p.node.validate(ctx, path.Child(p.name), v, oldV, r.key(p.name), budget)
			errs = append(errs, e...)
			if budget < 0 {
				return errs, budget
			}
		}
	case []any:
		if n.items == nil {
			break
		}
		oldList, _ := old.([]any)
		oldItems := common.MakeMapList(n.listSchema, oldList)
		for i, v := range obj {
			var e field.ErrorList
			e, budget = n.items.validate(ctx, path.Index(i), v, oldItems.Get(v), r.index(i), budget)
			errs = append(errs, e...)
			if budget < 0 {
				return errs, budget
			}
		}
	}
	return errs, budget
}

// isNil reports a missing old value, including typed nils.
func isNil(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case map[string]any:
		return v == nil
	case []any:
		return v == nil
	}
	return false
}

func (n *celNode) validateRules(ctx context.Context, path *field.Path, obj, old any, r ratchet, budget int64) (errs field.ErrorList, remaining int64) {
	if isNil(old) {
		old = nil
	}
	if n.compileErr != nil {
		return field.ErrorList{field.Invalid(path, n.typ, fmt.Sprintf("rule compiler initialization error: %v", n.compileErr))}, budget
	}
	if len(n.compiled) == 0 {
		return nil, budget
	}
	if budget <= 0 {
		return field.ErrorList{field.Invalid(path, n.typ, outOfBudget)}, -1
	}
	act := &activation{self: common.UnstructuredToVal(obj, n.self)}
	optional := act
	if n.oldSelf {
		optional = &activation{self: act.self, hasOldSelf: true, oldSelf: types.OptionalNone}
		if old != nil {
			act.oldSelf, act.hasOldSelf = common.UnstructuredToVal(old, n.self), true
			optional.oldSelf = types.OptionalOf(act.oldSelf)
		}
	}
	for i, compiled := range n.compiled {
		rule := n.rules[i]
		if compiled.Error != nil {
			errs = append(errs, field.Invalid(path, n.typ, fmt.Sprintf("rule compile error: %v", compiled.Error)))
			continue
		}
		if compiled.Program == nil {
			continue // an empty rule
		}
		optionalOldSelf := rule.OptionalOldSelf != nil && *rule.OptionalOldSelf
		if compiled.UsesOldSelf && old == nil {
			// Transition rules need an old value, unless it is optional.
			if !optionalOldSelf || !utilfeature.DefaultFeatureGate.Enabled(features.CRDValidationRatcheting) {
				continue
			}
		}
		ruleAct := act
		if optionalOldSelf {
			ruleAct = optional
		}
		result, details, err := compiled.Program.ContextEval(ctx, ruleAct)
		if details == nil {
			return append(errs, field.InternalError(path, fmt.Errorf("runtime cost could not be calculated for validation rule: %v, no further validation rules will be run", ruleText(rule)))), -1
		}
		cost := details.ActualCost()
		if cost == nil {
			return append(errs, field.Invalid(path, n.typ, fmt.Sprintf("runtime cost could not be calculated for validation rule: %v, no further validation rules will be run", ruleText(rule)))), -1
		}
		if *cost > math.MaxInt64 || int64(*cost) > budget {
			return append(errs, field.Invalid(path, n.typ, outOfBudget)), -1
		}
		budget -= int64(*cost)
		if err != nil {
			msg := err.Error()
			switch {
			case strings.HasPrefix(msg, "no such overload"):
				// Only values typed dynamically (int-or-string) get here.
				errs = append(errs, field.Invalid(path, n.typ, fmt.Sprintf("'%v': call arguments did not match a supported operator, function or macro signature for rule: %v", err, ruleText(rule))))
			case strings.HasPrefix(msg, "operation cancelled: actual cost limit exceeded"):
				return append(errs, field.Invalid(path, n.typ, fmt.Sprintf("'%v': no further validation rules will be run due to call cost exceeds limit for rule: %v", err, ruleText(rule)))), -1
			default:
				errs = append(errs, field.Invalid(path, n.typ, fmt.Sprintf("%v evaluating rule: %v", err, ruleText(rule))))
			}
			continue
		}
		if result == types.True {
			continue
		}
		at := path
		if compiled.NormalizedRuleFieldPath != "" {
			at = at.Child(compiled.NormalizedRuleFieldPath)
		}
		add := func(e *field.Error) {
			if !compiled.UsesOldSelf && r.unchanged() {
				warning.AddWarning(ctx, "", e.Error())
			} else {
				errs = append(errs, e)
			}
		}
		detail, ok := "", false
		if compiled.MessageExpression != nil {
			msg, left, msgErr := messageExpression(ctx, compiled, rule.MessageExpression, act, budget)
			switch {
			case msgErr == nil:
				detail, ok, budget = msg, true, left
			case msgErr.Type == apiservercel.ErrorTypeInternal:
				add(field.InternalError(at, msgErr))
				return errs, -1
			case msgErr.Type == apiservercel.ErrorTypeInvalid:
				add(field.Invalid(at, n.typ, msgErr.Error()))
				return errs, -1
			default:
				budget = left // the rule's message is used instead
			}
		}
		if !ok {
			detail = ruleMessage(rule)
		}
		var value any = field.OmitValueType{}
		if n.scalar {
			value = obj
		}
		add(errorForReason(at, value, detail, rule.Reason))
	}
	return errs, budget
}

// messageExpression evaluates the message of a failed rule.
func messageExpression(ctx context.Context, compiled apiextcel.CompilationResult, src string, act interpreter.Activation, budget int64) (string, int64, *apiservercel.Error) {
	result, details, err := compiled.MessageExpression.ContextEval(ctx, act)
	if details == nil || details.ActualCost() == nil {
		return "", -1, &apiservercel.Error{Type: apiservercel.ErrorTypeInternal, Detail: fmt.Sprintf("runtime cost could not be calculated for messageExpression: %q", src)}
	}
	cost := *details.ActualCost()
	if cost > math.MaxInt64 || int64(cost) > budget {
		return "", -1, &apiservercel.Error{Type: apiservercel.ErrorTypeInvalid, Detail: "messageExpression evaluation failed due to running out of cost budget, no further validation rules will be run"}
	}
	left := budget - int64(cost)
	if err != nil {
		if strings.HasPrefix(err.Error(), "operation cancelled: actual cost limit exceeded") {
			return "", -1, &apiservercel.Error{Type: apiservercel.ErrorTypeInvalid, Detail: fmt.Sprintf("no further validation rules will be run due to call cost exceeds limit for messageExpression: %q", src)}
		}
		return "", left, &apiservercel.Error{Detail: fmt.Sprintf("messageExpression evaluation failed due to: %v", err.Error())}
	}
	s, ok := result.Value().(string)
	if !ok {
		return "", left, &apiservercel.Error{Detail: "messageExpression failed to convert to string"}
	}
	s = strings.TrimSpace(s)
	switch {
	case len(s) > celconfig.MaxEvaluatedMessageExpressionSizeBytes:
		return "", left, &apiservercel.Error{Detail: fmt.Sprintf("messageExpression beyond allowable length of %d", celconfig.MaxEvaluatedMessageExpressionSizeBytes)}
	case strings.Contains(s, "\n"):
		return "", left, &apiservercel.Error{Detail: "messageExpression should not contain line breaks"}
	case s == "":
		return "", left, &apiservercel.Error{Detail: "messageExpression should evaluate to a non-empty string"}
	}
	return s, left, nil
}

func ruleMessage(rule apiextensionsv1.ValidationRule) string {
	if rule.Message == "" {
		return "failed rule: " + ruleText(rule)
	}
	return strings.TrimSpace(rule.Message)
}

func ruleText(rule apiextensionsv1.ValidationRule) string {
	if rule.Message != "" {
		return strings.TrimSpace(rule.Message)
	}
	return strings.TrimSpace(rule.Rule)
}

func errorForReason(path *field.Path, value any, detail string, reason *apiextensionsv1.FieldValueErrorReason) *field.Error {
	if reason == nil {
		return field.Invalid(path, value, detail)
	}
	switch *reason {
	case apiextensionsv1.FieldValueForbidden:
		return field.Forbidden(path, detail)
	case apiextensionsv1.FieldValueRequired:
		return field.Required(path, detail)
	case apiextensionsv1.FieldValueDuplicate:
		return field.Duplicate(path, value)
	}
	return field.Invalid(path, value, detail)
}
