/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The command table, its matcher, and the interactive prompt built from it
 * with librte_cmdline (as testpmd's): every table entry becomes cmdline
 * instances whose tokens are the entry's words, so completion and "?" help
 * come from the same table the daemon dispatches on.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

/* cmdline's headers redefine dprintf: after everything that uses it. */
#include <cmdline.h>
#include <cmdline_parse.h>
#include <cmdline_parse_string.h>
#include <cmdline_rdline.h>
#include <cmdline_socket.h>

#include "nc_cli.h"

const struct nc_cli_cmd nc_cli_cmds[NC_CLI_NCMDS] = {
	{ NC_CLI_SHOW_PORT, "show port info|stats|xstats <port>",
	  "a port's description, counters or extended counters; <port>: id, name or all" },
	{ NC_CLI_CLEAR_PORT, "clear port stats <port>",
	  "zero a port's counters (the NIC's and netchanneld's); <port>: id, name or all" },
	{ NC_CLI_SHOW_CHANNEL, "show channel <channel> [from <id>]",
	  "a channel's rule, action, owner, rings and counters; <channel>: id, name, all, or brief "
	  "(a line a channel); all and brief list a page from an id with 'from' (JSON: "
	  "{channels, next})" },
	{ NC_CLI_SHOW_CLIENTS, "show clients", "the connected clients: pid, uid, lcore, channels, mbufs held" },
	{ NC_CLI_SHOW_CLASSIFIER, "show classifier", "the classifier: rules, nodes, memory" },
	{ NC_CLI_SHOW_MEMPOOL, "show mempool", "the mbuf pool: size, in use, available" },
	{ NC_CLI_SHOW_NAT, "show nat", "NAT's reverse mappings: capacity, in use, expired" },
	{ NC_CLI_SHOW_VERSION, "show version",
	  "the daemon's version, DPDK's, and those of the control protocol and shared memory" },
	{ NC_CLI_SHOW_WORKERS, "show workers",
	  "each worker: its lcore, rx queues, loops, the loops that received, packets, and its load" },
	{ NC_CLI_SHOW_CAPTURE, "show capture",
	  "the captures running: what, filter, packets wanted, taken, written, lost" },
	{ NC_CLI_SHOW_CONFIG, "show config",
	  "the running config, as JSON: the file as last loaded (or the embedded default), the "
	  "command line's socket over its control.socket (root or the daemon's user)" },
	{ NC_CLI_SHOW_RELOAD, "show reload",
	  "the reloads so far and the last one: its time, whether it applied, and its channels "
	  "added, removed, changed and refused" },
	{ NC_CLI_RELOAD, "reload",
	  "reload the config file, as SIGHUP does, and say what changed: channels added, removed "
	  "and changed by name, or why nothing was (root or the daemon's user)" },
	{ NC_CLI_CHANNEL_CREATE, "channel create <name> [options...]",
	  "a channel clients attach to by name; options: proto P, src A, dst A, sport S, dport D, "
	  "priority N, action deliver|drop, ring_size N, queue_bytes N, port P, queue N, tx, consumers one|shared "
	  "(as in the config); "
	  "or action nat, then what it writes: dst A, dport P, src A, sport P, port P (out of), "
	  "via MAC (next hop), reverse (map replies back)" },
	{ NC_CLI_CHANNEL_DESTROY, "channel destroy <channel>",
	  "remove a channel created here or in the config; <channel>: id or name" },
	{ NC_CLI_CHANNEL_METER, "channel meter <channel> <meter>",
	  "put a meter on a channel, change it or take it off, while its traffic flows; <meter>: "
	  "off, or the config's keys as KEY=VALUE,... (pps=N,burst=N or bps=N,burst_bytes=N; "
	  "excess_burst, peak_pps, peak_burst, mode, eir, exceed drop|kernel)" },
	{ NC_CLI_SET_LOG_LEVEL, "set log level <type> <level>",
	  "a log type's level (a pattern: netchanneld.*, lib.eal...); level: emerg..debug or 1..8" },
	{ NC_CLI_CAPTURE, "capture port|channel <name> [options...]",
	  "copies of a port's packets (received and sent) or a channel's (classified to it, and "
	  "sent by its clients), written as pcapng by the daemon into a pipe that comes with the "
	  "reply (ncctl capture); options: count N (1..1000000, default 1000), snaplen N "
	  "(64..65535, default 65535), filter EXPR (a pcap filter: the rest of the line)" },
	{ NC_CLI_HELP, "help", "this list" },
	{ NC_CLI_QUIT, "quit", "leave the prompt (netchanneld -i: stop the daemon)" },
};

#define SUGGEST_MAX 32                 /* longer words are not compared */

/* Optimal string alignment distance between a and b (lengths la, lb), capped at cap + 1. */
static unsigned int
edit_distance(const char *a, size_t la, const char *b, size_t lb, unsigned int cap)
{
	unsigned int d[SUGGEST_MAX + 1][SUGGEST_MAX + 1];

	if (la > SUGGEST_MAX || lb > SUGGEST_MAX)
		return cap + 1;
	for (size_t i = 0; i <= la; i++)
		d[i][0] = (unsigned int)i;
	for (size_t j = 0; j <= lb; j++)
		d[0][j] = (unsigned int)j;
	for (size_t i = 1; i <= la; i++)
		for (size_t j = 1; j <= lb; j++) {
			unsigned int best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);

			if (d[i - 1][j] + 1 < best)
				best = d[i - 1][j] + 1;
			if (d[i][j - 1] + 1 < best)
				best = d[i][j - 1] + 1;
			if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
			    d[i - 2][j - 2] + 1 < best)
				best = d[i - 2][j - 2] + 1;
			d[i][j] = best;
		}
	return d[la][lb] > cap ? cap + 1 : d[la][lb];
}

