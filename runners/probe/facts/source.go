package facts

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"strings"
	"time"
)

// MaxRaw bounds the raw output kept per source, so that a runaway tool
// cannot blow up the facts file.
const MaxRaw = 256 << 10

// Source is where a fact came from: a command (argument vector) or a file,
// its raw output, and whether it was absent or failed. Absent means the
// tool, file or kernel feature does not exist on the host, which is a fact
// in its own right and never a failure of the collection.
type Source struct {
	Command   []string `json:"command,omitempty"`
	File      string   `json:"file,omitempty"`
	Raw       string   `json:"raw,omitempty"`
	Truncated bool     `json:"truncated,omitempty"`
	Absent    bool     `json:"absent,omitempty"`
	Error     string   `json:"error,omitempty"`
	ExitCode  int      `json:"exit_code,omitempty"`
}

// OK reports whether the source produced output without error.
func (s Source) OK() bool { return !s.Absent && s.Error == "" }

// Value is one scalar fact with its source; Raw holds the untrimmed bytes
// when they differ from Value.
type Value struct {
	Value string `json:"value,omitempty"`
	Source
}

// Runner runs commands and reads files for the collector. Tests substitute
// the root of the file system; commands always run for real.
type Runner struct {
	// Root is prefixed to every file path (empty: the real root).
	Root string
	// Timeout bounds each command (default 10s).
	Timeout time.Duration
	// LookPath finds a command (default exec.LookPath).
	LookPath func(string) (string, error)
}

func (r *Runner) timeout() time.Duration {
	if r.Timeout > 0 {
		return r.Timeout
	}
	return 10 * time.Second
}

func (r *Runner) lookPath(name string) (string, error) {
	if r.LookPath != nil {
		return r.LookPath(name)
	}
	return exec.LookPath(name)
}

// Run runs argv with a timeout and records its output (up to MaxRaw). A
// program that is not installed is recorded as absent.
func (r *Runner) Run(ctx context.Context, argv ...string) Source {
	return r.run(ctx, MaxRaw, argv)
}

// MaxLargeRaw bounds the output of the tools whose whole report is one
// document that must be kept entire to parse (nvidia-smi -q -x lists
// every supported clock: some 70 KiB per GPU).
const MaxLargeRaw = 4 << 20

// RunLarge is Run with MaxLargeRaw as the bound.
func (r *Runner) RunLarge(ctx context.Context, argv ...string) Source {
	return r.run(ctx, MaxLargeRaw, argv)
}

func (r *Runner) run(ctx context.Context, maxRaw int, argv []string) Source {
	src := Source{Command: append([]string(nil), argv...)}
	path, err := r.lookPath(argv[0])
	if err != nil {
		src.Absent = true
		src.Error = fmt.Sprintf("%s is not installed (not found in PATH)", argv[0])
		return src
	}
	ctx, cancel := context.WithTimeout(ctx, r.timeout())
	defer cancel()
	cmd := exec.CommandContext(ctx, path, argv[1:]...)
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &limitedBuffer{buf: &stdout, max: maxRaw}
	cmd.Stderr = &limitedBuffer{buf: &stderr, max: 16 << 10}
	cmd.WaitDelay = 2 * time.Second
	err = cmd.Run()
	src.Raw = stdout.String()
	src.Truncated = stdout.Len() >= maxRaw
	if err != nil {
		var exitErr *exec.ExitError
		switch {
		case ctx.Err() == context.DeadlineExceeded:
			src.Error = fmt.Sprintf("timed out after %s", r.timeout())
		case errors.As(err, &exitErr):
			src.ExitCode = exitErr.ExitCode()
			src.Error = fmt.Sprintf("exit status %d: %s", exitErr.ExitCode(), strings.TrimSpace(stderr.String()))
		default:
			src.Error = err.Error()
		}
	}
	return src
}

// ReadFile reads a file (a sysfs or procfs attribute, or a config file). A
// file that does not exist is absent.
func (r *Runner) ReadFile(path string) Source {
	src := Source{File: path}
	f, err := os.Open(r.Root + path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			src.Absent = true
			return src
		}
		src.Error = err.Error()
		return src
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxRaw+1))
	if err != nil {
		src.Error = err.Error()
	}
	if len(b) > MaxRaw {
		b = b[:MaxRaw]
		src.Truncated = true
	}
	src.Raw = string(b)
	return src
}

// Attr reads a one-line attribute file into a Value. The trimmed text is
// the value, so the raw text is not kept twice.
func (r *Runner) Attr(path string) Value {
	src := r.ReadFile(path)
	v := Value{Value: strings.TrimSpace(src.Raw), Source: src}
	v.Raw = ""
	return v
}

// Exists reports whether a path exists under the runner's root.
func (r *Runner) Exists(path string) bool {
	_, err := os.Stat(r.Root + path)
	return err == nil
}

// Glob lists paths matching pattern under the root, with the root removed.
func (r *Runner) Glob(pattern string) []string {
	matches, _ := globSorted(r.Root + pattern)
	out := make([]string, 0, len(matches))
	for _, m := range matches {
		out = append(out, strings.TrimPrefix(m, r.Root))
	}
	return out
}

// Readlink resolves a symlink under the root and returns its target.
func (r *Runner) Readlink(path string) (string, error) {
	return os.Readlink(r.Root + path)
}

type limitedBuffer struct {
	buf *bytes.Buffer
	max int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	room := l.max - l.buf.Len()
	if room > 0 {
		if len(p) > room {
			l.buf.Write(p[:room])
		} else {
			l.buf.Write(p)
		}
	}
	return len(p), nil
}
