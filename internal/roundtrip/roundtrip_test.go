package roundtrip

import (
	"context"
	_ "embed"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/crdserver/crdserver/conversion/webhook"
	"github.com/crdserver/crdserver/internal/conversion"
	"github.com/crdserver/crdserver/internal/fixtures"
	"github.com/crdserver/crdserver/internal/samples"
	"github.com/crdserver/crdserver/internal/schema"
)

func decode(t testing.TB, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := utiljson.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("%v: %s", err, s)
	}
	return m
}

// lossyCRD has v1 (tier, code as a string, note) and v2 (level, code as
// an integer, no note): a webhook that maps them loses the note, maps
// four tiers to two levels, and the leading zeros of codes.
//
//go:embed testdata/lossy-widgets.yaml
var lossyCRD string

type lossyHub struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Tier, Code, Note  string
}

type lossyV1 struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              struct {
		Tier string `json:"tier,omitempty"`
		Code string `json:"code,omitempty"`
		Note string `json:"note,omitempty"`
	} `json:"spec"`
}

type lossyV2 struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              struct {
		Level string `json:"level,omitempty"`
		Code  int64  `json:"code"`
	} `json:"spec"`
}

// lossyWebhook serves the lossy conversion over TLS; a note "boom" fails
// it.
func lossyWebhook(t *testing.T) (url string, caPEM []byte) {
	t.Helper()
	s := webhook.NewScheme[lossyHub]()
	webhook.AddVersion(s, "lossy.example.com/v1",
		func(v *lossyV1) (*lossyHub, error) {
			if v.Spec.Note == "boom" {
				return nil, errors.New("boom")
			}
			return &lossyHub{ObjectMeta: v.ObjectMeta, Tier: v.Spec.Tier, Code: v.Spec.Code, Note: v.Spec.Note}, nil
		},
		func(h *lossyHub) (*lossyV1, error) {
			v := &lossyV1{ObjectMeta: h.ObjectMeta}
			v.Spec.Tier, v.Spec.Code, v.Spec.Note = h.Tier, h.Code, h.Note
			return v, nil
		})
	webhook.AddVersion(s, "lossy.example.com/v2",
		func(v *lossyV2) (*lossyHub, error) {
			tier := map[string]string{"high": "gold", "low": "silver"}[v.Spec.Level]
			return &lossyHub{ObjectMeta: v.ObjectMeta, Tier: tier, Code: strconv.FormatInt(v.Spec.Code, 10)}, nil
		},
		func(h *lossyHub) (*lossyV2, error) {
			v := &lossyV2{ObjectMeta: h.ObjectMeta}
			v.Spec.Level = map[string]string{"gold": "high", "platinum": "high", "silver": "low", "bronze": "low"}[h.Tier]
			code, err := strconv.ParseInt(h.Code, 10, 64)
			if err != nil && h.Code != "" {
				return nil, err
			}
			v.Spec.Code = code
			return v, nil
		})
	srv := httptest.NewUnstartedServer(s)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv.URL, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
}

func widget(version, name, spec string) string {
	return fmt.Sprintf(`{"apiVersion": "lossy.example.com/%s", "kind": "Widget", "metadata": {"name": %q, "namespace": "default"}, "spec": %s}`, version, name, spec)
}

func lines(losses []Loss) string {
	var b strings.Builder
	for _, l := range losses {
		b.WriteString(l.String())
		b.WriteByte('\n')
	}
	return b.String()
}

