package runtime

import (
	"encoding/base64"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The cases of upstream's TestURLsMatch (pkg/credentialprovider).
func TestURLsMatch(t *testing.T) {
	tests := []struct {
		glob, target string
		want         bool
	}{
		{"*.kubernetes.io", "prefix.kubernetes.io", true},
		{"prefix.*.io", "prefix.kubernetes.io", true},
		{"prefix.kubernetes.*", "prefix.kubernetes.io", true},
		{"*-good.kubernetes.io", "prefix-good.kubernetes.io", true},
		{"prefix.kubernetes.io/foo", "prefix.kubernetes.io/foo/bar", true},
		{"*.kubernetes.io/foo", "prefix.kubernetes.io/foo/bar", true},
		{"prefix.*.io/foo", "prefix.kubernetes.io/foo/bar", true},
		{"*.kubernetes.io:1111", "prefix.kubernetes.io:1111", true},
		{"127.0.0.*:5000", "127.0.0.1:5000/app", true},
		{"*.kubernetes.io", "kubernetes.io", false},
		{"*.kubernetes.io", "a.b.kubernetes.io", false},
		{"prefix.*.io/foo", "prefix.kubernetes.io/bar", false},
		{"*.kubernetes.io:1111", "prefix.kubernetes.io:1112", false},
		{"*.kubernetes.io:1111", "prefix.kubernetes.io", false},
		{"*.kubernetes.io", "prefix.kubernetes.io:1111", false},
		{"*-good.kubernetes.io", "prefix-bad.kubernetes.io", false},
	}
	for _, tt := range tests {
		if got := urlsMatch(tt.glob, tt.target); got != tt.want {
			t.Errorf("urlsMatch(%q, %q) = %v, want %v", tt.glob, tt.target, got, tt.want)
		}
	}
}

func TestKeyringLookup(t *testing.T) {
	cred := func(u string) RegistryCredential { return RegistryCredential{Username: u, Password: "pw"} }
	kr := &Keyring{}
	for loc, user := range map[string]string{
		"https://index.docker.io/v1/":       "hub",
		"registry.example.com":              "host",
		"http://registry.example.com/team/": "team",
		"registry.example.com:5000":         "port",
		"*.corp.example":                    "wild",
		"https://quay.example/v2/":          "v2",
	} {
		kr.add(loc, cred(user))
	}
	kr.add("registry.example.com", cred("host2"))
	tests := []struct {
		repo string
		want []string // usernames in order; nil: no match
	}{
		{"docker.io/library/nginx", []string{"hub"}},
		{"docker.io/someone/app", []string{"hub"}},
		{"registry.example.com/app", []string{"host", "host2"}},
		{"registry.example.com/team/app", []string{"team", "host", "host2"}},
		{"registry.example.com/teams/app", []string{"host", "host2"}},
		{"registry.example.com:5000/app", []string{"port"}},
		{"registry.example.com:5001/app", nil},
		{"a.corp.example/app", []string{"wild"}},
		{"corp.example/app", nil},
		{"quay.example/org/app", []string{"v2"}},
		{"other.example/app", nil},
	}
	for _, tt := range tests {
		got, ok := kr.Lookup(tt.repo)
		var users []string
		for _, rc := range got {
			users = append(users, rc.Username)
		}
		if ok != (tt.want != nil) || strings.Join(users, ",") != strings.Join(tt.want, ",") {
			t.Errorf("lookup(%q) = %v, %v; want %v", tt.repo, users, ok, tt.want)
		}
	}
	if _, ok := (&Keyring{}).Lookup("docker.io/library/nginx"); ok {
		t.Error("an empty keyring matched")
	}
}

func secret(name string, typ corev1.SecretType, key, data string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
		Type:       typ,
		Data:       map[string][]byte{key: []byte(data)},
	}
}

func TestKeyringFromSecrets(t *testing.T) {
	auth := base64.StdEncoding.EncodeToString([]byte("alice:pa:ss"))
	kr, err := KeyringFromSecrets([]*corev1.Secret{
		nil,
		secret("json", corev1.SecretTypeDockerConfigJson, corev1.DockerConfigJsonKey,
			`{"auths":{"r.example":{"username":"bob","password":"pw"},"auth.example":{"auth":"`+auth+`","username":"ignored"},"tok.example":{"identitytoken":"refresh"}}}`),
		secret("cfg", corev1.SecretTypeDockercfg, corev1.DockerConfigKey, `{"r.example":{"username":"carol","password":"pw2","email":"c@example.com"}}`),
		// The wrong key for the type, and a type that carries no docker config.
		secret("mismatch", corev1.SecretTypeDockercfg, corev1.DockerConfigJsonKey, `{"auths":{"r.example":{"username":"x"}}}`),
		secret("opaque", corev1.SecretTypeOpaque, corev1.DockerConfigJsonKey, `{"auths":{"r.example":{"username":"y"}}}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := kr.Lookup("r.example/app")
	if len(got) != 2 || got[0].Username != "bob" || got[1].Username != "carol" || got[1].Password != "pw2" {
		t.Errorf("r.example: %+v, want bob then carol", got)
	}
	if got, _ := kr.Lookup("auth.example/app"); len(got) != 1 || got[0].Username != "alice" || got[0].Password != "pa:ss" {
		t.Errorf("auth field: %+v", got)
	}
	got, _ = kr.Lookup("tok.example/app")
	if u, s := got[0].HostCredentials(); u != "" || s != "refresh" {
		t.Errorf("identity token: %q, %q", u, s)
	}

	for _, bad := range []*corev1.Secret{
		secret("badjson", corev1.SecretTypeDockerConfigJson, corev1.DockerConfigJsonKey, `{"auths":`),
		secret("badcfg", corev1.SecretTypeDockercfg, corev1.DockerConfigKey, `[]`),
		secret("badauth", corev1.SecretTypeDockerConfigJson, corev1.DockerConfigJsonKey, `{"auths":{"r":{"auth":"bm9jb2xvbg=="}}}`),
		secret("badbase64", corev1.SecretTypeDockerConfigJson, corev1.DockerConfigJsonKey, `{"auths":{"r":{"auth":"%%%"}}}`),
	} {
		if _, err := KeyringFromSecrets([]*corev1.Secret{bad}); err == nil || !strings.Contains(err.Error(), "ns/"+bad.Name) {
			t.Errorf("secret %s: %v, want an error naming it", bad.Name, err)
		}
	}
}

func TestCredentialsKey(t *testing.T) {
	a := []RegistryCredential{{Username: "a", Password: "b"}}
	if CredentialsKey(nil) != "" || CredentialsKey(a) != CredentialsKey([]RegistryCredential{{Username: "a", Password: "b"}}) {
		t.Error("credentialsKey is not stable")
	}
	if CredentialsKey(a) == CredentialsKey([]RegistryCredential{{Username: "ab"}}) {
		t.Error("credentialsKey confuses two credentials")
	}
	if k := CredentialsKey(a); len(k) != 64 {
		t.Errorf("credentialsKey = %q, want a sha256 in hex", k)
	}
}
