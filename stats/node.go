package stats

// The node's numbers come from the host's proc file system, so they cover
// everything on the machine (the nodelet, containerd and the system as
// well as the pods), as the kubelet's node stats (cAdvisor's root cgroup)
// do, on cgroup v1 and v2 alike.

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// userHZ is the unit of /proc/stat's CPU times: USER_HZ, 100 on every
// Linux architecture the kernel exports to user space.
const userHZ = 100

// nanosPerTick is one USER_HZ tick in nanoseconds.
const nanosPerTick = uint64(time.Second) / userHZ

// nodeSample is one reading of the node.
type nodeSample struct {
	time     time.Time
	bootTime time.Time
	// cpuNanos is the CPU time spent busy (neither idle nor waiting for
	// I/O) since boot, summed over all CPUs.
	cpuNanos uint64
	// Memory in bytes, from /proc/meminfo.
	memTotal, memFree, memAvailable, inactiveFile, anon uint64
	// Page faults since boot, from /proc/vmstat.
	pageFaults, majorPageFaults uint64
}

// memoryUsage is what the kubelet calls the node's memory usage: all but
// the free memory (page cache included).
func (n *nodeSample) memoryUsage() uint64 { return subFloor(n.memTotal, n.memFree) }

// workingSet is the usage less the inactive file cache, which the kernel
// reclaims first.
func (n *nodeSample) workingSet() uint64 { return subFloor(n.memoryUsage(), n.inactiveFile) }

// readNode reads stat, meminfo and vmstat under procRoot.
func readNode(procRoot string, now time.Time) (*nodeSample, error) {
	n := &nodeSample{time: now}
	read := func(name string, parse func([]byte, *nodeSample) error) error {
		path := filepath.Join(procRoot, name)
		data, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("stats: read node usage: %w", err)
		}
		if err := parse(data, n); err != nil {
			return fmt.Errorf("stats: parse %s: %w", path, err)
		}
		return nil
	}
	for _, f := range []struct {
		name  string
		parse func([]byte, *nodeSample) error
	}{{"stat", parseStat}, {"meminfo", parseMeminfo}, {"vmstat", parseVmstat}} {
		if err := read(f.name, f.parse); err != nil {
			return nil, err
		}
	}
	return n, nil
}

// parseStat reads the busy CPU time and the boot time from /proc/stat.
// Busy is user + nice + system + irq + softirq + steal: guest time is
// already part of user (and guest_nice of nice), idle and iowait are not
// busy.
func parseStat(data []byte, n *nodeSample) error {
	var haveCPU, haveBoot bool
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64*1024), 1024*1024) // "intr" lines are long
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		switch fields[0] {
		case "cpu":
			ticks, err := busyTicks(fields[1:])
			if err != nil {
				return err
			}
			n.cpuNanos, haveCPU = ticks*nanosPerTick, true
		case "btime":
			if len(fields) != 2 {
				return fmt.Errorf("malformed btime line %q", sc.Text())
			}
			secs, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil {
				return fmt.Errorf("btime: %w", err)
			}
			n.bootTime, haveBoot = time.Unix(secs, 0), true
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if !haveCPU || !haveBoot {
		return errors.New("no cpu or btime line")
	}
	return nil
}

// busyTicks sums the busy columns of the aggregate "cpu" line: user nice
// system idle iowait irq softirq steal [guest guest_nice]; kernels before
// 2.6.33 have fewer columns, the missing ones count as zero.
func busyTicks(cols []string) (uint64, error) {
	if len(cols) < 4 {
		return 0, fmt.Errorf("cpu line has %d columns, want at least 4", len(cols))
	}
	var sum uint64
	for i, col := range cols {
		if i >= 8 {
			break // guest, guest_nice: already in user, nice
		}
		v, err := strconv.ParseUint(col, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("cpu column %d: %w", i+1, err)
		}
		if i == 3 || i == 4 {
			continue // idle, iowait
		}
		sum += v
	}
	return sum, nil
}

// parseMeminfo reads the memory figures from /proc/meminfo (in kB there).
// MemTotal, MemFree, MemAvailable (Linux 3.14+) and Inactive(file) are
// required; AnonPages, the node's RSS, is zero when absent.
func parseMeminfo(data []byte, n *nodeSample) error {
	want := map[string]*uint64{
		"MemTotal":       &n.memTotal,
		"MemFree":        &n.memFree,
		"MemAvailable":   &n.memAvailable,
		"Inactive(file)": &n.inactiveFile,
		"AnonPages":      &n.anon,
	}
	found := 0
	for line := range strings.Lines(string(data)) {
		key, rest, ok := strings.Cut(line, ":")
		dst := want[key]
		if !ok || dst == nil {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 || len(fields) > 2 || (len(fields) == 2 && fields[1] != "kB") {
			return fmt.Errorf("malformed %s line %q", key, strings.TrimSpace(line))
		}
		kb, err := strconv.ParseUint(fields[0], 10, 64)
		if err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		*dst = kb * 1024
		if key != "AnonPages" {
			found++
		}
	}
	if found < 4 {
		return errors.New("MemTotal, MemFree, MemAvailable or Inactive(file) missing")
	}
	return nil
}

// parseVmstat reads the page fault counters from /proc/vmstat.
func parseVmstat(data []byte, n *nodeSample) error {
	var havePF, haveMajor bool
	for line := range strings.Lines(string(data)) {
		fields := strings.Fields(line)
		if len(fields) != 2 || (fields[0] != "pgfault" && fields[0] != "pgmajfault") {
			continue
		}
		v, err := strconv.ParseUint(fields[1], 10, 64)
		if err != nil {
			return fmt.Errorf("%s: %w", fields[0], err)
		}
		if fields[0] == "pgfault" {
			n.pageFaults, havePF = v, true
		} else {
			n.majorPageFaults, haveMajor = v, true
		}
	}
	if !havePF || !haveMajor {
		return errors.New("pgfault or pgmajfault missing")
	}
	return nil
}

// subFloor is a-b, or 0 when b exceeds a.
func subFloor(a, b uint64) uint64 {
	if b > a {
		return 0
	}
	return a - b
}
