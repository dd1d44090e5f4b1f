/* SPDX-License-Identifier: BSD-3-Clause */
#define _GNU_SOURCE /* struct ucred, accept4 */
/*
 * The control socket (include/nc_proto.h): a Unix SOCK_SEQPACKET socket
 * served by the main lcore. Every request is checked before it is acted on:
 * a bad one gets an error reply and counts against its connection, which is
 * closed after NC_CTL_MAX_ERRORS; no request can affect another connection.
 * Channels a connection created are destroyed when it closes, however it
 * closes (exit, crash, kill -9: the kernel closes the socket). Here: the
 * socket, the connections and their framing, and the handler table the
 * modules fill (requests.c, views.c, cli.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <inttypes.h>

#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_hash.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_malloc.h>
#include <rte_mbuf_dyn.h>
#include <rte_mempool.h>
#include <rte_rcu_qsbr.h>
#include <rte_ring.h>

#define NCD_LOGTYPE ncd_logtype_control
#include "channel/channel.h"
#include "channel/region.h"
#include "control/conn.h"
#include "control/control.h"
#include "control/ctl_decode.h"
#include "control/rates.h"
#include "control/reload.h"
#include "control/views.h"
#include "core/log.h"
#include "core/match.h"
#include "core/stats.h"
#include "datapath/capture.h"
#include "datapath/datapath.h"
#include "datapath/region.h"
#include "nat/nat.h"
#include "ncd.h"
#include "nexthop/nexthop.h"
#include "port/port.h"

struct ncd_ctl_state ncd_ctl = { .listen_fd = -1, .epoll_fd = -1 };

/*
 * Room for n more elements of size bytes in a connection's array of used
 * of cap, which doubles as it grows. @return 0, or -ENOMEM
 */
int
ctl_conn_room(void *arrp, unsigned int *cap, unsigned int used, unsigned int n, size_t size)
{
	void **arr = arrp;
	unsigned int next = *cap != 0 ? *cap : 16;
	void *p;

	if (used + n <= *cap)
		return 0;
	while (next < used + n)
		next *= 2;
	p = realloc(*arr, (size_t)next * size);
	if (p == NULL)
		return -ENOMEM;
	*arr = p;
	*cap = next;
	return 0;
}

/* A connection's arrays, freed once the entry is free (or the daemon stops). */
void
ctl_conn_arrays_free(struct ncd_conn *c)
{
	free(c->channels);
	free(c->attached);
	free(c->held);
	c->channels = NULL;
	c->attached = NULL;
	c->held = NULL;
	c->cap_channels = c->cap_attached = c->cap_held = 0;
}

void
ncd_client_cred(int slot, pid_t *pid, uid_t *uid)
{
	const struct ncd_conn *c = slot >= 0 && slot < NCD_MAX_CLIENTS ? ncd_ctl.slot_conn[slot] : NULL;

	*pid = c != NULL ? c->cred.pid : 0;
	*uid = c != NULL ? c->cred.uid : 0;
}

json_t *
ncd_view_control(void)
{
	unsigned int open = 0, clients = 0;
	json_t *lim = json_object();

	for (unsigned int i = 0; i < NCD_MAX_CONNECTIONS; i++)
		open += ncd_ctl.conns[i].fd >= 0;
	for (unsigned int i = 0; i < NCD_MAX_CLIENTS; i++)
		clients += ncd_ctl.slot_conn[i] != NULL;
	for (int k = 0; k < LIM_N; k++)
		json_object_set_new(lim, lim_names[k], json_integer((json_int_t)ncd_ctl.limit_refusals[k]));
	return json_pack("{s:I, s:I, s:I, s:I, s:i, s:i, s:i, s:i, s:o, s:I, s:I}", "bad_messages",
			 (json_int_t)ncd_ctl.bad_messages, "accepted", (json_int_t)ncd_ctl.accepted,
			 "refused", (json_int_t)ncd_ctl.refused, "hello_timeouts",
			 (json_int_t)ncd_ctl.hello_timeouts, "connections", (int)open,
			 "max_connections", NCD_MAX_CONNECTIONS, "clients", (int)clients,
			 "max_clients", NCD_MAX_CLIENTS, "limit_refusals", lim,
			 "reserve_refusals", (json_int_t)ncd_ctl.reserve_refusals, "shadow_refusals",
			 (json_int_t)ncd_ctl.shadow_refusals);
}

