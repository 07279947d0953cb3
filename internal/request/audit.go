package request

import (
	"context"
	"sync"

	authnv1 "k8s.io/api/authentication/v1"
)

// AuditContext collects, while a request is served, what its audit event
// records besides the request itself: annotations (the authorization
// decision, ...) and the user it impersonated.
type AuditContext struct {
	// Level is the audit level the request is logged at (Metadata,
	// Request, RequestResponse).
	Level string

	mu           sync.Mutex
	annotations  map[string]string
	impersonated *authnv1.UserInfo
}

type auditKey struct{}

// WithAuditContext returns a context that collects audit details in ac.
func WithAuditContext(ctx context.Context, ac *AuditContext) context.Context {
	return context.WithValue(ctx, auditKey{}, ac)
}

func auditContext(ctx context.Context) *AuditContext {
	ac, _ := ctx.Value(auditKey{}).(*AuditContext)
	return ac
}

// AuditLevel returns the level the request is audited at, "" when it is
// not audited.
func AuditLevel(ctx context.Context) string {
	if ac := auditContext(ctx); ac != nil {
		return ac.Level
	}
	return ""
}

// AddAuditAnnotation records an annotation of the request's audit event
// (nothing when the request is not audited).
func AddAuditAnnotation(ctx context.Context, key, value string) {
	if ac := auditContext(ctx); ac != nil {
		ac.mu.Lock()
		defer ac.mu.Unlock()
		if ac.annotations == nil {
			ac.annotations = map[string]string{}
		}
		ac.annotations[key] = value
	}
}

// SetImpersonatedUser records whom the request impersonates.
func SetImpersonatedUser(ctx context.Context, u *authnv1.UserInfo) {
	if ac := auditContext(ctx); ac != nil {
		ac.mu.Lock()
		defer ac.mu.Unlock()
		ac.impersonated = u
	}
}

// Annotations returns the collected annotations.
func (ac *AuditContext) Annotations() map[string]string {
	ac.mu.Lock()
	defer ac.mu.Unlock()
	out := make(map[string]string, len(ac.annotations))
	for k, v := range ac.annotations {
		out[k] = v
	}
	return out
}

// ImpersonatedUser returns the impersonated user, if any.
func (ac *AuditContext) ImpersonatedUser() *authnv1.UserInfo {
	ac.mu.Lock()
	defer ac.mu.Unlock()
	return ac.impersonated
}
