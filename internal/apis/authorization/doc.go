// Package authorization holds the built-in review APIs, which store
// nothing and answer who the caller is and what someone may do:
// authentication.k8s.io/v1 SelfSubjectReview, and authorization.k8s.io/v1
// SelfSubjectAccessReview, SubjectAccessReview, LocalSubjectAccessReview
// and SelfSubjectRulesReview.
package authorization
