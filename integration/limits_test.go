package integration

import (
	"net/http"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Bodies built to exhaust the decoder are refused with 400, and the server
// goes on.
func TestHostileBodies(t *testing.T) {
	e := start(t)
	e.createCRD(cronTabCRD(t))
	deep := `{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"deep"},"spec":` +
		strings.Repeat(`{"a":`, 20000) + `1` + strings.Repeat(`}`, 20000) + `}`
	r := e.do("POST", ctPath, deep)
	if r.code != http.StatusBadRequest && r.code != http.StatusUnprocessableEntity {
		t.Fatalf("deep JSON: %d %.300s", r.code, r.body)
	}
	r.status(t)
	deepList := `{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"deep"},"spec":` +
		strings.Repeat(`[`, 20000) + strings.Repeat(`]`, 20000) + `}`
	if r := e.do("POST", ctPath, deepList); r.code != http.StatusBadRequest && r.code != http.StatusUnprocessableEntity {
		t.Fatalf("deep JSON list: %d %.300s", r.code, r.body)
	}
	// A YAML alias bomb.
	var b strings.Builder
	b.WriteString("apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata:\n  name: bomb\na0: &a0 [x, x, x, x, x, x, x, x, x, x]\n")
	for i := 1; i < 9; i++ {
		b.WriteString("a" + string(rune('0'+i)) + ": &a" + string(rune('0'+i)) + " [" + strings.Repeat("*a"+string(rune('0'+i-1))+", ", 9) + "*a" + string(rune('0'+i-1)) + "]\n")
	}
	r = e.do("POST", ctPath, b.String(), "Content-Type", "application/yaml")
	st := expectStatus(t, r, http.StatusBadRequest, metav1.StatusReasonBadRequest, "")
	if !strings.Contains(st.Message, "aliasing") && !strings.Contains(st.Message, "alias") {
		t.Fatalf("alias bomb: %s", st.Message)
	}
	// Nothing was stored and the server serves.
	if r := e.do("GET", ctPath, ""); r.code != 200 || strings.Contains(string(r.body), `"name":"deep"`) || strings.Contains(string(r.body), `"name":"bomb"`) {
		t.Fatalf("list after: %d %.300s", r.code, r.body)
	}
}
