package runtime

import (
	"errors"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func ptr[T any](v T) *T { return &v }

func basePod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "prod", UID: "uid-1"},
		Spec: corev1.PodSpec{
			NodeName:      "n1",
			RestartPolicy: corev1.RestartPolicyAlways,
			Containers:    []corev1.Container{{Name: "app", Image: "nginx:1", TerminationMessagePath: "/dev/termination-log"}},
		},
	}
}

func pauseImage() ImageConfig {
	return ImageConfig{Entrypoint: []string{"/pause"}, Env: []string{"PATH=/"}, User: "65535:65535"}
}

func nsTypes(ns []specs.LinuxNamespace) map[specs.LinuxNamespaceType]string {
	out := map[specs.LinuxNamespaceType]string{}
	for _, n := range ns {
		out[n.Type] = n.Path
	}
	return out
}

func mountByDst(ms []specs.Mount, dst string) *specs.Mount {
	for i := range ms {
		if ms[i].Destination == dst {
			return &ms[i]
		}
	}
	return nil
}

func TestSandboxSpec(t *testing.T) {
	tests := []struct {
		name      string
		mutate    func(*corev1.Pod)
		floor     int
		wantNS    map[specs.LinuxNamespaceType]string
		wantHost  string
		wantOOM   int
		wantUser  specs.User
		wantErrIs error
	}{
		{
			name:     "own namespaces",
			floor:    -1000,
			wantNS:   map[specs.LinuxNamespaceType]string{"mount": "", "network": "/run/netns/p1", "uts": "", "ipc": "", "pid": ""},
			wantHost: "web", wantOOM: -998,
			wantUser: specs.User{UID: 65535, GID: 65535, AdditionalGids: []uint32{65535}},
		},
		{
			name:     "oom floor clamps",
			floor:    0,
			wantNS:   map[specs.LinuxNamespaceType]string{"mount": "", "network": "/run/netns/p1", "uts": "", "ipc": "", "pid": ""},
			wantHost: "web", wantOOM: 0,
			wantUser: specs.User{UID: 65535, GID: 65535, AdditionalGids: []uint32{65535}},
		},
		{
			name: "host namespaces",
			mutate: func(p *corev1.Pod) {
				p.Spec.HostNetwork, p.Spec.HostIPC, p.Spec.HostPID = true, true, true
			},
			floor:    -1000,
			wantNS:   map[specs.LinuxNamespaceType]string{"mount": ""},
			wantHost: "", wantOOM: -998,
			wantUser: specs.User{UID: 65535, GID: 65535, AdditionalGids: []uint32{65535}},
		},
		{
			name: "hostname, subdomain FQDN and pod security context",
			mutate: func(p *corev1.Pod) {
				p.Spec.Hostname, p.Spec.Subdomain, p.Spec.SetHostnameAsFQDN = "h", "sub", ptr(true)
				p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr(int64(1000)), RunAsGroup: ptr(int64(2000)),
					SupplementalGroups: []int64{3000, 2000}, FSGroup: ptr(int64(4000))}
			},
			floor:    -1000,
			wantNS:   map[specs.LinuxNamespaceType]string{"mount": "", "network": "/run/netns/p1", "uts": "", "ipc": "", "pid": ""},
			wantHost: "h.sub.prod.svc.cluster.local", wantOOM: -998,
			wantUser: specs.User{UID: 1000, GID: 2000, AdditionalGids: []uint32{2000, 3000, 4000}},
		},
	}
	for _, tt := range tests {
		pod := basePod()
		if tt.mutate != nil {
			tt.mutate(pod)
		}
		s, err := SandboxSpec(SandboxSpecConfig{Pod: pod, Image: pauseImage(), NetNSPath: "/run/netns/p1",
			CgroupsPath: "/kubepods/poduid-1/sandbox", ShmPath: "/var/lib/nodelet/pods/uid-1/shm",
			ClusterDomain: "cluster.local", OOMScoreAdjFloor: tt.floor})
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if got := nsTypes(s.Linux.Namespaces); !reflect.DeepEqual(got, tt.wantNS) {
			t.Errorf("%s: namespaces %v, want %v", tt.name, got, tt.wantNS)
		}
		if s.Hostname != tt.wantHost {
			t.Errorf("%s: hostname %q, want %q", tt.name, s.Hostname, tt.wantHost)
		}
		if *s.Process.OOMScoreAdj != tt.wantOOM {
			t.Errorf("%s: oom %d, want %d", tt.name, *s.Process.OOMScoreAdj, tt.wantOOM)
		}
		if !reflect.DeepEqual(s.Process.User, tt.wantUser) {
			t.Errorf("%s: user %+v, want %+v", tt.name, s.Process.User, tt.wantUser)
		}
		if !s.Root.Readonly || s.Root.Path != "rootfs" || s.Linux.CgroupsPath != "/kubepods/poduid-1/sandbox" {
			t.Errorf("%s: root %+v cgroup %q", tt.name, s.Root, s.Linux.CgroupsPath)
		}
		if !reflect.DeepEqual(s.Process.Args, []string{"/pause"}) || !reflect.DeepEqual(s.Process.Env, []string{"PATH=/"}) {
			t.Errorf("%s: args %q env %q", tt.name, s.Process.Args, s.Process.Env)
		}
		if got := sorted(s.Process.Capabilities.Bounding); !reflect.DeepEqual(got, sorted(DefaultCapabilities())) || len(s.Process.Capabilities.Inheritable) != 0 {
			t.Errorf("%s: caps %v", tt.name, s.Process.Capabilities)
		}
		if *s.Linux.Resources.CPU.Shares != 2 || len(s.Process.Rlimits) != 0 || s.Linux.Seccomp != nil {
			t.Errorf("%s: resources/rlimits/seccomp wrong", tt.name)
		}
		shm := mountByDst(s.Mounts, "/dev/shm")
		if shm == nil || shm.Type != "bind" || shm.Source != "/var/lib/nodelet/pods/uid-1/shm" || !slices.Contains(shm.Options, "ro") {
			t.Errorf("%s: /dev/shm %+v", tt.name, shm)
		}
		if mountByDst(s.Mounts, "/run") != nil || len(s.Linux.MaskedPaths) == 0 || len(s.Linux.ReadonlyPaths) == 0 {
			t.Errorf("%s: mounts or masked paths wrong", tt.name)
		}
	}
}

