package aggregator

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/transport"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	"k8s.io/kube-aggregator/pkg/apis/apiregistration/v1/helper"
	"k8s.io/kube-aggregator/pkg/controllers/status/remote"

	"github.com/crdserver/crdserver/internal/conversion"
	"github.com/crdserver/crdserver/internal/resource"
	"github.com/crdserver/crdserver/internal/store"
)

// Options configure an Aggregator.
type Options struct {
	// APIServices is the apiservices resource (its cache is read).
	APIServices *resource.Resource
	// ServiceAddresses says where services are: "namespace/name:port" →
	// "host:port" (--webhook-service-address).
	ServiceAddresses map[string]string
	// ProxyClientCert and ProxyClientKey (PEM) are the client certificate
	// the backends are called with; none: no client certificate.
	ProxyClientCert, ProxyClientKey []byte
	Log                             *slog.Logger
}

// Aggregator proxies to the servers of APIServices with a service.
type Aggregator struct {
	o Options
	// gen counts the changes of the APIServices' cache; st is what was
	// made of them at a generation.
	gen  atomic.Uint64
	mu   sync.Mutex
	st   atomic.Pointer[state]
	stop func()

	disc    discoveryCache
	openapi openapiCache
}

// state is what the Aggregator made of the APIServices at one generation.
type state struct {
	gen uint64
	// byGV are the APIServices by group/version.
	byGV map[schema.GroupVersion]*Service
	// remote are the APIServices with a service, by name.
	remote []*Service
	// byName are all of them, by name.
	byName map[string]*Service
}

// Service is one APIService as the Aggregator serves it.
type Service struct {
	API *apiregistrationv1.APIService
	// Available is its Available condition.
	Available bool
	// transport reaches the service (nil for a local one); transportErr
	// says why it could not be built.
	transport    http.RoundTripper
	transportErr error
	// key is what the transport was built from.
	key string
	// rev is the revision of the stored APIService it was made from.
	rev int64
}

// GroupVersion is the Service's group/version.
func (s *Service) GroupVersion() schema.GroupVersion {
	return schema.GroupVersion{Group: s.API.Spec.Group, Version: s.API.Spec.Version}
}

// Local says the APIService is this server's own.
func (s *Service) Local() bool { return s.API.Spec.Service == nil }

// New makes an Aggregator following the APIServices' cache; Close stops
// it.
func New(o Options) *Aggregator {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	a := &Aggregator{o: o}
	a.gen.Store(1)
	bump := func() { a.gen.Add(1) }
	a.stop = o.APIServices.Cache.Observe(func([]*store.Item, int64) { bump() }, func(store.Event) { bump() })
	return a
}

// Close stops following the APIServices.
func (a *Aggregator) Close() { a.stop() }

