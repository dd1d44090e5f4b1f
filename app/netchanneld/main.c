/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * netchanneld -c FILE [-i] [--check-config] [--stats FILE] [-- EAL-ARGS]
 *
 * Exit codes: 0 clean shutdown (SIGINT/SIGTERM), 2 bad usage or config,
 * 1 runtime failure. Start-up is a staged sequence; a failure unwinds what
 * was done, in reverse.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <mntent.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <rte_eal.h>
#include <rte_log.h>
#include <rte_ethdev.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_memory.h>

#include <rte_pdump.h>
#include <rte_version.h>

#include "channel/channel.h"
#include "control/cli.h"
#include "control/control.h"
#include "control/reload.h"
#include "control/telemetry.h"
#include "control/views.h"
#include "core/host_check.h"
#include "core/log.h"
#include "core/stats.h"
#include "datapath/capture.h"
#include "datapath/datapath.h"
#include "datapath/frag.h"
#include "default_config.h"
#include "nat/nat.h"
#include "nc_cli.h"
#include "nc_version.h"
#include "ncd.h"
#include "nexthop/nexthop.h"
#include "offload/offload.h"
#include "offload/xdp_claims.h"
#include "port/port.h"


static volatile sig_atomic_t signals;

#define TEARDOWN_TIMEOUT_S 10
/* From the first stop signal, how long a second one waits before it forces the exit. */
#define SHUTDOWN_GRACE_S 3

/* A second stop signal, for the forcer thread; what a forced exit removes. */
static struct {
	struct timespec first;         /* when the first stop signal came */
	int fd;                        /* an eventfd the second one writes, or -1 */
	char runtime_dir[PATH_MAX];    /* EAL's, once it is up */
} force = { .fd = -1 };

static void remove_prefix_files(const char *prefix, const char *runtime_dir);

/*
 * Shutdown frees DPDK memory, and EAL takes a lock in shared memory to do so
 * (memory hotplug, the heap). A client killed while it held one, in its own
 * rte_eal_init() or rte_eal_cleanup(), leaves it held for ever: the daemon
 * would spin in its teardown. The watchdog ends the process instead, saying
 * which step hung; everything the daemon reports is written by then, and the
 * kernel takes back what is the process's own.
 */
static struct {
	pthread_t thread;
	const char *volatile step;
	volatile int done;
	int ret;
	bool running;
} teardown;

static void *
teardown_watchdog(void *arg)
{
	(void)arg;
	for (unsigned int i = 0; i < TEARDOWN_TIMEOUT_S * 10; i++) {
		if (teardown.done)
			return NULL;
		usleep(100000);
	}
	fprintf(stderr, "netchanneld: shutdown: %s has not returned for %d s: a lock in DPDK's "
		"shared memory is held, most likely by a client killed inside rte_eal_init() or "
		"rte_eal_cleanup(); exiting without freeing the rest, but the hugepage files and "
		"runtime directory of prefix '%s'\n", teardown.step, TEARDOWN_TIMEOUT_S,
		ncd.file_prefix);
	remove_prefix_files(ncd.file_prefix, force.runtime_dir);
	_exit(teardown.ret);
}

/* The step of the teardown about to run, for the watchdog's message. */
static void
teardown_step(const char *step)
{
	teardown.step = step;
}

static void
teardown_start(int ret)
{
	teardown.ret = ret;
	teardown.step = "the teardown";
	/* The watchdog's _exit() would lose what stdio still buffers: the counters. */
	fflush(stdout);
	teardown.running = pthread_create(&teardown.thread, NULL, teardown_watchdog, NULL) == 0;
	if (!teardown.running)
		NCD_LOG(WARNING, "pthread_create(teardown watchdog): a hung teardown will hang");
}

static void
teardown_end(void)
{
	teardown.done = 1;
	if (teardown.running)
		pthread_join(teardown.thread, NULL);
}

/*
 * Only a flag: the main loop does the work. A second signal forces the exit,
 * but no sooner than SHUTDOWN_GRACE_S after the first: GNU timeout, for one,
 * sends two at once (to the child and to its group), and a clean stop takes
 * well under that.
 */
