package network

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"

	"github.com/containernetworking/cni/libcni"
	cnitypes "github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"
)

// SetupPod gives sandbox p.ID a network: a named netns with lo up, then
// CNI ADD of the configured network on eth0. Calling it again for a
// sandbox that is set up returns the existing result. On failure,
// everything it did is undone before the error is returned.
func (n *Network) SetupPod(ctx context.Context, p PodNetwork) (_ Result, retErr error) {
	if err := validateID(p.ID); err != nil {
		return Result{}, err
	}
	n.beginSetup(p.ID)
	defer func() { n.endSetup(p.ID, retErr == nil) }()

	list, err := n.loadNetworkList()
	if err != nil {
		return Result{}, fmt.Errorf("set up network of sandbox %s: %w", p.ID, err)
	}
	nsPath := n.NetNSPath(p.ID)
	switch res, state := n.existingSetup(p.ID, nsPath); state {
	case setupComplete:
		return res, nil
	case setupPartial: // an interrupted earlier attempt: clear it first
		if err := n.TeardownPod(ctx, p); err != nil {
			return Result{}, fmt.Errorf("clean up earlier network of sandbox %s: %w", p.ID, err)
		}
	}

	if err := createNetNS(nsPath); err != nil {
		return Result{}, fmt.Errorf("set up network of sandbox %s: %w", p.ID, err)
	}
	rt := runtimeConf(p, nsPath)
	defer func() {
		if retErr == nil {
			return
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		if err := n.cni.DelNetworkList(cctx, list, rt); err != nil {
			n.log.Warn("roll back CNI ADD", "sandbox", p.ID, "err", err)
		}
		if err := removeNetNS(nsPath); err != nil {
			n.log.Warn("roll back netns", "sandbox", p.ID, "err", err)
		}
	}()
	if err := setLoopbackUp(nsPath); err != nil {
		return Result{}, fmt.Errorf("set up network of sandbox %s: %w", p.ID, err)
	}
	cniRes, err := n.cni.AddNetworkList(ctx, list, rt)
	if err != nil {
		return Result{}, fmt.Errorf("CNI ADD of network %s for sandbox %s (pod %s/%s): %w",
			list.Name, p.ID, p.Namespace, p.Name, err)
	}
	res, err := toResult(cniRes, nsPath)
	if err != nil {
		return Result{}, fmt.Errorf("CNI ADD of network %s for sandbox %s: %w", list.Name, p.ID, err)
	}
	n.log.Debug("pod network set up", "sandbox", p.ID, "pod", p.Namespace+"/"+p.Name, "ip", res.IP, "netns", nsPath)
	return res, nil
}

type setupState int

const (
	setupNone     setupState = iota // no trace of the sandbox
	setupPartial                    // a netns or a CNI record, not both
	setupComplete                   // a live netns and a usable ADD result
)

// existingSetup looks for an earlier SetupPod of sandbox id and returns
// its result when it completed.
func (n *Network) existingSetup(id, nsPath string) (Result, setupState) {
	_, statErr := os.Lstat(nsPath)
	atts, err := n.cni.GetCachedAttachments(id)
	if err != nil || len(atts) == 0 {
		if statErr == nil {
			return Result{}, setupPartial
		}
		return Result{}, setupNone
	}
	if !isNetNS(nsPath) {
		return Result{}, setupPartial
	}
	att := atts[0]
	list, err := libcni.NetworkConfFromBytes(att.Config)
	if err != nil {
		return Result{}, setupPartial
	}
	cached, err := n.cni.GetNetworkListCachedResult(list, &libcni.RuntimeConf{ContainerID: id, IfName: att.IfName})
	if err != nil || cached == nil {
		return Result{}, setupPartial
	}
	res, err := toResult(cached, nsPath)
	if err != nil {
		return Result{}, setupPartial
	}
	return res, setupComplete
}

// runtimeConf is the CNI invocation for a pod: the CNI_ARGS every
// Kubernetes runtime passes, and the hostPorts for portmap.
func runtimeConf(p PodNetwork, nsPath string) *libcni.RuntimeConf {
	rt := &libcni.RuntimeConf{
		ContainerID: p.ID,
		NetNS:       nsPath,
		IfName:      ifName,
		Args: [][2]string{
			{"IgnoreUnknown", "1"},
			{"K8S_POD_NAMESPACE", p.Namespace},
			{"K8S_POD_NAME", p.Name},
			{"K8S_POD_INFRA_CONTAINER_ID", p.ID},
			{"K8S_POD_UID", p.UID},
		},
	}
	if pms := portMappings(p.PortMappings); len(pms) > 0 {
		rt.CapabilityArgs = map[string]any{"portMappings": pms}
	}
	return rt
}

// cniPortMapping is the portMappings capability entry portmap reads.
type cniPortMapping struct {
	HostPort      int32  `json:"hostPort"`
	ContainerPort int32  `json:"containerPort"`
	Protocol      string `json:"protocol"`
	HostIP        string `json:"hostIP,omitempty"`
}

func portMappings(pms []PortMapping) []cniPortMapping {
	var out []cniPortMapping
	for _, pm := range pms {
		if pm.HostPort <= 0 {
			continue
		}
		proto := strings.ToLower(pm.Protocol)
		if proto == "" {
			proto = "tcp"
		}
		out = append(out, cniPortMapping{
			HostPort: pm.HostPort, ContainerPort: pm.ContainerPort, Protocol: proto, HostIP: pm.HostIP,
		})
	}
	return out
}

// toResult picks the pod's addresses out of a CNI result: those on the
// interface inside the netns (or on no interface in particular).
func toResult(r cnitypes.Result, nsPath string) (Result, error) {
	res, err := types100.NewResultFromResult(r)
	if err != nil {
		return Result{}, fmt.Errorf("convert CNI result: %w", err)
	}
	out := Result{NetNSPath: nsPath}
	for _, ipc := range res.IPs {
		if ipc.Interface != nil {
			i := *ipc.Interface
			if i < 0 || i >= len(res.Interfaces) || res.Interfaces[i].Sandbox == "" {
				continue
			}
		}
		addr, ok := netip.AddrFromSlice(ipc.Address.IP)
		if !ok {
			continue
		}
		out.IPs = append(out.IPs, addr.Unmap())
	}
	if len(out.IPs) == 0 {
		return Result{}, errors.New("CNI result holds no pod address")
	}
	out.IP = out.IPs[0]
	for _, a := range out.IPs {
		if a.Is4() {
			out.IP = a
			break
		}
	}
	return out, nil
}

// TeardownPod undoes SetupPod: CNI DEL of every network libcni recorded
// for the sandbox, with the config and arguments used at ADD (so it works
// after the config changed or the nodelet restarted), then removal of the
// netns. A netns that is already gone is passed to CNI as none, as the
// spec allows; anything missing counts as done. Safe to call repeatedly.
func (n *Network) TeardownPod(ctx context.Context, p PodNetwork) error {
	if err := validateID(p.ID); err != nil {
		return err
	}
	n.forget(p.ID)
	nsPath := n.NetNSPath(p.ID)
	delNS := ""
	if isNetNS(nsPath) {
		delNS = nsPath
	}
	atts, err := n.cni.GetCachedAttachments(p.ID)
	if err != nil {
		return fmt.Errorf("read CNI cache of sandbox %s: %w", p.ID, err)
	}
	if len(atts) > 0 {
		for _, att := range atts {
			if err := n.delAttachment(ctx, att, delNS); err != nil {
				return err
			}
		}
	} else if err := n.delUncached(ctx, p, delNS); err != nil {
		return err
	}
	if err := removeNetNS(nsPath); err != nil {
		return fmt.Errorf("tear down network of sandbox %s: %w", p.ID, err)
	}
	return nil
}

// delAttachment runs CNI DEL for one recorded ADD.
func (n *Network) delAttachment(ctx context.Context, att *libcni.NetworkAttachment, nsPath string) error {
	list, err := libcni.NetworkConfFromBytes(att.Config)
	if err != nil {
		return fmt.Errorf("parse cached CNI config %s of sandbox %s: %w", att.Network, att.ContainerID, err)
	}
	rt := &libcni.RuntimeConf{
		ContainerID:    att.ContainerID,
		NetNS:          nsPath,
		IfName:         att.IfName,
		Args:           att.CniArgs,
		CapabilityArgs: att.CapabilityArgs,
	}
	if err := n.cni.DelNetworkList(ctx, list, rt); err != nil {
		return fmt.Errorf("CNI DEL of network %s for sandbox %s: %w", list.Name, att.ContainerID, err)
	}
	return nil
}

// delUncached cleans up after an ADD that left no record (interrupted by
// a crash): CNI DEL with the current config when a netns or an address is
// left, then release of any address host-local still holds for the sandbox.
func (n *Network) delUncached(ctx context.Context, p PodNetwork, nsPath string) error {
	held, err := n.holdsAddress(p.ID)
	if err != nil {
		return err
	}
	if nsPath == "" && !held {
		return nil
	}
	list, err := n.loadNetworkList()
	switch {
	case errors.Is(err, ErrNoConfig):
		n.log.Warn("no CNI config to DEL with; releasing addresses only", "sandbox", p.ID)
	case err != nil:
		return err
	default:
		if err := n.cni.DelNetworkList(ctx, list, runtimeConf(p, nsPath)); err != nil {
			return fmt.Errorf("CNI DEL of network %s for sandbox %s: %w", list.Name, p.ID, err)
		}
	}
	if !held {
		return nil
	}
	_, err = releaseReservations(n.cfg.IPAMDir, func(id string) bool { return id == p.ID })
	return err
}

// holdsAddress reports whether host-local holds an address for id.
func (n *Network) holdsAddress(id string) (bool, error) {
	rs, err := reservations(n.cfg.IPAMDir)
	if err != nil {
		return false, err
	}
	for _, r := range rs {
		if r.ContainerID == id {
			return true, nil
		}
	}
	return false, nil
}

// netnsIDs are the sandbox ids that have a netns file under NetNSDir.
func (n *Network) netnsIDs() ([]string, error) {
	entries, err := os.ReadDir(n.cfg.NetNSDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list netns dir %s: %w", n.cfg.NetNSDir, err)
	}
	var ids []string
	for _, e := range entries {
		if e.IsDir() || validateID(e.Name()) != nil {
			continue
		}
		ids = append(ids, e.Name())
	}
	return ids, nil
}