// state returns what the Aggregator made of the current APIServices,
// making it again when they changed. Transports are kept while their
// APIService's spec is the same.
func (a *Aggregator) state() *state {
	gen := a.gen.Load()
	if st := a.st.Load(); st != nil && st.gen == gen {
		return st
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if st := a.st.Load(); st != nil && st.gen == gen {
		return st
	}
	old := map[string]*Service{}
	if st := a.st.Load(); st != nil {
		old = st.byName
	}
	items := a.o.APIServices.Cache.List(store.ListOptions{}).Items
	st := &state{gen: gen, byGV: make(map[schema.GroupVersion]*Service, len(items)), byName: make(map[string]*Service, len(items))}
	for _, it := range items {
		s := old[it.Name]
		if s == nil || s.rev != it.Rev {
			// New or changed since the last state: decoded again (the
			// others are kept as they were, as a server starting writes
			// its APIServices one by one while it serves).
			if s = a.service(it, old[it.Name]); s == nil {
				continue
			}
		}
		if !s.Local() {
			st.remote = append(st.remote, s)
		}
		st.byName[it.Name] = s
		st.byGV[s.GroupVersion()] = s
	}
	a.st.Store(st)
	return st
}

// transportKey is what an APIService's transport is made from.
func transportKey(api *apiregistrationv1.APIService) string {
	s := api.Spec.Service
	return fmt.Sprintf("%s/%s|%t|%x", s.Namespace, s.Name, api.Spec.InsecureSkipTLSVerify, api.Spec.CABundle)
}

// service makes the Service of a stored APIService, with prev's transport
// if it was built from the same spec; nil if it does not decode.
func (a *Aggregator) service(it *store.Item, prev *Service) *Service {
	obj, err := resource.DecodeObject(it.Bytes())
	if err != nil {
		return nil
	}
	api, err := resource.Typed[apiregistrationv1.APIService](obj)
	if err != nil {
		return nil
	}
	s := &Service{API: api, Available: helper.IsAPIServiceConditionTrue(api, apiregistrationv1.Available), rev: it.Rev}
	if !s.Local() {
		s.key = transportKey(api)
		if prev != nil && prev.key == s.key {
			s.transport, s.transportErr = prev.transport, prev.transportErr
		} else {
			s.transport, s.transportErr = transport.New(remote.BuildTransportConfig(nil, a.o.ProxyClientCert, a.o.ProxyClientKey, api))
		}
	}
	return s
}

// APIServices are the stored APIServices as the Aggregator last read them,
// by name. They are shared: a caller copies one before changing it.
func (a *Aggregator) APIServices() map[string]*apiregistrationv1.APIService {
	byName := a.state().byName
	out := make(map[string]*apiregistrationv1.APIService, len(byName))
	for name, s := range byName {
		out[name] = s.API
	}
	return out
}

// APIService is the stored APIService of that name as the Aggregator last
// read it (shared, as APIServices), or nil.
func (a *Aggregator) APIService(name string) *apiregistrationv1.APIService {
	if s := a.state().byName[name]; s != nil {
		return s.API
	}
	return nil
}

// Lookup returns the APIService of a group/version, or nil.
func (a *Aggregator) Lookup(group, version string) *Service {
	return a.state().byGV[schema.GroupVersion{Group: group, Version: version}]
}

// Remote returns the APIServices with a service, by group priority then
// version priority (kube-aggregator's order).
func (a *Aggregator) Remote() []*Service {
	out := append([]*Service(nil), a.state().remote...)
	sort.SliceStable(out, func(i, j int) bool {
		x, y := out[i].API.Spec, out[j].API.Spec
		if x.Group != y.Group {
			if x.GroupPriorityMinimum != y.GroupPriorityMinimum {
				return x.GroupPriorityMinimum > y.GroupPriorityMinimum
			}
			return x.Group < y.Group
		}
		if x.VersionPriority != y.VersionPriority {
			return x.VersionPriority > y.VersionPriority
		}
		return version.CompareKubeAwareVersionStrings(x.Version, y.Version) > 0
	})
	return out
}

// ErrServiceNotFound says a service is not where --webhook-service-address
// lists services.
var ErrServiceNotFound = errors.New("service not found")

// ErrServicePort says a service is listed, but not with the APIService's
// port.
var ErrServicePort = errors.New("service port not found")

// Resolve finds where a service's port is.
func (a *Aggregator) Resolve(ref *apiregistrationv1.ServiceReference) (*url.URL, error) {
	port := int32(443)
	if ref.Port != nil {
		port = *ref.Port
	}
	if addr, ok := a.o.ServiceAddresses[conversion.ServiceKey(ref.Namespace, ref.Name, port)]; ok {
		return &url.URL{Scheme: "https", Host: addr}, nil
	}
	prefix := ref.Namespace + "/" + ref.Name + ":"
	for key := range a.o.ServiceAddresses {
		if strings.HasPrefix(key, prefix) {
			return nil, ErrServicePort
		}
	}
	return nil, ErrServiceNotFound
}
