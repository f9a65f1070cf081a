package runtime

// Registry credentials from a pod's image pull secrets, matched to an image
// as upstream's kubelet matches them (pkg/credentialprovider's
// BasicDockerKeyring and secrets.MakeDockerKeyring): a location is a host
// with an optional port and path prefix, the host may hold glob patterns
// per dot-separated part (*.example.com), every matching location's
// credentials are candidates, most specific first, and Docker Hub's
// credentials ("https://index.docker.io/v1/") serve docker.io images. It is
// pure: the executor (package runtime/containerd) hands the credentials to
// containerd's resolver.

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// defaultRegistryHost is the key of Docker Hub's credentials.
const defaultRegistryHost = "index.docker.io"

// RegistryCredential is one set of credentials for a registry.
type RegistryCredential struct {
	Username string
	Password string
	// IdentityToken is an OAuth refresh token (docker's identitytoken).
	IdentityToken string
}

// HostCredentials returns what containerd's authorizer wants: user and
// secret, or an empty user and the identity token (as containerd's CRI
// ParseAuth does).
func (rc RegistryCredential) HostCredentials() (string, string) {
	if rc.IdentityToken != "" {
		return "", rc.IdentityToken
	}
	return rc.Username, rc.Password
}

// dockerConfigEntry is one entry of a docker config (.dockercfg, or the
// "auths" of .dockerconfigjson). "auth" (base64 user:password), when set,
// wins over username and password, as upstream's UnmarshalJSON decides.
type dockerConfigEntry struct {
	Username      string `json:"username,omitempty"`
	Password      string `json:"password,omitempty"`
	Auth          string `json:"auth,omitempty"`
	IdentityToken string `json:"identitytoken,omitempty"`
}

func (e dockerConfigEntry) credential() (RegistryCredential, error) {
	rc := RegistryCredential{Username: e.Username, Password: e.Password, IdentityToken: e.IdentityToken}
	if e.Auth == "" {
		return rc, nil
	}
	raw, err := base64.StdEncoding.DecodeString(e.Auth)
	if err != nil {
		return rc, fmt.Errorf("decode auth field: %w", err)
	}
	user, pass, ok := strings.Cut(string(raw), ":")
	if !ok {
		return rc, errors.New("auth field is not base64 of user:password")
	}
	rc.Username, rc.Password = user, pass
	return rc, nil
}

// Keyring holds credentials by location. The zero value is empty.
type Keyring struct {
	creds map[string][]RegistryCredential
	index []string // the keys of creds, reverse-sorted: more specific first
}

// KeyringFromSecrets reads the docker configs of kubernetes.io/
// dockerconfigjson and kubernetes.io/dockercfg secrets, in order; secrets
// of other types, or without the type's key, are ignored as upstream
// ignores them. A secret that does not parse is an error naming it.
func KeyringFromSecrets(secrets []*corev1.Secret) (*Keyring, error) {
	kr := &Keyring{}
	for _, s := range secrets {
		if s == nil {
			continue
		}
		var cfg map[string]dockerConfigEntry
		switch data := s.Data; {
		case s.Type == corev1.SecretTypeDockerConfigJson && len(data[corev1.DockerConfigJsonKey]) > 0:
			var doc struct {
				Auths map[string]dockerConfigEntry `json:"auths"`
			}
			if err := json.Unmarshal(data[corev1.DockerConfigJsonKey], &doc); err != nil {
				return nil, fmt.Errorf("image pull secret %s/%s: parse %s: %w", s.Namespace, s.Name, corev1.DockerConfigJsonKey, err)
			}
			cfg = doc.Auths
		case s.Type == corev1.SecretTypeDockercfg && len(data[corev1.DockerConfigKey]) > 0:
			if err := json.Unmarshal(data[corev1.DockerConfigKey], &cfg); err != nil {
				return nil, fmt.Errorf("image pull secret %s/%s: parse %s: %w", s.Namespace, s.Name, corev1.DockerConfigKey, err)
			}
		default:
			continue
		}
		// Map order is random; sort so that a secret's entries for one
		// key keep a stable order.
		locs := make([]string, 0, len(cfg))
		for loc := range cfg {
			locs = append(locs, loc)
		}
		slices.Sort(locs)
		for _, loc := range locs {
			rc, err := cfg[loc].credential()
			if err != nil {
				return nil, fmt.Errorf("image pull secret %s/%s: entry %q: %w", s.Namespace, s.Name, loc, err)
			}
			kr.add(loc, rc)
		}
	}
	return kr, nil
}

