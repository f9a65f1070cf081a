package network

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// host-local keeps one file per allocated address in dataDir/<network>/,
// named by the address and holding "<container id>\r\n<ifname>", and
// serializes its writers with flock on dataDir/<network>/lock. The helpers
// here read and release those files for reconciliation; they only ever
// look at IPAMDir, which holds our generated config's allocations alone.

// reservation is one address host-local handed out.
type reservation struct {
	Path        string
	IP          netip.Addr
	ContainerID string
}

// parseReservation reads a host-local file's content; ok is false for files
// that are not reservations (lock, last_reserved_ip.N, ...).
func parseReservation(name string, content []byte) (reservation, bool) {
	ip, err := netip.ParseAddr(name)
	if err != nil {
		return reservation{}, false
	}
	id, _, _ := strings.Cut(string(content), "\n")
	id = strings.TrimSpace(id)
	if id == "" {
		return reservation{}, false
	}
	return reservation{IP: ip, ContainerID: id}, true
}

// networkDirs are the per-network directories under the IPAM data dir.
func networkDirs(ipamDir string) ([]string, error) {
	entries, err := os.ReadDir(ipamDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list IPAM dir %s: %w", ipamDir, err)
	}
	var dirs []string
	for _, e := range entries {
		if e.IsDir() {
			dirs = append(dirs, filepath.Join(ipamDir, e.Name()))
		}
	}
	return dirs, nil
}

// reservationsIn lists the reservations of one network directory.
func reservationsIn(dir string) ([]reservation, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list IPAM network dir %s: %w", dir, err)
	}
	var out []reservation
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		if _, err := netip.ParseAddr(e.Name()); err != nil {
			continue
		}
		path := filepath.Join(dir, e.Name())
		content, err := os.ReadFile(path)
		if err != nil {
			continue // released meanwhile
		}
		if r, ok := parseReservation(e.Name(), content); ok {
			r.Path = path
			out = append(out, r)
		}
	}
	return out, nil
}

// reservations lists every reservation under ipamDir.
func reservations(ipamDir string) ([]reservation, error) {
	dirs, err := networkDirs(ipamDir)
	if err != nil {
		return nil, err
	}
	var out []reservation
	for _, dir := range dirs {
		rs, err := reservationsIn(dir)
		if err != nil {
			return nil, err
		}
		out = append(out, rs...)
	}
	return out, nil
}

// releaseReservations removes, under host-local's own lock, the
// reservations under ipamDir whose container release says to drop. It
// returns the released ones.
func releaseReservations(ipamDir string, release func(containerID string) bool) ([]reservation, error) {
	dirs, err := networkDirs(ipamDir)
	if err != nil {
		return nil, err
	}
	var released []reservation
	var errs []error
	for _, dir := range dirs {
		rs, err := releaseIn(dir, release)
		released = append(released, rs...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	return released, errors.Join(errs...)
}

func releaseIn(dir string, release func(string) bool) ([]reservation, error) {
	unlock, err := lockIPAMDir(dir)
	if err != nil {
		return nil, err
	}
	defer unlock()
	rs, err := reservationsIn(dir)
	if err != nil {
		return nil, err
	}
	var released []reservation
	var errs []error
	for _, r := range rs {
		if !release(r.ContainerID) {
			continue
		}
		if err := os.Remove(r.Path); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("release IP %s of %s: %w", r.IP, r.ContainerID, err))
			continue
		}
		released = append(released, r)
	}
	return released, errors.Join(errs...)
}

// lockIPAMDir takes the flock host-local takes before changing dir.
func lockIPAMDir(dir string) (unlock func(), err error) {
	f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open IPAM lock in %s: %w", dir, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock IPAM dir %s: %w", dir, err)
	}
	return func() { f.Close() }, nil
}
