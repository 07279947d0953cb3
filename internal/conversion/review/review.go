// Package review is the one codec of ConversionReviews
// (apiextensions.k8s.io/v1 and v1beta1, whose JSON is the same): the
// request a conversion webhook is sent and the answer read back
// (EncodeRequest, DecodeResponse: crdserver's webhook client,
// internal/conversion's Webhook), and the serving side (Serve: the rules
// webhook of `crdserver conversion-webhook` and the public toolkit
// conversion/webhook). What a review means is left to them: which
// objects to send, how to check an answer, how to convert.
package review

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsv1beta1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// MaxBodyBytes bounds a ConversionReview body both ways: the request a
// webhook served with Serve reads, and the answer crdserver's webhook
// client reads. A review carries the same objects there and back, so one
// bound fits both. kube-apiserver itself bounds neither: it sends the
// objects of a whole list in one review and reads a webhook's answer whole
// (client-go's REST client), so a webhook behind a Kubernetes cluster must
// take reviews far larger than kube-apiserver's 3 MiB limit on the body of
// a write, which bounds one object, not a list of them (with that limit a
// webhook would fail the read of a list of a few large objects). 128 MiB
// is the bound crdserver's client has always put on answers: far above
// any list a Kubernetes user reads in one request (etcd keeps an object
// under 1.5 MiB), and still a bound on what a runaway peer can make us
// hold.
const MaxBodyBytes = 128 << 20

// maxBodyBytes is MaxBodyBytes, lowered by tests.
var maxBodyBytes int64 = MaxBodyBytes

// Kind is the kind of a ConversionReview.
const Kind = "ConversionReview"

// Supported says whether apiVersion is a ConversionReview version this
// codec reads and writes.
func Supported(apiVersion string) bool {
	return apiVersion == apiextensionsv1.SchemeGroupVersion.String() || apiVersion == apiextensionsv1beta1.SchemeGroupVersion.String()
}

// EncodeRequest is the body of a review of apiVersion (see Supported)
// asking for objs in desiredAPIVersion.
func EncodeRequest(apiVersion string, uid types.UID, desiredAPIVersion string, objs [][]byte) ([]byte, error) {
	rev := apiextensionsv1.ConversionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: apiVersion, Kind: Kind},
		Request:  &apiextensionsv1.ConversionRequest{UID: uid, DesiredAPIVersion: desiredAPIVersion, Objects: make([]runtime.RawExtension, len(objs))},
	}
	for i, o := range objs {
		rev.Request.Objects[i] = runtime.RawExtension{Raw: o}
	}
	return json.Marshal(&rev)
}

// DecodeResponse decodes a webhook's answer, of either version (its
// apiVersion and kind say which, for the caller to check).
func DecodeResponse(body []byte) (*apiextensionsv1.ConversionReview, error) {
	var rev apiextensionsv1.ConversionReview
	if err := json.Unmarshal(body, &rev); err != nil {
		return nil, err
	}
	return &rev, nil
}

// ReadBody reads a review's body, at most MaxBodyBytes of it (an answer
// cut there fails to decode).
func ReadBody(r io.Reader) ([]byte, error) {
	return io.ReadAll(io.LimitReader(r, maxBodyBytes))
}

// Func converts the objects of one review to desiredAPIVersion: one object
// per object, in order. An error fails the whole review, its message the
// answer's.
type Func func(objs [][]byte, desiredAPIVersion string) ([][]byte, error)

// Serve answers the ConversionReview r POSTs with convert: in the version
// asked (apiextensions.k8s.io/v1 or v1beta1), with the request's uid, and
// result Success with the converted objects or Failure with convert's
// message. A request that is not a review (not a POST, over MaxBodyBytes,
// not JSON, of another version, without a request) is answered with an
// HTTP error.
func Serve(w http.ResponseWriter, r *http.Request, convert Func) {
	if r.Method != http.MethodPost {
		http.Error(w, "ConversionReviews are POSTed", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBodyBytes+1))
	switch {
	case err != nil:
		http.Error(w, "the request body is unreadable: "+err.Error(), http.StatusBadRequest)
		return
	case int64(len(body)) > maxBodyBytes:
		http.Error(w, fmt.Sprintf("the request body is larger than %d bytes", maxBodyBytes), http.StatusRequestEntityTooLarge)
		return
	}
	var rev apiextensionsv1.ConversionReview
	if err := json.Unmarshal(body, &rev); err != nil {
		http.Error(w, "not a ConversionReview: "+err.Error(), http.StatusBadRequest)
		return
	}
	if !Supported(rev.APIVersion) {
		http.Error(w, fmt.Sprintf("unsupported ConversionReview version %q", rev.APIVersion), http.StatusBadRequest)
		return
	}
	if rev.Request == nil {
		http.Error(w, "not a ConversionReview with a request", http.StatusBadRequest)
		return
	}
	req := rev.Request
	objs := make([][]byte, len(req.Objects))
	for i, o := range req.Objects {
		objs[i] = o.Raw
	}
	resp := &apiextensionsv1.ConversionResponse{UID: req.UID, Result: metav1.Status{Status: metav1.StatusSuccess}}
	converted, err := convert(objs, req.DesiredAPIVersion)
	if err == nil && len(converted) != len(objs) {
		err = fmt.Errorf("the conversion answered %d objects for %d", len(converted), len(objs))
	}
	if err != nil {
		resp.Result = metav1.Status{Status: metav1.StatusFailure, Message: err.Error()}
	} else {
		resp.ConvertedObjects = make([]runtime.RawExtension, len(converted))
		for i, o := range converted {
			resp.ConvertedObjects[i] = runtime.RawExtension{Raw: o}
		}
	}
	answer := apiextensionsv1.ConversionReview{TypeMeta: rev.TypeMeta, Response: resp}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(&answer)
}