static void
on_signal(int sig)
{
	const uint64_t one = 1;

	if (sig == SIGHUP) {
		ncd.reload = 1;
		return;
	}
	if (signals++ == 0) {
		clock_gettime(CLOCK_MONOTONIC, &force.first);
		ncd.stop = true;
		return;
	}
	if (force.fd < 0 || write(force.fd, &one, sizeof(one)) != sizeof(one))
		_exit(1);
}

/*
 * The forced exit, in a thread of its own (a signal handler may not walk
 * directories): after a second stop signal, once the grace period from the
 * first is over, unless the clean stop has ended the process by then. The
 * prefix's files go all the same.
 */
static void *
forcer(void *arg)
{
	struct timespec now;
	uint64_t v;
	long left_ms;

	(void)arg;
	while (read(force.fd, &v, sizeof(v)) < 0 && errno == EINTR)
		;
	clock_gettime(CLOCK_MONOTONIC, &now);
	left_ms = SHUTDOWN_GRACE_S * 1000L - ((now.tv_sec - force.first.tv_sec) * 1000L +
					      (now.tv_nsec - force.first.tv_nsec) / 1000000L);
	if (left_ms > 0)
		usleep((useconds_t)left_ms * 1000);
	fprintf(stderr, "netchanneld: a second stop signal, and the shutdown still runs %d s "
		"after the first (%s): forcing the exit; removing the hugepage files and runtime "
		"directory of prefix '%s'\n", SHUTDOWN_GRACE_S,
		teardown.step != NULL ? teardown.step : "the workers", ncd.file_prefix);
	remove_prefix_files(ncd.file_prefix, force.runtime_dir);
	_exit(1);
}

/* The forcer, waiting for a second signal. Without it, a second signal exits at once. */
static void
forcer_start(void)
{
	pthread_t t;

	snprintf(force.runtime_dir, sizeof(force.runtime_dir), "%s", rte_eal_get_runtime_dir());
	force.fd = eventfd(0, EFD_CLOEXEC);
	if (force.fd >= 0 && pthread_create(&t, NULL, forcer, NULL) == 0) {
		pthread_detach(t);
		return;
	}
	NCD_LOG(WARNING, "the forcer thread (eventfd, pthread_create): %s: a second stop signal "
		"exits at once", strerror(errno));
	if (force.fd >= 0)
		close(force.fd);
	force.fd = -1;
}

/* netchanneld -i: each line of the prompt, run here, with the control socket's lock. */
static int
run_cli(const char *line, void *arg)
{
	struct ncd *d = arg;
	int ret;

	pthread_mutex_lock(&d->lock);
	ret = ncd_cli_exec(d, line, false, true, NULL, "the terminal", stdout, NULL);
	pthread_mutex_unlock(&d->lock);
	fflush(stdout);
	return ret == 1 ? 1 : 0;
}

/* netchanneld -i: the names a <port> or <channel> word completes to. */
static unsigned int
cli_names(const char *kind, const char **names, unsigned int max, void *arg)
{
	struct ncd *d = arg;
	unsigned int n = 0;

	pthread_mutex_lock(&d->lock);
	if (strcmp(kind, "port") == 0)
		for (unsigned int i = 0; i < d->cfg.nports && n < max; i++)
			names[n++] = d->cfg.ports[i].name;
	else
		/* The prompt's thread is the control thread: no channel goes before the tab is done. */
		for (uint32_t i = 0; i < d->cfg.max_channels && n < max; i++)
			if (d->channels[i] != NULL)
				names[n++] = d->channels[i]->name;
	pthread_mutex_unlock(&d->lock);
	return n;
}

static void
poll_control(void *arg)
{
	ncd_control_poll(arg, 0);
}

