// Package authinfo publishes the ConfigMap
// kube-system/extension-apiserver-authentication: the CAs whose client
// certificates this server trusts, which servers that delegate
// authentication to it (aggregated API servers, kube-rbac-proxy, the
// k8s.io/apiserver delegating options) read, as kube-apiserver's
// cluster-authentication-trust controller does. Certificates already
// listed there (another server's) are kept, and the server's own added:
// servers of one cluster may trust different CAs. With front-proxy
// (request header) authentication, its CA, allowed names and headers are
// published beside them under kube-apiserver's requestheader-* keys.
package authinfo

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	certutil "k8s.io/client-go/util/cert"

	"github.com/crdserver/crdserver/internal/auth/rbac"
	"github.com/crdserver/crdserver/internal/controller"
	"github.com/crdserver/crdserver/internal/resource"
	"github.com/crdserver/crdserver/internal/store"
)

// ClientCAKey is the ConfigMap's key for the client CA bundle.
const ClientCAKey = "client-ca-file"

// The ConfigMap's keys for request header authentication.
const (
	requestHeaderCAKey    = "requestheader-client-ca-file"
	requestHeaderNamesKey = "requestheader-allowed-names"
	requestHeaderUserKey  = "requestheader-username-headers"
	requestHeaderUIDKey   = "requestheader-uid-headers"
	requestHeaderGroupKey = "requestheader-group-headers"
	requestHeaderExtraKey = "requestheader-extra-headers-prefix"
)

var configMapsGVR = corev1.SchemeGroupVersion.WithResource("configmaps")

// Info is what the ConfigMap says about a server's authentication.
type Info struct {
	// ClientCA holds the CAs of client certificates (PEM).
	ClientCA []byte
	// RequestHeaderCA holds the CAs of front proxies' client certificates
	// (PEM); empty without request header authentication.
	RequestHeaderCA []byte
	// The front proxies' names (empty: any the CA signed), and the headers
	// they send a user's name, uid, groups and extra in.
	AllowedNames, UsernameHeaders, UIDHeaders, GroupHeaders, ExtraHeaderPrefixes []string
}

// Controller keeps the authentication ConfigMap.
type Controller struct {
	configMaps *resource.Resource
	info       Info
	dynamic    dynamic.Interface
	log        *slog.Logger
	queue      controller.Queue
}

// New returns the controller publishing info; it reads the ConfigMaps'
// cache and writes through dyn.
func New(configMaps *resource.Resource, info Info, dyn dynamic.Interface, log *slog.Logger) *Controller {
	return &Controller{configMaps: configMaps, info: info, dynamic: dyn, log: log, queue: controller.NewQueue("cluster-authentication-trust")}
}

// Name implements controller.Controller.
func (c *Controller) Name() string { return "cluster-authentication-trust" }

// Run implements controller.Controller.
func (c *Controller) Run(ctx context.Context) {
	c.queue.Add(rbac.AuthenticationConfigMap)
	go store.Follow(ctx, c.configMaps.Cache, func([]*store.Item, int64) {}, func(ev store.Event) {
		if ev.Item.Namespace == metav1.NamespaceSystem && ev.Item.Name == rbac.AuthenticationConfigMap {
			c.queue.Add(rbac.AuthenticationConfigMap)
		}
	})
	controller.Work(ctx, c.Name(), c.queue, 1, c.log, c.sync)
}

