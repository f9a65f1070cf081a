package images

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/nodelet/nodelet/hosttools"
)

// GoProgram is a command of a module version that the Go module proxy
// serves: a program no one here wrote (a provisioner, a CSI sidecar),
// built from its own source as its own go.mod pins it.
type GoProgram struct {
	Module  string // the module path, e.g. github.com/rancher/local-path-provisioner
	Version string // the module version, e.g. v0.0.30
	Package string // the main package's path inside the module ("" or "." for the root)
	Binary  string // the built file's name
	// VersionVar is the variable the project's own build sets to the
	// version with -X (main.VERSION, main.version), if any.
	VersionVar string
}

func (p GoProgram) String() string {
	return path.Join(p.Module, p.Package) + "@" + p.Version
}

// CacheDirEnv overrides DefaultCacheDir.
const CacheDirEnv = "NODELET_IMAGE_CACHE"

// DefaultCacheDir keeps the binaries built from the module proxy across
// test runs and fresh clones (CI clones anew on the same machine, with the
// Go module and build caches kept), as /var/cache/nodelet-upstream keeps
// scripts/bench-upstream.sh's builds.
const DefaultCacheDir = "/var/cache/nodelet-test-images"

// CacheDir is $NODELET_IMAGE_CACHE, or DefaultCacheDir.
func CacheDir() string {
	if d := os.Getenv(CacheDirEnv); d != "" {
		return d
	}
	return DefaultCacheDir
}

// BuildGoProgram returns the path of p built as a static linux binary
// (CGO_ENABLED=0, -trimpath, stripped) under cacheDir, keyed by module,
// version, package and the go toolchain's version, building it only when
// it is not there yet. The build runs in the module's own directory of the
// module cache (`go mod download`), so its go.mod and go.sum decide every
// dependency, replace directives included, which `go install pkg@version`
// refuses; -mod=readonly keeps that directory as it was.
func BuildGoProgram(cacheDir string, p GoProgram) (string, error) {
	if p.Module == "" || p.Version == "" || p.Binary == "" || strings.Contains(p.Binary, "/") {
		return "", fmt.Errorf("build %s: module, version and a plain binary name are required", p)
	}
	goVersion, err := goEnv("GOVERSION")
	if err != nil {
		return "", fmt.Errorf("build %s: %w", p, err)
	}
	pkg := path.Clean("/" + p.Package)[1:]
	dir := filepath.Join(cacheDir, keyName(p.Module)+"@"+p.Version, goVersion, keyName(pkg))
	out := filepath.Join(dir, p.Binary)
	if fi, err := os.Stat(out); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
		return out, nil
	}
	src, err := downloadModule(p.Module, p.Version)
	if err != nil {
		return "", fmt.Errorf("build %s: %w", p, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("build %s: %w", p, err)
	}
	// Built beside its final name and renamed, so that a concurrent run
	// never sees half a binary.
	tmp, err := os.CreateTemp(dir, "."+p.Binary+"-*")
	if err != nil {
		return "", fmt.Errorf("build %s: %w", p, err)
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	ldflags := "-s -w"
	if p.VersionVar != "" {
		ldflags += " -X " + p.VersionVar + "=" + p.Version
	}
	cmd := hosttools.Command("go", "build", "-C", src, "-mod=readonly", "-trimpath", "-buildvcs=false",
		"-ldflags="+ldflags, "-o", tmp.Name(), "./"+pkg)
	cmd.Env = append(goBuildEnv(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build %s: %w: %s", p, err, b)
	}
	if err := os.Chmod(tmp.Name(), 0o755); err != nil {
		return "", fmt.Errorf("build %s: %w", p, err)
	}
	if err := os.Rename(tmp.Name(), out); err != nil {
		return "", fmt.Errorf("build %s: %w", p, err)
	}
	return out, nil
}

// downloadModule fetches module@version through the module proxy into the
// module cache and returns its directory there.
func downloadModule(mod, version string) (string, error) {
	cmd := hosttools.Command("go", "mod", "download", "-json", mod+"@"+version)
	cmd.Env = goBuildEnv()
	cmd.Dir = os.TempDir() // outside any module
	b, err := cmd.Output()
	// On failure the JSON still comes, with the proxy's answer in Error.
	var info struct{ Dir, Error string }
	if jerr := json.Unmarshal(b, &info); jerr != nil && err == nil {
		err = fmt.Errorf("decode its answer: %w", jerr)
	}
	if info.Error != "" {
		err = errors.Join(err, errors.New(info.Error))
	}
	if err != nil {
		return "", fmt.Errorf("go mod download %s@%s: %w", mod, version, err)
	}
	if info.Dir == "" {
		return "", fmt.Errorf("go mod download %s@%s named no directory", mod, version)
	}
	return info.Dir, nil
}

// keyName is a module or package path as one file name.
func keyName(p string) string {
	if p == "" {
		return "_root"
	}
	return strings.ReplaceAll(p, "/", "_")
}

// goBuildEnv is the environment of the go commands that build programs
// of other modules: the local toolchain only (a go.mod's toolchain line
// must not fetch another), no workspace, and none of the caller's GOFLAGS
// (a module zip keeps vendor/modules.txt but no vendored code, so the
// default -mod=vendor of such a module must be overridden, as the build
// does with -mod=readonly).
func goBuildEnv() []string {
	env := []string{"GOTOOLCHAIN=local", "GOFLAGS=", "GOWORK=off"}
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "GOTOOLCHAIN", "GOFLAGS", "GOWORK", "CGO_ENABLED", "GOOS", "GOARCH":
			continue
		}
		env = append(env, kv)
	}
	return env
}

func goEnv(name string) (string, error) {
	cmd := hosttools.Command("go", "env", name)
	cmd.Env = goBuildEnv()
	b, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go env %s: %w", name, err)
	}
	v := strings.TrimSpace(string(b))
	if v == "" {
		return "", fmt.Errorf("go env %s is empty", name)
	}
	return v, nil
}
