package runtime

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const hostResolv = `# host
nameserver 192.0.2.53
nameserver 192.0.2.54
search corp.example. example.com
options timeout:2 rotate
`

func TestPodDNS(t *testing.T) {
	settings := DNSSettings{ClusterDNS: []string{"10.96.0.10"}, ClusterDomain: "cluster.local", HostResolvConf: []byte(hostResolv)}
	clusterSearch := []string{"prod.svc.cluster.local", "svc.cluster.local", "cluster.local", "corp.example", "example.com"}
	host := DNSConfig{Nameservers: []string{"192.0.2.53", "192.0.2.54"}, Searches: []string{"corp.example", "example.com"}, Options: []string{"timeout:2", "rotate"}}
	tests := []struct {
		name     string
		policy   corev1.DNSPolicy
		hostNet  bool
		dns      *corev1.PodDNSConfig
		settings DNSSettings
		want     DNSConfig
	}{
		{name: "ClusterFirst", policy: corev1.DNSClusterFirst, settings: settings,
			want: DNSConfig{Nameservers: []string{"10.96.0.10"}, Searches: clusterSearch, Options: []string{"ndots:5"}}},
		{name: "unset is ClusterFirst", policy: "", settings: settings,
			want: DNSConfig{Nameservers: []string{"10.96.0.10"}, Searches: clusterSearch, Options: []string{"ndots:5"}}},
		{name: "ClusterFirst on host network is Default", policy: corev1.DNSClusterFirst, hostNet: true, settings: settings, want: host},
		{name: "ClusterFirstWithHostNet", policy: corev1.DNSClusterFirstWithHostNet, hostNet: true, settings: settings,
			want: DNSConfig{Nameservers: []string{"10.96.0.10"}, Searches: clusterSearch, Options: []string{"ndots:5"}}},
		{name: "ClusterFirst without cluster DNS falls back", policy: corev1.DNSClusterFirst,
			settings: DNSSettings{ClusterDomain: "cluster.local", HostResolvConf: []byte(hostResolv)}, want: host},
		{name: "ClusterFirst without domain", policy: corev1.DNSClusterFirst,
			settings: DNSSettings{ClusterDNS: []string{"10.96.0.10"}, HostResolvConf: []byte(hostResolv)},
			want:     DNSConfig{Nameservers: []string{"10.96.0.10"}, Searches: []string{"corp.example", "example.com"}, Options: []string{"ndots:5"}}},
		{name: "Default", policy: corev1.DNSDefault, settings: settings, want: host},
		{name: "Default without host resolv.conf", policy: corev1.DNSDefault, settings: DNSSettings{},
			want: DNSConfig{Nameservers: []string{"127.0.0.1"}, Searches: []string{"."}}},
		{name: "None empty", policy: corev1.DNSNone, settings: settings, want: DNSConfig{}},
		{name: "None with dnsConfig", policy: corev1.DNSNone, settings: settings,
			dns:  &corev1.PodDNSConfig{Nameservers: []string{"1.1.1.1"}, Searches: []string{"a.example"}, Options: []corev1.PodDNSConfigOption{{Name: "ndots", Value: ptr("2")}, {Name: "edns0"}}},
			want: DNSConfig{Nameservers: []string{"1.1.1.1"}, Searches: []string{"a.example"}, Options: []string{"ndots:2", "edns0"}}},
		{name: "ClusterFirst merges dnsConfig", policy: corev1.DNSClusterFirst, settings: settings,
			dns: &corev1.PodDNSConfig{Nameservers: []string{"10.96.0.10", "1.1.1.1"}, Searches: []string{"cluster.local", "x.example"},
				Options: []corev1.PodDNSConfigOption{{Name: "ndots", Value: ptr("1")}, {Name: "single-request"}}},
			want: DNSConfig{Nameservers: []string{"10.96.0.10", "1.1.1.1"}, Searches: append(append([]string{}, clusterSearch...), "x.example"),
				Options: []string{"ndots:1", "single-request"}}},
		{name: "limits", policy: corev1.DNSNone, settings: settings,
			dns:  &corev1.PodDNSConfig{Nameservers: []string{"1.1.1.1", "1.1.1.2", "1.1.1.3", "1.1.1.4"}},
			want: DNSConfig{Nameservers: []string{"1.1.1.1", "1.1.1.2", "1.1.1.3"}}},
	}
	for _, tt := range tests {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "prod"},
			Spec: corev1.PodSpec{DNSPolicy: tt.policy, HostNetwork: tt.hostNet, DNSConfig: tt.dns}}
		if got := PodDNS(pod, tt.settings); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", tt.name, got, tt.want)
		}
	}
}

