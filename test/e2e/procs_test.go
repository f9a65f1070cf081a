package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// proc is a running process as /proc shows it.
type proc struct {
	pid     int
	args    []string // argv; args[0] is the program
	cmdline string   // argv joined by NULs, for substring searches
}

// processes lists the running processes (those gone while reading are
// left out).
func processes() []proc {
	var out []proc
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(cmdline) == 0 {
			continue // exited, or a kernel thread
		}
		cmdline = bytes.TrimRight(cmdline, "\x00")
		out = append(out, proc{pid: pid, args: strings.Split(string(cmdline), "\x00"), cmdline: string(cmdline)})
	}
	return out
}
