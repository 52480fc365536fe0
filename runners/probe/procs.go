package probe

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// procStat is the part of /proc/PID/stat the probe needs.
type procStat struct {
	PID       int
	Comm      string
	State     byte
	PPID      int
	PGID      int
	SID       int
	StartTime uint64 // clock ticks since boot
}

// parseProcStat parses /proc/PID/stat. The command name is in parentheses
// and may itself contain spaces and parentheses, so the fields are taken
// after the last ')'.
func parseProcStat(b []byte) (procStat, error) {
	var st procStat
	open := bytes.IndexByte(b, '(')
	closeIdx := bytes.LastIndexByte(b, ')')
	if open < 1 || closeIdx < open {
		return st, errors.New("proc stat: no command name")
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b[:open])))
	if err != nil {
		return st, fmt.Errorf("proc stat: pid: %w", err)
	}
	st.PID = pid
	st.Comm = string(b[open+1 : closeIdx])
	f := strings.Fields(string(b[closeIdx+1:]))
	// f[0]=state f[1]=ppid f[2]=pgrp f[3]=session ... f[19]=starttime
	if len(f) < 20 || len(f[0]) != 1 {
		return st, errors.New("proc stat: too few fields")
	}
	st.State = f[0][0]
	ints := []*int{&st.PPID, &st.PGID, &st.SID}
	for i, p := range ints {
		n, err := strconv.Atoi(f[1+i])
		if err != nil {
			return st, fmt.Errorf("proc stat: field %d: %w", i+4, err)
		}
		*p = n
	}
	st.StartTime, err = strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return st, fmt.Errorf("proc stat: starttime: %w", err)
	}
	return st, nil
}

func readProcStat(pid int) (procStat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, err
	}
	return parseProcStat(b)
}

// processes lists every live process (zombies excluded: they hold no
// resources and are only waiting for their parent).
func processes() []procStat {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	out := make([]procStat, 0, len(entries))
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := readProcStat(pid)
		if err != nil || st.State == 'Z' || st.State == 'X' {
			continue
		}
		out = append(out, st)
	}
	return out
}

// cmdline returns a process's argument vector.
func cmdline(pid int) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil || len(b) == 0 {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
}

// runProcesses lists the processes of the run whose group (and session) the
// probe leads: pgrp or session equal to pgid, started no earlier than the
// leader (a recycled id of an older process does not count).
func runProcesses(pgid int, notBefore uint64) []procStat {
	var out []procStat
	for _, p := range processes() {
		if (p.PGID == pgid || p.SID == pgid) && p.StartTime >= notBefore {
			out = append(out, p)
		}
	}
	return out
}

// guardianProcesses lists fault guardians of the run folder dir. They run in
// their own session so that killing the run's group leaves them to remove
// the fault, and are found by their command line.
func guardianProcesses(dir string) []procStat {
	var out []procStat
	for _, p := range processes() {
		argv := cmdline(p.PID)
		if isGuardianOf(argv, dir) {
			out = append(out, p)
		}
	}
	return out
}

func isGuardianOf(argv []string, dir string) bool {
	hasCmd := false
	for i, a := range argv {
		if a == guardianCommand {
			hasCmd = true
		}
		if hasCmd && a == "--dir" && i+1 < len(argv) && argv[i+1] == dir {
			return true
		}
	}
	return false
}

// procTree is a child and everything it started, remembered by pid and
// start time, so that descendants re-parented to init after their parent
// died are still found, and a recycled pid is never signalled.
type procTree map[int]uint64

func newProcTree(pid int) procTree {
	t := procTree{}
	if st, err := readProcStat(pid); err == nil {
		t[pid] = st.StartTime
	}
	t.refresh()
	return t
}

// refresh adds the live descendants of every member.
func (t procTree) refresh() {
	procs := processes()
	for changed := true; changed; {
		changed = false
		for _, p := range procs {
			if _, member := t[p.PID]; member {
				continue
			}
			if start, ok := t[p.PPID]; ok && p.StartTime >= start {
				t[p.PID] = p.StartTime
				changed = true
			}
		}
	}
}

// live returns the members still running.
func (t procTree) live() []int {
	var out []int
	for pid, start := range t {
		st, err := readProcStat(pid)
		if err == nil && st.StartTime == start && st.State != 'Z' && st.State != 'X' {
			out = append(out, pid)
		}
	}
	return out
}

func (t procTree) signal(sig syscall.Signal) int {
	t.refresh()
	pids := t.live()
	for _, pid := range pids {
		_ = syscall.Kill(pid, sig)
	}
	return len(pids)
}

// killTree ends a child and its whole tree: SIGTERM, then SIGKILL after
// grace, repeated until none of the tree is left.
func killTree(pid int, grace time.Duration) {
	t := newProcTree(pid)
	if t.signal(syscall.SIGTERM) == 0 {
		return
	}
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		t.refresh()
		if len(t.live()) == 0 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	for range 100 {
		if t.signal(syscall.SIGKILL) == 0 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func alive(pid int) bool {
	st, err := readProcStat(pid)
	return err == nil && st.State != 'Z' && st.State != 'X'
}

// childAttr is how the probe starts its children: in its process group, and
// killed by the kernel if the probe dies.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// commandCancel makes cmd's context cancellation end the whole tree of the
// child (not just the child), with a grace period for it to finish writing.
func commandCancel(cmd *exec.Cmd, grace time.Duration) {
	cmd.SysProcAttr = childAttr()
	cmd.Cancel = func() error {
		if cmd.Process == nil {
			return nil
		}
		killTree(cmd.Process.Pid, grace)
		return nil
	}
	cmd.WaitDelay = grace + 5*time.Second
}

func absDir(dir string) (string, error) {
	if dir == "" {
		return "", errors.New("--dir is required")
	}
	a, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	return filepath.Clean(a), nil
}
