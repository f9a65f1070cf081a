package lab

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// Leftovers lists whatever of the lab called name with state directory
// dir still exists, one line each: its network namespaces, links on the
// host with the lab's link names, mounts under dir or the run directory,
// its cgroups in any hierarchy, processes whose command line mentions
// dir, the run directory or the lab's namespaces (other than the caller
// and its parents), and the two directories themselves. Empty means the
// machine is as clean as before the lab.
func Leftovers(name, dir string) []string {
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	run := RunDir(name)
	var out []string
	for _, ns := range labNetnses(name) {
		out = append(out, "network namespace "+ns)
	}
	links, err := hostLabLinks(name)
	if err != nil {
		out = append(out, err.Error())
	}
	for _, l := range links {
		out = append(out, "host link "+l)
	}
	mounts, err := mountsUnder(dir, run)
	if err != nil {
		out = append(out, err.Error())
	}
	for _, m := range mounts {
		out = append(out, "mount "+m)
	}
	for _, cg := range labCgroups(name) {
		out = append(out, "cgroup "+cg)
	}
	for _, p := range labProcesses(name, dir) {
		out = append(out, fmt.Sprintf("process %d: %s", p.pid, strings.Join(p.argv, " ")))
	}
	for _, d := range []string{dir, run} {
		if _, err := os.Lstat(d); err == nil {
			out = append(out, "directory "+d)
		}
	}
	return out
}

type process struct {
	pid  int
	argv []string
}

// labProcesses lists the processes whose argv mentions the lab's paths,
// leaving out the caller and its parents (a test or a shell that runs
// nodelet-lab with --dir mentions them too).
func labProcesses(name, dir string) []process {
	re := labPathRE(name, dir)
	skip := ancestors()
	var out []process
	for _, pid := range pids() {
		if skip[pid] {
			continue
		}
		argv := cmdline(pid)
		for _, a := range argv {
			if re.MatchString(a) {
				out = append(out, process{pid, argv})
				break
			}
		}
	}
	return out
}

// labPathRE matches an argument that mentions dir, the run directory, the
// lab namespace's path or a node namespace's path as a whole path: the
// lab "t1" must not match the paths of lab "t10" or a directory "lab-x"
// next to "lab".
func labPathRE(name, dir string) *regexp.Regexp {
	paths := regexp.QuoteMeta(dir) + "|" + regexp.QuoteMeta(RunDir(name)) + "|" +
		regexp.QuoteMeta(netnsPath(LabNetNS(name))) + `(?:-n[0-9]+)?`
	return regexp.MustCompile(`(?:` + paths + `)(?:[^A-Za-z0-9._-]|$)`)
}
