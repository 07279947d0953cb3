// Package audit writes an audit log: one audit.k8s.io/v1 Event per
// request, as JSON lines, at the Metadata level (who, what, which object,
// the response code), with the annotations Kubernetes adds — among them
// k8s.io/deprecated for requests to deprecated API versions. Every response
// carries its event's Audit-Id header.
//
// It is the minimal log of the versions issue; policies, levels and
// rotation come with the security work.
package audit

import (
	"bufio"
	"encoding/json"
	"github.com/crdserver/crdserver/internal/auth"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/crdserver/crdserver/internal/request"
	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
)

// Log appends events to a file.
type Log struct {
	mu sync.Mutex
	f  *os.File
	w  *bufio.Writer
}

// Open opens (or creates) the log file for appending.
func Open(path string) (*Log, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, err
	}
	return &Log{f: f, w: bufio.NewWriterSize(f, 64*1024)}, nil
}

// Close flushes and closes the file.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.w.Flush(); err != nil {
		return err
	}
	return l.f.Close()
}

func (l *Log) write(ev *auditv1.Event) {
	b, err := json.Marshal(ev)
	if err != nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = l.w.Write(append(b, '\n'))
	_ = l.w.Flush()
}

type codeWriter struct {
	http.ResponseWriter
	code int
}

func (w *codeWriter) WriteHeader(c int) {
	if w.code == 0 {
		w.code = c
	}
	w.ResponseWriter.WriteHeader(c)
}

func (w *codeWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *codeWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *codeWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// WithAudit sets the Audit-Id header of every response and, when l is not
// nil, logs an event for every request once it is answered.
func WithAudit(next http.Handler, l *Log) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := uuid.NewUUID()
		w.Header().Set("Audit-Id", string(id))
		if l == nil {
			next.ServeHTTP(w, r)
			return
		}
		received := metav1.NewMicroTime(time.Now())
		cw := &codeWriter{ResponseWriter: w}
		next.ServeHTTP(cw, r)
		info := request.InfoFrom(r.Context())
		ev := &auditv1.Event{
			TypeMeta:                 metav1.TypeMeta{APIVersion: "audit.k8s.io/v1", Kind: "Event"},
			Level:                    auditv1.LevelMetadata,
			AuditID:                  id,
			Stage:                    auditv1.StageResponseComplete,
			RequestURI:               r.URL.RequestURI(),
			Verb:                     info.Verb,
			UserAgent:                r.UserAgent(),
			RequestReceivedTimestamp: received,
			StageTimestamp:           metav1.NewMicroTime(time.Now()),
		}
		if u, ok := auth.UserFrom(r.Context()); ok {
			ev.User = authnv1.UserInfo{Username: u.GetName(), UID: u.GetUID(), Groups: u.GetGroups()}
		}
		if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
			ev.SourceIPs = []string{host}
		}
		code := cw.code
		if code == 0 {
			code = http.StatusOK
		}
		ev.ResponseStatus = &metav1.Status{Code: int32(code)}
		if info.IsResourceRequest {
			ev.ObjectRef = &auditv1.ObjectReference{
				Resource: info.Resource, Namespace: info.Namespace, Name: info.Name,
				APIGroup: info.Group, APIVersion: info.Version, Subresource: info.Subresource,
			}
		}
		if info.Deprecated {
			ev.Annotations = map[string]string{"k8s.io/deprecated": "true"}
		}
		l.write(ev)
	})
}
