package csi

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/fsnotify/fsnotify"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/kubernetes"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// RegistrationDir is the registration socket directory under the
// nodelet's root directory (upstream: /var/lib/kubelet/plugins_registry).
func RegistrationDir(rootDir string) string { return filepath.Join(rootDir, "plugins_registry") }

// Config configures a Watcher.
type Config struct {
	// Dir is the registration socket directory (RegistrationDir).
	Dir      string
	NodeName string
	Client   kubernetes.Interface
	Registry *Registry
	Log      *slog.Logger
	// Resync is the period of the rescan that backs the file events up
	// and retries failed registrations; default 5s.
	Resync time.Duration
	// Timeout bounds each call to a registrar, a driver or the API
	// server; default 10s.
	Timeout time.Duration
}

// Watcher registers the CSI drivers whose registrars put a socket in the
// registration directory, and deregisters them when the socket goes. It
// is upstream's plugin watcher and CSI registration handler in one: file
// events (and a periodic rescan) collect the sockets seen, a plan
// compares them with those registered, the actions carry the plan out.
type Watcher struct {
	cfg  Config
	log  *slog.Logger
	info nodeInfo
	// registered and failed are touched only by Run's goroutine.
	registered map[string]registration
	failed     map[string]string // socket → last error, logged once
	// uninstall holds drivers deregistered whose removal from the API
	// failed; retried at every sync.
	uninstall map[string]bool
	csiNode   bool // the node's CSINode is known to exist
}

// NewWatcher checks cfg and returns a Watcher.
func NewWatcher(cfg Config) (*Watcher, error) {
	if cfg.Dir == "" || cfg.NodeName == "" || cfg.Client == nil || cfg.Registry == nil {
		return nil, errors.New("csi: Dir, NodeName, Client and Registry are required")
	}
	if cfg.Resync <= 0 {
		cfg.Resync = 5 * time.Second
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Watcher{cfg: cfg, log: log, info: nodeInfo{client: cfg.Client, node: cfg.NodeName},
		registered: map[string]registration{}, failed: map[string]string{}, uninstall: map[string]bool{}}, nil
}

// Run watches until ctx ends. Stopping is not deregistering: the drivers
// stay in CSINode (their pods keep running); the Registry's connections
// are closed.
func (w *Watcher) Run(ctx context.Context) error {
	defer w.cfg.Registry.Close()
	if err := os.MkdirAll(w.cfg.Dir, 0o750); err != nil {
		return fmt.Errorf("csi: create registration dir %s: %w", w.cfg.Dir, err)
	}
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("csi: watch %s: %w", w.cfg.Dir, err)
	}
	defer fw.Close()
	if err := fw.Add(w.cfg.Dir); err != nil {
		return fmt.Errorf("csi: watch %s: %w", w.cfg.Dir, err)
	}
	w.log.Info("watching for CSI driver registrations", "dir", w.cfg.Dir)
	tick := time.NewTicker(w.cfg.Resync)
	defer tick.Stop()
	for {
		w.sync(ctx, fw)
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		case ev, ok := <-fw.Events:
			if !ok {
				return errors.New("csi: registration dir watch closed")
			}
			w.log.Debug("registration dir event", "event", ev.String())
			drain(fw.Events)
		case err, ok := <-fw.Errors:
			if !ok {
				return errors.New("csi: registration dir watch closed")
			}
			w.log.Warn("registration dir watch", "err", err) // the rescan covers lost events
		}
	}
}

// drain takes the events already queued: one sync answers them all.
func drain(ch <-chan fsnotify.Event) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}

// sync scans the directory, plans and acts.
func (w *Watcher) sync(ctx context.Context, fw *fsnotify.Watcher) {
	if !w.csiNode {
		if err := w.callAPI(ctx, w.info.ensureCSINode); err != nil {
			w.log.Debug("CSINode not made yet", "err", err)
		} else {
			w.csiNode = true
		}
	}
	for name := range w.uninstall {
		if err := w.callAPI(ctx, func(ctx context.Context) error { return w.info.uninstall(ctx, name) }); err != nil {
			w.log.Warn("remove deregistered CSI driver from the API", "driver", name, "err", err)
			continue
		}
		delete(w.uninstall, name)
	}
	seen, err := scanSockets(w.cfg.Dir, fw)
	if err != nil {
		w.log.Warn("scan registration dir", "err", err)
		return
	}
	for _, a := range plan(seen, w.registered) {
		if ctx.Err() != nil {
			return
		}
		switch a.Kind {
		case actDeregister:
			w.deregister(ctx, a.Socket, w.registered[a.Socket].Name)
			delete(w.registered, a.Socket)
		case actRegister:
			name, err := w.register(ctx, a.Socket)
			if err != nil {
				if w.failed[a.Socket] != err.Error() {
					w.log.Warn("CSI driver registration failed", "socket", a.Socket, "err", err)
					w.failed[a.Socket] = err.Error()
				}
				continue
			}
			delete(w.failed, a.Socket)
			w.registered[a.Socket] = registration{Name: name, ModTime: seen[a.Socket]}
			w.log.Info("CSI driver registered", "driver", name, "socket", a.Socket)
		}
	}
	for sock := range w.failed {
		if _, ok := seen[sock]; !ok {
			delete(w.failed, sock)
		}
	}
}

