package resource

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/crdserver/crdserver/internal/request"
)

// TableConvertor turns objects into the rows of a metav1.Table, as
// `kubectl get` shows them.
type TableConvertor interface {
	// ConvertToTable returns the table of objs, all in version, with the
	// column definitions unless noHeaders. Each row's Object is left for
	// the caller to fill.
	ConvertToTable(ctx context.Context, version string, objs []*unstructured.Unstructured, noHeaders bool) (*metav1.Table, error)
}

// readOffer is what a get, list or watch can be turned into besides the
// object itself: Tables and metadata-only representations.
var readOffer = request.Offer{Transforms: map[request.As][]string{
	request.AsTable:                     {"meta.k8s.io/v1", "meta.k8s.io/v1beta1"},
	request.AsPartialObjectMetadata:     {"meta.k8s.io/v1", "meta.k8s.io/v1beta1"},
	request.AsPartialObjectMetadataList: {"meta.k8s.io/v1", "meta.k8s.io/v1beta1"},
}}

// includeObject reads the includeObject query parameter of a Table
// request.
func (c *call) includeObject() (metav1.IncludeObjectPolicy, error) {
	v := metav1.IncludeObjectPolicy(c.r.URL.Query().Get("includeObject"))
	switch v {
	case "", metav1.IncludeMetadata:
		return metav1.IncludeMetadata, nil
	case metav1.IncludeNone, metav1.IncludeObject:
		return v, nil
	}
	return "", apierrors.NewBadRequest(fmt.Sprintf("unrecognized includeObject value: %q", v))
}

func decodeUnstructured(raw []byte) (*unstructured.Unstructured, error) {
	var m map[string]any
	if err := utiljson.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	return &unstructured.Unstructured{Object: m}, nil
}

// partial returns the PartialObjectMetadata of an object, in group/version
// gv (meta.k8s.io/v1 or v1beta1).
func partial(u *unstructured.Unstructured, gv string) map[string]any {
	md, _ := u.Object["metadata"].(map[string]any)
	return map[string]any{"kind": "PartialObjectMetadata", "apiVersion": gv, "metadata": md}
}

// table builds the Table of converted objects (raws in the request's
// version) as the target asks.
func (c *call) table(t request.Target, raws [][]byte, noHeaders bool) (*metav1.Table, error) {
	include, err := c.includeObject()
	if err != nil {
		return nil, err
	}
	objs := make([]*unstructured.Unstructured, len(raws))
	for i, raw := range raws {
		if objs[i], err = decodeUnstructured(raw); err != nil {
			return nil, apierrors.NewInternalError(err)
		}
	}
	conv := c.res.Table
	if conv == nil {
		conv = DefaultTable{}
	}
	tbl, err := conv.ConvertToTable(c.ctx, c.ver.Name, objs, noHeaders)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	gv := t.Group + "/" + t.Version
	tbl.Kind, tbl.APIVersion = "Table", gv
	for i := range tbl.Rows {
		switch include {
		case metav1.IncludeObject:
			tbl.Rows[i].Object = runtime.RawExtension{Raw: raws[i]}
		case metav1.IncludeMetadata:
			tbl.Rows[i].Object = runtime.RawExtension{Raw: mustJSON(partial(objs[i], gv))}
		default:
			tbl.Rows[i].Object = runtime.RawExtension{}
		}
	}
	if tbl.Rows == nil {
		tbl.Rows = []metav1.TableRow{}
	}
	if !noHeaders && tbl.ColumnDefinitions == nil {
		tbl.ColumnDefinitions = []metav1.TableColumnDefinition{}
	}
	return tbl, nil
}

// readOf is what a read answered: one object or a page of a collection,
// at a revision.
type readOf struct {
	list bool
	rev  int64
	// code is the answer's status (0: 200); a write's answer is 201 when
	// it created the object.
	code int
	// cont and remaining continue a page of a collection.
	cont      string
	remaining int64
}

// objectAt is a read of one object at rev.
func objectAt(rev int64) readOf { return readOf{rev: rev} }

