package auth

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	authnv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/crdserver/crdserver/internal/request"
)

// Kubernetes' impersonation headers.
const (
	ImpersonateUser        = "Impersonate-User"
	ImpersonateUID         = "Impersonate-Uid"
	ImpersonateGroup       = "Impersonate-Group"
	ImpersonateExtraPrefix = "Impersonate-Extra-"
)

const serviceAccountPrefix = "system:serviceaccount:"

// WithImpersonation acts on the impersonation headers: each user, uid,
// group and extra value asked for must be allowed with the impersonate verb
// (as `kubectl --as` and `--as-group` need); the request then goes on as
// that user.
func WithImpersonation(next http.Handler, z Authorizer) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := r.Header.Get(ImpersonateUser)
		uid := r.Header.Get(ImpersonateUID)
		groups := r.Header.Values(ImpersonateGroup)
		extra := map[string][]string{}
		for h, vals := range r.Header {
			if strings.HasPrefix(h, ImpersonateExtraPrefix) {
				key, err := url.PathUnescape(strings.ToLower(h[len(ImpersonateExtraPrefix):]))
				if err != nil {
					request.WriteError(w, r, apierrors.NewBadRequest(fmt.Sprintf("malformed extra key for impersonation request %q", h)))
					return
				}
				extra[key] = append(extra[key], vals...)
			}
		}
		if name == "" && uid == "" && len(groups) == 0 && len(extra) == 0 {
			next.ServeHTTP(w, r)
			return
		}
		if name == "" {
			request.WriteError(w, r, apierrors.NewBadRequest(fmt.Sprintf("requested %s without impersonating a user", describe(uid, groups, extra))))
			return
		}
		actor, _ := UserFrom(r.Context())
		check := func(a authorizer.AttributesRecord) bool {
			a.User, a.Verb, a.ResourceRequest = actor, "impersonate", true
			d, reason, _ := z.Authorize(r.Context(), a)
			if d != authorizer.DecisionAllow {
				request.WriteError(w, r, Forbidden(a, reason))
				return false
			}
			return true
		}
		as := &user.DefaultInfo{Name: name, UID: uid}
		if ns, sa, ok := strings.Cut(strings.TrimPrefix(name, serviceAccountPrefix), ":"); ok && strings.HasPrefix(name, serviceAccountPrefix) {
			if !check(authorizer.AttributesRecord{Namespace: ns, Resource: "serviceaccounts", Name: sa}) {
				return
			}
			as.Groups = append(as.Groups, "system:serviceaccounts", "system:serviceaccounts:"+ns)
		} else if !check(authorizer.AttributesRecord{Resource: "users", Name: name}) {
			return
		}
		if uid != "" && !check(authorizer.AttributesRecord{APIGroup: "authentication.k8s.io", Resource: "uids", Name: uid}) {
			return
		}
		for _, g := range groups {
			if !check(authorizer.AttributesRecord{Resource: "groups", Name: g}) {
				return
			}
			as.Groups = append(as.Groups, g)
		}
		keys := make([]string, 0, len(extra))
		for k := range extra {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			for _, v := range extra[k] {
				if !check(authorizer.AttributesRecord{APIGroup: "authentication.k8s.io", Resource: "userextras", Subresource: k, Name: v}) {
					return
				}
			}
		}
		if len(extra) > 0 {
			as.Extra = extra
		}
		implied := user.AllAuthenticated
		if name == user.Anonymous {
			implied = user.AllUnauthenticated
		}
		if !slices.Contains(as.Groups, implied) {
			as.Groups = append(as.Groups, implied)
		}
		r.Header.Del(ImpersonateUser)
		r.Header.Del(ImpersonateUID)
		r.Header.Del(ImpersonateGroup)
		for h := range r.Header {
			if strings.HasPrefix(h, ImpersonateExtraPrefix) {
				r.Header.Del(h)
			}
		}
		info := &authnv1.UserInfo{Username: as.Name, UID: as.UID, Groups: as.Groups}
		if len(as.Extra) > 0 {
			info.Extra = map[string]authnv1.ExtraValue{}
			for k, v := range as.Extra {
				info.Extra[k] = v
			}
		}
		request.SetImpersonatedUser(r.Context(), info)
		ctx := WithUser(r.Context(), as)
		ctx = withImpersonator(ctx, actor)
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

func describe(uid string, groups []string, extra map[string][]string) string {
	var parts []string
	if uid != "" {
		parts = append(parts, "uid "+uid)
	}
	for _, g := range groups {
		parts = append(parts, "group "+g)
	}
	for k, vs := range extra {
		for _, v := range vs {
			parts = append(parts, "extra "+k+"="+v)
		}
	}
	return strings.Join(parts, ", ")
}

type impersonatorKey struct{}

func withImpersonator(ctx context.Context, u user.Info) context.Context {
	return context.WithValue(ctx, impersonatorKey{}, u)
}

// ImpersonatorFrom returns who made an impersonated request.
func ImpersonatorFrom(ctx context.Context) (user.Info, bool) {
	u, ok := ctx.Value(impersonatorKey{}).(user.Info)
	return u, ok && u != nil
}
