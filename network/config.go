package network

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/containernetworking/cni/libcni"
)

// generatedBy marks the configurations the nodelet wrote; only those are
// ever rewritten.
const generatedBy = "nodelet"

// confExtensions are the files libcni-based runtimes read from ConfDir.
var confExtensions = []string{".conf", ".conflist", ".json"}

// pluginsUsed are the plugins of the generated configuration.
var pluginsUsed = []string{"bridge", "host-local", "portmap"}

// cniVersionsPreferred, best first: the generated config uses the first one
// every plugin in pluginsUsed supports.
var cniVersionsPreferred = []string{"1.0.0", "0.4.0", "0.3.1"}

// versionTimeout bounds the plugin VERSION calls of EnsureConfig.
const versionTimeout = 30 * time.Second

// bridgeConfig are the inputs of the generated configuration.
type bridgeConfig struct {
	CNIVersion  string
	NetworkName string
	BridgeName  string
	PodCIDR     netip.Prefix
	IPAMDir     string
}

// The JSON shapes of the generated configuration; structs keep the output
// byte-stable so an unchanged config is never rewritten.
type (
	confList struct {
		CNIVersion  string `json:"cniVersion"`
		Name        string `json:"name"`
		GeneratedBy string `json:"generatedBy,omitempty"`
		// InlinedOnly keeps libcni from adding plugins found in
		// ConfDir/<name>/ to ours.
		InlinedOnly bool  `json:"loadOnlyInlinedPlugins"`
		Plugins     []any `json:"plugins"`
	}
	bridgePlugin struct {
		Type        string   `json:"type"`
		Bridge      string   `json:"bridge"`
		IsGateway   bool     `json:"isGateway"`
		IPMasq      bool     `json:"ipMasq"`
		HairpinMode bool     `json:"hairpinMode"`
		IPAM        hostIPAM `json:"ipam"`
	}
	hostIPAM struct {
		Type    string        `json:"type"`
		DataDir string        `json:"dataDir"`
		Ranges  [][]ipamRange `json:"ranges"`
		Routes  []ipamRoute   `json:"routes"`
	}
	ipamRange struct {
		Subnet string `json:"subnet"`
	}
	ipamRoute struct {
		Dst string `json:"dst"`
	}
	portmapPlugin struct {
		Type         string          `json:"type"`
		Capabilities map[string]bool `json:"capabilities"`
		SNAT         bool            `json:"snat"`
	}
)

// renderConfList is the generated configuration: bridge with host-local
// IPAM over the pod CIDR and a default route through the bridge, then
// portmap for hostPorts. Loopback is brought up by SetupPod itself.
// The bridge does not masquerade (ipMasq false): its rules per pod would
// also hide pods' addresses from pods on other nodes. The node-level rule
// of masq.go, written by Routes.Sync, masquerades only what leaves the
// cluster.
func renderConfList(c bridgeConfig) ([]byte, error) {
	defaultRoute := "0.0.0.0/0"
	if c.PodCIDR.Addr().Is6() {
		defaultRoute = "::/0"
	}
	list := confList{
		CNIVersion:  c.CNIVersion,
		Name:        c.NetworkName,
		GeneratedBy: generatedBy,
		InlinedOnly: true,
		Plugins: []any{
			bridgePlugin{
				Type: "bridge", Bridge: c.BridgeName,
				IsGateway: true, IPMasq: false, HairpinMode: true,
				IPAM: hostIPAM{
					Type:    "host-local",
					DataDir: c.IPAMDir,
					Ranges:  [][]ipamRange{{{Subnet: c.PodCIDR.String()}}},
					Routes:  []ipamRoute{{Dst: defaultRoute}},
				},
			},
			portmapPlugin{Type: "portmap", Capabilities: map[string]bool{"portMappings": true}, SNAT: true},
		},
	}
	out, err := json.MarshalIndent(list, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("render CNI config %s: %w", c.NetworkName, err)
	}
	return append(out, '\n'), nil
}

// parsePodCIDR accepts an IPv4 or IPv6 prefix that leaves room for pods.
func parsePodCIDR(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%w %q: %w", ErrInvalidPodCIDR, s, err)
	}
	if p.Masked() != p {
		return netip.Prefix{}, fmt.Errorf("%w %q: host bits set (want %s)", ErrInvalidPodCIDR, s, p.Masked())
	}
	if p.Addr().BitLen()-p.Bits() < 2 {
		return netip.Prefix{}, fmt.Errorf("%w %q: too small for a gateway and pods", ErrInvalidPodCIDR, s)
	}
	return p, nil
}

// chooseCNIVersion returns the first preferred version every plugin supports.
func chooseCNIVersion(supported map[string][]string) (string, error) {
	for _, v := range cniVersionsPreferred {
		ok := true
		for _, plugin := range pluginsUsed {
			if !slices.Contains(supported[plugin], v) {
				ok = false
				break
			}
		}
		if ok {
			return v, nil
		}
	}
	return "", fmt.Errorf("network: plugins %v share none of CNI versions %v (they support %v)",
		pluginsUsed, cniVersionsPreferred, supported)
}

// isGenerated reports whether a configuration file is one the nodelet wrote.
func isGenerated(data []byte) bool {
	var head struct {
		GeneratedBy string `json:"generatedBy"`
	}
	return json.Unmarshal(data, &head) == nil && head.GeneratedBy == generatedBy
}

