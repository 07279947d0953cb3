package serviceaccount

import (
	"context"
	"crypto"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	apiserverserviceaccount "k8s.io/apiserver/pkg/authentication/serviceaccount"
	authenticationtokenjwt "k8s.io/apiserver/pkg/authentication/token/jwt"
)

// DefaultIssuer is the issuer of tokens when none is configured: the one
// clusters made by kubeadm and kind use.
const DefaultIssuer = "https://kubernetes.default.svc.cluster.local"

// Object is what a token's checks need of an object it names.
type Object struct {
	UID string
	// Deleted is when its deletion was requested, if it was.
	Deleted *time.Time
}

// Getter finds the objects a token names. Either returns an error that
// says why (a NotFound Status when it does not exist).
type Getter interface {
	ServiceAccount(ctx context.Context, namespace, name string) (*Object, error)
	Secret(ctx context.Context, namespace, name string) (*Object, error)
}

// Options configure Tokens.
type Options struct {
	// Issuers are the accepted "iss" values; the first is written into
	// new tokens (default DefaultIssuer).
	Issuers []string
	// Audiences are the API server's audiences: tokens for them
	// authenticate to this server (default: the first issuer).
	Audiences []string
	// Signer signs new tokens; its public key verifies them.
	Signer crypto.Signer
	// PublicKeys also verify tokens (other replicas' or older keys).
	PublicKeys []crypto.PublicKey
	// MaxExpiration shortens longer token requests (0: no bound).
	MaxExpiration time.Duration
	// Objects finds ServiceAccounts and bound Secrets.
	Objects Getter
}

// Tokens issues and authenticates ServiceAccount tokens.
type Tokens struct {
	opts   Options
	signer jose.Signer
	keys   []publicKey
}

type publicKey struct {
	id  string
	key crypto.PublicKey
	alg jose.SignatureAlgorithm
}

// New returns Tokens for opts.
func New(opts Options) (*Tokens, error) {
	if len(opts.Issuers) == 0 {
		opts.Issuers = []string{DefaultIssuer}
	}
	if len(opts.Audiences) == 0 {
		opts.Audiences = []string{opts.Issuers[0]}
	}
	if opts.Signer == nil {
		return nil, errors.New("no service account signing key")
	}
	for _, iss := range opts.Issuers {
		if iss == "" {
			return nil, errors.New("an empty service account issuer")
		}
	}
	t := &Tokens{opts: opts}
	for _, k := range append([]crypto.PublicKey{opts.Signer.Public()}, opts.PublicKeys...) {
		id, err := KeyID(k)
		if err != nil {
			return nil, err
		}
		alg, err := algorithm(k)
		if err != nil {
			return nil, err
		}
		if !slices.ContainsFunc(t.keys, func(p publicKey) bool { return p.id == id }) {
			t.keys = append(t.keys, publicKey{id: id, key: k, alg: alg})
		}
	}
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: t.keys[0].alg, Key: &jose.JSONWebKey{
		Algorithm: string(t.keys[0].alg), Key: opts.Signer, KeyID: t.keys[0].id, Use: "sig",
	}}, nil)
	if err != nil {
		return nil, fmt.Errorf("service account signer: %w", err)
	}
	t.signer = sig
	return t, nil
}

// WithObjects returns Tokens that find the objects tokens name with g:
// Tokens made before the objects' resources issue tokens, and these
// (made after them) also authenticate them.
func (t *Tokens) WithObjects(g Getter) *Tokens {
	c := *t
	c.opts.Objects = g
	return &c
}

// Audiences are the API server's audiences.
func (t *Tokens) Audiences() []string { return t.opts.Audiences }

// MaxExpiration is the longest a token may live (0: no bound).
func (t *Tokens) MaxExpiration() time.Duration { return t.opts.MaxExpiration }

// Ref names an object in a token.
type Ref struct {
	Name string `json:"name,omitempty"`
	UID  string `json:"uid,omitempty"`
}

// privateClaims are the "kubernetes.io" claims, as Kubernetes writes them.
type privateClaims struct {
	Kubernetes kubernetesClaims `json:"kubernetes.io,omitempty"`
}

// audienceClaim writes "aud" as a list, always, as Kubernetes' tokens have
// it (go-jose writes a single audience as a string).
type audienceClaim struct {
	Audience []string `json:"aud,omitempty"`
}

type kubernetesClaims struct {
	Namespace string `json:"namespace,omitempty"`
	Svcacct   Ref    `json:"serviceaccount,omitempty"`
	Pod       *Ref   `json:"pod,omitempty"`
	Secret    *Ref   `json:"secret,omitempty"`
	Node      *Ref   `json:"node,omitempty"`
}

// Request is what a token is issued for.
type Request struct {
	Namespace      string
	ServiceAccount Ref
	// Secret, when set, is the Secret the token is bound to: it stops
	// working when the Secret goes.
	Secret     *Ref
	Audiences  []string
	Expiration time.Duration
	// Now is the time of issue.
	Now time.Time
}

// Issue signs a token for req.
func (t *Tokens) Issue(req Request) (string, error) {
	now := req.Now
	public := &jwt.Claims{
		Issuer:    t.opts.Issuers[0],
		Subject:   apiserverserviceaccount.MakeUsername(req.Namespace, req.ServiceAccount.Name),
		IssuedAt:  jwt.NewNumericDate(now),
		NotBefore: jwt.NewNumericDate(now),
		Expiry:    jwt.NewNumericDate(now.Add(req.Expiration)),
		ID:        string(uuid.NewUUID()),
	}
	private := &privateClaims{Kubernetes: kubernetesClaims{Namespace: req.Namespace, Svcacct: req.ServiceAccount, Secret: req.Secret}}
	return jwt.Signed(t.signer).Claims(private).Claims(audienceClaim{req.Audiences}).Claims(public).Serialize()
}

