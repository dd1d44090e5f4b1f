/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What a config needs of the host, checked before EAL starts (see
 * host_check.h): a start that cannot succeed fails with what is missing,
 * not with what some PMD makes of it.
 */
#define _GNU_SOURCE /* sched_getaffinity */
#include <dirent.h>
#include <errno.h>
#include <net/if.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/host_check.h"

/* A mempool element of an mbuf of RTE_MBUF_DEFAULT_BUF_SIZE: the buffer, the rte_mbuf, headers. */
#define MBUF_BYTES 2432u
/* What EAL, the rings and the tables take besides, roughly. */
#define EAL_MB 48u

/* The value of key= in a device's arguments ("net_af_xdp0,iface=veth0"), into v. */
static bool
dev_arg(const char *dev, const char *key, char *v, size_t len)
{
	size_t kl = strlen(key);

	for (const char *p = strchr(dev, ','); p != NULL; p = strchr(p + 1, ','))
		if (strncmp(p + 1, key, kl) == 0 && p[1 + kl] == '=') {
			const char *s = p + 2 + kl, *e = strchr(s, ',');
			size_t n = e != NULL ? (size_t)(e - s) : strlen(s);

			if (n >= len)
				n = len - 1;
			memcpy(v, s, n);
			v[n] = '\0';
			return true;
		}
	return false;
}

/* This process's network namespace, for a person: its name under /run/netns, and its inode. */
static void
netns_name(char *buf, size_t len)
{
	struct stat self, st;
	struct dirent *e;
	DIR *d;

	if (stat("/proc/self/ns/net", &self) != 0) {
		snprintf(buf, len, "this process's network namespace");
		return;
	}
	d = opendir("/run/netns");
	while (d != NULL && (e = readdir(d)) != NULL) {
		char path[sizeof(e->d_name) + 16];

		snprintf(path, sizeof(path), "/run/netns/%s", e->d_name);
		if (e->d_name[0] != '.' && stat(path, &st) == 0 && st.st_ino == self.st_ino &&
		    st.st_dev == self.st_dev) {
			snprintf(buf, len, "network namespace %.64s (net:[%lu])", e->d_name,
				 (unsigned long)self.st_ino);
			closedir(d);
			return;
		}
	}
	if (d != NULL)
		closedir(d);
	snprintf(buf, len, "this process's network namespace (net:[%lu], not named in /run/netns)",
		 (unsigned long)self.st_ino);
}

/* Whether a device is a PCI address (DBDF), as EAL takes one. */
static bool
is_pci(const char *dev)
{
	unsigned int a, b, c, f;
	char tail;
	int n = sscanf(dev, "%4x:%2x:%2x.%1u%c", &a, &b, &c, &f, &tail);

	return n == 4 || (n == 5 && tail == ',');
}

/* The interfaces and PCI devices the ports name. @return the errors found. */
static int
check_devices(const struct ncd_config *cfg, const char *name)
{
	char ns[160], v[IF_NAMESIZE + 8];
	int errors = 0;

	netns_name(ns, sizeof(ns));
	for (unsigned int i = 0; i < cfg->nports; i++) {
		const char *dev = cfg->ports[i].device;

		/* A PMD that takes packets from a kernel interface needs it to be there already. */
		if ((strncmp(dev, "net_af_xdp", 10) == 0 || strncmp(dev, "net_af_packet", 13) == 0 ||
		     strncmp(dev, "net_pcap", 8) == 0) && dev_arg(dev, "iface", v, sizeof(v)) &&
		    if_nametoindex(v) == 0) {
			fprintf(stderr, "%s: ports[%u].device: no interface %s in %s (create it, or "
				"run the daemon where it is: ip netns exec)\n", name, i, v, ns);
			errors++;
		}
		if (is_pci(dev)) {
			char path[64];

			snprintf(path, sizeof(path), "/sys/bus/pci/devices/%.12s", dev);
			if (access(path, F_OK) != 0) {
				fprintf(stderr, "%s: ports[%u].device: no PCI device %.12s on this host "
					"(%s)\n", name, i, dev, path);
				errors++;
			}
		}
	}
	return errors;
}

/*
 * EAL's lcores: those -l lists (ids and ranges; each lcore is the CPU of its
 * number), or, without it, the CPUs this process may run on. @return the
 * count, or -1 when another form says them (--lcores, -c): not checked.
 */
static int
eal_lcores(const char *const *args, int nargs, bool *set, unsigned int max, char *list,
	   size_t len)
{
	const char *l = NULL;
	int n = 0;

	for (int k = 0; k < nargs; k++) {
		const char *a = args[k];

		if (strcmp(a, "--lcores") == 0 || strncmp(a, "--lcores=", 9) == 0 ||
		    strcmp(a, "-c") == 0)
			return -1;
		if (strcmp(a, "-l") == 0 && k + 1 < nargs)
			l = args[k + 1];
		else if (strncmp(a, "-l", 2) == 0 && a[2] != '\0')
			l = a + 2;
	}
	memset(set, 0, max * sizeof(*set));
	if (l == NULL) {
		cpu_set_t cpus;

		if (sched_getaffinity(0, sizeof(cpus), &cpus) != 0)
			return -1;
		for (unsigned int i = 0; i < max; i++)
			if (CPU_ISSET(i, &cpus)) {
				set[i] = true;
				n++;
			}
		snprintf(list, len, "this process's CPUs (no -l)");
		return n;
	}
	snprintf(list, len, "-l %s", l);
	for (const char *p = l; *p != '\0';) {
		char *end;
		unsigned long lo = strtoul(p, &end, 10), hi = lo;

		if (end == p)
			return -1;
		if (*end == '-') {
			p = end + 1;
			hi = strtoul(p, &end, 10);
			if (end == p)
				return -1;
		}
		for (unsigned long i = lo; i <= hi && i < max; i++) {
			n += !set[i];
			set[i] = true;
		}
		if (*end != ',' && *end != '\0')
			return -1;
		p = *end == ',' ? end + 1 : end;
	}
	return n;
}

