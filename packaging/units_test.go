// Package packaging holds what the Debian package installs besides the
// binaries: the systemd units (systemd/) and their option files
// (default/, installed as /etc/default/NAME). These tests check the units
// with systemd's own verifier and hold the units, the option files and the
// binaries' flags to one contract.
package packaging

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/nodelet/nodelet/hosttools"
)

// product is one installed program: its unit, the variable its unit passes
// as arguments, and the main package (directory) that defines its flags.
type product struct {
	unit, binary, argsVar, mainDir string
}

var products = []product{
	{"nodelet-controlplane.service", "/usr/bin/nodelet-controlplane", "CONTROLPLANE_ARGS", "../cmd/controlplane"},
	{"nodelet.service", "/usr/bin/nodelet", "NODELET_ARGS", "../cmd/nodelet"},
}

// systemdAnalyze finds systemd-analyze. Missing is a failure, not a skip:
// an unverified unit must not pass.
func systemdAnalyze(t *testing.T) string {
	t.Helper()
	path, err := hosttools.Path("systemd-analyze")
	if err != nil {
		t.Fatalf("systemd-analyze is needed to verify the units (Debian: apt-get install systemd): %v", err)
	}
	return path
}

// stageUnit writes the unit text to a temporary directory under its own
// name, with every Exec*= program replaced by an empty executable stub
// there: verify insists that the programs exist, and this host has no
// /usr/bin/nodelet. Programs without an absolute path are left alone.
func stageUnit(t *testing.T, name, text string) string {
	t.Helper()
	dir := t.TempDir()
	execLine := regexp.MustCompile(`^(Exec[A-Za-z]*=[-@:+!]*)(/\S+)(.*)$`)
	var out []string
	for _, line := range strings.Split(text, "\n") {
		if m := execLine.FindStringSubmatch(line); m != nil {
			stub := filepath.Join(dir, filepath.Base(m[2]))
			if err := os.WriteFile(stub, []byte("#!/bin/sh\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			line = m[1] + stub + m[3]
		}
		out = append(out, line)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(strings.Join(out, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// verify runs `systemd-analyze verify` on a staged unit and returns what
// is wrong with it: a non-zero exit, and any line of output about this
// unit. The output matters since verify only warns, and exits 0, for
// unknown keys and values it cannot parse ("Failed to parse ..., ignoring").
// Lines about other units (the host's, pulled in by After=) are not ours.
func verify(t *testing.T, analyze, path string) []string {
	t.Helper()
	cmd := exec.Command(analyze, "verify", "--man=no", path)
	out, err := cmd.CombinedOutput()
	var problems []string
	if err != nil {
		problems = append(problems, "systemd-analyze verify: "+err.Error())
	}
	name := filepath.Base(path)
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, name) {
			problems = append(problems, line)
		}
	}
	return problems
}

func TestUnitsVerify(t *testing.T) {
	analyze := systemdAnalyze(t)
	for _, p := range products {
		t.Run(p.unit, func(t *testing.T) {
			text := readFile(t, filepath.Join("systemd", p.unit))
			if problems := verify(t, analyze, stageUnit(t, p.unit, text)); len(problems) > 0 {
				t.Errorf("systemd-analyze verify %s:\n%s", p.unit, strings.Join(problems, "\n"))
			}
		})
	}
}

// The check above is only worth something if it fails on broken units:
// each of these breaks the nodelet's unit in one way.
func TestUnitsVerifyCatchesBrokenUnits(t *testing.T) {
	analyze := systemdAnalyze(t)
	good := readFile(t, filepath.Join("systemd", "nodelet.service"))
	for name, breakIt := range map[string]func(string) string{
		"unknown key":     func(s string) string { return replaceLine(s, "Restart=always", "Restart=always\nRestartSecs=2s") },
		"bad value":       func(s string) string { return replaceLine(s, "Type=notify", "Type=notifyy") },
		"bad duration":    func(s string) string { return replaceLine(s, "WatchdogSec=60s", "WatchdogSec=sixty") },
		"unknown section": func(s string) string { return replaceLine(s, "[Service]", "[Servce]") },
		"missing program": func(s string) string {
			return replaceLine(s, "ExecStart=/usr/bin/nodelet $NODELET_ARGS", "ExecStart=nodelet-not-installed")
		},
		"two ExecStart": func(s string) string {
			return replaceLine(s, "KillMode=process", "KillMode=process\nExecStart=/bin/true")
		},
		"missing [Service]": func(s string) string { return s[:strings.Index(s, "\n[Service]\n")] },
	} {
		t.Run(name, func(t *testing.T) {
			broken := breakIt(good)
			if broken == good {
				t.Fatal("the edit changed nothing: the unit no longer has what it replaces")
			}
			if problems := verify(t, analyze, stageUnit(t, "nodelet.service", broken)); len(problems) == 0 {
				t.Errorf("verify found nothing wrong with:\n%s", broken)
			}
		})
	}
}

// replaceLine replaces the line that is exactly old (comments that mention
// it stay as they are).
func replaceLine(text, old, new string) string {
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		if l == old {
			lines[i] = new
		}
	}
	return strings.Join(lines, "\n")
}

// TestUnitsContract holds the units to what the binaries and the
// provisioning scripts rely on: Type=notify (the binaries send READY=1 and
// watchdog pings from their main process), the program where the package
// installs it, its arguments from the option file's variable, split into
// words ($VAR, not ${VAR}), and only flags the binary has.
func TestUnitsContract(t *testing.T) {
	for _, p := range products {
		t.Run(p.unit, func(t *testing.T) {
			unit := parseUnit(t, readFile(t, filepath.Join("systemd", p.unit)))
			defaults := "/etc/default/" + strings.TrimSuffix(p.unit, ".service")
			for key, want := range map[string]string{
				"Service.Type":            "notify",
				"Service.NotifyAccess":    "main",
				"Service.Restart":         "always",
				"Service.ExecStart":       p.binary + " $" + p.argsVar,
				"Service.EnvironmentFile": "-" + defaults,
				"Install.WantedBy":        "multi-user.target",
			} {
				if got := unit[key]; got != want {
					t.Errorf("%s = %q, want %q", key, got, want)
				}
			}
			if unit["Service.WatchdogSec"] == "" || unit["Service.TimeoutStartSec"] == "" {
				t.Errorf("WatchdogSec = %q, TimeoutStartSec = %q; both must be set",
					unit["Service.WatchdogSec"], unit["Service.TimeoutStartSec"])
			}
			if p.unit == "nodelet.service" && unit["Service.OOMScoreAdjust"] != "-999" {
				// Upstream's kubelet runs at -999; the nodelet's own score is
				// the floor of its pods' (pause -998, Guaranteed -997).
				t.Errorf("OOMScoreAdjust = %q, want -999", unit["Service.OOMScoreAdjust"])
			}
			checkDefaults(t, filepath.Join("default", filepath.Base(defaults)), p)
		})
	}
}

// checkDefaults reads an option file as systemd does (NAME="value" lines,
// # comments) and checks that it sets the unit's variable to flags the
// binary defines (its main declares each flag by its quoted name).
func checkDefaults(t *testing.T, path string, p product) {
	t.Helper()
	vars := map[string]string{}
	for _, line := range strings.Split(readFile(t, path), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, value, ok := strings.Cut(line, "=")
		if !ok {
			t.Errorf("%s: %q is not NAME=value", path, line)
			continue
		}
		vars[name] = strings.Trim(value, `"`)
	}
	args, ok := vars[p.argsVar]
	if !ok || args == "" {
		t.Fatalf("%s does not set %s", path, p.argsVar)
	}
	mainSrc := packageSource(t, p.mainDir)
	for _, word := range strings.Fields(args) {
		if !strings.HasPrefix(word, "-") {
			continue // a flag's value
		}
		flag, _, _ := strings.Cut(strings.TrimLeft(word, "-"), "=")
		if !strings.Contains(mainSrc, `"`+flag+`"`) {
			t.Errorf("%s: %s passes --%s, which %s does not define", path, p.argsVar, flag, p.mainDir)
		}
	}
}

// parseUnit reads a unit file into "Section.Key" -> value (the last one
// wins; these units set each key once).
func parseUnit(t *testing.T, text string) map[string]string {
	t.Helper()
	out := map[string]string{}
	section := ""
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = strings.Trim(line, "[]")
		default:
			key, value, ok := strings.Cut(line, "=")
			if !ok {
				t.Errorf("unit line %q is not Key=value", line)
				continue
			}
			out[section+"."+strings.TrimSpace(key)] = strings.TrimSpace(value)
		}
	}
	return out
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// packageSource is the text of a package's non-test Go files: flags may be
// defined in any of them.
func packageSource(t *testing.T, dir string) string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Go files in %s: %v", dir, err)
	}
	var b strings.Builder
	for _, f := range files {
		if !strings.HasSuffix(f, "_test.go") {
			b.WriteString(readFile(t, f))
		}
	}
	return b.String()
}
