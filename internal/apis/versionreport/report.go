package versionreport

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	rulesv1alpha1 "github.com/crdserver/crdserver/internal/apis/conversionrules/v1alpha1"
	"github.com/crdserver/crdserver/internal/resource"
	"github.com/crdserver/crdserver/internal/store"
	"github.com/crdserver/crdserver/internal/usage"
)

// names is how many object names a report gives of each kind.
const names = 5

// Inputs are what reports are made from, as the server sees it now.
type Inputs struct {
	// CRDs are the stored CRDs by name (their schemas are not read).
	CRDs map[string]*apiextensionsv1.CustomResourceDefinition
	// Objects returns the watch cache of a CRD's objects (nil if none).
	Objects func(crd string) *store.Cache
	// Resources are every served resource: their objects'
	// ownerReferences are read, and the admission configurations among
	// them.
	Resources []*resource.Resource
	// Rules returns a CRD's ConversionRules (nil if none).
	Rules func(crd string) *rulesv1alpha1.ConversionRules
	// Clients are the clients of every version within Window (every
	// replica's), Overflow the requests of those not told apart by
	// group/version.
	Clients  []usage.Entry
	Overflow map[string]int64
	Window   time.Duration
}

// Reports makes the reports of the versions of the named CRDs.
func Reports(in Inputs, crds []string) []VersionReport {
	owners := ownerIndex(in.Resources)
	adm := admissionRules(in.Resources)
	var out []VersionReport
	for _, name := range crds {
		crd := in.CRDs[name]
		if crd == nil {
			continue
		}
		out = append(out, reportCRD(in, crd, owners, adm)...)
	}
	return out
}

// reportCRD makes the reports of one CRD's versions: those of its spec,
// then any status.storedVersions still names.
func reportCRD(in Inputs, crd *apiextensionsv1.CustomResourceDefinition, owners map[ownerKey]*counted, adm []admissionConfig) []VersionReport {
	group := crd.Spec.Group
	var versions []string
	storage := ""
	for _, v := range crd.Spec.Versions {
		versions = append(versions, v.Name)
		if v.Storage {
			storage = v.Name
		}
	}
	for _, v := range crd.Status.StoredVersions {
		if !slices.Contains(versions, v) {
			versions = append(versions, v)
		}
	}
	stored, managed := scanObjects(in.Objects(crd.Name), group, versions)
	rules := (*rulesv1alpha1.ConversionRules)(nil)
	if in.Rules != nil {
		rules = in.Rules(crd.Name)
	}
	var out []VersionReport
	for _, v := range versions {
		r := VersionReport{
			TypeMeta:   metav1.TypeMeta{APIVersion: Group + "/" + Version, Kind: Kind},
			ObjectMeta: metav1.ObjectMeta{Name: v + "." + crd.Name, Labels: map[string]string{CRDLabel: crd.Name}},
			Spec:       Spec{CRD: crd.Name, Group: group, Version: v},
		}
		st := &r.Status
		st.StorageVersion = storage
		st.Window = in.Window.String()
		for _, sv := range crd.Spec.Versions {
			if sv.Name == v {
				st.Served, st.Storage, st.Deprecated = sv.Served, sv.Storage, sv.Deprecated
				if sv.DeprecationWarning != nil {
					st.DeprecationWarning = *sv.DeprecationWarning
				}
			}
		}
		st.InStoredVersions = slices.Contains(crd.Status.StoredVersions, v)
		if c := stored[v]; c != nil {
			st.Objects, st.ObjectNames = c.n, c.names
		}
		st.Clients, st.ClientsOverflow = clientsOf(in, group, crd.Spec.Names.Plural, v)
		for _, m := range sortedKeys(managed[v]) {
			c := managed[v][m]
			st.References.ManagedFields = append(st.References.ManagedFields, ManagedFields{Manager: m, Objects: c.n, Names: c.names})
		}
		for k, c := range owners {
			if k.apiVersion == group+"/"+v && k.kind == crd.Spec.Names.Kind {
				st.References.OwnerReferences = append(st.References.OwnerReferences, OwnerReferences{Resource: k.resource, Objects: c.n, Names: c.names})
			}
		}
		sort.Slice(st.References.OwnerReferences, func(i, j int) bool {
			return st.References.OwnerReferences[i].Resource < st.References.OwnerReferences[j].Resource
		})
		var remaining []string
		for _, sv := range crd.Spec.Versions {
			if sv.Served && sv.Name != v {
				remaining = append(remaining, sv.Name)
			}
		}
		for _, a := range adm {
			if a.stopsMatching(group, crd.Spec.Names.Plural, v, remaining) {
				st.References.Admission = append(st.References.Admission, a.rule)
			}
		}
		if rules != nil && (rules.Spec.Hub == v || slices.ContainsFunc(rules.Spec.Versions, func(vr rulesv1alpha1.VersionRules) bool { return vr.Name == v })) {
			st.References.ConversionRules = rules.Name
		}
		st.Blockers = blockers(crd, r)
		st.Removable = len(st.Blockers) == 0
		out = append(out, r)
	}
	return out
}

