package integration

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// benchList creates n CronTabs through the handler, lists them once (the
// list that warms what is remembered), then measures lists of them all
// in version.
func benchList(b *testing.B, n int, version string) {
	srv, _ := plainServer(b, "crd-crontab-list")
	h := srv.Handler()
	const path = "/apis/list.example.com/v1/namespaces/default/crontabs"
	for i := 0; i < n; i++ {
		serve(b, h, "POST", path, "application/json", "",
			fmt.Sprintf(`{"apiVersion":"list.example.com/v1","kind":"CronTab","metadata":{"name":"ct-%05d","labels":{"bench":"list"}},"spec":{"cronSpec":"*/%d * * * *","image":"image-%d"}}`, i, i%60+1, i), http.StatusCreated)
	}
	list := "/apis/list.example.com/" + version + "/namespaces/default/crontabs"
	rec := serve(b, h, "GET", list, "", "application/json", "", http.StatusOK)
	if got := strings.Count(rec.Body.String(), `"kind":"CronTab"`); got != n {
		b.Fatalf("listed %d objects, want %d", got, n)
	}
	b.ReportAllocs()
	b.SetBytes(int64(rec.Body.Len()))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		serve(b, h, "GET", list, "", "application/json", "", http.StatusOK)
	}
}

// BenchmarkList10000 lists 10,000 custom resources in their stored
// version from the watch cache.
func BenchmarkList10000(b *testing.B) { benchList(b, 10000, "v1") }

// BenchmarkList10000Converted lists them in another version (None
// conversion), once every object remembers its conversion.
func BenchmarkList10000Converted(b *testing.B) { benchList(b, 10000, "v1beta1") }
