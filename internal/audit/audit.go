// Package audit writes Kubernetes' audit log: audit.k8s.io/v1 Events as
// JSON lines, chosen and shaped by an audit.k8s.io/v1 Policy (levels None,
// Metadata, Request, RequestResponse; stages RequestReceived,
// ResponseStarted, ResponseComplete, Panic; omitManagedFields), with the
// annotations Kubernetes adds (the authorization decision, k8s.io/deprecated
// for deprecated API versions), rotated by size. Every response carries
// its event's Audit-Id header.
package audit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"gopkg.in/natefinch/lumberjack.v2"
	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/uuid"
	auditinternal "k8s.io/apiserver/pkg/apis/audit"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	auditpkg "k8s.io/apiserver/pkg/audit"
	"k8s.io/apiserver/pkg/audit/policy"
	"sigs.k8s.io/yaml"

	"github.com/crdserver/crdserver/internal/auth"
	"github.com/crdserver/crdserver/internal/request"
)

// Options configure the audit log, with kube-apiserver's flags.
type Options struct {
	// Path is the log file (--audit-log-path); "-" is standard output.
	Path string
	// PolicyFile is an audit.k8s.io/v1 Policy (--audit-policy-file).
	// Without one every request is logged at the Metadata level at
	// ResponseComplete.
	PolicyFile string
	// MaxSizeMB rotates the file when it grows past this many megabytes
	// (--audit-log-maxsize; 0: never). MaxBackups and MaxAgeDays bound the
	// rotated files kept (--audit-log-maxbackup, --audit-log-maxage).
	MaxSizeMB, MaxBackups, MaxAgeDays int
}

// maxCapture bounds the request and response bodies an event records.
const maxCapture = 3 << 20

