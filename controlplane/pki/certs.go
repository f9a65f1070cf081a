package pki

import (
	"crypto"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"slices"
	"strings"
	"time"
)

// defaultDNSNames are always in the serving certificate: what in-cluster
// clients and local tools dial.
var defaultDNSNames = []string{
	"localhost",
	"kubernetes",
	"kubernetes.default",
	"kubernetes.default.svc",
	"kubernetes.default.svc.cluster.local",
}

// sanSet is the subject alternative names of a serving certificate.
type sanSet struct {
	DNS []string
	IPs []net.IP
}

func (s *sanSet) add(host string) {
	host = strings.TrimSpace(host)
	if host == "" {
		return
	}
	if ip := net.ParseIP(host); ip != nil {
		if !slices.ContainsFunc(s.IPs, ip.Equal) {
			s.IPs = append(s.IPs, ip)
		}
		return
	}
	host = strings.ToLower(host)
	if !slices.Contains(s.DNS, host) {
		s.DNS = append(s.DNS, host)
	}
}

// coveredBy reports whether cert lists every name and address of s.
func (s sanSet) coveredBy(cert *x509.Certificate) bool {
	for _, name := range s.DNS {
		if !slices.ContainsFunc(cert.DNSNames, func(n string) bool { return strings.EqualFold(n, name) }) {
			return false
		}
	}
	for _, ip := range s.IPs {
		if !slices.ContainsFunc(cert.IPAddresses, ip.Equal) {
			return false
		}
	}
	return true
}

// requiredSANs is what the serving certificate must cover: the fixed
// names, loopback, the hostname, every non-loopback interface address and
// the extra hosts. IPv6 link-local addresses are left out: they are
// unusable in URLs without a zone and come and go with veth interfaces,
// which would otherwise reissue the certificate on every restart.
func requiredSANs(extra []string) (sanSet, error) {
	var s sanSet
	for _, name := range defaultDNSNames {
		s.add(name)
	}
	s.add("127.0.0.1")
	s.add("::1")
	hostname, err := os.Hostname()
	if err != nil {
		return sanSet{}, fmt.Errorf("get hostname: %w", err)
	}
	s.add(hostname)
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return sanSet{}, fmt.Errorf("list interface addresses: %w", err)
	}
	for _, addr := range addrs {
		ipnet, ok := addr.(*net.IPNet)
		if !ok || ipnet.IP.IsLoopback() || ipnet.IP.IsUnspecified() {
			continue
		}
		if ipnet.IP.To4() == nil && ipnet.IP.IsLinkLocalUnicast() {
			continue
		}
		s.add(ipnet.IP.String())
	}
	for _, h := range extra {
		s.add(h)
	}
	return s, nil
}

func randomSerial() (*big.Int, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("generate serial number: %w", err)
	}
	return serial, nil
}

func selfSignCA(key crypto.Signer, cn string, now time.Time) ([]byte, error) {
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(caValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("create CA certificate: %w", err)
	}
	return der, nil
}

