/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ncctl: netchanneld's CLI, remotely, over its control socket.
 *
 *   ncctl [-s SOCKET] [--json] [-c "COMMAND"]...
 *   ncctl [-s SOCKET] [--json] monitor [port P|channel C|all] [-i SECONDS] [-n COUNT]
 *   ncctl [-s SOCKET] [--json] capture port P|channel C [-c COUNT] [-s SNAPLEN] [-w FILE]
 *         [FILTER...]
 *
 * With -c it runs the command(s) and exits: 0 if all succeeded, 1 if one
 * failed (the daemon's message on stderr; with --json, {"error", "errno"} on
 * stdout), 2 for bad usage. Without, it is an
 * interactive prompt with the daemon's commands, tab completion and history
 * (or, with stdin not a terminal, one command per input line). monitor is a
 * live view of the ports, the workers' load, the mempool and the busiest
 * channels, refreshed every interval; with --json, one object per interval.
 * capture asks the daemon for a capture and copies the pcapng stream that
 * comes back through a pipe into a file, until the count is reached or ^C.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <rte_version.h>

#include "netchannel.h"
/* cmdline (in cli_table.c) redefines dprintf: its users come first. */
#include "nc_cli.h"
#include "nc_pages.h"

struct session {
	struct nc_client *c;
	bool json;
	int failures;
};

static void
usage(FILE *f)
{
	fprintf(f, "usage: ncctl [-s SOCKET] [--json] [-c \"COMMAND\"]...\n"
		   "       ncctl [-s SOCKET] [--json] monitor [port P|channel C|all] [-i SECONDS]\n"
		   "             [-n COUNT]\n"
		   "       ncctl [-s SOCKET] [--json] capture port P|channel C [-c COUNT]\n"
		   "             [-s SNAPLEN] [-w FILE] [FILTER...]\n"
		   "  -s, --socket   netchanneld's control socket (default " NC_DEFAULT_SOCKET ")\n"
		   "  -j, --json     print each command's output as one line of JSON (errors too:\n"
		   "                 {\"error\": \"...\", \"errno\": N})\n"
		   "  -c, --command  run this command and exit (may be given more than once)\n"
		   "  -h, --help     this text, and the commands\n"
		   "      --version  the version (the daemon's: the command \"show version\")\n"
		   "  monitor        a live view, every SECONDS (1): ports, the workers' load,\n"
		   "                 the mempool and the 10 busiest channels, with rates; with\n"
		   "                 --json one object per interval; COUNT intervals, or until ^C\n"
		   "  capture        COUNT packets (1000) of a port (received and sent) or of a\n"
		   "                 channel (classified to it, sent by its clients), those a pcap\n"
		   "                 FILTER passes, SNAPLEN bytes of each (65535), written by the\n"
		   "                 daemon as pcapng to FILE (-w; '-' or none: stdout, if not a\n"
		   "                 terminal); until COUNT or ^C; root only\n"
		   "\n"
		   "Exit codes: 0, 1 (no daemon, or a command failed), 2 (usage).\n"
		   "\n"
		   "Commands (as in netchanneld -i):\n");
	nc_cli_help(f);
}

/*
 * An error ncctl itself found (no daemon, a reply too large, the daemon gone):
 * with --json, the same one-line object the daemon's errors are, on stdout;
 * otherwise a line on stderr.
 */
static void __attribute__((format(printf, 3, 4)))
client_error(bool json, int err, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (json) {
		json_t *o = json_pack("{s:s, s:i}", "error", msg, "errno", err < 0 ? -err : err);
		char *text = o != NULL ? json_dumps(o, 0) : NULL;

		printf("%s\n", text != NULL ? text : "{\"error\": \"out of memory\", \"errno\": 12}");
		fflush(stdout);
		free(text);
		json_decref(o);
	} else {
		fprintf(stderr, "ncctl: %s\n", msg);
	}
}

/* The channels "show channel all" lists, as one JSON array, paged; or NULL (*err says why). */
static json_t *
query_channels(struct session *s, int *err)
{
	json_t *all = json_array();
	char *out = NULL;

	*err = nc_pages_channels(s->c, "all", all, stdout, &out);
	free(out);
	if (*err != 0) {
		json_decref(all);
		return NULL;
	}
	return all;
}