var _ authenticator.Token = (*Tokens)(nil)

// anyAlgorithm are the signature algorithms a token may name: every one,
// as Kubernetes parses tokens (with go-jose v2, which takes any), so that
// a token for no key of ours is refused for that ("invalid signature, no
// keys found") and one whose algorithm does not fit the key by the key.
var anyAlgorithm = []jose.SignatureAlgorithm{
	jose.EdDSA, jose.HS256, jose.HS384, jose.HS512, jose.RS256, jose.RS384, jose.RS512,
	jose.ES256, jose.ES384, jose.ES512, jose.PS256, jose.PS384, jose.PS512,
}

// AuthenticateToken checks a bearer token. Tokens of another issuer are
// not ours (nil, false, nil): other authenticators may take them.
func (t *Tokens) AuthenticateToken(ctx context.Context, token string) (*authenticator.Response, bool, error) {
	if !t.ourIssuer(token) {
		return nil, false, nil
	}
	if t.opts.Objects == nil {
		return nil, false, errors.New("service account tokens cannot be checked: no objects to check them against")
	}
	tok, err := jwt.ParseSigned(token, anyAlgorithm)
	if err != nil {
		return nil, false, nil
	}
	var kid string
	for _, h := range tok.Headers {
		if h.KeyID != "" {
			kid = h.KeyID
			break
		}
	}
	public, private := &jwt.Claims{}, &privateClaims{}
	var errs []error
	found := false
	for _, k := range t.keys {
		if kid != "" && k.id != kid {
			continue
		}
		if err := tok.Claims(k.key, public, private); err != nil {
			errs = append(errs, err)
			continue
		}
		found = true
		break
	}
	if !found {
		if len(errs) == 0 {
			return nil, false, errors.New("invalid signature, no keys found")
		}
		return nil, false, errors.Join(errs...)
	}
	if !slices.Contains(t.opts.Issuers, public.Issuer) {
		return nil, false, fmt.Errorf("token issuer %q is invalid", public.Issuer)
	}
	tokenAuds := authenticator.Audiences(public.Audience)
	if len(tokenAuds) == 0 {
		tokenAuds = t.opts.Audiences
	}
	requested, ok := authenticator.AudiencesFrom(ctx)
	if !ok {
		requested = t.opts.Audiences
	}
	auds := tokenAuds.Intersect(requested)
	if len(auds) == 0 {
		return nil, false, fmt.Errorf("token audiences %q is invalid for the target audiences %q", tokenAuds, requested)
	}
	info, err := t.validate(ctx, public, private)
	if err != nil {
		return nil, false, err
	}
	return &authenticator.Response{User: info.UserInfo(), Audiences: auds}, true, nil
}

// ourIssuer reads the unverified "iss" of a compact JWT.
func (t *Tokens) ourIssuer(token string) bool {
	if strings.HasPrefix(strings.TrimSpace(token), "{") {
		return false
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return false
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return false
	}
	var claims struct {
		Issuer string `json:"iss"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil {
		return false
	}
	return slices.Contains(t.opts.Issuers, claims.Issuer)
}

// validate checks the times of a token and that what it names still
// exists, as Kubernetes' validator does (with its messages).
func (t *Tokens) validate(ctx context.Context, public *jwt.Claims, private *privateClaims) (*apiserverserviceaccount.ServiceAccountInfo, error) {
	now := time.Now()
	switch err := public.Validate(jwt.Expected{Time: now}); {
	case err == nil:
	case errors.Is(err, jwt.ErrExpired):
		return nil, errors.New("service account token has expired")
	case errors.Is(err, jwt.ErrNotValidYet):
		return nil, errors.New("service account token is not valid yet")
	case errors.Is(err, jwt.ErrIssuedInTheFuture):
		return nil, errors.New("service account token is issued in the future")
	default:
		return nil, errors.New("service account token claims could not be validated due to unexpected validation error")
	}
	deletedBefore := now.Add(-jwt.DefaultLeeway)
	k := private.Kubernetes
	ns, sa := k.Namespace, k.Svcacct
	obj, err := t.opts.Objects.ServiceAccount(ctx, ns, sa.Name)
	if err != nil {
		return nil, err
	}
	if obj.UID != sa.UID {
		return nil, fmt.Errorf("service account UID (%s) does not match claim (%s)", obj.UID, sa.UID)
	}
	if obj.Deleted != nil && obj.Deleted.Before(deletedBefore) {
		return nil, fmt.Errorf("service account %s/%s has been deleted", ns, sa.Name)
	}
	if s := k.Secret; s != nil {
		secret, err := t.opts.Objects.Secret(ctx, ns, s.Name)
		if err != nil {
			return nil, errors.New("service account token has been invalidated")
		}
		if secret.UID != s.UID {
			return nil, fmt.Errorf("secret UID (%s) does not match service account secret ref claim (%s)", secret.UID, s.UID)
		}
		if secret.Deleted != nil && secret.Deleted.Before(deletedBefore) {
			return nil, errors.New("service account token has been invalidated")
		}
	}
	if k.Pod != nil || k.Node != nil {
		// crdserver serves no Pods or Nodes: what the token names cannot
		// exist here.
		return nil, errors.New("service account token has been invalidated")
	}
	return &apiserverserviceaccount.ServiceAccountInfo{
		Namespace:    ns,
		Name:         sa.Name,
		UID:          sa.UID,
		CredentialID: authenticationtokenjwt.CredentialIDForJTI(public.ID),
	}, nil
}
