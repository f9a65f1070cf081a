package nodelet

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodelet/nodelet/nodecerts"
)

// TestNewLoadsOrDefersTheKubeconfig: a prepared kubeconfig is loaded by
// New (a bad one fails at once); one the control plane's certificates go
// into is loaded by Run, after bootstrapping.
func TestNewLoadsOrDefersTheKubeconfig(t *testing.T) {
	dir := t.TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	if err := nodecerts.WriteKubeconfig(kc, nodecerts.BootstrapKubeconfig("https://cp:6443", nil, "abcdef.0123456789abcdef")); err != nil {
		t.Fatal(err)
	}
	base := Config{NodeName: "n1", ContainerdAddress: "/run/containerd.sock", RootDir: dir}

	cfg := base
	cfg.Credentials = Credentials{Kubeconfig: kc, KubeAPIQPS: 7, KubeAPIBurst: 9}
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rc := a.cfg.RestConfig
	if a.client == nil || rc.Host != "https://cp:6443" || rc.QPS != 7 || rc.Burst != 9 || rc.UserAgent != "nodelet/n1" {
		t.Errorf("prepared kubeconfig: client %v, config %+v", a.client != nil, rc)
	}

	cfg.Credentials.Kubeconfig = filepath.Join(dir, "missing")
	if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("a missing prepared kubeconfig: %v", err)
	}

	cfg.Credentials.BootstrapKubeconfig = kc
	if a, err = New(cfg); err != nil {
		t.Fatal(err)
	}
	if a.client != nil || a.cfg.RestConfig != nil || a.cfg.Credentials.CertDir != filepath.Join(dir, "pki") {
		t.Errorf("bootstrapping: client made %v, certificate dir %s", a.client != nil, a.cfg.Credentials.CertDir)
	}

	if _, err := New(base); err == nil {
		t.Error("no kubeconfig, config nor client accepted")
	}
}