func TestRoundTripWebhook(t *testing.T) {
	crd := fixtures.DecodeCRD(t, lossyCRD)
	url, ca := lossyWebhook(t)
	conv, err := NewWebhook(crd, url, ca, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conversion.Close(conv)
	in := map[string][]map[string]any{
		"v1": {
			decode(t, widget("v1", "w1", `{"tier": "gold", "code": "12", "note": "kept?"}`)),
			decode(t, widget("v1", "w2", `{"tier": "bronze", "code": "007"}`)),
			decode(t, widget("v1", "w3", `{"tier": "silver", "code": "5", "note": "boom"}`)),
			decode(t, widget("v1", "w4", `{"tier": "gold", "code": "3", "unknown": "pruned first"}`)),
			decode(t, widget("v1", "w5", `{"tier": "gold", "code": "6000"}`)),
		},
		"v2": {decode(t, widget("v2", "x1", `{"level": "high", "code": 42}`))},
	}
	losses, err := RoundTrip(context.Background(), crd, conv, in)
	if err != nil {
		t.Fatal(err)
	}
	want := `lost v1→v2→v1 object=w1 path=spec.note original="kept?" after=<absent>
changed v1→v2→v1 object=w2 path=spec.code original="007" after="7"
changed v1→v2→v1 object=w2 path=spec.tier original="bronze" after="silver"
failed v1→v2→v1 object=w3 error=converting v1 to v2: Internal error occurred: conversion webhook for lossy.example.com/v1, Kind=Widget failed: object 0: lossy.example.com/v1 to hub: boom
failed v1→v2→v1 object=w5 error=its v2 form is not valid in v2: spec.code: Invalid value: 6000: spec.code in body should be less than or equal to 5000
`
	if got := lines(losses); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestRoundTripWebhookWithSamples(t *testing.T) {
	crd := fixtures.DecodeCRD(t, lossyCRD)
	url, ca := lossyWebhook(t)
	conv, err := NewWebhook(crd, url, ca, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conversion.Close(conv)
	in := map[string][]map[string]any{}
	for _, v := range []string{"v1", "v2"} {
		if in[v], err = samples.Generate(context.Background(), crd, v, 40, 1); err != nil {
			t.Fatal(err)
		}
	}
	losses, err := RoundTrip(context.Background(), crd, conv, in)
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, l := range losses {
		if l.From != "v1" {
			t.Errorf("a v2 object changed: %s", l)
		}
		found[string(l.Kind)+" "+l.Path] = true
		if l.Kind == Changed && l.Path == "spec.code" && !strings.HasPrefix(string(l.Original), `"0`) {
			t.Errorf("a code without leading zeros changed: %s", l)
		}
	}
	for _, w := range []string{"lost spec.note", "changed spec.tier", "changed spec.code"} {
		if !found[w] {
			t.Errorf("no %s in\n%s", w, lines(losses))
		}
	}
}

// noneCRD converts with the None strategy between v1 and v2, each with
// a field the other has not.
//
//go:embed testdata/none-things.yaml
var noneCRD string

func TestRoundTripStrategyNone(t *testing.T) {
	crd := fixtures.DecodeCRD(t, noneCRD)
	conv, err := NewStrategy(crd, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	thing := func(v, name, spec string) map[string]any {
		return decode(t, fmt.Sprintf(`{"apiVersion": "example.com/%s", "kind": "Thing", "metadata": {"name": %q}, "spec": %s}`, v, name, spec))
	}
	losses, err := RoundTrip(context.Background(), crd, conv, map[string][]map[string]any{
		// t1's d is defaulted before the round trip: no loss.
		"v1": {thing("v1", "t1", `{"a": "x", "b": 3}`), thing("v1", "t2", `{"a": "y"}`)},
		"v2": {thing("v2", "u1", `{"a": "x"}`)},
	})
	if err != nil {
		t.Fatal(err)
	}
	// u1 comes back from v1 with v1's default of d.
	want := `lost v1→v2→v1 object=t1 path=spec.b original=3 after=<absent>
changed v2→v1→v2 object=u1 path=spec.d original=<absent> after=5
`
	if got := lines(losses); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if _, err := RoundTrip(context.Background(), crd, conv, map[string][]map[string]any{"v3": {thing("v3", "z", `{}`)}}); err == nil {
		t.Error("no error for samples of a version that is not served")
	}
}

// memServer is an Admitter: it defaults objects, stores them in v1
// through a converter and answers in the version asked.
type memServer struct {
	crd    *apiextensionsv1.CustomResourceDefinition
	conv   conversion.Converter
	stored map[string]map[string]any
}

func (m *memServer) Admit(ctx context.Context, objs [][]byte) ([][]byte, error) {
	out := make([][]byte, len(objs))
	for i, raw := range objs {
		var o map[string]any
		if err := utiljson.Unmarshal(raw, &o); err != nil {
			return nil, err
		}
		if strings.HasPrefix(ObjectName(o), "refused") {
			return nil, errors.New("refused")
		}
		_, version, _ := strings.Cut(o["apiVersion"].(string), "/")
		v, err := schema.Compile(m.crd, version)
		if err != nil {
			return nil, err
		}
		v.Default(o)
		s, err := convert(ctx, m.conv, []map[string]any{o}, "example.com/v1")
		if err != nil {
			return nil, err
		}
		uid := fmt.Sprint(len(m.stored))
		s[0]["metadata"].(map[string]any)["uid"] = uid
		m.stored[uid] = s[0]
		back, err := encodeAll(s)
		if err != nil {
			return nil, err
		}
		res, err := m.conv.Convert(ctx, back, o["apiVersion"].(string))
		if err != nil {
			return nil, err
		}
		out[i] = res.Objects[0]
	}
	return out, nil
}

func (m *memServer) Convert(ctx context.Context, objs [][]byte, to string) (conversion.Result, error) {
	return m.conv.Convert(ctx, objs, to)
}

func TestRoundTripAdmitter(t *testing.T) {
	crd := fixtures.DecodeCRD(t, noneCRD)
	inner, err := NewStrategy(crd, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	m := &memServer{crd: crd, conv: inner, stored: map[string]map[string]any{}}
	thing := func(v, name, spec string) map[string]any {
		return decode(t, fmt.Sprintf(`{"apiVersion": "example.com/%s", "kind": "Thing", "metadata": {"name": %q}, "spec": %s}`, v, name, spec))
	}
	losses, err := RoundTrip(context.Background(), crd, m, map[string][]map[string]any{
		"v1": {thing("v1", "refused-1", `{}`), thing("v1", "t1", `{"a": "x"}`)},
		// Written in v2 and read back, u1 went through v1: it got v1's
		// default, which is no loss but shows.
		"v2": {thing("v2", "u1", `{"a": "x", "d": 0}`)},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := `failed v1→v2→v1 object=refused-1 error=writing it in v1: refused
`
	if got := lines(losses); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if len(m.stored) != 2 {
		t.Errorf("%d objects stored", len(m.stored))
	}

	// What writing in v2 loses shows as v2→v1→v2.
	losses, err = RoundTripWithOptions(context.Background(), crd, m, map[string][]map[string]any{
		"v2": {thing("v2", "u2", `{"a": "x", "c": "z", "d": 7}`)},
	}, Options{Strict: true})
	if err != nil {
		t.Fatal(err)
	}
	want = `lost v2→v1→v2 object=u2 path=spec.c original="z" after=<absent>
`
	if got := lines(losses); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

type cancelled struct{}

func (cancelled) Convert(ctx context.Context, _ [][]byte, _ string) (conversion.Result, error) {
	return conversion.Result{}, ctx.Err()
}

func TestRoundTripContext(t *testing.T) {
	crd := fixtures.DecodeCRD(t, noneCRD)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	objs, err := samples.Generate(context.Background(), crd, "v1", 3, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := RoundTrip(ctx, crd, cancelled{}, map[string][]map[string]any{"v1": objs}); !errors.Is(err, context.Canceled) {
		t.Errorf("err %v", err)
	}
}

// wrongCount answers with one object too few.
type wrongCount struct{ inner conversion.Converter }

func (w wrongCount) Convert(ctx context.Context, objs [][]byte, to string) (conversion.Result, error) {
	res, err := w.inner.Convert(ctx, objs, to)
	if err != nil || len(res.Objects) < 2 {
		return res, err
	}
	res.Objects = res.Objects[1:]
	if res.Changed != nil {
		res.Changed = res.Changed[1:]
	}
	return res, nil
}

func TestRoundTripConverterAnswersTooFew(t *testing.T) {
	crd := fixtures.DecodeCRD(t, noneCRD)
	inner, err := NewStrategy(crd, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := samples.Generate(context.Background(), crd, "v2", 4, 1)
	if err != nil {
		t.Fatal(err)
	}
	// The batch fails; one at a time, every object converts.
	losses, err := RoundTrip(context.Background(), crd, wrongCount{inner}, map[string][]map[string]any{"v2": objs})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range losses {
		if l.Kind == Failed {
			t.Errorf("%s", l)
		}
	}
}