/* One command: 0, 1 for quit, -1 for a failure (reported). */
static int
run(const char *line, void *arg)
{
	struct session *s = arg;
	char buf[NC_CLI_MAX_LINE], *argv[NC_CLI_MAX_WORDS], err[256], *out = NULL;
	const struct nc_cli_cmd *cmd;
	int argc, ret;

	cmd = nc_cli_match(line, buf, argv, &argc, err, sizeof(err));
	if (cmd != NULL && cmd->id == NC_CLI_QUIT)
		return 1;                      /* leaves ncctl, not the daemon */
	if (cmd == NULL && err[0] == '\0')
		return 0;                      /* an empty line */
	if (cmd != NULL && cmd->id == NC_CLI_CAPTURE) {
		/* Its pcapng comes through a pipe that a command line has nowhere to put. */
		s->failures++;
		client_error(s->json, EINVAL, "capture: run it as 'ncctl capture port|channel NAME "
			     "[-c COUNT] [-s SNAPLEN] [-w FILE] [FILTER...]'");
		return -1;
	}
	if (cmd != NULL && cmd->id == NC_CLI_SHOW_CHANNEL && argc == 3 &&
	    (strcmp(argv[2], "all") == 0 || strcmp(argv[2], "brief") == 0)) {
		json_t *all = s->json ? json_array() : NULL;

		ret = nc_pages_channels(s->c, argv[2], all, stdout, &out);
		if (ret == 0 && all != NULL) {
			char *text = json_dumps(all, JSON_COMPACT);

			printf("%s\n", text != NULL ? text : "[]");
			free(text);
		}
		json_decref(all);
	} else {
		ret = nc_cli(s->c, line, s->json, &out);
		if (ret == 0)
			fputs(out, stdout);
	}
	if (ret == 0) {
		fflush(stdout);
	} else {
		s->failures++;
		/* JSON errors are data too: {"error": "...", "errno": N} on stdout. */
		if (s->json && out != NULL && out[0] == '{')
			fputs(out, stdout);
		else if (!s->json && out != NULL && out[0] != '\0')
			fprintf(stderr, "ncctl: %s", out);
		else
			client_error(s->json, ret, "%s: %s", line, nc_strerror(ret));
	}
	free(out);
	return ret == -EPIPE ? 1 : ret == 0 ? 0 : -1;
}

/* ---- monitor --------------------------------------------------------------- */

#define MONITOR_TOP 10                 /* channels shown, the busiest by hits a second */

static volatile sig_atomic_t monitor_stop;

static void
on_interrupt(int sig)
{
	(void)sig;
	monitor_stop = 1;
}

/*
 * The packets in a pcapng stream that passes by in pieces: Enhanced Packet
 * Blocks (type 6), counted from each block's header (type, total length).
 */
struct pcapng_count {
	uint8_t hdr[8];
	unsigned int have;             /* bytes of the next block's header seen */
	uint64_t skip;                 /* bytes of the current block still to pass */
	uint64_t packets;
};

static void
pcapng_count(struct pcapng_count *pc, const uint8_t *p, size_t n)
{
	while (n > 0) {
		if (pc->skip > 0) {
			size_t k = pc->skip < n ? (size_t)pc->skip : n;

			pc->skip -= k;
			p += k;
			n -= k;
			continue;
		}
		pc->hdr[pc->have++] = *p++;
		n--;
		if (pc->have == sizeof(pc->hdr)) {
			uint32_t type, len;

			memcpy(&type, pc->hdr, 4);
			memcpy(&len, pc->hdr + 4, 4);
			pc->packets += type == 6;
			pc->skip = len > sizeof(pc->hdr) ? len - sizeof(pc->hdr) : 0;
			pc->have = 0;
		}
	}
}

/* Copy everything from one descriptor to another: 0 at EOF, 1 on ^C, -errno. */
static int
copy_stream(int in, int out, struct pcapng_count *pc, uint64_t *bytes)
{
	uint8_t buf[1 << 16];

	while (!monitor_stop) {
		ssize_t n = read(in, buf, sizeof(buf));

		if (n == 0)
			return 0;
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		pcapng_count(pc, buf, (size_t)n);
		*bytes += (uint64_t)n;
		for (ssize_t at = 0; at < n;) {
			ssize_t w = write(out, buf + at, (size_t)(n - at));

			if (w < 0 && errno == EINTR)
				continue;
			if (w < 0)
				return -errno;
			at += w;
		}
	}
	return 1;
}

