package testregistry

import (
	"io"
	"testing"

	"github.com/containerd/containerd/v2/core/remotes/docker"
	"github.com/containerd/containerd/v2/core/remotes/docker/config"
	digest "github.com/opencontainers/go-digest"
)

// TestPushPull pushes the image to a registry with auth and reads its
// manifest back through a token-auth proxy: every fixture, once.
func TestPushPull(t *testing.T) {
	BlockDNS(t)
	ctx := t.Context()
	reg := Start(t, "pusher", "s3cret")
	want := NewImageSource(t).Push(t, reg, "team/busybox:1.36")

	// The registry's own basic auth is for the pusher; the proxy adds
	// bearer tokens in front of an open registry.
	open := Start(t, "", "")
	NewImageSource(t).Push(t, open, "team/busybox:1.36")
	proxy, _ := StartProxy(t, open.Host, ProxyOptions{TokenUser: "robot", TokenPassword: "t0ken"})

	for _, tt := range []struct {
		name, host, user, password string
	}{
		{"registry", reg.Host, reg.User, reg.Password},
		{"proxy", proxy.Host, "robot", "t0ken"},
	} {
		resolve := func(user, password string) (string, error) {
			opts := config.HostOptions{DefaultScheme: "http",
				Credentials: func(string) (string, string, error) { return user, password, nil }}
			r := docker.NewResolver(docker.ResolverOptions{Hosts: config.ConfigureHosts(ctx, opts)})
			_, desc, err := r.Resolve(ctx, tt.host+"/team/busybox:1.36")
			if err != nil {
				return "", err
			}
			f, err := r.Fetcher(ctx, tt.host+"/team/busybox:1.36")
			if err != nil {
				return "", err
			}
			rc, err := f.Fetch(ctx, desc)
			if err != nil {
				return "", err
			}
			defer rc.Close()
			data, err := io.ReadAll(rc)
			if err != nil {
				return "", err
			}
			return digest.FromBytes(data).String(), nil // what came, not what was announced
		}
		if _, err := resolve(tt.user, "wrong"); err == nil {
			t.Errorf("%s: resolved with a wrong password", tt.name)
		}
		got, err := resolve(tt.user, tt.password)
		if err != nil || got != want.String() {
			t.Errorf("%s: resolve and fetch: %s, %v; want %s", tt.name, got, err, want)
		}
	}
	if proxy.Count("GET", "/token") == 0 || proxy.Count("/manifests/1.36") == 0 {
		t.Errorf("the proxy saw no token or manifest request: %v", proxy.List())
	}
	if proxy.MaxRepos() != 1 {
		t.Errorf("MaxRepos() = %d, want 1", proxy.MaxRepos())
	}
	proxy.Reset()
	if n := proxy.Count(); n != 0 {
		t.Errorf("%d requests after Reset", n)
	}
}
