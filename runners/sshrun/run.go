package sshrun

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"sort"
	"strconv"
	"time"

	"github.com/accordlab/accord/runners/probe/wire"
)

// Probe exit codes the runner acts on (see runners/probe/wire).
const (
	ProbeExitAlreadyLaunched = 4
	ProbeExitCrashed         = 5
)

// RunDir is the run folder for a run's attempt under the remote base:
// BASE/runs/<runID>-<attempt>.
func (c *Client) RunDir(runID int64, attempt int) string {
	return path.Join(c.opts.RemoteBase, "runs", strconv.FormatInt(runID, 10)+"-"+strconv.Itoa(attempt))
}

// ErrPlanChanged: the run was launched already with a different plan.
var ErrPlanChanged = errors.New("sshrun: run already launched with a different plan")

// preparePlanScript creates the run folder $1 and writes stdin to $1/$2
// through a temporary name, checking its SHA-256 ($4) before the rename. If
// the run was launched already ($1/$3 exists) the plan is left alone and
// the script only says whether it is the same one (exit 0) or not (exit 7).
const preparePlanScript = `dir=$1 plan=$2 launch=$3 sum=$4
umask 077
mkdir -p -- "$dir" || exit 1
if [ -e "$dir/$launch" ]; then
  cat > /dev/null
  set -- $(sha256sum -b -- "$dir/$plan" 2>/dev/null)
  [ "$1" = "$sum" ] && exit 0
  exit 7
fi
tmp="$dir/.$plan.tmp.$$"
trap 'rm -f -- "$tmp"' EXIT
cat > "$tmp" || exit 1
set -- $(sha256sum -b -- "$tmp") || exit 1
if [ "$1" != "$sum" ]; then echo "plan hashes to $1, want $sum (input cut short?)" >&2; exit 6; fi
mv -f -- "$tmp" "$dir/$plan" || exit 1
trap - EXIT
exit 0`

// PrepareRun creates runDir on the host and writes planJSON to plan.json
// atomically. Repeating it is harmless; once the run is launched the plan
// is never rewritten, and a different plan is refused (ErrPlanChanged).
func (c *Client) PrepareRun(ctx context.Context, runDir string, planJSON []byte) error {
	if err := checkPath(runDir); err != nil {
		return err
	}
	if !json.Valid(planJSON) {
		return errors.New("sshrun: prepare run: plan is not valid JSON")
	}
	sum := sha256.Sum256(planJSON)
	res, err := c.Run(ctx, shScript(preparePlanScript, runDir, wire.PlanFile, wire.LaunchFile, hex.EncodeToString(sum[:])), bytes.NewReader(planJSON))
	if err != nil {
		return fmt.Errorf("sshrun: prepare run %s: %w", runDir, err)
	}
	switch res.ExitCode {
	case 0:
		return nil
	case 7:
		return fmt.Errorf("sshrun: prepare run %s: %w", runDir, ErrPlanChanged)
	}
	return fmt.Errorf("sshrun: prepare run %s: exit %d: %s", runDir, res.ExitCode, firstLine(res.Stderr))
}

// Launched is the answer of Launch.
type Launched struct {
	PID int `json:"pid"`
	// Already is true when the probe had been launched before for this run
	// folder (exit 4): follow it, do not start it again.
	Already bool `json:"-"`
}

// Launch starts the probe detached in runDir (`probe launch`). If it was
// launched before, nothing is started and Already is set, with the PID from
// `probe status`.
func (c *Client) Launch(ctx context.Context, runDir string) (Launched, error) {
	res, err := c.probeCmd(ctx, "launch", "--dir", runDir)
	if err != nil {
		return Launched{}, err
	}
	switch res.ExitCode {
	case 0:
		var l Launched
		if err := json.Unmarshal(res.Stdout, &l); err != nil {
			return Launched{}, fmt.Errorf("sshrun: probe launch: answer %q: %w", firstLine(res.Stdout), err)
		}
		return l, nil
	case ProbeExitAlreadyLaunched:
		st, err := c.Status(ctx, runDir)
		if err != nil {
			return Launched{}, fmt.Errorf("sshrun: probe launched before: %w", err)
		}
		return Launched{PID: st.PID, Already: true}, nil
	}
	return Launched{}, fmt.Errorf("sshrun: probe launch: exit %d: %s", res.ExitCode, firstLine(res.Stderr))
}

