package volumes

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	pathrs "github.com/cyphar/filepath-securejoin/pathrs-lite"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// SubPath returns the path of vm within its volume: vm.SubPath, or
// vm.SubPathExpr with its $(VAR) references expanded from env (KEY=VALUE
// strings, the container's environment as the runtime computed it; $$ is
// a literal $), as upstream. A reference to a variable that is missing or
// empty is an error, as upstream (the container cannot be created). The
// result must be relative and free of ".." elements; "" means the whole
// volume.
func SubPath(vm corev1.VolumeMount, env []string) (string, error) {
	sub := vm.SubPath
	if vm.SubPathExpr != "" {
		if sub != "" {
			return "", fmt.Errorf("volumeMount %s: subPath and subPathExpr are mutually exclusive", vm.Name)
		}
		var err error
		if sub, err = expandSubPath(vm.SubPathExpr, env); err != nil {
			return "", fmt.Errorf("volumeMount %s: subPathExpr %q: %w", vm.Name, vm.SubPathExpr, err)
		}
	}
	if sub == "" {
		return "", nil
	}
	if path.IsAbs(sub) {
		return "", fmt.Errorf("volumeMount %s: subPath %q must not be an absolute path", vm.Name, sub)
	}
	if hasDotDot(sub) {
		return "", fmt.Errorf("volumeMount %s: subPath %q must not contain '..'", vm.Name, sub)
	}
	if strings.ContainsRune(sub, 0) {
		return "", fmt.Errorf("volumeMount %s: subPath %q must not contain NUL", vm.Name, sub)
	}
	return sub, nil
}

