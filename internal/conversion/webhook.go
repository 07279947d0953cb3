package conversion

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/crdserver/crdserver/internal/conversion/review"
	"github.com/crdserver/crdserver/internal/jsonraw"
)

// Webhook converts a CRD's objects by calling its conversion webhook.
type Webhook struct {
	client        *http.Client
	url           string
	reviewVersion string // apiextensions.k8s.io/v1 or v1beta1
	maxObjects    int
	kind          string
	group         string
	recheck       time.Duration
}

func newWebhook(crd *apiextensionsv1.CustomResourceDefinition, opts Options) (*Webhook, error) {
	conv := crd.Spec.Conversion
	if conv == nil || conv.Webhook == nil || conv.Webhook.ClientConfig == nil {
		return nil, fmt.Errorf("CRD %s: webhook conversion without a webhook client config", crd.Name)
	}
	w := &Webhook{maxObjects: opts.MaxObjectsPerCall, kind: crd.Spec.Names.Kind, group: crd.Spec.Group, recheck: opts.RecheckInterval}
	for _, v := range conv.Webhook.ConversionReviewVersions {
		if v == "v1" || v == "v1beta1" {
			w.reviewVersion = apiextensionsv1.GroupName + "/" + v
			break
		}
	}
	if w.reviewVersion == "" {
		return nil, errors.New("no supported conversion review versions")
	}
	cc := conv.Webhook.ClientConfig
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if len(cc.CABundle) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(cc.CABundle) {
			return nil, errors.New("the conversion webhook caBundle holds no PEM certificate")
		}
		tc.RootCAs = pool
	}
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	transport := &http.Transport{
		TLSClientConfig:     tc,
		ForceAttemptHTTP2:   true,
		MaxIdleConnsPerHost: 8,
		IdleConnTimeout:     90 * time.Second,
		DialContext:         dialer.DialContext,
	}
	switch {
	case cc.URL != nil:
		w.url = *cc.URL
	case cc.Service != nil:
		s := cc.Service
		port := int32(443)
		if s.Port != nil {
			port = *s.Port
		}
		path := "/"
		if s.Path != nil {
			path = *s.Path
		}
		host := s.Name + "." + s.Namespace + ".svc"
		tc.ServerName = host
		hostPort := net.JoinHostPort(host, strconv.Itoa(int(port)))
		w.url = "https://" + hostPort + path
		if addr, ok := opts.ServiceAddresses[ServiceKey(s.Namespace, s.Name, port)]; ok {
			// No cluster DNS: the operator says where the service is.
			transport.DialContext = func(ctx context.Context, network, a string) (net.Conn, error) {
				if a == hostPort {
					a = addr
				}
				return dialer.DialContext(ctx, network, a)
			}
		}
	default:
		return nil, fmt.Errorf("CRD %s: the conversion webhook has neither url nor service", crd.Name)
	}
	w.client = &http.Client{Transport: transport, Timeout: opts.Timeout}
	return w, nil
}

// ServiceKey names a service port in Options.ServiceAddresses:
// namespace/name:port.
func ServiceKey(namespace, name string, port int32) string {
	return namespace + "/" + name + ":" + strconv.Itoa(int(port))
}

// recheckInterval is how long the webhook's answers are kept (see
// Options.RecheckInterval): a webhook redeployed at the same address may
// answer otherwise, or fail.
func (w *Webhook) recheckInterval() time.Duration { return w.recheck }

// Close releases the webhook's idle connections.
func (w *Webhook) Close() { w.client.CloseIdleConnections() }

// Convert implements Converter: the objects not yet in version to go to
// the webhook, in calls of at most MaxObjectsPerCall objects; the others
// are returned as they are.
func (w *Webhook) Convert(ctx context.Context, objs [][]byte, to string) (Result, error) {
	var todo []int
	from := ""
	for i, o := range objs {
		av, _, err := jsonraw.String(o, "apiVersion")
		if err != nil {
			return Result{}, apierrors.NewInternalError(err)
		}
		if av != to {
			todo = append(todo, i)
			if from == "" {
				from = av
			}
		}
	}
	if len(todo) == 0 {
		return unchanged(objs), nil
	}
	res := Result{Objects: append([][]byte(nil), objs...), Changed: make([]bool, len(objs))}
	gvk := fmt.Sprintf("%s, Kind=%s", from, w.kind)
	for start := 0; start < len(todo); start += w.maxObjects {
		idx := todo[start:min(start+w.maxObjects, len(todo))]
		in := make([][]byte, len(idx))
		for j, i := range idx {
			in[j] = objs[i]
		}
		converted, err := w.call(ctx, in, to, gvk)
		if err != nil {
			return Result{}, apierrors.NewInternalError(err)
		}
		for j, i := range idx {
			res.Objects[i], res.Changed[i] = converted[j], true
		}
	}
	return res, nil
}

