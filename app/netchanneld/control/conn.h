/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The control module's own: a connection, the table of them, and what its
 * files share. control.c: the socket, connections and their framing;
 * policy.c: what each user may do and see, and its limits; reclaim.c: dead
 * clients' buffers and slots; requests.c: the requests of a client's
 * channels. Not for other modules: theirs is control.h.
 */
#ifndef NCD_CONTROL_CONN_H
#define NCD_CONTROL_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "control/control.h"
#include "core/config.h"
#include "nc_proto.h"

struct ncd;
struct ncd_channel;
struct rte_ring;

#define NCD_MAX_CLIENTS NC_MAX_CLIENTS
#define FREE_RING_MAX 16384u           /* entries of a client's free ring, at most */
/* Connections and client slots only root may take: others never lock the operator out. */
#define ROOT_RESERVE 4
#define VIEW_CHANNEL_NAMES 64          /* names of a connection's channels that show clients lists */

/* control.limits, in the order of the STATS view's limit_refusals. */
enum { LIM_CONNECTIONS, LIM_CHANNELS, LIM_MEMORY, LIM_EVENTFDS, LIM_MBUFS, LIM_N };
extern const char *const lim_names[LIM_N];

struct ncd_conn {
	int fd;                        /* -1: closed (free unless pending) */
	int slot;                      /* its client slot from HELLO on, else -1 */
	bool pending;                  /* closed, but its process still runs: mbufs not yet back */
	uint64_t pending_since;        /* ms, from the TSC */
	bool hello;
	uint32_t hello_flags;          /* NC_HELLO_F_* of its HELLO */
	uint32_t version;              /* the control protocol HELLO agreed on */
	char build[NC_BUILD_SIZE];     /* the client's build, as its HELLO said ("": unsaid) */
	uint64_t accepted_ms;          /* when it connected: it has hello_timeout_ms to say HELLO */
	struct ucred cred;
	unsigned int errors;
	unsigned int lcore_id;
	/*
	 * The arrays below grow as needed: how many channels a connection has is
	 * bounded by control.limits.channels and max_channels, and for an
	 * isolated client with a ring per channel, by its region's rings.
	 */
	uint32_t *channels;            /* the channels it created */
	unsigned int nchannels, cap_channels;
	/* Static channels it attached to: id and the entry's generation then. */
	struct ncd_attached { uint32_t id; uint64_t gen; } *attached;
	unsigned int nattached, cap_attached;
	/* Rings of static channels destroyed under it, a zero-copy consumer: freed as it goes. */
	struct rte_ring **held;
	unsigned int nheld, cap_held;
};

/* The control socket, its connections, and what it counted. */
struct ncd_ctl_state {
	int listen_fd;
	int epoll_fd;
	/* Connections; a slot of the client table is given at HELLO, not at accept. */
	struct ncd_conn conns[NCD_MAX_CONNECTIONS];
	struct ncd_conn *slot_conn[NCD_MAX_CLIENTS]; /* who holds each slot, or NULL */
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	uint64_t bad_messages;         /* over every connection */
	uint64_t accepted, refused;
	uint64_t hello_timeouts;       /* connections closed for not saying HELLO in time */
	uint64_t limit_refusals[LIM_N]; /* requests refused over a user's control.limits */
	uint64_t reserve_refusals;     /* others' refused from the room kept for root */
	uint64_t shadow_refusals;      /* channels refused that would take another user's flows */
	int nh_tag;                    /* its address marks the next-hop eventfd in epoll */
	ncd_ctl_handler_t handlers[NC_CTL_TYPE_MAX]; /* by request type; HELLO is the socket's own */
};

extern struct ncd_ctl_state ncd_ctl;

/* Connections and their framing (control.c). */

/**
 * Room for n more elements of size bytes in a connection's array of used of cap, which doubles as
 * it grows. @return 0, or -ENOMEM
 */
int ctl_conn_room(void *arrp, unsigned int *cap, unsigned int used, unsigned int n, size_t size);

/** A connection's arrays, freed once the entry is free (or the daemon stops). */
void ctl_conn_arrays_free(struct ncd_conn *c);

/** A reply, with nfds file descriptors attached (SCM_RIGHTS, in one message). @return status */
int ctl_reply_fds(struct ncd_conn *c, const struct nc_ctl_req *req, int32_t status,
		const void *body, size_t len, const int *fds, unsigned int nfds);