static void
usage(FILE *f)
{
	fprintf(f,
		"usage: netchanneld [-c FILE] [-i] [--check-config] [--stats FILE] [--mark-mock[=OPTS]]\n"
		"                   [--socket PATH] [--file-prefix NAME] [-- EAL-ARGS]\n"
		"       netchanneld [-c FILE] [--file-prefix NAME] --cleanup [-- EAL-ARGS]\n"
		"       netchanneld --default-config\n"
		"\n"
		"  -c, --config FILE   the JSON config (docs/config.md, netchanneld(8)); without it, the\n"
		"                      embedded default: scripts/testbed.sh's host (net_af_xdp on\n"
		"                      veth0, the kernel behind a TAP named wire0)\n"
		"      --default-config  print the embedded default config and exit\n"
		"  -i, --interactive   the CLI on the terminal (type help; tab completes)\n"
		"      --check-config  check the config, print \"FILE: ok\" and exit\n"
		"      --cleanup       remove what a dead instance of the prefix left (hugepage files,\n"
		"                      EAL's runtime directory) and exit; nothing while a process\n"
		"                      holds them (exit 1). The unit's ExecStopPost\n"
		"      --stats FILE    at exit, write every counter to FILE as JSON\n"
		"      --socket PATH   the control socket, over the config's control.socket\n"
		"      --file-prefix NAME  EAL's --file-prefix (telemetry, dumpcap, clients), over\n"
		"                      the config's and EAL-ARGS'\n"
		"      --mark-mock[=OPTS]  tests only: ports that offload take flow rules into a\n"
		"                      stand-in that marks matching packets from an rx callback\n"
		"                      (no software PMD accepts MARK). OPTS, comma-separated:\n"
		"                      wrong=N: every Nth packet gets a bad mark;\n"
		"                      stale: a removed rule marks with its old mark once its\n"
		"                      channel id is reused; noqueue: QUEUE is refused\n"
		"  -h, --help          this text\n"
		"      --version       the version, DPDK's, and the protocols'\n"
		"  EAL-ARGS            appended to the config's \"eal\" list\n"
		"\n"
		"Log types: netchanneld.main, .control, .worker, .nexthop (EAL's --log-level\n"
		"'netchanneld.*:debug', or the CLI's \"set log level\"). Telemetry: /netchannel/...\n"
		"(dpdk-telemetry.py -f PREFIX). Capture: ncctl capture port P|channel C, or\n"
		"dpdk-dumpcap --file-prefix PREFIX.\n"
		"\n"
		"Exit codes: 0 clean shutdown, 2 bad usage or config, 1 runtime failure (or a second\n"
		"stop signal, 3 s after the first, forcing the exit).\n");
}

/*
 * fn(mount, dir, name, arg) for each of the prefix's hugepage files:
 * "<prefix>map_*" in every hugetlbfs mount.
 */
static void
each_hugepage_file(const char *prefix,
		   void (*fn)(const char *mount, DIR *dir, const char *name, void *arg), void *arg)
{
	char pat[256];
	struct mntent *m;
	struct dirent *e;
	FILE *mounts;
	DIR *dir;

	snprintf(pat, sizeof(pat), "%smap_", prefix);
	mounts = setmntent("/proc/mounts", "r");
	while (mounts != NULL && (m = getmntent(mounts)) != NULL) {
		if (strcmp(m->mnt_type, "hugetlbfs") != 0 || (dir = opendir(m->mnt_dir)) == NULL)
			continue;
		while ((e = readdir(dir)) != NULL)
			if (strncmp(e->d_name, pat, strlen(pat)) == 0)
				fn(m->mnt_dir, dir, e->d_name, arg);
		closedir(dir);
	}
	if (mounts != NULL)
		endmntent(mounts);
}

static void
unlink_one(const char *mount, DIR *dir, const char *name, void *arg)
{
	(void)arg;
	if (unlinkat(dirfd(dir), name, 0) != 0)
		fprintf(stderr, "netchanneld: unlink(%s/%s): %s\n", mount, name, strerror(errno));
}

/*
 * After rte_eal_cleanup(): what EAL leaves of this primary's prefix, its
 * hugepage files (without --huge-unlink, which clients could not attach to)
 * and its runtime directory. They would hold the pages until someone removed
 * them. Only this prefix's.
 */