static void
client_close(struct ncd *d, struct ncd_conn *c)
{
	/* Nothing held: an ncctl call or a scrape, which an operator does not want a line of. */
	bool quiet = c->nchannels == 0 && c->nattached == 0;
	unsigned int made = c->nchannels;

	/* It no longer runs (it closed, or was killed): its rings are drained from the tail. */
	while (c->nchannels > 0)
		ctl_release(d, c, 0, true);
	while (c->nattached > 0)
		ctl_detach(d, c, 0);
	/* Not through the user's rate limit: a debug line must not use up its info lines. */
	if (quiet)
		NCD_LOG(DEBUG, "control: pid %d uid %u closed, nothing held", (int)c->cred.pid,
			c->cred.uid);
	else
		NCD_LOG_USER(INFO, c->cred.uid, "control: pid %d uid %u closed, %u channels removed",
			     (int)c->cred.pid, c->cred.uid, made);
	epoll_ctl(ncd_ctl.epoll_fd, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	c->fd = -1;
	if (!c->hello || !(c->hello_flags & NC_HELLO_F_ZEROCOPY)) {
		/* Nothing of the daemon's memory was the client's: done. */
		ctl_slot_free(d, c);
	} else if (ctl_process_gone(c->cred.pid)) {
		ctl_reclaim_mbufs(d, c);
		ctl_slot_free(d, c);
	} else {
		/* The slot waits: its owner id still marks the mbufs the process holds. */
		c->pending = true;
		c->pending_since = ncd_now_ms();
		__atomic_store_n(&d->clients[c->slot].live, 0, __ATOMIC_RELEASE);
	}
}

/*
 * Connections that have not said HELLO in control.hello_timeout_ms: closed
 * and counted, so that idle connections cannot hold every slot.
 */
static void
expire_handshakes(struct ncd *d)
{
	uint64_t now = ncd_now_ms();

	for (unsigned int i = 0; i < NCD_MAX_CONNECTIONS; i++) {
		struct ncd_conn *c = &ncd_ctl.conns[i];

		if (c->fd < 0 || c->hello || now - c->accepted_ms < d->cfg.hello_timeout_ms)
			continue;
		NCD_LOG_USER(NOTICE, c->cred.uid, "control: pid %d uid %u said no HELLO in %u ms: "
			     "closed", (int)c->cred.pid, c->cred.uid, d->cfg.hello_timeout_ms);
		ncd_ctl.hello_timeouts++;
		client_close(d, c);
	}
}

/* A reply, with nfds file descriptors attached (SCM_RIGHTS, in one message). */
int
ctl_reply_fds(struct ncd_conn *c, const struct nc_ctl_req *req, int32_t status, const void *body,
	      size_t len, const int *fds, unsigned int nfds)
{
	struct nc_ctl_rep rep = {
		.magic = NC_CTL_MAGIC, .type = req ? req->type : 0, .for_id = req ? req->id : 0,
		.status = status, .len = (uint32_t)len,
	};
	struct iovec iov[2] = { { &rep, sizeof(rep) }, { (void *)body, len } };
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = len ? 2 : 1 };
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(2 * sizeof(int))];
	} cm;

	RTE_VERIFY(nfds <= 2);
	if (nfds > 0) {
		memset(&cm, 0, sizeof(cm));
		mh.msg_control = cm.buf;
		mh.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
		cm.h.cmsg_level = SOL_SOCKET;
		cm.h.cmsg_type = SCM_RIGHTS;
		cm.h.cmsg_len = CMSG_LEN(nfds * sizeof(int));
		memcpy(CMSG_DATA(&cm.h), fds, nfds * sizeof(int));
	}
	/* A client that does not read its replies only stalls itself. */
	return sendmsg(c->fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL) < 0 ? -errno : 0;
}

