/* SPDX-License-Identifier: BSD-3-Clause */
/* Config reload on SIGHUP (reload.c). */
#ifndef NCD_RELOAD_H
#define NCD_RELOAD_H

#include <jansson.h>

struct ncd;

/**
 * Read the config file again and apply what a running daemon can change
 * (ncd_config_reloadable()): static channels added, removed or changed (a
 * changed one is destroyed and made again: its consumers get ESTALE),
 * control.allow, control.limits, control.hello_timeout_ms,
 * nat.idle_timeout_ms and nat.flows_per_channel. Control thread, with the
 * lock held. Anything else changed, or a config that does not load: nothing
 * is applied. Logged (NOTICE, a line for each channel by name, or ERR
 * with the reason) and counted; its result is ncd_view_reload()'s "last_*".
 *
 * @param d
 *   The daemon.
 * @param why
 *   Where the reason of a failure goes (a refused channel's, or the
 *   config's); may be NULL.
 * @param len
 *   Its size.
 * @return
 *   0; -1 when nothing was applied, or when some channel could not be made.
 */
int ncd_reload(struct ncd *d, char *why, size_t len);

/**
 * Tell the service manager (systemd's notify protocol: the datagram socket
 * $NOTIFY_SOCKET names) a state: "READY=1", "RELOADING=1", "STOPPING=1".
 * Nothing without $NOTIFY_SOCKET.
 */
void ncd_notify(const char *state);

/**
 * The reloads so far: how many, how many failed, and the last one's time,
 * whether it applied, what it did in words and by channel name (STATS'
 * "reload", show reload, /netchannel/reload).
 */
json_t *ncd_view_reload(void);

#endif
