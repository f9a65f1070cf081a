package clusterdns

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// InterfaceName is the dummy interface holding the cluster DNS IPs, as
// NodeLocal DNSCache's "nodelocaldns". On a kernel without the dummy link
// type the addresses go on lo instead, labelled loLabel, so that they can
// still be told from the host's own.
const (
	InterfaceName = "nodelet-dns"
	loLabel       = "lo:nodelet-dns"
)

// EnsureAddresses makes the IPs local to the node (in the calling
// thread's network namespace) as /32 (/128) addresses of the nodelet-dns
// dummy interface, or of lo labelled lo:nodelet-dns where the kernel has
// no dummy links, and removes addresses of earlier runs that are no
// longer wanted. It returns the interface used. Idempotent: a restarted
// nodelet finds them in place.
func EnsureAddresses(ips []netip.Addr) (string, error) {
	link, label, err := dnsLink()
	if err != nil {
		return "", err
	}
	want := map[netip.Addr]bool{}
	for _, ip := range ips {
		want[ip.Unmap()] = true
	}
	have, err := ownAddresses(link, label)
	if err != nil {
		return "", err
	}
	for _, a := range have {
		ip, _ := netip.AddrFromSlice(a.IP)
		if want[ip.Unmap()] && ones(a) == ip.Unmap().BitLen() {
			delete(want, ip.Unmap())
			continue
		}
		if err := netlink.AddrDel(link, &a); err != nil && !errors.Is(err, unix.EADDRNOTAVAIL) {
			return "", fmt.Errorf("clusterdns: remove %s from %s: %w", a.IPNet, link.Attrs().Name, err)
		}
	}
	for ip := range want {
		addr := &netlink.Addr{IPNet: &net.IPNet{IP: ip.AsSlice(), Mask: net.CIDRMask(ip.BitLen(), ip.BitLen())}, Label: label}
		if ip.Is6() {
			addr.Flags = unix.IFA_F_NODAD // usable at once
		}
		if err := netlink.AddrAdd(link, addr); err != nil && !errors.Is(err, unix.EEXIST) {
			return "", fmt.Errorf("clusterdns: add %s to %s: %w", addr.IPNet, link.Attrs().Name, err)
		}
	}
	return link.Attrs().Name, nil
}

// RemoveAddresses undoes EnsureAddresses: the dummy interface goes, and so
// do lo's addresses labelled lo:nodelet-dns. Nothing to remove is success.
func RemoveAddresses() error {
	var errs []error
	if link, err := netlink.LinkByName(InterfaceName); err == nil {
		if err := netlink.LinkDel(link); err != nil {
			errs = append(errs, fmt.Errorf("clusterdns: delete %s: %w", InterfaceName, err))
		}
	} else if !isNotFound(err) {
		errs = append(errs, fmt.Errorf("clusterdns: find %s: %w", InterfaceName, err))
	}
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("clusterdns: find lo: %w", err))...)
	}
	addrs, err := ownAddresses(lo, loLabel)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	for _, a := range addrs {
		if err := netlink.AddrDel(lo, &a); err != nil && !errors.Is(err, unix.EADDRNOTAVAIL) {
			errs = append(errs, fmt.Errorf("clusterdns: remove %s from lo: %w", a.IPNet, err))
		}
	}
	return errors.Join(errs...)
}

// dnsLink finds or creates the dummy interface (up), or falls back to lo
// when the kernel cannot make one. label is what its addresses carry.
func dnsLink() (netlink.Link, string, error) {
	link, err := netlink.LinkByName(InterfaceName)
	if err != nil && !isNotFound(err) {
		return nil, "", fmt.Errorf("clusterdns: find %s: %w", InterfaceName, err)
	}
	label := InterfaceName
	if link == nil {
		err := netlink.LinkAdd(&netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: InterfaceName}})
		switch {
		case errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOTSUP):
			// No dummy driver: lo holds the addresses.
			if link, err = netlink.LinkByName("lo"); err != nil {
				return nil, "", fmt.Errorf("clusterdns: find lo: %w", err)
			}
			label = loLabel
		case err != nil && !errors.Is(err, unix.EEXIST):
			return nil, "", fmt.Errorf("clusterdns: create %s: %w", InterfaceName, err)
		default:
			if link, err = netlink.LinkByName(InterfaceName); err != nil {
				return nil, "", fmt.Errorf("clusterdns: find %s: %w", InterfaceName, err)
			}
		}
	}
	if link.Attrs().Flags&net.FlagUp == 0 {
		if err := netlink.LinkSetUp(link); err != nil {
			return nil, "", fmt.Errorf("clusterdns: set %s up: %w", link.Attrs().Name, err)
		}
	}
	return link, label, nil
}

// ownAddresses are link's addresses; on lo only those labelled label.
func ownAddresses(link netlink.Link, label string) ([]netlink.Addr, error) {
	addrs, err := netlink.AddrList(link, netlink.FAMILY_ALL)
	if err != nil {
		return nil, fmt.Errorf("clusterdns: addresses of %s: %w", link.Attrs().Name, err)
	}
	var out []netlink.Addr
	for _, a := range addrs {
		if link.Attrs().Name == InterfaceName || a.Label == label {
			if ip, ok := netip.AddrFromSlice(a.IP); ok && ip.Unmap().IsLinkLocalUnicast() {
				continue // the kernel's own IPv6 link-local address
			}
			out = append(out, a)
		}
	}
	return out, nil
}

func ones(a netlink.Addr) int {
	n, _ := a.Mask.Size()
	return n
}

func isNotFound(err error) bool {
	var nf netlink.LinkNotFoundError
	return errors.As(err, &nf)
}
