package network

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/containernetworking/cni/libcni"
)

func TestParsePodCIDR(t *testing.T) {
	tests := []struct {
		in      string
		want    string
		wantErr bool
	}{
		{in: "10.244.1.0/24", want: "10.244.1.0/24"},
		{in: "10.244.0.0/16", want: "10.244.0.0/16"},
		{in: "fd00:10:244:1::/64", want: "fd00:10:244:1::/64"},
		{in: "10.244.1.5/24", wantErr: true}, // host bits
		{in: "10.244.1.0/31", wantErr: true}, // no room
		{in: "10.244.1.0", wantErr: true},
		{in: "", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parsePodCIDR(tt.in)
			if tt.wantErr {
				if !errors.Is(err, ErrInvalidPodCIDR) {
					t.Fatalf("parsePodCIDR(%q) error = %v, want ErrInvalidPodCIDR", tt.in, err)
				}
				return
			}
			if err != nil || got.String() != tt.want {
				t.Fatalf("parsePodCIDR(%q) = %v, %v; want %s", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestChooseCNIVersion(t *testing.T) {
	all := []string{"0.1.0", "0.2.0", "0.3.0", "0.3.1", "0.4.0", "1.0.0"}
	old := []string{"0.1.0", "0.2.0", "0.3.0", "0.3.1", "0.4.0"}
	tests := []struct {
		name      string
		supported map[string][]string
		want      string
		wantErr   bool
	}{
		{"all speak 1.0.0", map[string][]string{"bridge": all, "host-local": all, "portmap": all}, "1.0.0", false},
		{"one plugin older", map[string][]string{"bridge": all, "host-local": old, "portmap": all}, "0.4.0", false},
		{"ancient", map[string][]string{"bridge": {"0.3.1"}, "host-local": {"0.3.1"}, "portmap": {"0.3.1"}}, "0.3.1", false},
		{"plugin missing", map[string][]string{"bridge": all, "host-local": all}, "", true},
		{"nothing shared", map[string][]string{"bridge": {"0.2.0"}, "host-local": all, "portmap": all}, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := chooseCNIVersion(tt.supported)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Fatalf("chooseCNIVersion() = %q, %v; want %q, error %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestRenderConfList(t *testing.T) {
	for _, tt := range []struct {
		cidr, route string
	}{
		{"10.244.3.0/24", "0.0.0.0/0"},
		{"fd00:10:244:3::/64", "::/0"},
	} {
		t.Run(tt.cidr, func(t *testing.T) {
			data, err := renderConfList(bridgeConfig{
				CNIVersion: "1.0.0", NetworkName: "nodelet", BridgeName: "nodelet0",
				PodCIDR: netip.MustParsePrefix(tt.cidr), IPAMDir: "/var/lib/nodelet/cni/networks",
			})
			if err != nil {
				t.Fatal(err)
			}
			if !isGenerated(data) {
				t.Errorf("rendered config is not marked as generated:\n%s", data)
			}
			list, err := libcni.NetworkConfFromBytes(data)
			if err != nil {
				t.Fatalf("libcni cannot parse the rendered config: %v\n%s", err, data)
			}
			if list.Name != "nodelet" || list.CNIVersion != "1.0.0" || !list.LoadOnlyInlinedPlugins {
				t.Errorf("list = name %q version %q inlinedOnly %v", list.Name, list.CNIVersion, list.LoadOnlyInlinedPlugins)
			}
			var types []string
			for _, p := range list.Plugins {
				types = append(types, p.Network.Type)
			}
			if !slices.Equal(types, []string{"bridge", "portmap"}) {
				t.Errorf("plugins = %v, want [bridge portmap]", types)
			}
			if !list.Plugins[1].Network.Capabilities["portMappings"] {
				t.Errorf("portmap lacks the portMappings capability")
			}
			ipam := list.Plugins[0].Network.IPAM
			if ipam.Type != "host-local" {
				t.Errorf("ipam type = %q", ipam.Type)
			}
			for _, want := range []string{`"subnet": "` + tt.cidr + `"`, `"dst": "` + tt.route + `"`,
				`"bridge": "nodelet0"`, `"dataDir": "/var/lib/nodelet/cni/networks"`,
				`"isGateway": true`, `"ipMasq": false`, `"hairpinMode": true`} {
				if !contains(data, want) {
					t.Errorf("rendered config lacks %s:\n%s", want, data)
				}
			}
		})
	}
}

func contains(data []byte, s string) bool { return bytes.Contains(data, []byte(s)) }

func TestIsGenerated(t *testing.T) {
	tests := []struct {
		data string
		want bool
	}{
		{`{"name":"nodelet","generatedBy":"nodelet","plugins":[]}`, true},
		{`{"name":"nodelet","plugins":[]}`, false},
		{`{"name":"x","generatedBy":"someone-else"}`, false},
		{`not json`, false},
	}
	for _, tt := range tests {
		if got := isGenerated([]byte(tt.data)); got != tt.want {
			t.Errorf("isGenerated(%s) = %v, want %v", tt.data, got, tt.want)
		}
	}
}

func TestPortMappings(t *testing.T) {
	got := portMappings([]PortMapping{
		{HostPort: 8080, ContainerPort: 80, Protocol: "TCP"},
		{HostPort: 0, ContainerPort: 81, Protocol: "TCP"}, // no hostPort: not mapped
		{HostPort: 5353, ContainerPort: 53, Protocol: "UDP", HostIP: "127.0.0.1"},
		{HostPort: 9000, ContainerPort: 9000},
	})
	want := []cniPortMapping{
		{HostPort: 8080, ContainerPort: 80, Protocol: "tcp"},
		{HostPort: 5353, ContainerPort: 53, Protocol: "udp", HostIP: "127.0.0.1"},
		{HostPort: 9000, ContainerPort: 9000, Protocol: "tcp"},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("portMappings() = %+v, want %+v", got, want)
	}
	if rt := runtimeConf(PodNetwork{ID: "abc"}, "/ns"); rt.CapabilityArgs != nil {
		t.Errorf("runtimeConf without hostPorts has capability args %v", rt.CapabilityArgs)
	}
}

// requirePlugins fails the test when the distribution's CNI plugins are
// missing (apt-get install containernetworking-plugins).
func requirePlugins(t *testing.T) {
	t.Helper()
	for _, p := range append([]string{"loopback"}, pluginsUsed...) {
		if _, err := os.Stat(filepath.Join("/usr/lib/cni", p)); err != nil {
			t.Fatalf("CNI plugin %s missing in /usr/lib/cni (install containernetworking-plugins): %v", p, err)
		}
	}
}

func newTestNetwork(t *testing.T, base string) *Network {
	t.Helper()
	n, err := New(Config{
		BinDirs:     []string{"/usr/lib/cni"},
		ConfDir:     filepath.Join(base, "net.d"),
		CacheDir:    filepath.Join(base, "cache"),
		IPAMDir:     filepath.Join(base, "ipam"),
		NetNSDir:    filepath.Join(base, "netns"),
		BridgeName:  "nlt0",
		NetworkName: "nodelet-test",
		Log:         slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestEnsureConfig runs the real plugins for their VERSION only; it needs
// neither root nor a network namespace.
func TestEnsureConfig(t *testing.T) {
	requirePlugins(t)
	n := newTestNetwork(t, t.TempDir())
	if err := n.Ready(); !errors.Is(err, ErrNoConfig) {
		t.Fatalf("Ready() before EnsureConfig = %v, want ErrNoConfig", err)
	}
	if err := n.EnsureConfig("10.244.5.0/24"); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(n.cfg.ConfDir, "10-nodelet-test.conflist")
	list, err := libcni.NetworkConfFromFile(path)
	if err != nil {
		t.Fatalf("generated config unreadable: %v", err)
	}
	if list.CNIVersion != "1.0.0" {
		t.Errorf("cniVersion = %q, want 1.0.0 (Debian's 1.1.1 plugins speak it)", list.CNIVersion)
	}
	if _, err := libcni.NewCNIConfig(n.cfg.BinDirs, nil).ValidateNetworkList(context.Background(), list); err != nil {
		t.Errorf("generated config does not validate: %v", err)
	}
	if err := n.Ready(); err != nil {
		t.Errorf("Ready() after EnsureConfig = %v", err)
	}

	before := stat(t, path)
	if err := n.EnsureConfig("10.244.5.0/24"); err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(before, stat(t, path)) {
		t.Errorf("unchanged config was rewritten")
	}
	if err := n.EnsureConfig("10.244.6.0/24"); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(path); !contains(data, `"10.244.6.0/24"`) {
		t.Errorf("config not rewritten for the new podCIDR:\n%s", data)
	}
	if err := n.EnsureConfig("10.244.6.1/24"); !errors.Is(err, ErrInvalidPodCIDR) {
		t.Errorf("EnsureConfig(host address) = %v, want ErrInvalidPodCIDR", err)
	}
	entries, _ := os.ReadDir(n.cfg.ConfDir)
	if len(entries) != 1 {
		t.Errorf("conf dir holds %d entries, want only our config", len(entries))
	}
}

func TestEnsureConfigLeavesForeignConfigs(t *testing.T) {
	requirePlugins(t)
	n := newTestNetwork(t, t.TempDir())
	foreign := filepath.Join(n.cfg.ConfDir, "05-flannel.conflist")
	content := []byte(`{"cniVersion":"1.0.0","name":"cbr0","plugins":[{"type":"flannel"}]}`)
	if err := os.MkdirAll(n.cfg.ConfDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(foreign, content, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := n.EnsureConfig("10.244.5.0/24"); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(n.cfg.ConfDir)
	if len(entries) != 1 {
		t.Errorf("conf dir holds %d entries, want only the foreign config", len(entries))
	}
	if data, _ := os.ReadFile(foreign); string(data) != string(content) {
		t.Errorf("foreign config changed: %s", data)
	}
	list, err := n.loadNetworkList()
	if err != nil || list.Name != "cbr0" {
		t.Errorf("loadNetworkList() = %v, %v; want the foreign cbr0", list, err)
	}
}

func TestLoadNetworkList(t *testing.T) {
	n := newTestNetwork(t, t.TempDir())
	dir := n.cfg.ConfDir
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, data string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("00-broken.conflist", `{"name":`)
	write("10-single.conf", `{"cniVersion":"1.0.0","name":"single","type":"bridge"}`)
	write("20-list.conflist", `{"cniVersion":"1.0.0","name":"list","plugins":[{"type":"bridge"}]}`)
	write(".nodelet-123.tmp", `{"cniVersion":"1.0.0","name":"tmp","plugins":[{"type":"bridge"}]}`)
	list, err := n.loadNetworkList()
	if err != nil {
		t.Fatal(err)
	}
	if list.Name != "single" || len(list.Plugins) != 1 || list.Plugins[0].Network.Type != "bridge" {
		t.Fatalf("loadNetworkList() = %q with %d plugins, want the single-plugin conf wrapped", list.Name, len(list.Plugins))
	}
}

func stat(t *testing.T, path string) os.FileInfo {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi
}