const char *
nc_cli_suggest(const char *word, const char *const *cands, unsigned int n)
{
	size_t lw = strlen(word);
	/* A short word has few letters to spare: one edit away already is another word. */
	unsigned int cap = lw <= 4 ? 1 : 2, best_d = cap + 1;
	const char *best = NULL;

	for (unsigned int i = 0; i < n; i++) {
		unsigned int dd = edit_distance(word, lw, cands[i], strlen(cands[i]), cap);

		if (dd > 0 && dd < best_d) {
			best_d = dd;
			best = cands[i];
		}
	}
	return best;
}

void
nc_cli_did_you_mean(char *msg, size_t len, const char *word, const char *const *cands,
		    unsigned int n)
{
	const char *s = nc_cli_suggest(word, cands, n);
	size_t at = strlen(msg);

	if (s != NULL && at < len)
		snprintf(msg + at, len - at, "; did you mean '%s'?", s);
}

/* Does a word fit a syntax word? */
static bool
word_fits(const char *syn, size_t synlen, const char *w)
{
	if (syn[0] == '<')
		return true;
	for (const char *p = syn, *end = syn + synlen; p < end;) {
		const char *bar = memchr(p, '|', (size_t)(end - p));
		size_t n = bar ? (size_t)(bar - p) : (size_t)(end - p);

		if (strlen(w) == n && strncmp(p, w, n) == 0)
			return true;
		p += n + 1;
	}
	return false;
}

/*
 * How a command fits the words: -1 not at all, otherwise the number of
 * leading words it matched; *full tells a complete match.
 */
static int
fits(const struct nc_cli_cmd *c, char **argv, int argc, bool *full)
{
	const char *s = c->syntax;
	int i = 0;

	*full = false;
	while (*s != '\0') {
		size_t n = strcspn(s, " ");

		if (s[0] == '[') {
			*full = true;          /* any number of options */
			return i;
		}
		if (i == argc)
			return i;              /* too few words */
		if (!word_fits(s, n, argv[i]))
			return i;
		i++;
		s += n;
		s += strspn(s, " ");
	}
	*full = i == argc;
	return i;
}

