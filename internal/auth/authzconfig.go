package auth

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	authzconfig "k8s.io/apiserver/pkg/apis/apiserver"
	"k8s.io/apiserver/pkg/apis/apiserver/load"
	"k8s.io/apiserver/pkg/apis/apiserver/validation"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	authorizationcel "k8s.io/apiserver/pkg/authorization/cel"
	"k8s.io/apiserver/pkg/util/filesystem"
	webhookutil "k8s.io/apiserver/pkg/util/webhook"
	"k8s.io/apiserver/plugin/pkg/authorizer/webhook"
	webhookmetrics "k8s.io/apiserver/plugin/pkg/authorizer/webhook/metrics"
	"k8s.io/client-go/rest"
)

// The authorizer types (kube-apiserver's authorization modes) crdserver
// serves. ABAC is not one of them.
const (
	ModeAlwaysAllow = "AlwaysAllow"
	ModeAlwaysDeny  = "AlwaysDeny"
	ModeRBAC        = "RBAC"
	ModeWebhook     = "Webhook"
	ModeNode        = "Node"
)

var modeChoices = []string{ModeAlwaysAllow, ModeAlwaysDeny, ModeWebhook, ModeRBAC, ModeNode}

// AuthorizationModes are kube-apiserver's legacy authorization flags:
// --authorization-mode and --authorization-webhook-*.
type AuthorizationModes struct {
	Modes                       []string
	WebhookConfigFile           string
	WebhookVersion              string
	WebhookCacheAuthorizedTTL   time.Duration
	WebhookCacheUnauthorizedTTL time.Duration
}

// Configuration turns the legacy flags into the AuthorizationConfiguration
// kube-apiserver makes of them, with its errors for flags that do not go
// together.
func (m AuthorizationModes) Configuration() (*authzconfig.AuthorizationConfiguration, error) {
	var errs []error
	if len(m.Modes) == 0 {
		errs = append(errs, errors.New("at least one authorization-mode must be passed"))
	}
	modes := sets.New(m.Modes...)
	for _, mode := range m.Modes {
		switch {
		case mode == "ABAC":
			errs = append(errs, fmt.Errorf("authorization-mode %q is not supported by crdserver", mode))
		case !sets.New(modeChoices...).Has(mode):
			errs = append(errs, fmt.Errorf("authorization-mode %q is not a valid mode", mode))
		case mode == ModeWebhook && m.WebhookConfigFile == "":
			errs = append(errs, errors.New("authorization-mode Webhook's authorization config file not passed"))
		}
	}
	if m.WebhookConfigFile != "" && !modes.Has(ModeWebhook) {
		errs = append(errs, errors.New("cannot specify --authorization-webhook-config-file without mode Webhook"))
	}
	if len(m.Modes) != modes.Len() {
		errs = append(errs, fmt.Errorf("authorization-mode %q has mode specified more than once", m.Modes))
	}
	if len(errs) > 0 {
		return nil, utilerrors.NewAggregate(errs)
	}
	c := &authzconfig.AuthorizationConfiguration{}
	for _, mode := range m.Modes {
		if mode != ModeWebhook {
			c.Authorizers = append(c.Authorizers, authzconfig.AuthorizerConfiguration{Type: authzconfig.AuthorizerType(mode), Name: strings.ToLower(mode)})
			continue
		}
		file := m.WebhookConfigFile
		c.Authorizers = append(c.Authorizers, authzconfig.AuthorizerConfiguration{
			Type: authzconfig.TypeWebhook,
			Name: "default",
			Webhook: &authzconfig.WebhookConfiguration{
				AuthorizedTTL:              metav1.Duration{Duration: m.WebhookCacheAuthorizedTTL},
				CacheAuthorizedRequests:    m.WebhookCacheAuthorizedTTL != 0,
				UnauthorizedTTL:            metav1.Duration{Duration: m.WebhookCacheUnauthorizedTTL},
				CacheUnauthorizedRequests:  m.WebhookCacheUnauthorizedTTL != 0,
				Timeout:                    metav1.Duration{Duration: 30 * time.Second},
				FailurePolicy:              authzconfig.FailurePolicyNoOpinion,
				SubjectAccessReviewVersion: m.WebhookVersion,
				ConnectionInfo: authzconfig.WebhookConnectionInfo{
					Type:           authzconfig.AuthorizationWebhookConnectionInfoTypeKubeConfigFile,
					KubeConfigFile: &file,
				},
			},
		})
	}
	return c, nil
}

