package webhook_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/crdserver/crdserver/conversion/webhook"
)

// Widget's two versions: v1alpha1 holds a size in one string ("3x4"),
// v1 holds width and height. The hub is what every version converts
// through.
type widgetHub struct{ Width, Height int }

type widgetV1alpha1 struct {
	Spec struct {
		Size string `json:"size"`
	} `json:"spec"`
}

type widgetV1 struct {
	Spec struct {
		Width  int `json:"width"`
		Height int `json:"height"`
	} `json:"spec"`
}

func newWidgetScheme() *webhook.Scheme[widgetHub] {
	s := webhook.NewScheme[widgetHub]()
	webhook.AddVersion(s, "example.com/v1alpha1",
		func(v *widgetV1alpha1) (*widgetHub, error) {
			h := &widgetHub{}
			_, err := fmt.Sscanf(v.Spec.Size, "%dx%d", &h.Width, &h.Height)
			return h, err
		},
		func(h *widgetHub) (*widgetV1alpha1, error) {
			v := &widgetV1alpha1{}
			v.Spec.Size = fmt.Sprintf("%dx%d", h.Width, h.Height)
			return v, nil
		})
	webhook.AddVersion(s, "example.com/v1",
		func(v *widgetV1) (*widgetHub, error) {
			return &widgetHub{Width: v.Spec.Width, Height: v.Spec.Height}, nil
		},
		func(h *widgetHub) (*widgetV1, error) {
			v := &widgetV1{}
			v.Spec.Width, v.Spec.Height = h.Width, h.Height
			return v, nil
		})
	return s
}

// A Scheme converts one object directly, as each object of a
// ConversionReview is converted.
func ExampleScheme_Convert() {
	s := newWidgetScheme()
	out, err := s.Convert([]byte(`{"apiVersion":"example.com/v1alpha1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":"3x4"}}`), "example.com/v1")
	if err != nil {
		panic(err)
	}
	fmt.Println(string(out))
	// Output:
	// {"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"height":4,"width":3}}
}

// A Scheme is the http.Handler of the webhook: it answers the
// ConversionReviews the API server sends (here over plain HTTP; a real
// webhook serves HTTPS, with its certificate in the CRD's caBundle).
func ExampleScheme_ServeHTTP() {
	srv := httptest.NewServer(newWidgetScheme())
	defer srv.Close()
	review := `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{
		"uid":"1","desiredAPIVersion":"example.com/v1alpha1",
		"objects":[{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"width":3,"height":4}}]}}`
	resp, err := http.Post(srv.URL, "application/json", strings.NewReader(review))
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	var answer struct {
		Response struct {
			UID              string
			ConvertedObjects []json.RawMessage
			Result           struct{ Status string }
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil {
		panic(err)
	}
	fmt.Println(answer.Response.UID, answer.Response.Result.Status)
	fmt.Println(string(answer.Response.ConvertedObjects[0]))
	// Output:
	// 1 Success
	// {"apiVersion":"example.com/v1alpha1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":"3x4"}}
}