/* ncctl capture: ask for a capture, and copy the stream that comes back. */
static int
capture(struct session *s, int argc, char **argv)
{
	char line[NC_CLI_MAX_LINE], *out = NULL, *end = NULL;
	const char *file = NULL;
	long count = -1, snaplen = -1;
	struct pcapng_count pc = { .packets = 0 };
	struct sigaction sa = { .sa_handler = on_interrupt };   /* no SA_RESTART: read() ends */
	uint64_t bytes = 0;
	int at, fd = -1, wfd, ret, i;

	if (argc < 2 || (strcmp(argv[0], "port") != 0 && strcmp(argv[0], "channel") != 0)) {
		fprintf(stderr, "ncctl: capture: port P or channel C first\n");
		return 2;
	}
	for (i = 2; i < argc && argv[i][0] == '-' && argv[i][1] != '\0'; i++) {
		if (i + 1 >= argc) {
			fprintf(stderr, "ncctl: capture: %s needs a value\n", argv[i]);
			return 2;
		}
		end = NULL;
		if (strcmp(argv[i], "-c") == 0)
			count = strtol(argv[++i], &end, 10);
		else if (strcmp(argv[i], "-s") == 0)
			snaplen = strtol(argv[++i], &end, 10);
		else if (strcmp(argv[i], "-w") == 0)
			file = argv[++i];
		else
			end = argv[i];
		if (end != NULL && (*end != '\0' || count == 0 || count < -1 || snaplen == 0 ||
				    snaplen < -1)) {
			fprintf(stderr, "ncctl: capture: bad argument '%s'\n", argv[i]);
			return 2;
		}
	}
	at = snprintf(line, sizeof(line), "capture %s %s", argv[0], argv[1]);
	if (count != -1)
		at += snprintf(line + at, sizeof(line) - (size_t)at, " count %ld", count);
	if (snaplen != -1)
		at += snprintf(line + at, sizeof(line) - (size_t)at, " snaplen %ld", snaplen);
	if (i < argc)
		at += snprintf(line + at, sizeof(line) - (size_t)at, " filter");
	for (; i < argc && at < (int)sizeof(line); i++)
		at += snprintf(line + at, sizeof(line) - (size_t)at, " %s", argv[i]);
	if (at >= (int)sizeof(line)) {
		fprintf(stderr, "ncctl: capture: the filter is too long\n");
		return 2;
	}
	if ((file == NULL || strcmp(file, "-") == 0) && isatty(STDOUT_FILENO)) {
		client_error(s->json, EINVAL, "capture: pcapng on a terminal: give -w FILE, or pipe "
			     "it (| tcpdump -r -)");
		return 2;
	}
	ret = nc_cli_fd(s->c, line, 1, &out, &fd);
	if (ret != 0 || fd < 0) {
		json_t *e = out != NULL ? json_loads(out, 0, NULL) : NULL;
		const char *msg = json_string_value(json_object_get(e, "error"));

		ret = ret != 0 ? ret : -EPROTO;
		client_error(s->json, ret, "%s", msg != NULL ? msg : nc_strerror(ret));
		json_decref(e);
		free(out);
		if (fd >= 0)
			close(fd);
		return 1;
	}
	/* Only once the daemon said yes: a refused capture leaves no empty file behind. */
	if (file == NULL || strcmp(file, "-") == 0) {
		wfd = STDOUT_FILENO;
	} else {
		wfd = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (wfd < 0) {
			client_error(s->json, errno, "capture: open %s: %s", file, strerror(errno));
			close(fd);
			free(out);
			return 1;
		}
	}
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	ret = copy_stream(fd, wfd, &pc, &bytes);
	/* Our end closed: the daemon's writer sees nobody reads, and ends the capture. */
	close(fd);
	if (wfd != STDOUT_FILENO && close(wfd) != 0 && ret >= 0)
		ret = -errno;
	if (ret < 0) {
		client_error(s->json, ret, "capture: %s: %s", file ? file : "stdout", strerror(-ret));
		free(out);
		return 1;
	}
	if (s->json) {
		json_t *o = json_loads(out, 0, NULL);

		json_object_set_new(o, "packets", json_integer((json_int_t)pc.packets));
		json_object_set_new(o, "bytes", json_integer((json_int_t)bytes));
		json_object_set_new(o, "interrupted", json_boolean(ret == 1));
		if (file != NULL && strcmp(file, "-") != 0)
			json_object_set_new(o, "file", json_string(file));
		char *text = json_dumps(o, JSON_COMPACT);

		/* On stdout, unless the capture itself went there. */
		fprintf(wfd == STDOUT_FILENO ? stderr : stdout, "%s\n", text);
		free(text);
		json_decref(o);
	} else {
		fprintf(stderr, "ncctl: capture: %" PRIu64 " packets%s%s%s\n", pc.packets,
			file && strcmp(file, "-") ? " written to " : "", file && strcmp(file, "-") ? file : "",
			ret == 1 ? " (interrupted)" : "");
	}
	free(out);
	return 0;
}

