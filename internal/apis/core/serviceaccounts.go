package core

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/warning"
	kjson "sigs.k8s.io/json"

	"github.com/crdserver/crdserver/internal/conversion"
	"github.com/crdserver/crdserver/internal/request"
	"github.com/crdserver/crdserver/internal/resource"
	"github.com/crdserver/crdserver/internal/serviceaccount"
	"github.com/crdserver/crdserver/internal/store"
)

// ServiceAccountPrefix is where ServiceAccounts live in etcd.
const ServiceAccountPrefix = "/registry/serviceaccounts/"

// ServiceAccounts is the serviceaccounts resource, served from cache, with
// its token subresource (TokenRequest) when tokens can be issued.
func ServiceAccounts(cache *store.Cache, tokens *TokenRequests) *resource.Resource {
	res := &resource.Resource{
		Plural:                   "serviceaccounts",
		Singular:                 "serviceaccount",
		Kind:                     "ServiceAccount",
		ListKind:                 "ServiceAccountList",
		ShortNames:               []string{"sa"},
		Namespaced:               true,
		Versions:                 []*resource.Version{{Name: "v1"}},
		StorageVersion:           "v1",
		KeyPrefix:                ServiceAccountPrefix,
		Cache:                    cache,
		Strategy:                 serviceAccountStrategy{},
		Converter:                conversion.None{},
		Table:                    serviceAccountTable{},
		FieldManagers:            resource.BuiltinFieldManagers("", "ServiceAccount", false),
		AllowUnconditionalUpdate: true,
		Protobuf:                 true,
		StrategicMergeType:       &corev1.ServiceAccount{},
		Verbs:                    resource.DefaultVerbs,
		ReturnDeletedObject:      true,
	}
	if tokens != nil {
		res.Subresources = []*resource.Subresource{{
			Name: "token", Verbs: []string{"create"},
			Group: authenticationv1.GroupName, Version: "v1", Kind: "TokenRequest",
			Serve: tokens.serve,
		}}
	}
	return res
}

// serviceAccountStrategy holds Kubernetes' rules for ServiceAccounts:
// references to secrets keep only their names.
type serviceAccountStrategy struct{}

func (serviceAccountStrategy) Normalize(obj *resource.Object) ([]error, error) {
	return resource.NormalizeTyped[corev1.ServiceAccount](obj, "ServiceAccount", "v1", nil)
}

func cleanSecretReferences(sa *corev1.ServiceAccount) {
	for i, s := range sa.Secrets {
		sa.Secrets[i] = corev1.ObjectReference{Name: s.Name}
	}
}

func (serviceAccountStrategy) PrepareForCreate(_ context.Context, obj *resource.Object) {
	resource.EditTyped(obj, cleanSecretReferences)
}

func (serviceAccountStrategy) PrepareForUpdate(_ context.Context, obj, _ *resource.Object) {
	resource.EditTyped(obj, cleanSecretReferences)
}

func (serviceAccountStrategy) Validate(context.Context, *resource.Object) field.ErrorList { return nil }

func (serviceAccountStrategy) ValidateUpdate(context.Context, *resource.Object, *resource.Object) field.ErrorList {
	return nil
}

// enforceMountableSecrets is the annotation Kubernetes 1.32 deprecated.
const enforceMountableSecrets = "kubernetes.io/enforce-mountable-secrets"

func (serviceAccountStrategy) WarningsOnCreate(_ context.Context, obj *resource.Object) []string {
	return mountableSecretsWarning(obj, nil)
}

func (serviceAccountStrategy) WarningsOnUpdate(_ context.Context, obj, old *resource.Object) []string {
	return mountableSecretsWarning(obj, old)
}

func mountableSecretsWarning(obj, old *resource.Object) []string {
	if old != nil {
		if _, ok := old.Meta.Annotations[enforceMountableSecrets]; ok {
			return nil
		}
	}
	if _, ok := obj.Meta.Annotations[enforceMountableSecrets]; ok {
		return []string{fmt.Sprintf("metadata.annotations[%s]: deprecated in v1.32+; prefer separate namespaces to isolate access to mounted secrets", enforceMountableSecrets)}
	}
	return nil
}

// serviceAccountTable is kubectl's table of ServiceAccounts: Name, Age.
type serviceAccountTable struct{}

