/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The CLI's command table: syntax and help only, shared by netchanneld (-i,
 * and the control socket's CLI request) and ncctl. The code that runs the
 * commands is in cli.c, in the daemon; ncctl sends the lines to it.
 */
#ifndef NC_CLI_H
#define NC_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "nc_proto.h"

#define NC_CLI_MAX_WORDS 32            /* words of a command line, options included */

/* The commands, in the order help lists them. */
enum nc_cli_id {
	NC_CLI_SHOW_PORT,
	NC_CLI_CLEAR_PORT,
	NC_CLI_SHOW_CHANNEL,
	NC_CLI_SHOW_CLIENTS,
	NC_CLI_SHOW_CLASSIFIER,
	NC_CLI_SHOW_MEMPOOL,
	NC_CLI_SHOW_NAT,
	NC_CLI_SHOW_VERSION,
	NC_CLI_SHOW_WORKERS,
	NC_CLI_SHOW_CAPTURE,
	NC_CLI_SHOW_CONFIG,
	NC_CLI_SHOW_RELOAD,
	NC_CLI_RELOAD,
	NC_CLI_CHANNEL_CREATE,
	NC_CLI_CHANNEL_DESTROY,
	NC_CLI_CHANNEL_METER,
	NC_CLI_SET_LOG_LEVEL,
	NC_CLI_CAPTURE,
	NC_CLI_HELP,
	NC_CLI_QUIT,
	NC_CLI_NCMDS
};

/*
 * A command's syntax, one word each: a literal ("show"), choices
 * ("info|stats|xstats"), an argument ("<port>"), or, last, "[options...]"
 * for any number of further words.
 */
struct nc_cli_cmd {
	enum nc_cli_id id;
	const char *syntax;
	const char *help;
};

extern const struct nc_cli_cmd nc_cli_cmds[NC_CLI_NCMDS];

/**
 * Split a line into words and find its command.
 *
 * @param line     the command line
 * @param buf      room for the words (NC_CLI_MAX_LINE bytes)
 * @param argv     the words (NC_CLI_MAX_WORDS)
 * @param argc     how many
 * @param err      why it matched no command, for the user
 * @return the command, or NULL (err says why; an empty line gives NULL and "")
 */
const struct nc_cli_cmd *nc_cli_match(const char *line, char *buf, char **argv, int *argc,
				      char *err, size_t errlen);

/**
 * The candidate a mistyped word most likely meant: the closest by edit
 * distance (insertions, deletions, substitutions and swaps of two
 * neighbouring letters), if it is close enough: at most 1 edit for a word
 * of up to 4 letters, at most 2 for longer ones.
 *
 * @param word   what was typed
 * @param cands  the words it may have meant
 * @param n      how many
 * @return the closest candidate, or NULL if none is close enough
 */
const char *nc_cli_suggest(const char *word, const char *const *cands, unsigned int n);

/**
 * Append "; did you mean 'X'?" to msg (NUL-terminated, room for len bytes)
 * when nc_cli_suggest() finds one; leave it as it is otherwise.
 */
void nc_cli_did_you_mean(char *msg, size_t len, const char *word, const char *const *cands,
			 unsigned int n);

/** Print every command's syntax and help. */
void nc_cli_help(FILE *f);

/**
 * Run an interactive prompt on the terminal (librte_cmdline: line editing,
 * history, tab completion of every command word, "?" help), handing each
 * complete line to run(). Returns when run() returns 1 (quit), at end of
 * input, or when *stop becomes true.
 *
 * @param poll_fn  called between keystrokes, at least every 100 ms (the
 *                 daemon serves its control socket there); NULL for none
 */
void nc_cli_shell(const char *prompt, int (*run)(const char *line, void *arg), void *arg,
		  void (*poll_fn)(void *arg), volatile bool *stop);

/**
 * What completes a command's <port> and <channel> words at the prompt: the
 * names there are now. Called (with nc_cli_shell()'s arg) when tab is
 * pressed on such a word.
 *
 * @param kind   "port" or "channel"
 * @param names  filled with up to max names (the callee owns the strings
 *               until its next call)
 * @return how many
 */
typedef unsigned int (*nc_cli_names_fn)(const char *kind, const char **names, unsigned int max,
					 void *arg);

/** Set the name source of the prompts nc_cli_shell() runs from now on (NULL: none). */
void nc_cli_set_names(nc_cli_names_fn fn);

#endif