func TestSandboxSpecErrors(t *testing.T) {
	pod := basePod()
	if _, err := SandboxSpec(SandboxSpecConfig{Pod: pod, Image: ImageConfig{}}); !errors.Is(err, ErrNoCommand) {
		t.Errorf("no command: %v", err)
	}
	if _, err := SandboxSpec(SandboxSpecConfig{Pod: pod, Image: ImageConfig{Cmd: []string{"/pause"}, User: "nobody"}}); err == nil {
		t.Error("non-numeric pause user: want error")
	}
	pod.Spec.Hostname, pod.Spec.Subdomain, pod.Spec.SetHostnameAsFQDN = strings.Repeat("h", 60), "sub", ptr(true)
	if _, err := SandboxSpec(SandboxSpecConfig{Pod: pod, Image: pauseImage(), ClusterDomain: "cluster.local"}); err == nil {
		t.Error("FQDN too long: want error")
	}
	pod = basePod()
	pod.Spec.SecurityContext = &corev1.PodSecurityContext{Sysctls: []corev1.Sysctl{{Name: "net.ipv4.ip_unprivileged_port_start", Value: "0"}}}
	s, err := SandboxSpec(SandboxSpecConfig{Pod: pod, Image: pauseImage()})
	if err != nil || s.Linux.Sysctl["net.ipv4.ip_unprivileged_port_start"] != "0" {
		t.Errorf("sysctls: %v %v", err, s.Linux.Sysctl)
	}
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}

func containerCfg(pod *corev1.Pod) ContainerSpecConfig {
	return ContainerSpecConfig{
		Pod: pod, Container: &pod.Spec.Containers[0],
		Image:       ImageConfig{Entrypoint: []string{"/docker-entrypoint.sh"}, Cmd: []string{"nginx"}, Env: []string{"PATH=/img/bin", "NGINX_VERSION=1"}, WorkingDir: "/srv"},
		SandboxPID:  4242,
		CgroupsPath: "/kubepods/poduid-1/app",
		Volumes: map[string]VolumeSource{"data": {HostPath: "/var/lib/nodelet/pods/uid-1/volumes/data"}, "cfg": {HostPath: "/etc/cfg"},
			"secret": {HostPath: "/s", ReadOnly: true}},
		Hostname:           "web",
		HostsPath:          "/p/etc-hosts",
		ResolvConfPath:     "/p/resolv.conf",
		HostnamePath:       "/p/hostname",
		ShmPath:            "/p/shm",
		TerminationLogPath: "/p/containers/app/abc",
		MemoryCapacity:     1 << 30,
		OOMScoreAdjFloor:   -1000,
	}
}