func TestDNSSearchLimits(t *testing.T) {
	var searches []string
	for i := 0; i < 40; i++ {
		searches = append(searches, strings.Repeat("d", 60)+string(rune('a'+i%26))+strings.Repeat("x", i))
	}
	got := fitDNSLimits(DNSConfig{Searches: searches})
	if len(got.Searches) > maxDNSSearchPaths || len(strings.Join(got.Searches, " ")) > maxDNSSearchListChars {
		t.Fatalf("searches not trimmed: %d entries, %d chars", len(got.Searches), len(strings.Join(got.Searches, " ")))
	}
}

func TestResolvConf(t *testing.T) {
	got := string(ResolvConf(DNSConfig{Nameservers: []string{"10.96.0.10", "1.1.1.1"}, Searches: []string{"a", "b"}, Options: []string{"ndots:5"}}))
	want := "search a b\nnameserver 10.96.0.10\nnameserver 1.1.1.1\noptions ndots:5\n"
	if got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := ResolvConf(DNSConfig{}); len(got) != 0 {
		t.Errorf("empty config gave %q", got)
	}
	// Round trip.
	cfg := DNSConfig{Nameservers: []string{"10.96.0.10"}, Searches: []string{"a", "b"}, Options: []string{"ndots:5", "edns0"}}
	if back := ParseResolvConf(ResolvConf(cfg)); !reflect.DeepEqual(back, cfg) {
		t.Errorf("round trip: %+v", back)
	}
}

func TestHostsFile(t *testing.T) {
	header := "# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\nfe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n"
	aliases := []corev1.HostAlias{{IP: "192.0.2.9", Hostnames: []string{"foo", "bar"}}}
	tests := []struct {
		name   string
		mutate func(*corev1.Pod)
		ips    []string
		want   string
	}{
		{"plain", nil, []string{"10.1.0.5"}, header + "10.1.0.5\tweb.v1\n"},
		{"subdomain, dual stack", func(p *corev1.Pod) { p.Spec.Hostname, p.Spec.Subdomain = "h", "sub" },
			[]string{"10.1.0.5", "fd00::5"}, header + "10.1.0.5\th.sub.prod.svc.cluster.local\th\nfd00::5\th.sub.prod.svc.cluster.local\th\n"},
		{"aliases", func(p *corev1.Pod) { p.Spec.HostAliases = aliases }, nil,
			header + "\n# Entries added by HostAliases.\n192.0.2.9\tfoo\tbar\n"},
		{"host network", func(p *corev1.Pod) { p.Spec.HostNetwork, p.Spec.HostAliases = true, aliases }, []string{"192.0.2.1"},
			"127.0.0.1 localhost\n\n# Entries added by HostAliases.\n192.0.2.9\tfoo\tbar\n"},
	}
	for _, tt := range tests {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web.v1", Namespace: "prod"}}
		if tt.mutate != nil {
			tt.mutate(pod)
		}
		if got := string(HostsFile(pod, tt.ips, "cluster.local", []byte("127.0.0.1 localhost\n"))); got != tt.want {
			t.Errorf("%s:\n got %q\nwant %q", tt.name, got, tt.want)
		}
	}
}