func (c *Controller) sync(ctx context.Context, _ string) error {
	cms := c.dynamic.Resource(configMapsGVR).Namespace(metav1.NamespaceSystem)
	cur, _ := c.configMaps.Cache.Get(c.configMaps.Key(metav1.NamespaceSystem, rbac.AuthenticationConfigMap))
	if cur == nil {
		data, err := Data(Info{}, c.info)
		if err != nil {
			return err
		}
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": rbac.AuthenticationConfigMap, "namespace": metav1.NamespaceSystem},
			"data":     toAny(data),
		}}
		if _, err := cms.Create(ctx, obj, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		return nil
	}
	obj, err := resource.DecodeObject(cur.Bytes())
	if err != nil {
		return err
	}
	have := map[string]string{}
	if d, ok := obj.Content["data"].(map[string]any); ok {
		for k, v := range d {
			have[k], _ = v.(string)
		}
	}
	data, err := Data(infoOf(have), c.info)
	if err != nil {
		// What is stored does not parse: the server's own replaces it.
		c.log.Warn("the authentication ConfigMap does not parse; replacing it", "err", err)
		if data, err = Data(Info{}, c.info); err != nil {
			return err
		}
	}
	if maps.Equal(have, data) {
		return nil
	}
	u := &unstructured.Unstructured{Object: obj.ToUnstructured()}
	u.Object["data"] = toAny(data)
	_, err = cms.Update(ctx, u, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		c.queue.Add(rbac.AuthenticationConfigMap)
		return nil
	}
	return err
}

// infoOf reads a ConfigMap's data; lists that do not parse are left
// empty, as if absent.
func infoOf(data map[string]string) Info {
	list := func(key string) []string {
		var out []string
		_ = json.Unmarshal([]byte(data[key]), &out)
		return out
	}
	return Info{
		ClientCA: []byte(data[ClientCAKey]), RequestHeaderCA: []byte(data[requestHeaderCAKey]),
		AllowedNames: list(requestHeaderNamesKey), UsernameHeaders: list(requestHeaderUserKey), UIDHeaders: list(requestHeaderUIDKey),
		GroupHeaders: list(requestHeaderGroupKey), ExtraHeaderPrefixes: list(requestHeaderExtraKey),
	}
}

// Data is the ConfigMap's data for what is published already (have)
// combined with what this server adds, as kube-apiserver writes it:
// certificates and names kept in their order, new ones after them; the
// requestheader-* keys only with a request header CA, the uid headers
// only when there are some.
func Data(have, add Info) (map[string]string, error) {
	data := map[string]string{}
	clientCA, err := Combine(have.ClientCA, add.ClientCA)
	if err != nil {
		return nil, err
	}
	if len(clientCA) > 0 {
		data[ClientCAKey] = string(clientCA)
	}
	proxyCA, err := Combine(have.RequestHeaderCA, add.RequestHeaderCA)
	if err != nil {
		return nil, err
	}
	if len(proxyCA) == 0 {
		return data, nil
	}
	data[requestHeaderCAKey] = string(proxyCA)
	for key, lists := range map[string][2][]string{
		requestHeaderNamesKey: {have.AllowedNames, add.AllowedNames},
		requestHeaderUserKey:  {have.UsernameHeaders, add.UsernameHeaders},
		requestHeaderUIDKey:   {have.UIDHeaders, add.UIDHeaders},
		requestHeaderGroupKey: {have.GroupHeaders, add.GroupHeaders},
		requestHeaderExtraKey: {have.ExtraHeaderPrefixes, add.ExtraHeaderPrefixes},
	} {
		out := []string{}
		for _, l := range lists {
			for _, v := range l {
				if !slices.Contains(out, v) {
					out = append(out, v)
				}
			}
		}
		if key == requestHeaderUIDKey && len(out) == 0 {
			continue
		}
		b, err := json.Marshal(out)
		if err != nil {
			return nil, err
		}
		data[key] = string(b)
	}
	return data, nil
}

func toAny(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// Combine returns the certificates of have, then those of add that have
// lacks, as one PEM bundle.
func Combine(have, add []byte) ([]byte, error) {
	var out bytes.Buffer
	seen := map[string]bool{}
	for _, pem := range [][]byte{have, add} {
		if len(bytes.TrimSpace(pem)) == 0 {
			continue
		}
		certs, err := certutil.ParseCertsPEM(pem)
		if err != nil {
			return nil, fmt.Errorf("client CA bundle: %w", err)
		}
		for _, cert := range certs {
			if seen[string(cert.Raw)] {
				continue
			}
			seen[string(cert.Raw)] = true
			b, err := certutil.EncodeCertificates(cert)
			if err != nil {
				return nil, err
			}
			out.Write(b)
		}
	}
	return out.Bytes(), nil
}
