// Package csi is the node side of the Container Storage Interface: the
// kubelet's plugin-registration protocol (a Watcher on the registration
// socket directory, ROOT-DIR/plugins_registry, as upstream's
// plugins_registry), the node's CSINode object and csi.volume.kubernetes.io
// annotation, and a Registry of the registered drivers whose node service
// the volume manager calls.
//
// A driver registers as with upstream's kubelet: its registrar (the
// node-driver-registrar sidecar, or any server of
// k8s.io/kubelet/pkg/apis/pluginregistration/v1) puts a unix socket in the
// registration directory. The Watcher calls GetInfo on it, accepts type
// CSIPlugin with a 1.x version, dials the driver's endpoint (the info's
// Endpoint, else the registration socket itself), asks NodeGetInfo,
// records the driver in CSINode and on the Node, and then tells the
// registrar NotifyRegistrationStatus. Removing the socket deregisters.
package csi

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// ErrNotRegistered is matched (errors.Is) when no driver of a name is
// registered.
var ErrNotRegistered = errors.New("csi: driver not registered")

// Driver is a registered CSI driver.
type Driver struct {
	Name string
	// Endpoint is the path of the driver's unix socket.
	Endpoint string
	// Socket is the registration socket the driver came from.
	Socket string
	// Versions are the CSI versions the registrar announced.
	Versions []string
}

// Registry holds the registered drivers and one gRPC connection to each.
// Its methods may be called concurrently.
type Registry struct {
	mu      sync.Mutex
	drivers map[string]*entry
}

type entry struct {
	Driver
	conn *grpc.ClientConn
}

// NewRegistry returns an empty Registry.
func NewRegistry() *Registry { return &Registry{drivers: map[string]*entry{}} }

// NodeClient returns a client of the named driver's node service.
func (r *Registry) NodeClient(name string) (csipb.NodeClient, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.drivers[name]
	if !ok {
		// Upstream's wording.
		return nil, fmt.Errorf("driver name %s not found in the list of registered CSI drivers: %w", name, ErrNotRegistered)
	}
	return csipb.NewNodeClient(e.conn), nil
}

// Drivers returns the registered drivers sorted by name.
func (r *Registry) Drivers() []Driver {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Driver, 0, len(r.drivers))
	for _, e := range r.drivers {
		out = append(out, e.Driver)
	}
	slices.SortFunc(out, func(a, b Driver) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// add registers d over conn, replacing (and closing) an earlier
// registration of the same name.
func (r *Registry) add(d Driver, conn *grpc.ClientConn) {
	r.mu.Lock()
	old := r.drivers[d.Name]
	r.drivers[d.Name] = &entry{Driver: d, conn: conn}
	r.mu.Unlock()
	if old != nil && old.conn != conn {
		old.conn.Close()
	}
}

// remove deregisters name if it came from socket; it reports whether it
// did.
func (r *Registry) remove(name, socket string) bool {
	r.mu.Lock()
	e, ok := r.drivers[name]
	if ok && e.Socket == socket {
		delete(r.drivers, name)
	}
	r.mu.Unlock()
	if !ok || e.Socket != socket {
		return false
	}
	e.conn.Close()
	return true
}

// Close closes every connection; the Registry is empty afterwards.
func (r *Registry) Close() {
	r.mu.Lock()
	drivers := r.drivers
	r.drivers = map[string]*entry{}
	r.mu.Unlock()
	for _, e := range drivers {
		e.conn.Close()
	}
}

// Dial makes a gRPC client connection to a unix socket, given as a path or
// a unix:// URL (CSI endpoints come in both forms). It connects lazily.
func Dial(endpoint string) (*grpc.ClientConn, error) {
	path := strings.TrimPrefix(endpoint, "unix://")
	if !filepath.IsAbs(path) {
		return nil, fmt.Errorf("csi: endpoint %q is not an absolute unix socket path", endpoint)
	}
	conn, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("csi: dial %s: %w", endpoint, err)
	}
	return conn, nil
}