// call sends one ConversionReview and checks the answer.
func (w *Webhook) call(ctx context.Context, objs [][]byte, to, gvk string) ([][]byte, error) {
	uid := uuid.NewUUID()
	body, err := review.EncodeRequest(w.reviewVersion, uid, to, objs)
	if err != nil {
		return nil, fmt.Errorf("conversion webhook for %v failed: %v", gvk, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.url, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("conversion webhook for %v failed: %v", gvk, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := w.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("conversion webhook for %v failed: %v", gvk, err)
	}
	defer resp.Body.Close()
	data, err := review.ReadBody(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("conversion webhook for %v failed: %v", gvk, err)
	}
	if resp.StatusCode < http.StatusOK || resp.StatusCode > http.StatusPartialContent {
		return nil, fmt.Errorf("conversion webhook for %v failed: %v", gvk, responseError(resp, data))
	}
	answer, err := review.DecodeResponse(data)
	if err != nil {
		return nil, fmt.Errorf("conversion webhook for %v failed: malformed response: %v", gvk, err)
	}
	if answer.APIVersion != w.reviewVersion || answer.Kind != review.Kind {
		return nil, fmt.Errorf("conversion webhook for %v failed: expected webhook response of %s, Kind=ConversionReview, got %s, Kind=%s", gvk, w.reviewVersion, answer.APIVersion, answer.Kind)
	}
	r := answer.Response
	switch {
	case r == nil:
		return nil, fmt.Errorf("conversion webhook for %v failed: no response provided", gvk)
	case r.UID != uid:
		return nil, fmt.Errorf("conversion webhook for %v failed: expected response.uid=%q, got %q", gvk, uid, r.UID)
	case r.Result.Status != metav1.StatusSuccess:
		if r.Result.Message != "" {
			return nil, fmt.Errorf("conversion webhook for %v failed: %s", gvk, r.Result.Message)
		}
		return nil, fmt.Errorf("conversion webhook for %v failed: response.result.status was '%s', not 'Success'", gvk, r.Result.Status)
	case len(r.ConvertedObjects) != len(objs):
		return nil, fmt.Errorf("conversion webhook for %v returned %d objects, expected %d", gvk, len(r.ConvertedObjects), len(objs))
	}
	out := make([][]byte, len(objs))
	for i, c := range r.ConvertedObjects {
		o, err := w.checkConverted(objs[i], c.Raw, to)
		if err != nil {
			return nil, fmt.Errorf("conversion webhook for %v returned invalid converted object at index %v: %v", gvk, i, err)
		}
		out[i] = o
	}
	return out, nil
}

// maxErrorBodyBytes is as much of an error answer's body as client-go
// puts in its error.
const maxErrorBodyBytes = 2048

// responseError is the error of a webhook answer that is not a success,
// worded as Kubernetes' webhook client (client-go's REST client) words it:
// the message of a failure Status the body holds, or the generic text of
// the status code (with the body, when it is text, for codes whose text
// includes it).
func responseError(resp *http.Response, body []byte) error {
	var st metav1.Status
	if json.Unmarshal(body, &st) == nil && st.Kind == "Status" && (st.APIVersion == "" || st.APIVersion == "v1") && st.Status == metav1.StatusFailure {
		return &apierrors.StatusError{ErrStatus: st}
	}
	if len(body) > maxErrorBodyBytes {
		body = body[:maxErrorBodyBytes]
	}
	message := "unknown"
	if isTextResponse(resp) {
		message = strings.TrimSpace(string(body))
	}
	retryAfter := 0
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
		retryAfter = s
	}
	return apierrors.NewGenericServerResponse(resp.StatusCode, http.MethodPost, schema.GroupResource{}, "", message, retryAfter, true)
}

// isTextResponse: client-go takes an answer without a Content-Type, or
// with a text/* one, for text.
func isTextResponse(resp *http.Response) bool {
	ct := resp.Header.Get("Content-Type")
	if ct == "" {
		return true
	}
	media, _, err := mime.ParseMediaType(ct)
	return err == nil && strings.HasPrefix(media, "text/")
}

// checkConverted validates one converted object against its original and
// returns it with the original's metadata, apart from labels and
// annotations, which the webhook may change.
func (w *Webhook) checkConverted(original, converted []byte, to string) ([]byte, error) {
	if len(converted) == 0 {
		return nil, errors.New("empty object")
	}
	av, _, err := jsonraw.String(converted, "apiVersion")
	if err != nil {
		return nil, err
	}
	if av != to {
		return nil, fmt.Errorf("invalid groupVersion (expected %v, received %v)", to, av)
	}
	if k, _, _ := jsonraw.String(converted, "kind"); k != w.kind {
		return nil, fmt.Errorf("invalid kind (expected %v, received %v)", w.kind, k)
	}
	var om, cm map[string]any
	if raw, ok, _ := jsonraw.Field(original, "metadata"); ok {
		if err := json.Unmarshal(raw, &om); err != nil {
			return nil, err
		}
	}
	raw, ok, err := jsonraw.Field(converted, "metadata")
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, errors.New("missing metadata in converted object")
	}
	if err := json.Unmarshal(raw, &cm); err != nil || cm == nil {
		return nil, fmt.Errorf("invalid metadata in converted object: %v", err)
	}
	for _, f := range []string{"name", "namespace", "uid"} {
		if cm[f] != om[f] {
			what := f
			if f == "uid" {
				what = "UID"
			}
			return nil, fmt.Errorf("invalid metadata: must have the same %s: %v != %v", what, om[f], cm[f])
		}
	}
	md := make(map[string]any, len(om))
	for k, v := range om {
		md[k] = v
	}
	for _, f := range []string{"labels", "annotations"} {
		v, ok := cm[f]
		if !ok || v == nil {
			delete(md, f)
			continue
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("invalid metadata.%s of type %T in converted object", f, v)
		}
		strs := make(map[string]string, len(m))
		for k, x := range m {
			s, ok := x.(string)
			if !ok {
				return nil, fmt.Errorf("metadata.%s[%s] must be a string, but is %T in converted object", f, k, x)
			}
			strs[k] = s
		}
		var errs field.ErrorList
		if f == "labels" {
			errs = metav1validation.ValidateLabels(strs, field.NewPath("metadata", "labels"))
		} else {
			errs = apivalidation.ValidateAnnotations(strs, field.NewPath("metadata", "annotations"))
		}
		if len(errs) > 0 {
			return nil, errs.ToAggregate()
		}
		md[f] = m
	}
	mdRaw, err := json.Marshal(md)
	if err != nil {
		return nil, err
	}
	return jsonraw.SetField(converted, "metadata", mdRaw)
}
