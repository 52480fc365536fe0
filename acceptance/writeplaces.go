package acceptance

import (
	"fmt"
	"path"
	"strings"
)

// WritePlaces are where a lab host lets tests write: scratch directories
// (everything below them) and single files or block devices, matched
// exactly. Entries under /dev/ are devices: written only by destructive
// steps on a host that allows them. Anywhere else a fio step may only read
// files that exist already; it never creates, extends or overwrites one.
type WritePlaces []string

// MaxWritePlaces bounds a host's declared places.
const MaxWritePlaces = 32

// ParseWritePlaces reads one absolute path a line (blank lines and
// surrounding spaces ignored) and checks each.
func ParseWritePlaces(text string) (WritePlaces, error) {
	var out WritePlaces
	for _, line := range strings.Split(text, "\n") {
		p := strings.TrimSpace(line)
		if p == "" {
			continue
		}
		if err := checkWritePlace(p); err != nil {
			return nil, err
		}
		if !out.hasExactly(p) {
			out = append(out, p)
		}
	}
	if len(out) > MaxWritePlaces {
		return nil, fmt.Errorf("at most %d places", MaxWritePlaces)
	}
	return out, nil
}

func checkWritePlace(p string) error {
	switch {
	case len(p) > MaxPathLen:
		return fmt.Errorf("%.40q…: at most %d bytes", p, MaxPathLen)
	case !path.IsAbs(p):
		return fmt.Errorf("%q: must be an absolute path, like /mnt/nvme/accord or /dev/nvme1n1", p)
	case path.Clean(p) != p:
		return fmt.Errorf("%q: must be a clean path (no .., //, trailing / or ./); did you mean %s?", p, path.Clean(p))
	case p == "/" || p == "/dev":
		return fmt.Errorf("%q: too broad; name a scratch directory or a device", p)
	case strings.ContainsFunc(p, func(r rune) bool { return r < 0x20 || r == 0x7f }) || strings.Contains(p, ":"):
		return fmt.Errorf("%q: must not contain control characters or ':'", p)
	}
	if why := SystemLocation(p); why != "" {
		return fmt.Errorf("%s: tests never write there, whatever a host declares", why)
	}
	return nil
}

// systemTrees are folders where tests never write, nor below them: the
// operating system's programs, libraries and configuration, the kernel's
// interfaces (/proc/1/root leads back to /), run-time state, logs, the
// system's own state under /var/lib (a service's folder there, such as
// Accord's own /var/lib/accord, may hold a scratch directory), and the
// parts of /dev that are not block devices.
var systemTrees = []string{
	"/etc", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/boot", "/proc", "/sys", "/run", "/snap", "/lost+found",
	"/var/log", "/var/cache", "/var/spool", "/var/mail", "/var/run", "/var/lock", "/var/backups", "/var/opt",
	"/var/lib/dpkg", "/var/lib/apt", "/var/lib/rpm", "/var/lib/dnf", "/var/lib/yum", "/var/lib/systemd", "/var/lib/dbus",
	"/var/lib/polkit-1", "/var/lib/sudo", "/var/lib/pam", "/var/lib/ucf", "/var/lib/sss", "/var/lib/containerd",
	"/var/lib/docker", "/var/lib/kubelet", "/var/lib/nvme",
	"/dev/shm", "/dev/pts", "/dev/mqueue", "/dev/hugepages", "/dev/fd", "/dev/char", "/dev/cpu", "/dev/net", "/dev/input",
	"/dev/bus", "/dev/dri", "/dev/snd", "/dev/vfio",
}

// broadFolders hold other people's files: they are no scratch directory
// themselves (a folder made below one is).
var broadFolders = []string{"/", "/dev", "/home", "/root", "/var", "/var/lib", "/mnt", "/media", "/srv", "/opt"}

// charDevices are devices under /dev that are not block devices (memory,
// ports, terminals, the kernel log): never written. The probe also refuses
// to write any device that is not a block device.
var charDevices = []string{"/dev/mem", "/dev/kmem", "/dev/port", "/dev/kmsg", "/dev/console", "/dev/null", "/dev/zero", "/dev/full",
	"/dev/random", "/dev/urandom", "/dev/stdin", "/dev/stdout", "/dev/stderr", "/dev/log", "/dev/initctl", "/dev/core"}

// SystemLocation says why tests may never write at p, a clean absolute
// path (the probe passes it with its symbolic links resolved): it is a
// system location, a folder too broad to be a scratch directory, or an
// SSH configuration folder; "" when none of these.
func SystemLocation(p string) string {
	for _, d := range systemTrees {
		if p == d || strings.HasPrefix(p, d+"/") {
			if p == d {
				return p + " is a system location"
			}
			return fmt.Sprintf("%s is under %s, a system location", p, d)
		}
	}
	for _, d := range broadFolders {
		if p == d {
			return p + " is too broad: it holds the system's or other people's files (name a scratch directory below it, or a device)"
		}
	}
	for _, d := range charDevices {
		if p == d {
			return p + " is a system device, not a block device"
		}
	}
	if strings.HasPrefix(p, "/dev/tty") || strings.HasPrefix(p, "/dev/watchdog") {
		return p + " is a system device, not a block device"
	}
	for _, part := range strings.Split(p, "/") {
		if part == ".ssh" {
			return p + " is in an SSH configuration folder (.ssh)"
		}
	}
	return ""
}

// IsDevicePath reports whether p names a device (under /dev/).
func IsDevicePath(p string) bool { return strings.HasPrefix(p, "/dev/") }

// Covers reports whether tests may write at target (a clean absolute
// path): it is one of the places, or below one that is not a device.
func (w WritePlaces) Covers(target string) bool {
	for _, p := range w {
		if target == p || (!IsDevicePath(p) && strings.HasPrefix(target, p+"/")) {
			return true
		}
	}
	return false
}

// Declares reports whether target itself is one of the places (a file or
// device declared by its own path).
func (w WritePlaces) Declares(target string) bool { return w.hasExactly(target) }

func (w WritePlaces) hasExactly(p string) bool {
	for _, e := range w {
		if e == p {
			return true
		}
	}
	return false
}

// String lists the places for people ("none" when there is none).
func (w WritePlaces) String() string {
	if len(w) == 0 {
		return "none"
	}
	parts := make([]string, len(w))
	for i, p := range w {
		parts[i] = p
		if IsDevicePath(p) {
			parts[i] += " (device, destructive steps only)"
		}
	}
	return strings.Join(parts, ", ")
}

// WriteOutside lists the profile's fio steps that write (rw with writes)
// where host places do not let them, as sentences naming the step, its
// target and the places, for the run request's refusal. Steps that only
// read are judged on the host, where the probe sees whether the file
// exists (creating or extending one is a write too).
func WriteOutside(p ProfileSpec, places WritePlaces, host string) []string {
	var out []string
	for _, s := range p.Steps {
		if s.Kind != StepFio || s.Fio == nil || !RWWrites(s.Fio.RW) {
			continue
		}
		target := path.Clean(s.Fio.Target)
		if why := SystemLocation(target); why != "" {
			out = append(out, fmt.Sprintf("step %s writes (rw %s) to %s: %s, where tests never write", s.Name, s.Fio.RW, target, why))
			continue
		}
		if !places.Covers(target) {
			out = append(out, fmt.Sprintf("step %s writes (rw %s) to %s, which is not a place where %s lets tests write (%s)",
				s.Name, s.Fio.RW, target, host, places))
		}
	}
	return out
}
