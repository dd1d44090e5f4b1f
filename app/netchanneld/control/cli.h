/* SPDX-License-Identifier: BSD-3-Clause */
/* The CLI's commands (their grammar is lib/cli), run in the daemon. */
#ifndef NCD_CLI_H
#define NCD_CLI_H

#include <stdbool.h>
#include <stdio.h>

struct ncd;
struct ncd_conn;

/**
 * Run one CLI command line.
 *
 * @param json    print JSON (one line) instead of text
 * @param priv    the caller may change things (root, or the daemon's user)
 * @param viewer  the caller's connection, whose user sees only its own clients and the
 *                channels it may use (ncd_conn_sees()); NULL: everything (the terminal)
 * @param who     the caller, for the log line of every change ("the terminal", "pid 7 uid 0")
 * @param out     where the output, or the error message, goes
 * @param fd_out  where a command that hands the caller a file descriptor (capture) puts it,
 *                or NULL where none can be handed (the terminal): such commands fail
 * @return 0; 1 for quit; or -errno, after writing what was wrong to out
 */
int ncd_cli_exec(struct ncd *d, const char *line, bool json, bool priv,
		 const struct ncd_conn *viewer, const char *who, FILE *out, int *fd_out);

/** Serve CLI requests on the control socket. @return 0 or a negative errno. */
int ncd_cli_register(void);

#endif