// ProbeStatus is `probe status`'s answer.
type ProbeStatus struct {
	Launched    bool         `json:"launched"`
	Running     bool         `json:"running"`
	PID         int          `json:"pid"`
	EventsBytes int64        `json:"events_bytes"`
	Status      *wire.Status `json:"status"`
	// Waiting is the barrier a multi-host run's probe waits at.
	Waiting *wire.Barrier `json:"waiting,omitempty"`
}

// Release releases barrier index of the run in runDir (`probe release`);
// releasing it again does nothing.
func (c *Client) Release(ctx context.Context, runDir string, index int) error {
	res, err := c.probeCmd(ctx, "release", "--dir", runDir, "--barrier", strconv.Itoa(index))
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("sshrun: probe release: exit %d: %s", res.ExitCode, firstLine(res.Stderr))
	}
	return nil
}

// Status asks the probe where the run in runDir stands.
func (c *Client) Status(ctx context.Context, runDir string) (ProbeStatus, error) {
	res, err := c.probeCmd(ctx, "status", "--dir", runDir)
	if err != nil {
		return ProbeStatus{}, err
	}
	if res.ExitCode != 0 {
		return ProbeStatus{}, fmt.Errorf("sshrun: probe status: exit %d: %s", res.ExitCode, firstLine(res.Stderr))
	}
	var st ProbeStatus
	if err := json.Unmarshal(res.Stdout, &st); err != nil {
		return ProbeStatus{}, fmt.Errorf("sshrun: probe status: answer %q: %w", firstLine(res.Stdout), err)
	}
	return st, nil
}

// Stopped is `probe stop`'s answer.
type Stopped struct {
	Signalled bool `json:"signalled"`
	Killed    bool `json:"killed"`
	Remaining int  `json:"remaining"`
	// Raw is the probe's JSON as printed.
	Raw json.RawMessage `json:"-"`
}

// ErrProcessesLeft: processes of the run survived `probe stop`.
var ErrProcessesLeft = errors.New("sshrun: processes of the run are left on the host")

// Stop ends the probe's process group (SIGTERM, SIGKILL after grace) in a
// session of its own, so that it works while another session follows the
// run, and confirms nothing of the run is left.
func (c *Client) Stop(ctx context.Context, runDir string, grace time.Duration) (Stopped, error) {
	if grace <= 0 {
		grace = 5 * time.Second
	}
	res, err := c.probeCmd(ctx, "stop", "--dir", runDir, "--grace", grace.String())
	if err != nil {
		return Stopped{}, err
	}
	// The probe prints its answer even when processes are left (and then
	// exits non-zero).
	var s Stopped
	if jerr := json.Unmarshal(res.Stdout, &s); jerr != nil {
		if res.ExitCode != 0 {
			return Stopped{}, fmt.Errorf("sshrun: probe stop: exit %d: %s", res.ExitCode, firstLine(res.Stderr))
		}
		return Stopped{}, fmt.Errorf("sshrun: probe stop: answer %q: %w", firstLine(res.Stdout), jerr)
	}
	s.Raw = json.RawMessage(bytes.TrimSpace(res.Stdout))
	if s.Remaining != 0 {
		return s, fmt.Errorf("%w: %d after stop of %s: %s", ErrProcessesLeft, s.Remaining, runDir, firstLine(res.Stderr))
	}
	if res.ExitCode != 0 {
		return s, fmt.Errorf("sshrun: probe stop: exit %d: %s", res.ExitCode, firstLine(res.Stderr))
	}
	return s, nil
}

// Facts is `probe facts`'s answer and how long a trivial command takes.
type Facts struct {
	JSON json.RawMessage
	// RTT is the median of three round trips of `true` (a session opened,
	// the command run, its exit status back).
	RTT time.Duration
}

