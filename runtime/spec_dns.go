package runtime

// Hostname, /etc/hosts and /etc/resolv.conf of a pod, as upstream's kubelet
// (pkg/kubelet/network/dns and kubelet_pods.go) and containerd write them.

import (
	"bytes"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Limits of a resolv.conf the kubelet enforces (validation.MaxDNS*).
const (
	maxDNSNameservers     = 3
	maxDNSSearchPaths     = 32
	maxDNSSearchListChars = 2048
	maxHostnameLen        = 63
)

// PodHostname returns the pod's hostname and domain as upstream's
// GeneratePodHostNameAndDomain: spec.hostname or the pod name (truncated to
// 63 characters), and, with a subdomain,
// "<subdomain>.<namespace>.svc.<clusterDomain>".
func PodHostname(pod *corev1.Pod, clusterDomain string) (hostname, domain string) {
	hostname = pod.Name
	if pod.Spec.Hostname != "" {
		hostname = pod.Spec.Hostname
	}
	hostname = truncateHostname(hostname)
	if pod.Spec.Subdomain != "" && clusterDomain != "" {
		domain = fmt.Sprintf("%s.%s.svc.%s", pod.Spec.Subdomain, pod.Namespace, clusterDomain)
	}
	return hostname, domain
}

// SandboxHostname is the hostname the pod's UTS namespace gets: the
// PodHostname, or with setHostnameAsFQDN the fully qualified name (an
// error when longer than 64 characters).
func SandboxHostname(pod *corev1.Pod, clusterDomain string) (string, error) {
	hostname, domain := PodHostname(pod, clusterDomain)
	if pod.Spec.SetHostnameAsFQDN == nil || !*pod.Spec.SetHostnameAsFQDN || domain == "" {
		return hostname, nil
	}
	fqdn := hostname + "." + domain
	if len(fqdn) > maxHostnameLen+1 {
		return "", fmt.Errorf("pod %s/%s: fully qualified hostname %s is longer than 64 characters", pod.Namespace, pod.Name, fqdn)
	}
	return fqdn, nil
}

func truncateHostname(h string) string {
	if len(h) <= maxHostnameLen {
		return h
	}
	return strings.TrimRight(h[:maxHostnameLen], "-.")
}

// HostsFile returns the pod's /etc/hosts. A pod with its own network gets
// the kubelet-managed file (localhost entries, one line per pod IP naming
// the pod, then the hostAliases); a host-network pod gets the host's file
// (hostHosts) followed by its hostAliases.
func HostsFile(pod *corev1.Pod, podIPs []string, clusterDomain string, hostHosts []byte) []byte {
	var b bytes.Buffer
	if pod.Spec.HostNetwork {
		b.Write(hostHosts)
		b.Write(hostAliasEntries(pod.Spec.HostAliases))
		return b.Bytes()
	}
	short, domain := PodHostname(pod, clusterDomain)
	b.WriteString("# Kubernetes-managed hosts file.\n")
	b.WriteString("127.0.0.1\tlocalhost\n")
	b.WriteString("::1\tlocalhost ip6-localhost ip6-loopback\n")
	b.WriteString("fe00::0\tip6-localnet\n")
	b.WriteString("fe00::0\tip6-mcastprefix\n")
	b.WriteString("fe00::1\tip6-allnodes\n")
	b.WriteString("fe00::2\tip6-allrouters\n")
	for _, ip := range podIPs {
		if domain != "" {
			fmt.Fprintf(&b, "%s\t%s.%s\t%s\n", ip, short, domain, short)
		} else {
			fmt.Fprintf(&b, "%s\t%s\n", ip, short)
		}
	}
	b.Write(hostAliasEntries(pod.Spec.HostAliases))
	return b.Bytes()
}

func hostAliasEntries(aliases []corev1.HostAlias) []byte {
	if len(aliases) == 0 {
		return nil
	}
	var b bytes.Buffer
	b.WriteString("\n# Entries added by HostAliases.\n")
	for _, a := range aliases {
		fmt.Fprintf(&b, "%s\t%s\n", a.IP, strings.Join(a.Hostnames, "\t"))
	}
	return b.Bytes()
}

// DNSConfig is the content of a resolv.conf.
type DNSConfig struct {
	Nameservers []string
	Searches    []string
	Options     []string
}

// DNSSettings are the node-level inputs to a pod's DNS configuration.
type DNSSettings struct {
	ClusterDNS    []string // the cluster DNS service IPs
	ClusterDomain string   // e.g. "cluster.local"
	// HostResolvConf is the node's resolv.conf (the --resolv-conf file); nil
	// means none, and then "Default" pods resolve through 127.0.0.1.
	HostResolvConf []byte
}

// PodDNS computes a pod's DNS configuration per dnsPolicy as upstream:
// ClusterFirst (or ClusterFirstWithHostNet on the host network) uses the
// cluster DNS with search "<ns>.svc.<domain> svc.<domain> <domain>" plus
// the host's searches and ndots:5, falling back to Default when no
// cluster DNS is configured; Default uses the host's; None starts empty.
// spec.dnsConfig is merged on top; the result is trimmed to the limits.
func PodDNS(pod *corev1.Pod, s DNSSettings) DNSConfig {
	host := hostDNS(s.HostResolvConf)
	var cfg DNSConfig
	switch podDNSType(pod) {
	case corev1.DNSNone:
	case corev1.DNSClusterFirst:
		if len(s.ClusterDNS) > 0 {
			cfg.Nameservers = append([]string(nil), s.ClusterDNS...)
			cfg.Searches = host.Searches
			if s.ClusterDomain != "" {
				cfg.Searches = omitDuplicates(append([]string{
					pod.Namespace + ".svc." + s.ClusterDomain,
					"svc." + s.ClusterDomain,
					s.ClusterDomain,
				}, host.Searches...))
			}
			cfg.Options = []string{"ndots:5"}
			break
		}
		cfg = host
	default:
		cfg = host
	}
	if dc := pod.Spec.DNSConfig; dc != nil {
		cfg.Nameservers = omitDuplicates(append(cfg.Nameservers, dc.Nameservers...))
		cfg.Searches = omitDuplicates(append(cfg.Searches, dc.Searches...))
		cfg.Options = mergeDNSOptions(cfg.Options, dc.Options)
	}
	return fitDNSLimits(cfg)
}

// podDNSType reduces the policy to None, ClusterFirst or Default.
func podDNSType(pod *corev1.Pod) corev1.DNSPolicy {
	switch pod.Spec.DNSPolicy {
	case corev1.DNSNone:
		return corev1.DNSNone
	case corev1.DNSClusterFirstWithHostNet:
		return corev1.DNSClusterFirst
	case corev1.DNSDefault:
		return corev1.DNSDefault
	}
	// ClusterFirst, or unset (defaulted to ClusterFirst by the API server).
	if pod.Spec.HostNetwork {
		return corev1.DNSDefault
	}
	return corev1.DNSClusterFirst
}

// hostDNS parses the node's resolv.conf; nil content gives the kubelet's
// stand-in for "no resolv.conf": nameserver 127.0.0.1, search ".".
func hostDNS(content []byte) DNSConfig {
	if content == nil {
		return DNSConfig{Nameservers: []string{"127.0.0.1"}, Searches: []string{"."}}
	}
	return ParseResolvConf(content)
}

// ParseResolvConf reads nameserver, search and options lines (the last
// search line wins; trailing dots of search domains are dropped).
func ParseResolvConf(content []byte) DNSConfig {
	var cfg DNSConfig
	for _, line := range strings.Split(string(content), "\n") {
		if i := strings.IndexAny(line, "#;"); i >= 0 {
			line = line[:i]
		}
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		switch fields[0] {
		case "nameserver":
			cfg.Nameservers = append(cfg.Nameservers, fields[1])
		case "search":
			cfg.Searches = nil
			for _, s := range fields[1:] {
				if s != "." {
					s = strings.TrimSuffix(s, ".")
				}
				cfg.Searches = append(cfg.Searches, s)
			}
		case "options":
			cfg.Options = mergeDNSOptions(cfg.Options, optionsFromStrings(fields[1:]))
		}
	}
	cfg.Searches = omitDuplicates(cfg.Searches)
	return cfg
}

func optionsFromStrings(opts []string) []corev1.PodDNSConfigOption {
	out := make([]corev1.PodDNSConfigOption, 0, len(opts))
	for _, o := range opts {
		name, value, ok := strings.Cut(o, ":")
		opt := corev1.PodDNSConfigOption{Name: name}
		if ok {
			opt.Value = &value
		}
		out = append(out, opt)
	}
	return out
}

// mergeDNSOptions applies extra over existing (same name: replaced in
// place), keeping first-seen order.
func mergeDNSOptions(existing []string, extra []corev1.PodDNSConfigOption) []string {
	var names []string
	values := map[string]string{}
	set := func(name, value string) {
		if _, ok := values[name]; !ok {
			names = append(names, name)
		}
		values[name] = value
	}
	for _, o := range existing {
		name, value, _ := strings.Cut(o, ":")
		set(name, value)
	}
	for _, o := range extra {
		value := ""
		if o.Value != nil {
			value = *o.Value
		}
		set(o.Name, value)
	}
	var out []string
	for _, n := range names {
		if values[n] != "" {
			out = append(out, n+":"+values[n])
		} else {
			out = append(out, n)
		}
	}
	return out
}

func omitDuplicates(in []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// fitDNSLimits keeps at most 3 nameservers and 32 search domains of at
// most 2048 characters in all.
func fitDNSLimits(cfg DNSConfig) DNSConfig {
	if len(cfg.Nameservers) > maxDNSNameservers {
		cfg.Nameservers = cfg.Nameservers[:maxDNSNameservers]
	}
	if len(cfg.Searches) > maxDNSSearchPaths {
		cfg.Searches = cfg.Searches[:maxDNSSearchPaths]
	}
	for len(cfg.Searches) > 0 && len(strings.Join(cfg.Searches, " ")) > maxDNSSearchListChars {
		cfg.Searches = cfg.Searches[:len(cfg.Searches)-1]
	}
	return cfg
}

// ResolvConf renders a DNSConfig as containerd writes it.
func ResolvConf(cfg DNSConfig) []byte {
	var b strings.Builder
	if len(cfg.Searches) > 0 {
		fmt.Fprintf(&b, "search %s\n", strings.Join(cfg.Searches, " "))
	}
	for _, ns := range cfg.Nameservers {
		fmt.Fprintf(&b, "nameserver %s\n", ns)
	}
	if len(cfg.Options) > 0 {
		fmt.Fprintf(&b, "options %s\n", strings.Join(cfg.Options, " "))
	}
	return []byte(b.String())
}
