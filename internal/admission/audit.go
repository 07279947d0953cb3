package admission

import (
	"context"

	"k8s.io/apiserver/pkg/admission"
	auditinternal "k8s.io/apiserver/pkg/apis/audit"
	"k8s.io/apiserver/pkg/audit"
)

// AuditAnnotations returns the audit annotations the plugins added to attrs
// (made by admission.NewAttributesRecord) that an audit event of level
// records: a policy's auditAnnotations (<policy>/<key>), its Audit
// validation failures (validation.policy.admission.k8s.io/validation_failure),
// a webhook's auditAnnotations (<webhook>/<key>), which mutating webhooks
// ran and whether they changed the object (mutation.webhook.admission.k8s.io/...),
// and at level Request and above their patches (patch.webhook.admission.k8s.io/...).
// Call it after each phase, with the attributes of that phase, whether
// admission admitted or not.
func AuditAnnotations(attrs admission.Attributes, level auditinternal.Level) map[string]string {
	// Kubernetes hands the annotations of admission attributes only to its
	// own audit context, through admission.WithAudit: give it one to fill.
	ctx := audit.WithAuditContext(context.Background())
	ac := audit.AuditContextFrom(ctx)
	if err := ac.Init(audit.RequestAuditConfig{Level: level}, nil); err != nil {
		return nil
	}
	if err := admission.WithAudit(annotationReader{}).(admission.ValidationInterface).Validate(ctx, attrs, nil); err != nil {
		return nil
	}
	return ac.GetEventAnnotations()
}

// annotationReader is a validating plugin that does nothing, for
// admission.WithAudit to read the annotations of the attributes around it.
type annotationReader struct{}

func (annotationReader) Handles(admission.Operation) bool { return true }

func (annotationReader) Validate(context.Context, admission.Attributes, admission.ObjectInterfaces) error {
	return nil
}
