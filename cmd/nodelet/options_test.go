package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodelet/nodelet/eviction"
	"github.com/nodelet/nodelet/nodeapi"
)

const header = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubelet.yaml")
	if err := os.WriteFile(path, []byte(header+body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// parse runs parseOptions and finish as run does.
func parse(t *testing.T, args ...string) (*options, error) {
	t.Helper()
	o, err := parseOptions(append([]string{"--kubeconfig", "/kubeconfig"}, args...))
	if err != nil {
		return nil, err
	}
	_, err = o.finish()
	return o, err
}

func mustParse(t *testing.T, args ...string) *options {
	t.Helper()
	o, err := parse(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func TestConfigFileMapsEveryField(t *testing.T) {
	resolv := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(resolv, []byte("nameserver 1.1.1.1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	o := mustParse(t, "--config", writeConfig(t, `maxPods: 50
cgroupDriver: systemd
cgroupRoot: /nodelet
clusterDNS: [10.96.0.10]
clusterDomain: example.local
systemReserved: {cpu: 500m}
kubeReserved: {memory: 128Mi}
podCIDR: 10.88.0.0/24
serializeImagePulls: false
maxParallelImagePulls: 3
address: 10.0.0.1
port: 10260
tlsCertFile: /tls.crt
tlsPrivateKeyFile: /tls.key
authentication: {x509: {clientCAFile: /ca.crt}}
healthzPort: 10300
healthzBindAddress: 0.0.0.0
containerRuntimeEndpoint: unix:///run/k3s/containerd.sock
registerWithTaints: [{key: dedicated, value: edge, effect: NoSchedule}]
resolvConf: `+resolv+`
kubeAPIQPS: 20
kubeAPIBurst: 40
`))
	c := o.cfg
	got := []any{c.MaxPods, c.CgroupDriver, c.CgroupRoot, c.ClusterDNS, c.ClusterDomain,
		c.SystemReserved.Cpu().String(), c.KubeReserved.Memory().String(), c.PodCIDR, c.MaxParallelImagePulls,
		c.Address, c.Port, c.TLSCertFile, c.TLSKeyFile, c.ClientCAFile, c.HealthzPort, c.HealthzBindAddress,
		c.ContainerdAddress, c.RegisterWithTaints, c.ResolvConf, o.apiQPS, o.apiBurst}
	want := []any{50, "systemd", "/nodelet", []string{"10.96.0.10"}, "example.local",
		"500m", "128Mi", "10.88.0.0/24", 3,
		"10.0.0.1", 10260, "/tls.crt", "/tls.key", "/ca.crt", 10300, "0.0.0.0",
		"/run/k3s/containerd.sock", []corev1.Taint{{Key: "dedicated", Value: "edge", Effect: corev1.TaintEffectNoSchedule}}, resolv, 20.0, 40}
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("setting %d = %#v, want %#v", i, got[i], want[i])
		}
	}
}

// TestAccessControl: the HTTPS API's authentication and authorization
// settings default to those of upstream's configuration file, and come
// from the file's authentication and authorization or the flags.
func TestAccessControl(t *testing.T) {
	if got := mustParse(t).cfg.Access; got != nodeapi.DefaultAccessConfig() {
		t.Errorf("defaults: %+v", got)
	}
	file := writeConfig(t, `authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false, cacheTTL: 1m}
authorization:
  mode: AlwaysAllow
  webhook: {cacheAuthorizedTTL: 10m, cacheUnauthorizedTTL: 5s}
`)
	want := nodeapi.AccessConfig{Anonymous: true, WebhookCacheTTL: time.Minute, AuthorizationMode: nodeapi.AuthorizationModeAlwaysAllow,
		AuthorizedTTL: 10 * time.Minute, UnauthorizedTTL: 5 * time.Second}
	if got := mustParse(t, "--config", file).cfg.Access; got != want {
		t.Errorf("from the file: %+v, want %+v", got, want)
	}
	want.Webhook, want.AuthorizationMode, want.Anonymous = true, nodeapi.AuthorizationModeWebhook, false
	if got := mustParse(t, "--config", file, "--authentication-token-webhook", "--authorization-mode", "Webhook", "--anonymous-auth=false").cfg.Access; got != want {
		t.Errorf("flags over the file: %+v, want %+v", got, want)
	}
}

func TestPrecedence(t *testing.T) {
	file := writeConfig(t, "maxPods: 50\nclusterDomain: file.local\nhealthzPort: 0\n")
	o := mustParse(t, "--config", file, "--max-pods", "70")
	if o.cfg.MaxPods != 70 {
		t.Errorf("--max-pods 70 over the file's 50: MaxPods = %d", o.cfg.MaxPods)
	}
	if o.cfg.ClusterDomain != "file.local" {
		t.Errorf("the file over the default: ClusterDomain = %q", o.cfg.ClusterDomain)
	}
	if o.cfg.HealthzPort != -1 {
		t.Errorf("the file's healthzPort 0 disables: HealthzPort = %d", o.cfg.HealthzPort)
	}
	// Flags win wherever they are on the command line, by either name.
	o = mustParse(t, "--hostname-override", "flag-node", "--config", writeConfig(t, "containerRuntimeEndpoint: /file.sock\n"),
		"--containerd-address", "/flag.sock")
	if o.cfg.ContainerdAddress != "/flag.sock" || o.cfg.NodeName != "flag-node" {
		t.Errorf("ContainerdAddress, NodeName = %q, %q", o.cfg.ContainerdAddress, o.cfg.NodeName)
	}
	o = mustParse(t)
	if o.cfg.MaxPods != 110 || o.cfg.ClusterDomain != "cluster.local" || o.cfg.HealthzPort != 10248 || o.cfg.HealthzBindAddress != "127.0.0.1" {
		t.Errorf("defaults: %+v", o.cfg)
	}
}

func TestAliases(t *testing.T) {
	o := mustParse(t, "--container-runtime-endpoint", "unix:///run/k3s.sock", "--hostname-override", "n7",
		"--pod-infra-container-image", "example.com/pause:1")
	if o.cfg.ContainerdAddress != "/run/k3s.sock" || o.cfg.NodeName != "n7" || o.cfg.PodInfraImage != "example.com/pause:1" {
		t.Errorf("aliases: address %q, node %q, pause %q", o.cfg.ContainerdAddress, o.cfg.NodeName, o.cfg.PodInfraImage)
	}
	o = mustParse(t, "--containerd-address", "unix:///old.sock", "--node-name", "n8", "--pod-infra-image", "p:2")
	if o.cfg.ContainerdAddress != "/old.sock" || o.cfg.NodeName != "n8" || o.cfg.PodInfraImage != "p:2" {
		t.Errorf("the nodelet's names: address %q, node %q, pause %q", o.cfg.ContainerdAddress, o.cfg.NodeName, o.cfg.PodInfraImage)
	}
}

func TestNewFlags(t *testing.T) {
	o := mustParse(t, "--max-pods", "30", "--node-labels", "tier=edge,example.com/zone=a",
		"--register-with-taints", "a=b:NoSchedule,c:NoExecute", "--healthz-port", "0", "--healthz-bind-address", "::1")
	wantTaints := []corev1.Taint{{Key: "a", Value: "b", Effect: "NoSchedule"}, {Key: "c", Effect: "NoExecute"}}
	if o.cfg.MaxPods != 30 || !reflect.DeepEqual(o.cfg.NodeLabels, map[string]string{"tier": "edge", "example.com/zone": "a"}) ||
		!reflect.DeepEqual(o.cfg.RegisterWithTaints, wantTaints) || o.cfg.HealthzPort != -1 || o.cfg.HealthzBindAddress != "::1" {
		t.Errorf("cfg = %+v", o.cfg)
	}
	o = mustParse(t, "--runtime-handlers", "runc=/usr/sbin/runc, crun=/usr/bin/crun", "--runtime-binary", "/usr/sbin/runc")
	if want := map[string]string{"runc": "/usr/sbin/runc", "crun": "/usr/bin/crun"}; !reflect.DeepEqual(o.cfg.RuntimeHandlers, want) {
		t.Errorf("runtime handlers %v, want %v", o.cfg.RuntimeHandlers, want)
	}
	if o.cfg.OOMScoreAdj == nil || *o.cfg.OOMScoreAdj != -999 {
		t.Errorf("--oom-score-adj defaults to %v, want -999 (upstream's)", o.cfg.OOMScoreAdj)
	}
	if o.cfg.PodPidsLimit != -1 {
		t.Errorf("--pod-max-pids defaults to %d, want -1 (upstream's)", o.cfg.PodPidsLimit)
	}
	if o = mustParse(t, "--config", writeConfig(t, "podPidsLimit: 1024\n")); o.cfg.PodPidsLimit != 1024 {
		t.Errorf("podPidsLimit 1024 in the file: PodPidsLimit = %d", o.cfg.PodPidsLimit)
	}
	o = mustParse(t, "--system-reserved", "cpu=1,memory=1Gi", "--serialize-image-pulls=false")
	if !o.cfg.SystemReserved.Memory().Equal(resource.MustParse("1Gi")) || o.cfg.MaxParallelImagePulls != -1 {
		t.Errorf("reserved %v, pulls %d", o.cfg.SystemReserved, o.cfg.MaxParallelImagePulls)
	}
}

func TestBadValuesNameTheFlagOrField(t *testing.T) {
	for _, tc := range []struct {
		args []string
		file string // config file body, if any
		want string
	}{
		{args: []string{"--max-pods", "0"}, want: "--max-pods"},
		{args: []string{"--pod-max-pids", "-2"}, want: "--pod-max-pids"},
		{args: []string{"--oom-score-adj", "-1001"}, want: "--oom-score-adj"},
		{file: "podPidsLimit: -5\n", want: "field podPidsLimit"},
		{args: []string{"--max-pods", "x"}, want: "-max-pods"},
		{args: []string{"--healthz-port", "70000"}, want: "--healthz-port"},
		{args: []string{"--healthz-bind-address", "localhost"}, want: "--healthz-bind-address"},
		{args: []string{"--address", "nowhere"}, want: "--address"},
		{args: []string{"--port", "65536"}, want: "--port"},
		{args: []string{"--container-runtime-endpoint", "tcp://1.2.3.4:1"}, want: "--containerd-address"},
		{args: []string{"--node-labels", "novalue"}, want: "--node-labels"},
		{args: []string{"--node-labels", "k=bad value"}, want: "--node-labels"},
		{args: []string{"--register-with-taints", "k=v"}, want: "--register-with-taints"},
		{args: []string{"--runtime-handlers", "crun"}, want: "--runtime-handlers"},
		{args: []string{"--runtime-handlers", "Crun=/usr/bin/crun"}, want: "--runtime-handlers"},
		{args: []string{"--runtime-handlers", "crun=a,crun=b"}, want: "--runtime-handlers"},
		{args: []string{"--runtime-binary", "/a/runc", "--runtime-handlers", "runc=/b/runc"}, want: "--runtime-handlers"},
		{args: []string{"--register-with-taints", "k=v:Sometimes"}, want: "--register-with-taints"},
		{args: []string{"--cgroup-driver", "cgroupv3"}, want: "--cgroup-driver"},
		{args: []string{"--cluster-dns", "10.0.0.1,dns"}, want: "--cluster-dns"},
		{args: []string{"--pod-cidr", "10.0.0.0"}, want: "--pod-cidr"},
		{args: []string{"--resolv-conf", "/nonexistent/resolv.conf"}, want: "--resolv-conf"},
		{args: []string{"--system-reserved", "gpu=1"}, want: "--system-reserved"},
		{args: []string{"--allowed-unsafe-sysctls", "vm.swappiness"}, want: "--allowed-unsafe-sysctls"},
		{file: "allowedUnsafeSysctls: [\"net.core.*x\"]\n", want: "field allowedUnsafeSysctls"},
		{args: []string{"--max-parallel-image-pulls", "3"}, want: "--max-parallel-image-pulls"},
		{args: []string{"--kube-api-qps", "0"}, want: "--kube-api-qps"},
		{args: []string{"--log-level", "loud"}, want: "--log-level"},
		{file: "maxPods: -1\n", want: "field maxPods"},
		{file: "healthzPort: 70000\n", want: "field healthzPort"},
		{file: "registerWithTaints: [{key: k, effect: Maybe}]\n", want: "field registerWithTaints"},
		{file: "containerRuntimeEndpoint: npipe://x\n", want: "field containerRuntimeEndpoint"},
		{file: "kubeReserved: {cpu: lots}\n", want: "field kubeReserved"},
		{file: "maxPod: 3\n", want: `unknown field "maxPod"`},
		{args: []string{"--eviction-hard", "memory.available>100Mi"}, want: "--eviction-hard"},
		{args: []string{"--eviction-hard", "cpu.available<1"}, want: "--eviction-hard"},
		{args: []string{"--eviction-hard", "nodefs.available<120%"}, want: "--eviction-hard"},
		{args: []string{"--eviction-hard", "memory.available<-1Mi"}, want: "--eviction-hard"},
		{args: []string{"--eviction-soft", "memory.available<1Gi"}, want: "--eviction-soft: grace period must be specified"},
		{args: []string{"--eviction-soft-grace-period", "memory.available=soon"}, want: "--eviction-soft-grace-period"},
		{args: []string{"--eviction-minimum-reclaim", "memory.available=lots"}, want: "--eviction-minimum-reclaim"},
		{args: []string{"--eviction-max-pod-grace-period", "-1"}, want: "--eviction-max-pod-grace-period"},
		{args: []string{"--eviction-pressure-transition-period", "-1s"}, want: "--eviction-pressure-transition-period"},
		{args: []string{"--container-log-max-size", "big"}, want: "--container-log-max-size"},
		{args: []string{"--container-log-max-size", "0"}, want: "--container-log-max-size"},
		{args: []string{"--container-log-max-files", "1"}, want: "--container-log-max-files"},
		{file: "evictionHard: {memory.available: lots}\n", want: "field evictionHard"},
		{file: "evictionSoft: {memory.available: 1Gi}\n", want: "field evictionSoft"},
		{file: "containerLogMaxFiles: 1\n", want: "field containerLogMaxFiles"},
		{args: []string{"--authorization-mode", "RBAC"}, want: "--authorization-mode"},
		{args: []string{"--authorization-webhook-cache-authorized-ttl", "-1s"}, want: "--authorization-webhook-cache-authorized-ttl"},
		{file: "authorization: {mode: Node}\n", want: "field authorization.mode"},
		{file: "authentication: {webhook: {cacheTTL: -1m}}\n", want: "field authentication.webhook.cacheTTL"},
	} {
		args := tc.args
		if tc.file != "" {
			args = []string{"--config", writeConfig(t, tc.file)}
		}
		_, err := parse(t, args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v %q: error %v, want one naming %s", tc.args, tc.file, err, tc.want)
		}
	}
}

func TestEvictionFlags(t *testing.T) {
	o := mustParse(t)
	if got := o.cfg.EvictionThresholds; !reflect.DeepEqual(got, eviction.DefaultThresholds()) {
		t.Errorf("default thresholds = %+v", got)
	}
	if o.cfg.EvictionPressureTransitionPeriod != 5*time.Minute || o.cfg.EvictionMaxPodGracePeriod != 0 ||
		o.cfg.ContainerLogMaxSize != 10<<20 || o.cfg.ContainerLogMaxFiles != 5 {
		t.Errorf("defaults: transition %s, max grace %d, log size %d, files %d", o.cfg.EvictionPressureTransitionPeriod,
			o.cfg.EvictionMaxPodGracePeriod, o.cfg.ContainerLogMaxSize, o.cfg.ContainerLogMaxFiles)
	}
	// The file sets soft thresholds; the command line's --eviction-hard
	// wins over the file's.
	file := writeConfig(t, `evictionHard: {memory.available: 1Gi}
evictionSoft: {memory.available: 2Gi}
evictionSoftGracePeriod: {memory.available: 1m}
evictionMinimumReclaim: {memory.available: 100Mi}
evictionPressureTransitionPeriod: 30s
evictionMaxPodGracePeriod: 15
containerLogMaxSize: 1Mi
containerLogMaxFiles: 2
`)
	o = mustParse(t, "--config", file, "--eviction-hard", "memory.available<500Mi,pid.available<5%")
	reclaim := eviction.Value{Quantity: 100 << 20}
	want := []eviction.Threshold{
		{Signal: eviction.MemoryAvailable, Value: eviction.Value{Quantity: 500 << 20}, MinReclaim: &reclaim},
		{Signal: eviction.PIDAvailable, Value: eviction.Value{Percentage: 0.05}},
		{Signal: eviction.MemoryAvailable, Value: eviction.Value{Quantity: 2 << 30}, GracePeriod: time.Minute, MinReclaim: &reclaim},
	}
	if got := o.cfg.EvictionThresholds; !reflect.DeepEqual(got, want) {
		t.Errorf("thresholds =\n%+v\nwant\n%+v", got, want)
	}
	if o.cfg.EvictionPressureTransitionPeriod != 30*time.Second || o.cfg.EvictionMaxPodGracePeriod != 15 ||
		o.cfg.ContainerLogMaxSize != 1<<20 || o.cfg.ContainerLogMaxFiles != 2 {
		t.Errorf("from the file: %+v", o.cfg)
	}
	if len(o.ignored) != 0 {
		t.Errorf("ignored fields %v", o.ignored)
	}
	if o = mustParse(t, "--eviction-hard", ""); o.cfg.EvictionThresholds == nil || len(o.cfg.EvictionThresholds) != 0 {
		t.Errorf("--eviction-hard \"\": thresholds %+v", o.cfg.EvictionThresholds)
	}
}

func TestKubeconfigRequired(t *testing.T) {
	o, err := parseOptions(nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.finish(); err == nil || !strings.Contains(err.Error(), "--kubeconfig") {
		t.Errorf("finish without --kubeconfig: %v", err)
	}
}

// TestCredentials: the certificates rotate by default when the node
// bootstraps (the serving one only without --tls-cert-file), as kubeadm
// configures its nodes; the flags and the file's fields say otherwise.
func TestCredentials(t *testing.T) {
	for _, tc := range []struct {
		name               string
		args               []string
		rotate, serverTLS  bool
		bootstrap, certDir string
		wantQPS            float32
	}{
		{name: "a prepared kubeconfig", wantQPS: 50},
		{name: "bootstrapping", args: []string{"--bootstrap-kubeconfig", "/boot"}, rotate: true, serverTLS: true, bootstrap: "/boot", wantQPS: 50},
		{name: "bootstrapping with a serving certificate",
			args:   []string{"--bootstrap-kubeconfig", "/boot", "--tls-cert-file", "/tls.crt", "--tls-private-key-file", "/tls.key"},
			rotate: true, bootstrap: "/boot", wantQPS: 50},
		{name: "bootstrapping without rotation", args: []string{"--bootstrap-kubeconfig", "/boot", "--rotate-certificates=false", "--rotate-server-certificates=false"},
			bootstrap: "/boot", wantQPS: 50},
		{name: "rotation asked for", args: []string{"--rotate-certificates", "--rotate-server-certificates", "--cert-dir", "/pki", "--kube-api-qps", "7"},
			rotate: true, serverTLS: true, certDir: "/pki", wantQPS: 7},
		{name: "from the file", args: []string{"--config", writeConfig(t, "rotateCertificates: true\nserverTLSBootstrap: true\n")},
			rotate: true, serverTLS: true, wantQPS: 50},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := mustParse(t, tc.args...).cfg.Credentials
			if c.Kubeconfig != "/kubeconfig" || c.BootstrapKubeconfig != tc.bootstrap || c.CertDir != tc.certDir ||
				c.RotateCertificates != tc.rotate || c.ServerTLSBootstrap != tc.serverTLS || c.KubeAPIQPS != tc.wantQPS || c.KubeAPIBurst != 100 {
				t.Errorf("credentials %+v", c)
			}
		})
	}
	if _, err := parse(t, "--rotate-certificates=maybe"); err == nil {
		t.Error("--rotate-certificates=maybe accepted")
	}
}
