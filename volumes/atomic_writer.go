package volumes

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

const (
	// dataDirName is the symlink to the current timestamped directory.
	dataDirName = "..data"
	// newDataDirName is the symlink renamed over dataDirName in a swap.
	newDataDirName    = "..data_tmp"
	maxFileNameLength = 255
	maxPathLength     = 4096
	// tsDirPerm lets any container user walk into the data.
	tsDirPerm os.FileMode = 0o755
	// fsGroupFileBits and fsGroupDirBits are added for a pod's fsGroup to
	// the files and directories of a read-only volume, as upstream.
	fsGroupFileBits os.FileMode = 0o440
	fsGroupDirBits  os.FileMode = 0o550 | os.ModeSetgid
)

// FileProjection is one file of an AtomicWriter payload.
type FileProjection struct {
	Data []byte
	// Mode holds the file's permission bits, 0 to 0777.
	Mode os.FileMode
}

// AtomicWriter projects a set of files into a directory so that readers
// see either the old set or the new one, never a mix, as upstream's
// AtomicWriter does. The files live in a hidden timestamped directory
// (..2006_01_02_15_04_05.NNN); the ..data symlink points at it; each
// top-level name of the payload is a symlink into ..data ("key" ->
// "..data/key", "dir" -> "..data/dir"). A write fills a new timestamped
// directory, renames a new ..data over the old one (the atomic step), adds
// the new visible links, then removes the visible links that left the
// payload and the old directory.
//
// Names starting with ".." are reserved. Writes to one directory must be
// serialized by the caller.
type AtomicWriter struct {
	// Dir is the volume directory; it must exist.
	Dir string
	// FSGroup, when set, gives the written files and directories this
	// group and makes them group-readable (directories also setgid), as
	// upstream applies a pod's fsGroup to a read-only volume.
	FSGroup *int64
}

// Write projects payload (path -> file) into w.Dir. It does nothing and
// returns false when the directory already holds exactly this payload
// (contents, modes, group); otherwise it writes a new version and returns
// true. On failure the previous version stays visible.
func (w *AtomicWriter) Write(payload map[string]FileProjection) (bool, error) {
	clean, err := validatePayload(payload)
	if err != nil {
		return false, fmt.Errorf("write volume %s: %w", w.Dir, err)
	}
	oldTs, err := w.currentTsDir()
	if err != nil {
		return false, err
	}
	if oldTs != "" {
		oldFiles, err := readTree(filepath.Join(w.Dir, oldTs))
		if err != nil {
			return false, fmt.Errorf("write volume %s: read current data: %w", w.Dir, err)
		}
		same, err := w.holds(clean, oldTs, oldFiles)
		if err != nil {
			return false, err
		}
		if same {
			return false, nil
		}
	}
	tsName, err := w.writeTsDir(clean)
	if err != nil {
		return false, err
	}
	if err := w.swap(tsName); err != nil {
		_ = os.RemoveAll(filepath.Join(w.Dir, tsName))
		return false, err
	}
	if err := w.linkVisible(clean); err != nil {
		return true, err
	}
	return true, w.removeStale(topNames(clean), tsName)
}

// validatePayload checks every path as validatePath does and returns the
// payload with cleaned paths.
func validatePayload(payload map[string]FileProjection) (map[string]FileProjection, error) {
	clean := make(map[string]FileProjection, len(payload))
	for p, f := range payload {
		if err := validatePath(p); err != nil {
			return nil, err
		}
		if f.Mode&^os.ModePerm != 0 {
			return nil, fmt.Errorf("invalid mode %#o of %s: only permission bits (0-0777) are allowed", uint32(f.Mode), p)
		}
		c := path.Clean(p)
		if _, dup := clean[c]; dup {
			return nil, fmt.Errorf("invalid path %s: the same as another path once cleaned", p)
		}
		clean[c] = f
	}
	// A file cannot also be a directory of another file.
	for p := range clean {
		for dir := path.Dir(p); dir != "."; dir = path.Dir(dir) {
			if _, ok := clean[dir]; ok {
				return nil, fmt.Errorf("invalid path %s: %s is a file", p, dir)
			}
		}
	}
	return clean, nil
}

// validatePath checks a payload path as upstream does: not empty, relative,
// at most 4096 bytes, no element "..", no element longer than 255 bytes,
// and not starting with ".." (reserved for the writer's own entries).
func validatePath(p string) error {
	switch {
	case p == "":
		return errors.New("invalid path: must not be empty")
	case path.IsAbs(p):
		return fmt.Errorf("invalid path %s: must be relative", p)
	case len(p) > maxPathLength:
		return fmt.Errorf("invalid path: must be at most %d characters", maxPathLength)
	case strings.ContainsRune(p, 0):
		return fmt.Errorf("invalid path %q: must not contain NUL", p)
	}
	elems := strings.Split(p, "/")
	for _, e := range elems {
		if e == ".." {
			return fmt.Errorf("invalid path %s: must not contain '..'", p)
		}
		if len(e) > maxFileNameLength {
			return fmt.Errorf("invalid path: file names must be at most %d characters", maxFileNameLength)
		}
	}
	if strings.HasPrefix(elems[0], "..") {
		return fmt.Errorf("invalid path %s: must not start with '..'", p)
	}
	if path.Clean(p) == "." {
		return fmt.Errorf("invalid path %s: names no file", p)
	}
	return nil
}