func (serviceAccountTable) ConvertToTable(_ context.Context, _ string, objs []*unstructured.Unstructured, noHeaders bool) (*metav1.Table, error) {
	tbl := &metav1.Table{}
	if !noHeaders {
		tbl.ColumnDefinitions = []metav1.TableColumnDefinition{
			{Name: "Name", Type: "string", Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]},
			{Name: "Age", Type: "string", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]},
		}
	}
	for _, o := range objs {
		tbl.Rows = append(tbl.Rows, metav1.TableRow{Cells: []any{o.GetName(), resource.Age(o.GetCreationTimestamp())}})
	}
	return tbl, nil
}

// TokenRequests answers serviceaccounts/token: it issues tokens for a
// ServiceAccount, optionally bound to a Secret, as Kubernetes' TokenRequest
// does (audiences default to the server's, expiration to an hour and at
// least ten minutes).
type TokenRequests struct {
	Tokens *serviceaccount.Tokens
	// Objects finds the ServiceAccount and the Secret a token is bound to.
	Objects serviceaccount.Getter
}

const (
	defaultTokenExpiration = 3600
	minTokenExpiration     = 600
)

var tokenRequestKind = schema.GroupKind{Group: authenticationv1.GroupName, Kind: "TokenRequest"}

func (t *TokenRequests) serve(w http.ResponseWriter, r *http.Request, info *request.Info, _ *resource.Resource, _ *resource.Version) {
	out, err := t.create(r, info)
	if err != nil {
		request.WriteError(w, r, err)
		return
	}
	tgt, err := request.Negotiate(r, request.Offer{Protobuf: true})
	if err != nil {
		request.WriteError(w, r, err)
		return
	}
	request.WriteObject(w, r, http.StatusCreated, tgt, out)
}

