package resource

import (
	"encoding/json"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
)

// Protobuf is the Kubernetes protobuf media type. Generated client-go
// clientsets send built-in objects and DeleteOptions in it; custom
// resources have no protobuf form.
const Protobuf = "application/vnd.kubernetes.protobuf"

var (
	protoMu     sync.RWMutex
	protoScheme = newProtobufScheme()
	protoCodec  = protobuf.NewSerializer(protoScheme, protoScheme)
)

func newProtobufScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	return s
}

// AddProtobufTypes makes the Go types that add puts in a scheme decodable
// from protobuf request bodies: the built-in APIs register theirs.
func AddProtobufTypes(add ...func(*runtime.Scheme) error) error {
	protoMu.Lock()
	defer protoMu.Unlock()
	for _, f := range add {
		if err := f(protoScheme); err != nil {
			return err
		}
	}
	return nil
}

// ProtobufToJSON decodes a protobuf body of a built-in type into JSON.
func ProtobufToJSON(body []byte, kind string) ([]byte, error) { return protobufToJSON(body, kind) }

// protobufToJSON decodes a protobuf body of a built-in type into JSON.
func protobufToJSON(body []byte, kind string) ([]byte, error) {
	protoMu.RLock()
	obj, gvk, err := protoCodec.Decode(body, nil, nil)
	protoMu.RUnlock()
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the object provided is unrecognized (must be of type %s): %v", kind, err))
	}
	if gvk != nil {
		obj.GetObjectKind().SetGroupVersionKind(*gvk)
	}
	return json.Marshal(obj)
}
