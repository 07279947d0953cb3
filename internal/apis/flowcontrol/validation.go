package flowcontrol

import (
	"fmt"
	"slices"
	"strings"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	flowcontrolv1beta3 "k8s.io/api/flowcontrol/v1beta3"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/apis/flowcontrol/bootstrap"
	"k8s.io/apiserver/pkg/util/shufflesharding"
)

// Validation follows Kubernetes' (k8s.io/kubernetes/pkg/apis/flowcontrol/
// validation, which cannot be imported) to the message, with its
// declarative rules (the type discriminators and required fields) as
// kube-apiserver 1.37 runs them: their errors come after the others and
// carry no detail. Values in messages render as Kubernetes' internal
// types do (goValue).

// flowSchemaMaxMatchingPrecedence is the highest matchingPrecedence.
const flowSchemaMaxMatchingPrecedence int32 = 10000

// maxQueues bounds a priority level's queues.
const maxQueues int32 = 10 * 1000 * 1000

var (
	supportedDistinguisherMethods = []string{string(flowcontrolv1.FlowDistinguisherMethodByNamespaceType), string(flowcontrolv1.FlowDistinguisherMethodByUserType)}
	supportedVerbs                = []string{"create", "delete", "deletecollection", "get", "list", "patch", "proxy", "update", "watch"}
	supportedSubjectKinds         = []string{string(flowcontrolv1.SubjectKindGroup), string(flowcontrolv1.SubjectKindServiceAccount), string(flowcontrolv1.SubjectKindUser)}
	supportedEnablements          = []string{string(flowcontrolv1.PriorityLevelEnablementExempt), string(flowcontrolv1.PriorityLevelEnablementLimited)}
	supportedLimitResponseTypes   = []string{string(flowcontrolv1.LimitResponseTypeQueue), string(flowcontrolv1.LimitResponseTypeReject)}
)

// mandatoryFlowSchemas and mandatoryPriorityLevels are the mandatory
// objects, defaulted: their specs may not change.
var (
	mandatoryFlowSchemas    = map[string]*flowcontrolv1.FlowSchema{}
	mandatoryPriorityLevels = map[string]*flowcontrolv1.PriorityLevelConfiguration{}
)

func init() {
	for _, fs := range bootstrap.MandatoryFlowSchemas {
		fs = fs.DeepCopy()
		DefaultFlowSchema(fs)
		mandatoryFlowSchemas[fs.Name] = fs
	}
	for _, pl := range bootstrap.MandatoryPriorityLevelConfigurations {
		pl = pl.DeepCopy()
		DefaultPriorityLevel(pl)
		mandatoryPriorityLevels[pl.Name] = pl
	}
}

// ValidateFlowSchema checks a FlowSchema.
func ValidateFlowSchema(fs *flowcontrolv1.FlowSchema) field.ErrorList {
	specPath := field.NewPath("spec")
	errs := validateFlowSchemaSpec(fs.Name, &fs.Spec, specPath)
	if mand, ok := mandatoryFlowSchemas[fs.Name]; ok && !apiequality.Semantic.DeepEqual(fs.Spec, mand.Spec) {
		errs = append(errs, field.Invalid(specPath, goValue{fs.Spec}, fmt.Sprintf("spec of '%s' must equal the fixed value", fs.Name)))
	}
	return append(errs, validateFlowSchemaStatus(&fs.Status, field.NewPath("status"))...)
}

func validateFlowSchemaSpec(name string, spec *flowcontrolv1.FlowSchemaSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if spec.MatchingPrecedence <= 0 {
		errs = append(errs, field.Invalid(p.Child("matchingPrecedence"), spec.MatchingPrecedence, "must be a positive value"))
	}
	if spec.MatchingPrecedence > flowSchemaMaxMatchingPrecedence {
		errs = append(errs, field.Invalid(p.Child("matchingPrecedence"), spec.MatchingPrecedence, fmt.Sprintf("must not be greater than %v", flowSchemaMaxMatchingPrecedence)))
	}
	if spec.MatchingPrecedence == 1 && name != flowcontrolv1.FlowSchemaNameExempt {
		errs = append(errs, field.Invalid(p.Child("matchingPrecedence"), spec.MatchingPrecedence, "only the schema named 'exempt' may have matchingPrecedence 1"))
	}
	if dm := spec.DistinguisherMethod; dm != nil && !slices.Contains(supportedDistinguisherMethods, string(dm.Type)) {
		errs = append(errs, field.NotSupported(p.Child("distinguisherMethod").Child("type"), goValue{dm}, supportedDistinguisherMethods))
	}
	plName := p.Child("priorityLevelConfiguration").Child("name")
	if n := spec.PriorityLevelConfiguration.Name; n != "" {
		for _, msg := range apimachineryvalidation.NameIsDNSSubdomain(n, false) {
			errs = append(errs, field.Invalid(plName, n, msg))
		}
	} else {
		errs = append(errs, field.Required(plName, "must reference a priority level"))
	}
	for i := range spec.Rules {
		errs = append(errs, validateRule(&spec.Rules[i], p.Child("rules").Index(i))...)
	}
	return errs
}