// EnsureConfig writes the bridge configuration for podCIDR when ConfDir
// holds no configuration, and rewrites a configuration we generated earlier
// when it differs (another podCIDR, bridge or plugin version). Configurations
// the nodelet did not write are never touched; while one exists, no new
// configuration is written.
func (n *Network) EnsureConfig(podCIDR string) error {
	prefix, err := parsePodCIDR(podCIDR)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), versionTimeout)
	defer cancel()
	cniVersion, err := n.pluginCNIVersion(ctx)
	if err != nil {
		return err
	}
	want, err := renderConfList(bridgeConfig{
		CNIVersion: cniVersion, NetworkName: n.cfg.NetworkName, BridgeName: n.cfg.BridgeName,
		PodCIDR: prefix, IPAMDir: n.cfg.IPAMDir,
	})
	if err != nil {
		return err
	}
	files, err := libcni.ConfFiles(n.cfg.ConfDir, confExtensions)
	if err != nil {
		return fmt.Errorf("list CNI configs in %s: %w", n.cfg.ConfDir, err)
	}
	path := filepath.Join(n.cfg.ConfDir, "10-"+n.cfg.NetworkName+".conflist")
	var ours, foreign []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("read CNI config %s: %w", f, err)
		}
		if !isGenerated(data) {
			foreign = append(foreign, f)
			continue
		}
		ours = append(ours, f)
		if bytes.Equal(data, want) {
			return nil
		}
	}
	switch {
	case len(ours) > 0:
		path = ours[0]
	case len(foreign) > 0:
		n.log.Info("CNI configuration present, not writing our own", "dir", n.cfg.ConfDir, "configs", foreign)
		return nil
	}
	if err := n.validate(ctx, want); err != nil {
		return err
	}
	if err := writeFileAtomic(path, want); err != nil {
		return err
	}
	n.log.Info("wrote CNI configuration", "path", path, "podCIDR", prefix, "cniVersion", cniVersion)
	return nil
}

// pluginCNIVersion asks the installed plugins which CNI versions they speak.
func (n *Network) pluginCNIVersion(ctx context.Context) (string, error) {
	supported := map[string][]string{}
	for _, plugin := range pluginsUsed {
		info, err := n.cni.GetVersionInfo(ctx, plugin)
		if err != nil {
			return "", fmt.Errorf("query CNI plugin %s in %v: %w", plugin, n.cfg.BinDirs, err)
		}
		supported[plugin] = info.SupportedVersions()
	}
	return chooseCNIVersion(supported)
}

func (n *Network) validate(ctx context.Context, conf []byte) error {
	list, err := libcni.NetworkConfFromBytes(conf)
	if err != nil {
		return fmt.Errorf("parse generated CNI config: %w", err)
	}
	if _, err := n.cni.ValidateNetworkList(ctx, list); err != nil {
		return fmt.Errorf("validate generated CNI config %s: %w", list.Name, err)
	}
	return nil
}

// writeFileAtomic replaces path with data so that readers see the old or
// the new file, never a partial one. The temporary name has no extension
// libcni reads.
func writeFileAtomic(path string, data []byte) (retErr error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create CNI config dir %s: %w", dir, err)
	}
	f, err := os.CreateTemp(dir, ".nodelet-*.tmp")
	if err != nil {
		return fmt.Errorf("write CNI config %s: %w", path, err)
	}
	defer func() {
		if retErr != nil {
			_ = os.Remove(f.Name())
		}
	}()
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write CNI config %s: %w", path, err)
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return fmt.Errorf("write CNI config %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("sync CNI config %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write CNI config %s: %w", path, err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("install CNI config %s: %w", path, err)
	}
	return nil
}

// loadNetworkList returns the configuration pods get: the first usable file
// in ConfDir in lexical order, as containerd and the kubelet choose.
func (n *Network) loadNetworkList() (*libcni.NetworkConfigList, error) {
	files, err := libcni.ConfFiles(n.cfg.ConfDir, confExtensions)
	if err != nil {
		return nil, fmt.Errorf("list CNI configs in %s: %w", n.cfg.ConfDir, err)
	}
	slices.Sort(files)
	var errs []error
	for _, f := range files {
		list, err := loadConfFile(f)
		if err == nil && len(list.Plugins) == 0 {
			err = errors.New("no plugins")
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", f, err))
			continue
		}
		return list, nil
	}
	if len(errs) == 0 {
		return nil, fmt.Errorf("%w in %s", ErrNoConfig, n.cfg.ConfDir)
	}
	return nil, fmt.Errorf("%w in %s: %w", ErrNoConfig, n.cfg.ConfDir, errors.Join(errs...))
}

// loadConfFile reads a .conflist, or a single-plugin .conf/.json file
// wrapped into a list of one (older hosts still ship those).
func loadConfFile(path string) (*libcni.NetworkConfigList, error) {
	if filepath.Ext(path) == ".conflist" {
		return libcni.NetworkConfFromFile(path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var plugin map[string]any
	if err := json.Unmarshal(data, &plugin); err != nil {
		return nil, fmt.Errorf("parse %s: %w", path, err)
	}
	wrapped, err := json.Marshal(map[string]any{
		"name": plugin["name"], "cniVersion": plugin["cniVersion"], "plugins": []any{plugin},
	})
	if err != nil {
		return nil, fmt.Errorf("wrap %s into a list: %w", path, err)
	}
	return libcni.NetworkConfFromBytes(wrapped)
}