/* A command's JSON output, or NULL (the error is reported, as for -c). */
static json_t *
query(struct session *s, const char *line, int *err)
{
	char *out = NULL;
	json_t *v = NULL;

	*err = nc_cli(s->c, line, 1, &out);
	if (*err == 0)
		v = json_loads(out, 0, NULL);
	free(out);
	return v;
}

/* The prompt's <port> and <channel> words complete to the daemon's names, asked at each tab. */
static unsigned int
names(const char *kind, const char **out, unsigned int max, void *arg)
{
	static json_t *held;           /* the strings out points into, until the next call */
	struct session *s = arg;
	char *err = NULL;
	unsigned int n = 0;
	size_t i;
	json_t *v;

	json_decref(held);
	held = NULL;
	if (strcmp(kind, "port") == 0) {
		int e;

		held = query(s, "show port info all", &e);
	} else {
		held = json_array();
		if (nc_pages_channels(s->c, "brief", held, NULL, &err) != 0) {
			json_decref(held);
			held = NULL;
		}
		free(err);
	}
	json_array_foreach(held, i, v)
		if (n < max && json_is_string(json_object_get(v, "name")))
			out[n++] = json_string_value(json_object_get(v, "name"));
	return n;
}

static double
num(const json_t *o, const char *key)
{
	const json_t *v = json_object_get(o, key);

	return json_is_number(v) ? json_number_value(v) : -1;
}

/* A rate in a column: "-" before the daemon has two samples, SI suffixes past 10^6. */
static void
col(double v, int width)
{
	if (v < 0)
		printf(" %*s", width, "-");
	else if (v >= 1e9)
		printf(" %*.2fG", width - 1, v / 1e9);
	else if (v >= 1e6)
		printf(" %*.2fM", width - 1, v / 1e6);
	else
		printf(" %*.0f", width, v);
}

static int
by_hits(const void *a, const void *b)
{
	const json_t *ca = *(json_t *const *)a, *cb = *(json_t *const *)b;
	/* A listing comes a page at a time, and the daemon's sample may turn between two
	 * pages: a channel without rates yet ranks as idle, not below the idle. */
	double x = num(json_object_get(ca, "rates"), "hits_pps");
	double y = num(json_object_get(cb, "rates"), "hits_pps");

	x = x < 0 ? 0 : x;
	y = y < 0 ? 0 : y;
	/* Among equals, those that have seen most come first, then by id, so that an idle
	 * screen stays still. */
	if (x == y) {
		x = num(json_object_get(ca, "counters"), "hits");
		y = num(json_object_get(cb, "counters"), "hits");
	}
	if (x == y) {
		x = -num(ca, "id");
		y = -num(cb, "id");
	}
	return x < y ? 1 : x > y ? -1 : 0;
}

/* The busiest channels first, at most MONITOR_TOP of them (a new array). */
static json_t *
busiest(json_t *all)
{
	size_t n = json_array_size(all);
	json_t **v = calloc(n ? n : 1, sizeof(*v)), *top = json_array();

	for (size_t i = 0; i < n; i++)
		v[i] = json_array_get(all, i);
	qsort(v, n, sizeof(*v), by_hits);
	for (size_t i = 0; i < n && i < MONITOR_TOP; i++)
		json_array_append(top, v[i]);
	free(v);
	return top;
}

