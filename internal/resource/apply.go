package resource

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/crdserver/crdserver/internal/request"
	"github.com/crdserver/crdserver/internal/store"
)

var patchOptions = schema.GroupKind{Group: metav1.GroupName, Kind: "PatchOptions"}

// apply answers PATCH with application/apply-patch+yaml: server-side
// apply. The applied configuration is merged into the object by
// Kubernetes' field manager (ownership, conflicts, force); an object that
// does not exist is created.
func (c *call) apply(sub string) {
	dry, err := c.dryRun("PatchOptions")
	if err != nil {
		c.fail(err)
		return
	}
	directive, err := c.fieldValidation("PatchOptions")
	if err != nil {
		c.fail(err)
		return
	}
	manager, force, err := c.applyOptions()
	if err != nil {
		c.fail(err)
		return
	}
	if c.res.FieldManagers == nil {
		c.fail(request.UnsupportedMediaType(request.JSONPatch + ", " + request.MergePatch))
		return
	}
	fm, err := c.res.FieldManagers.FieldManager(c.ver.Name, sub)
	if err != nil {
		c.fail(apierrors.NewInternalError(err))
		return
	}
	body, err := request.ReadBody(c.r)
	if err != nil {
		c.fail(err)
		return
	}
	content, err := request.DecodeObject(body, "application/yaml", c.res.Kind)
	if err != nil {
		c.fail(err)
		return
	}
	patch := &unstructured.Unstructured{Object: content}
	if patch.GetName() != "" && patch.GetName() != c.info.Name {
		c.fail(apierrors.NewBadRequest("the name of the object (" + patch.GetName() + ") does not match the name on the URL (" + c.info.Name + ")"))
		return
	}
	applyTo := func(live map[string]any) (*Object, error) {
		out, err := fm.Apply(&unstructured.Unstructured{Object: live}, patch, manager, force)
		if err != nil {
			return nil, applyError(err)
		}
		// Duplicate fields in the applied YAML, as Kubernetes checks them
		// once the apply succeeded.
		if directive == metav1.FieldValidationStrict || directive == metav1.FieldValidationWarn {
			if err := sigsyaml.UnmarshalStrict(body, &map[string]any{}); err != nil {
				if directive == metav1.FieldValidationStrict {
					return nil, apierrors.NewBadRequest(fmt.Sprintf("error strict decoding patch: %v", err))
				}
				for _, w := range yamlWarnings(err.Error()) {
					request.AddWarning(c.w, w)
				}
			}
		}
		obj, errs := NewObject(out.(*unstructured.Unstructured).Object)
		if len(errs) > 0 {
			return nil, c.invalid("", c.info.Name, errs)
		}
		return obj, nil
	}

	// The object may go or come between the read that decides and the
	// write: apply again, as Kubernetes' apply creates an object that is
	// not there and updates one that is, and never answers 404 or 409
	// AlreadyExists for that.
	for attempt := 0; ; attempt++ {
		code, raw, err := c.applyOnce(sub, dry, applyTo)
		if sub == "" && attempt < applyRetries && (apierrors.IsNotFound(err) || apierrors.IsAlreadyExists(err)) {
			continue
		}
		if err != nil {
			c.fail(err)
			return
		}
		c.respond(code, raw)
		return
	}
}

// applyRetries bounds how often an apply starts again because the object
// went or came meanwhile.
const applyRetries = 5

// applyOnce applies to the object as it is: creates it if there is none.
func (c *call) applyOnce(sub string, dry bool, applyTo func(map[string]any) (*Object, error)) (int, []byte, error) {
	key := c.res.Key(c.namespace, c.info.Name)
	if _, _, err := c.h.Store.Get(c.ctx, key, 0); errors.Is(err, store.ErrNotFound) {
		if sub != "" {
			return 0, nil, c.notFound(c.info.Name)
		}
		live := &unstructured.Unstructured{}
		live.SetAPIVersion(c.apiVersion())
		live.SetKind(c.res.Kind)
		live.SetName(c.info.Name)
		live.SetNamespace(c.namespace)
		obj, err := applyTo(live.Object)
		if err != nil {
			return 0, nil, err
		}
		if err := c.checkTypeMeta(obj.APIVersion(), obj.Kind(), obj.Meta.Name); err != nil {
			return 0, nil, err
		}
		raw, err := c.createObject(obj, dry)
		return http.StatusCreated, raw, err
	}
	raw, err := c.guaranteedUpdate(c.info.Name, sub, dry, func(cur *Object) (*Object, error) {
		return applyTo(cur.ToUnstructured())
	})
	return http.StatusOK, raw, err
}

// applyOptions reads the field manager (required) and force of an apply.
func (c *call) applyOptions() (manager string, force bool, err error) {
	if err := c.checkManagerName("PatchOptions"); err != nil {
		return "", false, err
	}
	manager = c.r.URL.Query().Get("fieldManager")
	if manager == "" {
		return "", false, apierrors.NewInvalid(patchOptions, "", field.ErrorList{field.Required(field.NewPath("fieldManager"), "is required for apply patch")})
	}
	if f := c.r.URL.Query().Get("force"); f != "" {
		if force, err = strconv.ParseBool(f); err != nil {
			return "", false, apierrors.NewBadRequest(fmt.Sprintf("invalid force value %q", f))
		}
	}
	return manager, force, nil
}

// applyError is the answer to a field manager's failed apply: its own
// status (a conflict), or, for a patch that does not fit the schema, 400
// with the text Kubernetes sends with a 500 (it is the client's mistake).
func applyError(err error) error {
	var se apierrors.APIStatus
	if errors.As(err, &se) {
		return err
	}
	return apierrors.NewBadRequest(err.Error())
}

// yamlWarnings splits a strict YAML decoding error into one warning per
// problem, as Kubernetes words them.
func yamlWarnings(msg string) []string {
	for _, prefix := range []string{"yaml: unmarshal errors:\n", "error converting YAML to JSON: yaml: unmarshal errors:\n"} {
		if rest, ok := strings.CutPrefix(msg, prefix); ok {
			lines := strings.Split(rest, "\n")
			for i, l := range lines {
				lines[i] = strings.TrimSpace(l)
			}
			return lines
		}
	}
	return []string{msg}
}