static void
remove_prefix_files(const char *prefix, const char *runtime_dir)
{
	struct dirent *e;
	DIR *dir;

	each_hugepage_file(prefix, unlink_one, NULL);
	/* The runtime directory holds only files (config, fbarrays, the mp socket). */
	dir = runtime_dir[0] != '\0' ? opendir(runtime_dir) : NULL;
	if (dir == NULL)
		return;
	while ((e = readdir(dir)) != NULL)
		if (e->d_name[0] != '.')
			unlinkat(dirfd(dir), e->d_name, 0);
	closedir(dir);
	if (rmdir(runtime_dir) != 0)
		fprintf(stderr, "netchanneld: rmdir(%s): %s\n", runtime_dir, strerror(errno));
}

/* EAL's runtime directory of a prefix, as EAL names it (eal_create_runtime_dir()). */
static void
runtime_dir_of(const char *prefix, char *buf, size_t size)
{
	const char *base = "/var/run", *xdg = getenv("XDG_RUNTIME_DIR");

	if (getuid() != 0)
		base = xdg != NULL ? xdg : "/tmp";
	snprintf(buf, size, "%s/dpdk/%s", base, prefix);
}

/* A hugepage file counted (n[0]), and as held (n[1]) if a process locked it (EAL locks each it maps). */
static void
count_held(const char *mount, DIR *dir, const char *name, void *arg)
{
	unsigned int *n = arg;

	(void)mount;
	int fd = openat(dirfd(dir), name, O_RDONLY | O_CLOEXEC);

	n[0]++;
	if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) != 0)
		n[1]++;
	if (fd >= 0)
		close(fd);
}

/*
 * --cleanup: what a dead instance left of its prefix, as the next start of
 * the prefix would remove it: its hugepage files and runtime directory.
 * Nothing while a process holds the prefix: a primary's lock on the runtime
 * directory's config file, or any process's on a hugepage file (a client of
 * the dead daemon that still runs). @return the exit code: 0 (removed, or
 * nothing to remove) or 1 (in use)
 */
static int
cleanup_prefix(const char *prefix)
{
	char dir[PATH_MAX], path[PATH_MAX + 8];
	unsigned int n[2] = { 0, 0 };     /* the prefix's hugepage files, and those held */
	bool has_dir;
	int fd;

	runtime_dir_of(prefix, dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/config", dir);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		struct flock l = { .l_type = F_WRLCK, .l_whence = SEEK_SET };

		if (fcntl(fd, F_GETLK, &l) == 0 && l.l_type != F_UNLCK) {
			fprintf(stderr, "netchanneld: --cleanup: prefix '%s' is in use by pid %d (its "
				"lock on %s): nothing removed\n", prefix, (int)l.l_pid, path);
			close(fd);
			return 1;
		}
		close(fd);
	}
	each_hugepage_file(prefix, count_held, n);
	if (n[1] > 0) {
		fprintf(stderr, "netchanneld: --cleanup: prefix '%s': %u of its %u hugepage files "
			"are in use (a client of the dead daemon still runs?): nothing removed\n",
			prefix, n[1], n[0]);
		return 1;
	}
	has_dir = access(dir, F_OK) == 0;
	remove_prefix_files(prefix, has_dir ? dir : "");
	printf("netchanneld: --cleanup: prefix '%s': %u hugepage files removed, runtime directory "
	       "%s %s\n", prefix, n[0], dir, has_dir ? "removed" : "absent");
	return 0;
}

/* rte_memseg_walk(): one page of the heap, made one EAL never gives back. */
static int
pin_page(const struct rte_memseg_list *msl, const struct rte_memseg *ms, void *arg)
{
	struct rte_memseg *found;

	(void)arg;
	if (msl->external)
		return 0;
	found = rte_mem_virt2memseg(ms->addr, msl);
	if (found != NULL)
		found->flags |= RTE_MEMSEG_FLAG_DO_NOT_FREE;
	return 0;
}

/*
 * Before any client can attach: grow the DPDK heap by the config's reserve,
 * then mark every page mapped by then as one EAL never returns to the
 * system (the flag EAL gives pages preallocated with -m). Creating and
 * destroying channels then neither grows nor shrinks the heap, which takes
 * DPDK's memory hotplug lock for writing: a client killed inside its
 * rte_eal_init() leaves that lock held for reading for ever, and the control
 * thread would wait on it for ever. EAL marks the pages freeable again in
 * rte_eal_cleanup(). Only beyond the reserve does the heap grow again.
 */