/* One row's rate columns: the keys of a rates object, in order, up to a NULL. */
static void
rate_cols(const json_t *rates, const char *const *keys)
{
	for (; *keys != NULL; keys++)
		col(num(rates, *keys), 12);
}

static void
monitor_text(const json_t *snap, double every, bool tty)
{
	const json_t *ports = json_object_get(snap, "ports"), *ws = json_object_get(snap, "workers");
	const json_t *mp = json_object_get(snap, "mempool"), *chs = json_object_get(snap, "channels");
	time_t now = time(NULL);
	char when[32];
	const json_t *x;
	size_t i;

	strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", localtime(&now));
	if (tty)
		printf("\033[H\033[2J");
	printf("netchanneld monitor, every %g s, %s (^C to stop)\n\n", every, when);
	printf("%-12s %12s %12s %12s %12s %12s %12s\n", "port", "rx/s", "delivered/s",
	       "to_kernel/s", "drops/s", "nic rx bit/s", "nic tx bit/s");
	json_array_foreach(ports, i, x) {
		static const char *const keys[] = { "rx_pps", "delivered_pps", "to_kernel_pps",
						    "drop_pps", "nic_rx_bps", "nic_tx_bps", NULL };

		printf("%-12s", json_string_value(json_object_get(x, "name")));
		rate_cols(json_object_get(x, "rates"), keys);
		printf("\n");
	}
	printf("\n%-12s %12s %12s %12s %12s\n", "worker", "lcore", "busy", "pkts/busy", "loops/s");
	json_array_foreach(ws, i, x) {
		const json_t *r = json_object_get(x, "rates");
		double busy = num(r, "busy_share");

		printf("%-12d %12d", (int)num(x, "worker"), (int)num(x, "lcore"));
		if (busy < 0)
			printf(" %12s", "-");
		else
			printf(" %11.0f%%", busy * 100);
		rate_cols(r, (const char *const[]){ "packets_per_busy_loop", "loops_per_s", NULL });
		printf("\n");
	}
	printf("\nmempool: %.0f of %.0f in use\n", num(mp, "in_use"), num(mp, "size"));
	if (!json_is_array(chs)) {
		printf("\nchannels: too many to show here (show channel NAME shows one)\n");
		return;
	}
	printf("\n%-24s %12s %12s %12s %12s %12s %12s\n", "channel", "hits/s", "delivered/s",
	       "drops/s", "meter red/s", "tx/s", "in ring");
	json_array_foreach(chs, i, x) {
		static const char *const keys[] = { "hits_pps", "delivered_pps", "drop_pps",
						    "meter_red_pps", "tx_pps", NULL };

		printf("%-24s", json_string_value(json_object_get(x, "name")));
		rate_cols(json_object_get(x, "rates"), keys);
		col(num(x, "ring_count"), 12);
		printf("\n");
	}
}

/*
 * monitor [port P|channel C|all] [-i SECONDS] [-n COUNT]: a snapshot every
 * interval, drawn for a person or printed as one JSON object a line.
 * @return the exit status
 */