func TestPodHostname(t *testing.T) {
	long := strings.Repeat("a", 62) + "-b"
	tests := []struct {
		name, podName, hostname, subdomain string
		fqdn                               bool
		want, wantDomain                   string
	}{
		{"pod name", "web", "", "", false, "web", ""},
		{"spec hostname", "web", "h", "", false, "h", ""},
		{"truncated", long, "", "", false, strings.Repeat("a", 62), ""},
		{"subdomain", "web", "", "sub", false, "web", "sub.prod.svc.cluster.local"},
		{"fqdn", "web", "", "sub", true, "web.sub.prod.svc.cluster.local", "sub.prod.svc.cluster.local"},
		{"fqdn without subdomain", "web", "", "", true, "web", ""},
	}
	for _, tt := range tests {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: tt.podName, Namespace: "prod"},
			Spec: corev1.PodSpec{Hostname: tt.hostname, Subdomain: tt.subdomain, SetHostnameAsFQDN: &tt.fqdn}}
		_, domain := PodHostname(pod, "cluster.local")
		got, err := SandboxHostname(pod, "cluster.local")
		if err != nil || got != tt.want || domain != tt.wantDomain {
			t.Errorf("%s: got %q %q %v, want %q %q", tt.name, got, domain, err, tt.want, tt.wantDomain)
		}
	}
}

func TestContainerResources(t *testing.T) {
	q := resource.MustParse
	tests := []struct {
		name               string
		req, lim           corev1.ResourceList
		shares             uint64
		quota, period, mem int64 // 0: unset
	}{
		{"none", nil, nil, 2, 0, 0, 0},
		{"request only", corev1.ResourceList{"cpu": q("100m")}, nil, 102, 0, 0, 0},
		{"limit only", nil, corev1.ResourceList{"cpu": q("2"), "memory": q("1Gi")}, 2048, 200000, 100000, 1 << 30},
		{"both", corev1.ResourceList{"cpu": q("500m")}, corev1.ResourceList{"cpu": q("1")}, 512, 100000, 100000, 0},
	}
	for _, tt := range tests {
		pod := basePod()
		pod.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: tt.req, Limits: tt.lim}
		r := ContainerResources(pod, &pod.Spec.Containers[0])
		var quota, period, mem int64
		if r.CPU.Quota != nil {
			quota, period = *r.CPU.Quota, int64(*r.CPU.Period)
		}
		if r.Memory != nil {
			mem = *r.Memory.Limit
		}
		if *r.CPU.Shares != tt.shares || quota != tt.quota || period != tt.period || mem != tt.mem {
			t.Errorf("%s: shares %d quota %d period %d mem %d", tt.name, *r.CPU.Shares, quota, period, mem)
		}
	}
}

func TestOOMScoreAdj(t *testing.T) {
	q := resource.MustParse
	res := func(req, lim corev1.ResourceList) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{Requests: req, Limits: lim}
	}
	tests := []struct {
		name string
		r    corev1.ResourceRequirements
		want int
	}{
		{"besteffort", res(nil, nil), 1000},
		{"guaranteed", res(corev1.ResourceList{"cpu": q("1"), "memory": q("1Gi")}, corev1.ResourceList{"cpu": q("1"), "memory": q("1Gi")}), -997},
		{"burstable quarter", res(corev1.ResourceList{"memory": q("1Gi")}, nil), 750},
		{"burstable tiny", res(corev1.ResourceList{"cpu": q("1m")}, nil), 999},
		{"burstable huge", res(corev1.ResourceList{"memory": q("4Gi")}, nil), 3},
	}
	for _, tt := range tests {
		pod := basePod()
		pod.Spec.Containers[0].Resources = tt.r
		if got := ContainerOOMScoreAdj(pod, &pod.Spec.Containers[0], 4<<30); got != tt.want {
			t.Errorf("%s: %d, want %d", tt.name, got, tt.want)
		}
	}
	clamps := []struct{ v, floor, want int }{{-998, -1000, -998}, {-998, 0, 0}, {-998, -2000, -998}, {1200, 0, 1000}, {500, 600, 600}}
	for _, c := range clamps {
		if got := clampOOMScoreAdj(c.v, c.floor); got != c.want {
			t.Errorf("clamp(%d, %d) = %d, want %d", c.v, c.floor, got, c.want)
		}
	}
}
