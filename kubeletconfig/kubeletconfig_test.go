package kubeletconfig

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

const header = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"

// every mapped field, as an operator's file would set it.
const full = header + `maxPods: 50
podPidsLimit: 4096
oomScoreAdj: -900
seccompDefault: true
cgroupDriver: systemd
cgroupRoot: /nodelet
clusterDNS: [10.96.0.10, 10.96.0.11]
clusterDomain: example.local
systemReserved: {memory: 256Mi, cpu: 500m}
kubeReserved: {memory: 128Mi}
podCIDR: 10.88.0.0/24
serializeImagePulls: false
maxParallelImagePulls: 3
address: 10.0.0.1
port: 10260
tlsCertFile: /etc/nodelet/tls.crt
tlsPrivateKeyFile: /etc/nodelet/tls.key
rotateCertificates: true
serverTLSBootstrap: true
authentication:
  x509:
    clientCAFile: /etc/nodelet/ca.crt
  anonymous: {enabled: true}
  webhook: {enabled: false, cacheTTL: 1m}
authorization:
  mode: AlwaysAllow
  webhook: {cacheAuthorizedTTL: 10m, cacheUnauthorizedTTL: 5s}
healthzPort: 0
healthzBindAddress: 0.0.0.0
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
registerWithTaints:
- {key: dedicated, value: edge, effect: NoSchedule}
- {key: gpu, effect: NoExecute}
resolvConf: /run/systemd/resolve/resolv.conf
kubeAPIQPS: 20
kubeAPIBurst: 40
imageGCHighThresholdPercent: 90
imageGCLowThresholdPercent: 70
imageMinimumGCAge: 5m
volumeStatsAggPeriod: 30s
evictionHard: {memory.available: 200Mi, nodefs.available: 5%}
evictionSoft: {memory.available: 500Mi}
evictionSoftGracePeriod: {memory.available: 1m30s}
evictionMinimumReclaim: {imagefs.available: 2Gi}
evictionPressureTransitionPeriod: 1m
evictionMaxPodGracePeriod: 20
mergeDefaultEvictionSettings: false
containerLogMaxSize: 20Mi
containerLogMaxFiles: 3
allowedUnsafeSysctls: ["kernel.msg*", "net.core.somaxconn"]
`

func TestSettingsMapEveryField(t *testing.T) {
	f, err := Decode([]byte(full))
	if err != nil {
		t.Fatal(err)
	}
	want := []Setting{
		{"maxPods", "max-pods", "50"},
		{"podPidsLimit", "pod-max-pids", "4096"},
		{"seccompDefault", "seccomp-default", "true"},
		{"oomScoreAdj", "oom-score-adj", "-900"},
		{"cgroupDriver", "cgroup-driver", "systemd"},
		{"cgroupRoot", "cgroup-root", "/nodelet"},
		{"clusterDNS", "cluster-dns", "10.96.0.10,10.96.0.11"},
		{"clusterDomain", "cluster-domain", "example.local"},
		{"systemReserved", "system-reserved", "cpu=500m,memory=256Mi"},
		{"kubeReserved", "kube-reserved", "memory=128Mi"},
		{"podCIDR", "pod-cidr", "10.88.0.0/24"},
		{"serializeImagePulls", "serialize-image-pulls", "false"},
		{"maxParallelImagePulls", "max-parallel-image-pulls", "3"},
		{"address", "address", "10.0.0.1"},
		{"port", "port", "10260"},
		{"tlsCertFile", "tls-cert-file", "/etc/nodelet/tls.crt"},
		{"tlsPrivateKeyFile", "tls-private-key-file", "/etc/nodelet/tls.key"},
		{"rotateCertificates", "rotate-certificates", "true"},
		{"serverTLSBootstrap", "rotate-server-certificates", "true"},
		{"authentication.x509.clientCAFile", "client-ca-file", "/etc/nodelet/ca.crt"},
		{"authentication.anonymous.enabled", "anonymous-auth", "true"},
		{"authentication.webhook.enabled", "authentication-token-webhook", "false"},
		{"authentication.webhook.cacheTTL", "authentication-token-webhook-cache-ttl", "1m0s"},
		{"authorization.mode", "authorization-mode", "AlwaysAllow"},
		{"authorization.webhook.cacheAuthorizedTTL", "authorization-webhook-cache-authorized-ttl", "10m0s"},
		{"authorization.webhook.cacheUnauthorizedTTL", "authorization-webhook-cache-unauthorized-ttl", "5s"},
		{"healthzPort", "healthz-port", "0"}, // set to 0: disabled, not left out
		{"healthzBindAddress", "healthz-bind-address", "0.0.0.0"},
		{"containerRuntimeEndpoint", "container-runtime-endpoint", "unix:///run/containerd/containerd.sock"},
		{"registerWithTaints", "register-with-taints", "dedicated=edge:NoSchedule,gpu:NoExecute"},
		{"resolvConf", "resolv-conf", "/run/systemd/resolve/resolv.conf"},
		{"kubeAPIQPS", "kube-api-qps", "20"},
		{"kubeAPIBurst", "kube-api-burst", "40"},
		{"imageGCHighThresholdPercent", "image-gc-high-threshold", "90"},
		{"imageGCLowThresholdPercent", "image-gc-low-threshold", "70"},
		{"imageMinimumGCAge", "minimum-image-ttl-duration", "5m0s"},
		{"volumeStatsAggPeriod", "volume-stats-agg-period", "30s"},
		{"evictionHard", "eviction-hard", "memory.available<200Mi,nodefs.available<5%"},
		{"evictionSoft", "eviction-soft", "memory.available<500Mi"},
		{"evictionSoftGracePeriod", "eviction-soft-grace-period", "memory.available=1m30s"},
		{"evictionMinimumReclaim", "eviction-minimum-reclaim", "imagefs.available=2Gi"},
		{"evictionPressureTransitionPeriod", "eviction-pressure-transition-period", "1m0s"},
		{"evictionMaxPodGracePeriod", "eviction-max-pod-grace-period", "20"},
		{"containerLogMaxSize", "container-log-max-size", "20Mi"},
		{"containerLogMaxFiles", "container-log-max-files", "3"},
		{"allowedUnsafeSysctls", "allowed-unsafe-sysctls", "kernel.msg*,net.core.somaxconn"},
	}
	if got := f.Settings(); !reflect.DeepEqual(got, want) {
		t.Errorf("Settings() =\n%v\nwant\n%v", got, want)
	}
	if len(f.Ignored) != 0 {
		t.Errorf("Ignored = %v, want none", f.Ignored)
	}
	for _, s := range want {
		top, _, _ := strings.Cut(s.Field, ".")
		if !isMapped(top) {
			t.Errorf("field %s is mapped but not in the mapped set", s.Field)
		}
	}
	// mergeDefaultEvictionSettings changes evictionHard's setting and has
	// none of its own.
	tops := map[string]bool{"mergeDefaultEvictionSettings": true}
	for _, s := range want {
		top, _, _ := strings.Cut(s.Field, ".")
		tops[top] = true
	}
	if len(tops) != len(mapped) {
		t.Errorf("%d top-level fields tested, %d mapped", len(tops), len(mapped))
	}
}

