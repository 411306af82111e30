//go:build integration

package testenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki is the set of keys and certificates of one local cluster. Everything is
// generated fresh per cluster folder; nothing is shared between clusters.
type pki struct {
	CAFile, CAKeyFile         string
	ServingCert, ServingKey   string
	AdminCert, AdminKey       string
	SAKey, SAPub              string
	caPEM, adminPEM, adminKey []byte
}

func writePKI(dir string) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	p := &pki{
		CAFile: filepath.Join(dir, "ca.crt"), CAKeyFile: filepath.Join(dir, "ca.key"),
		ServingCert: filepath.Join(dir, "apiserver.crt"), ServingKey: filepath.Join(dir, "apiserver.key"),
		AdminCert: filepath.Join(dir, "admin.crt"), AdminKey: filepath.Join(dir, "admin.key"),
		SAKey: filepath.Join(dir, "sa.key"), SAPub: filepath.Join(dir, "sa.pub"),
	}
	now := time.Now().Add(-time.Hour)
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "pvc-janitor-local-ca"},
		NotBefore:             now,
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	p.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	if err := os.WriteFile(p.CAFile, p.caPEM, 0o600); err != nil {
		return nil, err
	}
	if err := writeKey(p.CAKeyFile, caKey); err != nil {
		return nil, err
	}
	issue := func(serial int64, cn string, orgs []string, usage x509.ExtKeyUsage, ips []net.IP, dns []string, certFile, keyFile string) ([]byte, []byte, error) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, nil, err
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial),
			Subject:      pkix.Name{CommonName: cn, Organization: orgs},
			NotBefore:    now,
			NotAfter:     now.Add(10 * 365 * 24 * time.Hour),
			KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
			ExtKeyUsage:  []x509.ExtKeyUsage{usage},
			IPAddresses:  ips,
			DNSNames:     dns,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		if err != nil {
			return nil, nil, err
		}
		certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
		if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
			return nil, nil, err
		}
		keyPEM, err := keyPEM(key)
		if err != nil {
			return nil, nil, err
		}
		return certPEM, keyPEM, os.WriteFile(keyFile, keyPEM, 0o600)
	}
	if _, _, err := issue(2, "kube-apiserver", nil, x509.ExtKeyUsageServerAuth,
		[]net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.0.0.1")},
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
		p.ServingCert, p.ServingKey); err != nil {
		return nil, fmt.Errorf("serving certificate: %w", err)
	}
	if p.adminPEM, p.adminKey, err = issue(3, "pvc-janitor-admin", []string{"system:masters"}, x509.ExtKeyUsageClientAuth,
		nil, nil, p.AdminCert, p.AdminKey); err != nil {
		return nil, fmt.Errorf("admin certificate: %w", err)
	}
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	if err := writeKey(p.SAKey, saKey); err != nil {
		return nil, err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return nil, err
	}
	return p, os.WriteFile(p.SAPub, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), 0o600)
}

func keyPEM(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

func writeKey(path string, key *ecdsa.PrivateKey) error {
	b, err := keyPEM(key)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}