func TestContainerSpecBasics(t *testing.T) {
	pod := basePod()
	c := &pod.Spec.Containers[0]
	c.Env = []corev1.EnvVar{{Name: "NGINX_VERSION", Value: "2"}, {Name: "GREETING", Value: "hi"}}
	c.Args = []string{"-g", "$(GREETING)"}
	c.TTY = true
	c.VolumeMounts = []corev1.VolumeMount{
		{Name: "data", MountPath: "/data"},
		{Name: "data", MountPath: "/data/sub", SubPath: "a/b", ReadOnly: true},
		{Name: "cfg", MountPath: "/etc/cfg", MountPropagation: ptr(corev1.MountPropagationHostToContainer)},
	}
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "secret", MountPath: "/s"})
	cfg := containerCfg(pod)
	cfg.SubPaths = map[int]string{1: "/var/lib/nodelet/pods/uid-1/volume-subpaths/data/app/1"}
	s, err := ContainerSpec(cfg)
	if err != nil {
		t.Fatal(err)
	}
	wantArgs := []string{"/docker-entrypoint.sh", "-g", "hi"}
	if !reflect.DeepEqual(s.Process.Args, wantArgs) {
		t.Errorf("args %q, want %q", s.Process.Args, wantArgs)
	}
	wantEnv := []string{"PATH=/img/bin", "HOSTNAME=web", "NGINX_VERSION=2", "GREETING=hi"}
	if !reflect.DeepEqual(s.Process.Env, wantEnv) {
		t.Errorf("env %q, want %q", s.Process.Env, wantEnv)
	}
	if s.Process.Cwd != "/srv" || !s.Process.Terminal || s.Root.Readonly || s.Process.NoNewPrivileges {
		t.Errorf("cwd %q terminal %v readonly %v nnp %v", s.Process.Cwd, s.Process.Terminal, s.Root.Readonly, s.Process.NoNewPrivileges)
	}
	wantNS := map[specs.LinuxNamespaceType]string{"mount": "", "network": "/proc/4242/ns/net", "ipc": "/proc/4242/ns/ipc", "uts": "/proc/4242/ns/uts", "pid": ""}
	if got := nsTypes(s.Linux.Namespaces); !reflect.DeepEqual(got, wantNS) {
		t.Errorf("namespaces %v, want %v", got, wantNS)
	}
	checks := []struct {
		dst, src, typ string
		opts          []string
	}{
		{"/data", "/var/lib/nodelet/pods/uid-1/volumes/data", "bind", []string{"rbind", "rprivate", "rw"}},
		{"/data/sub", "/var/lib/nodelet/pods/uid-1/volume-subpaths/data/app/1", "bind", []string{"rbind", "rprivate", "ro"}},
		{"/etc/cfg", "/etc/cfg", "bind", []string{"rbind", "rslave", "rw"}},
		{"/s", "/s", "bind", []string{"rbind", "rprivate", "ro"}},
		{"/etc/hosts", "/p/etc-hosts", "bind", []string{"rbind", "rprivate", "rw"}},
		{"/etc/hostname", "/p/hostname", "bind", []string{"rbind", "rprivate", "rw"}},
		{"/etc/resolv.conf", "/p/resolv.conf", "bind", []string{"rbind", "rprivate", "rw"}},
		{"/dev/shm", "/p/shm", "bind", []string{"rbind", "rprivate", "rw"}},
		{"/dev/termination-log", "/p/containers/app/abc", "bind", []string{"rbind", "rprivate", "rw"}},
		{"/proc", "proc", "proc", []string{"nosuid", "noexec", "nodev"}},
		{"/sys", "sysfs", "sysfs", []string{"nosuid", "noexec", "nodev", "ro"}},
		{"/sys/fs/cgroup", "cgroup", "cgroup", []string{"nosuid", "noexec", "nodev", "relatime", "ro"}},
		{"/dev/mqueue", "mqueue", "mqueue", []string{"nosuid", "noexec", "nodev"}},
		{"/dev/pts", "devpts", "devpts", []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"}},
	}
	for _, ck := range checks {
		m := mountByDst(s.Mounts, ck.dst)
		if m == nil || m.Source != ck.src || m.Type != ck.typ || !reflect.DeepEqual(m.Options, ck.opts) {
			t.Errorf("mount %s = %+v, want %s %s %v", ck.dst, m, ck.typ, ck.src, ck.opts)
		}
	}
	if n := countDst(s.Mounts, "/dev/shm"); n != 1 {
		t.Errorf("%d /dev/shm mounts, want 1", n)
	}
	// Parents are mounted before children.
	if indexDst(s.Mounts, "/data") > indexDst(s.Mounts, "/data/sub") || indexDst(s.Mounts, "/dev") > indexDst(s.Mounts, "/dev/shm") {
		t.Errorf("mount order wrong: %v", s.Mounts)
	}
	if !reflect.DeepEqual(s.Linux.MaskedPaths, defaultMaskedPaths()) || !reflect.DeepEqual(s.Linux.ReadonlyPaths, defaultReadonlyPaths()) {
		t.Error("masked/readonly paths are not containerd's defaults")
	}
	if d := s.Linux.Resources.Devices; len(d) != 1 || d[0].Allow {
		t.Errorf("devices %+v, want deny all", d)
	}
	if *s.Process.OOMScoreAdj != 1000 || len(s.Process.Rlimits) != 0 {
		t.Errorf("besteffort oom %d, rlimits %v", *s.Process.OOMScoreAdj, s.Process.Rlimits)
	}
}

