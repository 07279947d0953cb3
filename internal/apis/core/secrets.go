package core

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"maps"
	"reflect"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/crdserver/crdserver/internal/conversion"
	"github.com/crdserver/crdserver/internal/resource"
	"github.com/crdserver/crdserver/internal/store"
)

// SecretPrefix is where Secrets live in etcd.
const SecretPrefix = "/registry/secrets/"

// Secrets is the secrets resource, served from cache. Field selectors may
// name type, as on Kubernetes.
func Secrets(cache *store.Cache) *resource.Resource {
	return &resource.Resource{
		Plural:                   "secrets",
		Singular:                 "secret",
		Kind:                     "Secret",
		ListKind:                 "SecretList",
		Namespaced:               true,
		Versions:                 []*resource.Version{{Name: "v1", SelectableFields: []string{"type"}}},
		StorageVersion:           "v1",
		KeyPrefix:                SecretPrefix,
		Cache:                    cache,
		Strategy:                 secretStrategy{},
		Converter:                conversion.None{},
		Table:                    secretTable{},
		FieldManagers:            resource.BuiltinFieldManagers("", "Secret", false),
		AllowUnconditionalUpdate: true,
		Protobuf:                 true,
		StrategicMergeType:       &corev1.Secret{},
		Verbs:                    resource.DefaultVerbs,
	}
}

// secretStrategy holds Kubernetes' rules for Secrets: stringData is merged
// into data (and never stored), type defaults to Opaque and cannot change,
// each type's required keys, immutable secrets.
type secretStrategy struct{}

func (secretStrategy) Normalize(obj *resource.Object) ([]error, error) {
	return resource.NormalizeTyped(obj, "Secret", "v1", func(s *corev1.Secret) {
		if len(s.StringData) > 0 {
			if s.Data == nil {
				s.Data = make(map[string][]byte, len(s.StringData))
			}
			for k, v := range s.StringData {
				s.Data[k] = []byte(v)
			}
		}
		s.StringData = nil
		if s.Type == "" {
			s.Type = corev1.SecretTypeOpaque
		}
	})
}

func (secretStrategy) PrepareForCreate(context.Context, *resource.Object) {}

func (secretStrategy) PrepareForUpdate(_ context.Context, obj, old *resource.Object) {
	o, err := resource.Typed[corev1.Secret](old)
	if err != nil {
		return
	}
	resource.EditTyped(obj, func(s *corev1.Secret) {
		if s.Type == "" {
			s.Type = o.Type
		}
	})
}

func (secretStrategy) Validate(_ context.Context, obj *resource.Object) field.ErrorList {
	s, err := resource.Typed[corev1.Secret](obj)
	if err != nil {
		return field.ErrorList{field.Invalid(field.NewPath(""), nil, err.Error())}
	}
	return validateSecret(s)
}

