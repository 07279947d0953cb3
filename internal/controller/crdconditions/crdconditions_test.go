package crdconditions

import (
	"context"
	"log/slog"
	"sort"
	"testing"
	"time"

	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsfake "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/fake"
	apiextensionsinformers "k8s.io/apiextensions-apiserver/pkg/client/informers/externalversions"
	"k8s.io/apiextensions-apiserver/pkg/controller/apiapproval"
	"k8s.io/apiextensions-apiserver/pkg/controller/nonstructuralschema"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/crdserver/crdserver/internal/registry"
)

// fixedReader serves one Index.
type fixedReader struct{ ix *registry.Index }

func (f fixedReader) Index() *registry.Index                { return f.ix }
func (f fixedReader) Subscribe(fn func(ix *registry.Index)) { fn(f.ix) }

func crd(group string, annotations map[string]string, preserve bool, schema apiextensionsv1.JSONSchemaProps) *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets." + group, Annotations: annotations, Generation: 1},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group:                 group,
			Names:                 apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Scope:                 apiextensionsv1.NamespaceScoped,
			PreserveUnknownFields: preserve,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
				{Name: "v1", Served: true, Storage: true, Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &schema}},
			},
		},
	}
}

var structural = apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
	"spec": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"size": {Type: "integer"}}},
}}

// conditions are a CRD's two conditions, without their times.
func conditions(c *apiextensionsv1.CustomResourceDefinition) []apiextensionsv1.CustomResourceDefinitionCondition {
	var out []apiextensionsv1.CustomResourceDefinitionCondition
	for _, t := range []apiextensionsv1.CustomResourceDefinitionConditionType{apiextensionsv1.NonStructuralSchema, apiextensionsv1.KubernetesAPIApprovalPolicyConformant} {
		if cond := apihelpers.FindCRDCondition(c, t); cond != nil {
			cp := *cond
			cp.LastTransitionTime = metav1.Time{}
			out = append(out, cp)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Type < out[j].Type })
	return out
}

// TestAsKubernetesDecides runs Kubernetes' own two controllers (the
// oracle) and this one over the same CRDs and compares the conditions
// they leave. Every CRD starts with stale conditions, so that each of
// Kubernetes' controllers that has a say writes once and the oracle is
// known to be done.
func TestAsKubernetesDecides(t *testing.T) {
	nonStructural := apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
		"spec": {Properties: map[string]apiextensionsv1.JSONSchemaProps{"size": {Type: "integer"}}}, // no type
	}}
	notConvertible := apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
		"list": {Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{JSONSchemas: []apiextensionsv1.JSONSchemaProps{{Type: "string"}}}},
	}}
	approved := map[string]string{apiextensionsv1.KubeAPIApprovedAnnotation: "https://github.com/kubernetes/kubernetes/pull/78458"}
	cases := map[string]*apiextensionsv1.CustomResourceDefinition{
		"structural":                    crd("example.com", nil, false, structural),
		"preserveUnknownFields":         crd("example.com", nil, true, structural),
		"not structural":                crd("example.com", nil, false, nonStructural),
		"items as an array":             crd("example.com", nil, false, notConvertible),
		"protected, no annotation":      crd("x.k8s.io", nil, false, structural),
		"protected, approved":           crd("x.k8s.io", approved, false, structural),
		"protected, unapproved":         crd("x.kubernetes.io", map[string]string{apiextensionsv1.KubeAPIApprovedAnnotation: "unapproved, experimental"}, false, structural),
		"protected, invalid annotation": crd("x.k8s.io", map[string]string{apiextensionsv1.KubeAPIApprovedAnnotation: "yes"}, false, nonStructural),
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			stale := []apiextensionsv1.CustomResourceDefinitionCondition{{Type: apiextensionsv1.NonStructuralSchema, Status: apiextensionsv1.ConditionFalse, Reason: "Stale", Message: "stale"}}
			writes := 1
			if apihelpers.IsProtectedCommunityGroup(c.Spec.Group) {
				stale = append(stale, apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.KubernetesAPIApprovalPolicyConformant, Status: apiextensionsv1.ConditionUnknown, Reason: "Stale", Message: "stale"})
				writes++
			}
			c.Status.Conditions = stale

			want := kubernetesConditions(t, c.DeepCopy(), writes)

			client := apiextensionsfake.NewClientset(c.DeepCopy())
			ix := &registry.Index{CRDs: map[string]*apiextensionsv1.CustomResourceDefinition{c.Name: c.DeepCopy()}}
			ctl := New(fixedReader{ix}, client, slog.New(slog.DiscardHandler))
			for range 2 { // a second sync of the same state writes nothing
				got, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(context.Background(), c.Name, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				ix.CRDs[c.Name] = got
				if err := ctl.sync(context.Background(), c.Name); err != nil {
					t.Fatal(err)
				}
			}
			got, _ := client.ApiextensionsV1().CustomResourceDefinitions().Get(context.Background(), c.Name, metav1.GetOptions{})
			if g, w := conditions(got), want; !equalConditions(g, w) {
				t.Errorf("conditions:\n got %+v\nwant %+v", g, w)
			}
			updates := 0
			for _, a := range client.Actions() {
				if a.GetVerb() == "update" {
					updates++
				}
			}
			if updates != 1 {
				t.Errorf("%d writes, want both conditions in one", updates)
			}
		})
	}
}

func equalConditions(a, b []apiextensionsv1.CustomResourceDefinitionCondition) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// kubernetesConditions runs Kubernetes' controllers over c until they made
// writes writes, and returns the conditions they left.
func kubernetesConditions(t *testing.T, c *apiextensionsv1.CustomResourceDefinition, writes int) []apiextensionsv1.CustomResourceDefinitionCondition {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := apiextensionsfake.NewClientset(c)
	// One controller at a time: the fake client does not refuse a write
	// of a stale resourceVersion, as a server would.
	for i, start := range []func(apiextensionsinformers.SharedInformerFactory) func(context.Context){
		func(f apiextensionsinformers.SharedInformerFactory) func(context.Context) {
			ns := nonstructuralschema.NewConditionController(f.Apiextensions().V1().CustomResourceDefinitions(), client.ApiextensionsV1())
			return func(ctx context.Context) { ns.RunWithContext(1, ctx) }
		},
		func(f apiextensionsinformers.SharedInformerFactory) func(context.Context) {
			a := apiapproval.NewKubernetesAPIApprovalPolicyConformantConditionController(f.Apiextensions().V1().CustomResourceDefinitions(), client.ApiextensionsV1())
			return func(ctx context.Context) { a.RunWithContext(1, ctx) }
		},
	} {
		if i >= writes {
			break
		}
		cctx, stop := context.WithCancel(ctx)
		factory := apiextensionsinformers.NewSharedInformerFactory(client, 0)
		run := start(factory)
		factory.Start(cctx.Done())
		go run(cctx)
		err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			n := 0
			for _, a := range client.Actions() {
				if a.GetVerb() == "update" {
					n++
				}
			}
			return n > i, nil
		})
		stop()
		factory.Shutdown()
		if err != nil {
			t.Fatalf("Kubernetes' controller %d did not write: %v", i, client.Actions())
		}
	}
	got, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, c.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return conditions(got)
}
