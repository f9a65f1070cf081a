package cgroups

import (
	"errors"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

const testUID = types.UID("0f5c2a1e-7b3d-4c1a-9e2f-1a2b3c4d5e6f")

func TestParseRoot(t *testing.T) {
	for _, tc := range []struct {
		root string
		want Name
	}{
		{"", nil}, {"/", nil}, {"//", nil},
		{"/nodelet-1", Name{"nodelet-1"}},
		{"/a/b/", Name{"a", "b"}},
		{"a/b", Name{"a", "b"}},
		{"node1.slice", Name{"node1"}},
		{"/a.slice/a-b.slice", Name{"a", "b"}},
		{"/my_node.slice", Name{"my-node"}},
	} {
		if got := ParseRoot(tc.root); !slices.Equal(got, tc.want) {
			t.Errorf("ParseRoot(%q) = %q, want %q", tc.root, got, tc.want)
		}
	}
}

func TestPodNames(t *testing.T) {
	const u = "0f5c2a1e-7b3d-4c1a-9e2f-1a2b3c4d5e6f"
	const us = "0f5c2a1e_7b3d_4c1a_9e2f_1a2b3c4d5e6f"
	for _, tc := range []struct {
		root     string
		class    corev1.PodQOSClass
		cgroupfs string
		systemd  string
	}{
		{"/", corev1.PodQOSGuaranteed, "/kubepods/pod" + u,
			"/kubepods.slice/kubepods-pod" + us + ".slice"},
		{"", corev1.PodQOSBurstable, "/kubepods/burstable/pod" + u,
			"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + us + ".slice"},
		{"/", corev1.PodQOSBestEffort, "/kubepods/besteffort/pod" + u,
			"/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + us + ".slice"},
		{"/nodelet-test", corev1.PodQOSBurstable, "/nodelet-test/kubepods/burstable/pod" + u,
			"/nodelet_test.slice/nodelet_test-kubepods.slice/nodelet_test-kubepods-burstable.slice/nodelet_test-kubepods-burstable-pod" + us + ".slice"},
		{"node1.slice", corev1.PodQOSGuaranteed, "/node1/kubepods/pod" + u,
			"/node1.slice/node1-kubepods.slice/node1-kubepods-pod" + us + ".slice"},
		{"/a/b", corev1.PodQOSBestEffort, "/a/b/kubepods/besteffort/pod" + u,
			"/a.slice/a-b.slice/a-b-kubepods.slice/a-b-kubepods-besteffort.slice/a-b-kubepods-besteffort-pod" + us + ".slice"},
	} {
		n := PodName(ParseRoot(tc.root), tc.class, testUID)
		if got := n.Path(DriverCgroupfs); got != tc.cgroupfs {
			t.Errorf("root %q %s cgroupfs = %s, want %s", tc.root, tc.class, got, tc.cgroupfs)
		}
		if got := n.Path(DriverSystemd); got != tc.systemd {
			t.Errorf("root %q %s systemd = %s, want %s", tc.root, tc.class, got, tc.systemd)
		}
	}
}

func TestQoSNames(t *testing.T) {
	root := ParseRoot("/")
	for _, tc := range []struct {
		n                 Name
		cgroupfs, systemd string
		parent, unit      string
	}{
		{KubepodsName(root), "/kubepods", "/kubepods.slice", "-.slice", "kubepods.slice"},
		{QoSName(root, corev1.PodQOSGuaranteed), "/kubepods", "/kubepods.slice", "-.slice", "kubepods.slice"},
		{QoSName(root, corev1.PodQOSBurstable), "/kubepods/burstable", "/kubepods.slice/kubepods-burstable.slice",
			"kubepods.slice", "kubepods-burstable.slice"},
		{QoSName(ParseRoot("/n"), corev1.PodQOSBestEffort), "/n/kubepods/besteffort",
			"/n.slice/n-kubepods.slice/n-kubepods-besteffort.slice", "n-kubepods.slice", "n-kubepods-besteffort.slice"},
		{Name(nil), "/", "/", "-.slice", "-.slice"},
	} {
		if got := tc.n.Cgroupfs(); got != tc.cgroupfs {
			t.Errorf("%q Cgroupfs = %s, want %s", tc.n, got, tc.cgroupfs)
		}
		if got := tc.n.Systemd(); got != tc.systemd {
			t.Errorf("%q Systemd = %s, want %s", tc.n, got, tc.systemd)
		}
		if p, u := tc.n.systemdParent(); p != tc.parent || u != tc.unit {
			t.Errorf("%q systemdParent = %s, %s; want %s, %s", tc.n, p, u, tc.parent, tc.unit)
		}
	}
}

func TestNameChildDoesNotAlias(t *testing.T) {
	root := make(Name, 1, 4)
	root[0] = "r"
	a, b := root.Child("a"), root.Child("b")
	if a[1] != "a" || b[1] != "b" {
		t.Errorf("Child aliased: %q %q", a, b)
	}
}

func TestPodUIDFromDir(t *testing.T) {
	for _, tc := range []struct {
		d   Driver
		dir string
		uid types.UID
		ok  bool
	}{
		{DriverCgroupfs, "pod" + string(testUID), testUID, true},
		{DriverCgroupfs, "burstable", "", false},
		{DriverCgroupfs, "pod", "", false},
		{DriverCgroupfs, "cpu.shares", "", false},
		{DriverSystemd, "kubepods-burstable-pod0f5c2a1e_7b3d_4c1a_9e2f_1a2b3c4d5e6f.slice", testUID, true},
		{DriverSystemd, "kubepods-pod0f5c2a1e_7b3d_4c1a_9e2f_1a2b3c4d5e6f.slice", testUID, true},
		{DriverSystemd, "kubepods-burstable.slice", "", false},
		{DriverSystemd, "cri-containerd-abc.scope", "", false},
		{DriverSystemd, "pod0f5c2a1e.slice", "0f5c2a1e", true},
	} {
		uid, ok := podUIDFromDir(tc.d, tc.dir)
		if uid != tc.uid || ok != tc.ok {
			t.Errorf("podUIDFromDir(%s, %q) = %q, %v; want %q, %v", tc.d, tc.dir, uid, ok, tc.uid, tc.ok)
		}
	}
}

func TestContainerCgroupsPath(t *testing.T) {
	for _, tc := range []struct {
		d       Driver
		pod, id string
		want    string
	}{
		{DriverCgroupfs, "/kubepods/burstable/podX", "abc", "/kubepods/burstable/podX/abc"},
		{DriverSystemd, "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podX.slice", "abc",
			"kubepods-burstable-podX.slice:cri-containerd:abc"},
	} {
		if got := ContainerCgroupsPath(tc.d, tc.pod, tc.id); got != tc.want {
			t.Errorf("ContainerCgroupsPath(%s, %s) = %s, want %s", tc.d, tc.pod, got, tc.want)
		}
	}
}

func TestResolveDriver(t *testing.T) {
	for _, tc := range []struct {
		req              string
		systemd, unified bool
		want             Driver
		err              error
	}{
		// Auto: systemd only on a systemd host with the unified hierarchy.
		{"", true, true, DriverSystemd, nil},
		{"", true, false, DriverCgroupfs, nil}, // v1 or hybrid systemd host
		{"", false, true, DriverCgroupfs, nil}, // v2 without systemd (containers, other inits)
		{"", false, false, DriverCgroupfs, nil},
		// Explicit choices.
		{"cgroupfs", true, true, DriverCgroupfs, nil},
		{"cgroupfs", false, false, DriverCgroupfs, nil},
		{"systemd", true, true, DriverSystemd, nil},
		{"systemd", true, false, DriverSystemd, nil}, // v1 systemd host: honoured
		{"systemd", false, true, "", ErrNoSystemd},
		{"systemd", false, false, "", ErrNoSystemd},
		{"upstart", true, true, "", ErrUnknownDriver},
	} {
		got, err := ResolveDriver(tc.req, tc.systemd, tc.unified)
		if got != tc.want || !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
			t.Errorf("ResolveDriver(%q, systemd=%v, unified=%v) = %q, %v; want %q, %v",
				tc.req, tc.systemd, tc.unified, got, err, tc.want, tc.err)
		}
	}
}

func TestResolveMode(t *testing.T) {
	for _, tc := range []struct {
		req     Mode
		unified bool
		want    Mode
		err     error
	}{
		{"", true, ModeV2, nil},
		{"", false, ModeV1, nil},
		{ModeV1, true, ModeV1, nil},
		{ModeV2, false, ModeV2, nil},
		{"v3", false, "", ErrUnknownMode},
	} {
		got, err := ResolveMode(tc.req, tc.unified)
		if got != tc.want || !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
			t.Errorf("ResolveMode(%q, %v) = %q, %v; want %q, %v", tc.req, tc.unified, got, err, tc.want, tc.err)
		}
	}
}

func TestLibConfig(t *testing.T) {
	n := PodName(nil, corev1.PodQOSBurstable, "u-1")
	r := Resources{CPUShares: u64(1024), CPUQuota: i64(50000), CPUPeriod: u64(100000), Memory: i64(1 << 20), PidsLimit: i64(10)}

	fsV1 := libConfig(DriverCgroupfs, ModeV1, n, r)
	if fsV1.Path != "/kubepods/burstable/podu-1" || fsV1.Systemd || fsV1.Parent != "" || fsV1.Name != "" {
		t.Errorf("cgroupfs config = path %q systemd %v parent %q name %q", fsV1.Path, fsV1.Systemd, fsV1.Parent, fsV1.Name)
	}
	if fsV1.CpuShares != 1024 || fsV1.CpuWeight != 0 || fsV1.CpuQuota != 50000 || fsV1.CpuPeriod != 100000 ||
		fsV1.Memory != 1<<20 || *fsV1.PidsLimit != 10 || !fsV1.SkipDevices {
		t.Errorf("v1 resources = %+v", *fsV1.Resources)
	}

	sdV2 := libConfig(DriverSystemd, ModeV2, n, r)
	if sdV2.Path != "" || !sdV2.Systemd || sdV2.Parent != "kubepods-burstable.slice" || sdV2.Name != "kubepods-burstable-podu_1.slice" {
		t.Errorf("systemd config = path %q systemd %v parent %q name %q", sdV2.Path, sdV2.Systemd, sdV2.Parent, sdV2.Name)
	}
	if sdV2.CpuShares != 0 || sdV2.CpuWeight != 39 {
		t.Errorf("v2 cpu = shares %d weight %d, want 0 and 39", sdV2.CpuShares, sdV2.CpuWeight)
	}

	empty := libResources(ModeV2, Resources{})
	if empty.CpuWeight != 0 || empty.CpuQuota != 0 || empty.Memory != 0 || empty.PidsLimit != nil {
		t.Errorf("empty resources = %+v", *empty)
	}
}