// currentTsDir returns the name of the timestamped directory ..data points
// at, "" if there is none (first write, or a crash left a dangling link).
func (w *AtomicWriter) currentTsDir() (string, error) {
	target, err := os.Readlink(filepath.Join(w.Dir, dataDirName))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("write volume %s: read %s: %w", w.Dir, dataDirName, err)
	}
	if strings.Contains(target, "/") || !strings.HasPrefix(target, "..") || target == dataDirName {
		return "", fmt.Errorf("write volume %s: %s points at %q, not at a data directory", w.Dir, dataDirName, target)
	}
	if _, err := os.Lstat(filepath.Join(w.Dir, target)); errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	return target, nil
}

// readTree lists the regular files below dir by relative path.
func readTree(dir string) (map[string]fs.FileInfo, error) {
	files := map[string]fs.FileInfo{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		files[filepath.ToSlash(rel)] = fi
		return nil
	})
	return files, err
}

// holds reports whether the data directory oldTs (with oldFiles) already
// has payload and the visible links lead to it.
func (w *AtomicWriter) holds(payload map[string]FileProjection, oldTs string, oldFiles map[string]fs.FileInfo) (bool, error) {
	if len(oldFiles) != len(payload) {
		return false, nil
	}
	for p, f := range payload {
		fi, ok := oldFiles[p]
		if !ok || fi.Mode().Perm() != w.fileMode(f.Mode) || fi.Size() != int64(len(f.Data)) || !w.groupMatches(fi) {
			return false, nil
		}
		data, err := os.ReadFile(filepath.Join(w.Dir, oldTs, p))
		if err != nil {
			return false, fmt.Errorf("write volume %s: compare %s: %w", w.Dir, p, err)
		}
		if !bytes.Equal(data, f.Data) {
			return false, nil
		}
	}
	links, err := w.visibleLinks()
	if err != nil {
		return false, err
	}
	return slices.Equal(links, topNames(payload)), nil
}

// visibleLinks returns the sorted names in w.Dir that are the writer's
// links (name -> ..data/name).
func (w *AtomicWriter) visibleLinks() ([]string, error) {
	entries, err := os.ReadDir(w.Dir)
	if err != nil {
		return nil, fmt.Errorf("write volume %s: list: %w", w.Dir, err)
	}
	var names []string
	for _, e := range entries {
		if e.Type()&fs.ModeSymlink == 0 || strings.HasPrefix(e.Name(), "..") {
			continue
		}
		if target, err := os.Readlink(filepath.Join(w.Dir, e.Name())); err == nil && target == visibleTarget(e.Name()) {
			names = append(names, e.Name())
		}
	}
	return names, nil // ReadDir sorts
}

// fileMode is the mode a payload file gets on disk.
func (w *AtomicWriter) fileMode(m os.FileMode) os.FileMode {
	if w.FSGroup != nil {
		return m | fsGroupFileBits
	}
	return m
}