// sign issues a leaf certificate for pub, signed by the CA.
func (b *Bundle) sign(tmpl *x509.Certificate, pub crypto.PublicKey, now time.Time, ttl time.Duration) ([]byte, error) {
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore = now.Add(-backdate)
	tmpl.NotAfter = now.Add(ttl)
	if tmpl.NotAfter.After(b.CACert.NotAfter) {
		tmpl.NotAfter = b.CACert.NotAfter
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.BasicConstraintsValid = true
	der, err := x509.CreateCertificate(rand.Reader, tmpl, b.CACert, pub, b.CAKey)
	if err != nil {
		return nil, fmt.Errorf("sign certificate %q: %w", tmpl.Subject.CommonName, err)
	}
	return der, nil
}

// leafStale says why a leaf certificate must be reissued, or "" if it is
// still good: it must be signed by the CA and valid past now+renewBefore.
func (b *Bundle) leafStale(cert *x509.Certificate, now time.Time) string {
	if err := cert.CheckSignatureFrom(b.CACert); err != nil {
		return "not signed by the current CA"
	}
	if now.Add(renewBefore).After(cert.NotAfter) {
		return "expires " + cert.NotAfter.Format(time.RFC3339)
	}
	if now.Before(cert.NotBefore) {
		return "not valid before " + cert.NotBefore.Format(time.RFC3339)
	}
	return ""
}

// ensureServing reuses serving.key (creating it if missing) and reissues
// serving.crt when it is missing, unreadable, stale, issued for another
// key or missing a required SAN; then loads the pair.
func (b *Bundle) ensureServing(hosts []string, now time.Time) error {
	key, err := readKey(b.ServingKeyFile)
	if errors.Is(err, os.ErrNotExist) {
		if key, err = newKey(); err != nil {
			return err
		}
		err = writeKey(b.ServingKeyFile, key)
	}
	if err != nil {
		return err
	}
	sans, err := requiredSANs(hosts)
	if err != nil {
		return err
	}
	if b.servingStale(key, sans, now) {
		tmpl := &x509.Certificate{
			Subject:     pkix.Name{CommonName: "nodelet-apiserver"},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			DNSNames:    sans.DNS,
			IPAddresses: sans.IPs,
		}
		der, err := b.sign(tmpl, key.Public(), now, servingValidity)
		if err != nil {
			return err
		}
		if err := writeFileAtomic(b.ServingCertFile, encodeCert(der), 0o644); err != nil {
			return err
		}
	}
	pair, err := tls.LoadX509KeyPair(b.ServingCertFile, b.ServingKeyFile)
	if err != nil {
		return fmt.Errorf("load serving key pair %s: %w", b.ServingCertFile, err)
	}
	b.serving.Store(&pair)
	return nil
}

func (b *Bundle) servingStale(key crypto.Signer, sans sanSet, now time.Time) bool {
	_, cert, err := readCert(b.ServingCertFile)
	if err != nil {
		return true
	}
	return b.leafStale(cert, now) != "" || !publicKeyMatches(cert, key) || !sans.coveredBy(cert)
}

// SignClientCert issues a client certificate (ExtKeyUsageClientAuth) for a
// fresh ECDSA key, with user as CommonName and groups as Organization, the
// way Kubernetes x509 authentication reads them.
func (b *Bundle) SignClientCert(user string, groups []string, ttl time.Duration) (certPEM, keyPEM []byte, err error) {
	return b.signClientCert(user, groups, ttl, time.Now())
}

func (b *Bundle) signClientCert(user string, groups []string, ttl time.Duration, now time.Time) (certPEM, keyPEM []byte, err error) {
	if user == "" {
		return nil, nil, errors.New("sign client certificate: user is required")
	}
	if ttl <= 0 {
		return nil, nil, fmt.Errorf("sign client certificate %q: ttl must be positive, got %s", user, ttl)
	}
	key, err := newKey()
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: user, Organization: slices.Clone(groups)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := b.sign(tmpl, key.Public(), now, ttl)
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err = encodeKey(key)
	if err != nil {
		return nil, nil, err
	}
	return encodeCert(der), keyPEM, nil
}

// SignServingCert issues a serving certificate (ExtKeyUsageServerAuth) for
// a fresh ECDSA key, valid for hosts (DNS names or IP addresses), such as
// a nodelet's certificate for its HTTPS API, which the API server verifies
// against the cluster CA.
func (b *Bundle) SignServingCert(commonName string, hosts []string, ttl time.Duration) (certPEM, keyPEM []byte, err error) {
	if commonName == "" || len(hosts) == 0 {
		return nil, nil, errors.New("sign serving certificate: a common name and at least one host are required")
	}
	if ttl <= 0 {
		return nil, nil, fmt.Errorf("sign serving certificate %q: ttl must be positive, got %s", commonName, ttl)
	}
	var sans sanSet
	for _, h := range hosts {
		sans.add(h)
	}
	key, err := newKey()
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: commonName},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    sans.DNS,
		IPAddresses: sans.IPs,
	}
	der, err := b.sign(tmpl, key.Public(), time.Now(), ttl)
	if err != nil {
		return nil, nil, fmt.Errorf("sign serving certificate %q: %w", commonName, err)
	}
	if keyPEM, err = encodeKey(key); err != nil {
		return nil, nil, err
	}
	return encodeCert(der), keyPEM, nil
}