// Log appends events to a file.
type Log struct {
	mu   sync.Mutex
	w    io.WriteCloser
	eval auditpkg.PolicyRuleEvaluator
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

// Open opens (or creates) the log file and reads the policy.
func Open(o Options) (*Log, error) {
	l := &Log{}
	if o.PolicyFile != "" {
		p, err := policy.LoadPolicyFromFile(o.PolicyFile)
		if err != nil {
			return nil, fmt.Errorf("--audit-policy-file: %w", err)
		}
		l.eval = policy.NewPolicyRuleEvaluator(p)
	} else {
		l.eval = policy.NewFakePolicyRuleEvaluator(auditinternal.LevelMetadata, []auditinternal.Stage{auditinternal.StageRequestReceived})
	}
	switch {
	case o.Path == "-":
		l.w = nopCloser{os.Stdout}
	case o.MaxSizeMB > 0:
		l.w = &lumberjack.Logger{Filename: o.Path, MaxSize: o.MaxSizeMB, MaxBackups: o.MaxBackups, MaxAge: o.MaxAgeDays}
		if _, err := l.w.Write(nil); err != nil {
			return nil, err
		}
	default:
		f, err := os.OpenFile(o.Path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
		if err != nil {
			return nil, err
		}
		l.w = f
	}
	return l, nil
}

// Close closes the file.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Close()
}

func (l *Log) write(ev *auditv1.Event) {
	b, err := json.Marshal(ev)
	if err != nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = l.w.Write(append(b, '\n'))
}

// captureWriter records the status code and, when asked, the body.
type captureWriter struct {
	http.ResponseWriter
	code    int
	body    *bytes.Buffer
	started func()
}

func (w *captureWriter) WriteHeader(c int) {
	if w.code == 0 {
		w.code = c
		if w.started != nil {
			w.started()
		}
	}
	w.ResponseWriter.WriteHeader(c)
}

func (w *captureWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if w.body != nil && w.body.Len()+len(b) <= maxCapture {
		w.body.Write(b)
	}
	return w.ResponseWriter.Write(b)
}

func (w *captureWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *captureWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// teeBody keeps a copy of what the handler reads of a request body.
type teeBody struct {
	io.ReadCloser
	buf *bytes.Buffer
}

func (t *teeBody) Read(p []byte) (int, error) {
	n, err := t.ReadCloser.Read(p)
	if n > 0 && t.buf.Len()+n <= maxCapture {
		t.buf.Write(p[:n])
	}
	return n, err
}

var levels = map[auditinternal.Level]auditv1.Level{
	auditinternal.LevelMetadata:        auditv1.LevelMetadata,
	auditinternal.LevelRequest:         auditv1.LevelRequest,
	auditinternal.LevelRequestResponse: auditv1.LevelRequestResponse,
}

// WithAudit sets the Audit-Id header of every response and, when l is not
// nil, logs the request as the policy says. It runs inside authentication
// (the user is known) and outside impersonation and authorization (which
// report through the request's AuditContext).
func WithAudit(next http.Handler, l *Log) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := uuid.NewUUID()
		w.Header().Set("Audit-Id", string(id))
		if l == nil {
			next.ServeHTTP(w, r)
			return
		}
		received := metav1.NewMicroTime(time.Now())
		info := request.InfoFrom(r.Context())
		u, _ := auth.UserFrom(r.Context())
		cfg := l.eval.EvaluatePolicyRule(auth.Attributes(u, info))
		level, ok := levels[cfg.Level]
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		omit := map[auditinternal.Stage]bool{}
		for _, s := range cfg.OmitStages {
			omit[s] = true
		}
		ac := &request.AuditContext{Level: string(level)}
		ctx := request.WithAuditContext(r.Context(), ac)
		ev := &auditv1.Event{
			TypeMeta:                 metav1.TypeMeta{APIVersion: "audit.k8s.io/v1", Kind: "Event"},
			Level:                    level,
			AuditID:                  id,
			RequestURI:               r.URL.RequestURI(),
			Verb:                     info.Verb,
			UserAgent:                r.UserAgent(),
			RequestReceivedTimestamp: received,
		}
		if u != nil {
			ev.User = userInfo(u)
		}
		if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
			ev.SourceIPs = []string{host}
		}
		if info.IsResourceRequest {
			ev.ObjectRef = &auditv1.ObjectReference{
				Resource: info.Resource, Namespace: info.Namespace, Name: info.Name,
				APIGroup: info.Group, APIVersion: info.Version, Subresource: info.Subresource,
			}
		}
		emit := func(stage auditv1.Stage) {
			if omit[auditinternal.Stage(stage)] {
				return
			}
			e := ev.DeepCopy()
			e.Stage = stage
			e.StageTimestamp = metav1.NewMicroTime(time.Now())
			if a := ac.Annotations(); len(a) > 0 {
				e.Annotations = a
			}
			if info.Deprecated {
				if e.Annotations == nil {
					e.Annotations = map[string]string{}
				}
				e.Annotations["k8s.io/deprecated"] = "true"
			}
			if iu := ac.ImpersonatedUser(); iu != nil {
				e.ImpersonatedUser = iu
			}
			l.write(e)
		}
		var reqBody *bytes.Buffer
		if level != auditv1.LevelMetadata && r.Body != nil {
			reqBody = &bytes.Buffer{}
			r.Body = &teeBody{ReadCloser: r.Body, buf: reqBody}
		}
		emit(auditv1.StageRequestReceived)
		cw := &captureWriter{ResponseWriter: w, body: &bytes.Buffer{}}
		longRunning := info.IsLongRunning()
		if longRunning {
			cw.started = func() {
				ev.ResponseStatus = &metav1.Status{Code: int32(cw.code)}
				emit(auditv1.StageResponseStarted)
			}
		}
		defer func() {
			if p := recover(); p != nil {
				ev.ResponseStatus = &metav1.Status{Code: http.StatusInternalServerError, Status: metav1.StatusFailure, Message: fmt.Sprintf("APIServer panic'd: %v", p)}
				emit(auditv1.StagePanic)
				panic(p)
			}
		}()
		next.ServeHTTP(cw, r.WithContext(ctx))

		code := cw.code
		if code == 0 {
			code = http.StatusOK
		}
		ev.ResponseStatus = &metav1.Status{Code: int32(code)}
		if code >= 400 {
			var st metav1.Status
			if json.Unmarshal(cw.body.Bytes(), &st) == nil && st.Kind == "Status" {
				ev.ResponseStatus.Status, ev.ResponseStatus.Message, ev.ResponseStatus.Reason, ev.ResponseStatus.Details = st.Status, st.Message, st.Reason, st.Details
			}
		}
		if info.IsResourceRequest && ev.ObjectRef.Name == "" && info.Verb == "create" && code < 300 {
			var m struct {
				Metadata struct {
					Name string `json:"name"`
				} `json:"metadata"`
			}
			if json.Unmarshal(cw.body.Bytes(), &m) == nil {
				ev.ObjectRef.Name = m.Metadata.Name
			}
		}
		if reqBody != nil && reqBody.Len() > 0 {
			ev.RequestObject = object(reqBody.Bytes(), r.Header.Get("Content-Type"), cfg.OmitManagedFields)
		}
		if level == auditv1.LevelRequestResponse && !longRunning && cw.body.Len() > 0 {
			ev.ResponseObject = object(cw.body.Bytes(), cw.Header().Get("Content-Type"), cfg.OmitManagedFields)
		}
		emit(auditv1.StageResponseComplete)
	})
}

func userInfo(u interface {
	GetName() string
	GetUID() string
	GetGroups() []string
	GetExtra() map[string][]string
}) authnv1.UserInfo {
	out := authnv1.UserInfo{Username: u.GetName(), UID: u.GetUID(), Groups: u.GetGroups()}
	if extra := u.GetExtra(); len(extra) > 0 {
		out.Extra = map[string]authnv1.ExtraValue{}
		for k, v := range extra {
			out.Extra[k] = v
		}
	}
	return out
}

// object turns a JSON or YAML body into an event's object, without
// managedFields if the policy says so; other encodings are not recorded.
func object(body []byte, contentType string, omitManagedFields bool) *runtime.Unknown {
	var m map[string]any
	if err := yaml.Unmarshal(body, &m); err != nil || m == nil {
		return nil
	}
	if omitManagedFields {
		stripManagedFields(m)
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return nil
	}
	return &runtime.Unknown{Raw: raw, ContentType: runtime.ContentTypeJSON}
}

func stripManagedFields(m map[string]any) {
	if md, ok := m["metadata"].(map[string]any); ok {
		delete(md, "managedFields")
	}
	if items, ok := m["items"].([]any); ok {
		for _, it := range items {
			if im, ok := it.(map[string]any); ok {
				stripManagedFields(im)
			}
		}
	}
}