func (w *Watcher) callAPI(ctx context.Context, f func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, w.cfg.Timeout)
	defer cancel()
	return f(ctx)
}

// scanSockets lists the unix sockets in dir and its subdirectories (names
// starting with "." are skipped, as upstream), with their modification
// times, and adds the subdirectories to fw.
func scanSockets(dir string, fw *fsnotify.Watcher) (map[string]time.Time, error) {
	seen := map[string]time.Time{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // raced with a removal
			}
			return err
		}
		if path != dir && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			if path != dir && fw != nil {
				_ = fw.Add(path) // best effort: the rescan finds what events miss
			}
			return nil
		}
		if d.Type()&fs.ModeSocket == 0 {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil // gone meanwhile
		}
		seen[path] = fi.ModTime()
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("scan %s: %w", dir, err)
	}
	return seen, nil
}

// register asks the registrar at socket for its driver, registers it and
// tells the registrar the outcome. It returns the driver's name.
func (w *Watcher) register(ctx context.Context, socket string) (string, error) {
	conn, err := Dial(socket)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	reg := registerapi.NewRegistrationClient(conn)
	cctx, cancel := context.WithTimeout(ctx, w.cfg.Timeout)
	info, err := reg.GetInfo(cctx, &registerapi.InfoRequest{})
	cancel()
	if err != nil {
		return "", fmt.Errorf("GetInfo from %s: %w", socket, err)
	}
	name, err := w.addDriver(ctx, socket, info)
	if err != nil {
		w.notify(ctx, reg, socket, err)
		return "", err
	}
	if err := w.notify(ctx, reg, socket, nil); err != nil {
		// As upstream: not registered; the next sync tries again.
		w.cfg.Registry.remove(name, socket)
		return "", err
	}
	return name, nil
}

// addDriver validates info, dials the driver, asks NodeGetInfo and
// records the driver in the Registry and the API.
func (w *Watcher) addDriver(ctx context.Context, socket string, info *registerapi.PluginInfo) (string, error) {
	if info.GetType() != registerapi.CSIPlugin {
		return "", fmt.Errorf("no handler registered for plugin type: %s at socket %s", info.GetType(), socket)
	}
	if info.GetName() == "" {
		return "", fmt.Errorf("plugin at socket %s has an empty name", socket)
	}
	if err := supportedVersion(info.GetSupportedVersions()); err != nil {
		return "", fmt.Errorf("validation failed for CSI driver %s at endpoint %s: %w", info.GetName(), info.GetEndpoint(), err)
	}
	endpoint := info.GetEndpoint()
	if endpoint == "" {
		endpoint = socket
	}
	conn, err := Dial(endpoint)
	if err != nil {
		return "", err
	}
	cctx, cancel := context.WithTimeout(ctx, w.cfg.Timeout)
	ni, err := csipb.NewNodeClient(conn).NodeGetInfo(cctx, &csipb.NodeGetInfoRequest{})
	cancel()
	if err != nil {
		conn.Close()
		return "", fmt.Errorf("NodeGetInfo of CSI driver %s at %s: %w", info.GetName(), endpoint, err)
	}
	d := Driver{Name: info.GetName(), Endpoint: strings.TrimPrefix(endpoint, "unix://"), Socket: socket, Versions: info.GetSupportedVersions()}
	w.cfg.Registry.add(d, conn)
	delete(w.uninstall, d.Name)
	if err := w.callAPI(ctx, func(ctx context.Context) error { return w.info.install(ctx, d.Name, ni) }); err != nil {
		w.cfg.Registry.remove(d.Name, socket)
		return "", fmt.Errorf("record CSI driver %s in the API: %w", d.Name, err)
	}
	w.csiNode = true
	return d.Name, nil
}

func (w *Watcher) notify(ctx context.Context, reg registerapi.RegistrationClient, socket string, regErr error) error {
	st := &registerapi.RegistrationStatus{PluginRegistered: regErr == nil}
	if regErr != nil {
		st.Error = regErr.Error()
	}
	cctx, cancel := context.WithTimeout(ctx, w.cfg.Timeout)
	defer cancel()
	if _, err := reg.NotifyRegistrationStatus(cctx, st); err != nil {
		return fmt.Errorf("send registration status to %s: %w", socket, err)
	}
	return nil
}

// deregister removes the driver that socket registered, unless another
// socket registered the name since.
func (w *Watcher) deregister(ctx context.Context, socket, name string) {
	if !w.cfg.Registry.remove(name, socket) {
		return
	}
	w.log.Info("CSI driver deregistered", "driver", name, "socket", socket)
	if err := w.callAPI(ctx, func(ctx context.Context) error { return w.info.uninstall(ctx, name) }); err != nil {
		w.log.Warn("remove deregistered CSI driver from the API", "driver", name, "err", err)
		w.uninstall[name] = true
	}
}

// supportedVersion accepts a list of CSI versions with a 1.x among them,
// as upstream's kubelet (which speaks CSI 1).
func supportedVersion(versions []string) error {
	if len(versions) == 0 {
		return errors.New("no CSI versions reported")
	}
	for _, v := range versions {
		if pv, err := version.ParseGeneric(v); err == nil && pv.Major() == 1 {
			return nil
		}
	}
	return fmt.Errorf("none of the CSI versions reported by this driver are supported: %v", versions)
}