func (w *AtomicWriter) groupMatches(fi fs.FileInfo) bool {
	if w.FSGroup == nil {
		return true
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int64(st.Gid) == *w.FSGroup
}

// writeTsDir writes payload into a new timestamped directory and returns
// its name; on failure nothing of it is left.
func (w *AtomicWriter) writeTsDir(payload map[string]FileProjection) (name string, retErr error) {
	ts, err := os.MkdirTemp(w.Dir, time.Now().UTC().Format("..2006_01_02_15_04_05."))
	if err != nil {
		return "", fmt.Errorf("write volume %s: create data directory: %w", w.Dir, err)
	}
	defer func() {
		if retErr != nil {
			_ = os.RemoveAll(ts)
		}
	}()
	if err := w.chmodDir(ts); err != nil {
		return "", err
	}
	paths := make([]string, 0, len(payload))
	for p := range payload {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, p := range paths {
		if err := w.mkdirs(ts, path.Dir(p)); err != nil {
			return "", err
		}
		if err := w.writeFile(filepath.Join(ts, p), payload[p]); err != nil {
			return "", err
		}
	}
	return filepath.Base(ts), nil
}

// mkdirs creates the directories of rel (slash-separated) below ts.
func (w *AtomicWriter) mkdirs(ts, rel string) error {
	if rel == "." {
		return nil
	}
	if err := w.mkdirs(ts, path.Dir(rel)); err != nil {
		return err
	}
	dir := filepath.Join(ts, rel)
	if err := os.Mkdir(dir, tsDirPerm); err != nil {
		if errors.Is(err, os.ErrExist) {
			return nil
		}
		return fmt.Errorf("write volume %s: create directory %s: %w", w.Dir, rel, err)
	}
	return w.chmodDir(dir)
}

// chmodDir gives a directory of the data its mode whatever the umask, and
// the fsGroup when there is one.
func (w *AtomicWriter) chmodDir(dir string) error {
	mode := tsDirPerm
	if w.FSGroup != nil {
		if err := os.Lchown(dir, -1, int(*w.FSGroup)); err != nil {
			return fmt.Errorf("write volume %s: chown %s to group %d: %w", w.Dir, dir, *w.FSGroup, err)
		}
		mode |= fsGroupDirBits
	}
	if err := os.Chmod(dir, mode); err != nil {
		return fmt.Errorf("write volume %s: chmod %s: %w", w.Dir, dir, err)
	}
	return nil
}

// writeFile creates the file p (which must not exist) with f.
func (w *AtomicWriter) writeFile(p string, f FileProjection) (retErr error) {
	file, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return fmt.Errorf("write volume %s: create %s: %w", w.Dir, p, err)
	}
	defer func() {
		if err := file.Close(); err != nil && retErr == nil {
			retErr = fmt.Errorf("write volume %s: close %s: %w", w.Dir, p, err)
		}
	}()
	if _, err := file.Write(f.Data); err != nil {
		return fmt.Errorf("write volume %s: write %s: %w", w.Dir, p, err)
	}
	if w.FSGroup != nil {
		if err := file.Chown(-1, int(*w.FSGroup)); err != nil {
			return fmt.Errorf("write volume %s: chown %s to group %d: %w", w.Dir, p, *w.FSGroup, err)
		}
	}
	// fchmod, as the mode given to open is masked by the umask.
	if err := file.Chmod(w.fileMode(f.Mode)); err != nil {
		return fmt.Errorf("write volume %s: chmod %s: %w", w.Dir, p, err)
	}
	return nil
}

// swap points ..data at tsName atomically: a new link renamed over it.
func (w *AtomicWriter) swap(tsName string) error {
	tmp := filepath.Join(w.Dir, newDataDirName)
	if err := os.Remove(tmp); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("write volume %s: remove stale %s: %w", w.Dir, newDataDirName, err)
	}
	if err := os.Symlink(tsName, tmp); err != nil {
		return fmt.Errorf("write volume %s: link %s: %w", w.Dir, newDataDirName, err)
	}
	if err := os.Rename(tmp, filepath.Join(w.Dir, dataDirName)); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write volume %s: rename %s to %s: %w", w.Dir, newDataDirName, dataDirName, err)
	}
	return nil
}

// linkVisible makes every top-level name of payload a symlink into ..data.
// A wrong symlink is replaced atomically; anything else in the way is an
// error (the writer never deletes what it did not create).
func (w *AtomicWriter) linkVisible(payload map[string]FileProjection) error {
	for _, name := range topNames(payload) {
		link := filepath.Join(w.Dir, name)
		target, err := os.Readlink(link)
		switch {
		case err == nil && target == visibleTarget(name):
			continue
		case errors.Is(err, os.ErrNotExist):
			if err := os.Symlink(visibleTarget(name), link); err != nil {
				return fmt.Errorf("write volume %s: link %s: %w", w.Dir, name, err)
			}
		case err == nil: // a symlink to elsewhere: replace it
			tmp := filepath.Join(w.Dir, "..link_tmp")
			_ = os.Remove(tmp)
			if err := os.Symlink(visibleTarget(name), tmp); err != nil {
				return fmt.Errorf("write volume %s: link %s: %w", w.Dir, name, err)
			}
			if err := os.Rename(tmp, link); err != nil {
				_ = os.Remove(tmp)
				return fmt.Errorf("write volume %s: replace link %s: %w", w.Dir, name, err)
			}
		default:
			return fmt.Errorf("write volume %s: %s is in the way of the link into %s: %w", w.Dir, name, dataDirName, err)
		}
	}
	return nil
}

// removeStale removes the writer's links whose names are no longer in the
// payload, then every reserved entry but ..data and the current data
// directory (the previous data directory, leftovers of failed writes).
// What the writer did not create stays.
func (w *AtomicWriter) removeStale(newNames []string, tsName string) error {
	links, err := w.visibleLinks()
	if err != nil {
		return err
	}
	var errs []error
	for _, name := range links {
		if slices.Contains(newNames, name) {
			continue
		}
		if err := os.Remove(filepath.Join(w.Dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("write volume %s: remove old link %s: %w", w.Dir, name, err))
		}
	}
	entries, err := os.ReadDir(w.Dir)
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("write volume %s: list: %w", w.Dir, err))...)
	}
	for _, e := range entries {
		n := e.Name()
		if !strings.HasPrefix(n, "..") || n == dataDirName || n == tsName {
			continue
		}
		if err := os.RemoveAll(filepath.Join(w.Dir, n)); err != nil {
			errs = append(errs, fmt.Errorf("write volume %s: remove old %s: %w", w.Dir, n, err))
		}
	}
	return errors.Join(errs...)
}

// topNames returns the sorted first elements of the paths in m.
func topNames[V any](m map[string]V) []string {
	set := make(map[string]bool, len(m))
	for p := range m {
		top, _, _ := strings.Cut(p, "/")
		set[top] = true
	}
	names := make([]string, 0, len(set))
	for n := range set {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

func visibleTarget(name string) string { return dataDirName + "/" + name }