func countDst(ms []specs.Mount, dst string) int {
	n := 0
	for _, m := range ms {
		if m.Destination == dst {
			n++
		}
	}
	return n
}

func indexDst(ms []specs.Mount, dst string) int {
	for i, m := range ms {
		if m.Destination == dst {
			return i
		}
	}
	return -1
}

func TestContainerSpecNamespacesAndMounts(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(*corev1.Pod, *ContainerSpecConfig)
		wantPID string // "-" for no pid namespace
		wantErr string
		check   func(*testing.T, *specs.Spec)
	}{
		{"share process namespace", func(p *corev1.Pod, _ *ContainerSpecConfig) { p.Spec.ShareProcessNamespace = ptr(true) }, "/proc/4242/ns/pid", "", nil},
		{"host pid", func(p *corev1.Pod, _ *ContainerSpecConfig) { p.Spec.HostPID = true }, "-", "", nil},
		{"ephemeral container with a target", func(_ *corev1.Pod, c *ContainerSpecConfig) { c.TargetPID = 777 }, "/proc/777/ns/pid", "", nil},
		{"cgroup namespace", func(_ *corev1.Pod, c *ContainerSpecConfig) { c.CgroupNamespace = true }, "", "", func(t *testing.T, s *specs.Spec) {
			if _, ok := nsTypes(s.Linux.Namespaces)["cgroup"]; !ok {
				t.Error("no cgroup namespace")
			}
		}},
		{"volume mount over /etc/hosts wins", func(p *corev1.Pod, c *ContainerSpecConfig) {
			p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "cfg", MountPath: "/etc/hosts", SubPath: "hosts"}}
			c.SubPaths = map[int]string{0: "/etc/cfg/hosts"}
		}, "", "", func(t *testing.T, s *specs.Spec) {
			if n := countDst(s.Mounts, "/etc/hosts"); n != 1 || mountByDst(s.Mounts, "/etc/hosts").Source != "/etc/cfg/hosts" {
				t.Errorf("/etc/hosts mounts: %d %+v", n, mountByDst(s.Mounts, "/etc/hosts"))
			}
		}},
		{"subPathExpr expanding to nothing mounts the volume", func(p *corev1.Pod, _ *ContainerSpecConfig) {
			c := &p.Spec.Containers[0]
			c.VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/logs", SubPathExpr: "$(UNSET)"}}
		}, "", "", func(t *testing.T, s *specs.Spec) {
			if m := mountByDst(s.Mounts, "/logs"); m == nil || m.Source != "/var/lib/nodelet/pods/uid-1/volumes/data" {
				t.Errorf("subPathExpr mount %+v", m)
			}
		}},
		{"bidirectional", func(p *corev1.Pod, _ *ContainerSpecConfig) {
			p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/d", MountPropagation: ptr(corev1.MountPropagationBidirectional)}}
		}, "", "", func(t *testing.T, s *specs.Spec) {
			if m := mountByDst(s.Mounts, "/d"); m == nil || m.Options[1] != "rshared" {
				t.Errorf("propagation %+v", m)
			}
			if s.Linux.RootfsPropagation != "rshared" {
				t.Errorf("rootfsPropagation %q with a Bidirectional mount, want rshared", s.Linux.RootfsPropagation)
			}
		}},
		{"no termination log, no shm", func(p *corev1.Pod, c *ContainerSpecConfig) {
			p.Spec.Containers[0].TerminationMessagePath = ""
			c.ShmPath = ""
		}, "", "", func(t *testing.T, s *specs.Spec) {
			if m := mountByDst(s.Mounts, "/dev/shm"); m == nil || m.Type != "tmpfs" {
				t.Errorf("private /dev/shm expected: %+v", m)
			}
			if mountByDst(s.Mounts, "/dev/termination-log") != nil {
				t.Error("termination log mounted")
			}
		}},
		{"unknown volume", func(p *corev1.Pod, _ *ContainerSpecConfig) {
			p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "nope", MountPath: "/x"}}
		}, "", "volume not prepared", nil},
		{"subPath not prepared", func(p *corev1.Pod, _ *ContainerSpecConfig) {
			p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/x", SubPath: "a/b"}}
		}, "", "not prepared", nil},
		{"no command", func(_ *corev1.Pod, c *ContainerSpecConfig) { c.Image = ImageConfig{} }, "", "no command", nil},
	}
	for _, tt := range tests {
		pod := basePod()
		cfg := containerCfg(pod)
		tt.mutate(pod, &cfg)
		s, err := ContainerSpec(cfg)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%s: err %v, want %q", tt.name, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		pid, ok := nsTypes(s.Linux.Namespaces)["pid"]
		if !ok {
			pid = "-"
		}
		if pid != tt.wantPID {
			t.Errorf("%s: pid namespace %q, want %q", tt.name, pid, tt.wantPID)
		}
		if tt.check != nil {
			tt.check(t, s)
		}
	}
}