// counted is a count of objects and the first of their names.
type counted struct {
	n     int64
	names []string
}

func (c *counted) add(it *store.Item) {
	c.n++
	if len(c.names) < names {
		c.names = append(c.names, itemName(it))
	}
}

// addAll counts n more objects, the first of them named.
func (c *counted) addAll(n int64, first []string) {
	c.n += n
	for _, name := range first {
		if len(c.names) >= names {
			break
		}
		c.names = append(c.names, name)
	}
}

func itemName(it *store.Item) string {
	if it.Namespace != "" {
		return it.Namespace + "/" + it.Name
	}
	return it.Name
}

// scanObjects reads a CRD's cached objects: how many are stored in each
// version, and which managers hold managedFields entries at each of the
// versions — from what the cache kept of each object when it was written
// (resource.VersionsOf).
func scanObjects(cache *store.Cache, group string, versions []string) (map[string]*counted, map[string]map[string]*counted) {
	stored := map[string]*counted{}
	managed := map[string]map[string]*counted{}
	if cache == nil {
		return stored, managed
	}
	// Objects alike share their Versions: count each Versions once with
	// the first names of its objects, then add them up.
	type alike struct {
		n     int64
		names []string
	}
	byVersions := map[*resource.Versions]*alike{}
	var order []*resource.Versions
	for _, it := range cache.List(store.ListOptions{}).Items {
		vs := resource.VersionsOf(it)
		a := byVersions[vs]
		if a == nil {
			a = &alike{}
			byVersions[vs] = a
			order = append(order, vs)
		}
		a.n++
		if len(a.names) < names {
			a.names = append(a.names, itemName(it))
		}
	}
	for _, vs := range order {
		a := byVersions[vs]
		v := strings.TrimPrefix(vs.APIVersion, group+"/")
		c := stored[v]
		if c == nil {
			c = &counted{}
			stored[v] = c
		}
		c.addAll(a.n, a.names)
		for _, e := range vs.Managed {
			mv, ok := strings.CutPrefix(e.APIVersion, group+"/")
			if !ok || !slices.Contains(versions, mv) {
				continue
			}
			byManager := managed[mv]
			if byManager == nil {
				byManager = map[string]*counted{}
				managed[mv] = byManager
			}
			m := byManager[e.Manager]
			if m == nil {
				m = &counted{}
				byManager[e.Manager] = m
			}
			m.addAll(a.n, a.names)
		}
	}
	return stored, managed
}

type ownerKey struct{ apiVersion, kind, resource string }

// ownerIndex counts the objects of every resource by the apiVersion and
// kind their ownerReferences name (each object once per pair).
func ownerIndex(resources []*resource.Resource) map[ownerKey]*counted {
	out := map[ownerKey]*counted{}
	for _, res := range resources {
		if res.Cache == nil {
			continue
		}
		gr := res.Plural
		if res.Group != "" {
			gr += "." + res.Group
		}
		for _, it := range res.Cache.List(store.ListOptions{}).Items {
			l, ok := it.Meta.(*resource.Lifecycle)
			if !ok || len(l.Owners) == 0 {
				continue
			}
			for i, o := range l.Owners {
				k := ownerKey{apiVersion: o.APIVersion, kind: o.Kind, resource: gr}
				if slices.ContainsFunc(l.Owners[:i], func(p resource.Owner) bool { return p.APIVersion == o.APIVersion && p.Kind == o.Kind }) {
					continue // each object once per apiVersion and kind
				}
				c := out[k]
				if c == nil {
					c = &counted{}
					out[k] = c
				}
				c.add(it)
			}
		}
	}
	return out
}

