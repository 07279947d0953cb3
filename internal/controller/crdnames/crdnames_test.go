package crdnames

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsfake "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/fake"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/crdserver/crdserver/internal/apis/core"
	"github.com/crdserver/crdserver/internal/registry"
	"github.com/crdserver/crdserver/internal/resource"
)

func crdNamed(group, plural, singular, kind string, short ...string) *apiextensionsv1.CustomResourceDefinition {
	names := apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Singular: singular, Kind: kind, ListKind: kind + "List", ShortNames: short}
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + group},
		Spec:       apiextensionsv1.CustomResourceDefinitionSpec{Group: group, Names: names},
	}
}

func TestAcceptNames(t *testing.T) {
	held := crdNamed("g.io", "foos", "foo", "Foo", "f")
	held.Status.AcceptedNames = held.Spec.Names
	namespaces := core.Namespaces(nil, nil)
	ix := &registry.Index{
		CRDs:      map[string]*apiextensionsv1.CustomResourceDefinition{held.Name: held},
		Resources: []*resource.Resource{namespaces},
		Builtin:   map[*resource.Resource]bool{namespaces: true},
	}

	cases := []struct {
		name   string
		crd    *apiextensionsv1.CustomResourceDefinition
		status apiextensionsv1.ConditionStatus
		reason string
		msg    string
	}{
		{"free", crdNamed("g.io", "bars", "bar", "Bar", "b"), "True", "NoConflicts", "no conflicts found"},
		{"other group", crdNamed("h.io", "foos", "foo", "Foo", "f"), "True", "NoConflicts", "no conflicts found"},
		{"plural", crdNamed("g.io", "foo", "baz", "Baz"), "False", "PluralConflict", `"foo" is already in use`},
		{"short name", crdNamed("g.io", "bars", "bar", "Bar", "f"), "False", "ShortNamesConflict", `"f" is already in use`},
		{"kind", crdNamed("g.io", "bars", "bar", "Foo"), "False", "ListKindConflict", `"FooList" is already in use`},
		{"built-in", crdNamed("", "namespaces", "namespace", "Namespace"), "False", "ListKindConflict", `"NamespaceList" is already in use`},
	}
	for _, c := range cases {
		names, cond, est := acceptNames(ix, ix.CRDs, c.crd)
		if cond.Status != c.status || cond.Reason != c.reason || cond.Message != c.msg {
			t.Errorf("%s: %s %s %q", c.name, cond.Status, cond.Reason, cond.Message)
		}
		if c.status == "True" {
			if names.Plural != c.crd.Spec.Names.Plural || est.Reason != "Installing" {
				t.Errorf("%s: names %+v established %+v", c.name, names, est)
			}
		} else if est.Reason != "NotAccepted" {
			t.Errorf("%s: established %+v", c.name, est)
		}
	}
	// A CRD keeps the names it was accepted with.
	names, cond, _ := acceptNames(ix, ix.CRDs, held)
	if cond.Status != "True" || names.Plural != "foos" {
		t.Errorf("held names: %+v %+v", names, cond)
	}
}

// fixedReader serves one Index.
type fixedReader struct{ ix *registry.Index }

func (f fixedReader) Index() *registry.Index                   { return f.ix }
func (f fixedReader) Subscribe(fn func(ix *registry.Index))    { fn(f.ix) }
func (f fixedReader) WaitApplied(context.Context, int64) error { return nil }
func (f fixedReader) CatchUp(context.Context) error            { return nil }

func TestSyncAcceptsThenEstablishes(t *testing.T) {
	ctx := context.Background()
	crd := crdNamed("g.io", "bars", "bar", "Bar")
	client := apiextensionsfake.NewClientset(crd.DeepCopy())
	ix := &registry.Index{CRDs: map[string]*apiextensionsv1.CustomResourceDefinition{crd.Name: crd}, Groups: map[string][]string{"g.io": {crd.Name}}}
	c := New(fixedReader{ix}, client, slog.New(slog.DiscardHandler))

	// The names, and Established with them: the registry serves a CRD
	// whose names are accepted.
	if err := c.sync(ctx, "g.io"); err != nil {
		t.Fatal(err)
	}
	got, _ := client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
	names := apihelpers.FindCRDCondition(got, apiextensionsv1.NamesAccepted)
	est := apihelpers.FindCRDCondition(got, apiextensionsv1.Established)
	if got.Status.AcceptedNames.Kind != "Bar" || names == nil || names.Reason != "NoConflicts" || est == nil || est.Status != "True" || est.Reason != "InitialNamesAccepted" {
		t.Fatalf("after the first sync: %+v", got.Status)
	}
	writes := 0
	for _, a := range client.Actions() {
		if a.GetVerb() != "get" {
			writes++
		}
	}
	if writes != 1 {
		t.Fatalf("%d writes, want one", writes)
	}
	// Nothing more to do: no write.
	ix.CRDs[crd.Name] = got
	n := len(client.Actions())
	if err := c.sync(ctx, "g.io"); err != nil || len(client.Actions()) != n {
		t.Fatalf("a settled CRD was written again: %v %v", err, client.Actions()[n:])
	}
	// A CRD being deleted is the cleanup controller's.
	deleting := got.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{}
	ix.CRDs[crd.Name] = deleting
	if err := c.sync(ctx, "g.io"); err != nil || len(client.Actions()) != n {
		t.Fatalf("a deleted CRD was written: %v", err)
	}
}

// A group's CRDs are decided together, oldest first: of two asking for
// one plural, the older gets it; each is written once.
func TestSyncDecidesAGroupOldestFirst(t *testing.T) {
	ctx := context.Background()
	older := crdNamed("g.io", "bars", "bar", "Bar")
	older.CreationTimestamp = metav1.NewTime(time.Unix(100, 0))
	newer := crdNamed("g.io", "bars", "baz", "Baz")
	newer.Name = "bars2.g.io"
	newer.CreationTimestamp = metav1.NewTime(time.Unix(200, 0))
	free := crdNamed("g.io", "quxes", "qux", "Qux")
	free.CreationTimestamp = metav1.NewTime(time.Unix(300, 0))
	client := apiextensionsfake.NewClientset(older.DeepCopy(), newer.DeepCopy(), free.DeepCopy())
	ix := &registry.Index{
		CRDs:   map[string]*apiextensionsv1.CustomResourceDefinition{older.Name: older, newer.Name: newer, free.Name: free},
		Groups: map[string][]string{"g.io": {newer.Name, older.Name, free.Name}},
	}
	c := New(fixedReader{ix}, client, slog.New(slog.DiscardHandler))
	if err := c.sync(ctx, "g.io"); err != nil {
		t.Fatal(err)
	}
	get := func(name string) *apiextensionsv1.CustomResourceDefinition {
		got, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	for name, want := range map[string]string{older.Name: "NoConflicts", newer.Name: "PluralConflict", free.Name: "NoConflicts"} {
		if cond := apihelpers.FindCRDCondition(get(name), apiextensionsv1.NamesAccepted); cond == nil || cond.Reason != want {
			t.Errorf("%s: NamesAccepted %+v, want %s", name, cond, want)
		}
	}
	if est := apihelpers.FindCRDCondition(get(newer.Name), apiextensionsv1.Established); est == nil || est.Status != "False" {
		t.Errorf("the refused CRD is established: %+v", est)
	}
	writes := 0
	for _, a := range client.Actions() {
		if a.GetVerb() == "update" {
			writes++
		}
	}
	if writes != 3 {
		t.Errorf("%d writes, want one a CRD", writes)
	}
}