func TestContainerUser(t *testing.T) {
	lookup := func(name string) (uint32, uint32, error) {
		if name == "www" {
			return 33, 34, nil
		}
		return 0, 0, errors.New("no such user")
	}
	tests := []struct {
		name      string
		podSC     *corev1.PodSecurityContext
		sc        *corev1.SecurityContext
		imageUser string
		lookup    func(string) (uint32, uint32, error)
		want      specs.User
		wantErrIs error
		wantErr   bool
	}{
		{name: "image default root", want: specs.User{AdditionalGids: []uint32{0}}},
		{name: "image uid:gid", imageUser: "100:200", want: specs.User{UID: 100, GID: 200, AdditionalGids: []uint32{200}}},
		{name: "image name resolved", imageUser: "www", lookup: lookup, want: specs.User{UID: 33, GID: 34, AdditionalGids: []uint32{34}}},
		{name: "image name unresolvable", imageUser: "www", wantErr: true},
		{name: "image name lookup fails", imageUser: "ghost", lookup: lookup, wantErr: true},
		{name: "runAsUser overrides image", imageUser: "100:200", sc: &corev1.SecurityContext{RunAsUser: ptr(int64(7))}, want: specs.User{UID: 7, AdditionalGids: []uint32{0}}},
		{name: "pod runAsUser/Group, container group wins", podSC: &corev1.PodSecurityContext{RunAsUser: ptr(int64(5)), RunAsGroup: ptr(int64(6)), SupplementalGroups: []int64{9}},
			sc: &corev1.SecurityContext{RunAsGroup: ptr(int64(8))}, want: specs.User{UID: 5, GID: 8, AdditionalGids: []uint32{8, 9}}},
		{name: "nonroot ok with numeric image user", imageUser: "1000", sc: &corev1.SecurityContext{RunAsNonRoot: ptr(true)}, want: specs.User{UID: 1000, AdditionalGids: []uint32{0}}},
		{name: "nonroot with root image", sc: &corev1.SecurityContext{RunAsNonRoot: ptr(true)}, wantErrIs: ErrRunAsNonRoot},
		{name: "nonroot with image uid 0", imageUser: "0:0", podSC: &corev1.PodSecurityContext{RunAsNonRoot: ptr(true)}, wantErrIs: ErrRunAsNonRoot},
		{name: "nonroot with named image user", imageUser: "www", lookup: lookup, sc: &corev1.SecurityContext{RunAsNonRoot: ptr(true)}, wantErrIs: ErrRunAsNonRoot},
		{name: "nonroot with runAsUser 0", sc: &corev1.SecurityContext{RunAsNonRoot: ptr(true), RunAsUser: ptr(int64(0))}, wantErrIs: ErrRunAsNonRoot},
		{name: "nonroot with runAsUser over root image", sc: &corev1.SecurityContext{RunAsNonRoot: ptr(true), RunAsUser: ptr(int64(1))}, want: specs.User{UID: 1, AdditionalGids: []uint32{0}}},
		{name: "container nonroot=false overrides pod", podSC: &corev1.PodSecurityContext{RunAsNonRoot: ptr(true)}, sc: &corev1.SecurityContext{RunAsNonRoot: ptr(false)}, want: specs.User{AdditionalGids: []uint32{0}}},
	}
	for _, tt := range tests {
		pod := basePod()
		pod.Spec.SecurityContext = tt.podSC
		c := &pod.Spec.Containers[0]
		c.SecurityContext = tt.sc
		got, err := containerUser(pod, c, ImageConfig{User: tt.imageUser}, tt.lookup)
		switch {
		case tt.wantErrIs != nil:
			if !errors.Is(err, tt.wantErrIs) {
				t.Errorf("%s: err %v, want %v", tt.name, err, tt.wantErrIs)
			}
		case tt.wantErr:
			if err == nil {
				t.Errorf("%s: want error", tt.name)
			}
		case err != nil || !reflect.DeepEqual(got, tt.want):
			t.Errorf("%s: got %+v, %v; want %+v", tt.name, got, err, tt.want)
		}
	}
}