func validateRule(rule *flowcontrolv1.PolicyRulesWithSubjects, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(rule.Subjects) == 0 {
		errs = append(errs, field.Required(p.Child("subjects"), "subjects must contain at least one value"))
	}
	for i := range rule.Subjects {
		errs = append(errs, validateSubject(&rule.Subjects[i], p.Child("subjects").Index(i))...)
	}
	if len(rule.ResourceRules) == 0 && len(rule.NonResourceRules) == 0 {
		errs = append(errs, field.Required(p, "at least one of resourceRules and nonResourceRules has to be non-empty"))
	}
	for i := range rule.ResourceRules {
		errs = append(errs, validateResourceRule(&rule.ResourceRules[i], p.Child("resourceRules").Index(i))...)
	}
	for i := range rule.NonResourceRules {
		errs = append(errs, validateNonResourceRule(&rule.NonResourceRules[i], p.Child("nonResourceRules").Index(i))...)
	}
	return errs
}

func validateSubject(s *flowcontrolv1.Subject, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	notUser := field.Forbidden(p.Child("user"), "user is forbidden when subject kind is not 'User'")
	notGroup := field.Forbidden(p.Child("group"), "group is forbidden when subject kind is not 'Group'")
	notSA := field.Forbidden(p.Child("serviceAccount"), "serviceAccount is forbidden when subject kind is not 'ServiceAccount'")
	switch s.Kind {
	case flowcontrolv1.SubjectKindServiceAccount:
		errs = append(errs, validateServiceAccountSubject(s.ServiceAccount, p.Child("serviceAccount"))...)
		if s.User != nil {
			errs = append(errs, notUser)
		}
		if s.Group != nil {
			errs = append(errs, notGroup)
		}
	case flowcontrolv1.SubjectKindUser:
		if s.User == nil {
			errs = append(errs, field.Required(p.Child("user"), "user is required when subject kind is 'User'"))
		} else if s.User.Name == "" {
			errs = append(errs, field.Required(p.Child("user").Child("name"), ""))
		}
		if s.ServiceAccount != nil {
			errs = append(errs, notSA)
		}
		if s.Group != nil {
			errs = append(errs, notGroup)
		}
	case flowcontrolv1.SubjectKindGroup:
		if s.Group == nil {
			errs = append(errs, field.Required(p.Child("group"), "group is required when subject kind is 'Group'"))
		} else if s.Group.Name == "" {
			errs = append(errs, field.Required(p.Child("group").Child("name"), ""))
		}
		if s.ServiceAccount != nil {
			errs = append(errs, notSA)
		}
		if s.User != nil {
			errs = append(errs, notUser)
		}
	default:
		errs = append(errs, field.NotSupported(p.Child("kind"), s.Kind, supportedSubjectKinds))
	}
	return errs
}

func validateServiceAccountSubject(s *flowcontrolv1.ServiceAccountSubject, p *field.Path) field.ErrorList {
	if s == nil {
		return field.ErrorList{field.Required(p, "serviceAccount is required when subject kind is 'ServiceAccount'")}
	}
	var errs field.ErrorList
	if s.Name == "" {
		errs = append(errs, field.Required(p.Child("name"), ""))
	} else if s.Name != flowcontrolv1.NameAll {
		for _, msg := range apimachineryvalidation.ValidateServiceAccountName(s.Name, false) {
			errs = append(errs, field.Invalid(p.Child("name"), s.Name, msg))
		}
	}
	if s.Namespace != "" {
		for _, msg := range apimachineryvalidation.ValidateNamespaceName(s.Namespace, false) {
			errs = append(errs, field.Invalid(p.Child("namespace"), s.Namespace, msg))
		}
	} else {
		errs = append(errs, field.Required(p.Child("namespace"), "must specify namespace for service account"))
	}
	return errs
}