// answerAt is the answer of a write with code, the object at rev.
func answerAt(code int, rev int64) readOf { return readOf{rev: rev, code: code} }

// wholeListAt is a read of a whole collection at rev.
func wholeListAt(rev int64) readOf { return readOf{list: true, rev: rev} }

// pageAt is a read of a page of a collection at rev, continued by cont
// with remaining items left.
func pageAt(rev int64, cont string, remaining int64) readOf {
	return readOf{list: true, rev: rev, cont: cont, remaining: remaining}
}

// transform answers a read whose target is not the object itself: a Table
// or PartialObjectMetadata(List).
func (c *call) transform(t request.Target, raws [][]byte, read readOf) {
	list, rev, cont, remaining := read.list, read.rev, read.cont, read.remaining
	code := read.code
	if code == 0 {
		code = http.StatusOK
	}
	switch t.As {
	case request.AsTable:
		tbl, err := c.table(t, raws, false)
		if err != nil {
			c.fail(err)
			return
		}
		tbl.ResourceVersion = itoa(rev)
		if list {
			tbl.Continue = cont
			if cont != "" && remaining > 0 {
				tbl.RemainingItemCount = &remaining
			}
		}
		request.WriteObject(c.w, c.r, code, t, tbl)
	case request.AsPartialObjectMetadata, request.AsPartialObjectMetadataList:
		gv := t.Group + "/" + t.Version
		if list != (t.As == request.AsPartialObjectMetadataList) {
			what := "an object"
			if list {
				what = "a list"
			}
			c.fail(request.NewStatusError(http.StatusNotAcceptable, metav1.StatusReasonNotAcceptable,
				fmt.Sprintf("you requested %s, but the requested object is %s", t.As, what)))
			return
		}
		items := make([]map[string]any, 0, len(raws))
		for _, raw := range raws {
			u, err := decodeUnstructured(raw)
			if err != nil {
				c.fail(apierrors.NewInternalError(err))
				return
			}
			items = append(items, partial(u, gv))
		}
		if !list {
			request.WriteObject(c.w, c.r, code, t, items[0])
			return
		}
		md := map[string]any{"resourceVersion": itoa(rev)}
		if cont != "" {
			md["continue"] = cont
			if remaining > 0 {
				md["remainingItemCount"] = remaining
			}
		}
		request.WriteObject(c.w, c.r, code, t, map[string]any{"kind": "PartialObjectMetadataList", "apiVersion": gv, "metadata": md, "items": items})
	}
}

// watchTransform encodes one watch event's object for the target.
func (c *call) watchTransform(t request.Target, raw []byte, noHeaders bool) ([]byte, error) {
	switch t.As {
	case request.AsTable:
		tbl, err := c.table(t, [][]byte{raw}, noHeaders)
		if err != nil {
			return nil, err
		}
		if u, err := decodeUnstructured(raw); err == nil {
			tbl.ResourceVersion = u.GetResourceVersion()
		}
		return json.Marshal(tbl)
	case request.AsPartialObjectMetadata:
		u, err := decodeUnstructured(raw)
		if err != nil {
			return nil, err
		}
		return json.Marshal(partial(u, t.Group+"/"+t.Version))
	}
	return raw, nil
}

// DefaultTable shows Name and Age, as Kubernetes does for custom resources
// without printer columns.
type DefaultTable struct{}

// ConvertToTable implements TableConvertor.
func (DefaultTable) ConvertToTable(_ context.Context, _ string, objs []*unstructured.Unstructured, noHeaders bool) (*metav1.Table, error) {
	tbl := &metav1.Table{}
	if !noHeaders {
		tbl.ColumnDefinitions = []metav1.TableColumnDefinition{
			{Name: "Name", Type: "string", Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]},
			{Name: "Age", Type: "date", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]},
		}
	}
	for _, u := range objs {
		tbl.Rows = append(tbl.Rows, metav1.TableRow{Cells: []any{u.GetName(), Age(u.GetCreationTimestamp())}})
	}
	return tbl, nil
}

// Age is how kubectl shows a timestamp: a human duration since then.
func Age(ts metav1.Time) string {
	if ts.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(time.Since(ts.Time))
}