func TestContainerCapabilities(t *testing.T) {
	def := DefaultCapabilities()
	without := func(drop ...string) []string {
		var out []string
		for _, c := range def {
			if !slices.Contains(drop, c) {
				out = append(out, c)
			}
		}
		return out
	}
	allBut := func(drop ...string) []string {
		var out []string
		for _, c := range AllCapabilities() {
			if !slices.Contains(drop, c) {
				out = append(out, c)
			}
		}
		return out
	}
	tests := []struct {
		name string
		sc   *corev1.SecurityContext
		want []string
	}{
		{"default", nil, def},
		{"add one", &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN"}}}, append(append([]string{}, def...), "CAP_NET_ADMIN")},
		{"add with prefix, drop lowercase", &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"CAP_SYS_TIME"}, Drop: []corev1.Capability{"net_raw"}}}, append(without("CAP_NET_RAW"), "CAP_SYS_TIME")},
		{"drop all add one", &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_BIND_SERVICE"}, Drop: []corev1.Capability{"ALL"}}}, []string{"CAP_NET_BIND_SERVICE"}},
		{"add all drop one", &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"ALL"}, Drop: []corev1.Capability{"CHOWN"}}}, allBut("CAP_CHOWN")},
		{"add all drop all", &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"all"}, Drop: []corev1.Capability{"all"}}}, nil},
		{"privileged", &corev1.SecurityContext{Privileged: ptr(true), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}, AllCapabilities()},
	}
	for _, tt := range tests {
		got := sorted(containerCapabilities(&corev1.Container{SecurityContext: tt.sc}, AllCapabilities()))
		if !reflect.DeepEqual(got, sorted(tt.want)) {
			t.Errorf("%s: got %v, want %v", tt.name, got, sorted(tt.want))
		}
	}
	// A host whose agent lacks a capability grants privileged and ALL
	// only what it has, as containerd's WithAllCurrentCapabilities.
	host := allBut("CAP_SYS_RESOURCE")
	for _, sc := range []*corev1.SecurityContext{{Privileged: ptr(true)},
		{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"ALL"}}}} {
		if got := containerCapabilities(&corev1.Container{SecurityContext: sc}, host); slices.Contains(got, "CAP_SYS_RESOURCE") || len(got) != len(host) {
			t.Errorf("%+v on a host without CAP_SYS_RESOURCE: %v", sc, got)
		}
	}
}

