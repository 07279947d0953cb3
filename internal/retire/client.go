// Package retire is the client side of a CRD version's end of life: it
// reads the server's VersionReports (what retiring a version would break)
// and walks the retirement of one version step by step, as the Kubernetes
// documentation on CRD versions describes it — refuse while clients call
// it, migrate what is stored in it, rewrite the managedFields entries and
// ownerReferences that name it, drop it from status.storedVersions, stop
// serving it, and remove it once no request reached it for a while.
//
// Every step is an ordinary API request guarded by the object's
// resourceVersion, and looks at what is there before it writes: a step
// already done is skipped, so the walk resumes after a crash by running it
// again, and two walks at once (on any replicas) write each change once.
// The migration is the server's StorageVersionMigration, run by the
// leader of the replicas.
package retire

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/crdserver/crdserver/internal/apis/versionreport"
)

// Client talks to a server about its versions.
type Client struct {
	host   string
	http   *http.Client
	dyn    dynamic.Interface
	crds   apiextensionsclient.Interface
	mapper meta.RESTMapper
}

// NewClient makes a Client of the server cfg reaches.
func NewClient(cfg *rest.Config) (*Client, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, err
	}
	crds, err := apiextensionsclient.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, err
	}
	disc, err := discovery.NewDiscoveryClientForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, err
	}
	return &Client{
		host: strings.TrimSuffix(cfg.Host, "/"), http: hc, dyn: dyn, crds: crds,
		mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc)),
	}, nil
}

// Reports reads the VersionReports of one CRD (<plural>.<group>), or of
// every CRD when crd is "".
func (c *Client) Reports(ctx context.Context, crd string) ([]versionreport.VersionReport, error) {
	path := "/apis/" + versionreport.Group + "/" + versionreport.Version + "/" + versionreport.Plural
	if crd != "" {
		path += "?labelSelector=" + url.QueryEscape(versionreport.CRDLabel+"="+crd)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.host+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		var st struct{ Message string }
		_ = json.Unmarshal(body, &st)
		if st.Message == "" {
			st.Message = strings.TrimSpace(string(body))
		}
		return nil, fmt.Errorf("%s: %s", resp.Status, st.Message)
	}
	var list versionreport.VersionReportList
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, fmt.Errorf("the server's VersionReports: %w", err)
	}
	return list.Items, nil
}

// report is the VersionReport of one version of a CRD (nil if the CRD has
// no such version).
func (c *Client) report(ctx context.Context, crd, version string) (*versionreport.VersionReport, error) {
	reps, err := c.Reports(ctx, crd)
	if err != nil {
		return nil, err
	}
	for i := range reps {
		if reps[i].Spec.Version == version {
			return &reps[i], nil
		}
	}
	return nil, nil
}