// LoadAuthorizationConfiguration reads, decodes and validates an
// apiserver.config.k8s.io AuthorizationConfiguration file as
// kube-apiserver does at start, with its errors. It also returns the
// file's bytes.
func LoadAuthorizationConfiguration(file string) (*authzconfig.AuthorizationConfiguration, []byte, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, nil, err
	}
	c, err := loadAuthorizationData(data, authorizationcel.NewDefaultCompiler(), nil)
	if err != nil {
		return nil, nil, err
	}
	return c, data, nil
}

// loadAuthorizationData decodes and validates a configuration; a reloaded
// one must keep the types (other than Webhook) the first one had.
func loadAuthorizationData(data []byte, compiler authorizationcel.Compiler, required sets.Set[authzconfig.AuthorizerType]) (*authzconfig.AuthorizationConfiguration, error) {
	c, err := load.LoadFromData(data)
	if err != nil {
		return nil, fmt.Errorf("failed to load AuthorizationConfiguration from file: %w", err)
	}
	if errs := validation.ValidateAuthorizationConfiguration(compiler, nil, c, sets.New(modeChoices...), sets.New(ModeWebhook)); len(errs) != 0 {
		return nil, errs.ToAggregate()
	}
	var errs []error
	seen := sets.New[authzconfig.AuthorizerType]()
	for _, a := range c.Authorizers {
		if a.Type == authzconfig.TypeWebhook {
			continue
		}
		seen.Insert(a.Type)
		if want := strings.ToLower(string(a.Type)); want != a.Name {
			errs = append(errs, fmt.Errorf("expected name %s for authorizer %s instead of %s", want, a.Type, a.Name))
		}
	}
	if missing := required.Difference(seen); missing.Len() > 0 {
		errs = append(errs, fmt.Errorf("missing required types: %v", sets.List(missing)))
	}
	if len(errs) > 0 {
		return nil, utilerrors.NewAggregate(errs)
	}
	return c, nil
}

// AuthorizerOptions configure the server's authorization chain.
type AuthorizerOptions struct {
	// File is an AuthorizationConfiguration file, watched and reloaded
	// when it changes; Config is what it held at start (or what the
	// legacy flags make, without File).
	File   string
	Config *authzconfig.AuthorizationConfiguration
	// Data is the file's content Config was read from.
	Data []byte
	// RBAC is the RBAC authorizer the chain's RBAC entry asks.
	RBAC Authorizer
	// ReloadInterval is how often the file is read again besides when
	// it is seen changing (kube-apiserver: a minute).
	ReloadInterval time.Duration
	// WebhookRetryBackoff is how webhooks are retried (kube-apiserver's
	// default when nil).
	WebhookRetryBackoff *wait.Backoff
	// Registerer, when set, gets the reload metrics.
	Registerer prometheus.Registerer
	Log        *slog.Logger
}

// ConfiguredAuthorizer is kube-apiserver's authorizer chain from an
// AuthorizationConfiguration: system:masters first, then the configured
// authorizers in order. With a file, a valid new configuration replaces
// the chain whole; an invalid one is logged and the chain kept.
type ConfiguredAuthorizer struct {
	o        AuthorizerOptions
	compiler authorizationcel.Compiler
	required sets.Set[authzconfig.AuthorizerType]
	initial  sets.Set[authzconfig.AuthorizerType]
	metrics  *reloadMetrics

	mu       sync.Mutex
	lastData []byte
	last     *authzconfig.AuthorizationConfiguration

	current atomic.Pointer[configuredChain]
}

// configuredChain is one configuration's authorizers.
type configuredChain struct {
	chain NamedChain
	types []authzconfig.AuthorizerType
}

