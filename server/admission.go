package server

import (
	"context"
	"log/slog"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	k8sadmission "k8s.io/apiserver/pkg/admission"
	auditinternal "k8s.io/apiserver/pkg/apis/audit"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/crdserver/crdserver/internal/admission"
	"github.com/crdserver/crdserver/internal/auth"
	"github.com/crdserver/crdserver/internal/request"
	"github.com/crdserver/crdserver/internal/resource"
)

// admissionControl is the engine's dynamic admission: Kubernetes' own
// admission plugins (internal/admission), with the versions and the
// conversions of the served resources.
type admissionControl struct {
	*admission.Admission
	log *slog.Logger
}

// newAdmission builds the admission plugins on the loopback client cfg.
func (s *Server) newAdmission(cfg *rest.Config, authz auth.Chain) (*admissionControl, error) {
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(client.Discovery()))
	a, err := admission.New(admission.Options{
		Client:           client,
		OpenAPI:          s.openapi.Client(),
		Dynamic:          dyn,
		RESTMapper:       mapper,
		Authorizer:       authz,
		ServiceAddresses: s.cfg.Conversion.ServiceAddresses,
		Registerer:       s.metrics.Registry,
		Log:              s.log,
	})
	if err != nil {
		return nil, err
	}
	return &admissionControl{Admission: a, log: s.log}, nil
}

// Admit runs the mutating plugins and records their audit annotations in
// the request's audit event.
func (a *admissionControl) Admit(ctx context.Context, attrs k8sadmission.Attributes, o k8sadmission.ObjectInterfaces) error {
	err := a.Admission.Admit(ctx, attrs, o)
	recordAuditAnnotations(ctx, attrs)
	return err
}

// Validate runs the validating plugins and records their audit
// annotations in the request's audit event.
func (a *admissionControl) Validate(ctx context.Context, attrs k8sadmission.Attributes, o k8sadmission.ObjectInterfaces) error {
	err := a.Admission.Validate(ctx, attrs, o)
	recordAuditAnnotations(ctx, attrs)
	return err
}

// recordAuditAnnotations copies the annotations the plugins left on attrs
// that the request's audit level records.
func recordAuditAnnotations(ctx context.Context, attrs k8sadmission.Attributes) {
	level := request.AuditLevel(ctx)
	if level == "" {
		return
	}
	for k, v := range admission.AuditAnnotations(attrs, auditinternal.Level(level)) {
		request.AddAuditAnnotation(ctx, k, v)
	}
}

// ObjectInterfaces implements resource.AdmissionControl.
func (a *admissionControl) ObjectInterfaces(res *resource.Resource) k8sadmission.ObjectInterfaces {
	f := admission.ResourceFuncs{
		EquivalentResources: func(gvr schema.GroupVersionResource, _ string) []schema.GroupVersionResource {
			out := make([]schema.GroupVersionResource, 0, len(res.Versions))
			for _, v := range res.Versions {
				out = append(out, schema.GroupVersionResource{Group: res.Group, Version: v.Name, Resource: res.Plural})
			}
			return out
		},
		KindFor: func(gvr schema.GroupVersionResource, sub string) schema.GroupVersionKind {
			if sub == "scale" {
				return autoscalingv1.SchemeGroupVersion.WithKind("Scale")
			}
			return schema.GroupVersionKind{Group: res.Group, Version: gvr.Version, Kind: res.Kind}
		},
	}
	if len(res.Versions) > 1 {
		f.Convert = func(obj *unstructured.Unstructured, to schema.GroupVersion) (*unstructured.Unstructured, error) {
			raw, err := obj.MarshalJSON()
			if err != nil {
				return nil, err
			}
			out, err := res.Converter.Convert(context.Background(), [][]byte{raw}, to.String())
			if err != nil {
				return nil, err
			}
			u := &unstructured.Unstructured{}
			if err := utiljson.Unmarshal(out.Objects[0], &u.Object); err != nil {
				return nil, err
			}
			return u, nil
		}
	}
	if res.FieldManagers != nil && res.FieldManagers.Default != nil {
		f.Default = func(obj *unstructured.Unstructured) { res.FieldManagers.Default(obj.Object) }
	}
	return admission.NewObjectInterfaces(f)
}

// typeChecker writes the type checking of ValidatingAdmissionPolicies into
// their status, on the leader (kube-controller-manager's work).
type typeChecker struct{ a *admissionControl }

func (t typeChecker) Name() string { return admission.TypeCheckerName }

func (t typeChecker) Run(ctx context.Context) {
	if err := t.a.RunTypeChecker(ctx); err != nil && ctx.Err() == nil {
		t.a.log.Warn("type checker", "err", err)
	}
}