func TestUnsetFieldsGiveNoSetting(t *testing.T) {
	f, err := Decode([]byte(header))
	if err != nil {
		t.Fatal(err)
	}
	if s := f.Settings(); len(s) != 0 {
		t.Errorf("Settings() of an empty file = %v", s)
	}
}

func TestUnsupportedFieldsAreIgnored(t *testing.T) {
	f, err := Decode([]byte(header + `featureGates: {SomeGate: true}
memorySwap: {swapBehavior: NoSwap}
staticPodPath: null
authentication:
  x509: {clientCAFile: /ca.crt}
  webhook: {enabled: true}
`))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"featureGates", "memorySwap"}
	if !reflect.DeepEqual(f.Ignored, want) {
		t.Errorf("Ignored = %v, want %v", f.Ignored, want)
	}
}

// Upstream: an evictionHard replaces the defaults, unless
// mergeDefaultEvictionSettings keeps those it does not name.
func TestEvictionHardDefaults(t *testing.T) {
	for name, tc := range map[string]struct{ doc, want string }{
		"replaces": {header + "evictionHard: {memory.available: 1Gi}\n", "memory.available<1Gi"},
		"merged": {header + "evictionHard: {memory.available: 1Gi}\nmergeDefaultEvictionSettings: true\n",
			"imagefs.available<15%,memory.available<1Gi,nodefs.available<10%,nodefs.inodesFree<5%,pid.available<10%"},
	} {
		t.Run(name, func(t *testing.T) {
			f, err := Decode([]byte(tc.doc))
			if err != nil {
				t.Fatal(err)
			}
			got := f.Settings()
			if len(got) != 1 || got[0].Flag != "eviction-hard" || got[0].Value != tc.want {
				t.Errorf("Settings() = %v, want eviction-hard %s", got, tc.want)
			}
		})
	}
}

func TestStrictDecoding(t *testing.T) {
	for name, tc := range map[string]struct{ doc, want string }{
		"unknown field":   {header + "maxPod: 3\n", `unknown field "maxPod"`},
		"nested unknown":  {header + "authentication: {x509: {clientCA: /ca}}\n", `unknown field "authentication.x509.clientCA"`},
		"case differs":    {header + "MaxPods: 3\n", `unknown field "MaxPods"`},
		"duplicate field": {header + "maxPods: 3\nmaxPods: 4\n", `"maxPods"`},
		"wrong type":      {header + "maxPods: many\n", "maxPods"},
		"wrong kind":      {"apiVersion: kubelet.config.k8s.io/v1beta1\nkind: Pod\n", `kind "Pod"`},
		"wrong version":   {"apiVersion: kubelet.config.k8s.io/v1\nkind: KubeletConfiguration\n", `apiVersion "kubelet.config.k8s.io/v1"`},
		"not yaml":        {"{", "parse"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Decode([]byte(tc.doc))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Decode error = %v, want one containing %s", err, tc.want)
			}
		})
	}
}

func TestLoadNamesTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kubelet.yaml")
	if err := os.WriteFile(path, []byte(header+"bogus: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path)
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), `"bogus"`) {
		t.Errorf("Load error = %v, want the path and the field", err)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("Load of a missing file: no error")
	}
	f, err := Load(writeFile(t, full))
	if err != nil || f.Config.MaxPods != 50 {
		t.Errorf("Load = %v, %v", f, err)
	}
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubelet.yaml")
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
