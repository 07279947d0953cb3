package schema

import (
	"fmt"
	"reflect"
	"time"

	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Objects read from storage go through what Kubernetes' storage decoder
// does to a custom resource (the unstructuredSchemaCoercer of its storage
// codec, with dropInvalidMetadata and repairGeneration, then its
// defaulter), in the version they are stored in, before anything converts
// them: crdserver's write path already did all of it to what it wrote,
// but objects written before the schema changed, or not through
// crdserver, need it on their way out.

// NormalizeStored makes of obj, read from storage in this version, what
// Kubernetes' storage decoder makes of it: metadata goes through
// ObjectMeta, dropping what does not decode (a wrongly typed annotations
// map goes whole, an unknown field goes) and repairing a missing
// generation to 1; the fields the schema does not know are pruned, the
// nulls it does not allow dropped, the metadata of embedded resources
// coerced the same way; then the version's defaults are applied. It
// reports whether obj changed. Metadata that is not an object, and an
// apiVersion or kind that is not a string, are errors (as in Kubernetes,
// whose decoder cannot read such an object either).
func (v *Version) NormalizeStored(obj map[string]any) (bool, error) {
	b := v.b()
	if b == nil {
		return false, nil
	}
	av, hasAV := obj["apiVersion"]
	kind, hasKind := obj["kind"]
	if _, ok := av.(string); hasAV && !ok {
		return false, fmt.Errorf(".apiVersion accessor error: %v is of the type %T, expected string", av, av)
	}
	if _, ok := kind.(string); hasKind && !ok {
		return false, fmt.Errorf(".kind accessor error: %v is of the type %T, expected string", kind, kind)
	}
	md, hasMD := obj["metadata"]
	plain := false
	var meta *metav1.ObjectMeta
	if m, ok := md.(map[string]any); ok && plainStoredMeta(m) {
		plain = true
	} else if hasMD {
		om, found, _, err := schemaobjectmeta.GetObjectMetaWithOptions(obj, schemaobjectmeta.ObjectMetaOptions{DropMalformedFields: true})
		if err != nil {
			return false, err
		}
		if found {
			meta = om
		}
	}

	changed := b.pruner.pruneChanged(obj)
	if hasNull(obj) {
		before := countNulls(obj)
		structuraldefaulting.PruneNonNullableNullsWithoutDefaults(obj, b.structural)
		changed = changed || countNulls(obj) != before
	}
	if b.hasEmbedded {
		before := runtime.DeepCopyJSON(obj)
		if ferr, _ := schemaobjectmeta.CoerceWithOptions(nil, obj, b.structural, false, schemaobjectmeta.CoerceOptions{DropInvalidFields: true}); ferr != nil {
			return false, ferr
		}
		changed = changed || !reflect.DeepEqual(before, obj)
	}

	if hasAV {
		obj["apiVersion"] = av
	}
	if hasKind {
		obj["kind"] = kind
	}
	switch {
	case plain:
		// What ObjectMeta would give back is what is there; only a
		// missing generation is repaired.
		m := md.(map[string]any)
		if _, ok := m["generation"]; !ok {
			m["generation"] = int64(1)
			changed = true
		}
		obj["metadata"] = m
	case meta != nil:
		if meta.Generation == 0 {
			meta.Generation = 1
		}
		if err := schemaobjectmeta.SetObjectMeta(obj, meta); err != nil {
			return false, err
		}
		changed = changed || !reflect.DeepEqual(md, obj["metadata"])
	case hasMD:
		obj["metadata"] = md
	}

	if b.needsDefaults(obj) {
		structuraldefaulting.Default(obj, b.structural)
		changed = true
	}
	return changed, nil
}

// DefaultStored applies the version's defaults to an object read from
// storage that needs nothing else, and reports whether it changed.
func (v *Version) DefaultStored(obj map[string]any) bool {
	b := v.b()
	if !b.needsDefaults(obj) {
		return false
	}
	structuraldefaulting.Default(obj, b.structural)
	return true
}

// NeedsDefaults reports whether applying the version's defaults would
// change obj (Kubernetes' defaulting has a default to set somewhere).
func (v *Version) NeedsDefaults(obj map[string]any) bool {
	return v.b().needsDefaults(obj)
}

func (b *base) needsDefaults(obj map[string]any) bool {
	return b != nil && b.hasDefault && needsDefault(obj, b.structural)
}

// needsDefault follows structuraldefaulting.Default over x without
// changing it: true when Default would set a value.
func needsDefault(x any, s *structuralschema.Structural) bool {
	if s == nil {
		return false
	}
	switch x := x.(type) {
	case map[string]any:
		for k := range s.Properties {
			prop := s.Properties[k]
			if prop.Default.Object == nil {
				continue
			}
			if v, found := x[k]; !found || (v == nil && !prop.Nullable) {
				return true
			}
		}
		for k, v := range x {
			if prop, found := s.Properties[k]; found {
				if needsDefault(v, &prop) {
					return true
				}
			} else if s.AdditionalProperties != nil {
				ap := s.AdditionalProperties.Structural
				if v == nil && ap != nil && !ap.Nullable && ap.Default.Object != nil {
					return true
				}
				if needsDefault(v, ap) {
					return true
				}
			}
		}
	case []any:
		for _, v := range x {
			if v == nil && s.Items != nil && !s.Items.Nullable && s.Items.Default.Object != nil {
				return true
			}
			if needsDefault(v, s.Items) {
				return true
			}
		}
	}
	return false
}

// countNulls counts the nulls in a decoded object.
func countNulls(v any) int {
	switch v := v.(type) {
	case nil:
		return 1
	case map[string]any:
		n := 0
		for _, x := range v {
			n += countNulls(x)
		}
		return n
	case []any:
		n := 0
		for _, x := range v {
			n += countNulls(x)
		}
		return n
	}
	return 0
}

// plainStoredMeta reports metadata that Kubernetes' ObjectMeta round trip
// (schemaobjectmeta.GetObjectMeta, then SetObjectMeta) gives back as it
// is, generation aside: only the fields of ObjectMeta, each of its type
// in the form ObjectMeta encodes it (no empty strings or lists that
// omitempty would drop, times in UTC to the second), no null anywhere.
// Metadata as crdserver writes it is plain; anything else takes the
// round trip. A differential test holds it to the round trip.
func plainStoredMeta(m map[string]any) bool {
	for k, v := range m {
		switch k {
		case "name", "generateName", "namespace", "selfLink", "uid", "resourceVersion":
			if s, ok := v.(string); !ok || s == "" {
				return false
			}
		case "generation":
			if n, ok := v.(int64); !ok || n == 0 {
				return false
			}
		case "deletionGracePeriodSeconds":
			if _, ok := v.(int64); !ok {
				return false
			}
		case "creationTimestamp", "deletionTimestamp":
			if !plainTime(v) {
				return false
			}
		case "labels", "annotations":
			if !plainStringMap(v) {
				return false
			}
		case "finalizers":
			l, ok := v.([]any)
			if !ok || len(l) == 0 {
				return false
			}
			for _, x := range l {
				if _, ok := x.(string); !ok {
					return false
				}
			}
		case "ownerReferences":
			l, ok := v.([]any)
			if !ok || len(l) == 0 {
				return false
			}
			for _, x := range l {
				if !plainOwnerReference(x) {
					return false
				}
			}
		case "managedFields":
			l, ok := v.([]any)
			if !ok || len(l) == 0 {
				return false
			}
			for _, x := range l {
				if !plainManagedFieldsEntry(x) {
					return false
				}
			}
		default:
			return false
		}
	}
	return true
}

// plainTime: a metav1.Time as it encodes itself (RFC 3339 in UTC, to the
// second: 2006-01-02T15:04:05Z), a valid one, not the zero time.
func plainTime(v any) bool {
	s, ok := v.(string)
	if !ok || len(s) != len("2006-01-02T15:04:05Z") || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':' || s[19] != 'Z' {
		return false
	}
	num := func(i, n int) int {
		v := 0
		for _, c := range []byte(s[i : i+n]) {
			if c < '0' || c > '9' {
				return -1
			}
			v = v*10 + int(c-'0')
		}
		return v
	}
	year, month, day := num(0, 4), num(5, 2), num(8, 2)
	hour, minute, second := num(11, 2), num(14, 2), num(17, 2)
	if year < 0 || month < 1 || month > 12 || day < 1 || hour < 0 || hour > 23 || minute < 0 || minute > 59 || second < 0 || second > 59 {
		return false
	}
	if day > time.Date(year, time.Month(month)+1, 0, 0, 0, 0, 0, time.UTC).Day() {
		return false
	}
	return year != 1 || month != 1 || day != 1 || hour != 0 || minute != 0 || second != 0
}

func plainStringMap(v any) bool {
	m, ok := v.(map[string]any)
	if !ok || len(m) == 0 {
		return false
	}
	for _, x := range m {
		if _, ok := x.(string); !ok {
			return false
		}
	}
	return true
}

func plainOwnerReference(v any) bool {
	m, ok := v.(map[string]any)
	if !ok {
		return false
	}
	required := 0
	for k, x := range m {
		switch k {
		case "apiVersion", "kind", "name", "uid":
			if _, ok := x.(string); !ok {
				return false
			}
			required++
		case "controller", "blockOwnerDeletion":
			if _, ok := x.(bool); !ok {
				return false
			}
		default:
			return false
		}
	}
	return required == 4
}

func plainManagedFieldsEntry(v any) bool {
	m, ok := v.(map[string]any)
	if !ok {
		return false
	}
	for k, x := range m {
		switch k {
		case "manager", "operation", "apiVersion", "fieldsType", "subresource":
			if s, ok := x.(string); !ok || s == "" {
				return false
			}
		case "time":
			if !plainTime(x) {
				return false
			}
		case "fieldsV1":
			if !plainFields(x) {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// plainFields: a fieldsV1 set, objects all the way down.
func plainFields(v any) bool {
	m, ok := v.(map[string]any)
	if !ok {
		return false
	}
	for _, x := range m {
		if !plainFields(x) {
			return false
		}
	}
	return true
}
