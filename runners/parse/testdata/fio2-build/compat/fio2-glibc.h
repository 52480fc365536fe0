/* Forced include (-include) for building fio 2.x against a current glibc,
 * keeping fio's source untouched:
 * - glibc >= 2.30 declares gettid() in <unistd.h>, and fio 2.x defines its
 *   own static gettid() in os/os-linux.h: include <unistd.h> first and
 *   rename fio's later definition;
 * - glibc >= 2.28 no longer includes <sys/sysmacros.h> (major, minor)
 *   from <sys/types.h>, which fio 2.20+'s oslib/linux-dev-lookup.c needs. */
#include <unistd.h>
#include <sys/types.h>
#include <sys/sysmacros.h>
#define gettid fio_gettid
