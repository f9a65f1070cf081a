package runtime

// Termination messages as upstream's kubelet reads them: the file behind
// the container's terminationMessagePath (at most 4 KiB), or, with
// terminationMessagePolicy FallbackToLogsOnError, an empty file and a
// failed exit, the tail of the container's log (at most 80 lines, 2 KiB).

import (
	"bytes"
	"io"
	"os"

	corev1 "k8s.io/api/core/v1"
)

// Labels that let a restarted nodelet find a container's message.
const (
	LabelTerminationLog    = "io.nodelet.termination.log"    // host file behind terminationMessagePath
	LabelTerminationPolicy = "io.nodelet.termination.policy" // "FallbackToLogsOnError" or absent
)

const (
	maxMessageBytes     = 4096
	maxFallbackLines    = 80
	maxFallbackLogBytes = 2048
)

// TerminationLabels records where the message will be, among the labels
// the executor puts on a new container.
func TerminationLabels(labels map[string]string, c *corev1.Container, hostPath string) {
	if hostPath == "" {
		return
	}
	labels[LabelTerminationLog] = hostPath
	if c.TerminationMessagePolicy == corev1.TerminationMessageFallbackToLogsOnError {
		labels[LabelTerminationPolicy] = string(corev1.TerminationMessageFallbackToLogsOnError)
	}
}

// TerminationMessage reads the message of an exited container from the
// files its labels name.
func TerminationMessage(labels map[string]string, exitCode int32) string {
	msg := readHead(labels[LabelTerminationLog], maxMessageBytes)
	if msg == "" && exitCode != 0 && labels[LabelTerminationPolicy] == string(corev1.TerminationMessageFallbackToLogsOnError) {
		msg = logTail(labels[LabelLogPath], maxFallbackLines, maxFallbackLogBytes)
	}
	return msg
}

func readHead(path string, max int64) string {
	if path == "" {
		return ""
	}
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	b, _ := io.ReadAll(io.LimitReader(f, max))
	return string(b)
}

// logTail returns the content of the last lines of a CRI log file (without
// the timestamp, stream and tag), joining partial lines, capped at max
// bytes from the end.
func logTail(path string, lines, max int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	var out [][]byte
	var partial []byte
	for _, raw := range bytes.Split(data, []byte("\n")) {
		f := bytes.SplitN(raw, []byte(" "), 4)
		if len(f) != 4 {
			continue
		}
		partial = append(partial, f[3]...)
		if string(f[2]) == "P" {
			continue
		}
		out = append(out, partial)
		partial = nil
	}
	if len(out) > lines {
		out = out[len(out)-lines:]
	}
	msg := bytes.Join(out, []byte("\n"))
	if len(out) > 0 {
		msg = append(msg, '\n')
	}
	if len(msg) > max {
		msg = msg[len(msg)-max:]
	}
	return string(msg)
}
