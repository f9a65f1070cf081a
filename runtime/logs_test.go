package runtime

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestCRIStream(t *testing.T) {
	long := strings.Repeat("x", maxLogLine+10)
	tests := []struct {
		name   string
		writes []string
		want   []string // entries after Close, without timestamps
	}{
		{"whole lines", []string{"a\nb\n"}, []string{"stdout F a", "stdout F b"}},
		{"split writes", []string{"he", "llo\nwor", "ld\n"}, []string{"stdout F hello", "stdout F world"}},
		{"unterminated last line", []string{"a\nb"}, []string{"stdout F a", "stdout F b"}},
		{"empty line", []string{"\n"}, []string{"stdout F "}},
		{"crlf", []string{"a\r\n"}, []string{"stdout F a"}},
		{"long line", []string{long + "\n"}, []string{"stdout P " + long[:maxLogLine], "stdout F " + long[maxLogLine:]}},
		{"long unterminated", []string{long}, []string{"stdout P " + long[:maxLogLine], "stdout F " + long[maxLogLine:]}},
	}
	ts := time.Date(2024, 1, 2, 3, 4, 5, 6, time.UTC)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			s := (&criLog{w: &buf, now: func() time.Time { return ts }}).stream("stdout")
			for _, w := range tt.writes {
				if n, err := s.Write([]byte(w)); err != nil || n != len(w) {
					t.Fatalf("Write = %d, %v", n, err)
				}
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, line := range strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n") {
				stamp, rest, _ := strings.Cut(line, " ")
				if stamp != "2024-01-02T03:04:05.000000006Z" {
					t.Errorf("timestamp %q", stamp)
				}
				got = append(got, rest)
			}
			if strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestContainerLogPath(t *testing.T) {
	got := ContainerLogPath("/var/log/pods", "ns", "web", "u-1", "nginx", 2)
	if got != "/var/log/pods/ns_web_u-1/nginx/2.log" {
		t.Errorf("got %s", got)
	}
}

func TestIsLogDriver(t *testing.T) {
	if !IsLogDriver([]string{LogDriverArg, "/x.log"}) || IsLogDriver([]string{"-test.v"}) || IsLogDriver(nil) {
		t.Error("IsLogDriver misjudges its arguments")
	}
}
