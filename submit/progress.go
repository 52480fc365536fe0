package submit

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/accordlab/accord/apiclient"
)

// ---------------------------------------------------------------------------
// Progress on standard error.

// progressPrinter shows the run's progress: on a terminal one line redrawn
// in place, otherwise one line per change (CI logs keep every line).
type progressPrinter struct {
	w     io.Writer
	live  bool // redraw one line
	off   bool
	width int
	start time.Time
	now   func() time.Time

	drawn     bool   // a live line is on screen
	lastLine  string // the live line drawn last
	lastKey   string
	lastPct   int
	lastPrint time.Time
}

// heartbeat is the longest a plain log stays silent while a run goes on
// (some CI systems kill jobs that print nothing for minutes).
const heartbeat = time.Minute

func newProgressPrinter(w io.Writer, mode string, getenv func(string) string) *progressPrinter {
	p := &progressPrinter{w: w, width: 80, now: time.Now}
	p.start = p.now()
	if n, err := strconv.Atoi(getenv("COLUMNS")); err == nil && n >= 20 {
		p.width = n
	}
	switch mode {
	case "off":
		p.off = true
	case "tty":
		p.live = true
	case "auto":
		p.live = isTerminal(w) && getenv("TERM") != "dumb"
	}
	return p
}

// isTerminal reports whether w is a character device other than /dev/null.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	if err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return false
	}
	if null, err := os.Stat(os.DevNull); err == nil && os.SameFile(fi, null) {
		return false
	}
	return true
}

func (p *progressPrinter) elapsed() string {
	d := p.now().Sub(p.start).Round(time.Second)
	return fmt.Sprintf("[%s]", d)
}

// line prints a message on its own line (above the live line, if any).
func (p *progressPrinter) line(msg string) {
	if p.off {
		return
	}
	p.clear()
	fmt.Fprintf(p.w, "%s %s\n", p.elapsed(), msg)
}

func (p *progressPrinter) clear() {
	if p.drawn {
		fmt.Fprint(p.w, "\r\x1b[2K")
		p.drawn = false
	}
}

func stateLabel(state string) string {
	if state == "waiting_for_host" {
		return "waiting for host"
	}
	return state
}

func (p *progressPrinter) update(r apiclient.Run) {
	if p.off {
		return
	}
	pct := int(r.Progress*100 + 0.5)
	pct = max(0, min(100, pct))
	text := oneLine(r.ProgressText)
	if p.live {
		line := truncateRunes(fmt.Sprintf("%s %-10s %s %3d%%  %s", p.elapsed(), stateLabel(r.State), progressBar(r.Progress, 20), pct, text), p.width-1)
		if line != p.lastLine || !p.drawn {
			fmt.Fprint(p.w, "\r\x1b[2K"+line)
			p.lastLine, p.drawn = line, true
		}
		return
	}
	// One line per change: the state, the step (the text before its
	// elapsed-time part), or ten more percent; and a heartbeat.
	key, _, _ := strings.Cut(text, " · ")
	key = r.State + "|" + key
	now := p.now()
	if key == p.lastKey && pct/10 == p.lastPct/10 && now.Sub(p.lastPrint) < heartbeat {
		return
	}
	p.lastKey, p.lastPct, p.lastPrint = key, pct, now
	fmt.Fprintf(p.w, "%s run %d %s %d%%: %s\n", p.elapsed(), r.ID, stateLabel(r.State), pct, text)
}

// finish ends the live line.
func (p *progressPrinter) finish() {
	if p.drawn {
		fmt.Fprintln(p.w)
		p.drawn = false
	}
}

func progressBar(f float64, width int) string {
	f = max(0, min(1, f))
	n := int(f*float64(width) + 0.5)
	return "[" + strings.Repeat("#", n) + strings.Repeat("-", width-n) + "]"
}

func truncateRunes(s string, n int) string {
	if n < 1 || utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}