static int
monitor(struct session *s, int argc, char **argv)
{
	const char *port = "all", *channel = "all";
	double every = 1;
	long count = 0;
	int err;

	for (int i = 0; i < argc; i++) {
		char *end = NULL;

		if (strcmp(argv[i], "all") == 0)
			continue;
		if (i + 1 < argc && strcmp(argv[i], "port") == 0)
			port = argv[++i];
		else if (i + 1 < argc && strcmp(argv[i], "channel") == 0)
			channel = argv[++i];
		else if (i + 1 < argc && strcmp(argv[i], "-i") == 0)
			every = strtod(argv[++i], &end);
		else if (i + 1 < argc && strcmp(argv[i], "-n") == 0)
			count = strtol(argv[++i], &end, 10);
		else
			end = argv[i];
		if (end != NULL && (*end != '\0' || every < 0.1 || every > 3600 || count < 0)) {
			fprintf(stderr, "ncctl: monitor: bad argument '%s'\n", argv[i]);
			return 2;
		}
	}
	signal(SIGINT, on_interrupt);
	signal(SIGTERM, on_interrupt);
	for (long n = 0; !monitor_stop && (count == 0 || n < count); n++) {
		char line[NC_CLI_MAX_LINE];
		json_t *snap = json_object(), *chs;
		struct timespec ts = { (time_t)every, (long)((every - (time_t)every) * 1e9) };

		if (n > 0)
			nanosleep(&ts, NULL);
		if (monitor_stop)
			break;
		snprintf(line, sizeof(line), "show port stats %s", port);
		json_object_set_new(snap, "ports", query(s, line, &err));
		if (err != 0) {
			client_error(s->json, err, "monitor: %s: %s", line, nc_strerror(err));
			json_decref(snap);
			return 1;
		}
		json_object_set_new(snap, "time", json_integer((json_int_t)time(NULL)));
		json_object_set_new(snap, "workers", query(s, "show workers", &err));
		json_object_set_new(snap, "mempool", query(s, "show mempool", &err));
		if (strcmp(channel, "all") == 0) {
			chs = query_channels(s, &err);
		} else {
			snprintf(line, sizeof(line), "show channel %s", channel);
			chs = query(s, line, &err);
			/* One named channel that is not there (any more) ends the monitor. */
			if (err != 0) {
				client_error(s->json, err, "monitor: channel %s: %s", channel,
					     err == -ENOENT ? "no such channel" : nc_strerror(err));
				json_decref(snap);
				return 1;
			}
		}
		if (json_is_object(chs)) {         /* one channel */
			json_t *a = json_array();

			json_array_append_new(a, chs);
			chs = a;
		}
		json_object_set_new(snap, "channels", chs ? busiest(chs) : json_null());
		json_decref(chs);
		if (s->json) {
			char *text = json_dumps(snap, JSON_COMPACT);

			printf("%s\n", text);
			free(text);
		} else {
			monitor_text(snap, every, isatty(STDOUT_FILENO));
		}
		fflush(stdout);
		json_decref(snap);
	}
	return 0;
}

int
main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "json", no_argument, NULL, 'j' },
		{ "command", required_argument, NULL, 'c' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	const char *sock = NC_DEFAULT_SOCKET, *cmds[64];
	struct session s = { 0 };
	int ncmds = 0, o;

	/* "+": options stop at the first word, so that monitor's own options stay its. */
	while ((o = getopt_long(argc, argv, "+s:jc:h", opts, NULL)) != -1) {
		switch (o) {
		case 's': sock = optarg; break;
		case 'j': s.json = true; break;
		case 'c':
			if (ncmds == (int)(sizeof(cmds) / sizeof(cmds[0]))) {
				fprintf(stderr, "ncctl: at most 64 -c commands\n");
				return 2;
			}
			cmds[ncmds++] = optarg;
			break;
		case 'h': usage(stdout); return 0;
		case 'V':
			printf("ncctl (netchanneld) %s, %s, control protocol %d\n", nc_version(),
			       rte_version(), NC_CONTROL_PROTOCOL_VERSION);
			return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind != argc && ((strcmp(argv[optind], "monitor") != 0 &&
				strcmp(argv[optind], "capture") != 0) || ncmds > 0)) {
		fprintf(stderr, "ncctl: unexpected argument '%s' (a command goes after -c, quoted)\n",
			argv[optind]);
		return 2;
	}
	s.c = nc_connect(sock, NC_CONNECT_CONTROL);
	if (s.c == NULL) {
		int err = errno;

		/* The daemon's words when it gave some: the limit, or how busy it is. */
		client_error(s.json, err, "connect to %s: %s", sock,
			     nc_last_reason()[0] ? nc_last_reason() : nc_strerror(err));
		return 1;
	}
	if (optind != argc) {
		int ret = strcmp(argv[optind], "capture") == 0 ?
			capture(&s, argc - optind - 1, argv + optind + 1) :
			monitor(&s, argc - optind - 1, argv + optind + 1);

		nc_disconnect(s.c);
		return ret;
	}
	if (ncmds > 0) {
		for (int i = 0; i < ncmds && run(cmds[i], &s) != 1; i++)
			;
	} else if (isatty(STDIN_FILENO)) {
		nc_cli_set_names(names);
		nc_cli_shell("ncctl> ", run, &s, NULL, NULL);
	} else {
		char *line = NULL;
		size_t cap = 0;

		while (getline(&line, &cap, stdin) > 0 && run(line, &s) != 1)
			;
		free(line);
	}
	nc_disconnect(s.c);
	return s.failures ? 1 : 0;
}