/* A reply, with a file descriptor attached when fd >= 0. */
int
ctl_reply_fd(struct ncd_conn *c, const struct nc_ctl_req *req, int32_t status, const void *body,
	     size_t len, int fd)
{
	return ctl_reply_fds(c, req, status, body, len, &fd, fd >= 0);
}

int
ctl_reply(struct ncd_conn *c, const struct nc_ctl_req *req, int32_t status, const void *body,
	  size_t len)
{
	return ctl_reply_fd(c, req, status, body, len, -1);
}

int
ncd_ctl_reply(struct ncd_conn *c, const struct nc_ctl_req *req, int32_t status, const void *body,
	      size_t len)
{
	return ctl_reply_fd(c, req, status, body, len, -1);
}

int
ncd_ctl_reply_fd(struct ncd_conn *c, const struct nc_ctl_req *req, int32_t status,
		 const void *body, size_t len, int fd)
{
	return ctl_reply_fd(c, req, status, body, len, fd);
}

int
ncd_ctl_reply_json(struct ncd_conn *c, const struct nc_ctl_req *req, json_t *v)
{
	char *buf = v != NULL ? json_dumps(v, 0) : NULL;
	size_t len = buf != NULL ? strlen(buf) : 0;
	int ret;

	json_decref(v);
	if (buf == NULL)
		return ctl_reply(c, req, -ENOMEM, NULL, 0);
	ret = len + sizeof(struct nc_ctl_rep) > NC_CTL_MAX_MSG ? ctl_reply(c, req, -E2BIG, NULL, 0) :
								    ctl_reply(c, req, 0, buf, len);
	free(buf);
	return ret;
}

bool
ncd_conn_privileged(const struct ncd_conn *c)
{
	return ctl_privileged(&c->cred);
}

uint32_t
ncd_conn_ns(const struct ncd_conn *c)
{
	return c == NULL || ctl_privileged(&c->cred) ? NCD_NS_ROOT : (uint32_t)c->cred.uid + 1;
}

void
ncd_conn_peer(const struct ncd_conn *c, uid_t *uid, gid_t *gid, pid_t *pid)
{
	*uid = c->cred.uid;
	*gid = c->cred.gid;
	*pid = c->cred.pid;
}

int
ncd_control_register(uint16_t type, ncd_ctl_handler_t fn)
{
	if (type == 0 || type == NC_CTL_HELLO || type >= NC_CTL_TYPE_MAX)
		return -EINVAL;
	if (ncd_ctl.handlers[type] != NULL)
		return -EEXIST;
	ncd_ctl.handlers[type] = fn;
	return 0;
}

/* Handle one message. Returns the status it replied with (<0: counts as an error). */
static int
handle(struct ncd *d, struct ncd_conn *c, const uint8_t *msg, ssize_t n, bool truncated)
{
	const struct nc_ctl_req *req = (const struct nc_ctl_req *)msg;
	const void *body = msg + sizeof(*req);
	uint32_t len;
	int ret = ncd_ctl_check(msg, (size_t)n, truncated, &len);

	if (ret != 0) {
		/* With a header, the reply carries its sequence number. */
		ctl_reply(c, n >= (ssize_t)sizeof(*req) ? req : NULL, ret, NULL, 0);
		return ret;
	}
	if (!c->hello && req->type != NC_CTL_HELLO) {
		ctl_reply(c, req, -EPROTO, NULL, 0);
		return -EPROTO;
	}
	if (req->type == NC_CTL_HELLO)
		return ctl_do_hello(d, c, req, body, len);
	if (ncd_ctl.handlers[req->type] == NULL) {
		ctl_reply(c, req, -EOPNOTSUPP, NULL, 0);
		return -EOPNOTSUPP;
	}
	return ncd_ctl.handlers[req->type](d, c, req, body, len);
}