const struct nc_cli_cmd *
nc_cli_match(const char *line, char *buf, char **argv, int *argc, char *err, size_t errlen)
{
	const struct nc_cli_cmd *best = NULL;
	int best_n = 0;
	char *save = NULL, *w;

	*argc = 0;
	err[0] = '\0';
	if (strlen(line) >= NC_CLI_MAX_LINE) {
		snprintf(err, errlen, "line longer than %d characters", NC_CLI_MAX_LINE - 1);
		return NULL;
	}
	strcpy(buf, line);
	for (w = strtok_r(buf, " \t\r\n", &save); w != NULL; w = strtok_r(NULL, " \t\r\n", &save)) {
		if (*argc == NC_CLI_MAX_WORDS) {
			snprintf(err, errlen, "more than %d words", NC_CLI_MAX_WORDS);
			return NULL;
		}
		argv[(*argc)++] = w;
	}
	if (*argc == 0)
		return NULL;
	for (unsigned int i = 0; i < NC_CLI_NCMDS; i++) {
		bool full;
		int n = fits(&nc_cli_cmds[i], argv, *argc, &full);

		if (full)
			return &nc_cli_cmds[i];
		if (n > best_n) {
			best_n = n;
			best = &nc_cli_cmds[i];
		}
	}
	/* The words that could have come where this line went wrong, and each choice of them. */
	char alts[256] = "", words[512];
	const char *cands[64];
	unsigned int nalts = 0, nwords = 0;
	size_t used = 0;

	for (unsigned int i = 0; i < NC_CLI_NCMDS; i++) {
		const char *syn = nc_cli_cmds[i].syntax;
		bool full;

		if (fits(&nc_cli_cmds[i], argv, *argc, &full) != best_n)
			continue;
		for (int k = 0; k < best_n && *syn; k++)
			syn += strcspn(syn, " ") + strspn(syn + strcspn(syn, " "), " ");
		if (*syn == '\0' || *syn == '[')
			continue;
		for (const char *p = syn, *end = syn + strcspn(syn, " "); p < end && *p != '<';) {
			size_t n = strcspn(p, "| ");

			if (nwords < sizeof(cands) / sizeof(cands[0]) && used + n + 1 <= sizeof(words)) {
				memcpy(words + used, p, n);
				words[used + n] = '\0';
				cands[nwords++] = words + used;
				used += n + 1;
			}
			p += n + (p[n] == '|');
		}
		if (strstr(alts, syn) == syn)
			continue;
		snprintf(alts + strlen(alts), sizeof(alts) - strlen(alts), "%s%.*s", nalts++ ? ", " : "",
			 (int)strcspn(syn, " "), syn);
	}
	if (best == NULL)
		snprintf(err, errlen, "unknown command '%s' (try help)", argv[0]);
	else if (nalts > 1)
		snprintf(err, errlen, "bad arguments%s%s: expected one of: %s",
			 best_n < *argc ? " near " : "", best_n < *argc ? argv[best_n] : "", alts);
	else
		snprintf(err, errlen, "bad arguments%s%s: usage: %s",
			 best_n < *argc ? " near " : "", best_n < *argc ? argv[best_n] : "",
			 best->syntax);
	if (best_n < *argc)
		nc_cli_did_you_mean(err, errlen, argv[best_n], cands, nwords);
	return NULL;
}

void
nc_cli_help(FILE *f)
{
	for (unsigned int i = 0; i < NC_CLI_NCMDS; i++)
		fprintf(f, "%-40s %s\n", nc_cli_cmds[i].syntax, nc_cli_cmds[i].help);
}

/* ---- the interactive prompt ------------------------------------------- */

struct cli_result {
	cmdline_fixed_string_t w[8];
	cmdline_multi_string_t rest;
};

/* What a cmdline instance stands for. */
struct inst_info {
	int nwords;                    /* fixed words before the options */
	bool rest;                     /* the options token */
	char *syntax;                  /* the tokens' strings point into it */
};

static struct {
	int (*run)(const char *line, void *arg);
	void *arg;
	bool quit;
} shell;

static void
on_line(void *parsed, struct cmdline *cl, void *data)
{
	const struct cli_result *r = parsed;
	const struct inst_info *ii = data;
	char line[NC_CLI_MAX_LINE];
	size_t len = 0;

	line[0] = '\0';
	/* The words as cmdline parsed them, joined again: the line run() parses. */
	for (int i = 0; i < ii->nwords; i++)
		len += (size_t)snprintf(line + len, sizeof(line) - len, "%s%s", i ? " " : "", r->w[i]);
	if (ii->rest && len + 1 + strnlen(r->rest, sizeof(r->rest)) < sizeof(line)) {
		line[len++] = ' ';
		strcpy(line + len, r->rest);
	}
	if (shell.run(line, shell.arg) == 1) {
		shell.quit = true;
		cmdline_quit(cl);
	}
}