static void
pin_heap(const struct ncd *d)
{
	size_t want = (size_t)d->cfg.heap_reserve_mb << 20;
	void *reserve = want ? rte_malloc_socket("ncd_heap_reserve", want, 0,
						 (int)rte_socket_id()) : NULL;

	if (want != 0 && reserve == NULL)
		NCD_LOG(WARNING, "heap_reserve_mb %u: rte_malloc failed (%s): no reserve; channels "
			"created later grow the heap", d->cfg.heap_reserve_mb,
			rte_strerror(rte_errno));
	rte_memseg_walk(pin_page, NULL);
	rte_free(reserve);
}

/* What the command line asks for. */
struct cmdline {
	const char *config, *stats, *socket_path, *prefix;
	bool check, interactive, print_default, cleanup;
	int eal_first;                 /* argv's first EAL argument (after --) */
};

/* The command line read: -1 to go on, or the exit code (help, version, a bad argument). */
static int
parse_args(struct ncd *d, int argc, char **argv, struct cmdline *cl)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "interactive", no_argument, NULL, 'i' },
		{ "check-config", no_argument, NULL, 'C' },
		{ "default-config", no_argument, NULL, 'D' },
		{ "stats", required_argument, NULL, 's' },
		{ "mark-mock", optional_argument, NULL, 'M' },
		{ "socket", required_argument, NULL, 'S' },
		{ "file-prefix", required_argument, NULL, 'P' },
		{ "cleanup", no_argument, NULL, 'X' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	while ((c = getopt_long(argc, argv, "+c:ih", opts, NULL)) != -1) {
		switch (c) {
		case 'c': cl->config = optarg; break;
		case 'i': cl->interactive = true; break;
		case 'C': cl->check = true; break;
		case 'D': cl->print_default = true; break;
		case 's': cl->stats = optarg; break;
		case 'M': d->mark_mock = optarg != NULL ? optarg : "on"; break;
		case 'S': cl->socket_path = optarg; break;
		case 'P': cl->prefix = optarg; break;
		case 'X': cl->cleanup = true; break;
		case 'h': usage(stdout); return 0;
		case 'V':
			printf("netchanneld %s (%s), %s, control protocol %d, region layout %d, "
			       "shared memory layout %d\n", NC_PROJECT_VERSION, NC_GIT_DESCRIBE,
			       rte_version(), NC_CONTROL_PROTOCOL_VERSION, NC_REGION_LAYOUT_VERSION,
			       NC_SHM_LAYOUT_VERSION);
			return 0;
		default: usage(stderr); return 2;
		}
	}
	if (cl->print_default) {
		fputs(ncd_default_config, stdout);
		return 0;
	}
	if (optind < argc && strcmp(argv[optind - 1], "--") != 0) {
		fprintf(stderr, "netchanneld: unexpected argument '%s' (EAL arguments go after --)\n",
			argv[optind]);
		return 2;
	}
	cl->eal_first = optind;
	return -1;
}

/*
 * The config (or the embedded one) with the command line's socket, and what
 * it needs of this host (host_check.h): -1 to go on, or the exit code.
 */
static int
load_config(struct ncd *d, const struct cmdline *cl, int argc, char **argv)
{
	const char *name = cl->config ? cl->config : "<default config>";

	if ((cl->config ? ncd_config_load(cl->config, &d->cfg) :
		      ncd_config_load_text(name, ncd_default_config, &d->cfg)) != 0) {
		ncd_config_free(&d->cfg);
		return 2;
	}
	/* The command line's socket over the config's, checked as the config's is. */
	if (cl->socket_path != NULL) {
		char err[160];

		if (ncd_socket_path_check(cl->socket_path, err, sizeof(err)) != 0) {
			fprintf(stderr, "netchanneld: --socket: %s\n", err);
			ncd_config_free(&d->cfg);
			return 2;
		}
		free(d->cfg.control_socket);
		d->cfg.control_socket = strdup(cl->socket_path);
	}
	/* A start that cannot succeed says what is missing, before EAL or a PMD does. */
	if (!cl->cleanup &&
	    ncd_config_check_host(&d->cfg, name, argv + cl->eal_first, argc - cl->eal_first) != 0) {
		ncd_config_free(&d->cfg);
		return 2;
	}
	if (cl->check) {
		printf("%s: ok (%u ports, %u workers, %u channels)\n", name, d->cfg.nports,
		       d->cfg.nworkers, d->cfg.nchannels);
		ncd_config_free(&d->cfg);
		return 0;
	}
	return -1;
}

