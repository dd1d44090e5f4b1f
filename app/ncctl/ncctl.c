/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ncctl: netchanneld's CLI, remotely, over its control socket.
 *
 *   ncctl [-s SOCKET] [--json] [-c "COMMAND"]...
 *
 * With -c it runs the command(s) and exits: 0 if all succeeded, 1 if one
 * failed (the daemon's message on stderr; with --json, {"error", "errno"} on
 * stdout), 2 for bad usage. Without, it is an
 * interactive prompt with the daemon's commands, tab completion and history
 * (or, with stdin not a terminal, one command per input line).
 */
#include <errno.h>
#include <stdarg.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>
#include <rte_version.h>

#include "netchannel.h"
/* cmdline (in cli_table.c) redefines dprintf: its users come first. */
#include "nc_cli.h"

struct session {
	struct nc_client *c;
	bool json;
	int failures;
};

static void
usage(FILE *f)
{
	fprintf(f, "usage: ncctl [-s SOCKET] [--json] [-c \"COMMAND\"]...\n"
		   "  -s, --socket   netchanneld's control socket (default " NC_DEFAULT_SOCKET ")\n"
		   "  -j, --json     print each command's output as one line of JSON (errors too:\n"
		   "                 {\"error\": \"...\", \"errno\": N})\n"
		   "  -c, --command  run this command and exit (may be given more than once)\n"
		   "  -h, --help     this text, and the commands\n"
		   "      --version  the version (the daemon's: the command \"show version\")\n"
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
	ret = nc_cli(s->c, line, s->json, &out);
	if (ret == 0) {
		fputs(out, stdout);
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

	while ((o = getopt_long(argc, argv, "s:jc:h", opts, NULL)) != -1) {
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
			       rte_version(), NC_CTL_VERSION);
			return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "ncctl: unexpected argument '%s' (a command goes after -c, quoted)\n",
			argv[optind]);
		return 2;
	}
	s.c = nc_connect(sock, NC_CONNECT_CONTROL);
	if (s.c == NULL) {
		client_error(s.json, errno, "connect to %s: %s", sock, nc_strerror(errno));
		return 1;
	}
	if (ncmds > 0) {
		for (int i = 0; i < ncmds && run(cmds[i], &s) != 1; i++)
			;
	} else if (isatty(STDIN_FILENO)) {
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