/*
 * EAL's lcores are CPUs this host has. (That the workers' are among them, and
 * not the main one, the config's own checks say: config.c.)
 */
static int
check_lcores(const char *name, const char *const *args, int nargs)
{
	enum { MAX = 1024 };
	long ncpus = sysconf(_SC_NPROCESSORS_CONF);
	bool set[MAX];
	char list[128];
	int errors = 0;

	if (eal_lcores(args, nargs, set, MAX, list, sizeof(list)) < 0)
		return 0;
	for (unsigned int i = 0; i < MAX; i++)
		if (set[i] && (long)i >= ncpus) {
			fprintf(stderr, "%s: eal: %s: lcore %u is CPU %u, which this host does not have "
				"(%ld CPUs)\n", name, list, i, i, ncpus);
			errors++;
			break;
		}
	return errors;
}

/* Free hugepages in MiB, of every size (/proc/meminfo), or -1. */
static long
huge_free_mb(void)
{
	long free_pages = -1, size_kb = -1;
	char line[128];
	FILE *f = fopen("/proc/meminfo", "r");

	while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
		sscanf(line, "HugePages_Free: %ld", &free_pages);
		sscanf(line, "Hugepagesize: %ld kB", &size_kb);
	}
	if (f != NULL)
		fclose(f);
	return free_pages < 0 || size_kb < 0 ? -1 : free_pages * size_kb / 1024;
}

/* The hugepages the config needs, against those free: a warning only, as an estimate. */
static void
check_hugepages(const struct ncd_config *cfg, const char *name, const char *const *args, int nargs)
{
	uint64_t need = ((uint64_t)cfg->mbufs * MBUF_BYTES >> 20) + cfg->heap_reserve_mb + EAL_MB;
	long free_mb = huge_free_mb();

	for (int k = 0; k < nargs; k++)
		if (strcmp(args[k], "--no-huge") == 0)
			return;
	if (free_mb < 0)
		fprintf(stderr, "%s: warning: hugepages: /proc/meminfo does not say how many are "
			"free; the config needs about %lu MiB\n", name, (unsigned long)need);
	else if ((uint64_t)free_mb < need)
		fprintf(stderr, "%s: warning: hugepages: the config needs about %lu MiB (mempool.mbufs, "
			"heap_reserve_mb, EAL), %ld MiB are free: the start may fail (an estimate: "
			"clients' regions and rings come on top)\n", name, (unsigned long)need,
			free_mb);
}

int
ncd_rp_filter_all(void)
{
	FILE *f = fopen("/proc/sys/net/ipv4/conf/all/rp_filter", "r");
	int v = -1;

	if (f == NULL)
		return -1;
	if (fscanf(f, "%d", &v) != 1)
		v = -1;
	fclose(f);
	return v;
}

/*
 * Ports in exception mode xdp: their program can be read (an error), and
 * IPv4's reverse path filter lets the kernel take what comes in on their
 * TAP (a warning: the rest of the host works either way).
 */
static int
check_xdp(const struct ncd_config *cfg, const char *name)
{
	int errors = 0, rpf = ncd_rp_filter_all();

	for (unsigned int i = 0; i < cfg->nports; i++) {
		const struct ncd_port_conf *pc = &cfg->ports[i];

		if (!pc->xdp)
			continue;
		if (access(pc->xdp_prog, R_OK) != 0) {
			fprintf(stderr, "%s: ports[%u].exception.program: cannot read the XDP program "
				"%s: %s\n", name, i, pc->xdp_prog, strerror(errno));
			errors++;
		}
		if (rpf > 0)
			fprintf(stderr, "%s: warning: ports[%u].exception.mode: xdp, but "
				"net.ipv4.conf.all.rp_filter is %d: the kernel will drop the IPv4 "
				"packets that reach it through the TAP (set it to 0)\n", name, i, rpf);
	}
	return errors;
}

int
ncd_config_check_host(const struct ncd_config *cfg, const char *name, char *const *extra,
		      int nextra)
{
	const char *args[NCD_MAX_EAL_ARGS + 64];
	int nargs = 0, errors;

	/* The config's EAL arguments, then the command line's: EAL takes them in that order. */
	for (unsigned int k = 0; k < cfg->neal; k++)
		args[nargs++] = cfg->eal[k];
	for (int k = 0; k < nextra && nargs < (int)(sizeof(args) / sizeof(args[0])); k++)
		args[nargs++] = extra[k];
	errors = check_devices(cfg, name) + check_lcores(name, args, nargs) + check_xdp(cfg, name);
	check_hugepages(cfg, name, args, nargs);
	return errors > 0 ? -1 : 0;
}
