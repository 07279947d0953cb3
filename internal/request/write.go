package request

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

// NewStatusError returns a Status error with a code, reason and message.
func NewStatusError(code int, reason metav1.StatusReason, msg string) *apierrors.StatusError {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    int32(code),
		Reason:  reason,
		Message: msg,
	}}
}

// NotFound is the error for a path that names no resource.
func NotFound() *apierrors.StatusError {
	return NewStatusError(http.StatusNotFound, metav1.StatusReasonNotFound, "the server could not find the requested resource")
}

// MethodNotAllowed is the error for a verb a resource does not support.
func MethodNotAllowed(verb string, gr schema.GroupResource) *apierrors.StatusError {
	return apierrors.NewMethodNotSupported(gr, verb)
}

// BadRequest is a 400 with a message.
func BadRequest(msg string) *apierrors.StatusError { return apierrors.NewBadRequest(msg) }

// Status returns the Status an error is reported as; errors that are not
// API errors are internal errors.
func Status(err error) *metav1.Status {
	var se apierrors.APIStatus
	if errors.As(err, &se) {
		st := se.Status()
		if st.Status == "" {
			st.Status = metav1.StatusFailure
		}
		if st.Code == 0 {
			st.Code = http.StatusInternalServerError
		}
		return &st
	}
	st := apierrors.NewInternalError(err).ErrStatus
	return &st
}

// WriteError answers with the Status of err, encoded as the client asked
// (JSON unless it asked for YAML).
func WriteError(w http.ResponseWriter, r *http.Request, err error) {
	st := Status(err)
	if st.Code >= 500 && st.Code != http.StatusGatewayTimeout && st.Code != http.StatusServiceUnavailable {
		slog.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	st.Kind, st.APIVersion = "Status", "v1"
	// A Status has a protobuf encoding: a client that reads only protobuf
	// gets its errors in it.
	t, nerr := Negotiate(r, Offer{Protobuf: true})
	if nerr != nil {
		t = Target{Format: FormatJSON}
	}
	if st.Details != nil && st.Details.RetryAfterSeconds > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(st.Details.RetryAfterSeconds)))
	}
	body, _ := json.Marshal(st)
	Write(w, r, int(st.Code), Target{Format: t.Format, Pretty: t.Pretty}, body)
}

// Write sends a JSON body in the target representation.
func Write(w http.ResponseWriter, r *http.Request, code int, t Target, body []byte) {
	out, err := Encode(t, body)
	switch {
	case err == nil:
		body = out
	case t.Format == FormatProtobuf:
		code, body = http.StatusInternalServerError, []byte(err.Error())
		t = Target{Format: FormatJSON}
	default:
		code, body = http.StatusInternalServerError, []byte(err.Error())
	}
	h := w.Header()
	h.Set("Content-Type", t.ContentType())
	if h.Get("Cache-Control") == "" {
		h.Set("Cache-Control", "no-cache, private")
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(code)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}

// Encode turns a JSON body into the representation of t: protobuf, YAML,
// indented JSON, or the JSON as it is.
func Encode(t Target, body []byte) ([]byte, error) {
	switch {
	case t.Format == FormatProtobuf:
		return JSONToProtobuf(body)
	case t.Format == FormatYAML:
		return yaml.JSONToYAML(body)
	case t.Pretty:
		var buf bytes.Buffer
		if json.Indent(&buf, body, "", "  ") == nil {
			buf.WriteByte('\n')
			return buf.Bytes(), nil
		}
	}
	return body, nil
}

// WriteObject encodes v as JSON and sends it in the target representation.
func WriteObject(w http.ResponseWriter, r *http.Request, code int, t Target, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		WriteError(w, r, err)
		return
	}
	Write(w, r, code, t, body)
}

// AddWarning adds a Warning header (RFC 7234 code 299), once per text.
func AddWarning(w http.ResponseWriter, text string) {
	v := fmt.Sprintf("299 - %s", quoteWarning(text))
	for _, have := range w.Header().Values("Warning") {
		if have == v {
			return
		}
	}
	w.Header().Add("Warning", v)
}

func quoteWarning(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			b.WriteByte(' ')
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
