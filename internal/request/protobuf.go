package request

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
)

// Protobuf is the Kubernetes protobuf media type. Built-in types are
// served in it and generated client-go clientsets send them in it; custom
// resources have no protobuf form.
const Protobuf = "application/vnd.kubernetes.protobuf"

// ProtobufWatch is the Content-Type of a watch stream in protobuf.
const ProtobufWatch = Protobuf + ";stream=watch"

var (
	protoMu     sync.RWMutex
	protoScheme = newProtobufScheme()
	protoCodec  = protobuf.NewSerializer(protoScheme, protoScheme)
	// protoRaw encodes the watch events themselves, which carry their
	// object already encoded.
	protoRaw = protobuf.NewRawSerializer(protoScheme, protoScheme)
)

func newProtobufScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	// PartialObjectMetadata(List), as metadata-only reads answer.
	if err := metav1.AddMetaToScheme(s); err != nil {
		panic(err)
	}
	return s
}

// AddProtobufTypes makes the Go types that add puts in a scheme readable
// and writable in protobuf: the built-in APIs register theirs.
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

// Scheme is the scheme of the built-in types: what AddProtobufTypes
// registered. Read it after registration only.
func Scheme() *runtime.Scheme { return protoScheme }

// ProtobufToJSON decodes a protobuf request body of a built-in type into
// JSON.
func ProtobufToJSON(body []byte, kind string) ([]byte, error) {
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

// typeMeta is what an encoded object says of its type.
type typeMeta struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
}

// jsonToTyped decodes a JSON object into the Go type its apiVersion and
// kind name.
func jsonToTyped(body []byte) (runtime.Object, error) {
	var tm typeMeta
	if err := json.Unmarshal(body, &tm); err != nil {
		return nil, err
	}
	gvk := schema.FromAPIVersionAndKind(tm.APIVersion, tm.Kind)
	protoMu.RLock()
	obj, err := protoScheme.New(gvk)
	protoMu.RUnlock()
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(body, obj); err != nil {
		return nil, err
	}
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	return obj, nil
}

// JSONToProtobuf encodes a JSON object of a built-in type in protobuf.
func JSONToProtobuf(body []byte) ([]byte, error) {
	obj, err := jsonToTyped(body)
	if err != nil {
		return nil, fmt.Errorf("protobuf: %w", err)
	}
	var buf bytes.Buffer
	protoMu.RLock()
	err = protoCodec.Encode(obj, &buf)
	protoMu.RUnlock()
	return buf.Bytes(), err
}

// ProtobufWatchEvent frames one watch event of a protobuf watch stream, as
// Kubernetes writes them: the length, then a WatchEvent whose object is
// the protobuf encoding of the JSON object obj.
func ProtobufWatchEvent(typ string, obj []byte) ([]byte, error) {
	raw, err := JSONToProtobuf(obj)
	if err != nil {
		return nil, err
	}
	ev := &metav1.WatchEvent{Type: typ, Object: runtime.RawExtension{Raw: raw}}
	var buf bytes.Buffer
	buf.Write([]byte{0, 0, 0, 0})
	protoMu.RLock()
	err = protoRaw.Encode(ev, &buf)
	protoMu.RUnlock()
	if err != nil {
		return nil, err
	}
	out := buf.Bytes()
	binary.BigEndian.PutUint32(out[:4], uint32(len(out)-4))
	return out, nil
}
