package core

import (
	"context"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/crdserver/crdserver/internal/conversion"
	"github.com/crdserver/crdserver/internal/resource"
	"github.com/crdserver/crdserver/internal/store"
)

// ConfigMapPrefix is where ConfigMaps live in etcd.
const ConfigMapPrefix = "/registry/configmaps/"

// maxDataSize bounds the data of a ConfigMap or Secret (Kubernetes'
// MaxSecretSize, 1 MiB).
const maxDataSize = 1 * 1024 * 1024

// ConfigMaps is the configmaps resource, served from cache.
func ConfigMaps(cache *store.Cache) *resource.Resource {
	return &resource.Resource{
		Plural:                   "configmaps",
		Singular:                 "configmap",
		Kind:                     "ConfigMap",
		ListKind:                 "ConfigMapList",
		ShortNames:               []string{"cm"},
		Namespaced:               true,
		Versions:                 []*resource.Version{{Name: "v1"}},
		StorageVersion:           "v1",
		KeyPrefix:                ConfigMapPrefix,
		Cache:                    cache,
		Strategy:                 configMapStrategy{},
		Converter:                conversion.None{},
		Table:                    configMapTable{},
		FieldManagers:            resource.BuiltinFieldManagers("", "ConfigMap", false),
		AllowUnconditionalUpdate: true,
		Protobuf:                 true,
		StrategicMergeType:       &corev1.ConfigMap{},
		Verbs:                    resource.DefaultVerbs,
	}
}

// configMapStrategy holds Kubernetes' rules for ConfigMaps (its
// validation, written to the same messages: it lives in k8s.io/kubernetes).
type configMapStrategy struct{}

func (configMapStrategy) Normalize(obj *resource.Object) ([]error, error) {
	return resource.NormalizeTyped[corev1.ConfigMap](obj, "ConfigMap", "v1", nil)
}

func (configMapStrategy) PrepareForCreate(context.Context, *resource.Object)                   {}
func (configMapStrategy) PrepareForUpdate(context.Context, *resource.Object, *resource.Object) {}

func (configMapStrategy) Validate(_ context.Context, obj *resource.Object) field.ErrorList {
	cm, err := resource.Typed[corev1.ConfigMap](obj)
	if err != nil {
		return field.ErrorList{field.Invalid(field.NewPath(""), nil, err.Error())}
	}
	return validateConfigMap(cm)
}

func (s configMapStrategy) ValidateUpdate(ctx context.Context, obj, old *resource.Object) field.ErrorList {
	cm, err := resource.Typed[corev1.ConfigMap](obj)
	if err != nil {
		return field.ErrorList{field.Invalid(field.NewPath(""), nil, err.Error())}
	}
	o, err := resource.Typed[corev1.ConfigMap](old)
	if err != nil {
		return field.ErrorList{field.Invalid(field.NewPath(""), nil, err.Error())}
	}
	var errs field.ErrorList
	if o.Immutable != nil && *o.Immutable {
		if cm.Immutable == nil || !*cm.Immutable {
			errs = append(errs, field.Forbidden(field.NewPath("immutable"), immutableMessage))
		}
		if !reflect.DeepEqual(cm.Data, o.Data) {
			errs = append(errs, field.Forbidden(field.NewPath("data"), immutableMessage))
		}
		if !reflect.DeepEqual(cm.BinaryData, o.BinaryData) {
			errs = append(errs, field.Forbidden(field.NewPath("binaryData"), immutableMessage))
		}
	}
	return append(errs, validateConfigMap(cm)...)
}

const immutableMessage = "field is immutable when `immutable` is set"

func validateConfigMap(cm *corev1.ConfigMap) field.ErrorList {
	var errs field.ErrorList
	size := 0
	for _, key := range sortedKeys(cm.Data) {
		for _, msg := range utilvalidation.IsConfigMapKey(key) {
			errs = append(errs, field.Invalid(field.NewPath("data").Key(key), key, msg))
		}
		if _, dup := cm.BinaryData[key]; dup {
			errs = append(errs, field.Invalid(field.NewPath("data").Key(key), key, "duplicate of key present in binaryData"))
		}
		size += len(cm.Data[key])
	}
	for _, key := range sortedKeys(cm.BinaryData) {
		for _, msg := range utilvalidation.IsConfigMapKey(key) {
			errs = append(errs, field.Invalid(field.NewPath("binaryData").Key(key), key, msg))
		}
		size += len(cm.BinaryData[key])
	}
	if size > maxDataSize {
		errs = append(errs, field.TooLong(field.NewPath(""), "", maxDataSize))
	}
	return errs
}

// configMapTable is kubectl's table of ConfigMaps: Name, Data, Age.
type configMapTable struct{}

func (configMapTable) ConvertToTable(_ context.Context, _ string, objs []*unstructured.Unstructured, noHeaders bool) (*metav1.Table, error) {
	tbl := &metav1.Table{}
	if !noHeaders {
		tbl.ColumnDefinitions = []metav1.TableColumnDefinition{
			{Name: "Name", Type: "string", Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]},
			{Name: "Data", Type: "string", Description: corev1.ConfigMap{}.SwaggerDoc()["data"]},
			{Name: "Age", Type: "string", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]},
		}
	}
	for _, o := range objs {
		data, _, _ := unstructured.NestedMap(o.Object, "data")
		binary, _, _ := unstructured.NestedMap(o.Object, "binaryData")
		tbl.Rows = append(tbl.Rows, metav1.TableRow{Cells: []any{o.GetName(), int64(len(data) + len(binary)), resource.Age(o.GetCreationTimestamp())}})
	}
	return tbl, nil
}
