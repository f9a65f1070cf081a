package images

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/nodelet/nodelet/hosttools"
)

// References of the test images.
const (
	BusyboxRef = "docker.io/library/busybox:1.36"
	NginxRef   = "docker.io/library/nginx:1.22"
	// Nginx123Ref is the same image under a second tag, for rollouts.
	Nginx123Ref = "docker.io/library/nginx:1.23"
	// PauseRef names the nodelet's own pause image; the "-nodelet" suffix
	// keeps it apart from upstream's registry.k8s.io/pause:3.10.
	PauseRef = "registry.k8s.io/pause:3.10-nodelet"
)

// Host binaries the images are made of.
const (
	BusyboxBinary = "/bin/busybox"    // Debian's busybox-static
	NginxBinary   = "/usr/sbin/nginx" // Debian's nginx-light
)

const imagePath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// BusyboxApplets are linked to busybox in /bin.
var busyboxApplets = []string{"sh", "sleep", "cat", "echo", "ls", "wget", "nc", "httpd", "env", "id", "ps", "kill", "true", "false", "test", "mkdir", "rm", "touch", "hostname", "ip", "ifconfig", "grep", "tail", "head", "date", "printf",
	"tar", "gzip", "gunzip", "zcat", "md5sum", "sha256sum", "tty", "stty", "wc", "sed", "awk", "find", "cp", "mv", "ln",
	"chmod", "dd", "seq", "sort", "uniq", "tr", "cut", "xargs", "uname", "which", "df", "du", "stat", "base64", "expr",
	"basename", "dirname", "readlink", "yes", "od", "vi", "nslookup", "ping", "sync", "mount", "top", "free", "uptime"}

func hostPlatform() ocispec.Platform {
	return ocispec.Platform{OS: "linux", Architecture: goruntime.GOARCH}
}

// baseFiles are the directories and files every test image has.
func baseFiles() []entry {
	passwd := "root:x:0:0:root:/root:/bin/sh\nwww-data:x:33:33:www-data:/var/www:/bin/false\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"
	group := "root:x:0:\nwww-data:x:33:\nnogroup:x:65534:\n"
	return []entry{
		dirEntry("/bin"), dirEntry("/dev"), dirEntry("/etc"), dirEntry("/proc"), dirEntry("/sys"),
		dirEntry("/root"), dirEntry("/run"), dirEntry("/var"),
		{path: "/tmp", mode: 0o1777, dir: true},
		fileEntry("/etc/passwd", []byte(passwd), 0o644),
		fileEntry("/etc/group", []byte(group), 0o644),
	}
}

// Busybox writes the busybox image (BusyboxRef) into dir and returns the
// archive's path and reference. Its default command is sh.
func Busybox(dir string) (string, string, error) {
	if err := hosttools.Check(BusyboxBinary); err != nil {
		return "", "", fmt.Errorf("busybox image: %w", err)
	}
	bin, err := hostFile(BusyboxBinary, "/bin/busybox")
	if err != nil {
		return "", "", fmt.Errorf("busybox image: %w", err)
	}
	files := append(baseFiles(), bin)
	for _, a := range busyboxApplets {
		files = append(files, symlinkEntry("/bin/"+a, "busybox"))
	}
	img := image{
		entries: files,
		config:  ocispec.ImageConfig{Env: []string{imagePath}, Cmd: []string{"sh"}},
		refs:    []string{BusyboxRef},
	}
	p, err := writeArchive(filepath.Join(dir, "busybox.tar"), img)
	if err != nil {
		return "", "", fmt.Errorf("busybox image: %w", err)
	}
	return p, BusyboxRef, nil
}

// nginxConf serves the default index page on port 80, logging to the
// container's stdout and stderr.
const nginxConf = `user www-data www-data;
worker_processes 1;
pid /run/nginx.pid;
error_log stderr;
events { worker_connections 256; }
http {
    types { text/html html htm; text/plain txt; }
    default_type application/octet-stream;
    access_log /dev/stdout;
    server {
        listen 80 default_server;
        root /usr/share/nginx/html;
        index index.html;
    }
}
`

const nginxIndex = `<!DOCTYPE html>
<html>
<head><title>Welcome to nginx!</title></head>
<body>
<h1>Welcome to nginx!</h1>
<p>If you see this page, the nginx web server is successfully installed and working.</p>
</body>
</html>
`

