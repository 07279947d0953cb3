package apiextensions

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"strconv"
	"testing"
	"time"

	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/crdserver/crdserver/internal/fixtures"
	"github.com/crdserver/crdserver/internal/resource"
)

// written is a CRD as the write path stores it: normalized as a request
// body is, prepared as a create is, in the engine's encoding.
func written(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition) []byte {
	t.Helper()
	crd = crd.DeepCopy()
	crd.TypeMeta = metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"}
	crd.UID, crd.CreationTimestamp = "8f1c5b0e-0000-4000-8000-000000000001", metav1.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	raw, err := json.Marshal(crd)
	if err != nil {
		t.Fatal(err)
	}
	obj, err := resource.DecodeObject(raw)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := (crdStrategy{}).Normalize(obj); err != nil {
		t.Fatal(err)
	}
	(crdStrategy{}).PrepareForCreate(context.Background(), obj)
	out, err := obj.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// What the write path stores reads back from storage exactly as it was
// written: CRDStorage may answer a read of what it wrote with what it was
// given, without converting.
func TestStoredRoundTrip(t *testing.T) {
	crds, _, err := fixtures.Corpus()
	if err != nil {
		t.Fatal(err)
	}
	fresh := NewCRDStorage() // remembers nothing: converts every read
	for _, crd := range crds {
		v1 := written(t, crd)
		stored, err := fresh.ToStorage(context.Background(), CRDPrefix+crd.Name, v1)
		if err != nil {
			t.Fatal(err)
		}
		fresh = NewCRDStorage()
		back, err := fresh.FromStorage(context.Background(), CRDPrefix+crd.Name, stored)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(back, v1) {
			t.Errorf("%s: stored and read again, it is not what was written", crd.Name)
		}
	}
}

func TestStorageRemembers(t *testing.T) {
	crds, err := fixtures.Sample()
	if err != nil {
		t.Fatal(err)
	}
	s := NewCRDStorage()
	key := CRDPrefix + crds[0].Name
	v1 := written(t, crds[0])
	stored, err := s.ToStorage(context.Background(), key, v1)
	if err != nil || !bytes.Contains(stored, []byte(`"apiVersion":"apiextensions.k8s.io/v1beta1"`)) {
		t.Fatalf("stored %.100s, %v", stored, err)
	}
	if back, ok := s.recall(key, stored); !ok || !bytes.Equal(back, v1) {
		t.Fatal("a write is not remembered")
	}
	if _, ok := s.recall(CRDPrefix+"other", stored); ok {
		t.Fatal("remembered under another key")
	}
	// Other bytes at the key are converted, and remembered in turn.
	other := written(t, crds[1])
	otherStored, _ := NewCRDStorage().ToStorage(context.Background(), key, other)
	back, err := s.FromStorage(context.Background(), key, otherStored)
	if err != nil || !bytes.Equal(back, other) {
		t.Fatalf("read of other bytes: %v", err)
	}
	if got, ok := s.recall(key, otherStored); !ok || !bytes.Equal(got, other) {
		t.Fatal("a converted read is not remembered")
	}
	// Within a bound, the oldest forgotten first.
	s.limit = 10 * (len(stored) + len(v1))
	for i := range 20 {
		_, _ = s.ToStorage(context.Background(), key+strconv.Itoa(i), v1)
	}
	if s.bytes > s.limit || len(s.recent) != 10 {
		t.Fatalf("remembers %d bytes in %d CRDs", s.bytes, len(s.recent))
	}
	if _, ok := s.recall(key+"19", stored); !ok {
		t.Fatal("the newest is forgotten")
	}
	if _, ok := s.recall(key+"0", stored); ok {
		t.Fatal("the oldest is remembered")
	}
}

// The preparations edit the decoded object as Kubernetes' strategy edits
// the typed CRD (the oracle here, through the type): the same bytes.
func TestPreparationsAsTyped(t *testing.T) {
	crds, _, err := fixtures.Corpus()
	if err != nil {
		t.Fatal(err)
	}
	typed := func(obj *resource.Object, edit func(*apiextensionsv1.CustomResourceDefinition)) []byte {
		t.Helper()
		crd, err := toCRD(obj)
		if err != nil {
			t.Fatal(err)
		}
		edit(crd)
		out := &resource.Object{}
		fromCRD(crd, out)
		b, err := out.Encode()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	storage := func(crd *apiextensionsv1.CustomResourceDefinition) string {
		for _, v := range crd.Spec.Versions {
			if v.Storage {
				return v.Name
			}
		}
		return ""
	}
	ctx := context.Background()
	for i, crd := range crds {
		stored, err := resource.DecodeObject(written(t, crd))
		if err != nil {
			t.Fatal(err)
		}
		stored.Meta.ResourceVersion = "7"
		// Create: status reset to the storage version, generation 1.
		obj, _ := resource.DecodeObject(written(t, crd))
		obj.Content["status"] = map[string]any{"storedVersions": []any{"old"}}
		want := typed(obj, func(c *apiextensionsv1.CustomResourceDefinition) {
			c.Status = apiextensionsv1.CustomResourceDefinitionStatus{StoredVersions: []string{storage(c)}}
			c.Generation = 1
		})
		(crdStrategy{}).PrepareForCreate(ctx, obj)
		if got, _ := obj.Encode(); !bytes.Equal(got, want) {
			t.Errorf("%s: PrepareForCreate:\n%s\nwant\n%s", crd.Name, got, want)
		}
		// Update: the stored status kept (the storage version added), the
		// generation moved only by a change of the spec.
		changed := crd.DeepCopy()
		if i%2 == 0 {
			changed.Spec.Versions[0].Schema.OpenAPIV3Schema.Description += " (changed)"
			changed.Spec.Versions[len(changed.Spec.Versions)-1].Storage = true
			changed.Spec.Versions[0].Storage = len(changed.Spec.Versions) == 1
		}
		obj, _ = resource.DecodeObject(written(t, changed))
		old, _ := toCRD(stored)
		old.Status.StoredVersions = []string{"v0"}
		old.Status.AcceptedNames = old.Spec.Names
		oldObj := &resource.Object{}
		fromCRD(old, oldObj)
		oldObj.Meta.Generation = 3
		want = typed(obj, func(c *apiextensionsv1.CustomResourceDefinition) {
			c.Status = old.Status
			if !reflect.DeepEqual(c.Spec, old.Spec) {
				c.Generation = 4
			} else {
				c.Generation = 3
			}
			c.Status.StoredVersions = append(c.Status.StoredVersions, storage(c))
		})
		obj.Meta.Generation = 3
		(crdStrategy{}).PrepareForUpdate(ctx, obj, oldObj)
		if got, _ := obj.Encode(); !bytes.Equal(got, want) {
			t.Errorf("%s: PrepareForUpdate:\n%.300s\nwant\n%.300s", crd.Name, got, want)
		}
		// Delete: marked, the cleanup finalizer added, Terminating.
		obj, _ = resource.DecodeObject(written(t, crd))
		obj.Meta.Finalizers = []string{"example.com/keep"}
		if _, err := (crdStrategy{}).BeforeDelete(ctx, obj); err != nil {
			t.Fatal(err)
		}
		marked := obj.Meta.DeletionTimestamp
		obj2, _ := resource.DecodeObject(written(t, crd))
		obj2.Meta.Finalizers = []string{"example.com/keep"}
		want = typed(obj2, func(c *apiextensionsv1.CustomResourceDefinition) {
			zero := int64(0)
			c.DeletionTimestamp, c.DeletionGracePeriodSeconds = marked, &zero
			c.Finalizers = append(c.Finalizers, apiextensionsv1.CustomResourceCleanupFinalizer)
			apihelpers.SetCRDCondition(c, apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.Terminating, Status: apiextensionsv1.ConditionTrue,
				Reason: "InstanceDeletionPending", Message: "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon"})
			// SetCRDCondition stamps its own time: take the one BeforeDelete set.
			for i := range c.Status.Conditions {
				c.Status.Conditions[i].LastTransitionTime = statusOf(obj).Conditions[i].LastTransitionTime
			}
		})
		if got, _ := obj.Encode(); !bytes.Equal(got, want) {
			t.Errorf("%s: BeforeDelete:\n%.300s\nwant\n%.300s", crd.Name, got, want)
		}
	}
}
