package runtime

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestTerminationMessage(t *testing.T) {
	dir := t.TempDir()
	msgFile := filepath.Join(dir, "msg")
	logFile := filepath.Join(dir, "0.log")
	var log strings.Builder
	for i := range 100 {
		log.WriteString("2026-11-24T10:00:00.000000000Z stdout F line " + string(rune('a'+i%26)) + "\n")
	}
	log.WriteString("2026-11-24T10:00:01.000000000Z stderr P par\n2026-11-24T10:00:01.000000000Z stderr F tial\n")
	if err := os.WriteFile(logFile, []byte(log.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(msgFile, []byte(strings.Repeat("x", 5000)), 0o644); err != nil {
		t.Fatal(err)
	}
	fallback := &corev1.Container{TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError}
	labels := map[string]string{LabelLogPath: logFile}
	TerminationLabels(labels, fallback, msgFile)

	if got := TerminationMessage(labels, 1); len(got) != maxMessageBytes {
		t.Errorf("message from the file: %d bytes, want the first %d", len(got), maxMessageBytes)
	}
	os.WriteFile(msgFile, nil, 0o644)
	if got := TerminationMessage(labels, 0); got != "" {
		t.Errorf("exit 0 with an empty file: %q, want no message", got)
	}
	got := TerminationMessage(labels, 2)
	lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	// 80 entries: 78 whole lines, then "par" and "tial" make one line.
	if len(lines) != maxFallbackLines-1 || lines[len(lines)-1] != "partial" || !strings.HasPrefix(lines[0], "line ") {
		t.Errorf("fallback to logs: %d lines, last %q, first %q", len(lines), lines[len(lines)-1], lines[0])
	}
	if len(got) > maxFallbackLogBytes {
		t.Errorf("fallback longer than %d bytes: %d", maxFallbackLogBytes, len(got))
	}
	// A last line without its newline is a partial entry, and the
	// message has no newline either (upstream's `echo -n DONE; false`).
	os.WriteFile(logFile, []byte("2026-11-24T10:00:00.000000000Z stdout P DONE\n"), 0o644)
	if got := TerminationMessage(labels, 1); got != "DONE" {
		t.Errorf("fallback to an unterminated line: %q, want %q", got, "DONE")
	}
	plain := map[string]string{LabelLogPath: logFile}
	TerminationLabels(plain, &corev1.Container{}, msgFile)
	if got := TerminationMessage(plain, 2); got != "" {
		t.Errorf("policy File with an empty file: %q, want no message", got)
	}
}
