package network

import (
	"context"
	"errors"
	"fmt"
	"slices"
)

// Reconcile tears down the network of every sandbox that has a CNI record
// or a netns under our directories but is not in live, then releases the
// host-local addresses still held for sandboxes not in live. It repairs
// what a crash or a reboot leaked.
//
// live must hold every sandbox whose network is wanted, computed from the
// runtime. Sandboxes in a SetupPod of this Network right now, or whose
// SetupPod returned within the last 30 s, are spared even when missing
// from live, so a live set taken just before a pod started does no harm.
func (n *Network) Reconcile(ctx context.Context, live map[string]bool) error {
	spared := n.protected()
	keep := func(id string) bool { return live[id] || spared[id] }

	leaked, err := n.knownIDs()
	if err != nil {
		return err
	}
	var errs []error
	for _, id := range leaked {
		if keep(id) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return errors.Join(append(errs, err)...)
		}
		n.log.Info("tearing down leaked pod network", "sandbox", id)
		if err := n.TeardownPod(ctx, PodNetwork{ID: id}); err != nil {
			errs = append(errs, err)
		}
	}
	released, err := releaseReservations(n.cfg.IPAMDir, func(id string) bool {
		// Re-read: a SetupPod may have begun since the start.
		return !keep(id) && !n.isProtected(id)
	})
	for _, r := range released {
		n.log.Info("released leaked pod IP", "ip", r.IP, "sandbox", r.ContainerID)
	}
	if err != nil {
		errs = append(errs, fmt.Errorf("release leaked IPs in %s: %w", n.cfg.IPAMDir, err))
	}
	return errors.Join(errs...)
}

// knownIDs are the sandboxes with a libcni record or a netns of ours.
func (n *Network) knownIDs() ([]string, error) {
	atts, err := n.cni.GetCachedAttachments("")
	if err != nil {
		return nil, fmt.Errorf("list CNI cache in %s: %w", n.cfg.CacheDir, err)
	}
	ids, err := n.netnsIDs()
	if err != nil {
		return nil, err
	}
	for _, att := range atts {
		if validateID(att.ContainerID) == nil {
			ids = append(ids, att.ContainerID)
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids), nil
}
