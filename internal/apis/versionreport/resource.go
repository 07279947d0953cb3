package versionreport

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/crdserver/crdserver/internal/request"
	"github.com/crdserver/crdserver/internal/resource"
)

// Resource is the versionreports resource; inputs says what the server
// sees when a report is read.
func Resource(inputs func(ctx context.Context) (Inputs, error)) *resource.Resource {
	return &resource.Resource{
		Group: Group, Plural: Plural, Singular: strings.ToLower(Kind), Kind: Kind,
		Versions: []*resource.Version{{Name: Version}}, StorageVersion: Version,
		Verbs: []string{"get", "list"},
		Custom: func(w http.ResponseWriter, r *http.Request, info *request.Info, _ *resource.Version) {
			serve(w, r, info, inputs)
		},
	}
}

var tableOffer = request.Offer{Transforms: map[request.As][]string{
	request.AsTable: {"meta.k8s.io/v1", "meta.k8s.io/v1beta1"},
}}

func serve(w http.ResponseWriter, r *http.Request, info *request.Info, inputs func(ctx context.Context) (Inputs, error)) {
	gr := schema.GroupResource{Group: Group, Resource: Plural}
	if (info.Verb != "get" && info.Verb != "list") || info.Subresource != "" {
		request.WriteError(w, r, apierrors.NewMethodNotSupported(gr, info.Verb))
		return
	}
	t, err := request.Negotiate(r, tableOffer)
	if err != nil {
		request.WriteError(w, r, err)
		return
	}
	in, err := inputs(r.Context())
	if err != nil {
		request.WriteError(w, r, apierrors.NewInternalError(err))
		return
	}
	sel := labels.Everything()
	if s := r.URL.Query().Get("labelSelector"); s != "" {
		if sel, err = labels.Parse(s); err != nil {
			request.WriteError(w, r, apierrors.NewBadRequest(err.Error()))
			return
		}
	}
	// The CRDs to report on: the one a name or a crdserver.io/crd label
	// names, or all.
	var crds []string
	if info.Name != "" {
		_, crd, _ := strings.Cut(info.Name, ".")
		crds = []string{crd}
	} else if v, ok := sel.RequiresExactMatch(CRDLabel); ok {
		crds = []string{v}
	} else {
		for name := range in.CRDs {
			crds = append(crds, name)
		}
		sort.Strings(crds)
	}
	var items []VersionReport
	for _, rep := range Reports(in, crds) {
		if (info.Name == "" || rep.Name == info.Name) && sel.Matches(labels.Set(rep.Labels)) {
			items = append(items, rep)
		}
	}
	if info.Verb == "get" {
		if len(items) == 0 {
			request.WriteError(w, r, apierrors.NewNotFound(gr, info.Name))
			return
		}
		if t.As == request.AsTable {
			request.WriteObject(w, r, http.StatusOK, t, table(t, items))
			return
		}
		request.WriteObject(w, r, http.StatusOK, t, items[0])
		return
	}
	if t.As == request.AsTable {
		request.WriteObject(w, r, http.StatusOK, t, table(t, items))
		return
	}
	if items == nil {
		items = []VersionReport{}
	}
	request.WriteObject(w, r, http.StatusOK, t, VersionReportList{
		TypeMeta: metav1.TypeMeta{APIVersion: Group + "/" + Version, Kind: Kind + "List"},
		Items:    items,
	})
}

// columns are what kubectl get prints of a report.
var columns = []metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: "<version>.<CRD name>"},
	{Name: "Served", Type: "boolean", Description: "the version is served"},
	{Name: "Storage", Type: "boolean", Description: "the version is the storage version"},
	{Name: "Deprecated", Type: "boolean", Description: "the version is deprecated"},
	{Name: "Objects", Type: "integer", Description: "objects stored in the version"},
	{Name: "Clients", Type: "integer", Description: "clients that called the version within the window"},
	{Name: "References", Type: "integer", Description: "managedFields entries' managers, ownerReferences' resources, admission rules and ConversionRules that name the version"},
	{Name: "Removable", Type: "boolean", Description: "removing the version breaks nothing crdserver sees"},
	{Name: "Blockers", Type: "string", Description: "why not"},
}

func table(t request.Target, items []VersionReport) *metav1.Table {
	tbl := &metav1.Table{
		TypeMeta:          metav1.TypeMeta{APIVersion: t.Group + "/" + t.Version, Kind: "Table"},
		ColumnDefinitions: columns,
		Rows:              []metav1.TableRow{},
	}
	for i := range items {
		it := &items[i]
		st := &it.Status
		refs := len(st.References.ManagedFields) + len(st.References.OwnerReferences) + len(st.References.Admission)
		if st.References.ConversionRules != "" {
			refs++
		}
		var reasons []string
		for _, b := range st.Blockers {
			reasons = append(reasons, b.Reason)
		}
		meta, _ := json.Marshal(metav1.PartialObjectMetadata{
			TypeMeta:   metav1.TypeMeta{APIVersion: t.Group + "/" + t.Version, Kind: "PartialObjectMetadata"},
			ObjectMeta: it.ObjectMeta,
		})
		tbl.Rows = append(tbl.Rows, metav1.TableRow{
			Cells:  []any{it.Name, st.Served, st.Storage, st.Deprecated, st.Objects, len(st.Clients), refs, st.Removable, orNone(strings.Join(reasons, ","))},
			Object: runtime.RawExtension{Raw: meta},
		})
	}
	return tbl
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// String describes a report in one line (for logs and errors).
func (r *VersionReport) String() string {
	return fmt.Sprintf("%s: removable=%s, %d blockers", r.Name, strconv.FormatBool(r.Status.Removable), len(r.Status.Blockers))
}
