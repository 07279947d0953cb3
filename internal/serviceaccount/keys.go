package serviceaccount

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	jose "github.com/go-jose/go-jose/v4"
	"k8s.io/client-go/util/keyutil"
)

// KeyID is the key ID Kubernetes gives a public key: the unpadded
// base64url SHA-256 of its PKIX DER form.
func KeyID(pub crypto.PublicKey) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(der)
	return base64.RawURLEncoding.EncodeToString(sum[:]), nil
}

// algorithm is the JWS algorithm Kubernetes signs with for a key.
func algorithm(pub crypto.PublicKey) (jose.SignatureAlgorithm, error) {
	switch k := pub.(type) {
	case *rsa.PublicKey:
		return jose.RS256, nil
	case *ecdsa.PublicKey:
		switch k.Curve {
		case elliptic.P256():
			return jose.ES256, nil
		case elliptic.P384():
			return jose.ES384, nil
		case elliptic.P521():
			return jose.ES512, nil
		}
		return "", errors.New("unknown private key curve, must be 256, 384, or 521")
	}
	return "", fmt.Errorf("unsupported key type %T, must be RSA or ECDSA", pub)
}

// LoadOrMakeSigningKey reads a PEM private key from file, or, when file is
// empty, from dir/sa.key, which it makes (ECDSA P-256) if missing.
func LoadOrMakeSigningKey(file, dir string) (crypto.Signer, error) {
	if file == "" {
		file = filepath.Join(dir, "sa.key")
		if _, err := os.Stat(file); errors.Is(err, os.ErrNotExist) {
			key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
			if err != nil {
				return nil, err
			}
			der, err := x509.MarshalPKCS8PrivateKey(key)
			if err != nil {
				return nil, err
			}
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return nil, err
			}
			tmp := file + ".tmp"
			if err := os.WriteFile(tmp, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
				return nil, err
			}
			if err := os.Rename(tmp, file); err != nil {
				return nil, err
			}
		}
	}
	key, err := keyutil.PrivateKeyFromFile(file)
	if err != nil {
		return nil, fmt.Errorf("service account signing key %s: %w", file, err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("service account signing key %s: not a signing key", file)
	}
	if _, err := algorithm(signer.Public()); err != nil {
		return nil, fmt.Errorf("service account signing key %s: %w", file, err)
	}
	return signer, nil
}

// LoadPublicKeys reads the public keys (or the public halves of private
// keys) in a PEM file, as --service-account-key-file takes them.
func LoadPublicKeys(file string) ([]crypto.PublicKey, error) {
	keys, err := keyutil.PublicKeysFromFile(file)
	if err != nil {
		return nil, fmt.Errorf("service account key file %s: %w", file, err)
	}
	out := make([]crypto.PublicKey, len(keys))
	for i, k := range keys {
		out[i] = k
	}
	return out, nil
}
