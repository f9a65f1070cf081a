// Package hosttools is how the project's Go code and tests run programs of
// the host (nft, ip, nsenter, kubectl, ...). Every such program is listed,
// with the Debian package it comes from, in tools.list, from which
// scripts/deps.sh installs. A program that is not listed is refused here on
// every machine, whether or not it happens to be installed, so a new
// dependency on a host tool fails `make test` at once instead of only on a
// machine that lacks it.
//
// The project's own binaries (bin/nodelet, os.Args[0], a path built by a
// test) are not host tools; run them with os/exec by path.
package hosttools

import (
	"bufio"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

//go:embed tools.list
var listText string

// ErrNotListed is returned for a program that tools.list does not name.
var ErrNotListed = errors.New("hosttools: not in hosttools/tools.list")

// Tool is one line of tools.list.
type Tool struct {
	Name    string   // looked up on PATH, or an absolute path
	Package string   // the Debian package, or "-" when the machine provides it
	Targets []string // the make targets that need it: up, test, deb, vm-lab, bench-upstream
}

// List returns the tools of tools.list in its order.
func List() []Tool {
	tools, err := parse(listText)
	if err != nil {
		// tools.list is part of the source; TestListParses keeps it valid.
		panic(err)
	}
	return tools
}

func parse(text string) ([]Tool, error) {
	var tools []Tool
	sc := bufio.NewScanner(strings.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 3 {
			return nil, fmt.Errorf("hosttools: tools.list line %d: want TOOL PACKAGE TARGETS, got %q", n, line)
		}
		tools = append(tools, Tool{Name: f[0], Package: f[1], Targets: strings.Split(f[2], ",")})
	}
	return tools, sc.Err()
}

// Find returns the listed tool called name.
func Find(name string) (Tool, error) {
	for _, t := range List() {
		if t.Name == name {
			return t, nil
		}
	}
	return Tool{}, fmt.Errorf("%q: %w (add it there with its Debian package)", name, ErrNotListed)
}

// Path returns the absolute path of the listed tool name. A tool that is
// listed but not installed gives an error naming its package.
func Path(name string) (string, error) {
	t, err := Find(name)
	if err != nil {
		return "", err
	}
	var path string
	if filepath.IsAbs(name) {
		path, err = name, statFile(name)
	} else {
		path, err = exec.LookPath(name)
	}
	if err != nil {
		return "", fmt.Errorf("%s is not installed (%s): %w", name, t.installHint(), err)
	}
	return path, nil
}

func statFile(path string) error {
	_, err := os.Stat(path)
	return err
}

func (t Tool) installHint() string {
	if t.Package == "-" && slices.Equal(t.Targets, []string{"bench-upstream"}) {
		return "upstream Kubernetes; scripts/bench-upstream.sh builds it and puts it on PATH"
	}
	if t.Package == "-" {
		return "it comes with the machine; see hosttools/tools.list"
	}
	return "Debian package " + t.Package + "; run make deps"
}

// Check returns an error for every name that is not listed or not
// installed, joined; nil when all are there. Tests call it before they
// start, so they fail (never skip) on a machine that lacks a tool.
func Check(names ...string) error {
	var errs []error
	for _, n := range names {
		if _, err := Path(n); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Command is exec.Command for a listed host tool. An unlisted or missing
// tool makes the command fail when it starts, with the reason. For nsenter,
// the program it runs is checked the same way (the first argument that is
// not an option).
func Command(name string, args ...string) *exec.Cmd {
	return CommandContext(context.Background(), name, args...)
}

// CommandContext is exec.CommandContext for a listed host tool; see Command.
func CommandContext(ctx context.Context, name string, args ...string) *exec.Cmd {
	path, err := Path(name)
	if err == nil && name == "nsenter" {
		err = checkWrapped(args)
	}
	if err != nil {
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Err = err
		return cmd
	}
	return exec.CommandContext(ctx, path, args...)
}

// checkWrapped checks the program an nsenter command line runs: its first
// argument that is not an option. A path that the list does not hold (the
// project's own binary or script, such as bin/nodelet or a test's build) is
// allowed: only names looked up on PATH are host tools.
func checkWrapped(args []string) error {
	for _, a := range args {
		if strings.HasPrefix(a, "-") {
			continue
		}
		if strings.Contains(a, "/") {
			if _, err := Find(a); err != nil {
				return nil
			}
		}
		_, err := Path(a)
		return err
	}
	return nil
}