func TestContainerSpecSecurity(t *testing.T) {
	tests := []struct {
		name  string
		sc    *corev1.SecurityContext
		check func(*testing.T, *specs.Spec)
	}{
		{"privileged", &corev1.SecurityContext{Privileged: ptr(true)}, func(t *testing.T, s *specs.Spec) {
			if d := s.Linux.Resources.Devices; len(d) != 1 || !d[0].Allow || d[0].Access != "rwm" {
				t.Errorf("devices %+v", d)
			}
			if len(s.Linux.MaskedPaths) != 0 || len(s.Linux.ReadonlyPaths) != 0 || s.Linux.Seccomp != nil || s.Process.ApparmorProfile != "" {
				t.Error("privileged container is confined")
			}
			if m := mountByDst(s.Mounts, "/sys"); m == nil || !slices.Contains(m.Options, "rw") {
				t.Errorf("/sys %+v", m)
			}
			if len(s.Process.Capabilities.Effective) != len(AllCapabilities()) {
				t.Error("privileged container lacks capabilities")
			}
		}},
		{"privileged gets no cgroup ns", &corev1.SecurityContext{Privileged: ptr(true)}, func(t *testing.T, s *specs.Spec) {
			if _, ok := nsTypes(s.Linux.Namespaces)["cgroup"]; ok {
				t.Error("cgroup namespace for privileged container")
			}
		}},
		{"read-only rootfs", &corev1.SecurityContext{ReadOnlyRootFilesystem: ptr(true)}, func(t *testing.T, s *specs.Spec) {
			if !s.Root.Readonly {
				t.Error("rootfs writable")
			}
			for dst, wantRO := range map[string]bool{"/etc/resolv.conf": true, "/etc/hostname": true, "/etc/hosts": false} {
				if m := mountByDst(s.Mounts, dst); m == nil || slices.Contains(m.Options, "ro") != wantRO {
					t.Errorf("%s %+v, want ro=%v", dst, m, wantRO)
				}
			}
		}},
		{"no privilege escalation", &corev1.SecurityContext{AllowPrivilegeEscalation: ptr(false)}, func(t *testing.T, s *specs.Spec) {
			if !s.Process.NoNewPrivileges {
				t.Error("NoNewPrivileges not set")
			}
		}},
		{"privilege escalation allowed", &corev1.SecurityContext{AllowPrivilegeEscalation: ptr(true)}, func(t *testing.T, s *specs.Spec) {
			if s.Process.NoNewPrivileges {
				t.Error("NoNewPrivileges set")
			}
		}},
		{"runAsNonRoot violated", &corev1.SecurityContext{RunAsNonRoot: ptr(true)}, nil},
	}
	for _, tt := range tests {
		pod := basePod()
		pod.Spec.Containers[0].SecurityContext = tt.sc
		cfg := containerCfg(pod)
		cfg.CgroupNamespace = true
		s, err := ContainerSpec(cfg)
		if tt.check == nil {
			if !errors.Is(err, ErrRunAsNonRoot) {
				t.Errorf("%s: err %v", tt.name, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		tt.check(t, s)
	}
}

func TestContainerSpecResources(t *testing.T) {
	pod := basePod()
	c := &pod.Spec.Containers[0]
	c.Resources = corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("512Mi")},
	}
	cfg := containerCfg(pod)
	cfg.OOMScoreAdjFloor = 0
	s, err := ContainerSpec(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := s.Linux.Resources
	if *r.CPU.Shares != 256 || *r.CPU.Quota != 50000 || *r.CPU.Period != 100000 || *r.Memory.Limit != 512<<20 {
		t.Errorf("resources shares %d quota %d period %d mem %d", *r.CPU.Shares, *r.CPU.Quota, *r.CPU.Period, *r.Memory.Limit)
	}
	// Burstable: 1000 - 1000*256Mi/1Gi = 750.
	if *s.Process.OOMScoreAdj != 750 {
		t.Errorf("oom %d, want 750", *s.Process.OOMScoreAdj)
	}
}

func TestRootfsPropagation(t *testing.T) {
	m := func(opts ...string) specs.Mount { return specs.Mount{Options: opts} }
	for _, tc := range []struct {
		mounts []specs.Mount
		want   string
	}{
		{nil, ""},
		{[]specs.Mount{m("rbind", "rprivate")}, ""},
		{[]specs.Mount{m("rbind", "rslave")}, "rslave"},
		{[]specs.Mount{m("rbind", "rslave"), m("rbind", "rshared"), m("rbind", "rslave")}, "rshared"},
	} {
		if got := rootfsPropagation(tc.mounts); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.mounts, got, tc.want)
		}
	}
}
