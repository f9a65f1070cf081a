package containerd

// Pulls from registries as containerd's CRI plugin makes them for the
// kubelet: containerd's docker resolver, with the hosts of an image's
// registry from a hosts.toml directory (containerd's config_path: mirrors,
// plain-HTTP or self-signed registries, CA certificates), localhost
// registries over plain HTTP without configuration, and the credentials of
// the pod's image pull secrets that match the image, tried in turn as the
// kubelet tries them.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	ctrdclient "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/remotes/docker"
	"github.com/containerd/containerd/v2/core/remotes/docker/config"
	remoteerrors "github.com/containerd/containerd/v2/core/remotes/errors"
	"github.com/containerd/errdefs"

	"github.com/nodelet/nodelet/runtime"
)

// DefaultRegistryConfigDir is where containerd's packages expect hosts.toml
// directories (the config_path of containerd's CRI plugin).
const DefaultRegistryConfigDir = "/etc/containerd/certs.d"

// RegistryConfig configures image pulls.
type RegistryConfig struct {
	// ConfigDir is containerd's config_path: <ConfigDir>/<host>/hosts.toml
	// (a host with a port is written host_port_, e.g. 127.0.0.1_5000_;
	// _default applies to hosts without their own directory) names the
	// mirrors and the server of a registry, with TLS settings and
	// certificates; without one, a registry is reached at https://<host>
	// (localhost and 127.0.0.1 with a port: plain HTTP too). Several
	// directories may be given separated by ':' and are searched in order.
	// Empty: no node-level configuration.
	ConfigDir string
	// MaxParallelPulls bounds the pulls running at once. 0 or 1: one at a
	// time (upstream's serializeImagePulls, on by default); n > 1: up to n
	// (serializeImagePulls false, maxParallelImagePulls n); < 0: no limit
	// (serializeImagePulls false, maxParallelImagePulls unset).
	MaxParallelPulls int
	// ObservePull, optional, is told of every image EnsureImageWith pulled
	// from a registry: how long the pull itself took (waiting for a pull
	// slot not included) and the image's size in bytes
	// (kubelet_image_pull_duration_seconds). Not called for local images
	// nor for failed pulls.
	ObservePull func(took time.Duration, size int64)
}

// registryHosts returns the hosts of a registry for one pull with the
// given credentials (nil: anonymous). They are offered to every host of
// the image's registry (its mirrors too) that asks for them, as
// containerd's CRI offers the kubelet's.
func (c *Runtime) registryHosts(ctx context.Context, cred *runtime.RegistryCredential) docker.RegistryHosts {
	opts := config.HostOptions{}
	if dirs := filepath.SplitList(c.cfg.Registry.ConfigDir); len(dirs) > 0 {
		opts.HostDir = hostDirFromRoots(dirs)
	}
	if cred != nil {
		user, secret := cred.HostCredentials()
		opts.Credentials = func(string) (string, string, error) { return user, secret, nil }
	}
	return config.ConfigureHosts(ctx, opts)
}

// hostDirFromRoots finds a host's directory in the first root that has
// one (containerd's CRI does the same with a config_path list).
func hostDirFromRoots(roots []string) func(string) (string, error) {
	fns := make([]func(string) (string, error), 0, len(roots))
	for _, root := range roots {
		fns = append(fns, config.HostDirFromRoot(root))
	}
	return func(host string) (string, error) {
		for _, fn := range fns {
			dir, err := fn(host)
			if err == nil || !errdefs.IsNotFound(err) {
				return dir, err
			}
		}
		return "", errdefs.ErrNotFound
	}
}

// pullWithCredentials pulls and unpacks name with each credential in turn
// until one works (every one failing fails the pull, with each error), or
// anonymously when there is none, as the kubelet does.
func (c *Runtime) pullWithCredentials(ctx context.Context, name string, creds []runtime.RegistryCredential) (ctrdclient.Image, error) {
	if len(creds) == 0 {
		return c.pullOnce(ctx, name, nil)
	}
	var errs pullErrors
	for i := range creds {
		img, err := c.pullOnce(ctx, name, &creds[i])
		if err == nil {
			return img, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	if len(errs) == 1 {
		return nil, errs[0]
	}
	return nil, errs
}

func (c *Runtime) pullOnce(ctx context.Context, name string, cred *runtime.RegistryCredential) (ctrdclient.Image, error) {
	resolver := docker.NewResolver(docker.ResolverOptions{Hosts: c.registryHosts(ctx, cred)})
	img, err := c.client.Pull(ctx, name,
		ctrdclient.WithResolver(resolver),
		ctrdclient.WithPullUnpack,
		ctrdclient.WithPullSnapshotter(c.cfg.SnapshotterName),
	)
	if err != nil {
		return nil, explainPullError(err, cred != nil)
	}
	return img, nil
}

// explainPullError says plainly when a registry refused the credentials,
// or wanted some and got none: containerd's messages for these cases name
// neither the cause nor the cure.
func explainPullError(err error, withCreds bool) error {
	var status remoteerrors.ErrUnexpectedStatus
	var code string
	switch {
	case errors.As(err, &status) && (status.StatusCode == http.StatusUnauthorized || status.StatusCode == http.StatusForbidden):
		code = status.Status
	case errors.Is(err, docker.ErrInvalidAuthorization):
		code = "401 Unauthorized"
	default:
		return err
	}
	if withCreds {
		return fmt.Errorf("%s: the registry refused the credentials of the image pull secret: %w", code, err)
	}
	return fmt.Errorf("%s: the registry requires credentials and no image pull secret matches the image: %w", code, err)
}

// pullErrors are the failures of a pull tried with several credentials.
type pullErrors []error

func (e pullErrors) Error() string {
	msgs := make([]string, len(e))
	for i, err := range e {
		msgs[i] = err.Error()
	}
	return "[" + strings.Join(msgs, ", ") + "]"
}

func (e pullErrors) Unwrap() []error { return e }
