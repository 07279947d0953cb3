package resource

import (
	"encoding/json"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	svmv1 "k8s.io/api/storagemigration/v1"
	svmv1beta1 "k8s.io/api/storagemigration/v1beta1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
)

// Protobuf is the Kubernetes protobuf media type. Generated client-go
// clientsets send built-in objects (namespaces, CRDs) and DeleteOptions in
// it; custom resources have no protobuf form.
const Protobuf = "application/vnd.kubernetes.protobuf"

var (
	builtinScheme = newBuiltinScheme()
	protoCodec    = protobuf.NewSerializer(builtinScheme, builtinScheme)
)

func newBuiltinScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, apiextensionsv1.AddToScheme, svmv1.AddToScheme, svmv1beta1.AddToScheme,
		rbacv1.AddToScheme, authorizationv1.AddToScheme, authenticationv1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	return s
}

// ProtobufToJSON decodes a protobuf body of a built-in type into JSON.
func ProtobufToJSON(body []byte, kind string) ([]byte, error) { return protobufToJSON(body, kind) }

// protobufToJSON decodes a protobuf body of a built-in type into JSON.
func protobufToJSON(body []byte, kind string) ([]byte, error) {
	obj, gvk, err := protoCodec.Decode(body, nil, nil)
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the object provided is unrecognized (must be of type %s): %v", kind, err))
	}
	if gvk != nil {
		obj.GetObjectKind().SetGroupVersionKind(*gvk)
	}
	return json.Marshal(obj)
}
