package acceptance

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// System locations are never places where tests may write, and a fio step
// writing there is refused whatever the host declares; scratch folders,
// files and block devices elsewhere are places.
func TestSystemLocationsAreNoWritePlaces(t *testing.T) {
	t.Parallel()
	for p, want := range map[string]string{
		"/etc":                       "/etc is a system location",
		"/etc/passwd":                "/etc/passwd is under /etc, a system location",
		"/proc/1/root/etc/passwd":    "is under /proc, a system location",
		"/usr/local/bin":             "is under /usr",
		"/bin":                       "/bin is a system location",
		"/boot/efi":                  "is under /boot",
		"/sys/block/nvme0n1":         "is under /sys",
		"/dev/shm/accord":            "is under /dev/shm",
		"/dev/mem":                   "is a system device",
		"/dev/tty1":                  "is a system device",
		"/var/lib":                   "too broad",
		"/var/lib/dpkg/status":       "is under /var/lib/dpkg",
		"/home":                      "too broad",
		"/root/.ssh/authorized_keys": "SSH configuration folder",
		"/home/lab/.ssh":             "SSH configuration folder",
		"/mnt":                       "too broad",
	} {
		require.Contains(t, SystemLocation(p), want, p)
		_, err := ParseWritePlaces("/mnt/nvme/accord\n" + p)
		require.Error(t, err, p)
		require.Contains(t, err.Error(), want, p)
	}
	for _, p := range []string{"/mnt/nvme/accord", "/tmp/scratch", "/var/tmp/accord", "/var/lib/accord/demo/fio", "/dev/nvme1n1", "/dev/disk/by-id/nvme-x", "/home/lab/scratch", "/data"} {
		require.Empty(t, SystemLocation(p), p)
		places, err := ParseWritePlaces(p)
		require.NoError(t, err, p)
		require.Equal(t, WritePlaces{p}, places)
	}

	// A step writing to a system location is refused even on a host that
	// declared it (before such places were refused).
	p := ProfileSpec{Steps: []StepSpec{{Name: "w", Kind: StepFio, Fio: &FioStep{RW: "write", Target: "/etc/passwd"}}}}
	require.Equal(t, []string{"step w writes (rw write) to /etc/passwd: /etc/passwd is under /etc, a system location, where tests never write"},
		WriteOutside(p, WritePlaces{"/etc"}, "lab-1"))
}