// expandSubPath expands $(VAR) in expr from env as upstream's expansion
// package does: $$ is $, an unterminated $( and a $ before anything else
// stay as they are.
func expandSubPath(expr string, env []string) (string, error) {
	vars := make(map[string]string, len(env))
	for _, kv := range env { // later entries win, as in the container
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	var b strings.Builder
	var missing []string
	for i := 0; i < len(expr); i++ {
		if expr[i] != '$' || i+1 == len(expr) {
			b.WriteByte(expr[i])
			continue
		}
		switch next := expr[i+1]; {
		case next == '$':
			b.WriteByte('$')
			i++
		case next == '(' && strings.IndexByte(expr[i+2:], ')') >= 0:
			end := i + 2 + strings.IndexByte(expr[i+2:], ')')
			name := expr[i+2 : end]
			if vars[name] == "" && !slices.Contains(missing, name) {
				missing = append(missing, name)
			}
			b.WriteString(vars[name])
			i = end
		default:
			b.WriteByte('$')
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return "", fmt.Errorf("missing value for %s", strings.Join(missing, ", "))
	}
	return b.String(), nil
}

func hasDotDot(p string) bool {
	return slices.Contains(strings.Split(p, "/"), "..")
}

// subPathsDir holds the pod's subPath bind mounts.
func (m *Manager) subPathsDir(uid types.UID) string {
	return filepath.Join(m.PodDir(uid), "volume-subpaths")
}

// PrepareSubPath makes sub (from SubPath) of the prepared volume mnt safe
// to bind into a container, as upstream's subpath preparation does. sub is
// resolved inside the volume with every symlink scoped to it
// (openat2 RESOLVE_IN_ROOT or its emulation in
// github.com/cyphar/filepath-securejoin), so neither ".." nor a symlink a
// container planted can lead out of the volume. Missing directories are
// created with the mode of the volume's directory, as upstream; a
// symlink that leads nowhere inside the volume cannot be created through
// and fails, where upstream fails a link out of the volume. The
// resolved file or directory, held open, is bind-mounted onto
// RootDir/pods/<uid>/volume-subpaths/<volume>/<container>/<index>, which is
// returned: the caller binds that path into the container in place of the
// volume (read-only if mnt.ReadOnly or the volumeMount says so), so a
// symlink swapped in after the check cannot redirect the container's
// mount. index is the volumeMount's index in the container's
// volumeMounts. A bind left by an earlier start of the container is
// replaced; TeardownPod removes them all.
func (m *Manager) PrepareSubPath(pod *corev1.Pod, container string, index int, volume string, mnt Mount, sub string) (string, error) {
	if err := checkUID(pod.UID); err != nil {
		return "", err
	}
	if err := errors.Join(checkName(volume), checkName(container)); err != nil || index < 0 {
		return "", fmt.Errorf("prepare subPath %q of volume %q for container %q of pod %s: invalid name or index %d: %v", sub, volume, container, podRef(pod), index, err)
	}
	defer m.locks.lock(pod.UID)()
	target := filepath.Join(m.subPathsDir(pod.UID), volume, container, strconv.Itoa(index))
	if err := bindSubPath(mnt.HostPath, sub, target); err != nil {
		return "", fmt.Errorf("prepare subPath %q of volume %q for container %q of pod %s: %w", sub, volume, container, podRef(pod), err)
	}
	return target, nil
}

func bindSubPath(volumeDir, sub, target string) error {
	fi, err := os.Stat(volumeDir)
	if err != nil {
		return fmt.Errorf("stat volume: %w", err)
	}
	src, err := openSubPath(volumeDir, sub, fi.Mode().Perm())
	if err != nil {
		return err
	}
	defer src.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(src.Fd()), &st); err != nil {
		return fmt.Errorf("stat resolved subPath: %w", err)
	}
	if err := unmountAllBelow(target); err != nil {
		return fmt.Errorf("remove earlier bind: %w", err)
	}
	if err := makeBindTarget(target, st.Mode&unix.S_IFMT == unix.S_IFDIR); err != nil {
		return err
	}
	source := fmt.Sprintf("/proc/self/fd/%d", src.Fd())
	if err := unix.Mount(source, target, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind resolved subPath onto %s: %w", target, err)
	}
	return nil
}

// openSubPath opens sub below volumeDir as an O_PATH handle, resolving it
// inside the volume and creating the directories that are missing (mode
// perm whatever the umask).
func openSubPath(volumeDir, sub string, perm os.FileMode) (*os.File, error) {
	root, err := os.OpenFile(volumeDir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open volume: %w", err)
	}
	defer root.Close()
	f, err := pathrs.OpenatInRoot(root, sub)
	if err == nil || !errors.Is(err, os.ErrNotExist) {
		if err != nil {
			return nil, fmt.Errorf("resolve subPath in volume: %w", err)
		}
		return f, nil
	}
	elems := strings.Split(path.Clean(sub), "/")
	dup, err := unix.FcntlInt(root.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("dup volume handle: %w", err)
	}
	cur := os.NewFile(uintptr(dup), volumeDir)
	for i, e := range elems {
		next, err := pathrs.OpenatInRoot(root, strings.Join(elems[:i+1], "/"))
		if errors.Is(err, os.ErrNotExist) {
			next, err = mkdirIn(cur, e, perm)
		}
		cur.Close()
		if err != nil {
			return nil, fmt.Errorf("create subPath %s in volume: %w", strings.Join(elems[:i+1], "/"), err)
		}
		cur = next
	}
	return cur, nil
}

// mkdirIn creates the directory name in parent and opens it without
// following a symlink, so the handle is the directory just created (or a
// directory someone made first), never a link out of the volume. A
// symlink in the way (one leading nowhere inside the volume, such as an
// absolute link to a host path) is an error, as upstream refuses a
// subPath through a link out of the volume.
func mkdirIn(parent *os.File, name string, perm os.FileMode) (*os.File, error) {
	err := unix.Mkdirat(int(parent.Fd()), name, 0o700)
	existed := errors.Is(err, unix.EEXIST)
	if err != nil && !existed {
		return nil, fmt.Errorf("mkdir %s: %w", name, err)
	}
	fd, err := unix.Openat(int(parent.Fd()), name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if existed {
			return nil, fmt.Errorf("%s is not a directory inside the volume (a symlink leading out of it?): %w", name, err)
		}
		return nil, fmt.Errorf("open created %s: %w", name, err)
	}
	f := os.NewFile(uintptr(fd), name)
	if existed {
		return f, nil
	}
	// chmod through the handle: /proc/self/fd/N is the inode opened.
	if err := os.Chmod(fmt.Sprintf("/proc/self/fd/%d", fd), perm); err != nil {
		f.Close()
		return nil, fmt.Errorf("chmod created %s: %w", name, err)
	}
	return f, nil
}

// makeBindTarget creates target as an empty directory or file, replacing
// one of the other kind.
func makeBindTarget(target string, dir bool) error {
	if err := os.MkdirAll(filepath.Dir(target), 0o750); err != nil {
		return fmt.Errorf("create bind target dir: %w", err)
	}
	if fi, err := os.Lstat(target); err == nil && fi.IsDir() != dir {
		if err := os.RemoveAll(target); err != nil {
			return fmt.Errorf("replace bind target %s: %w", target, err)
		}
	}
	if dir {
		if err := os.Mkdir(target, 0o750); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("create bind target %s: %w", target, err)
		}
		return nil
	}
	f, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY, 0o640)
	if err != nil {
		return fmt.Errorf("create bind target %s: %w", target, err)
	}
	return f.Close()
}

// teardownSubPaths unmounts and removes the pod's subPath binds.
func (m *Manager) teardownSubPaths(uid types.UID) error {
	dir := m.subPathsDir(uid)
	if err := unmountAllBelow(dir); err != nil {
		return fmt.Errorf("tear down subPaths of pod %s: %w", uid, err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove subPath dir of pod %s: %w", uid, err)
	}
	return nil
}