// NewConfiguredAuthorizer builds the chain, and with a file watches it
// until ctx ends.
func NewConfiguredAuthorizer(ctx context.Context, o AuthorizerOptions) (*ConfiguredAuthorizer, error) {
	if o.Config == nil || len(o.Config.Authorizers) == 0 {
		return nil, errors.New("at least one authorization mode must be passed")
	}
	if o.ReloadInterval <= 0 {
		o.ReloadInterval = time.Minute
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.WebhookRetryBackoff == nil {
		o.WebhookRetryBackoff = &wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}
	}
	if o.WebhookRetryBackoff.Steps <= 0 {
		return nil, fmt.Errorf("number of webhook retry attempts must be greater than 0, but is: %d", o.WebhookRetryBackoff.Steps)
	}
	c := &ConfiguredAuthorizer{o: o, compiler: authorizationcel.NewDefaultCompiler(), last: o.Config, lastData: o.Data,
		initial: sets.New[authzconfig.AuthorizerType]()}
	for _, a := range o.Config.Authorizers {
		c.initial.Insert(a.Type)
	}
	c.required = c.initial.Clone()
	c.required.Delete(authzconfig.TypeWebhook)
	chain, err := c.build(o.Config)
	if err != nil {
		return nil, err
	}
	c.current.Store(chain)
	if o.File != "" {
		c.metrics = newReloadMetrics(o.Registerer)
		go filesystem.WatchUntil(ctx, o.ReloadInterval, o.File, c.checkFile, func(err error) {
			o.Log.Error("watching authorization config file", "err", err)
		})
	}
	return c, nil
}

// Authorize implements authorizer.Authorizer.
func (c *ConfiguredAuthorizer) Authorize(ctx context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	return c.current.Load().chain.Authorize(ctx, a)
}

// Types are the configured authorizers' types, in order.
func (c *ConfiguredAuthorizer) Types() []authzconfig.AuthorizerType {
	return c.current.Load().types
}

// build makes the chain of a configuration.
func (c *ConfiguredAuthorizer) build(cfg *authzconfig.AuthorizationConfiguration) (*configuredChain, error) {
	out := &configuredChain{chain: NamedChain{{Name: PrivilegedName, Authorizer: Privileged{}}}}
	for _, a := range cfg.Authorizers {
		var z Authorizer
		switch string(a.Type) {
		case ModeAlwaysAllow:
			z = authorizerfactory.NewAlwaysAllowAuthorizer()
		case ModeAlwaysDeny:
			z = authorizerfactory.NewAlwaysDenyAuthorizer()
		case ModeNode:
			if !c.initial.Has(a.Type) {
				return nil, fmt.Errorf("authorizer type Node is not allowed if it was not enabled at initial server startup")
			}
			z = NodeAuthorizer{}
		case ModeRBAC:
			if !c.initial.Has(a.Type) {
				return nil, fmt.Errorf("authorizer type RBAC is not allowed if it was not enabled at initial server startup")
			}
			z = c.o.RBAC
		case ModeWebhook:
			w, err := c.webhook(a)
			if err != nil {
				return nil, err
			}
			z = w
		default:
			return nil, fmt.Errorf("unknown authorization mode %s specified", a.Type)
		}
		out.chain = append(out.chain, Named{Name: a.Name, Authorizer: z})
		out.types = append(out.types, a.Type)
	}
	return out, nil
}

// webhook is a Webhook authorizer: Kubernetes' own client of
// SubjectAccessReview webhooks, its cache and match conditions.
func (c *ConfiguredAuthorizer) webhook(a authzconfig.AuthorizerConfiguration) (*webhook.WebhookAuthorizer, error) {
	w := a.Webhook
	var cfg *rest.Config
	var err error
	switch w.ConnectionInfo.Type {
	case authzconfig.AuthorizationWebhookConnectionInfoTypeInCluster:
		cfg, err = rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("authorizer %q: connectionInfo type InClusterConfig needs crdserver to run in a Kubernetes Pod (%v); use type KubeConfigFile", a.Name, err)
		}
	default:
		cfg, err = webhookutil.LoadKubeconfig(*w.ConnectionInfo.KubeConfigFile, nil)
		if err != nil {
			return nil, err
		}
	}
	if w.Timeout.Duration != 0 {
		cfg.Timeout = w.Timeout.Duration
	}
	var onError authorizer.Decision
	switch w.FailurePolicy {
	case authzconfig.FailurePolicyNoOpinion:
		onError = authorizer.DecisionNoOpinion
	case authzconfig.FailurePolicyDeny:
		onError = authorizer.DecisionDeny
	default:
		return nil, fmt.Errorf("unknown failurePolicy %q", w.FailurePolicy)
	}
	authorizedTTL, unauthorizedTTL := w.AuthorizedTTL.Duration, w.UnauthorizedTTL.Duration
	if !w.CacheAuthorizedRequests {
		authorizedTTL = 0
	}
	if !w.CacheUnauthorizedRequests {
		unauthorizedTTL = 0
	}
	return webhook.New(cfg, w.SubjectAccessReviewVersion, authorizedTTL, unauthorizedTTL, *c.o.WebhookRetryBackoff, onError,
		w.MatchConditions, a.Name, webhookmetrics.NoopAuthorizerMetrics{}, c.compiler)
}