// add records rc for loc, a docker config key: "https://index.docker.io/v1/",
// "registry.example.com:5000/team", "*.example.com". A key that is not a
// URL is skipped, as upstream skips it.
func (kr *Keyring) add(loc string, rc RegistryCredential) {
	value := loc
	if !strings.HasPrefix(value, "https://") && !strings.HasPrefix(value, "http://") {
		value = "https://" + value
	}
	u, err := url.Parse(value)
	if err != nil {
		return
	}
	// docker treats /v1/ and /v2/ as the registry itself.
	path := u.Path
	if strings.HasPrefix(path, "/v1/") || strings.HasPrefix(path, "/v2/") {
		path = path[3:]
	}
	key := u.Host
	if path != "" && path != "/" {
		key += path
	}
	if kr.creds == nil {
		kr.creds = map[string][]RegistryCredential{}
	}
	if _, ok := kr.creds[key]; !ok {
		kr.index = append(kr.index, key)
		slices.Sort(kr.index)
		slices.Reverse(kr.index)
	}
	kr.creds[key] = append(kr.creds[key], rc)
}

// Lookup returns the credentials for a repository (docker.io/library/nginx,
// without tag or digest): those of every matching location, more specific
// first. ok is false when none matches: the pull is anonymous.
func (kr *Keyring) Lookup(repo string) (_ []RegistryCredential, ok bool) {
	var out []RegistryCredential
	for _, key := range kr.index {
		if urlsMatch(key, repo) {
			out = append(out, kr.creds[key]...)
		}
	}
	if len(out) > 0 {
		return out, true
	}
	if isDefaultRegistryMatch(repo) {
		if rc, ok := kr.creds[defaultRegistryHost]; ok {
			return rc, true
		}
	}
	return nil, false
}

// urlsMatch tells whether target (host[:port]/path) matches glob: same
// port, as many host parts, each matching its glob part (filepath.Match),
// and glob's path a prefix of target's. Ports and paths take no wildcard.
func urlsMatch(glob, target string) bool {
	gu, err := url.Parse("https://" + glob)
	if err != nil {
		return false
	}
	tu, err := url.Parse("https://" + target)
	if err != nil {
		return false
	}
	gParts, gPort := splitHost(gu.Host)
	tParts, tPort := splitHost(tu.Host)
	if gPort != tPort || len(gParts) != len(tParts) || !strings.HasPrefix(tu.Path, gu.Path) {
		return false
	}
	for i, g := range gParts {
		if ok, err := filepath.Match(g, tParts[i]); err != nil || !ok {
			return false
		}
	}
	return true
}

func splitHost(hostport string) ([]string, string) {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		host, port = hostport, ""
	}
	return strings.Split(host, "."), port
}

// isDefaultRegistryMatch tells whether repo is pulled from Docker Hub.
func isDefaultRegistryMatch(repo string) bool {
	first, _, found := strings.Cut(repo, "/")
	switch {
	case first == "":
		return false
	case !found:
		return true
	case first == "docker.io" || first == "index.docker.io":
		return true
	}
	return !strings.ContainsAny(first, ".:")
}

// CredentialsKey identifies a list of credentials (for sharing a pull
// between callers with the same credentials) without holding them.
func CredentialsKey(creds []RegistryCredential) string {
	if len(creds) == 0 {
		return ""
	}
	h := sha256.New()
	for _, rc := range creds {
		for _, s := range []string{rc.Username, rc.Password, rc.IdentityToken} {
			fmt.Fprintf(h, "%d:%s", len(s), s)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}
