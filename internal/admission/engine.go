package admission

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

	"github.com/crdserver/crdserver/internal/request"
	"github.com/crdserver/crdserver/internal/resource"
)

// NewLoopback builds the admission plugins on the server's loopback
// client config cfg: o's Client, Dynamic and RESTMapper (a discovery
// mapper) are made from it.
func NewLoopback(cfg *rest.Config, o Options) (*Admission, error) {
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	o.Client, o.Dynamic = client, dyn
	o.RESTMapper = restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(client.Discovery()))
	return New(o)
}

// Engine is the engine's dynamic admission (resource.AdmissionControl):
// the plugins of an Admission, with the versions and the conversions of
// the served resources, recording the plugins' audit annotations in the
// request's audit event.
type Engine struct{ *Admission }

var _ resource.AdmissionControl = Engine{}

// Admit runs the mutating plugins and records their audit annotations in
// the request's audit event.
func (e Engine) Admit(ctx context.Context, attrs k8sadmission.Attributes, o k8sadmission.ObjectInterfaces) error {
	err := e.Admission.Admit(ctx, attrs, o)
	recordAuditAnnotations(ctx, attrs)
	return err
}

// Validate runs the validating plugins and records their audit
// annotations in the request's audit event.
func (e Engine) Validate(ctx context.Context, attrs k8sadmission.Attributes, o k8sadmission.ObjectInterfaces) error {
	err := e.Admission.Validate(ctx, attrs, o)
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
	for k, v := range AuditAnnotations(attrs, auditinternal.Level(level)) {
		request.AddAuditAnnotation(ctx, k, v)
	}
}

// ObjectInterfaces implements resource.AdmissionControl: res's versions,
// its conversions between them (for a plugin that matches another
// version) and its defaulting.
func (e Engine) ObjectInterfaces(res *resource.Resource) k8sadmission.ObjectInterfaces {
	f := ResourceFuncs{
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
			// Kubernetes' ObjectInterfaces convert without a request's
			// context; the conversion is bounded by the converter's own
			// timeouts.
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
	return NewObjectInterfaces(f)
}

// TypeChecker is the controller that writes the type checking of
// ValidatingAdmissionPolicies into their status, on the leader
// (kube-controller-manager's work).
type TypeChecker struct {
	Admission *Admission
	Log       *slog.Logger
}

// Name implements controller.Controller.
func (t TypeChecker) Name() string { return TypeCheckerName }

// Run implements controller.Controller.
func (t TypeChecker) Run(ctx context.Context) {
	if err := t.Admission.RunTypeChecker(ctx); err != nil && ctx.Err() == nil {
		t.Log.Warn("type checker", "err", err)
	}
}