// checkFile reloads the file if it changed, as kube-apiserver does: a
// configuration that does not load, validate or build is logged and
// counted, and the chain in use stays.
func (c *ConfiguredAuthorizer) checkFile() {
	c.mu.Lock()
	defer c.mu.Unlock()
	data, err := os.ReadFile(c.o.File)
	if err != nil {
		c.failed(err)
		return
	}
	if bytes.Equal(data, c.lastData) {
		return
	}
	c.o.Log.Info("found new authorization config data", "file", c.o.File)
	c.lastData = data
	cfg, err := loadAuthorizationData(data, c.compiler, c.required)
	if err != nil {
		c.failed(err)
		return
	}
	if reflect.DeepEqual(cfg, c.last) {
		return
	}
	c.last = cfg
	chain, err := c.build(cfg)
	if err != nil {
		c.failed(err)
		return
	}
	c.current.Store(chain)
	c.o.Log.Info("reloaded authorization config", "file", c.o.File)
	c.metrics.record("success")
}

func (c *ConfiguredAuthorizer) failed(err error) {
	c.o.Log.Error("reloading authorization config", "file", c.o.File, "err", err)
	c.metrics.record("failure")
}

// reloadMetrics are kube-apiserver's metrics of the configuration's
// automatic reloads.
type reloadMetrics struct {
	reloads *prometheus.CounterVec
	last    *prometheus.GaugeVec
}

func newReloadMetrics(r prometheus.Registerer) *reloadMetrics {
	m := &reloadMetrics{
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "apiserver_authorization_config_controller_automatic_reloads_total",
			Help: "Total number of automatic reloads of authorization configuration split by status.",
		}, []string{"status"}),
		last: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "apiserver_authorization_config_controller_automatic_reload_last_timestamp_seconds",
			Help: "Timestamp of the last automatic reload of authorization configuration split by status.",
		}, []string{"status"}),
	}
	if r != nil {
		r.MustRegister(m.reloads, m.last)
	}
	return m
}

func (m *reloadMetrics) record(status string) {
	if m == nil {
		return
	}
	m.reloads.WithLabelValues(status).Inc()
	m.last.WithLabelValues(status).SetToCurrentTime()
}

// RuleLister lists the RBAC rules of a user in a namespace, with the
// errors met resolving them.
type RuleLister interface {
	RulesFor(u user.Info, namespace string) ([]rbacv1.PolicyRule, []error)
}

// RulesFor lists what u may do in namespace as kube-apiserver's chain of
// rule resolvers answers a SelfSubjectRulesReview: RBAC's rules,
// everything for AlwaysAllow, and an incomplete list with an error for a
// webhook (and the Node authorizer asked about a kubelet), which cannot
// enumerate theirs.
func (c *ConfiguredAuthorizer) RulesFor(u user.Info, namespace string) (rules []rbacv1.PolicyRule, incomplete bool, errs []error) {
	for _, named := range c.current.Load().chain[1:] {
		switch z := named.Authorizer.(type) {
		case RuleLister:
			// RBAC's errors (a role bound but missing) leave its
			// list complete, as in Kubernetes.
			r, e := z.RulesFor(u, namespace)
			rules = append(rules, r...)
			errs = append(errs, e...)
		case *webhook.WebhookAuthorizer:
			incomplete = true
			errs = append(errs, errors.New("webhook authorizer does not support user rule resolution"))
		case NodeAuthorizer:
			if err := nodeRulesIncomplete(u); err != nil {
				incomplete = true
				errs = append(errs, err)
			}
		default:
			if named.Name == strings.ToLower(ModeAlwaysAllow) {
				rules = append(rules, rbacv1.PolicyRule{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}},
					rbacv1.PolicyRule{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}})
			}
		}
	}
	return rules, incomplete, errs
}