/*
 * EAL's arguments, into eal (room for 2 * NCD_MAX_EAL_ARGS + 4, NULL
 * ended): the config's, then the command line's; the last --file-prefix
 * wins, and d->file_prefix is it. @return how many.
 */
static int
eal_args(struct ncd *d, int argc, char **argv, const struct cmdline *cl, char **eal)
{
	const int room = 2 * NCD_MAX_EAL_ARGS + 4;
	int eal_argc = 0;
	bool has_prefix = false;

	eal[eal_argc++] = argv[0];
	snprintf(d->file_prefix, sizeof(d->file_prefix), "netchanneld");
	for (unsigned int i = 0; i < d->cfg.neal; i++)
		eal[eal_argc++] = d->cfg.eal[i];
	for (int i = cl->eal_first; i < argc && eal_argc < room - 5; i++)
		eal[eal_argc++] = argv[i];
	/* --file-prefix here is EAL's, last: it wins over the config's and EAL-ARGS'. */
	if (cl->prefix != NULL) {
		eal[eal_argc++] = (char *)"--file-prefix";
		eal[eal_argc++] = (char *)cl->prefix;
	}
	/* The last --file-prefix wins in EAL too; clients need to know it. */
	for (int i = 1; i + 1 < eal_argc; i++)
		if (strcmp(eal[i], "--file-prefix") == 0) {
			has_prefix = true;
			snprintf(d->file_prefix, sizeof(d->file_prefix), "%s", eal[i + 1]);
		}
	if (!has_prefix) {
		eal[eal_argc++] = (char *)"--file-prefix";
		eal[eal_argc++] = (char *)"netchanneld";
	}
	eal[eal_argc] = NULL;
	return eal_argc;
}

/*
 * EAL, with the config's arguments and then the command line's; the last
 * --file-prefix wins, and clients are told it. Then the log types. @return 0 or -1.
 */
static int
eal_start(struct ncd *d, int argc, char **argv, const struct cmdline *cl)
{
	char *eal[2 * NCD_MAX_EAL_ARGS + 4];
	int eal_argc = eal_args(d, argc, argv, cl, eal);

	if (rte_eal_init(eal_argc, eal) < 0) {
		fprintf(stderr, "netchanneld: rte_eal_init: %s\n", rte_strerror(rte_errno));
		return -1;
	}
	ncd_logtype = rte_log_register_type_and_pick_level("netchanneld.main", RTE_LOG_INFO);
	ncd_logtype_control = rte_log_register_type_and_pick_level("netchanneld.control",
								   RTE_LOG_INFO);
	ncd_logtype_worker = rte_log_register_type_and_pick_level("netchanneld.worker", RTE_LOG_INFO);
	ncd_logtype_nexthop = rte_log_register_type_and_pick_level("netchanneld.nexthop",
								   RTE_LOG_INFO);
	return 0;
}

/* Every worker's lcore is one of EAL's, and not the main one. @return 0, or 2 (the config's). */
static int
check_lcores(const struct ncd *d, const char *config)
{
	for (unsigned int i = 0; i < d->cfg.nworkers; i++)
		if (!rte_lcore_is_enabled(d->cfg.workers[i].lcore) ||
		    d->cfg.workers[i].lcore == rte_get_main_lcore()) {
			fprintf(stderr, "%s: workers[%u].lcore: lcore %u is not a worker lcore of EAL\n",
				config ? config : "<default config>", i, d->cfg.workers[i].lcore);
			return 2;
		}
	return 0;
}

