package filters

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

// listBody is a list of n custom resources of about 1 KiB each, as JSON.
func listBody(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"apiVersion":"stable.example.com/v1","kind":"CronTabList","metadata":{"resourceVersion":"12345"},"items":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"ct-%05d","namespace":"default","uid":"%08x-1f2e-4d3c-9b8a-%012x","resourceVersion":"%d","generation":1,"creationTimestamp":"2026-11-25T12:00:00Z","labels":{"app":"bench","tier":"t%d"},"managedFields":[{"manager":"bench","operation":"Update","apiVersion":"stable.example.com/v1","time":"2026-11-25T12:00:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{".":{},"f:cronSpec":{},"f:image":{},"f:replicas":{}}}}]},"spec":{"cronSpec":"*/%d * * * *","image":"registry.example.com/team/image-%d:v1.2.%d","replicas":%d,"description":"%s"}}`,
			i, i*7919, i*104729, 1000+i, i%5, i%60+1, i, i%10, i%5, words(i))
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

// words is some text that differs from object to object.
func words(seed int) string {
	vocab := []string{"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra", "tango"}
	var b strings.Builder
	x := uint32(seed*2654435761 + 1)
	for b.Len() < 300 {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b.WriteString(vocab[x%uint32(len(vocab))])
		b.WriteString(strconv.Itoa(int(x % 1000)))
		b.WriteByte(' ')
	}
	return b.String()
}

// BenchmarkCompressedList is a full list of 10,000 objects (about 9 MB)
// answered to a client that accepts gzip, as client-go asks.
func BenchmarkCompressedList(b *testing.B) {
	body := listBody(10000)
	h := WithCompression(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(body)
	}))
	r := httptest.NewRequest("GET", "/apis/stable.example.com/v1/crontabs", nil)
	r.Header.Set("Accept-Encoding", "gzip")
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	var w *discardWriter
	for b.Loop() {
		w = &discardWriter{header: http.Header{}}
		h.ServeHTTP(w, r)
		if w.header.Get("Content-Encoding") != "gzip" {
			b.Fatal("not compressed")
		}
	}
	b.ReportMetric(float64(w.n)/float64(len(body)), "compressed/raw")
}

type discardWriter struct {
	header http.Header
	n      int
}

func (w *discardWriter) Header() http.Header { return w.header }
func (w *discardWriter) WriteHeader(int)     {}
func (w *discardWriter) Write(p []byte) (int, error) {
	w.n += len(p)
	return io.Discard.Write(p)
}
