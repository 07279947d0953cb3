package admissionregistration

import (
	"fmt"
	"regexp"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating/patch"
	validatingpolicy "k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/environment"
)

// The CEL expressions of webhooks and policies are compiled, as
// Kubernetes compiles them when it validates the objects, by
// k8s.io/apiserver's admission CEL compiler: the same environments
// (object, oldObject, request, params, namespaceObject, authorizer,
// variables, the patch types), the same type checks of the result and the
// same errors. An expression already in the stored object is compiled in
// the environment of stored expressions, so that an update never fails on
// what was accepted before.

// statelessCompiler compiles expressions that cannot name variables
// (match conditions, and the expressions of policies without variables).
var statelessCompiler = sync.OnceValue(func() plugincel.Compiler {
	return plugincel.NewCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
})

// newCompiler is the compiler of one policy: one that compiles and keeps
// its variables, for the expressions that follow them, when it has any.
func newCompiler(variables bool) plugincel.Compiler {
	if !variables {
		return statelessCompiler()
	}
	return compositionCompiler()
}

// compositionCompiler compiles and keeps variables for the expressions
// that follow them.
func compositionCompiler() plugincel.Compiler {
	c, err := plugincel.NewCompositedCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
	if err != nil {
		return plugincel.NewCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
	}
	return c
}

// envType is the environment an expression compiles in: that of stored
// expressions for one the object already had.
func envType(stored sets.Set[string], expression string) environment.Type {
	if stored.Has(expression) {
		return environment.StoredExpressions
	}
	return environment.NewExpressions
}

// celError is a compilation error as a field error, worded as Kubernetes
// words it.
func celError(p *field.Path, expression string, err error) *field.Error {
	if e, ok := err.(*apiservercel.Error); ok {
		switch e.Type {
		case apiservercel.ErrorTypeRequired:
			return field.Required(p, e.Detail)
		case apiservercel.ErrorTypeInvalid:
			return field.Invalid(p, expression, e.Detail)
		case apiservercel.ErrorTypeInternal:
			return field.InternalError(p, e)
		}
	}
	return field.InternalError(p, fmt.Errorf("unsupported error type: %w", err))
}

// compile compiles one expression and returns its error, if any.
func compile(c plugincel.Compiler, p *field.Path, accessor plugincel.ExpressionAccessor, shown string, decls plugincel.OptionalVariableDeclarations, env environment.Type) field.ErrorList {
	if r := c.CompileCELExpression(accessor, decls, env); r.Error != nil {
		return field.ErrorList{celError(p, shown, r.Error)}
	}
	return nil
}

// compileMatchCondition checks a match condition's expression (trimmed).
func compileMatchCondition(p *field.Path, expression string, params bool, stored sets.Set[string]) field.ErrorList {
	return compile(statelessCompiler(), p, &matchconditions.MatchCondition{Expression: expression}, expression,
		plugincel.OptionalVariableDeclarations{HasParams: params, HasAuthorizer: true}, envType(stored, expression))
}

// compileValidation checks a validation's expression.
func compileValidation(c plugincel.Compiler, p *field.Path, expression string, params bool, stored sets.Set[string]) field.ErrorList {
	return compile(c, p, &validatingpolicy.ValidationCondition{Expression: expression}, expression,
		plugincel.OptionalVariableDeclarations{HasParams: params, HasAuthorizer: true}, envType(stored, expression))
}

// compileMessageExpression checks a validation's messageExpression: it has
// no authorizer.
func compileMessageExpression(c plugincel.Compiler, p *field.Path, expression string, params bool, stored sets.Set[string]) field.ErrorList {
	return compile(c, p, &validatingpolicy.MessageExpressionCondition{MessageExpression: expression}, expression,
		plugincel.OptionalVariableDeclarations{HasParams: params}, envType(stored, expression))
}

// compileAuditAnnotation checks an audit annotation's valueExpression
// (compiled trimmed, shown as written).
func compileAuditAnnotation(c plugincel.Compiler, p *field.Path, trimmed, written string, params bool, stored sets.Set[string]) field.ErrorList {
	return compile(c, p, &validatingpolicy.AuditAnnotationCondition{ValueExpression: trimmed}, written,
		plugincel.OptionalVariableDeclarations{HasParams: params, HasAuthorizer: true}, envType(stored, written))
}

// compileApplyConfiguration checks a mutation's applyConfiguration
// expression (trimmed).
func compileApplyConfiguration(c plugincel.Compiler, p *field.Path, trimmed, written string, params bool, stored sets.Set[string]) field.ErrorList {
	return compile(c, p, &patch.ApplyConfigurationCondition{Expression: trimmed}, trimmed,
		plugincel.OptionalVariableDeclarations{HasParams: params, HasAuthorizer: true, HasPatchTypes: true}, envType(stored, written))
}

// compileJSONPatch checks a mutation's jsonPatch expression (trimmed).
func compileJSONPatch(c plugincel.Compiler, p *field.Path, trimmed, written string, params bool, stored sets.Set[string]) field.ErrorList {
	return compile(c, p, &patch.JSONPatchCondition{Expression: trimmed}, trimmed,
		plugincel.OptionalVariableDeclarations{HasParams: params, HasAuthorizer: true, HasPatchTypes: true}, envType(stored, written))
}

// compileVariable compiles a variable and keeps it for the expressions
// that follow; a compiler without composition cannot.
func compileVariable(c plugincel.Compiler, p *field.Path, name, expression string, params bool, stored sets.Set[string]) field.ErrorList {
	cc, ok := c.(*plugincel.CompositedCompiler)
	if !ok {
		return field.ErrorList{field.InternalError(p, fmt.Errorf("variable composition is not allowed"))}
	}
	v := &validatingpolicy.Variable{Name: name, Expression: expression}
	r := cc.CompileAndStoreVariable(v, plugincel.OptionalVariableDeclarations{HasParams: params, HasAuthorizer: true}, envType(stored, expression))
	if r.Error != nil {
		return field.ErrorList{celError(p.Child("expression"), expression, r.Error)}
	}
	return nil
}

var celIdentifier = regexp.MustCompile(`^[_a-zA-Z][_a-zA-Z0-9]*$`)

// celReserved are CEL's reserved words, which no identifier may be.
var celReserved = []string{"true", "false", "null", "in", "as", "break", "const", "continue", "else",
	"for", "function", "if", "import", "let", "loop", "package", "namespace", "return", "var", "void", "while"}

// isCELIdentifier says whether a variable name is a CEL identifier.
func isCELIdentifier(name string) bool {
	return celIdentifier.MatchString(name) && !slices.Contains(celReserved, name)
}