/* The mbuf pool. @return 0 or -1. */
static int
pool_create(struct ncd *d)
{
	char pool[RTE_MEMPOOL_NAMESIZE];

	snprintf(pool, sizeof(pool), NC_MBUF_POOL_FMT, (int)rte_socket_id());
	/*
	 * Client processes put and get mbufs too, and may be killed at any
	 * instant. With the default ring, a producer or consumer killed between
	 * moving a head and its tail leaves every other one spinning for ever:
	 * the whole daemon hangs. The lock-free stack has no such step; a death
	 * in the middle loses at most the few mbufs in flight.
	 */
	d->pool = rte_pktmbuf_pool_create_by_ops(pool, d->cfg.mbufs, d->cfg.mbuf_cache, 0,
						 RTE_MBUF_DEFAULT_BUF_SIZE, (int)rte_socket_id(),
						 NCD_MEMPOOL_OPS);
	if (d->pool == NULL) {
		NCD_LOG(ERR, "rte_pktmbuf_pool_create_by_ops(%s, %u, %s): %s", pool, d->cfg.mbufs,
			NCD_MEMPOOL_OPS, rte_strerror(rte_errno));
		return -1;
	}
	return 0;
}

/* What the modules do for one another, through callbacks: the layers' upward notices. */
static void
wire_modules(void)
{
	ncd_ports_hooks_set(&(struct ncd_port_hooks){
		.configured = ncd_offload_port_init,
		.exception_remade = ncd_exception_host_apply,
		.carrier = ncd_exception_carrier,
	});
	/* Their parts in channels' lives, in the order they start (stopped in the reverse). */
	ncd_channel_hooks_add(&ncd_dp_channel_hooks);
	ncd_channel_hooks_add(&ncd_nat_channel_hooks);
	ncd_channel_hooks_add(&ncd_nh_channel_hooks);
	ncd_channel_hooks_add(&ncd_offload_channel_hooks);
	ncd_channel_hooks_add(&ncd_xdp_channel_hooks);
	ncd_channel_hooks_add(&ncd_control_channel_hooks);
}

/* The ports and their TAPs up, and a worker on each lcore. @return the workers launched. */
static unsigned int
traffic_start(struct ncd *d)
{
	unsigned int launched = 0;

	/* The host's addresses and routes on its TAP, as before a restart; a failure is logged. */
	for (unsigned int i = 0; i < d->cfg.nports; i++)
		ncd_exception_host_apply(d, i);
	for (unsigned int i = 0; i < d->cfg.nworkers; i++) {
		if (rte_eal_remote_launch(ncd_worker_main, &d->workers[i], d->workers[i].lcore) != 0) {
			NCD_LOG(ERR, "rte_eal_remote_launch(lcore %u) failed", d->workers[i].lcore);
			d->stop = true;
			break;
		}
		launched++;
	}
	ncd_log_notes();
	NCD_LOG(INFO, "running: %u ports, %u workers, %u channels", d->cfg.nports,
		d->cfg.nworkers, d->cfg.nchannels);
	printf("netchanneld: running (pid %d)\n", (int)getpid());
	fflush(stdout);
	ncd_notify("READY=1");
	return launched;
}

