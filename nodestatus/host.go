package nodestatus

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	goruntime "runtime"
	"strconv"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodelet/nodelet/buildinfo"
)

// KubeletVersion is what the node reports as its kubelet version.
const KubeletVersion = buildinfo.GitVersion

// Host is what the node learns about the machine: capacity and nodeInfo.
type Host struct {
	NumCPU          int
	MemoryBytes     int64
	EphemeralBytes  int64
	KernelVersion   string
	OSImage         string
	BootID          string
	MachineID       string
	SystemUUID      string
	OperatingSystem string
	Architecture    string
	RuntimeVersion  string
	Hostname        string
	InternalIP      string
}

// ReadHost reads the facts of this host (rootDir is statfs'ed for
// ephemeral storage).
func ReadHost(rootDir string) (Host, error) {
	h := Host{NumCPU: goruntime.NumCPU(), OperatingSystem: goruntime.GOOS, Architecture: goruntime.GOARCH}
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return h, fmt.Errorf("read /proc/meminfo: %w", err)
	}
	if h.MemoryBytes, err = parseMemTotal(data); err != nil {
		return h, err
	}
	var st unix.Statfs_t
	if err := unix.Statfs(rootDir, &st); err != nil {
		return h, fmt.Errorf("statfs %s: %w", rootDir, err)
	}
	h.EphemeralBytes = int64(st.Blocks) * st.Bsize
	var uts unix.Utsname
	if err := unix.Uname(&uts); err != nil {
		return h, fmt.Errorf("uname: %w", err)
	}
	h.KernelVersion = unix.ByteSliceToString(uts.Release[:])
	h.OSImage = "Linux"
	if data, err := os.ReadFile("/etc/os-release"); err == nil {
		if v := parseOSRelease(data); v != "" {
			h.OSImage = v
		}
	}
	h.BootID = readTrimmed("/proc/sys/kernel/random/boot_id")
	h.MachineID = readTrimmed("/etc/machine-id")
	if h.MachineID == "" {
		h.MachineID = readTrimmed("/var/lib/dbus/machine-id")
	}
	h.SystemUUID = readTrimmed("/sys/class/dmi/id/product_uuid")
	return h, nil
}

func readTrimmed(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// parseMemTotal returns MemTotal of /proc/meminfo in bytes.
func parseMemTotal(data []byte) (int64, error) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "MemTotal:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("parse MemTotal %q: %w", f[1], err)
			}
			return kb * 1024, nil
		}
	}
	return 0, errors.New("no MemTotal in /proc/meminfo")
}

// parseOSRelease returns PRETTY_NAME of an os-release file.
func parseOSRelease(data []byte) string {
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "PRETTY_NAME="); ok {
			if u, err := strconv.Unquote(v); err == nil {
				return u
			}
			return strings.Trim(v, `"'`)
		}
	}
	return ""
}

// RouteIPTo returns the node's address for reaching server (a URL as in a
// kubeconfig, or a bare host): the source address the kernel picks for the
// route to it, so a node with several interfaces reports the one its
// control plane (and so, normally, its peers) can reach. A server on
// loopback says nothing about the node's network: the default route's
// interface decides then, as upstream's kubelet does.
func RouteIPTo(server string) (net.IP, error) {
	ip := serverIP(server)
	if ip == nil || ip.IsLoopback() || ip.IsUnspecified() {
		return DefaultRouteIP()
	}
	routes, err := netlink.RouteGet(ip)
	if err != nil {
		return nil, fmt.Errorf("route to the API server %s: %w", ip, err)
	}
	for _, r := range routes {
		if r.Src != nil && r.Src.IsGlobalUnicast() {
			return r.Src, nil
		}
		family := netlink.FAMILY_V4
		if ip.To4() == nil {
			family = netlink.FAMILY_V6
		}
		if a := globalAddr(r.LinkIndex, family); a != nil {
			return a, nil
		}
	}
	return nil, fmt.Errorf("no global unicast address on the interface that routes to the API server %s", ip)
}

// serverIP is the address of server (URL or host[:port]); a DNS name is
// resolved, and nil means it could not be.
func serverIP(server string) net.IP {
	host := server
	if u, err := url.Parse(server); err == nil && u.Host != "" {
		host = u.Hostname()
	} else if h, _, err := net.SplitHostPort(server); err == nil {
		host = h
	}
	if ip := net.ParseIP(host); ip != nil {
		return ip
	}
	if host == "" {
		return nil
	}
	ips, err := net.LookupIP(host)
	if err != nil || len(ips) == 0 {
		return nil
	}
	return ips[0]
}

// DefaultRouteIP returns the first global unicast address of the interface
// that holds the default route, IPv4 first, then IPv6.
func DefaultRouteIP() (net.IP, error) {
	for _, family := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		routes, err := netlink.RouteList(nil, family)
		if err != nil {
			return nil, fmt.Errorf("list routes: %w", err)
		}
		for _, r := range routes {
			if r.Dst != nil && !r.Dst.IP.IsUnspecified() {
				continue
			}
			if ip := globalAddr(r.LinkIndex, family); ip != nil {
				return ip, nil
			}
		}
	}
	return nil, errors.New("no global unicast address on a default-route interface")
}

func globalAddr(linkIndex, family int) net.IP {
	link, err := netlink.LinkByIndex(linkIndex)
	if err != nil {
		return nil
	}
	addrs, err := netlink.AddrList(link, family)
	if err != nil {
		return nil
	}
	for _, a := range addrs {
		if a.IP.IsGlobalUnicast() {
			return a.IP
		}
	}
	return nil
}

// Capacity is the node's capacity from h and maxPods.
func Capacity(h Host, maxPods int) corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceCPU:              *resource.NewQuantity(int64(h.NumCPU), resource.DecimalSI),
		corev1.ResourceMemory:           *resource.NewQuantity(h.MemoryBytes, resource.BinarySI),
		corev1.ResourceEphemeralStorage: *resource.NewQuantity(h.EphemeralBytes, resource.BinarySI),
		corev1.ResourcePods:             *resource.NewQuantity(int64(maxPods), resource.DecimalSI),
	}
}

// Allocatable is capacity minus the reservations, never below zero, as
// upstream's container manager computes it (without eviction thresholds).
func Allocatable(capacity corev1.ResourceList, reserved ...corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{}
	for name, q := range capacity {
		v := q.DeepCopy()
		for _, r := range reserved {
			if rq, ok := r[name]; ok {
				v.Sub(rq)
			}
		}
		if v.Sign() < 0 {
			v = *resource.NewQuantity(0, q.Format)
		}
		out[name] = v
	}
	return out
}
