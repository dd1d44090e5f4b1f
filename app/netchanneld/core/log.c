/* SPDX-License-Identifier: BSD-3-Clause */
/* The daemon's log stream, and the harmless messages kept out of it (see log.h). */
#define _GNU_SOURCE /* fopencookie */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rte_common.h>
#include <rte_log.h>
#ifdef NCD_HAVE_LIBXDP
#include <bpf/libbpf.h>
#include <xdp/libxdp.h>
#endif

#include "core/log.h"
#include "ncd.h"

struct ncd ncd = { .lock = PTHREAD_MUTEX_INITIALIZER, .nh_efd = -1 };
int ncd_logtype, ncd_logtype_control, ncd_logtype_worker, ncd_logtype_nexthop;

/* Conditions whose messages look like failures and are not, said once each. */
enum note {
	NOTE_NONE = -1,                /* nothing to say at all */
	NOTE_TAP_FLOW,
	NOTE_XDP_DISPATCHER,
	NOTE_MAX
};

static const char *const note_text[NOTE_MAX] = {
	[NOTE_TAP_FLOW] = "net_tap: this kernel has no multiq qdisc, so TAP devices have no "
		"rte_flow; harmless: netchanneld puts no flow rules on its exception devices",
	[NOTE_XDP_DISPATCHER] = "net_af_xdp: no bpffs at /sys/fs/bpf, so libxdp loaded the XDP "
		"program on its own, without its dispatcher; harmless unless another XDP program "
		"must share the interface (then mount bpffs there)",
};

/*
 * The messages, by a piece of their text: DPDK's (net_tap, telemetry, ip_frag)
 * and libbpf's and libxdp's on a host without bpffs or TC modules.
 */
static const struct {
	const char *text;
	enum note note;
} harmless[] = {
	{ "No legacy callbacks, legacy socket not created", NOTE_NONE },
	{ "rte_ip_frag_table_create: allocated", NOTE_NONE },
	{ "Specified qdisc kind is unknown", NOTE_TAP_FLOW },
	{ "Could not add multiq qdisc", NOTE_TAP_FLOW },
	{ "failed to create multiq qdisc", NOTE_TAP_FLOW },
	{ "Disabling rte flow support", NOTE_TAP_FLOW },
	{ "skipping unrecognized data section", NOTE_NONE },
	{ "No bpffs found at", NOTE_XDP_DISPATCHER },
	{ "Can't use dispatcher without a working bpffs", NOTE_XDP_DISPATCHER },
	{ "Falling back to loading single prog without dispatcher", NOTE_XDP_DISPATCHER },
};

static bool seen[NOTE_MAX], said[NOTE_MAX];
static bool timestamps;

/* Is msg (len bytes, not NUL-terminated) a harmless one? Notes its condition if so. */
static bool
is_harmless(const char *msg, size_t len)
{
	for (unsigned int i = 0; i < RTE_DIM(harmless); i++)
		if (memmem(msg, len, harmless[i].text, strlen(harmless[i].text)) != NULL) {
			if (harmless[i].note != NOTE_NONE)
				seen[harmless[i].note] = true;
			return true;
		}
	return false;
}

/* With netchanneld.main at debug, the originals are wanted too. */
static bool
debugging(void)
{
	return rte_log_can_log((uint32_t)ncd_logtype, RTE_LOG_DEBUG);
}

/*
 * Each line on stdout with its time first (UTC, to the millisecond), as an
 * operator reading a log file needs; rte_log() flushes after every message,
 * so a message arrives whole. Through stdout, so that it keeps its order with
 * what the daemon prints there itself.
 */
static ssize_t
log_write(void *cookie, const char *buf, size_t len)
{
	static bool line_start = true;
	size_t done = 0;

	(void)cookie;
	if (line_start && is_harmless(buf, len) && !debugging())
		return (ssize_t)len;
	while (done < len) {
		const char *nl = memchr(buf + done, '\n', len - done);
		size_t n = nl != NULL ? (size_t)(nl - (buf + done)) + 1 : len - done;

		if (line_start && timestamps) {
			struct timespec ts;
			struct tm tm;
			char when[32];

			clock_gettime(CLOCK_REALTIME, &ts);
			gmtime_r(&ts.tv_sec, &tm);
			strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
			fprintf(stdout, "%s.%03ldZ ", when, ts.tv_nsec / 1000000);
		}
		fwrite(buf + done, 1, n, stdout);
		line_start = nl != NULL;
		done += n;
	}
	fflush(stdout);
	return (ssize_t)len;
}