int
main(int argc, char **argv)
{
	struct cmdline cl = { .eal_first = 1 };
	struct ncd *d = &ncd;
	unsigned int launched;
	char runtime_dir[PATH_MAX];
	int ret;

	d->ports = ncd_port_table;
	d->nat = &ncd_nat_table;
	ret = parse_args(d, argc, argv, &cl);
	if (ret < 0)
		ret = load_config(d, &cl, argc, argv);
	if (ret >= 0)
		return ret;
	/* --cleanup: the prefix the config and the command line give, as a start would use it. */
	if (cl.cleanup) {
		char *eal[2 * NCD_MAX_EAL_ARGS + 4];

		eal_args(d, argc, argv, &cl, eal);
		ret = cleanup_prefix(d->file_prefix);
		ncd_config_free(&d->cfg);
		return ret;
	}

	ncd_log_setup();
	/* Stage 0: the devices, before EAL probes one another daemon has. */
	{
		char err[320];

		if (ncd_ports_claim(&d->cfg, err, sizeof(err)) != 0) {
			fprintf(stderr, "netchanneld: %s\n", err);
			ncd_config_free(&d->cfg);
			return 1;
		}
	}
	/* Stage 1: EAL. */
	if (eal_start(d, argc, argv, &cl) != 0) {
		ncd_config_free(&d->cfg);
		return 1;
	}
	ret = check_lcores(d, cl.config);
	if (ret != 0)
		goto out_eal;
	ret = 1;
	/* Stage 2: memory. */
	if (pool_create(d) != 0)
		goto out_eal;
	if (ncd_workers_init(d) != 0) {
		NCD_LOG(ERR, "worker setup: out of memory");
		goto out_free_pool;
	}
	/* Stage 3: ports, then channels, then traffic. */
	wire_modules();
	ret = ncd_ports_init(d);
	if (ret != 0)
		goto out_close_ports;
	ret = 1;
	if (ncd_nh_init(d) != 0 || ncd_nat_init(d) != 0 || ncd_channels_init(d) != 0)
		goto out_free_channels;
	pin_heap(d);
	if (ncd_cli_register() != 0 || ncd_views_register() != 0 || ncd_requests_register() != 0 ||
	    ncd_control_init(d) != 0 || ncd_telemetry_init(d) != 0)
		goto out_close_control;
	/* dpdk-dumpcap and dpdk-pdump attach as secondaries and ask for copies of a port's packets. */
	if (rte_pdump_init() != 0)
		NCD_LOG(WARNING, "rte_pdump_init: %s: no packet capture", rte_strerror(rte_errno));
	forcer_start();
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGHUP, on_signal);
	if (ncd_ports_start(d) != 0 || ncd_offload_start(d) != 0)
		goto out_close_control;
	/* The queues' wake fds exist once the ports run. */
	ret = ncd_workers_idle_init(d);
	if (ret != 0)
		goto out_close_control;
	ret = 1;
	launched = traffic_start(d);
	if (cl.interactive) {
		nc_cli_set_names(cli_names);
		nc_cli_shell("netchanneld> ", run_cli, d, poll_control, &d->stop);
	} else {
		ncd_control_run(d);
	}
	d->stop = true;
	ncd_notify("STOPPING=1");
	ret = launched == d->cfg.nworkers ? 0 : 1;

	/* Shutdown: workers first, so no packet is in flight, then everything in reverse. */
	for (unsigned int i = 0; i < launched; i++)
		rte_eal_wait_lcore(d->workers[i].lcore);
	NCD_LOG(INFO, "stopping");
	ncd_frag_drain(d);
	ncd_stats_print(d, stdout);
	if (cl.stats != NULL && ncd_stats_write_json(d, cl.stats) != 0)
		ret = 1;
out_close_control:
	/* From here on, clients may have attached: the teardown runs under the watchdog. */
	teardown_start(ret);
	ncd_capture_close_all(d);
	ncd_telemetry_close(d);
	teardown_step("rte_pdump_uninit()");
	rte_pdump_uninit();
	teardown_step("closing the control socket");
	ncd_control_close(d);
out_free_channels:
	teardown_step("freeing the channels");
	ncd_offload_close(d);
	ncd_xdp_claims_close();
	ncd_channels_free(d);
	ncd_nat_close(d);
	ncd_nh_close(d);
out_close_ports:
	teardown_step("closing the ports");
	ncd_ports_close(d);
	ncd_workers_free(d);
out_free_pool:
	teardown_step("rte_mempool_free()");
	rte_mempool_free(d->pool);
out_eal:
	snprintf(runtime_dir, sizeof(runtime_dir), "%s", rte_eal_get_runtime_dir());
	teardown_step("rte_eal_cleanup()");
	rte_eal_cleanup();
	teardown_step("removing the prefix's files");
	remove_prefix_files(d->file_prefix, runtime_dir);
	ncd_ports_unclaim();
	teardown_end();
	ncd_config_free(&d->cfg);
	return ret;
}