func (t *TokenRequests) create(r *http.Request, info *request.Info) (*authenticationv1.TokenRequest, error) {
	body, err := request.ReadBody(r)
	if err == nil {
		if mt := request.MediaType(r); mt == request.Protobuf {
			body, err = request.ProtobufToJSON(body, "TokenRequest")
		} else {
			body, err = request.ToJSON(body, mt, "TokenRequest")
		}
	}
	if err != nil {
		return nil, err
	}
	req := &authenticationv1.TokenRequest{}
	if _, err := kjson.UnmarshalStrict(body, req); err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("TokenRequest in version \"v1\" cannot be handled as a TokenRequest: %v", err))
	}
	ctx, name, ns := r.Context(), info.Name, info.Namespace
	if req.Name != "" && req.Name != name {
		return nil, apierrors.NewInvalid(tokenRequestKind, name, field.ErrorList{field.Invalid(field.NewPath("metadata").Child("name"), req.Name, "must match the service account name if specified")})
	}
	if req.Namespace != "" && req.Namespace != ns {
		return nil, apierrors.NewInvalid(tokenRequestKind, name, field.ErrorList{field.Invalid(field.NewPath("metadata").Child("namespace"), req.Namespace, "must match the service account namespace if specified")})
	}
	sa, err := t.Objects.ServiceAccount(ctx, ns, name)
	if err != nil {
		return nil, err
	}
	if req.UID != "" && string(req.UID) != sa.UID {
		return nil, apierrors.NewConflict(schema.GroupResource{Group: tokenRequestKind.Group, Resource: tokenRequestKind.Kind}, name,
			fmt.Errorf("the UID in the token request (%s) does not match the UID of the service account (%s)", req.UID, sa.UID))
	}
	if len(req.Spec.Audiences) == 0 {
		req.Spec.Audiences = t.Tokens.Audiences()
	}
	if req.Spec.ExpirationSeconds == nil {
		exp := int64(defaultTokenExpiration)
		req.Spec.ExpirationSeconds = &exp
	}
	req.Name, req.Namespace = name, ns
	req.UID = types.UID(sa.UID)
	now := time.Now()
	req.CreationTimestamp = metav1.NewTime(now)
	req.Status = authenticationv1.TokenRequestStatus{}
	spec := field.NewPath("spec")
	var errs field.ErrorList
	if *req.Spec.ExpirationSeconds < minTokenExpiration {
		errs = append(errs, field.Invalid(spec.Child("expirationSeconds"), *req.Spec.ExpirationSeconds, "may not specify a duration less than 10 minutes"))
	}
	if *req.Spec.ExpirationSeconds > 1<<32 {
		errs = append(errs, field.Invalid(spec.Child("expirationSeconds"), *req.Spec.ExpirationSeconds, "may not specify a duration larger than 2^32 seconds"))
	}
	if len(errs) > 0 {
		return nil, apierrors.NewInvalid(tokenRequestKind, "", errs)
	}
	issue := serviceaccount.Request{
		Namespace:      ns,
		ServiceAccount: serviceaccount.Ref{Name: name, UID: sa.UID},
		Audiences:      req.Spec.Audiences,
		Now:            now,
	}
	if ref := req.Spec.BoundObjectRef; ref != nil {
		gvk := schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind)
		var uid string
		switch {
		case gvk.Group == "" && gvk.Kind == "Secret":
			s, err := t.Objects.Secret(ctx, ns, ref.Name)
			if err != nil {
				return nil, err
			}
			uid = s.UID
			issue.Secret = &serviceaccount.Ref{Name: ref.Name, UID: s.UID}
		case gvk.Group == "" && gvk.Kind == "Pod":
			// Tokens are not bound to Pods yet (kube-apiserver binds them):
			// answered as kube answers a Pod that does not exist.
			return nil, apierrors.NewNotFound(corev1.Resource("pods"), ref.Name)
		case gvk.Group == "" && gvk.Kind == "Node":
			return nil, apierrors.NewNotFound(corev1.Resource("nodes"), ref.Name)
		default:
			return nil, apierrors.NewBadRequest(fmt.Sprintf("cannot bind token to object of type %s", gvk.String()))
		}
		if ref.UID != "" && string(ref.UID) != uid {
			return nil, apierrors.NewConflict(schema.GroupResource{Group: gvk.Group, Resource: gvk.Kind}, ref.Name,
				fmt.Errorf("the UID in the bound object reference (%s) does not match the UID in record. The object might have been deleted and then recreated", ref.UID))
		}
	}
	if limit := int64(t.Tokens.MaxExpiration() / time.Second); limit > 0 && *req.Spec.ExpirationSeconds > limit {
		warning.AddWarning(ctx, "", fmt.Sprintf("requested expiration of %d seconds shortened to %d seconds", *req.Spec.ExpirationSeconds, limit))
		*req.Spec.ExpirationSeconds = limit
	}
	issue.Expiration = time.Duration(*req.Spec.ExpirationSeconds) * time.Second
	tok, err := t.Tokens.Issue(issue)
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("failed to generate token: %v", err))
	}
	req.Status = authenticationv1.TokenRequestStatus{Token: tok, ExpirationTimestamp: metav1.NewTime(now.Add(issue.Expiration))}
	req.APIVersion, req.Kind = authenticationv1.SchemeGroupVersion.String(), "TokenRequest"
	return req, nil
}

// ObjectGetter finds ServiceAccounts and Secrets in their caches, or in
// storage when the cache has not seen them yet.
type ObjectGetter struct {
	ServiceAccounts, Secrets *resource.Resource
	Store                    store.Interface
}

// ServiceAccount implements serviceaccount.Getter.
func (g ObjectGetter) ServiceAccount(ctx context.Context, ns, name string) (*serviceaccount.Object, error) {
	return g.get(ctx, g.ServiceAccounts, ns, name)
}

// Secret implements serviceaccount.Getter.
func (g ObjectGetter) Secret(ctx context.Context, ns, name string) (*serviceaccount.Object, error) {
	return g.get(ctx, g.Secrets, ns, name)
}

func (g ObjectGetter) get(ctx context.Context, res *resource.Resource, ns, name string) (*serviceaccount.Object, error) {
	key := res.Key(ns, name)
	var raw []byte
	if it, _ := res.Cache.Get(key); it != nil {
		raw = it.Bytes()
	} else {
		kv, _, err := g.Store.Get(ctx, key, 0)
		if errors.Is(err, store.ErrNotFound) {
			return nil, apierrors.NewNotFound(res.GroupResource(), name)
		}
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		raw = kv.Value
	}
	obj, err := resource.DecodeObject(raw)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	out := &serviceaccount.Object{UID: string(obj.Meta.UID)}
	if obj.Meta.DeletionTimestamp != nil {
		t := obj.Meta.DeletionTimestamp.Time
		out.Deleted = &t
	}
	return out, nil
}
