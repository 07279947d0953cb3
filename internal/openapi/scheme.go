package openapi

import (
	"sync"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	svmv1 "k8s.io/api/storagemigration/v1"
	svmv1beta1 "k8s.io/api/storagemigration/v1beta1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	openapinamer "k8s.io/apiserver/pkg/endpoints/openapi"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"

	rulesv1alpha1 "github.com/crdserver/crdserver/internal/apis/conversionrules/v1alpha1"
)

// builtinScheme holds the Go types of the built-in groups crdserver
// serves: a resource's object is the kind its Resource names, its list the
// kind + "List", in the version of the document.
var builtinScheme = sync.OnceValue(func() *runtime.Scheme {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme,
		eventsv1.AddToScheme,
		authenticationv1.AddToScheme,
		authorizationv1.AddToScheme,
		rbacv1.AddToScheme,
		admissionregistrationv1.AddToScheme,
		coordinationv1.AddToScheme,
		appsv1.AddToScheme,
		batchv1.AddToScheme,
		policyv1.AddToScheme,
		autoscalingv2.AddToScheme,
		networkingv1.AddToScheme,
		discoveryv1.AddToScheme,
		flowcontrolv1.AddToScheme,
		svmv1.AddToScheme,
		svmv1beta1.AddToScheme,
		apiextensionsv1.AddToScheme,
		rulesv1alpha1.AddToScheme,
		apiregistrationv1.AddToScheme,
	} {
		if err := add(scheme); err != nil {
			panic(err)
		}
	}
	return scheme
})

// namer names definitions and lists the group/version kinds of each, from
// the scheme of the built-in groups.
var namer = sync.OnceValue(func() *openapinamer.DefinitionNamer {
	return openapinamer.NewDefinitionNamer(builtinScheme())
})
