package containerd_test

// Real pulls configured by hosts.toml directories (containerd's
// config_path): mirrors, plain-HTTP and self-signed registries under a
// name, credentials for a registry reached through its configured server.

import (
	"context"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/runtime"
	"github.com/nodelet/nodelet/runtime/containerd"
	"github.com/nodelet/nodelet/runtime/runtimetest"
	"github.com/nodelet/nodelet/test/testkit/testregistry"
)

// writeHostsTOML writes <root>/<dir>/hosts.toml.
func writeHostsTOML(t *testing.T, root, dir, toml string) {
	t.Helper()
	d := filepath.Join(root, dir)
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d, "hosts.toml"), []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestPullRegistryConfigDir(t *testing.T) {
	testregistry.BlockDNS(t)
	addr := runtimetest.StartContainerd(t)
	open := testregistry.Start(t, "", "")
	private := testregistry.Start(t, "puller", "s3cret")
	src := testregistry.NewImageSource(t)
	src.Push(t, open, "library/busybox:1.36")
	src.Push(t, private, "team/busybox:1.36")
	plain, _ := testregistry.StartProxy(t, open.Host, testregistry.ProxyOptions{})
	secure, tlsSrv := testregistry.StartProxy(t, open.Host, testregistry.ProxyOptions{TLS: true})

	// Two roots, searched in order, as containerd's config_path list.
	rootA, rootB := t.TempDir(), t.TempDir()
	caPath := filepath.Join(rootA, "ca.crt")
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tlsSrv.Certificate().Raw})
	if err := os.WriteFile(caPath, caPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	// docker.io goes to the mirror; its own server is a closed loopback
	// port, so nothing leaves the machine if the mirror is not used.
	writeHostsTOML(t, rootB, "docker.io", fmt.Sprintf(`server = "http://127.0.0.1:1"

[host."http://%s"]
  capabilities = ["pull", "resolve"]
`, plain.Host))
	// The other hosts are in the first root: both are searched.
	writeHostsTOML(t, rootA, "registry.internal.test", fmt.Sprintf("server = %q\n", "http://"+plain.Host))
	writeHostsTOML(t, rootA, "mirror.internal.test_5000_", fmt.Sprintf("server = %q\n", "http://"+plain.Host))
	writeHostsTOML(t, rootA, "private.internal.test", fmt.Sprintf("server = %q\n", "http://"+private.Host))
	writeHostsTOML(t, rootA, "secure.internal.test", fmt.Sprintf("server = %q\nskip_verify = true\n", "https://"+secure.Host))
	writeHostsTOML(t, rootA, "ca.internal.test", fmt.Sprintf("server = %q\nca = %q\n", "https://"+secure.Host, caPath))
	writeHostsTOML(t, rootA, "untrusted.internal.test", fmt.Sprintf("server = %q\n", "https://"+secure.Host))
	cfg := containerd.Config{Registry: containerd.RegistryConfig{ConfigDir: rootA + string(os.PathListSeparator) + rootB}}
	secret := dockerConfigJSON(t, "private", map[string][2]string{"private.internal.test": {"puller", "s3cret"}})

	tests := []struct {
		name, ref string
		proxy     *testregistry.Proxy // nil: not through a proxy
		secrets   []*corev1.Secret
		wantErr   string
	}{
		{name: "docker.io mirror", ref: "busybox:1.36", proxy: plain},
		{name: "plain HTTP registry by name", ref: "registry.internal.test/library/busybox:1.36", proxy: plain},
		{name: "host with port", ref: "mirror.internal.test:5000/library/busybox:1.36", proxy: plain},
		{name: "credentials for the name, sent to its server", ref: "private.internal.test/team/busybox:1.36", secrets: []*corev1.Secret{secret}},
		{name: "server needs credentials", ref: "private.internal.test/team/busybox:1.36", wantErr: "401 Unauthorized"},
		{name: "self-signed TLS, skip_verify", ref: "secure.internal.test/library/busybox:1.36", proxy: secure},
		{name: "self-signed TLS, ca", ref: "ca.internal.test/library/busybox:1.36", proxy: secure},
		{name: "self-signed TLS, not trusted", ref: "untrusted.internal.test/library/busybox:1.36", wantErr: "certificate"},
		{name: "no configuration: the name itself, not resolvable here", ref: "unknown.internal.test/library/busybox:1.36", wantErr: "blocked"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt := newPullRuntime(t, addr, cfg)
			if tt.proxy != nil {
				tt.proxy.Reset()
			}
			img, res, err := rt.EnsureImageWith(context.Background(), tt.ref, runtime.PullOptions{Secrets: tt.secrets})
			if tt.wantErr != "" {
				wantPullError(t, err, tt.wantErr)
				t.Logf("error: %v", err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			name, _ := runtime.NormalizeImageRef(tt.ref)
			checkPulled(t, rt, img, res, name)
			if tt.proxy != nil && tt.proxy.Count("/manifests/1.36") == 0 {
				t.Errorf("pull did not go through %s: %v", tt.proxy.Host, tt.proxy.List())
			}
		})
	}
}
