package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestLoadBodyPadded: load's -body-bytes pads a Widget to exactly that
// size with an annotation, and leaves it alone when it is already larger.
func TestLoadBodyPadded(t *testing.T) {
	l := &loader{apiVersion: "peer.example.com/v1", kind: "Widget", bodyBytes: 1024}
	for i := range 3 {
		b := l.body("crdbench-l-00007", i)
		if len(b) != 1024 {
			t.Errorf("body %d: %d bytes, want 1024", i, len(b))
		}
		var o struct {
			Metadata struct {
				Annotations map[string]string `json:"annotations"`
			} `json:"metadata"`
			Spec map[string]any `json:"spec"`
		}
		if err := json.Unmarshal(b, &o); err != nil || len(o.Metadata.Annotations["crdbench.example.com/pad"]) < 800 || o.Spec["color"] == nil {
			t.Errorf("body %d: %s (%v)", i, b, err)
		}
	}
	l.bodyBytes = 100
	if b := l.body("x", 0); strings.Contains(string(b), "annotations") {
		t.Errorf("a body already over -body-bytes was padded: %s", b)
	}
}
