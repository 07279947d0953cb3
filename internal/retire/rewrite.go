package retire

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// pageSize is how many objects a list page of a rewrite holds.
const pageSize = 500

// tries is how often one object's rewrite is tried when it changed
// under it.
const tries = 5

// fix says how an object would be rewritten: the JSON patch operations
// that rewrite it (after the test of its resourceVersion), or none.
type fix func(obj *unstructured.Unstructured) ([]patchOp, error)

type patchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// rewriteAll reads every object of a resource, page by page, and patches
// those fix rewrites, each guarded by its resourceVersion (an object that
// changed under it is read again). It tells out its progress and returns
// how many objects it rewrote.
func (c *Client) rewriteAll(ctx context.Context, gvr schema.GroupVersionResource, what string, f fix, out io.Writer) (int, error) {
	client := c.dyn.Resource(gvr)
	rewritten, seen := 0, 0
	opts := metav1.ListOptions{Limit: pageSize}
	for {
		page, err := client.List(ctx, opts)
		if err != nil {
			return rewritten, err
		}
		for i := range page.Items {
			done, err := c.rewriteOne(ctx, gvr, &page.Items[i], f)
			if err != nil {
				return rewritten, fmt.Errorf("%s %s: %w", gvr.Resource, objName(&page.Items[i]), err)
			}
			if done {
				rewritten++
			}
		}
		seen += len(page.Items)
		if page.GetContinue() == "" {
			break
		}
		fmt.Fprintf(out, "  %s: %d %s read, %d rewritten\n", what, seen, gvr.Resource, rewritten)
		opts.Continue = page.GetContinue()
	}
	return rewritten, nil
}

// rewriteOne patches one object as fix says, reading it again when it
// changed under the patch; it says whether it patched.
func (c *Client) rewriteOne(ctx context.Context, gvr schema.GroupVersionResource, obj *unstructured.Unstructured, f fix) (bool, error) {
	rc := c.dyn.Resource(gvr).Namespace(obj.GetNamespace())
	for try := 1; ; try++ {
		ops, err := f(obj)
		if err != nil || len(ops) == 0 {
			return false, err
		}
		ops = append([]patchOp{{Op: "test", Path: "/metadata/resourceVersion", Value: obj.GetResourceVersion()}}, ops...)
		body, err := json.Marshal(ops)
		if err != nil {
			return false, err
		}
		_, err = rc.Patch(ctx, obj.GetName(), types.JSONPatchType, body, metav1.PatchOptions{FieldManager: "crdserver-retire"})
		switch {
		case err == nil:
			return true, nil
		case apierrors.IsNotFound(err):
			return false, nil
		case try == tries || !changedUnder(err):
			return false, err
		}
		// Changed under the patch (its test failed): read it again.
		if obj, err = rc.Get(ctx, obj.GetName(), metav1.GetOptions{}); err != nil {
			if apierrors.IsNotFound(err) {
				return false, nil
			}
			return false, err
		}
	}
}

// changedUnder says whether a guarded patch failed because the object
// changed: its resourceVersion test failed (422) or it conflicted (409).
func changedUnder(err error) bool {
	var st apierrors.APIStatus
	if errors.As(err, &st) && st.Status().Code == http.StatusUnprocessableEntity {
		return true
	}
	return apierrors.IsConflict(err)
}

// managedFieldsFix rewrites the managedFields entries at from to to. An
// Update entry that then has the identity of another (same manager,
// operation, subresource and apiVersion) is merged into it: the union of
// their fields, the later time. The field paths are kept as they are:
// exact when the versions name fields alike, as conversion None requires.
func managedFieldsFix(from, to string) fix {
	return func(obj *unstructured.Unstructured) ([]patchOp, error) {
		entries := obj.GetManagedFields()
		if !hasManagedAt(entries, from) {
			return nil, nil
		}
		merged, err := relabel(entries, from, to)
		if err != nil {
			return nil, err
		}
		return []patchOp{{Op: "replace", Path: "/metadata/managedFields", Value: merged}}, nil
	}
}

func hasManagedAt(entries []metav1.ManagedFieldsEntry, apiVersion string) bool {
	for _, e := range entries {
		if e.APIVersion == apiVersion {
			return true
		}
	}
	return false
}

// relabel moves the managedFields entries at from to to, merging those
// that then share an identity.
func relabel(entries []metav1.ManagedFieldsEntry, from, to string) ([]metav1.ManagedFieldsEntry, error) {
	type identity struct{ manager, operation, subresource, apiVersion string }
	idOf := func(e metav1.ManagedFieldsEntry) identity {
		id := identity{e.Manager, string(e.Operation), e.Subresource, e.APIVersion}
		if e.Operation == metav1.ManagedFieldsOperationApply {
			id.apiVersion = "" // one Apply entry per manager, whatever its version
		}
		return id
	}
	var out []metav1.ManagedFieldsEntry
	at := map[identity]int{}
	for _, e := range entries {
		if e.APIVersion == from {
			e.APIVersion = to
		}
		id := idOf(e)
		i, ok := at[id]
		if !ok {
			at[id] = len(out)
			out = append(out, e)
			continue
		}
		prev := &out[i]
		union, err := unionFields(prev.FieldsV1, e.FieldsV1)
		if err != nil {
			return nil, fmt.Errorf("managedFields of %s: %w", e.Manager, err)
		}
		prev.FieldsV1 = union
		if e.Time != nil && (prev.Time == nil || prev.Time.Before(e.Time)) {
			prev.Time = e.Time
		}
	}
	return out, nil
}

// unionFields is the union of two managedFields field sets.
func unionFields(a, b *metav1.FieldsV1) (*metav1.FieldsV1, error) {
	set := func(f *metav1.FieldsV1) (*fieldpath.Set, error) {
		s := &fieldpath.Set{}
		if f == nil {
			return s, nil
		}
		raw := f.GetRawBytes()
		if len(raw) == 0 {
			return s, nil
		}
		return s, s.FromJSON(bytes.NewReader(raw))
	}
	sa, err := set(a)
	if err != nil {
		return nil, err
	}
	sb, err := set(b)
	if err != nil {
		return nil, err
	}
	raw, err := sa.Union(sb).ToJSON()
	if err != nil {
		return nil, err
	}
	return metav1.NewFieldsV1(string(raw)), nil
}

// ownerReferencesFix rewrites the ownerReferences to kind at from to to.
func ownerReferencesFix(kind, from, to string) fix {
	return func(obj *unstructured.Unstructured) ([]patchOp, error) {
		refs := obj.GetOwnerReferences()
		changed := false
		for i := range refs {
			if refs[i].APIVersion == from && refs[i].Kind == kind {
				refs[i].APIVersion = to
				changed = true
			}
		}
		if !changed {
			return nil, nil
		}
		return []patchOp{{Op: "replace", Path: "/metadata/ownerReferences", Value: refs}}, nil
	}
}

func objName(obj *unstructured.Unstructured) string {
	if obj.GetNamespace() != "" {
		return obj.GetNamespace() + "/" + obj.GetName()
	}
	return obj.GetName()
}