// Facts runs `probe facts` and measures the round-trip time of a trivial
// command.
func (c *Client) Facts(ctx context.Context) (Facts, error) {
	rtts := make([]time.Duration, 0, 3)
	for range 3 {
		res, err := c.Run(ctx, []string{"true"}, nil)
		if err != nil {
			return Facts{}, fmt.Errorf("sshrun: round trip: %w", err)
		}
		if res.ExitCode != 0 {
			return Facts{}, fmt.Errorf("sshrun: round trip: true exited %d", res.ExitCode)
		}
		rtts = append(rtts, res.Duration)
	}
	sort.Slice(rtts, func(i, j int) bool { return rtts[i] < rtts[j] })
	res, err := c.probeCmd(ctx, "facts")
	if err != nil {
		return Facts{}, err
	}
	if res.ExitCode != 0 {
		return Facts{}, fmt.Errorf("sshrun: probe facts: exit %d: %s", res.ExitCode, firstLine(res.Stderr))
	}
	out := bytes.TrimSpace(res.Stdout)
	if !json.Valid(out) {
		return Facts{}, fmt.Errorf("sshrun: probe facts: answer is not JSON: %q", firstLine(out))
	}
	return Facts{JSON: json.RawMessage(out), RTT: rtts[1]}, nil
}

// CheckEndpoint has the probe send one small request to an inference
// endpoint from the host (`probe endpoint`), the URL and model passed as
// arguments of their own, never through a shell.
func (c *Client) CheckEndpoint(ctx context.Context, endpoint, model, api string, timeout time.Duration) (wire.EndpointCheck, error) {
	var out wire.EndpointCheck
	res, err := c.probeCmd(ctx, "endpoint", "--url", endpoint, "--model", model, "--api", api, "--timeout", timeout.String())
	if err != nil {
		return out, err
	}
	if res.ExitCode != 0 {
		return out, fmt.Errorf("sshrun: probe endpoint: exit %d: %s", res.ExitCode, firstLine(res.Stderr))
	}
	if err := json.Unmarshal(bytes.TrimSpace(res.Stdout), &out); err != nil {
		return out, fmt.Errorf("sshrun: probe endpoint: answer is not JSON: %q", firstLine(res.Stdout))
	}
	return out, nil
}

// probeCmd runs `PROBE probe SUB ARGS...`, checking the run folder
// argument that follows --dir.
func (c *Client) probeCmd(ctx context.Context, sub string, args ...string) (Result, error) {
	argv, err := c.probeArgv(sub, args...)
	if err != nil {
		return Result{}, err
	}
	res, err := c.Run(ctx, argv, nil)
	if err != nil {
		return res, fmt.Errorf("sshrun: probe %s: %w", sub, err)
	}
	return res, nil
}

func (c *Client) probeArgv(sub string, args ...string) ([]string, error) {
	p, err := c.probePath()
	if err != nil {
		return nil, err
	}
	for i, a := range args {
		if a == "--dir" && i+1 < len(args) {
			if err := checkPath(args[i+1]); err != nil {
				return nil, err
			}
		}
	}
	return append([]string{p, "probe", sub}, args...), nil
}

// Outcome is how a Follow ended.
type Outcome int

const (
	// Finished: the probe wrote its status and every event was read.
	Finished Outcome = iota + 1
	// ProbeCrashed: the probe's process group is gone without a status
	// (tail exit 5); every event it wrote was read.
	ProbeCrashed
	// ConnectionLost: the connection dropped; reconnect and follow again
	// from the returned offset.
	ConnectionLost
)

func (o Outcome) String() string {
	switch o {
	case Finished:
		return "finished"
	case ProbeCrashed:
		return "probe crashed"
	case ConnectionLost:
		return "connection lost"
	}
	return "unknown"
}

// FollowResult is where a Follow stopped.
type FollowResult struct {
	// Offset is the byte offset in the events file after the last complete
	// line handed to onLine: the offset to follow from next time.
	Offset  int64
	Outcome Outcome
	Lines   int64 // lines handed to onLine by this call
	// Err is the connection's failure for ConnectionLost.
	Err error
}

