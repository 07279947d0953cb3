package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/crdserver/crdserver/examples/crontab-conversion/crontab"
)

// review is a ConversionReview of n CronTabs in v1beta1, compact or indented.
func review(t *testing.T, n int, indent bool) []byte {
	t.Helper()
	r := apiextensionsv1.ConversionReview{Request: &apiextensionsv1.ConversionRequest{UID: "u", DesiredAPIVersion: "example.com/v1"}}
	r.APIVersion, r.Kind = "apiextensions.k8s.io/v1", "ConversionReview"
	for i := 0; i < n; i++ {
		// Nested objects and arrays, braces and escaped quotes in strings,
		// and managedFields that repeat the apiVersion: none is an object.
		raw := fmt.Sprintf(`{"apiVersion":"example.com/v1beta1","kind":"CronTab","metadata":{"name":"c-%d","namespace":"default",`+
			`"annotations":{"a":"{[\"}]\\","b":"\\\\"},"managedFields":[{"apiVersion":"example.com/v1beta1","fieldsV1":{"f:spec":{}}}]},`+
			`"spec":{"cronSpec":"*/5 * * * *","image":"x","replicas":1},"hostPort":"h:%d"}`, i, 8000+i)
		r.Request.Objects = append(r.Request.Objects, runtime.RawExtension{Raw: []byte(raw)})
	}
	var b []byte
	var err error
	if indent {
		b, err = json.MarshalIndent(&r, "", "  ")
	} else {
		b, err = json.Marshal(&r)
	}
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestCountReviewObjects(t *testing.T) {
	for _, n := range []int{0, 1, 2, 7, 1000} {
		for _, indent := range []bool{false, true} {
			if got := countReviewObjects(review(t, n, indent)); got != n {
				t.Errorf("n=%d indent=%v: counted %d", n, indent, got)
			}
		}
	}
	// Objects elsewhere than request.objects do not count.
	other := `{"response":{"convertedObjects":[{"a":1}]},"request":{"uid":"u","x":[{"b":2}],"objects":[{"c":{"d":[{}]}},{"e":"}{"}]},"objects":[{}]}`
	if got := countReviewObjects([]byte(other)); got != 2 {
		t.Errorf("counted %d, want 2", got)
	}
	for _, bad := range []string{"", "{", `{"request":{"objects":[{"a":"unterminated`, "not json"} {
		_ = countReviewObjects([]byte(bad)) // must not panic
	}
}

func TestWebhookCounter(t *testing.T) {
	c := newWebhookCounter(crontab.NewScheme())
	for _, n := range []int{3, 5} {
		rec := httptest.NewRecorder()
		c.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/convert", bytes.NewReader(review(t, n, false))))
		if rec.Code != http.StatusOK {
			t.Fatalf("HTTP %d: %s", rec.Code, rec.Body)
		}
		var answer apiextensionsv1.ConversionReview
		if err := json.Unmarshal(rec.Body.Bytes(), &answer); err != nil || answer.Response == nil {
			t.Fatalf("answer %s: %v", rec.Body, err)
		}
		if len(answer.Response.ConvertedObjects) != n || !strings.Contains(string(answer.Response.ConvertedObjects[0].Raw), `"port":"8000"`) {
			t.Fatalf("answer: %s", rec.Body)
		}
	}
	rec := httptest.NewRecorder()
	c.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/convert", strings.NewReader("not a review")))
	got := c.snapshot()
	if got.Calls != 3 || got.Objects != 8 || got.Non200 != 1 || c.maxObjs != 5 {
		t.Errorf("counted %+v, max %d; want 3 calls, 8 objects, 1 non-200, max 5", got, c.maxObjs)
	}
}

func TestCrontabCRD(t *testing.T) {
	var crd apiextensionsv1.CustomResourceDefinition
	if err := json.Unmarshal(crontabCRD("example.com", "https://127.0.0.1:9443/convert", []byte("PEM")), &crd); err != nil {
		t.Fatal(err)
	}
	if crd.Name != webhookCRDName || len(crd.Spec.Versions) != 2 || !crd.Spec.Versions[0].Storage || crd.Spec.Versions[0].Name != "v1beta1" ||
		crd.Spec.Conversion.Strategy != apiextensionsv1.WebhookConverter || string(crd.Spec.Conversion.Webhook.ClientConfig.CABundle) != "PEM" ||
		*crd.Spec.Conversion.Webhook.ClientConfig.URL != "https://127.0.0.1:9443/convert" {
		t.Errorf("webhook CRD: %+v", crd.Spec)
	}
	crd = apiextensionsv1.CustomResourceDefinition{}
	if err := json.Unmarshal(crontabCRD(noneGroup, "", nil), &crd); err != nil {
		t.Fatal(err)
	}
	if crd.Name != noneCRDName || crd.Spec.Conversion.Strategy != apiextensionsv1.NoneConverter || crd.Spec.Conversion.Webhook != nil {
		t.Errorf("None CRD: %+v", crd.Spec)
	}
}

func TestCheckCronTabs(t *testing.T) {
	item := func(av string, i int, fields string) string {
		return fmt.Sprintf(`{"apiVersion":%q,"kind":"CronTab","metadata":{"name":"crontab-%05d"},%s}`, av, i, fields)
	}
	list := func(av string, items ...string) []byte {
		return []byte(fmt.Sprintf(`{"apiVersion":%q,"kind":"CronTabList","items":[%s]}`, av, strings.Join(items, ",")))
	}
	good := list("example.com/v1", item("example.com/v1", 0, `"host":"host-00000.example.com","port":"8000"`), item("example.com/v1", 1, `"host":"host-00001.example.com","port":"8001"`))
	if kept, p := checkCronTabs(good, 2, "crontab-", "example.com/v1", true); p != "" || kept {
		t.Errorf("good v1: %q kept=%v", p, kept)
	}
	if _, p := checkCronTabs(good, 3, "crontab-", "example.com/v1", true); p == "" {
		t.Error("wrong count not caught")
	}
	wrong := list("example.com/v1", item("example.com/v1", 0, `"host":"host-00000.example.com","port":"8001"`))
	if _, p := checkCronTabs(wrong, 1, "crontab-", "example.com/v1", true); !strings.Contains(p, "1 of 1 items wrong") {
		t.Errorf("wrong port: %q", p)
	}
	unconverted := list("example.com/v1", item("example.com/v1beta1", 0, `"hostPort":"host-00000.example.com:8000"`))
	if _, p := checkCronTabs(unconverted, 1, "crontab-", "example.com/v1", true); p == "" {
		t.Error("unconverted item not caught")
	}
	none := list("none.example.com/v1", item("none.example.com/v1", 0, `"hostPort":"host-00000.example.com:8000"`))
	if kept, p := checkCronTabs(none, 1, "crontab-", "none.example.com/v1", false); p != "" || !kept {
		t.Errorf("None v1: %q kept=%v", p, kept)
	}
	stored := list("example.com/v1beta1", item("example.com/v1beta1", 0, `"hostPort":"host-00000.example.com:8000"`))
	if _, p := checkCronTabs(stored, 1, "crontab-", "example.com/v1beta1", false); p != "" {
		t.Errorf("v1beta1: %q", p)
	}
}