/* ---- names: a <port> or <channel> word completes to what there is now ---- */

#define MAX_NAMES 1024                 /* completion offers at most this many */

static nc_cli_names_fn names_fn;

void
nc_cli_set_names(nc_cli_names_fn fn)
{
	names_fn = fn;
}

/* A name token: any word, as the string token's NULL; completed from names_fn. */
struct name_token {
	cmdline_parse_token_string_t str;    /* first: parsed as any word */
	const char *kind;                    /* "port" or "channel" */
};

static struct {
	const char *list[MAX_NAMES];
	unsigned int n;
} names_now;

static int
name_complete_get_nb(cmdline_parse_token_hdr_t *tk)
{
	const struct name_token *t = (const struct name_token *)tk;

	/* Asked once a tab: the names as they are at this press. */
	names_now.n = names_fn != NULL ? names_fn(t->kind, names_now.list, MAX_NAMES, shell.arg) : 0;
	return (int)names_now.n;
}

static int
name_complete_get_elt(cmdline_parse_token_hdr_t *tk __rte_unused, int i, char *dst,
		      unsigned int size)
{
	if (i < 0 || (unsigned int)i >= names_now.n || strlen(names_now.list[i]) >= size)
		return -1;
	strcpy(dst, names_now.list[i]);
	return 0;
}

static struct cmdline_token_ops name_ops;

/* A token for <port> or <channel>: parsed as any word, completed from names_fn. */
static cmdline_parse_token_hdr_t *
name_token(const char *kind, size_t offset)
{
	struct name_token *t = calloc(1, sizeof(*t));

	if (t == NULL)
		return NULL;
	if (name_ops.parse == NULL) {
		name_ops = cmdline_token_string_ops;
		name_ops.complete_get_nb = name_complete_get_nb;
		name_ops.complete_get_elt = name_complete_get_elt;
	}
	t->str.hdr.ops = &name_ops;
	t->str.hdr.offset = (unsigned int)offset;
	t->str.string_data.str = NULL;
	t->kind = kind;
	return &t->str.hdr;
}

/* A string token: fixed words ("a#b"), any word (NULL), or the rest of the line (""). */
static cmdline_parse_token_hdr_t *
token(const char *str, size_t offset)
{
	cmdline_parse_token_string_t *t = calloc(1, sizeof(*t));

	if (t == NULL)
		return NULL;
	t->hdr.ops = &cmdline_token_string_ops;
	t->hdr.offset = (unsigned int)offset;
	t->string_data.str = str;
	return &t->hdr;
}

/*
 * The prompt's last instance. A line that no command's words fit (a typo)
 * would get only librte_cmdline's "Bad arguments"; this token takes such a
 * line whole, so that run() says what is wrong and what was likely meant.
 * It refuses every line nc_cli_match() accepts, so that no line is
 * ambiguous, and takes no part in completion (res is NULL there).
 */
static int
other_parse(cmdline_parse_token_hdr_t *tk __rte_unused, const char *buf, void *res,
	    unsigned int ressize)
{
	char words[NC_CLI_MAX_LINE], line[NC_CLI_MAX_LINE], err[8];
	char *argv[NC_CLI_MAX_WORDS];
	size_t n;
	int argc;

	if (buf == NULL || res == NULL)
		return -1;
	n = strcspn(buf, "\r\n");
	if (n == 0 || n >= sizeof(line) || n >= ressize)
		return -1;
	memcpy(line, buf, n);
	line[n] = '\0';
	if (nc_cli_match(line, words, argv, &argc, err, sizeof(err)) != NULL || argc == 0)
		return -1;
	memcpy(res, line, n + 1);
	return (int)n;
}

static struct cmdline_token_ops other_ops = { .parse = other_parse };