// Nginx writes the nginx image into dir under NginxRef and Nginx123Ref
// (one archive, two names) and returns the archive's path. It holds the
// host's nginx binary, the shared libraries it links, a minimal
// nginx.conf listening on 80 and the default index page, and busybox's
// shell and tools when the host has busybox-static.
func Nginx(dir string) (string, []string, error) {
	if err := hosttools.Check(NginxBinary); err != nil {
		return "", nil, fmt.Errorf("nginx image: %w", err)
	}
	bin, err := hostFile(NginxBinary, "/usr/sbin/nginx")
	if err != nil {
		return "", nil, fmt.Errorf("nginx image: %w", err)
	}
	libs, err := sharedLibraries(NginxBinary)
	if err != nil {
		return "", nil, fmt.Errorf("nginx image: %w", err)
	}
	files := append(baseFiles(), bin,
		fileEntry("/etc/nginx/nginx.conf", []byte(nginxConf), 0o644),
		fileEntry("/usr/share/nginx/html/index.html", []byte(nginxIndex), 0o644),
		dirEntry("/var/log/nginx"), dirEntry("/var/lib/nginx"), dirEntry("/var/lib/nginx/body"),
		dirEntry("/var/lib/nginx/proxy"), dirEntry("/var/lib/nginx/fastcgi"),
		dirEntry("/var/lib/nginx/uwsgi"), dirEntry("/var/lib/nginx/scgi"), dirEntry("/var/lock"),
	)
	for _, lib := range libs {
		e, err := hostFile(lib, lib)
		if err != nil {
			return "", nil, fmt.Errorf("nginx image: %w", err)
		}
		files = append(files, e)
	}
	// A shell and the usual tools, as the real image has (kubectl exec -it
	// ... -- sh, kubectl cp).
	if bb, err := hostFile(BusyboxBinary, "/bin/busybox"); err == nil {
		files = append(files, bb)
		for _, a := range busyboxApplets {
			files = append(files, symlinkEntry("/bin/"+a, "busybox"))
		}
	}
	refs := []string{NginxRef, Nginx123Ref}
	img := image{
		entries: files,
		config: ocispec.ImageConfig{
			Env:          []string{imagePath},
			Entrypoint:   []string{"/usr/sbin/nginx"},
			Cmd:          []string{"-g", "daemon off;"},
			ExposedPorts: map[string]struct{}{"80/tcp": {}},
			StopSignal:   "SIGQUIT",
		},
		refs: refs,
	}
	p, err := writeArchive(filepath.Join(dir, "nginx.tar"), img)
	if err != nil {
		return "", nil, fmt.Errorf("nginx image: %w", err)
	}
	return p, refs, nil
}

// sharedLibraries lists the absolute paths of the libraries bin links,
// the dynamic loader included, as ldd reports them.
func sharedLibraries(bin string) ([]string, error) {
	out, err := hosttools.Command("ldd", bin).Output()
	if err != nil {
		return nil, fmt.Errorf("ldd %s: %w", bin, err)
	}
	var libs []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		// "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)" or
		// "/lib64/ld-linux-x86-64.so.2 (0x...)"; vdso has no path.
		line := strings.TrimSpace(sc.Text())
		if _, after, ok := strings.Cut(line, "=>"); ok {
			line = strings.TrimSpace(after)
		}
		f := strings.Fields(line)
		if len(f) > 0 && strings.HasPrefix(f[0], "/") {
			libs = append(libs, f[0])
		}
	}
	if len(libs) == 0 {
		return nil, fmt.Errorf("ldd %s: no libraries found (static binary?)", bin)
	}
	return libs, nil
}

// Pause writes the pause image (PauseRef) into dir from a static pause
// binary (see BuildPause) and returns the archive's path.
func Pause(dir, binPath string) (string, string, error) {
	bin, err := hostFile(binPath, "/pause")
	if err != nil {
		return "", "", fmt.Errorf("pause image: %w", err)
	}
	bin.mode = 0o755
	img := image{
		entries: append(baseFiles(), bin),
		config:  ocispec.ImageConfig{Env: []string{imagePath}, Entrypoint: []string{"/pause"}},
		refs:    []string{PauseRef},
	}
	p, err := writeArchive(filepath.Join(dir, "pause.tar"), img)
	if err != nil {
		return "", "", fmt.Errorf("pause image: %w", err)
	}
	return p, PauseRef, nil
}

// BuildPause builds the project's pause program (cmd/pause) as a static
// binary into dir and returns its path. It runs the go tool from the
// current directory, which must be inside the nodelet module (as a test's
// working directory is).
func BuildPause(dir string) (string, error) {
	out := filepath.Join(dir, "pause")
	cmd := hosttools.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, "github.com/nodelet/nodelet/cmd/pause")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build cmd/pause: %w: %s", err, b)
	}
	return out, nil
}
