package lab

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// startDetached starts argv in a session of its own with its output
// appended to logPath, and does not wait for it: the lab's processes
// outlive the command that started them, and a Ctrl-C in the terminal
// reaches only that command.
func startDetached(argv []string, logPath string) (int, error) {
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return 0, fmt.Errorf("start %s: log directory: %w", filepath.Base(argv[0]), err)
	}
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return 0, fmt.Errorf("start %s: open log: %w", filepath.Base(argv[0]), err)
	}
	defer logFile.Close() // the child has its own copy
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("start %s: %w", strings.Join(argv, " "), err)
	}
	pid := cmd.Process.Pid
	// Not waited for: running() reaps it if it exits while we still run.
	_ = cmd.Process.Release()
	return pid, nil
}

// cmdline reads a process's argv; nil when it is gone or a zombie (whose
// cmdline is empty).
func cmdline(pid int) []string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || len(data) == 0 {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(data), "\x00"), "\x00")
}

// matchesArgv tells whether a process's cmdline is the one the lab
// started with argv. nsenter enters the namespace and then execs the
// program, so after a moment the process shows argv without the nsenter
// prefix.
func matchesArgv(cmd, argv []string) bool {
	if len(cmd) == 0 {
		return false
	}
	if slices.Equal(cmd, argv) {
		return true
	}
	return len(argv) > 2 && filepath.Base(argv[0]) == "nsenter" && slices.Equal(cmd, argv[2:])
}

// running tells whether pid is still the process the lab started with
// argv: PIDs get reused, so the command line must match too. A zombie is
// not running; when it is our own child it is reaped here.
func running(pid int, argv []string) bool {
	if pid <= 0 {
		return false
	}
	var status syscall.WaitStatus
	if got, _ := syscall.Wait4(pid, &status, syscall.WNOHANG, nil); got == pid {
		return false
	}
	// While a process execs (nsenter becoming the program), its cmdline
	// reads empty for a moment: look again before calling it gone.
	for try := 0; try < 20; try++ {
		state := procState(pid)
		if state == 0 || state == 'Z' {
			return false
		}
		if cmd := cmdline(pid); len(cmd) > 0 {
			return matchesArgv(cmd, argv)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}

// procState is the state letter of /proc/PID/stat (R, S, D, Z, ...), or 0
// when there is no such process.
func procState(pid int) byte {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name in parentheses may hold spaces and ')'.
	rest := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
	if len(rest) == 0 || len(rest[0]) == 0 {
		return 0
	}
	return rest[0][0]
}

// stopProcess sends SIGTERM, waits up to grace, then SIGKILL. A process
// that is not running is already stopped.
func stopProcess(what string, pid int, argv []string, grace time.Duration) error {
	if !running(pid, argv) {
		return nil
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	if waitGone(pid, argv, grace) {
		return nil
	}
	return killProcess(what, pid, argv)
}

// killProcess sends SIGKILL and waits for the process to be gone.
func killProcess(what string, pid int, argv []string) error {
	if !running(pid, argv) {
		return nil
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("kill %s (pid %d): %w", what, pid, err)
	}
	if !waitGone(pid, argv, 10*time.Second) {
		return fmt.Errorf("kill %s (pid %d): still running 10s after SIGKILL", what, pid)
	}
	return nil
}

func waitGone(pid int, argv []string, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for running(pid, argv) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
	return true
}

// pids lists the processes in /proc.
func pids() []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// ancestors are the calling process and its parents: a shell or a test
// that runs nodelet-lab may mention the lab's paths itself, and is not
// part of the lab.
func ancestors() map[int]bool {
	out := map[int]bool{}
	for pid := os.Getpid(); pid > 1 && !out[pid]; {
		out[pid] = true
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			break
		}
		// Fields after the command name, which may hold spaces and ')'.
		rest := data[bytes.LastIndexByte(data, ')')+1:]
		f := strings.Fields(string(rest))
		if len(f) < 2 {
			break
		}
		pid, _ = strconv.Atoi(f[1])
	}
	return out
}

// logTail returns the last lines of a log file, for error messages: Down
// removes the lab directory after a failed Up, so the reason must be in
// the error itself.
func logTail(path string, lines int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	all := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}