#ifdef NCD_HAVE_LIBXDP
/*
 * libbpf's and libxdp's messages (each begins with its library's name), into
 * the log: warnings as warnings, the rest at debug.
 */
static int
lib_print(bool warn, const char *fmt, va_list ap)
{
	char msg[512];
	int n = vsnprintf(msg, sizeof(msg), fmt, ap);
	size_t len = strnlen(msg, sizeof(msg));

	while (len > 0 && msg[len - 1] == '\n')
		msg[--len] = '\0';
	if (is_harmless(msg, len) || !warn)
		rte_log(RTE_LOG_DEBUG, (uint32_t)ncd_logtype, "%s\n", msg);
	else
		rte_log(RTE_LOG_WARNING, (uint32_t)ncd_logtype, "%s\n", msg);
	return n;
}

static int
bpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	return lib_print(level == LIBBPF_WARN, fmt, ap);
}

static int
xdp_print(enum libxdp_print_level level, const char *fmt, va_list ap)
{
	return lib_print(level == LIBXDP_WARN, fmt, ap);
}
#endif

void
ncd_log_setup(void)
{
	static cookie_io_functions_t io = { .write = log_write };
	FILE *f;

	/* journald stamps each line itself. */
	timestamps = getenv("JOURNAL_STREAM") == NULL;
	f = fopencookie(NULL, "w", io);
	if (f != NULL)
		rte_openlog_stream(f);
#ifdef NCD_HAVE_LIBXDP
	libbpf_set_print(bpf_print);
	libxdp_set_print(xdp_print);
#endif
}

void
ncd_log_notes(void)
{
	for (unsigned int i = 0; i < NOTE_MAX; i++)
		if (seen[i] && !said[i]) {
			NCD_LOG(NOTICE, "%s", note_text[i]);
			said[i] = true;
		}
}

/*
 * The rate limits: a small table of the kinds and uids seen lately. A kind
 * and uid not in it takes the slot idle longest; its count, if any, is said
 * first.
 */
#define RL_SLOTS 64
#define RL_WINDOW_MS 1000

static struct {
	const char *fmt;
	unsigned int uid;
	uint64_t since_ms;             /* the current window's start */
	unsigned int logged;           /* lines in this window */
	unsigned int suppressed;       /* lines suppressed since the last one logged */
} rl[RL_SLOTS];

static void
say_suppressed(unsigned int k)
{
	NCD_LOG(NOTICE, "log: %u more lines like \"%.60s\" about uid %u suppressed",
		rl[k].suppressed, rl[k].fmt, rl[k].uid);
	rl[k].suppressed = 0;
}

bool
ncd_log_allow(const char *fmt, unsigned int uid, unsigned int *suppressed)
{
	uint64_t now = ncd_now_ms();
	unsigned int k, idle = 0;

	for (k = 0; k < RL_SLOTS; k++) {
		if (rl[k].fmt == fmt && rl[k].uid == uid)
			break;
		if (rl[k].fmt == NULL || rl[k].since_ms < rl[idle].since_ms)
			idle = k;
	}
	if (k == RL_SLOTS) {
		k = idle;
		if (rl[k].fmt != NULL && rl[k].suppressed > 0)
			say_suppressed(k);
		rl[k].fmt = fmt;
		rl[k].uid = uid;
		rl[k].since_ms = now;
		rl[k].logged = 0;
		rl[k].suppressed = 0;
	}
	if (now - rl[k].since_ms >= RL_WINDOW_MS) {
		rl[k].since_ms = now;
		rl[k].logged = 0;
	}
	if (rl[k].logged >= NCD_LOG_BURST) {
		rl[k].suppressed++;
		return false;
	}
	rl[k].logged++;
	*suppressed = rl[k].suppressed;
	rl[k].suppressed = 0;
	return true;
}

void
ncd_log_flush_suppressed(void)
{
	uint64_t now = ncd_now_ms();

	for (unsigned int k = 0; k < RL_SLOTS; k++)
		if (rl[k].suppressed > 0 && now - rl[k].since_ms >= RL_WINDOW_MS) {
			say_suppressed(k);
			rl[k].since_ms = now;
			rl[k].logged = 0;
		}
}
