/* Stand-in for <linux/raw.h>, which Linux 5.14 removed from its uapi
 * headers (the raw block device driver is gone). fio 2.x includes it for
 * fio_lookup_raw, which a run on a regular file never calls. */
#ifndef NUMBERS_COMPAT_LINUX_RAW_H
#define NUMBERS_COMPAT_LINUX_RAW_H
#include <linux/ioctl.h>
#include <linux/types.h>
#define RAW_SETBIND _IO(0xac, 0)
#define RAW_GETBIND _IO(0xac, 1)
struct raw_config_request {
	int raw_minor;
	__u64 block_major;
	__u64 block_minor;
};
#endif
