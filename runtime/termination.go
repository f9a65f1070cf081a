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
	// maxEntryBytes bounds one CRI log entry: 16 KiB of content (longer
	// lines are split) plus the timestamp, stream and tag.
	maxEntryBytes = 16*1024 + 64
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

// logTail renders the last lines entries of a CRI log file as upstream's
// log reader does (a full entry ends with a newline, a partial one does
// not), keeping at most max bytes from the end. A process that exits
// after `echo -n DONE` leaves one partial entry, so its message is "DONE".
func logTail(path string, lines, max int) string {
	data, err := readTail(path, int64(lines)*maxEntryBytes)
	if err != nil {
		return ""
	}
	entries := bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n"))
	if len(entries) > lines {
		entries = entries[len(entries)-lines:]
	}
	var msg []byte
	for _, raw := range entries {
		f := bytes.SplitN(raw, []byte(" "), 4)
		if len(f) != 4 {
			continue
		}
		msg = append(msg, f[3]...)
		if string(f[2]) != "P" {
			msg = append(msg, '\n')
		}
	}
	if len(msg) > max {
		msg = msg[len(msg)-max:]
	}
	return string(msg)
}

// readTail reads at most the last n bytes of a file, from the start of the
// first whole entry when it did not read from the beginning.
func readTail(path string, n int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	off := max(st.Size()-n, 0)
	data, err := io.ReadAll(io.NewSectionReader(f, off, st.Size()-off))
	if err != nil {
		return nil, err
	}
	if off > 0 {
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			data = data[i+1:]
		}
	}
	return data, nil
}
