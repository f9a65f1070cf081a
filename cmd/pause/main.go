// Command pause is the process that holds a pod's namespaces: the first
// process of every pod sandbox. It sleeps, reaps orphaned children (it is
// PID 1 of the pod's PID namespace when that is shared) and exits cleanly on
// SIGINT or SIGTERM. Built static, it is packed into the nodelet's pause image.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) > 1 && (os.Args[1] == "-v" || os.Args[1] == "--version") {
		os.Stdout.WriteString("nodelet pause\n")
		return
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range sigs {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		reap()
	}
}

// reap collects every exited child without blocking.
func reap() {
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
