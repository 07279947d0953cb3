package flowcontrol

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A suggested object is kept as bootstrapped as its annotation says, or,
// without a valid one, while nobody changed it; the annotation is written
// when it does not say what is done.
func TestAutoUpdate(t *testing.T) {
	tests := []struct {
		annotation         *string
		generation         int64
		update, annotating bool
	}{
		{nil, 1, true, true},
		{nil, 2, false, true},
		{ptr("true"), 5, true, false},
		{ptr("false"), 1, false, false},
		{ptr("junk"), 1, true, true},
		{ptr("junk"), 3, false, true},
	}
	for _, tt := range tests {
		o := &metav1.ObjectMeta{Generation: tt.generation}
		if tt.annotation != nil {
			o.Annotations = map[string]string{"apf.kubernetes.io/autoupdate-spec": *tt.annotation}
		}
		update := shouldUpdateSpec(o)
		if update != tt.update || shouldUpdateAnnotation(o, update) != tt.annotating {
			t.Errorf("%v gen %d: update %v, annotate %v", tt.annotation, tt.generation, update, shouldUpdateAnnotation(o, update))
		}
	}
}

func ptr(s string) *string { return &s }
