/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The control socket (include/nc_proto.h): connections, their framing, and a
 * table of handlers by request type that the modules fill before it opens.
 */
#ifndef NCD_CONTROL_H
#define NCD_CONTROL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>

#include "nc_proto.h"

struct ncd;
struct ncd_conn;
struct ncd_channel;

/**
 * A request handler: it replies (ncd_ctl_reply() and the like) and returns
 * the status it replied with; a negative one counts against the connection.
 * The body passed ncd_ctl_check(): it has the size its type demands.
 */
typedef int (*ncd_ctl_handler_t)(struct ncd *d, struct ncd_conn *c, const struct nc_ctl_req *req,
				 const void *body, uint32_t len);

/**
 * Serve requests of one type with fn, from now on.
 * @return 0, or -EINVAL (no such type, or HELLO: the socket's own), -EEXIST (taken)
 */
int ncd_control_register(uint16_t type, ncd_ctl_handler_t fn);

/**
 * Serve the requests of a client's own channels (CHANNEL_CREATE, _ATTACH,
 * _DESTROY, _STATS, _EVENTFD, CLIENT_EVENTFD: requests.c). Before
 * ncd_control_init(). @return 0 or -1.
 */
int ncd_requests_register(void);

/** Reply to req with a status and a body. @return 0, or -errno of sendmsg(). */
int ncd_ctl_reply(struct ncd_conn *c, const struct nc_ctl_req *req, int32_t status,
		  const void *body, size_t len);

/**
 * Reply to req with a status, a body and a file descriptor for the client
 * (SCM_RIGHTS; none when fd < 0). The daemon keeps its own copy of fd.
 * @return 0, or -errno of sendmsg()
 */
int ncd_ctl_reply_fd(struct ncd_conn *c, const struct nc_ctl_req *req, int32_t status,
		     const void *body, size_t len, int fd);

/**
 * Reply to req with a JSON document as the body (-E2BIG if it does not fit
 * a message, -ENOMEM if v is NULL). Takes v's reference.
 * @return as ncd_ctl_reply()
 */
int ncd_ctl_reply_json(struct ncd_conn *c, const struct nc_ctl_req *req, json_t *v);

/** The connection's peer: uid, gid and pid from SO_PEERCRED. */
void ncd_conn_peer(const struct ncd_conn *c, uid_t *uid, gid_t *gid, pid_t *pid);

/** Whether the peer is the operator (uid 0, or the daemon's user): it may change things. */
bool ncd_conn_privileged(const struct ncd_conn *c);

/**
 * The namespace of the channel names of c's user (NCD_NS_ROOT for root and
 * the daemon's user, and for NULL, the daemon's own terminal).
 */
uint32_t ncd_conn_ns(const struct ncd_conn *c);

/**
 * Whether the user of a connection may see a channel in show channel,
 * CHANNEL_LIST and STATS: root, a user whose allow entry says "view": "all",
 * the user whose client created it, or for a static channel a user it may
 * attach to. c NULL (the terminal, telemetry, --stats): always.
 */
bool ncd_conn_sees(const struct ncd *d, const struct ncd_conn *c, const struct ncd_channel *ch);

/**
 * Keep a destroyed static channel's rings (either may be NULL) until the
 * zero-copy client in slot, its consumer, lets go: its connection ends. They
 * are drained and freed then.
 *
 * @return 0, or -1 when the slot has no open connection or no room (the caller frees them).
 */
int ncd_control_hold_rings(struct ncd *d, unsigned int slot, struct rte_ring *rx,
			   struct rte_ring *tx);

/**
 * Log (NOTICE) each channel of another owner whose flows the new channel id
 * now takes (its rule overlaps theirs at a priority not below theirs), naming
 * both owners. who: the new channel's owner, as the log should name it.
 */
void ncd_log_shadowing(const struct ncd *d, uint32_t id, const char *who);

/** Set up the control socket. @return 0 or -1 (printed). */
int ncd_control_init(struct ncd *d);

/** Serve the control socket once: wait at most timeout_ms for something to do. */
void ncd_control_poll(struct ncd *d, int timeout_ms);

/** Serve the control socket until d->stop. */
void ncd_control_run(struct ncd *d);

/** Close every client (their channels go) and the socket. */
void ncd_control_close(struct ncd *d);

/**
 * The control socket's counters: bad messages, connections accepted and
 * refused as they were accepted, closed for saying no HELLO in time, open
 * connections and clients, and refusals over users' limits, from the room
 * kept for root, and of claims that would take others' flows.
 */
json_t *ncd_view_control(void);

/** A connected client's pid and uid, by slot (0 and 0 for none). */
void ncd_client_cred(int slot, pid_t *pid, uid_t *uid);

/** The control socket's part in channels' lives: a zero-copy consumer's rings (ncd_channel_hooks_add()). */
extern const struct ncd_channel_hooks ncd_control_channel_hooks;

#endif