func (secretStrategy) ValidateUpdate(_ context.Context, obj, old *resource.Object) field.ErrorList {
	s, err := resource.Typed[corev1.Secret](obj)
	if err != nil {
		return field.ErrorList{field.Invalid(field.NewPath(""), nil, err.Error())}
	}
	o, err := resource.Typed[corev1.Secret](old)
	if err != nil {
		return field.ErrorList{field.Invalid(field.NewPath(""), nil, err.Error())}
	}
	var errs field.ErrorList
	if s.Type != o.Type {
		errs = append(errs, field.Invalid(field.NewPath("type"), s.Type, "field is immutable"))
	}
	if o.Immutable != nil && *o.Immutable {
		if s.Immutable == nil || !*s.Immutable {
			errs = append(errs, field.Forbidden(field.NewPath("immutable"), immutableMessage))
		}
		if !reflect.DeepEqual(s.Data, o.Data) {
			errs = append(errs, field.Forbidden(field.NewPath("data"), immutableMessage))
		}
	}
	return append(errs, validateSecret(s)...)
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

func validateSecret(s *corev1.Secret) field.ErrorList {
	var errs field.ErrorList
	data := field.NewPath("data")
	size := 0
	for _, key := range sortedKeys(s.Data) {
		for _, msg := range utilvalidation.IsConfigMapKey(key) {
			errs = append(errs, field.Invalid(data.Key(key), key, msg))
		}
		size += len(s.Data[key])
	}
	if size > maxDataSize {
		errs = append(errs, field.TooLong(data, "", maxDataSize))
	}
	switch s.Type {
	case corev1.SecretTypeServiceAccountToken:
		if s.Annotations[corev1.ServiceAccountNameKey] == "" {
			errs = append(errs, field.Required(field.NewPath("metadata", "annotations").Key(corev1.ServiceAccountNameKey), ""))
		}
	case corev1.SecretTypeDockercfg, corev1.SecretTypeDockerConfigJson:
		key := corev1.DockerConfigKey
		if s.Type == corev1.SecretTypeDockerConfigJson {
			key = corev1.DockerConfigJsonKey
		}
		b, ok := s.Data[key]
		if !ok {
			errs = append(errs, field.Required(data.Key(key), ""))
			break
		}
		if err := json.Unmarshal(b, &map[string]any{}); err != nil {
			errs = append(errs, field.Invalid(data.Key(key), "<secret contents redacted>", err.Error()))
		}
	case corev1.SecretTypeBasicAuth:
		_, user := s.Data[corev1.BasicAuthUsernameKey]
		_, pass := s.Data[corev1.BasicAuthPasswordKey]
		if !user && !pass {
			errs = append(errs, field.Required(data.Key(corev1.BasicAuthUsernameKey), ""),
				field.Required(data.Key(corev1.BasicAuthPasswordKey), ""))
		}
	case corev1.SecretTypeSSHAuth:
		if len(s.Data[corev1.SSHAuthPrivateKey]) == 0 {
			errs = append(errs, field.Required(data.Key(corev1.SSHAuthPrivateKey), ""))
		}
	case corev1.SecretTypeTLS:
		if _, ok := s.Data[corev1.TLSCertKey]; !ok {
			errs = append(errs, field.Required(data.Key(corev1.TLSCertKey), ""))
		}
		if _, ok := s.Data[corev1.TLSPrivateKeyKey]; !ok {
			errs = append(errs, field.Required(data.Key(corev1.TLSPrivateKeyKey), ""))
		}
	}
	return errs
}

// WarningsOnCreate: a TLS secret whose key does not match its certificate.
func (secretStrategy) WarningsOnCreate(_ context.Context, obj *resource.Object) []string {
	return secretWarnings(obj)
}

func (secretStrategy) WarningsOnUpdate(_ context.Context, obj, _ *resource.Object) []string {
	return secretWarnings(obj)
}

func secretWarnings(obj *resource.Object) []string {
	s, err := resource.Typed[corev1.Secret](obj)
	if err != nil || s.Type != corev1.SecretTypeTLS {
		return nil
	}
	if _, err := tls.X509KeyPair(s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey]); err != nil {
		return []string{err.Error()}
	}
	return nil
}

// secretTable is kubectl's table of Secrets: Name, Type, Data, Age.
type secretTable struct{}

func (secretTable) ConvertToTable(_ context.Context, _ string, objs []*unstructured.Unstructured, noHeaders bool) (*metav1.Table, error) {
	tbl := &metav1.Table{}
	if !noHeaders {
		tbl.ColumnDefinitions = []metav1.TableColumnDefinition{
			{Name: "Name", Type: "string", Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]},
			{Name: "Type", Type: "string", Description: corev1.Secret{}.SwaggerDoc()["type"]},
			{Name: "Data", Type: "string", Description: corev1.Secret{}.SwaggerDoc()["data"]},
			{Name: "Age", Type: "string", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]},
		}
	}
	for _, o := range objs {
		typ, _, _ := unstructured.NestedString(o.Object, "type")
		data, _, _ := unstructured.NestedMap(o.Object, "data")
		tbl.Rows = append(tbl.Rows, metav1.TableRow{Cells: []any{o.GetName(), typ, int64(len(data)), resource.Age(o.GetCreationTimestamp())}})
	}
	return tbl, nil
}