static void
client_readable(struct ncd *d, struct ncd_conn *c)
{
	static uint8_t msg[NC_CTL_MAX_MSG];

	for (;;) {
		ssize_t n = recv(c->fd, msg, sizeof(msg), MSG_DONTWAIT | MSG_TRUNC);
		int ret;

		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
			client_close(d, c);
			return;
		}
		if (n < 0)
			return;
		ret = handle(d, c, msg, n > (ssize_t)sizeof(msg) ? (ssize_t)sizeof(msg) : n,
			     n > (ssize_t)sizeof(msg));
		/* Refusals (EPERM, EBUSY...) are answers; only broken messages count. */
		if (ret == -EBADMSG || ret == -EMSGSIZE || ret == -EOPNOTSUPP || ret == -EPROTO ||
		    (ret == -EINVAL && c->hello == false)) {
			ncd_ctl.bad_messages++;
			if (++c->errors >= NC_CTL_MAX_ERRORS) {
				NCD_LOG_USER(NOTICE, c->cred.uid, "control: pid %d sent %u bad messages: "
					     "closing", (int)c->cred.pid, c->errors);
				client_close(d, c);
				return;
			}
		}
	}
}

static void
accept_clients(const struct ncd *d)
{
	for (;;) {
		int fd = accept4(ncd_ctl.listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct epoll_event ev = { .events = EPOLLIN };
		socklen_t len = sizeof(struct ucred);
		struct ncd_conn *c = NULL;

		struct ucred cred = { .pid = 0, .uid = UINT32_MAX, .gid = UINT32_MAX };
		unsigned int nfree = 0;
		char why[160];
		int err = 0, n = 0;

		if (fd < 0)
			return;
		getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len);
		for (unsigned int i = NCD_MAX_CONNECTIONS; i-- > 0;)
			if (ncd_ctl.conns[i].fd < 0 && !ncd_ctl.conns[i].pending) {
				c = &ncd_ctl.conns[i];
				nfree++;
			}
		/* The last free entries are the operator's; a user has control.limits.connections. */
		if (nfree == 0 || (nfree <= ROOT_RESERVE && !ctl_privileged(&cred))) {
			n = snprintf(why, sizeof(why), "the daemon is busy: %d connections",
				     NCD_MAX_CONNECTIONS - (int)nfree);
			err = -ENOSPC;
			ncd_ctl.reserve_refusals += nfree > 0;
		} else if (!ctl_within_limit(d, &cred, LIM_CONNECTIONS, 1, why, sizeof(why))) {
			n = (int)strlen(why);
			err = -EDQUOT;
		}
		if (err != 0) {
			struct ncd_conn tmp = { .fd = fd };

			/* Unasked (id 0): what the client reads first, in place of its HELLO's reply. */
			ctl_reply(&tmp, NULL, err, why, (size_t)n);
			/* What it sent already, read: a close with it unread would reset the client first. */
			while (recv(fd, why, sizeof(why), MSG_DONTWAIT | MSG_TRUNC) > 0)
				;
			close(fd);
			ncd_ctl.refused++;
			continue;
		}
		memset(c, 0, sizeof(*c));
		c->fd = fd;
		c->slot = -1;
		c->cred = cred;
		c->accepted_ms = ncd_now_ms();
		ev.data.ptr = c;
		epoll_ctl(ncd_ctl.epoll_fd, EPOLL_CTL_ADD, fd, &ev);
		ncd_ctl.accepted++;
	}
}

/* One of a client slot's single-producer, single-consumer mbuf rings. */
static struct rte_ring *
slot_ring(const char *fmt, unsigned int slot, unsigned int size)
{
	char name[RTE_RING_NAMESIZE];
	struct rte_ring *r;

	snprintf(name, sizeof(name), fmt, slot);
	r = rte_ring_create(name, size, (int)rte_socket_id(),
			    RING_F_SP_ENQ | RING_F_SC_DEQ | RING_F_EXACT_SZ);
	if (r == NULL)
		NCD_LOG(ERR, "rte_ring_create(%s, %u): %s", name, size, rte_strerror(rte_errno));
	return r;
}

