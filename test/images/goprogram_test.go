package images

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A binary already in the cache is used as it is: no download, no build.
func TestBuildGoProgramUsesTheCache(t *testing.T) {
	cache := t.TempDir()
	p := GoProgram{Module: "example.com/not/served", Version: "v1.2.3", Package: "cmd/tool", Binary: "tool"}
	goVersion, err := goEnv("GOVERSION")
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(cache, "example.com_not_served@v1.2.3", goVersion, "cmd_tool", "tool")
	if err := os.MkdirAll(filepath.Dir(want), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(want, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := BuildGoProgram(cache, p)
	if err != nil || got != want {
		t.Fatalf("BuildGoProgram = %q, %v; want the cached %q", got, err, want)
	}
}

func TestBuildGoProgramRefusesIncompleteNames(t *testing.T) {
	for _, p := range []GoProgram{
		{Module: "example.com/m", Binary: "x"},
		{Module: "example.com/m", Version: "v1.0.0"},
		{Module: "example.com/m", Version: "v1.0.0", Binary: "../x"},
	} {
		if _, err := BuildGoProgram(t.TempDir(), p); err == nil || !strings.Contains(err.Error(), "required") {
			t.Errorf("BuildGoProgram(%+v) = %v, want a refusal", p, err)
		}
	}
}
