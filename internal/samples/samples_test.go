package samples

import (
	"context"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/crdserver/crdserver/internal/fixtures"
	"github.com/crdserver/crdserver/internal/schema"
)

// everything is a CRD whose v1 schema uses every keyword the generator
// knows.
//
//go:embed testdata/everything.yaml
var everything string

// The CRDs of single tests: nopes and formatsCRD with a placeholder ({})
// the test fills in.
var (
	//go:embed testdata/nopes.yaml
	nopes string
	//go:embed testdata/lists.yaml
	lists string
	//go:embed testdata/formats.yaml
	formatsCRD string
	//go:embed testdata/snaps.yaml
	snaps string
)

func spec(o map[string]any) map[string]any { m, _ := o["spec"].(map[string]any); return m }

func TestGenerateValidAndVaried(t *testing.T) {
	crd := fixtures.DecodeCRD(t, everything)
	const n = 300
	objs, err := Generate(context.Background(), crd, "v1", n, 42)
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != n {
		t.Fatalf("%d objects, want %d", len(objs), n)
	}
	v, err := schema.Compile(crd, "v1")
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	// seen counts what the objects show, to check that every keyword was
	// exercised.
	seen := map[string]int{}
	mark := func(what string, cond bool) {
		if cond {
			seen[what]++
		}
	}
	uuidRE := regexp.MustCompile(`(?i)^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	for _, o := range objs {
		if err := Check(context.Background(), v, o); err != nil {
			t.Errorf("invalid object %v: %v", o, err)
		}
		// The JSON types of a decoded object only.
		b, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		if o["apiVersion"] != "example.com/v1" || o["kind"] != "Thing" {
			t.Errorf("type: %v %v", o["apiVersion"], o["kind"])
		}
		md := o["metadata"].(map[string]any)
		name := md["name"].(string)
		if names[name] {
			t.Errorf("name %s twice", name)
		}
		names[name] = true
		if md["namespace"] != "default" {
			t.Errorf("namespace %v", md["namespace"])
		}
		s := spec(o)
		_, hasStatus := o["status"]
		mark("status", hasStatus)
		mark("no status", !hasStatus)
		code := s["code"].(string)
		mark("code with leading zero", len(code) > 1 && code[0] == '0')
		mark("tier "+fmt.Sprint(s["tier"]), true)
		count := s["count"].(int64)
		if count > 5 && s["tier"] != "gold" {
			t.Errorf("CEL rule broken: %s", b)
		}
		if r, ok := s["ratio"].(float64); ok {
			mark("ratio", true)
			if r <= 0 || r >= 1 {
				t.Errorf("ratio %v", r)
			}
		}
		if st, ok := s["step"].(int64); ok {
			mark("step", true)
			mark("negative step", st < 0)
			if st%5 != 0 {
				t.Errorf("step %v", st)
			}
		}
		if p, ok := s["price"].(float64); ok {
			mark("price", true)
			if p/0.25 != float64(int64(p/0.25)) {
				t.Errorf("price %v", p)
			}
		}
		if x, ok := s["excl"].(int64); ok && x != 4 {
			t.Errorf("excl %v", x)
		}
		mark("big int64 beyond float64", s["big"] == int64(1<<53+1))
		if note, ok := s["note"].(string); ok {
			mark("empty note", note == "")
			mark("non-ASCII note", note != "" && !isASCII(note))
			mark("note", true)
		} else {
			mark("no note", true)
		}
		if w, ok := s["word"].(string); ok && utf8.RuneCountInString(w) < 3 {
			t.Errorf("word %q", w)
		}
		if w, ok := s["when"].(string); ok {
			if _, err := time.Parse(time.RFC3339Nano, w); err != nil && !strings.Contains(w, ":60") {
				t.Errorf("when %q: %v", w, err)
			}
			mark("date-time with offset", strings.Contains(w, "+") || strings.Count(w, "-") > 2)
		}
		if d, ok := s["day"].(string); ok {
			if _, err := time.Parse(time.DateOnly, d); err != nil {
				t.Errorf("day %q: %v", d, err)
			}
		}
		if bl, ok := s["blob"].(string); ok {
			if _, err := base64.StdEncoding.DecodeString(bl); err != nil {
				t.Errorf("blob %q: %v", bl, err)
			}
		}
		if id, ok := s["id"].(string); ok {
			if !uuidRE.MatchString(id) {
				t.Errorf("id %q", id)
			}
			mark("upper-case uuid", strings.ToUpper(id) == id)
		}
		_, hasURL := s["url"]
		_, hasPath := s["path"]
		if hasURL == hasPath {
			t.Errorf("oneOf broken: url %v, path %v", hasURL, hasPath)
		}
		if tags, ok := s["tags"].([]any); ok {
			mark("tags", true)
			if len(tags) < 1 || len(tags) > 4 || !distinct(tags) {
				t.Errorf("tags %v", tags)
			}
		}
		if ports, ok := s["ports"].([]any); ok {
			keys := map[string]bool{}
			for _, p := range ports {
				pm := p.(map[string]any)
				proto, ok := pm["protocol"]
				if !ok {
					proto = "TCP"
					mark("port without protocol", true)
				}
				k := fmt.Sprint(pm["name"], "/", proto)
				if keys[k] {
					t.Errorf("ports with key %s twice: %v", k, ports)
				}
				keys[k] = true
			}
			mark("two ports", len(ports) > 1)
		}
		if l, ok := s["labels"].(map[string]any); ok {
			mark("labels", len(l) > 0)
			if len(l) > 3 {
				t.Errorf("labels %v", l)
			}
		}
		if m, ok := s["matrix"].(map[string]any); ok && len(m) < 1 {
			t.Errorf("matrix %v", m)
		}
		if x, ok := s["maybe"]; ok {
			mark("null", x == nil)
		}
		switch s["intOrStr"].(type) {
		case int64:
			mark("int-or-string int", true)
		case string:
			mark("int-or-string string", true)
		}
		_, hasReplicas := s["replicas"]
		mark("replicas left to its default", !hasReplicas)
		mark("replicas set", hasReplicas)
		if tpl, ok := s["template"].(map[string]any); ok {
			mark("embedded", true)
			tmd, _ := tpl["metadata"].(map[string]any)
			if tpl["apiVersion"] == nil || tpl["kind"] == nil || tmd["name"] == nil {
				t.Errorf("embedded resource %v", tpl)
			}
		}
		if x, ok := s["extra"]; ok && !reflect.DeepEqual(x, map[string]any{}) {
			t.Errorf("extra %v", x)
		}
		if x, ok := s["anything"]; ok && !reflect.DeepEqual(x, map[string]any{}) {
			t.Errorf("anything %v", x)
		}
		r := s["range"].(map[string]any)
		if r["min"].(int64) > r["max"].(int64) {
			t.Errorf("range %v", r)
		}
	}
	for _, what := range []string{
		"status", "no status", "code with leading zero", "tier gold", "tier silver", "tier bronze",
		"ratio", "step", "negative step", "price", "big int64 beyond float64",
		"empty note", "non-ASCII note", "note", "no note", "date-time with offset", "upper-case uuid",
		"tags", "port without protocol", "two ports", "labels", "null",
		"int-or-string int", "int-or-string string", "replicas left to its default", "replicas set", "embedded",
	} {
		if seen[what] == 0 {
			t.Errorf("no object shows %s", what)
		}
	}
}

func isASCII(s string) bool {
	for _, r := range s {
		if r > 127 {
			return false
		}
	}
	return true
}

func distinct(xs []any) bool {
	seen := map[string]bool{}
	for _, x := range xs {
		k := fmt.Sprint(x)
		if seen[k] {
			return false
		}
		seen[k] = true
	}
	return true
}

func TestGenerateDeterministic(t *testing.T) {
	crd := fixtures.DecodeCRD(t, everything)
	a, err := Generate(context.Background(), crd, "v1", 30, 7)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Generate(context.Background(), crd, "v1", 30, 7)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatal("the same seed gave other objects")
	}
	c, err := Generate(context.Background(), crd, "v1", 30, 8)
	if err != nil {
		t.Fatal(err)
	}
	if reflect.DeepEqual(a, c) {
		t.Fatal("another seed gave the same objects")
	}
}

func TestGenerateClusterScopedAndEmpty(t *testing.T) {
	crd := fixtures.DecodeCRD(t, everything)
	crd.Spec.Scope = apiextensionsv1.ClusterScoped
	objs, err := Generate(context.Background(), crd, "v1", 3, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if _, ok := o["metadata"].(map[string]any)["namespace"]; ok {
			t.Errorf("a cluster-scoped object with a namespace: %v", o["metadata"])
		}
	}
	if objs, err := Generate(context.Background(), crd, "v1", 0, 1); err != nil || len(objs) != 0 {
		t.Fatalf("n=0: %v, %v", objs, err)
	}
	if _, err := Generate(context.Background(), crd, "v9", 1, 1); err == nil {
		t.Fatal("no error for an unknown version")
	}
}

func TestGenerateImpossible(t *testing.T) {
	for name, doc := range map[string]string{
		"CEL rule": `{type: object, required: [spec], properties: {spec: {type: object, x-kubernetes-validations: [{rule: "false"}]}}}`,
		"pattern":  `{type: object, required: [spec], properties: {spec: {type: object, required: [s], properties: {s: {type: string, pattern: 'a^b'}}}}}`,
		"range":    `{type: object, required: [spec], properties: {spec: {type: object, required: [i], properties: {i: {type: integer, minimum: 5, maximum: 4}}}}}`,
	} {
		t.Run(name, func(t *testing.T) {
			crd := fixtures.DecodeCRD(t, strings.Replace(nopes, "openAPIV3Schema: {}", "openAPIV3Schema: "+doc, 1))
			if objs, err := Generate(context.Background(), crd, "v1", 2, 1); err == nil {
				t.Fatalf("no error; objects %v", objs)
			}
		})
	}
}

func TestGenerateUniqueItems(t *testing.T) {
	// uniqueItems: true is refused by the CRD API, but the generator
	// honours it all the same.
	crd := fixtures.DecodeCRD(t, lists)
	objs, err := Generate(context.Background(), crd, "v1", 20, 3)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		items := o["items"].([]any)
		if len(items) < 3 || !distinct(items) {
			t.Errorf("items %v", items)
		}
	}
}

func TestPatterns(t *testing.T) {
	g := newGenerator(1)
	for _, p := range []string{
		`^[0-9]{1,6}$`,
		`^[a-z]{3}-\d{2,4}$`,
		`^(foo|bar)+$`,
		`^\w+@\w+\.com$`,
		`^[^:\[\]]+:[0-9]+$`,
		`^v[0-9]+((alpha|beta)[0-9]+)?$`,
		`(?i)^abc$`,
		`^\p{Greek}+$`,
		`^.{10,}$`,
		`\bword\b`,
		`^$`,
		`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`,
		`^(\d+|\*)(/\d+)?(\s+(\d+|\*)(/\d+)?){4}$`,
		`^x{20,30}$`,
	} {
		re := regexp.MustCompile(p)
		ok := 0
		for try := range 40 {
			s, found := g.pattern(p, try%6)
			if !found {
				continue
			}
			ok++
			if !re.MatchString(s) {
				t.Errorf("%s: %q does not match", p, s)
			}
		}
		if ok < 30 {
			t.Errorf("%s: only %d strings of 40", p, ok)
		}
	}
	if _, ok := g.pattern(`a^b`, 0); ok {
		t.Error("a string for an impossible pattern")
	}
	zeros := 0
	for range 100 {
		if s, _ := g.pattern(`^[0-9]{1,6}$`, 0); len(s) > 1 && s[0] == '0' {
			zeros++
		}
	}
	if zeros < 10 {
		t.Errorf("%d strings of 100 with leading zeros", zeros)
	}
}

func TestFormats(t *testing.T) {
	// Every format the generator knows makes values Kubernetes' validator
	// takes.
	var props []string
	for f := range formats {
		name := "f" + strings.ReplaceAll(f, "-", "")
		props = append(props, fmt.Sprintf("%s: {type: string, format: %s}", name, f))
	}
	props = append(props, "fdatetime2: {type: string, format: date-time}", "fk8s: {type: string, format: k8s-short-name}")
	crd := fixtures.DecodeCRD(t, strings.Replace(formatsCRD, "properties: {}", "properties: {"+strings.Join(props, ", ")+"}", 1))
	v, err := schema.Compile(crd, "v1")
	if err != nil {
		t.Fatal(err)
	}
	root, err := Structural(crd, "v1")
	if err != nil {
		t.Fatal(err)
	}
	g := newGenerator(5)
	specSchema := root.Properties["spec"]
	for name, p := range specSchema.Properties {
		for range 30 {
			x, ok := g.value(&p, 2)
			if !ok {
				t.Fatalf("%s: no value", name)
			}
			obj := map[string]any{"apiVersion": "example.com/v1", "kind": "Format", "metadata": map[string]any{"name": "x"}, "spec": map[string]any{name: x}}
			if err := Check(context.Background(), v, obj); err != nil {
				t.Errorf("%s %q: %v", name, x, err)
			}
		}
	}
}

func TestGenerateRepairsWhatRulesRefuse(t *testing.T) {
	// Rules like those of VolumeSnapshotContent: each part of the object
	// is made again until its rule holds, not the whole object.
	crd := fixtures.DecodeCRD(t, snaps)
	objs, err := Generate(context.Background(), crd, "v1", 50, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 50 {
		t.Fatalf("%d objects of 50", len(objs))
	}
	for _, o := range objs {
		s := spec(o)
		ref := s["ref"].(map[string]any)
		src := s["source"].(map[string]any)
		_, x := src["one"]
		_, y := src["other"]
		if ref["name"] == nil || ref["namespace"] == nil || x == y {
			t.Errorf("rules broken: %v", s)
		}
		for _, it := range s["items"].([]any) {
			m := it.(map[string]any)
			if m["lo"].(int64) >= m["hi"].(int64) {
				t.Errorf("item rule broken: %v", m)
			}
		}
	}
}

func TestParsePath(t *testing.T) {
	for in, want := range map[string]string{
		"spec":                         "spec",
		"spec.ports[0].name":           "spec ports #0 name",
		"spec.labels[x.y]":             "spec labels x.y",
		"spec.matrix[k1][2]":           "spec matrix k1 #2",
		"status.conditions[12].reason": "status conditions #12 reason",
	} {
		segs, ok := parsePath(in)
		if !ok {
			t.Errorf("%s: not parsed", in)
			continue
		}
		var got []string
		for _, s := range segs {
			if s.index >= 0 {
				got = append(got, fmt.Sprintf("#%d", s.index))
			} else {
				got = append(got, s.key)
			}
		}
		if strings.Join(got, " ") != want {
			t.Errorf("%s: %q, want %q", in, strings.Join(got, " "), want)
		}
	}
	for _, bad := range []string{"", "<nil>", "spec[0"} {
		if _, ok := parsePath(bad); ok {
			t.Errorf("%q parsed", bad)
		}
	}
}
