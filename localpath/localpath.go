// Package localpath is the node's side of the built-in local-path volumes
// (the control plane's provisioner, controlplane/controllers/localpath):
// the names both sides agree on, and the loop that removes the directories
// of deleted volumes. The provisioner lists them on the Node
// (AnnotationCleanup); Run removes each one that lies directly under the
// node's own directory and takes it off the list, so a directory is never
// removed twice and nothing outside the node's directory ever is,
// whatever the annotation says. Directories are made by the volumes
// manager when a pod first mounts the volume.
package localpath

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
)

// Names the provisioner and the nodes agree on.
const (
	// Provisioner is the class's provisioner and its volumes' provisioned-by.
	Provisioner = "nodelet.io/local-path"
	// AnnotationDir on a Node is the directory its agent keeps local-path
	// volumes in (--local-path-dir).
	AnnotationDir = "nodelet.io/local-path-dir"
	// AnnotationCleanup on a Node lists, as a JSON array, the directories
	// of deleted volumes its agent is to remove.
	AnnotationCleanup = "nodelet.io/local-path-cleanup"
)

// CleanupList reads a Node's AnnotationCleanup (malformed: empty).
func CleanupList(node *corev1.Node) []string {
	var dirs []string
	if v := node.Annotations[AnnotationCleanup]; v != "" {
		if json.Unmarshal([]byte(v), &dirs) != nil {
			return nil
		}
	}
	return dirs
}

// CleanupValue is the annotation's value for dirs ("" for none).
func CleanupValue(dirs []string) string {
	if len(dirs) == 0 {
		return ""
	}
	b, _ := json.Marshal(dirs)
	return string(b)
}

// BaseMarker is the file a node leaves in a directory other than its own
// that it made a local-path volume in (a class's nodePath): only there,
// besides its own directory, does it remove volume directories.
const BaseMarker = ".nodelet-local-path"

// Removable tells whether dir may be removed by a node whose local-path
// directory is base: a direct child of base, named as the provisioner
// names volumes (pvc-...).
func Removable(base, dir string) bool {
	return base != "" && volumeDirName(dir) && filepath.Dir(dir) == filepath.Clean(base)
}

// volumeDirName: dir is clean, absolute and named as the provisioner names
// volumes.
func volumeDirName(dir string) bool {
	return filepath.IsAbs(dir) && filepath.Clean(dir) == dir && strings.HasPrefix(filepath.Base(dir), "pvc-")
}

// MarkBase leaves BaseMarker in base, the directory of a volume the node
// is making (its own directory included: harmless there).
func MarkBase(base string) error {
	f, err := os.OpenFile(filepath.Join(base, BaseMarker), os.O_CREATE|os.O_WRONLY|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return fmt.Errorf("mark local-path directory %s: %w", base, err)
	}
	return f.Close()
}

// removableHere is Removable, or a volume directory in a base the node
// marked (a regular file, not a link: a pod never sees the base).
func removableHere(base, dir string) bool {
	if Removable(base, dir) {
		return true
	}
	if !volumeDirName(dir) {
		return false
	}
	fi, err := os.Lstat(filepath.Join(filepath.Dir(dir), BaseMarker))
	return err == nil && fi.Mode().IsRegular()
}

// Config configures the cleanup loop.
type Config struct {
	Client   kubernetes.Interface
	NodeName string
	// Dir is the node's local-path directory.
	Dir string
	Log *slog.Logger
}

// Run removes the directories listed on this node's Node until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Client == nil || cfg.NodeName == "" || cfg.Dir == "" {
		return errors.New("localpath: Client, NodeName and Dir are required")
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	f := informers.NewSharedInformerFactoryWithOptions(cfg.Client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", cfg.NodeName).String()
	}))
	wake := make(chan struct{}, 1)
	poke := func(any) {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	inf := f.Core().V1().Nodes().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: poke, UpdateFunc: func(_, n any) { poke(n) }}); err != nil {
		return fmt.Errorf("localpath: %w", err)
	}
	f.Start(ctx.Done())
	defer f.Shutdown()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-wake:
		}
		node, err := f.Core().V1().Nodes().Lister().Get(cfg.NodeName)
		if err != nil || len(CleanupList(node)) == 0 {
			continue
		}
		if err := cleanup(ctx, cfg, CleanupList(node), log); err != nil {
			log.Warn("local-path cleanup", "err", err)
			poke(nil)
		}
	}
}

// cleanup removes dirs (the removable ones) and takes every one of them
// off the node's list.
func cleanup(ctx context.Context, cfg Config, dirs []string, log *slog.Logger) error {
	var done []string
	for _, dir := range dirs {
		if !removableHere(cfg.Dir, dir) {
			log.Warn("refused to remove a local-path directory outside the node's", "dir", dir, "localPathDir", cfg.Dir)
			done = append(done, dir)
			continue
		}
		if err := os.RemoveAll(dir); err != nil {
			log.Warn("remove local-path directory", "dir", dir, "err", err)
			continue
		}
		log.Info("removed the directory of a deleted volume", "dir", dir)
		done = append(done, dir)
	}
	if len(done) == 0 {
		return nil
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		nodes := cfg.Client.CoreV1().Nodes()
		n, err := nodes.Get(ctx, cfg.NodeName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		left := slices.DeleteFunc(CleanupList(n), func(d string) bool { return slices.Contains(done, d) })
		if v := CleanupValue(left); v != "" {
			n.Annotations[AnnotationCleanup] = v
		} else {
			delete(n.Annotations, AnnotationCleanup)
		}
		_, err = nodes.Update(ctx, n, metav1.UpdateOptions{})
		return err
	})
}
