/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * One owner per device: a second daemon on the same interface or PCI device
 * would not just fail, it would break the first (net_af_xdp's probe replaces
 * the interface's XDP program before it fails). So each port's device, and
 * its exception device, is claimed with a lock file before EAL probes
 * anything; the kernel releases the locks when the process ends, however it
 * ends, and a clean exit removes the files too.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <rte_common.h>

#include "core/config.h"
#include "port/port.h"

#define LOCK_DIR "/run/lock/netchanneld"

/* The locks this process holds: their files go at a clean exit (ncd_ports_unclaim()). */
static struct {
	int fd;
	char path[256];
} held[NCD_MAX_PORTS * 2];
static unsigned int nheld;

/*
 * What a device string names that another process could also take: a kernel
 * interface ("iface=NAME", in this network namespace) or a PCI address. 0 for
 * a device that is the daemon's alone (net_pcap, net_null, net_ring...).
 */
bool
ncd_devargs_iface(const char *dev, char *name, size_t len)
{
	const char *iface = dev != NULL ? strstr(dev, "iface=") : NULL;

	if (iface == NULL)
		return false;
	snprintf(name, len, "%.*s", (int)strcspn(iface + 6, ","), iface + 6);
	return true;
}

static int
device_key(const char *dev, char *key, size_t len)
{
	char iface[64];
	struct stat ns;
	unsigned int dom, bus, slot, fn;
	char end;

	if (ncd_devargs_iface(dev, iface, sizeof(iface))) {
		if (stat("/proc/self/ns/net", &ns) != 0)
			ns.st_ino = 0;
		snprintf(key, len, "netns%lu-iface-%s", (unsigned long)ns.st_ino, iface);
	} else if (sscanf(dev, "%x:%x:%x.%x%c", &dom, &bus, &slot, &fn, &end) >= 4 ||
		   sscanf(dev, "%x:%x.%x%c", &bus, &slot, &fn, &end) >= 3) {
		snprintf(key, len, "pci-%.*s", (int)strcspn(dev, ","), dev);
	} else {
		return 0;
	}
	/* A file name: nothing but [A-Za-z0-9._-]. */
	for (char *p = key; *p != '\0'; p++)
		if (!isalnum((unsigned char)*p) && *p != '.' && *p != '-' && *p != '_')
			*p = '_';
	return 1;
}

static int
claim(const char *port, const char *dev, char *err, size_t errlen)
{
	char key[160], path[256], pid[32] = "";
	ssize_t n;
	int fd;

	if (dev == NULL || !device_key(dev, key, sizeof(key)))
		return 0;
	snprintf(path, sizeof(path), LOCK_DIR "/%s.lock", key);
again:
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0) {
		snprintf(err, errlen, "port %s: open(%s): %s", port, path, strerror(errno));
		return -1;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
		struct stat a, b;

		/*
		 * The daemon before may have removed the file (a clean exit) between
		 * this open and this lock: a lock on a file no longer at the path
		 * guards nothing, so take the path's file anew.
		 */
		if (fstat(fd, &a) == 0 && (stat(path, &b) != 0 || a.st_ino != b.st_ino ||
					   a.st_dev != b.st_dev)) {
			close(fd);
			goto again;
		}
	} else {
		n = pread(fd, pid, sizeof(pid) - 1, 0);
		pid[n > 0 ? n : 0] = '\0';
		pid[strcspn(pid, "\n")] = '\0';
		snprintf(err, errlen, "port %s: device %s is in use by netchanneld pid %s (%s): one "
			 "daemon per device", port, dev, pid[0] ? pid : "?", path);
		close(fd);
		return -1;
	}
	/* Held until the process ends, or ncd_ports_unclaim(). The pid is for the message. */
	n = snprintf(pid, sizeof(pid), "%d\n", (int)getpid());
	if (ftruncate(fd, 0) == 0 && pwrite(fd, pid, (size_t)n, 0) != n)
		(void)!ftruncate(fd, 0);   /* the pid is only for a message: none beats half */
	if (nheld < RTE_DIM(held)) {
		held[nheld].fd = fd;
		snprintf(held[nheld++].path, sizeof(held[0].path), "%s", path);
	}
	return 0;
}

void
ncd_ports_unclaim(void)
{
	/* Removed while still locked: a daemon that opened it meanwhile sees it gone, and retries. */
	while (nheld > 0) {
		nheld--;
		unlink(held[nheld].path);
		close(held[nheld].fd);
	}
}

int
ncd_ports_claim(const struct ncd_config *cfg, char *err, size_t errlen)
{
	/* /run/lock is the distribution's (1777); made here if a minimal system lacks it. */
	if ((mkdir("/run/lock", 01777) != 0 && errno != EEXIST) ||
	    (mkdir(LOCK_DIR, 0755) != 0 && errno != EEXIST)) {
		snprintf(err, errlen, "mkdir(%s): %s", LOCK_DIR, strerror(errno));
		return -1;
	}
	for (unsigned int i = 0; i < cfg->nports; i++)
		if (claim(cfg->ports[i].name, cfg->ports[i].device, err, errlen) != 0 ||
		    claim(cfg->ports[i].name, cfg->ports[i].exc_device, err, errlen) != 0)
			return -1;
	return 0;
}