// MaxEventLine bounds one line of the event stream.
const MaxEventLine = 4 << 20

// Follow runs `probe tail --offset` and calls onLine with each complete
// line (without its newline; the slice is only valid during the call).
// Only complete lines advance the offset, so a line cut by a disconnect is
// read whole next time. It returns with an Outcome when the tail ends or the
// connection drops, and with an error when onLine fails, ctx ends, a line is
// longer than MaxEventLine or the tail fails otherwise; the result's Offset
// is right in every case.
func (c *Client) Follow(ctx context.Context, runDir string, offset int64, onLine func([]byte) error) (FollowResult, error) {
	if offset < 0 {
		return FollowResult{Offset: offset}, fmt.Errorf("sshrun: follow: negative offset %d", offset)
	}
	argv, err := c.probeArgv("tail", "--dir", runDir, "--offset", strconv.FormatInt(offset, 10))
	if err != nil {
		return FollowResult{Offset: offset}, err
	}
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	lw := &lineWriter{offset: offset, onLine: onLine, cancel: cancel}
	stderr := &limitedBuffer{limit: 4 << 10, truncate: true}
	code, err := c.Stream(fctx, argv, nil, lw, stderr)
	res := FollowResult{Offset: lw.offset, Lines: lw.lines}
	switch {
	case lw.err != nil:
		return res, lw.err
	case ctx.Err() != nil:
		return res, fmt.Errorf("sshrun: follow %s: %w", runDir, ctx.Err())
	case err != nil && (errors.Is(err, ErrConnectionLost) || errors.Is(err, ErrKeepaliveTimeout)):
		res.Outcome, res.Err = ConnectionLost, err
		return res, nil
	case err != nil:
		return res, fmt.Errorf("sshrun: follow %s: %w", runDir, err)
	}
	switch code {
	case 0:
		// The stream is complete: a last line without a newline is whole.
		if len(lw.partial) > 0 {
			if err := lw.deliver(lw.partial); err != nil {
				return res, err
			}
			res.Offset, res.Lines = lw.offset, lw.lines
		}
		res.Outcome = Finished
		return res, nil
	case ProbeExitCrashed:
		res.Outcome = ProbeCrashed
		return res, nil
	}
	return res, fmt.Errorf("sshrun: probe tail: exit %d: %s", code, firstLine(stderr.Bytes()))
}

// lineWriter splits the tail's output into lines and keeps the offset of
// the end of the last complete one.
type lineWriter struct {
	offset  int64
	lines   int64
	partial []byte
	onLine  func([]byte) error
	cancel  func()
	err     error
}

func (w *lineWriter) Write(p []byte) (int, error) {
	if w.err != nil {
		return len(p), nil // draining after a failure; Follow reports it
	}
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			if len(w.partial)+len(p) > MaxEventLine {
				w.fail(fmt.Errorf("sshrun: follow: event line at offset %d is longer than %d bytes", w.offset, MaxEventLine))
				return n, nil
			}
			w.partial = append(w.partial, p...)
			break
		}
		line := p[:i]
		if len(w.partial) > 0 {
			w.partial = append(w.partial, line...)
			line = w.partial
		}
		if err := w.deliver(line); err != nil {
			return n, nil
		}
		w.offset++ // the newline
		w.partial = w.partial[:0]
		p = p[i+1:]
	}
	return n, nil
}

func (w *lineWriter) deliver(line []byte) error {
	if len(line) > MaxEventLine {
		w.fail(fmt.Errorf("sshrun: follow: event line at offset %d is longer than %d bytes", w.offset, MaxEventLine))
		return w.err
	}
	if err := w.onLine(line); err != nil {
		w.fail(fmt.Errorf("sshrun: follow: line at offset %d: %w", w.offset, err))
		return w.err
	}
	w.offset += int64(len(line))
	w.lines++
	return nil
}

func (w *lineWriter) fail(err error) {
	w.err = err
	w.cancel()
}

var _ io.Writer = (*lineWriter)(nil)