int
ncd_control_init(struct ncd *d)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = NULL }, nev = { .events = EPOLLIN };
	char dir[sizeof(ncd_ctl.path)];

	if (ncd_rates_init(d) != 0) {
		NCD_LOG(ERR, "rates: out of memory for %u channels' samples", d->cfg.max_channels);
		return -1;
	}
	for (unsigned int i = 0; i < NCD_MAX_CONNECTIONS; i++)
		ncd_ctl.conns[i] = (struct ncd_conn){ .fd = -1, .slot = -1 };
	for (unsigned int i = 0; i < NCD_MAX_CLIENTS; i++) {
		/*
		 * The free ring: a client produces, a worker consumes. It holds the
		 * client's whole quota, up to a bound on its memory (a client over it
		 * frees the rest into the pool itself). The alloc ring the other way.
		 */
		d->free_rings[i] = slot_ring(NC_FREE_RING_FMT, i,
					     RTE_MIN(d->cfg.mbuf_quota, FREE_RING_MAX));
		d->alloc_rings[i] = slot_ring(NC_ALLOC_RING_FMT, i, NC_ALLOC_RING_SIZE);
		if (d->free_rings[i] == NULL || d->alloc_rings[i] == NULL)
			return -1;
	}
	_Static_assert(sizeof(sa.sun_path) == NCD_SOCKET_PATH_MAX, "the config checks the path");
	snprintf(ncd_ctl.path, sizeof(ncd_ctl.path), "%s", d->cfg.control_socket);
	snprintf(dir, sizeof(dir), "%s", ncd_ctl.path);
	if (mkdir(dirname(dir), 0755) != 0 && errno != EEXIST) {
		NCD_LOG(ERR, "mkdir(%s): %s", dir, strerror(errno));
		return -1;
	}
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", ncd_ctl.path);
	ncd_ctl.listen_fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (ncd_ctl.listen_fd < 0) {
		NCD_LOG(ERR, "socket(AF_UNIX, SOCK_SEQPACKET): %s", strerror(errno));
		return -1;
	}
	/* A socket file nobody listens on is stale: a daemon that died left it. */
	if (connect(ncd_ctl.listen_fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
		NCD_LOG(ERR, "control socket %s: another daemon is listening on it", ncd_ctl.path);
		return -1;
	}
	unlink(ncd_ctl.path);
	close(ncd_ctl.listen_fd);
	ncd_ctl.listen_fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (ncd_ctl.listen_fd < 0 || bind(ncd_ctl.listen_fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
	    chown(ncd_ctl.path, (uid_t)d->cfg.socket_uid, (gid_t)d->cfg.socket_gid) != 0 ||
	    chmod(ncd_ctl.path, d->cfg.socket_mode) != 0 || listen(ncd_ctl.listen_fd, 16) != 0) {
		NCD_LOG(ERR, "control socket %s: %s", ncd_ctl.path, strerror(errno));
		return -1;
	}
	ncd_ctl.epoll_fd = epoll_create1(EPOLL_CLOEXEC);
	nev.data.ptr = &ncd_ctl.nh_tag;
	if (ncd_ctl.epoll_fd < 0 || epoll_ctl(ncd_ctl.epoll_fd, EPOLL_CTL_ADD, ncd_ctl.listen_fd, &ev) != 0 ||
	    epoll_ctl(ncd_ctl.epoll_fd, EPOLL_CTL_ADD, d->nh_efd, &nev) != 0 ||
	    (ncd_nh_events_fd() >= 0 &&
	     epoll_ctl(ncd_ctl.epoll_fd, EPOLL_CTL_ADD, ncd_nh_events_fd(), &nev) != 0)) {
		NCD_LOG(ERR, "epoll for the control socket: %s", strerror(errno));
		return -1;
	}
	return 0;
}

void
ncd_control_poll(struct ncd *d, int timeout_ms)
{
	struct epoll_event evs[16];
	int n = epoll_wait(ncd_ctl.epoll_fd, evs, 16, timeout_ms);

	/* Telemetry reads the channels and clients from its own thread. */
	pthread_mutex_lock(&d->lock);
	if (d->reload) {
		d->reload = 0;
		ncd_notify("RELOADING=1");
		ncd_reload(d, NULL, 0);
		ncd_notify("READY=1");
	}
	/* Clients' IP packets waiting for a next hop: on a signal, and at least every poll. */
	ncd_nh_run(d);
	ncd_nat_expire(d, false);
	ncd_ports_watch(d);
	ctl_reclaim_pending(d);
	/* The classifier's idle call: deferred nodes back, its snapshot kept current. */
	nc_trie_reclaim(d->trie, 0);
	expire_handshakes(d);
	ncd_rates_tick(d);
	ncd_capture_reap(d);
	ncd_log_notes();
	ncd_log_flush_suppressed();
	for (int i = 0; i < n; i++) {
		if (evs[i].data.ptr == NULL)
			accept_clients(d);
		else if (evs[i].data.ptr == &ncd_ctl.nh_tag)
			continue;
		else if (((struct ncd_conn *)evs[i].data.ptr)->fd >= 0)
			client_readable(d, evs[i].data.ptr);
	}
	pthread_mutex_unlock(&d->lock);
}

void
ncd_control_run(struct ncd *d)
{
	/* Every 100 ms at least; more often while packets wait for a neighbour. */
	while (!d->stop)
		ncd_control_poll(d, ncd_nh_wait_ms() >= 0 ? ncd_nh_wait_ms() : 100);
}

void
ncd_control_close(struct ncd *d)
{
	static const char why[] = "the daemon is stopping";

	/*
	 * Every client of protocol 5 hears that the daemon stops before anything
	 * of its is taken down: a ring relabelled after this is the stop, not an
	 * operator's destroy (ESHUTDOWN, not ESTALE).
	 */
	for (unsigned int i = 0; i < NCD_MAX_CONNECTIONS; i++) {
		struct ncd_conn *c = &ncd_ctl.conns[i];

		if (c->fd >= 0 && c->hello && c->version >= 5)
			ctl_reply(c, NULL, -ESHUTDOWN, why, sizeof(why) - 1);
	}
	for (unsigned int i = 0; i < NCD_MAX_CONNECTIONS; i++)
		if (ncd_ctl.conns[i].fd >= 0)
			client_close(d, &ncd_ctl.conns[i]);
	if (ncd_ctl.epoll_fd >= 0)
		close(ncd_ctl.epoll_fd);
	if (ncd_ctl.listen_fd >= 0) {
		close(ncd_ctl.listen_fd);
		unlink(ncd_ctl.path);
	}
	ncd_ctl.epoll_fd = ncd_ctl.listen_fd = -1;
	/* Pending connections (zero-copy clients still running) keep theirs until now. */
	for (unsigned int i = 0; i < NCD_MAX_CONNECTIONS; i++)
		ctl_conn_arrays_free(&ncd_ctl.conns[i]);
	ncd_rates_free();
	for (unsigned int i = 0; i < NCD_MAX_CLIENTS; i++) {
		ncd_ring_drain(d, d->free_rings[i], false);
		rte_ring_free(d->free_rings[i]);
		d->free_rings[i] = NULL;
		/* Not from the tail: a client that outlives the daemon may still be taking. */
		ncd_ring_drain(d, d->alloc_rings[i], false);
		rte_ring_free(d->alloc_rings[i]);
		d->alloc_rings[i] = NULL;
	}
}

const struct ncd_channel_hooks ncd_control_channel_hooks = {
	.hold_rings = ncd_control_hold_rings,
};