/** A reply, with a file descriptor attached when fd >= 0. @return status */
int ctl_reply_fd(struct ncd_conn *c, const struct nc_ctl_req *req, int32_t status, const void *body,
		size_t len, int fd);

/** A reply to req (NULL: unasked, id 0), with its body. @return status */
int ctl_reply(struct ncd_conn *c, const struct nc_ctl_req *req, int32_t status, const void *body,
		size_t len);

/* Users: what they may do, and their limits (policy.c). */

/** root, or the daemon's own user: the operator, whom no limit or reserve holds back. */
bool ctl_privileged(const struct ucred *cr);

/** Whether control.allow lets the peer claim rule r. */
bool ctl_allowed(const struct ncd *d, const struct ucred *cr, const struct nc_trie_rule *r);

/** Whether a static channel's "attach" (or root) lets the peer attach to it. */
bool ctl_may_attach(const struct ncd_channel *ch, const struct ucred *cr);

/** Whether the peer's allow entry lets it take flows from other users' channels. */
bool ctl_may_preempt(const struct ncd *d, const struct ucred *cr);

/** control.allow: may this peer be a zero-copy client, a process inside the daemon's memory? */
bool ctl_zero_copy_allowed(const struct ncd *d, const struct ucred *cr);

/**
 * The transmit meter of the peer's user (its limits' tx_pps and tx_bps), for
 * the client slot it is given: the one its other connections have, with one
 * more reference, or a new one. NULL: none (the operator, no such limit, or
 * out of memory: logged). Control thread.
 */
struct ncd_txm *ctl_user_txm(struct ncd *d, const struct ucred *cr);

/** Whether the user of c made channel ch (a static channel is the operator's). */
bool ctl_same_user(const struct ncd_conn *c, const struct ncd_channel *ch);

/** Who owns a channel, for a message: the user of the client that made it, or the operator. */
void ctl_owner_name(const struct ncd_channel *ch, char *buf, size_t len);

/** The mbufs a ring of size entries can hold: no more than the pool has. */
uint64_t ctl_ring_mbufs(const struct ncd *d, uint32_t size);

/**
 * Whether the peer's user stays within its limit k with more of it; if not, counted, and why says
 * so.
 */
bool ctl_within_limit(const struct ncd *d, const struct ucred *cr, int k, uint64_t more, char *why,
		size_t len);

/**
 * Whether the connection's user may make the daemon hold more mbufs (its limit, the pool's
 * reserve): 0, or -EDQUOT / -ENOSPC with the reason in why.
 */
int ctl_may_hold_mbufs(const struct ncd *d, const struct ncd_conn *c, uint64_t more, char *why,
		size_t len);

/* Dead clients: what they held comes back (reclaim.c). */

/** Whether a process has exited (or is a zombie): it will never touch shared memory again. */
bool ctl_process_gone(pid_t pid);

/** A dead client's mbufs back in the pool: those marked as its and those in its lcore's cache. */
void ctl_reclaim_mbufs(struct ncd *d, struct ncd_conn *c);

/** Closed connections whose process has gone since: their mbufs back, their slots free. */
void ctl_reclaim_pending(struct ncd *d);

/** The connection's entry is free again, and its slot if it had one. */
void ctl_slot_free(struct ncd *d, struct ncd_conn *c);

/** A client lets go of its k-th attached static channel, if that is still the one it attached to. */
void ctl_detach(struct ncd *d, struct ncd_conn *c, unsigned int k);

/*
 * A connection lets go of the k-th channel it made (it destroys it, or
 * goes). A shared one that other connections consume passes to the first
 * of them, as a kernel's SO_REUSEPORT group outlives the socket that began
 * it; any other is removed. gone: the connection closed, so its rings are
 * drained from the tail.
 */
void ctl_release(struct ncd *d, struct ncd_conn *c, unsigned int k, bool gone);

/* Requests (requests.c). */

/**
 * HELLO: the connection becomes a client, with a slot of the client table. @return the status
 * replied
 */
int ctl_do_hello(struct ncd *d, struct ncd_conn *c, const struct nc_ctl_req *req, const void *body,
		 uint32_t len);

#endif