// clientsOf gathers the clients of one version of a resource by user,
// user agent and whether it was served.
func clientsOf(in Inputs, group, plural, version string) ([]Client, int64) {
	type who struct{ user, agent string }
	byWho := map[who]*Client{}
	var order []who
	for _, e := range in.Clients {
		if e.Group != group || e.Resource != plural || e.Version != version {
			continue
		}
		k := who{e.User, e.UserAgent}
		c := byWho[k]
		if c == nil {
			c = &Client{User: e.User, UserAgent: e.UserAgent, Requests: map[string]int64{},
				FirstSeen: metav1.NewTime(time.Unix(e.First, 0).UTC()), LastSeen: metav1.NewTime(time.Unix(e.Last, 0).UTC())}
			byWho[k] = c
			order = append(order, k)
		}
		c.Requests[e.Verb] += e.Count
		if e.NotServed {
			c.NotServed += e.Count
		}
		if t := time.Unix(e.First, 0).UTC(); t.Before(c.FirstSeen.Time) {
			c.FirstSeen = metav1.NewTime(t)
		}
		if t := time.Unix(e.Last, 0).UTC(); t.After(c.LastSeen.Time) {
			c.LastSeen = metav1.NewTime(t)
		}
	}
	out := make([]Client, 0, len(order))
	for _, k := range order {
		out = append(out, *byWho[k])
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].LastSeen.After(out[j].LastSeen.Time) })
	return out, in.Overflow[group+"/"+version]
}

// blockers are what keeps a version from being removed, with the fix.
func blockers(crd *apiextensionsv1.CustomResourceDefinition, r VersionReport) []Blocker {
	st, v := &r.Status, r.Spec.Version
	storage := st.StorageVersion
	var out []Blocker
	add := func(reason, fix, format string, args ...any) {
		out = append(out, Blocker{Reason: reason, Message: fmt.Sprintf(format, args...), Fix: fix})
	}
	if st.Storage {
		add(ReasonStorageVersion, "make another version the storage version (storage: true), then migrate the objects stored in "+v,
			"%s is the storage version", v)
		storage = "the storage version"
	}
	if len(st.Clients) > 0 || st.ClientsOverflow > 0 {
		var who []string
		for _, c := range st.Clients {
			w := c.User
			if c.UserAgent != "" {
				w += " (" + c.UserAgent + ")"
			}
			w += " last " + c.LastSeen.UTC().Format(time.RFC3339)
			if c.NotServed > 0 {
				w += fmt.Sprintf(", %d requests while not served", c.NotServed)
			}
			who = append(who, w)
		}
		if st.ClientsOverflow > 0 {
			who = append(who, fmt.Sprintf("%d requests of more clients", st.ClientsOverflow))
		}
		add(ReasonClients, fmt.Sprintf("move these clients to %s, then wait for the window (%s) to pass", storage, st.Window),
			"%d clients called %s within %s: %s", len(st.Clients), v, st.Window, strings.Join(who, "; "))
	}
	if st.Objects > 0 {
		add(ReasonStoredObjects, fmt.Sprintf("migrate them to %s (crdserver migrate %s, or a StorageVersionMigration)", storage, crd.Name),
			"%d objects are stored in %s: %s", st.Objects, v, strings.Join(st.ObjectNames, ", "))
	}
	if mf := st.References.ManagedFields; len(mf) > 0 {
		var parts []string
		for _, m := range mf {
			parts = append(parts, fmt.Sprintf("%s on %d objects", m.Manager, m.Objects))
		}
		add(ReasonManagedFields, fmt.Sprintf("rewrite those entries' apiVersion to %s (a patch of metadata.managedFields): a later server-side apply would fail to convert them", storage),
			"managedFields entries at %s: %s", v, strings.Join(parts, ", "))
	}
	if or := st.References.OwnerReferences; len(or) > 0 {
		var parts []string
		for _, o := range or {
			parts = append(parts, fmt.Sprintf("%d %s (%s)", o.Objects, o.Resource, strings.Join(o.Names, ", ")))
		}
		add(ReasonOwnerReferences, fmt.Sprintf("rewrite those ownerReferences' apiVersion to %s: the garbage collector would not find the owner", storage),
			"ownerReferences name %s/%s: %s", r.Spec.Group, v, strings.Join(parts, ", "))
	}
	for _, a := range st.References.Admission {
		what := a.Kind + " " + a.Name
		if a.Webhook != "" {
			what += " (webhook " + a.Webhook + ")"
		}
		add(ReasonAdmission, fmt.Sprintf("add %s to its rules' apiVersions (or use \"*\")", storage),
			"%s lists %s and no other served version of %s: it would stop matching", what, v, crd.Spec.Names.Plural)
	}
	if st.References.ConversionRules != "" {
		add(ReasonConversionRules, "make another version the hub and drop "+v+"'s rules from the ConversionRules",
			"ConversionRules %s convert %s", st.References.ConversionRules, v)
	}
	if st.InStoredVersions {
		add(ReasonStoredVersions, "once nothing is stored in it, drop it from status.storedVersions (crdserver migrate does once it migrated)",
			"status.storedVersions lists %s: Kubernetes refuses to remove it from spec.versions", v)
	}
	return out
}

func sortedKeys(m map[string]*counted) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