// validateVerbs checks the verbs of a rule.
func validateVerbs(verbs []string, p *field.Path) field.ErrorList {
	switch {
	case len(verbs) == 0:
		return field.ErrorList{field.Required(p, "verbs must contain at least one value")}
	case slices.Contains(verbs, "*"):
		if len(verbs) > 1 {
			return field.ErrorList{field.Invalid(p, verbs, "if '*' is present, must not specify other verbs")}
		}
	default:
		for _, v := range verbs {
			if !slices.Contains(supportedVerbs, v) {
				return field.ErrorList{field.NotSupported(p, verbs, supportedVerbs)}
			}
		}
	}
	return nil
}

const nsErrIntro = "each member of this list must be '*' or a DNS-1123 label; "

func validateResourceRule(rule *flowcontrolv1.ResourcePolicyRule, p *field.Path) field.ErrorList {
	errs := validateVerbs(rule.Verbs, p.Child("verbs"))
	if len(rule.APIGroups) == 0 {
		errs = append(errs, field.Required(p.Child("apiGroups"), "resource rules must supply at least one api group"))
	} else if len(rule.APIGroups) > 1 && slices.Contains(rule.APIGroups, "*") {
		errs = append(errs, field.Invalid(p.Child("apiGroups"), rule.APIGroups, "if '*' is present, must not specify other api groups"))
	}
	if len(rule.Resources) == 0 {
		errs = append(errs, field.Required(p.Child("resources"), "resource rules must supply at least one resource"))
	} else if len(rule.Resources) > 1 && slices.Contains(rule.Resources, "*") {
		errs = append(errs, field.Invalid(p.Child("resources"), rule.Resources, "if '*' is present, must not specify other resources"))
	}
	switch {
	case len(rule.Namespaces) == 0 && !rule.ClusterScope:
		errs = append(errs, field.Required(p.Child("namespaces"), "resource rules that are not cluster scoped must supply at least one namespace"))
	case slices.Contains(rule.Namespaces, "*"):
		if len(rule.Namespaces) > 1 {
			errs = append(errs, field.Invalid(p.Child("namespaces"), rule.Namespaces, "if '*' is present, must not specify other namespaces"))
		}
	default:
		for i, ns := range rule.Namespaces {
			for _, msg := range apimachineryvalidation.ValidateNamespaceName(ns, false) {
				errs = append(errs, field.Invalid(p.Child("namespaces").Index(i), ns, nsErrIntro+msg))
			}
		}
	}
	return errs
}

