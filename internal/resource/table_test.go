package resource

import (
	"context"
	"net/http"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

const (
	asTable        = "application/json;as=Table;v=v1;g=meta.k8s.io"
	asPartial      = "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io"
	asPartialList  = "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io"
	asTableV1beta1 = "application/json;as=Table;v=v1beta1;g=meta.k8s.io"
)

func (e *engine) get(path, accept string) answer {
	e.t.Helper()
	return e.send("GET", path, map[string]string{"Accept": accept}, "")
}

// rows returns the first cell of each row of a Table answer and each
// row's object.
func rows(t *testing.T, a answer) ([]string, []map[string]any) {
	t.Helper()
	if (a.code != http.StatusOK && a.code != http.StatusCreated) || a.body["kind"] != "Table" {
		t.Fatalf("not a Table: %d %s", a.code, a.raw)
	}
	var names []string
	var objs []map[string]any
	for _, r := range a.body["rows"].([]any) {
		row := r.(map[string]any)
		names = append(names, row["cells"].([]any)[0].(string))
		o, _ := row["object"].(map[string]any)
		objs = append(objs, o)
	}
	return names, objs
}

func TestTableOfAnObject(t *testing.T) {
	e := fiveWidgets(t)
	a := e.get(widgetsPath+"/b", asTable)
	names, objs := rows(t, a)
	if a.body["apiVersion"] != "meta.k8s.io/v1" || strings.Join(names, ",") != "b" || meta(a)["resourceVersion"] != "3" {
		t.Fatalf("table: %s", a.raw)
	}
	cols := a.body["columnDefinitions"].([]any)
	if len(cols) != 2 || cols[0].(map[string]any)["name"] != "Name" || cols[0].(map[string]any)["format"] != "name" || cols[1].(map[string]any)["name"] != "Age" || cols[1].(map[string]any)["type"] != "date" {
		t.Fatalf("columns: %v", cols)
	}
	// Each row carries the object's metadata by default.
	if objs[0]["kind"] != "PartialObjectMetadata" || objs[0]["apiVersion"] != "meta.k8s.io/v1" || objs[0]["metadata"].(map[string]any)["name"] != "b" || objs[0]["spec"] != nil {
		t.Fatalf("row object: %v", objs[0])
	}
	// includeObject=Object: the whole object; None: nothing.
	if _, objs = rows(t, e.get(widgetsPath+"/b?includeObject=Object", asTable)); objs[0]["kind"] != "Widget" || objs[0]["spec"] == nil {
		t.Fatalf("includeObject=Object: %v", objs[0])
	}
	if _, objs = rows(t, e.get(widgetsPath+"/b?includeObject=None", asTable)); objs[0] != nil {
		t.Fatalf("includeObject=None: %v", objs[0])
	}
	e.get(widgetsPath+"/b?includeObject=Some", asTable).status(t, 400, metav1.StatusReasonBadRequest, `unrecognized includeObject value: "Some"`)
	// meta.k8s.io/v1beta1 Tables too.
	if a = e.get(widgetsPath+"/b", asTableV1beta1); a.body["apiVersion"] != "meta.k8s.io/v1beta1" {
		t.Fatalf("v1beta1: %s", a.raw)
	}
	// A Table of a missing object is the 404.
	e.get(widgetsPath+"/nope", asTable).status(t, 404, metav1.StatusReasonNotFound, `widgets.example.com "nope" not found`)
}

func TestTableOfAList(t *testing.T) {
	e := fiveWidgets(t)
	a := e.get(widgetsPath+"?limit=3", asTable)
	names, objs := rows(t, a)
	md := meta(a)
	if strings.Join(names, ",") != "a,b,c" || md["resourceVersion"] != "6" || md["continue"] == "" || md["remainingItemCount"] != 1.0 || len(objs) != 3 {
		t.Fatalf("table of a page: %v %v", names, md)
	}
	names, _ = rows(t, e.get(widgetsPath+"?limit=3&continue="+md["continue"].(string), asTable))
	if strings.Join(names, ",") != "d" {
		t.Fatalf("next page: %v", names)
	}
	// An empty list has rows, none.
	a = e.get("/apis/example.com/v1/namespaces/empty/widgets", asTable)
	if names, _ = rows(t, a); len(names) != 0 || !strings.Contains(a.raw, `"rows":[]`) {
		t.Fatalf("empty: %s", a.raw)
	}
}

// nameOnly is a table convertor with one column.
type nameOnly struct{}

func (nameOnly) ConvertToTable(_ context.Context, version string, objs []*unstructured.Unstructured, _ bool) (*metav1.Table, error) {
	tbl := &metav1.Table{ColumnDefinitions: []metav1.TableColumnDefinition{{Name: "Widget", Type: "string"}}}
	for _, o := range objs {
		tbl.Rows = append(tbl.Rows, metav1.TableRow{Cells: []any{version + ":" + o.GetName()}})
	}
	return tbl, nil
}

func TestTableOfAResourcesConvertor(t *testing.T) {
	e := fiveWidgets(t)
	e.res.Table = nameOnly{}
	a := e.get(widgetsPath+"?labelSelector=tier%3Ddb", asTable)
	names, _ := rows(t, a)
	if strings.Join(names, ",") != "v1:b,v1:d" || a.body["kind"] != "Table" || a.body["apiVersion"] != "meta.k8s.io/v1" {
		t.Fatalf("rows: %v %s", names, a.raw)
	}
}

func TestPartialObjectMetadata(t *testing.T) {
	e := fiveWidgets(t)
	a := e.get(widgetsPath+"/b", asPartial)
	if a.code != 200 || a.body["kind"] != "PartialObjectMetadata" || a.body["apiVersion"] != "meta.k8s.io/v1" || meta(a)["name"] != "b" || meta(a)["labels"].(map[string]any)["tier"] != "db" || a.body["spec"] != nil {
		t.Fatalf("partial object: %d %s", a.code, a.raw)
	}
	a = e.get(widgetsPath+"?limit=2", asPartialList)
	items, _ := a.body["items"].([]any)
	md := meta(a)
	if a.code != 200 || a.body["kind"] != "PartialObjectMetadataList" || len(items) != 2 || md["resourceVersion"] != "6" || md["continue"] == nil || md["remainingItemCount"] != 2.0 {
		t.Fatalf("partial list: %d %s", a.code, a.raw)
	}
	if it := items[0].(map[string]any); it["kind"] != "PartialObjectMetadata" || it["metadata"].(map[string]any)["name"] != "a" || it["spec"] != nil {
		t.Fatalf("partial item: %v", it)
	}
	// One kind for objects, the other for lists (Kubernetes adds the Go
	// type of what was read).
	e.get(widgetsPath, asPartial).status(t, 406, metav1.StatusReasonNotAcceptable, "you requested PartialObjectMetadata, but the requested object is a list")
	e.get(widgetsPath+"/b", asPartialList).status(t, 406, metav1.StatusReasonNotAcceptable, "you requested PartialObjectMetadataList, but the requested object is")
	// Media types the server does not have.
	e.get(widgetsPath+"/b", "application/xml").status(t, 406, metav1.StatusReasonNotAcceptable, "")
	e.get(widgetsPath+"/b", "application/json;as=Table;v=v2;g=meta.k8s.io").status(t, 406, metav1.StatusReasonNotAcceptable, "")
}

// kube-apiserver negotiates the answer of a write before writing, with
// the same transforms as a read (RequestScope.AllowsMediaTypeTransform):
// a create asked for as a Table answers 201 with the Table of the new
// object.
func TestTableOfAWrite(t *testing.T) {
	e := newEngine(t)
	a := e.send("POST", widgetsPath, map[string]string{"Accept": asTable, "Content-Type": "application/json"}, widget("t", ""))
	if a.code != http.StatusCreated {
		t.Fatalf("a create with Accept %s is answered %d %s, the object stored: %v (kube-apiserver: 201, a Table)", asTable, a.code, a.raw, e.stored("t") != nil)
	}
	if names, _ := rows(t, a); strings.Join(names, ",") != "t" {
		t.Fatalf("rows: %v", names)
	}
	// An answer the server cannot give is refused before the write.
	a = e.send("POST", widgetsPath, map[string]string{"Accept": "application/xml", "Content-Type": "application/json"}, widget("x", ""))
	a.status(t, http.StatusNotAcceptable, metav1.StatusReasonNotAcceptable, "")
	if e.stored("x") != nil {
		t.Fatal("a create refused for its answer's media type stored the object")
	}
}