/* One cmdline instance per command (two where options may follow: with and without). */
static cmdline_parse_ctx_t *
build_ctx(void)
{
	cmdline_parse_ctx_t *ctx = calloc(2 * NC_CLI_NCMDS + 2, sizeof(*ctx));
	unsigned int k = 0;

	if (ctx == NULL)
		return NULL;
	for (unsigned int i = 0; i < NC_CLI_NCMDS; i++) {
		for (int with_rest = 0; with_rest < 2; with_rest++) {
			cmdline_parse_inst_t *in = calloc(1, sizeof(*in) + 10 * sizeof(void *));
			struct inst_info *ii = calloc(1, sizeof(*ii));
			char *syn = strdup(nc_cli_cmds[i].syntax), *save = NULL, *w;
			int n = 0;
			bool has_rest = strchr(syn, '[') != NULL;

			if (with_rest && !has_rest) {
				free(in);
				free(ii);
				free(syn);
				continue;
			}
			for (w = strtok_r(syn, " ", &save); w != NULL; w = strtok_r(NULL, " ", &save)) {
				if (w[0] == '[') {
					if (with_rest)
						in->tokens[n++] = token("", offsetof(struct cli_result, rest));
					break;
				}
				for (char *p = w; *p; p++)
					if (*p == '|')
						*p = '#';
				/* The syntax string lives as long as the prompt: tokens point into it. */
				size_t at = offsetof(struct cli_result, w) +
					    (size_t)n * sizeof(cmdline_fixed_string_t);

				if (strcmp(w, "<port>") == 0 || strcmp(w, "<channel>") == 0)
					in->tokens[n] = name_token(w[1] == 'p' ? "port" : "channel", at);
				else
					in->tokens[n] = token(w[0] == '<' ? NULL : w, at);
				n++;
				ii->nwords = n;
			}
			ii->rest = with_rest;
			ii->syntax = syn;
			in->f = on_line;
			in->data = ii;
			in->help_str = nc_cli_cmds[i].help;
			ctx[k++] = in;
		}
	}
	/* Last: any other line, to be told what is wrong with it. */
	cmdline_parse_inst_t *in = calloc(1, sizeof(*in) + 2 * sizeof(void *));
	struct inst_info *ii = calloc(1, sizeof(*ii));
	cmdline_parse_token_hdr_t *t = calloc(1, sizeof(*t));

	if (in == NULL || ii == NULL || t == NULL) {
		free(in);
		free(ii);
		free(t);
		return ctx;            /* the prompt works without it */
	}
	t->ops = &other_ops;
	t->offset = offsetof(struct cli_result, rest);
	in->tokens[0] = t;
	ii->rest = true;
	in->f = on_line;
	in->data = ii;
	in->help_str = "";
	ctx[k] = in;
	return ctx;
}

static void
free_ctx(cmdline_parse_ctx_t *ctx)
{
	for (unsigned int k = 0; ctx[k] != NULL; k++) {
		struct inst_info *ii = ctx[k]->data;

		for (unsigned int t = 0; ctx[k]->tokens[t] != NULL; t++)
			free(ctx[k]->tokens[t]);
		free(ii->syntax);
		free(ii);
		free(ctx[k]);
	}
	free(ctx);
}

void
nc_cli_shell(const char *prompt, int (*run)(const char *line, void *arg), void *arg,
	     void (*poll_fn)(void *arg), volatile bool *stop)
{
	cmdline_parse_ctx_t *ctx = build_ctx();
	struct cmdline *cl;

	if (ctx == NULL)
		return;
	shell.run = run;
	shell.arg = arg;
	shell.quit = false;
	cl = cmdline_stdin_new(ctx, prompt);
	if (cl == NULL) {
		free_ctx(ctx);
		return;
	}
	while (!shell.quit && !(stop && *stop)) {
		struct pollfd p = { .fd = STDIN_FILENO, .events = POLLIN };
		int avail = 0;

		if (poll(&p, 1, poll_fn ? 10 : 100) > 0) {
			if (p.revents & (POLLHUP | POLLERR) && !(p.revents & POLLIN))
				break;
			/* cmdline_poll() takes one character: as many calls as there are. */
			if (ioctl(STDIN_FILENO, FIONREAD, &avail) != 0 || avail == 0)
				break;         /* end of input */
			while (avail-- > 0 && !shell.quit)
				if (cmdline_poll(cl) == RDLINE_EXITED)
					shell.quit = true;
		}
		if (poll_fn != NULL)
			poll_fn(arg);
	}
	cmdline_stdin_exit(cl);
	free_ctx(ctx);
}