func validateNonResourceRule(rule *flowcontrolv1.NonResourcePolicyRule, p *field.Path) field.ErrorList {
	errs := validateVerbs(rule.Verbs, p.Child("verbs"))
	urls := p.Child("nonResourceURLs")
	switch {
	case len(rule.NonResourceURLs) == 0:
		errs = append(errs, field.Required(urls, "nonResourceURLs must contain at least one value"))
	case slices.Contains(rule.NonResourceURLs, "*"):
		if len(rule.NonResourceURLs) > 1 {
			errs = append(errs, field.Invalid(urls, rule.NonResourceURLs, "if '*' is present, must not specify other non-resource URLs"))
		}
	default:
		for i, u := range rule.NonResourceURLs {
			if err := validateNonResourceURL(u, urls.Index(i)); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errs
}

// validateNonResourceURL checks a path: leading slash, no white space,
// no double slash, a wildcard only as the last segment.
func validateNonResourceURL(path string, p *field.Path) *field.Error {
	switch {
	case path == "":
		return field.Invalid(p, path, "must not be empty")
	case path == "/":
		return nil
	case !strings.HasPrefix(path, "/"):
		return field.Invalid(p, path, "must start with slash")
	case strings.Contains(path, " "):
		return field.Invalid(p, path, "must not contain white-space")
	case strings.Contains(path, "//"):
		return field.Invalid(p, path, "must not contain double slash")
	}
	if n := strings.Count(path, "*"); n > 1 || (n == 1 && path[len(path)-2:] != "/*") {
		return field.Invalid(p, path, "wildcard can only do suffix matching")
	}
	return nil
}

func validateFlowSchemaStatus(st *flowcontrolv1.FlowSchemaStatus, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := map[flowcontrolv1.FlowSchemaConditionType]bool{}
	for i, c := range st.Conditions {
		cp := p.Child("conditions").Index(i)
		if seen[c.Type] {
			errs = append(errs, field.Duplicate(cp.Child("type"), c.Type))
		}
		seen[c.Type] = true
		if c.Type == "" {
			errs = append(errs, field.Required(cp.Child("type"), ""))
		}
	}
	return errs
}

func validatePriorityLevelStatus(st *flowcontrolv1.PriorityLevelConfigurationStatus, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := map[flowcontrolv1.PriorityLevelConfigurationConditionType]bool{}
	for i, c := range st.Conditions {
		cp := p.Child("conditions").Index(i)
		if seen[c.Type] {
			errs = append(errs, field.Duplicate(cp.Child("type"), c.Type))
		}
		seen[c.Type] = true
		if c.Type == "" {
			errs = append(errs, field.Required(cp.Child("type"), ""))
		}
	}
	return errs
}

// ValidatePriorityLevel checks a PriorityLevelConfiguration.
func ValidatePriorityLevel(pl *flowcontrolv1.PriorityLevelConfiguration) field.ErrorList {
	var errs field.ErrorList
	if _, ok := pl.Annotations[flowcontrolv1beta3.PriorityLevelPreserveZeroConcurrencySharesKey]; ok {
		errs = append(errs, field.Forbidden(field.NewPath("metadata").Child("annotations"),
			fmt.Sprintf("annotation '%s' is forbidden", flowcontrolv1beta3.PriorityLevelPreserveZeroConcurrencySharesKey)))
	}
	specPath := field.NewPath("spec")
	errs = append(errs, validatePriorityLevelSpec(&pl.Spec, pl.Name, specPath)...)
	errs = append(errs, validateMandatoryPriorityLevel(pl, specPath)...)
	errs = append(errs, validatePriorityLevelStatus(&pl.Status, field.NewPath("status"))...)
	return append(errs, declarativePriorityLevelSpec(&pl.Spec, specPath)...)
}

func validateMandatoryPriorityLevel(pl *flowcontrolv1.PriorityLevelConfiguration, p *field.Path) field.ErrorList {
	mand, ok := mandatoryPriorityLevels[pl.Name]
	if !ok {
		return nil
	}
	if pl.Name == flowcontrolv1.PriorityLevelConfigurationNameExempt {
		// Only spec.exempt of the exempt level may change.
		have := pl.Spec.DeepCopy()
		have.Exempt = mand.Spec.Exempt
		if !apiequality.Semantic.DeepEqual(&mand.Spec, have) {
			return field.ErrorList{field.Invalid(p, goValue{pl.Spec}, fmt.Sprintf("spec of '%s' except the 'spec.exempt' field must equal the fixed value", pl.Name))}
		}
		return nil
	}
	if !apiequality.Semantic.DeepEqual(pl.Spec, mand.Spec) {
		return field.ErrorList{field.Invalid(p, goValue{pl.Spec}, fmt.Sprintf("spec of '%s' must equal the fixed value", pl.Name))}
	}
	return nil
}

// validatePriorityLevelSpec has Kubernetes' handwritten rules but those
// the declarative ones cover.
func validatePriorityLevelSpec(spec *flowcontrolv1.PriorityLevelConfigurationSpec, name string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if (name == flowcontrolv1.PriorityLevelConfigurationNameExempt) != (spec.Type == flowcontrolv1.PriorityLevelEnablementExempt) {
		errs = append(errs, field.Invalid(p.Child("type"), spec.Type, "must be 'Exempt' if and only if `name` is 'exempt'"))
	}
	switch spec.Type {
	case flowcontrolv1.PriorityLevelEnablementExempt:
		if e := spec.Exempt; e != nil {
			ep := p.Child("exempt")
			if e.NominalConcurrencyShares != nil && *e.NominalConcurrencyShares < 0 {
				errs = append(errs, field.Invalid(ep.Child("nominalConcurrencyShares"), *e.NominalConcurrencyShares, "must be a non-negative integer"))
			}
			if e.LendablePercent != nil && (*e.LendablePercent < 0 || *e.LendablePercent > 100) {
				errs = append(errs, field.Invalid(ep.Child("lendablePercent"), *e.LendablePercent, "must be between 0 and 100, inclusive"))
			}
		}
	case flowcontrolv1.PriorityLevelEnablementLimited:
		if spec.Limited != nil {
			errs = append(errs, validateLimited(spec.Limited, p.Child("limited"))...)
		}
	default:
		if spec.Type != "" {
			errs = append(errs, field.NotSupported(p.Child("type"), spec.Type, supportedEnablements))
		}
	}
	return errs
}

func validateLimited(l *flowcontrolv1.LimitedPriorityLevelConfiguration, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if l.NominalConcurrencyShares != nil && *l.NominalConcurrencyShares < 0 {
		errs = append(errs, field.Invalid(p.Child("nominalConcurrencyShares"), *l.NominalConcurrencyShares, "must be a non-negative integer"))
	}
	lr := l.LimitResponse
	switch lr.Type {
	case flowcontrolv1.LimitResponseTypeReject:
	case flowcontrolv1.LimitResponseTypeQueue:
		if lr.Queuing != nil {
			errs = append(errs, validateQueuing(lr.Queuing, p.Child("limitResponse").Child("queuing"))...)
		}
	default:
		if lr.Type != "" {
			errs = append(errs, field.NotSupported(p.Child("limitResponse").Child("type"), lr.Type, supportedLimitResponseTypes))
		}
	}
	if l.LendablePercent != nil && (*l.LendablePercent < 0 || *l.LendablePercent > 100) {
		errs = append(errs, field.Invalid(p.Child("lendablePercent"), *l.LendablePercent, "must be between 0 and 100, inclusive"))
	}
	if l.BorrowingLimitPercent != nil && *l.BorrowingLimitPercent < 0 {
		errs = append(errs, field.Invalid(p.Child("borrowingLimitPercent"), *l.BorrowingLimitPercent, "if specified, must be a non-negative integer"))
	}
	return errs
}

func validateQueuing(q *flowcontrolv1.QueuingConfiguration, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if q.QueueLengthLimit <= 0 {
		errs = append(errs, field.Invalid(p.Child("queueLengthLimit"), q.QueueLengthLimit, "must be positive"))
	}
	if q.Queues <= 0 {
		errs = append(errs, field.Invalid(p.Child("queues"), q.Queues, "must be positive"))
	} else if q.Queues > maxQueues {
		errs = append(errs, field.Invalid(p.Child("queues"), q.Queues, fmt.Sprintf("must not be greater than %d", maxQueues)))
	}
	switch {
	case q.HandSize <= 0:
		errs = append(errs, field.Invalid(p.Child("handSize"), q.HandSize, "must be positive"))
	case q.HandSize > q.Queues:
		errs = append(errs, field.Invalid(p.Child("handSize"), q.HandSize, fmt.Sprintf("should not be greater than queues (%d)", q.Queues)))
	default:
		if entropy := shufflesharding.RequiredEntropyBits(int(q.Queues), int(q.HandSize)); entropy > shufflesharding.MaxHashBits {
			errs = append(errs, field.Invalid(p.Child("handSize"), q.HandSize,
				fmt.Sprintf("required entropy bits of deckSize %d and handSize %d should not be greater than %d", q.Queues, q.HandSize, shufflesharding.MaxHashBits)))
		}
	}
	return errs
}

// declarativePriorityLevelSpec are Kubernetes' declarative rules: each of
// exempt and limited only with its type, limited required with its type,
// the type required; within limited, queuing only (and required) with the
// Queue response, whose type is required.
func declarativePriorityLevelSpec(spec *flowcontrolv1.PriorityLevelConfigurationSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if spec.Exempt != nil && spec.Type != flowcontrolv1.PriorityLevelEnablementExempt {
		errs = append(errs, field.Forbidden(p.Child("exempt"), ""))
	}
	switch {
	case spec.Limited != nil && spec.Type != flowcontrolv1.PriorityLevelEnablementLimited:
		errs = append(errs, field.Forbidden(p.Child("limited"), ""))
	case spec.Limited == nil && spec.Type == flowcontrolv1.PriorityLevelEnablementLimited:
		errs = append(errs, field.Required(p.Child("limited"), ""))
	}
	if spec.Type == "" {
		errs = append(errs, field.Required(p.Child("type"), ""))
	}
	if spec.Limited == nil {
		return errs
	}
	lr, lp := spec.Limited.LimitResponse, p.Child("limited").Child("limitResponse")
	switch {
	case lr.Queuing != nil && lr.Type != flowcontrolv1.LimitResponseTypeQueue:
		errs = append(errs, field.Forbidden(lp.Child("queuing"), ""))
	case lr.Queuing == nil && lr.Type == flowcontrolv1.LimitResponseTypeQueue:
		errs = append(errs, field.Required(lp.Child("queuing"), ""))
	}
	if lr.Type == "" {
		errs = append(errs, field.Required(lp.Child("type"), ""))
	}
	return errs
}
