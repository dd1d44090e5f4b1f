/* SPDX-License-Identifier: BSD-3-Clause */
#define _GNU_SOURCE /* struct ucred, accept4 */
/*
 * The control socket (include/nc_proto.h): a Unix SOCK_SEQPACKET socket
 * served by the main lcore. Every request is checked before it is acted on:
 * a bad one gets an error reply and counts against its connection, which is
 * closed after NC_CTL_MAX_ERRORS; no request can affect another connection.
 * Channels a connection created are destroyed when it closes, however it
 * closes (exit, crash, kill -9: the kernel closes the socket).
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

#define NCD_MAX_CLIENTS NC_MAX_CLIENTS
#define FREE_RING_MAX 16384u           /* entries of a client's free ring, at most */
/* Connections and client slots only root may take: others never lock the operator out. */
#define ROOT_RESERVE 4
#define VIEW_CHANNEL_NAMES 64          /* names of a connection's channels that show clients lists */

/* control.limits, in the order of the STATS view's limit_refusals. */
enum { LIM_CONNECTIONS, LIM_CHANNELS, LIM_MEMORY, LIM_EVENTFDS, LIM_MBUFS, LIM_N };
static const char *const lim_names[LIM_N] = { "connections", "channels", "memory_mb", "eventfds",
					      "mbufs" };

struct ncd_conn {
	int fd;                        /* -1: closed (free unless pending) */
	int slot;                      /* its client slot from HELLO on, else -1 */
	bool pending;                  /* closed, but its process still runs: mbufs not yet back */
	uint64_t pending_since;        /* ms, from the TSC */
	bool hello;
	uint32_t hello_flags;          /* NC_HELLO_F_* of its HELLO */
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

/*
 * Room for n more elements of size bytes in a connection's array of used
 * of cap, which doubles as it grows. @return 0, or -ENOMEM
 */
static int
conn_room(void *arrp, unsigned int *cap, unsigned int used, unsigned int n, size_t size)
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
static void
conn_arrays_free(struct ncd_conn *c)
{
	free(c->channels);
	free(c->attached);
	free(c->held);
	c->channels = NULL;
	c->attached = NULL;
	c->held = NULL;
	c->cap_channels = c->cap_attached = c->cap_held = 0;
}

static struct {
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
} ctl = { .listen_fd = -1, .epoll_fd = -1 };

void
ncd_client_cred(int slot, pid_t *pid, uid_t *uid)
{
	const struct ncd_conn *c = slot >= 0 && slot < NCD_MAX_CLIENTS ? ctl.slot_conn[slot] : NULL;

	*pid = c != NULL ? c->cred.pid : 0;
	*uid = c != NULL ? c->cred.uid : 0;
}

json_t *
ncd_view_control(void)
{
	unsigned int open = 0, clients = 0;
	json_t *lim = json_object();

	for (unsigned int i = 0; i < NCD_MAX_CONNECTIONS; i++)
		open += ctl.conns[i].fd >= 0;
	for (unsigned int i = 0; i < NCD_MAX_CLIENTS; i++)
		clients += ctl.slot_conn[i] != NULL;
	for (int k = 0; k < LIM_N; k++)
		json_object_set_new(lim, lim_names[k], json_integer((json_int_t)ctl.limit_refusals[k]));
	return json_pack("{s:I, s:I, s:I, s:I, s:i, s:i, s:i, s:i, s:o, s:I, s:I}", "bad_messages",
			 (json_int_t)ctl.bad_messages, "accepted", (json_int_t)ctl.accepted,
			 "refused", (json_int_t)ctl.refused, "hello_timeouts",
			 (json_int_t)ctl.hello_timeouts, "connections", (int)open,
			 "max_connections", NCD_MAX_CONNECTIONS, "clients", (int)clients,
			 "max_clients", NCD_MAX_CLIENTS, "limit_refusals", lim,
			 "reserve_refusals", (json_int_t)ctl.reserve_refusals, "shadow_refusals",
			 (json_int_t)ctl.shadow_refusals);
}

/* root, or the daemon's own user: the operator, whom no limit or reserve holds back. */
static bool
privileged(const struct ucred *cr)
{
	return cr->uid == 0 || cr->uid == geteuid();
}

/*
 * The first control.allow entry that names the user and has the bool at
 * offset `flag` of struct ncd_allow_conf set (zero_copy, preempt, view_all,
 * has_limits), or NULL.
 */
static const struct ncd_allow_conf *
allow_entry(const struct ncd *d, const struct ucred *cr, size_t flag)
{
	for (unsigned int i = 0; i < d->cfg.nallow; i++) {
		const struct ncd_allow_conf *a = &d->cfg.allow[i];

		if ((a->uid < 0 || a->uid == cr->uid) && (a->gid < 0 || a->gid == cr->gid) &&
		    *(const bool *)((const char *)a + flag))
			return a;
	}
	return NULL;
}

#define ALLOW_ENTRY(d, cr, field) allow_entry(d, cr, offsetof(struct ncd_allow_conf, field))

/* The limits a user is held to: those of its first allow entry with limits, else control.limits;
 * NULL for the operator. */
static const struct ncd_limits *
user_limits(const struct ncd *d, const struct ucred *cr)
{
	const struct ncd_allow_conf *a = ALLOW_ENTRY(d, cr, has_limits);

	if (privileged(cr))
		return NULL;
	return a != NULL ? &a->limits : &d->cfg.limits;
}

static uint64_t
limit_value(const struct ncd_limits *l, int k)
{
	switch (k) {
	case LIM_CONNECTIONS: return l->connections;
	case LIM_CHANNELS: return l->channels;
	case LIM_MEMORY: return l->memory;
	case LIM_MBUFS: return l->mbufs;
	default: return l->eventfds;
	}
}

/* The mbufs a ring of size entries can hold: no more than the pool has. */
static uint64_t
ring_mbufs(const struct ncd *d, uint32_t size)
{
	return RTE_MIN((uint64_t)size, (uint64_t)d->cfg.mbufs);
}

/*
 * The most mbufs a connection can make the daemon hold: a zero-copy
 * client's quota (what it holds itself, receiving and sending) and what
 * its deliver channels' rings can hold, its own and the static ones it
 * consumes. An isolated client holds none (the daemon copies and frees),
 * nor may a control connection own a ring.
 */
static uint64_t
conn_mbufs(const struct ncd *d, const struct ncd_conn *c)
{
	uint64_t n = 0;

	if (c->fd < 0 || !c->hello || !(c->hello_flags & NC_HELLO_F_ZEROCOPY))
		return 0;
	n += d->clients[c->slot].quota;
	for (unsigned int k = 0; k < c->nchannels; k++) {
		const struct ncd_channel *ch = d->channels[c->channels[k]];

		if (ch != NULL && ch->rx != NULL)
			n += ring_mbufs(d, ch->dir->ring_size);
	}
	for (unsigned int k = 0; k < c->nattached; k++) {
		const struct ncd_channel *ch = d->channels[c->attached[k].id];

		if (ch != NULL && ch->rx != NULL)
			n += ring_mbufs(d, ch->dir->ring_size);
	}
	return n;
}

/*
 * Whether the users other than root, all together, may be able to hold
 * `more` mbufs on top of what they can: at most three quarters of the pool,
 * so that the last quarter is always the kernel path's and root's, whatever
 * the users do. If not, the refusal is counted and its reason goes to why.
 */
static bool
within_pool_reserve(const struct ncd *d, const struct ucred *cr, uint64_t more, char *why,
		    size_t len)
{
	uint64_t total = more, cap = d->cfg.mbufs - d->cfg.mbufs / 4;

	if (privileged(cr) || more == 0)
		return true;
	for (unsigned int i = 0; i < NCD_MAX_CONNECTIONS; i++)
		if (!privileged(&ctl.conns[i].cred))
			total += conn_mbufs(d, &ctl.conns[i]);
	if (total <= cap)
		return true;
	ctl.reserve_refusals++;
	snprintf(why, len, "mempool: users would be able to hold %" PRIu64 " of its %u mbufs; the "
		 "last quarter is the kernel's and root's", total, d->cfg.mbufs);
	NCD_LOG_USER(INFO, cr->uid, "control: pid %d refused: %s", (int)cr->pid, why);
	return false;
}

/* What a user holds, over all of its open connections, in the units of its limits. */
static void
user_usage(const struct ncd *d, uid_t uid, uint64_t use[LIM_N])
{
	memset(use, 0, LIM_N * sizeof(use[0]));
	for (unsigned int i = 0; i < NCD_MAX_CONNECTIONS; i++) {
		const struct ncd_conn *c = &ctl.conns[i];

		if (c->fd < 0 || c->cred.uid != uid)
			continue;
		use[LIM_CONNECTIONS]++;
		use[LIM_CHANNELS] += c->nchannels;
		use[LIM_MBUFS] += conn_mbufs(d, c);
		if (c->slot >= 0 && d->regions[c->slot] != NULL)
			use[LIM_MEMORY] += d->regions[c->slot]->size + d->regions[c->slot]->csize;
		for (unsigned int k = 0; k < c->nchannels; k++) {
			const struct ncd_channel *ch = d->channels[c->channels[k]];

			if (ch == NULL)
				continue;
			use[LIM_MEMORY] += ncd_ring_memsize(ch->dir->ring_size) *
					   ((ch->rx != NULL) + (ch->tx != NULL));
			use[LIM_EVENTFDS] += ch->efd >= 0;
		}
	}
}

/*
 * Whether the user cr may hold `more` of limit k on top of what it holds. If
 * not, the refusal is counted, logged, and its reason, naming the limit, goes
 * to why.
 */
static bool
within_limit(const struct ncd *d, const struct ucred *cr, int k, uint64_t more, char *why,
	     size_t len)
{
	const struct ncd_limits *l = user_limits(d, cr);
	uint64_t use[LIM_N], max;

	if (l == NULL)
		return true;
	max = limit_value(l, k);
	user_usage(d, cr->uid, use);
	if (use[k] + more <= max)
		return true;
	ctl.limit_refusals[k]++;
	if (k == LIM_MEMORY)
		snprintf(why, len, "control.limits.memory_mb: uid %u would hold %" PRIu64 " MiB, "
			 "over its %" PRIu64, cr->uid, (use[k] + more + (1 << 20) - 1) >> 20, max >> 20);
	else
		snprintf(why, len, "control.limits.%s: uid %u would hold %" PRIu64 ", over its %"
			 PRIu64, lim_names[k], cr->uid, use[k] + more, max);
	NCD_LOG_USER(INFO, cr->uid, "control: pid %d refused: %s", (int)cr->pid, why);
	return false;
}

/*
 * Whether c's user may be able to hold `more` mbufs on top of what it can:
 * 0, or -EDQUOT (its control.limits.mbufs) or -ENOSPC (the pool's last
 * quarter), the reason in why.
 */
static int
may_hold_mbufs(const struct ncd *d, const struct ncd_conn *c, uint64_t more, char *why,
	       size_t len)
{
	if (!within_limit(d, &c->cred, LIM_MBUFS, more, why, len))
		return -EDQUOT;
	if (!within_pool_reserve(d, &c->cred, more, why, len))
		return -ENOSPC;
	return 0;
}

/* Whether the user of c may see everything: root, or an allow entry's "view": "all". */
static bool
sees_all(const struct ncd *d, const struct ncd_conn *c)
{
	return c == NULL || privileged(&c->cred) || ALLOW_ENTRY(d, &c->cred, view_all) != NULL;
}

static bool allowed(const struct ncd *d, const struct ucred *cr, const struct nc_trie_rule *r);

/*
 * A static channel's "attach": may this peer attach to it? Root may; other
 * users only if the channel names their uid or gid (SO_PEERCRED's, the
 * process's effective ones), whatever control.allow lets them claim.
 */
static bool
may_attach(const struct ncd_channel *ch, const struct ucred *cr)
{
	if (privileged(cr))
		return true;
	for (unsigned int k = 0; k < ch->nattach; k++)
		if ((ch->attach[k].uid < 0 || ch->attach[k].uid == cr->uid) &&
		    (ch->attach[k].gid < 0 || ch->attach[k].gid == cr->gid))
			return true;
	return false;
}

bool
ncd_conn_sees(const struct ncd *d, const struct ncd_conn *c, const struct ncd_channel *ch)
{
	const struct ncd_conn *owner;

	if (sees_all(d, c))
		return true;
	if (ch->owner < 0)
		return may_attach(ch, &c->cred);
	owner = ch->owner < NCD_MAX_CLIENTS ? ctl.slot_conn[ch->owner] : NULL;
	return owner != NULL && owner->cred.uid == c->cred.uid;
}

/* Who owns a channel, for a message: the user of the client that made it, or the operator. */
static void
owner_name(const struct ncd_channel *ch, char *buf, size_t len)
{
	const struct ncd_conn *o = ch->owner >= 0 && ch->owner < NCD_MAX_CLIENTS ?
				   ctl.slot_conn[ch->owner] : NULL;

	if (o != NULL)
		snprintf(buf, len, "uid %u (pid %d)", o->cred.uid, (int)o->cred.pid);
	else
		snprintf(buf, len, "the operator");
}

/* Whether the user of c made channel ch (a static channel is the operator's). */
static bool
same_user(const struct ncd_conn *c, const struct ncd_channel *ch)
{
	const struct ncd_conn *o = ch->owner >= 0 && ch->owner < NCD_MAX_CLIENTS ?
				   ctl.slot_conn[ch->owner] : NULL;

	return o != NULL && o->cred.uid == c->cred.uid;
}

void
ncd_log_shadowing(const struct ncd *d, uint32_t id, const char *who)
{
	const struct ncd_channel *ch = d->channels[id];
	int32_t k;

	for (k = ncd_channel_shadowed(d, &ch->rule, 0); k >= 0;
	     k = ncd_channel_shadowed(d, &ch->rule, (uint32_t)k + 1)) {
		const struct ncd_channel *o = d->channels[k];
		char owner[64];

		if ((uint32_t)k == id || o->owner == ch->owner)
			continue;
		owner_name(o, owner, sizeof(owner));
		NCD_LOG(NOTICE, "control: channel %s of %s takes flows of channel %s of %s "
			"(priority %u over %u)", ch->name, who, o->name, owner, ch->rule.priority,
			o->rule.priority);
	}
}

/* control.allow: may this user's channels take flows of others' (an entry's "preempt")? */
static bool
may_preempt(const struct ncd *d, const struct ucred *cr)
{
	return privileged(cr) || ALLOW_ENTRY(d, cr, preempt) != NULL;
}

/* A user's use against its limits, as show clients gives it. */
static json_t *
user_view(const struct ncd *d, const struct ucred *cr)
{
	const struct ncd_limits *l = user_limits(d, cr);
	json_t *o = json_object(), *lim = l != NULL ? json_object() : json_null();
	uint64_t use[LIM_N];

	user_usage(d, cr->uid, use);
	use[LIM_MEMORY] >>= 20;
	for (int k = 0; k < LIM_N; k++) {
		json_object_set_new(o, lim_names[k], json_integer((json_int_t)use[k]));
		if (l != NULL)
			json_object_set_new(lim, lim_names[k], json_integer((json_int_t)(
				k == LIM_MEMORY ? l->memory >> 20 : limit_value(l, k))));
	}
	json_object_set_new(o, "limits", lim);
	return o;
}

static const char *
conn_mode(const struct ncd_conn *c)
{
	if (!c->hello)
		return "none";
	return c->hello_flags & NC_HELLO_F_ZEROCOPY ? "zero-copy" :
	       c->hello_flags & NC_HELLO_F_CONTROL ? "control" : "isolated";
}

json_t *
ncd_view_clients(const struct ncd *d, const struct ncd_conn *viewer)
{
	bool all = sees_all(d, viewer);
	json_t *a = json_array();

	for (unsigned int i = 0; i < NCD_MAX_CONNECTIONS; i++) {
		const struct ncd_conn *c = &ctl.conns[i];
		static const struct nc_client_entry none;
		const struct nc_client_entry *e = c->slot >= 0 ? &d->clients[c->slot] : &none;
		const struct ncd_region *rg = c->slot >= 0 ? d->regions[c->slot] : NULL;
		json_t *chs, *o;

		/* A user sees its own connections only. */
		if (c->fd < 0 || (!all && c->cred.uid != viewer->cred.uid))
			continue;
		/* The first names only: a one-ring client may have 100,000 (channel_count). */
		chs = json_array();
		for (unsigned int k = 0; k < c->nchannels && k < VIEW_CHANNEL_NAMES; k++)
			json_array_append_new(chs, json_string(d->channels[c->channels[k]]->name));
		o = json_pack("{s:i, s:i, s:i, s:i, s:b, s:s, s:i, s:o, s:I, s:I, s:I, s:i}",
			      "slot", c->slot, "pid", (int)c->cred.pid, "uid", (int)c->cred.uid,
			      "gid", (int)c->cred.gid, "hello", c->hello, "mode", conn_mode(c),
			      "lcore", (int)c->lcore_id, "channels", chs,
			      "mbufs_held", (json_int_t)e->held, "mbuf_quota", (json_int_t)e->quota,
			      "quota_stalls", (json_int_t)e->quota_stalls, "bad_messages",
			      (int)c->errors);
		if (rg != NULL) {
			json_t *r = json_pack("{s:I, s:I, s:b, s:i, s:i, s:i}", "size",
					      (json_int_t)(rg->size + rg->csize), "client_size",
					      (json_int_t)rg->csize, "hugepages", rg->hugepages,
					      "buffers", (int)rg->g.rx_bufs,
					      "buffers_held", (int)(rg->g.rx_bufs - rg->b.nfree),
					      "buffer_size", (int)rg->g.buf_size);

#define X(f) json_object_set_new(r, #f, json_integer((json_int_t)rg->st.f));
			NCD_REGION_FIELDS(X)
#undef X
			json_object_set_new(r, "rx_rings", json_integer(rg->nrx));
			json_object_set_new(o, "region", r);
		}
		json_object_set_new(o, "channel_count", json_integer(c->nchannels));
		/* What it may make the daemon hold: its quota and its channels' rings. */
		json_object_set_new(o, "mbufs_bound", json_integer((json_int_t)conn_mbufs(d, c)));
		/* Its packets the daemon keeps until their next hop resolves (32 at most). */
		json_object_set_new(o, "next_hop_waiting",
				    json_integer(c->slot >= 0 ? ncd_nh_waiting(c->slot) : 0));
		json_object_set_new(o, "attached_count", json_integer(c->nattached));
		json_object_set_new(o, "user", user_view(d, &c->cred));
		json_array_append_new(a, o);
	}
	return a;
}

/* Whether a process has exited (or is a zombie): it will never touch shared memory again. */
static bool
process_gone(pid_t pid)
{
	char path[64], buf[256], *p;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (f == NULL)
		return true;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	p = strrchr(buf, ')');
	return p != NULL && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X');
}

struct reclaim {
	int off;
	uint32_t owner;
	unsigned int n;
};

static void
reclaim_one(struct rte_mempool *mp __rte_unused, void *arg, void *obj, unsigned int idx __rte_unused)
{
	struct reclaim *r = arg;
	struct rte_mbuf *m = obj;
	uint32_t *owner = RTE_MBUF_DYNFIELD(m, r->off, uint32_t *);

	if (__atomic_load_n(owner, __ATOMIC_RELAXED) == r->owner) {
		*owner = 0;
		rte_pktmbuf_free(m);
		r->n++;
	}
}

/*
 * Workers stop serving a slot's free and alloc rings, and what is on them
 * goes back now. After this, an mbuf of the slot's client is on none of the
 * daemon's rings but marked, or in the pool.
 */
static void
slot_rings_stop(struct ncd *d, unsigned int slot)
{
	if (!(__atomic_load_n(&d->slot_active, __ATOMIC_RELAXED) & (UINT64_C(1) << slot)))
		return;
	__atomic_fetch_and(&d->slot_active, ~(UINT64_C(1) << slot), __ATOMIC_RELEASE);
	/* No worker is still in the middle of draining it after this. */
	rte_rcu_qsbr_synchronize(d->qsbr, RTE_QSBR_THRID_INVALID);
	/* An isolated client's region: unmapped, and that is all (its channels went before). */
	if (d->regions[slot] != NULL) {
		ncd_region_free(d->regions[slot]);
		__atomic_store_n(&d->regions[slot], NULL, __ATOMIC_RELAXED);
	}
	ncd_ring_drain(d, d->free_rings[slot], false);
	rte_ring_reset(d->free_rings[slot]);
	/* Its one consumer is gone or done, maybe killed in the middle of a dequeue. */
	ncd_ring_drain(d, d->alloc_rings[slot], true);
	rte_ring_reset(d->alloc_rings[slot]);
}

/*
 * A dead client's mbufs: those it held (marked with its owner id) and those
 * in its lcore's mempool cache. Only once it is gone: a live process still
 * owns its cache, and one killed with SIGKILL closes its socket a moment
 * before it is gone.
 */
static void
reclaim_mbufs(struct ncd *d, struct ncd_conn *c)
{
	unsigned int slot = (unsigned int)c->slot;
	struct nc_client_entry *e = &d->clients[slot];
	struct rte_mempool_cache *cache = rte_mempool_default_cache(d->pool, c->lcore_id);
	struct reclaim r = { .off = d->owner_off, .owner = slot + 1 };
	unsigned int cached = 0;

	/* Its rings first: what is on them may still be marked, and must be freed once. */
	slot_rings_stop(d, slot);
	rte_mempool_obj_iter(d->pool, reclaim_one, &r);
	if (cache != NULL) {
		cached = cache->len;
		rte_mempool_cache_flush(cache, d->pool);
	}
	d->mbufs_reclaimed += r.n;
	d->cache_flushed += cached;
	if (r.n > 0 || cached > 0)
		NCD_LOG_USER(INFO, c->cred.uid, "control: pid %d died holding %u mbufs (%" PRIu64
			     " counted) and %u in its lcore %u cache: all back in the pool",
			     (int)c->cred.pid, r.n, e->held, cached, c->lcore_id);
}

int
ncd_control_hold_rings(struct ncd *d, unsigned int slot, struct rte_ring *rx, struct rte_ring *tx)
{
	struct ncd_conn *c = slot < NCD_MAX_CLIENTS ? ctl.slot_conn[slot] : NULL;

	(void)d;
	if (c == NULL || c->fd < 0 ||
	    conn_room(&c->held, &c->cap_held, c->nheld, 2, sizeof(c->held[0])) != 0)
		return -1;
	if (rx != NULL)
		c->held[c->nheld++] = rx;
	if (tx != NULL)
		c->held[c->nheld++] = tx;
	return 0;
}

/*
 * The connection's entry is free again, and its slot if it had one: its
 * client entry, its owner id and its lcore id may be reused.
 */
static void
slot_free(struct ncd *d, struct ncd_conn *c)
{
	/* Its consumer is gone: what the held rings still hold goes back, from their tail. */
	for (unsigned int i = 0; i < c->nheld; i++) {
		ncd_ring_drain(d, c->held[i], true);
		rte_free(c->held[i]);
	}
	c->nheld = 0;
	if (c->slot >= 0) {
		slot_rings_stop(d, (unsigned int)c->slot);
		memset(&d->clients[c->slot], 0, sizeof(d->clients[0]));
		ctl.slot_conn[c->slot] = NULL;
	}
	conn_arrays_free(c);
	memset(c, 0, sizeof(*c));
	c->fd = -1;
	c->slot = -1;
}

/*
 * Closed connections whose process was still running: once it is gone, its
 * mbufs come back. One that stays alive holding none disconnected cleanly
 * (nc_disconnect() flushed its cache): its slot is freed after 10 s.
 */
static void
reclaim_pending(struct ncd *d)
{
	for (unsigned int i = 0; i < NCD_MAX_CONNECTIONS; i++) {
		struct ncd_conn *c = &ctl.conns[i];

		if (!c->pending)
			continue;
		if (process_gone(c->cred.pid)) {
			reclaim_mbufs(d, c);
			slot_free(d, c);
		} else if (d->clients[c->slot].held == 0 && ncd_now_ms() - c->pending_since > 10000) {
			slot_free(d, c);
		}
	}
}

/*
 * A client lets go of its k-th attached static channel, if that is still the
 * channel it attached to (it may have been destroyed, and its id reused,
 * meanwhile: an isolated client's region ring then went with it).
 */
static void
detach(struct ncd *d, struct ncd_conn *c, unsigned int k)
{
	struct ncd_channel *ch = d->channels[c->attached[k].id];

	if (ch != NULL && ch->dir->generation == c->attached[k].gen && ch->shared) {
		ncd_channel_share_leave(d, ch, c->slot);
	} else if (ch != NULL && ch->dir->generation == c->attached[k].gen &&
		   ch->consumer == c->slot + 1) {
		if (ch->region != NULL)
			ncd_channel_region_detach(d, ch);
		ch->consumer = 0;
	}
	c->attached[k] = c->attached[--c->nattached];
}

static void client_close(struct ncd *d, struct ncd_conn *c);

/*
 * Connections that have not said HELLO in control.hello_timeout_ms: closed
 * and counted, so that idle connections cannot hold every slot.
 */
static void
expire_handshakes(struct ncd *d)
{
	uint64_t now = ncd_now_ms();

	for (unsigned int i = 0; i < NCD_MAX_CONNECTIONS; i++) {
		struct ncd_conn *c = &ctl.conns[i];

		if (c->fd < 0 || c->hello || now - c->accepted_ms < d->cfg.hello_timeout_ms)
			continue;
		NCD_LOG_USER(NOTICE, c->cred.uid, "control: pid %d uid %u said no HELLO in %u ms: "
			     "closed", (int)c->cred.pid, c->cred.uid, d->cfg.hello_timeout_ms);
		ctl.hello_timeouts++;
		client_close(d, c);
	}
}

static void
client_close(struct ncd *d, struct ncd_conn *c)
{
	/* It no longer runs (it closed, or was killed): its rings are drained from the tail. */
	for (unsigned int i = 0; i < c->nchannels; i++) {
		if (d->channels[c->channels[i]] != NULL)
			d->channels[c->channels[i]]->consumer_gone = true;
		ncd_channel_del(d, c->channels[i]);
	}
	while (c->nattached > 0)
		detach(d, c, 0);
	NCD_LOG_USER(INFO, c->cred.uid, "control: pid %d uid %u closed, %u channels removed",
		     (int)c->cred.pid, c->cred.uid, c->nchannels);
	c->nchannels = 0;
	epoll_ctl(ctl.epoll_fd, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	c->fd = -1;
	if (!c->hello || !(c->hello_flags & NC_HELLO_F_ZEROCOPY)) {
		/* Nothing of the daemon's memory was the client's: done. */
		slot_free(d, c);
	} else if (process_gone(c->cred.pid)) {
		reclaim_mbufs(d, c);
		slot_free(d, c);
	} else {
		/* The slot waits: its owner id still marks the mbufs the process holds. */
		c->pending = true;
		c->pending_since = ncd_now_ms();
		__atomic_store_n(&d->clients[c->slot].live, 0, __ATOMIC_RELEASE);
	}
}

/* A reply, with nfds file descriptors attached (SCM_RIGHTS, in one message). */
static int
reply_fds(struct ncd_conn *c, const struct nc_ctl_req *req, int32_t status, const void *body,
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
static int
reply_fd(struct ncd_conn *c, const struct nc_ctl_req *req, int32_t status, const void *body,
	 size_t len, int fd)
{
	return reply_fds(c, req, status, body, len, &fd, fd >= 0);
}

static int
reply(struct ncd_conn *c, const struct nc_ctl_req *req, int32_t status, const void *body,
      size_t len)
{
	return reply_fd(c, req, status, body, len, -1);
}

int
ncd_ctl_reply(struct ncd_conn *c, const struct nc_ctl_req *req, int32_t status, const void *body,
	      size_t len)
{
	return reply_fd(c, req, status, body, len, -1);
}

int
ncd_ctl_reply_fd(struct ncd_conn *c, const struct nc_ctl_req *req, int32_t status,
		 const void *body, size_t len, int fd)
{
	return reply_fd(c, req, status, body, len, fd);
}

int
ncd_ctl_reply_json(struct ncd_conn *c, const struct nc_ctl_req *req, json_t *v)
{
	char *buf = v != NULL ? json_dumps(v, 0) : NULL;
	size_t len = buf != NULL ? strlen(buf) : 0;
	int ret;

	json_decref(v);
	if (buf == NULL)
		return reply(c, req, -ENOMEM, NULL, 0);
	ret = len + sizeof(struct nc_ctl_rep) > NC_CTL_MAX_MSG ? reply(c, req, -E2BIG, NULL, 0) :
								    reply(c, req, 0, buf, len);
	free(buf);
	return ret;
}

bool
ncd_conn_privileged(const struct ncd_conn *c)
{
	return privileged(&c->cred);
}

uint32_t
ncd_conn_ns(const struct ncd_conn *c)
{
	return c == NULL || privileged(&c->cred) ? NCD_NS_ROOT : (uint32_t)c->cred.uid + 1;
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
	if (ctl.handlers[type] != NULL)
		return -EEXIST;
	ctl.handlers[type] = fn;
	return 0;
}

/* control.allow: may this peer claim a rule on these destination ports? */
static bool
allowed(const struct ncd *d, const struct ucred *cr, const struct nc_trie_rule *r)
{
	uint16_t lo, hi;

	nc_trie_port_range(&r->dport, &lo, &hi);
	for (unsigned int i = 0; i < d->cfg.nallow; i++) {
		const struct ncd_allow_conf *a = &d->cfg.allow[i];

		if ((a->uid >= 0 && a->uid != cr->uid) || (a->gid >= 0 && a->gid != cr->gid))
			continue;
		if (lo >= a->port_lo && hi <= a->port_hi)
			return true;
	}
	return false;
}

static void
channel_info(const struct ncd *d, const struct ncd_channel *ch, struct nc_ctl_channel *info)
{
	memset(info, 0, sizeof(*info));
	info->id = ch->id;
	info->action = ch->action;
	info->generation = ch->dir->generation;
	snprintf(info->name, sizeof(info->name), "%s", ch->name);
	snprintf(info->rx_ring, sizeof(info->rx_ring), "%s", ch->dir->rx_ring);
	snprintf(info->tx_ring, sizeof(info->tx_ring), "%s", ch->dir->tx_ring);
	if (ch->region != NULL) {
		info->flags |= NC_CHANNEL_F_REGION;
		info->region_ring = (uint32_t)ch->region_ring;
	}
	if (ch->can_tx) {
		info->flags |= NC_CHANNEL_F_TX;
		memcpy(info->tx_mac, d->ports[ch->port].mac.addr_bytes, sizeof(info->tx_mac));
		info->tx_mtu = d->cfg.ports[ch->port].mtu;
	}
}

/* ENOSPC for a client with a ring per channel and none left, with the way out. */
static int
reply_rings_full(struct ncd_conn *c, const struct nc_ctl_req *req, const struct ncd_region *rg)
{
	char why[160];
	int n = snprintf(why, sizeof(why), "its region's %u rx rings are in use, one per channel; "
			 "a client that connects with one ring for all (NC_CONNECT_ONE_RING) has no "
			 "such limit", rg->nrx);

	return reply(c, req, -ENOSPC, why, (size_t)n);
}

static int
do_create(struct ncd *d, struct ncd_conn *c, const struct nc_ctl_req *req, const void *body,
	  uint32_t len)
{
	const struct nc_ctl_create *m = body;
	struct ncd_region *rg = d->regions[c->slot];
	struct ncd_channel_conf cc;
	struct nc_ctl_channel info;
	uint32_t reserve = RTE_MIN(RTE_MAX(d->cfg.max_channels / 16, 1u), 64u);
	char why[160];
	int id, ret;

	if (ncd_ctl_decode_create(m, len, d->cfg.nports, &cc) != 0)
		return reply(c, req, -EINVAL, NULL, 0);
	/*
	 * A control connection has no region and reads no ring: a deliver
	 * channel of its own would hold every mbuf its flows bring until the
	 * connection closes, and a flood would empty the pool for everyone.
	 */
	if (cc.action == NC_ACTION_DELIVER && (c->hello_flags & NC_HELLO_F_CONTROL)) {
		int n = snprintf(why, sizeof(why), "a control connection (NC_CONNECT_CONTROL) "
				 "receives nothing, so it may not own a deliver channel: connect "
				 "as a client");

		return reply(c, req, -EINVAL, why, (size_t)n);
	}
	/* A NAT channel sends the flow on to anywhere: not for any user the allow list names. */
	if (!allowed(d, &c->cred, &cc.rule) ||
	    (cc.action == NC_ACTION_NAT && !privileged(&c->cred)))
		return reply(c, req, -EPERM, NULL, 0);
	if (conn_room(&c->channels, &c->cap_channels, c->nchannels, 1, sizeof(c->channels[0])))
		return reply(c, req, -ENOMEM, NULL, 0);
	if (!within_limit(d, &c->cred, LIM_CHANNELS, 1, why, sizeof(why)) ||
	    !within_limit(d, &c->cred, LIM_MEMORY, ncd_ring_memsize(cc.ring_size) *
			  ((cc.action == NC_ACTION_DELIVER && rg == NULL) + (cc.tx && rg == NULL)),
			  why, sizeof(why)))
		return reply(c, req, -EDQUOT, why, strlen(why));
	/* A zero-copy client's deliver channel: a ring whose mbufs its user answers for. */
	ret = may_hold_mbufs(d, c, cc.action == NC_ACTION_DELIVER && rg == NULL ?
			     ring_mbufs(d, cc.ring_size) : 0, why, sizeof(why));
	if (ret != 0)
		return reply(c, req, ret, why, strlen(why));
	/* Another user's flows are not to be taken (the same rule and priority is EBUSY below). */
	for (int32_t k = may_preempt(d, &c->cred) ? -1 : ncd_channel_shadowed(d, &cc.rule, 0);
	     k >= 0; k = ncd_channel_shadowed(d, &cc.rule, (uint32_t)k + 1)) {
		const struct ncd_channel *o = d->channels[k];
		char owner[64];
		int n;

		if (same_user(c, o))
			continue;
		/* Another owner's channel, named only to a user who may see it. */
		if (ncd_conn_sees(d, c, o)) {
			owner_name(o, owner, sizeof(owner));
			n = snprintf(why, sizeof(why), "it would take the flows of channel %s of %s "
				     "(priority %u, this one %u)", o->name, owner,
				     o->rule.priority, cc.rule.priority);
		} else {
			n = snprintf(why, sizeof(why), "it would take the flows of a channel of "
				     "another owner (priority %u, this one %u)", o->rule.priority,
				     cc.rule.priority);
		}
		ctl.shadow_refusals++;
		NCD_LOG_USER(INFO, c->cred.uid, "control: pid %d uid %u refused: %s",
			     (int)c->cred.pid, c->cred.uid, why);
		return reply(c, req, -EADDRINUSE, why, (size_t)n);
	}
	/* The last channels of max_channels are the operator's. */
	if (!privileged(&c->cred) &&
	    (uint32_t)rte_hash_count(d->names) + reserve >= d->cfg.max_channels) {
		int n = snprintf(why, sizeof(why), "max_channels: %d of %u in use, and the last %u "
				 "are root's", rte_hash_count(d->names), d->cfg.max_channels, reserve);

		ctl.reserve_refusals++;
		return reply(c, req, -ENOSPC, why, (size_t)n);
	}
	/* Its name in its user's namespace: a name taken there tells it nothing of others'. */
	id = ncd_channel_add(d, &cc, c->slot, ncd_conn_ns(c), rg);
	if (id == -ENOSPC && rg != NULL && !rg->one_ring)
		return reply_rings_full(c, req, rg);
	if (id < 0)
		return reply(c, req, id, NULL, 0);
	c->channels[c->nchannels++] = (uint32_t)id;
	NCD_LOG_USER(INFO, c->cred.uid, "control: pid %d created channel %s (%d)",
		     (int)c->cred.pid, cc.name, id);
	owner_name(d->channels[id], why, sizeof(why));
	ncd_log_shadowing(d, (uint32_t)id, why);
	channel_info(d, d->channels[id], &info);
	return reply(c, req, 0, &info, sizeof(info));
}

static int
do_destroy(struct ncd *d, struct ncd_conn *c, const struct nc_ctl_req *req, const void *body,
           uint32_t len __rte_unused)
{
	const struct nc_ctl_id *m = body;

	for (unsigned int i = 0; i < c->nchannels; i++)
		if (c->channels[i] == m->id) {
			ncd_channel_del(d, m->id);
			c->channels[i] = c->channels[--c->nchannels];
			return reply(c, req, 0, NULL, 0);
		}
	/* A static channel it attached to: let go of it, and leave it. */
	for (unsigned int i = 0; i < c->nattached; i++)
		if (c->attached[i].id == m->id) {
			detach(d, c, i);
			return reply(c, req, 0, NULL, 0);
		}
	/*
	 * Not this connection's: static channels and others' are not to be
	 * destroyed here. One the user may not see is no channel at all, so that
	 * ids cannot be probed.
	 */
	return reply(c, req, m->id < d->cfg.max_channels && d->channels[m->id] != NULL &&
		     ncd_conn_sees(d, c, d->channels[m->id]) ? -EPERM : -ENOENT, NULL, 0);
}

/*
 * One more consumer of a shared channel: isolated clients only (each gets
 * its share in its own region; a zero-copy client would take from the
 * channel's one ring). @return 0, or -errno with the reason in why ("" if none)
 */
static int
attach_shared(struct ncd *d, struct ncd_conn *c, struct ncd_channel *ch, char *why, size_t len)
{
	int ret;

	why[0] = '\0';
	if (d->regions[c->slot] == NULL) {
		snprintf(why, len, "channel %s is shared: its consumers are isolated clients, not "
			 "zero-copy ones", ch->name);
		return -EOPNOTSUPP;
	}
	ret = ncd_channel_share_join(d, ch, d->regions[c->slot], c->slot);
	/* The first consumer gets what waited for one. */
	if (ret == 0 && ch->share->n == 1)
		ncd_region_hand_over(d, ch, ch->share->c[0].rg, ch->share->c[0].ring,
				      ch->share->c[0].limit);
	if (ret == -EBUSY)
		snprintf(why, len, "channel %s is shared by %u consumers, the most it may be",
			 ch->name, NCD_SHARE_MAX);
	else if (ret == -EALREADY)
		snprintf(why, len, "this connection is a consumer of channel %s already", ch->name);
	return ret;
}

static int
do_attach(struct ncd *d, struct ncd_conn *c, const struct nc_ctl_req *req, const void *body,
          uint32_t len __rte_unused)
{
	const struct nc_ctl_name *m = body;
	struct nc_ctl_channel info;
	int32_t id;

	if (!ncd_valid_name(m->name, sizeof(m->name), true))
		return reply(c, req, -EINVAL, NULL, 0);
	id = ncd_channel_find(d, m->name);
	if (id >= 0 && d->channels[id] != NULL) {
		const struct ncd_channel *ch = d->channels[id];

		/* One it may not see is none; a client's own it may see (its user's) is not for it. */
		if (!ncd_conn_sees(d, c, ch))
			return reply(c, req, -ENOENT, NULL, 0);
		if (ch->owner >= 0 || !may_attach(ch, &c->cred))
			return reply(c, req, -EPERM, NULL, 0);
		if (c->hello_flags & NC_HELLO_F_CONTROL)
			return reply(c, req, -EOPNOTSUPP, NULL, 0);
		/*
		 * One consumer at a time: its ring has one. An isolated client's gets
		 * the packets in its region while it is attached.
		 */
		if (ch->action == NC_ACTION_DELIVER) {
			if (conn_room(&c->attached, &c->cap_attached, c->nattached, 1,
				      sizeof(c->attached[0])) != 0)
				return reply(c, req, -ENOMEM, NULL, 0);
			if (ch->shared) {
				char why[160];
				int ret = attach_shared(d, c, d->channels[id], why, sizeof(why));

				if (ret != 0)
					return reply(c, req, ret, why, strlen(why));
			} else if (ch->consumer != 0) {
				return reply(c, req, -EBUSY, NULL, 0);
			} else if (d->regions[c->slot] == NULL && ch->rx != NULL) {
				/* A zero-copy consumer drains the channel's ring: its mbufs are its. */
				char why[160];
				int ret = may_hold_mbufs(d, c, ring_mbufs(d, ch->dir->ring_size), why,
							 sizeof(why));

				if (ret != 0)
					return reply(c, req, ret, why, strlen(why));
			} else if (d->regions[c->slot] != NULL) {
				int ret = ncd_channel_region_attach(d->channels[id], d->regions[c->slot]);

				if (ret == -ENOSPC)
					return reply_rings_full(c, req, d->regions[c->slot]);
				if (ret < 0)
					return reply(c, req, ret, NULL, 0);
				ncd_region_hand_over(d, d->channels[id], d->regions[c->slot], ret,
						      ch->region_limit);
			}
			if (!ch->shared)
				d->channels[id]->consumer = c->slot + 1;
			c->attached[c->nattached].id = (uint32_t)id;
			c->attached[c->nattached++].gen = ch->dir->generation;
			NCD_LOG_USER(INFO, c->cred.uid, "control: pid %d attached to channel %s (%d)",
				     (int)c->cred.pid, ch->name, id);
		}
		channel_info(d, ch, &info);
		/* A consumer of a shared channel: its packets come on a ring of its own. */
		for (uint32_t k = 0; ch->share != NULL && k < ch->share->n; k++)
			if (ch->share->c[k].slot == c->slot) {
				info.flags |= NC_CHANNEL_F_REGION;
				info.region_ring = (uint32_t)ch->share->c[k].ring;
			}
		return reply(c, req, 0, &info, sizeof(info));
	}
	return reply(c, req, -ENOENT, NULL, 0);
}

/* The channel a request names, if the connection may use it: its own, or a static one it may
 * attach to. */
static int
usable_channel(const struct ncd *d, const struct ncd_conn *c, uint32_t id, struct ncd_channel **out)
{
	struct ncd_channel *ch = id < d->cfg.max_channels ? d->channels[id] : NULL;

	if (ch == NULL || !ncd_conn_sees(d, c, ch))
		return -ENOENT;
	if (ch->owner != c->slot && (ch->owner >= 0 || !may_attach(ch, &c->cred)))
		return -EPERM;
	*out = ch;
	return 0;
}

/* The eventfd of a one-ring client's ring (NC_HELLO_F_ONE_RING), made on the first ask. */
static int
do_client_eventfd(struct ncd *d, struct ncd_conn *c, const struct nc_ctl_req *req,
		  const void *body __rte_unused, uint32_t len __rte_unused)
{
	struct ncd_region *rg = d->regions[c->slot];
	int ret;

	if (rg == NULL || !rg->one_ring)
		return reply(c, req, -EINVAL, NULL, 0);
	ret = ncd_region_eventfd(rg);
	if (ret < 0)
		return reply(c, req, ret, NULL, 0);
	return reply_fd(c, req, 0, NULL, 0, ret);
}

static int
do_eventfd(struct ncd *d, struct ncd_conn *c, const struct nc_ctl_req *req, const void *body,
           uint32_t len __rte_unused)
{
	const struct nc_ctl_id *m = body;
	struct ncd_channel *ch;
	int ret = usable_channel(d, c, m->id, &ch);

	if (ret != 0)
		return reply(c, req, ret, NULL, 0);
	if (ch->action != NC_ACTION_DELIVER) /* nothing to wait for: drop and NAT channels */
		return reply(c, req, -EINVAL, NULL, 0);
	/* A one-ring client's channels all wake it through its ring's eventfd. */
	if (d->regions[c->slot] != NULL && d->regions[c->slot]->one_ring)
		return do_client_eventfd(d, c, req, NULL, 0);
	/* A channel of its own costs the daemon an eventfd; a static channel has one anyway. */
	if (ch->efd < 0 && ch->owner == c->slot) {
		char why[160];

		if (!within_limit(d, &c->cred, LIM_EVENTFDS, 1, why, sizeof(why)))
			return reply(c, req, -EDQUOT, why, strlen(why));
	}
	/* Each consumer of a shared channel sleeps on an eventfd of its own. */
	ret = ch->shared ? ncd_channel_share_eventfd(ch, c->slot) : ncd_channel_eventfd(ch);
	if (ret < 0)
		return reply(c, req, ret, NULL, 0);
	return reply_fd(c, req, 0, NULL, 0, ret);
}

static int
do_chan_stats(struct ncd *d, struct ncd_conn *c, const struct nc_ctl_req *req, const void *body,
              uint32_t len __rte_unused)
{
	const struct nc_ctl_id *m = body;
	struct ncd_channel *ch;
	struct nc_ctl_channel_stats st;
	struct ncd_chan_stats s;
	int ret = usable_channel(d, c, m->id, &ch);

	if (ret != 0)
		return reply(c, req, ret, NULL, 0);
	ncd_chan_stats_sum(d, m->id, &s);
#define COUNTER(name, what) .name = s.name,
#define NOW(name, what)
	st = (struct nc_ctl_channel_stats){ NC_CHANNEL_STATS(COUNTER, NOW) };
#undef COUNTER
#undef NOW
	st.rx_count = ncd_channel_rx_count(ch);
	st.tx_count = ch->tx ? rte_ring_count(ch->tx) : 0;
	return reply(c, req, 0, &st, sizeof(st));
}

/* control.allow: may this peer be a zero-copy client, a process inside the daemon's memory? */
static bool
zero_copy_allowed(const struct ncd *d, const struct ucred *cr)
{
	return cr->uid == 0 || ALLOW_ENTRY(d, cr, zero_copy) != NULL;
}

/*
 * HELLO: the connection becomes a client, with a slot of the client table:
 * an isolated one gets its region, a zero-copy one the slot's mbuf rings.
 */
static int
do_hello(struct ncd *d, struct ncd_conn *c, const struct nc_ctl_req *req, const void *body)
{
	const struct nc_ctl_hello *h = body;
	unsigned int slot = NCD_MAX_CLIENTS, nfree = 0;
	struct nc_ctl_hello_reply hr;
	struct ncd_region *rg = NULL;
	char why[160];
	int ret;

	if (c->hello || h->version != NC_CTL_VERSION) {
		reply(c, req, -EPROTO, NULL, 0);
		return -EPROTO;
	}
	/* One of zero-copy, control, or an isolated client (with one ring, or a ring per channel). */
	if ((h->flags & ~(NC_HELLO_F_ZEROCOPY | NC_HELLO_F_CONTROL | NC_HELLO_F_ONE_RING)) ||
	    h->reserved != 0 || __builtin_popcount(h->flags) > 1) {
		reply(c, req, -EINVAL, NULL, 0);
		return -EINVAL;
	}
	if ((h->flags & NC_HELLO_F_ZEROCOPY) && !zero_copy_allowed(d, &c->cred)) {
		NCD_LOG_USER(NOTICE, c->cred.uid, "control: pid %d uid %u refused zero-copy "
			     "(control.allow's zero_copy)", (int)c->cred.pid, c->cred.uid);
		reply(c, req, -EPERM, NULL, 0);
		return -EPERM;
	}
	/* A zero-copy client may hold its quota of mbufs: its user answers for them. */
	if ((h->flags & NC_HELLO_F_ZEROCOPY) &&
	    (ret = may_hold_mbufs(d, c, d->cfg.mbuf_quota, why, sizeof(why))) != 0) {
		reply(c, req, ret, why, strlen(why));
		return ret;
	}
	for (unsigned int i = NCD_MAX_CLIENTS; i-- > 0;)
		if (ctl.slot_conn[i] == NULL) {
			slot = i;
			nfree++;
		}
	/* The last free slots are the operator's. */
	if (nfree == 0 || (nfree <= ROOT_RESERVE && !privileged(&c->cred))) {
		int n = snprintf(why, sizeof(why), "the daemon is busy: %d clients",
				 NCD_MAX_CLIENTS - (int)nfree);

		ctl.reserve_refusals += nfree > 0;
		reply(c, req, -ENOSPC, why, (size_t)n);
		return -ENOSPC;
	}
	if (h->flags == 0 || h->flags == NC_HELLO_F_ONE_RING) {
		rg = ncd_region_create(d, slot, h->flags == NC_HELLO_F_ONE_RING);
		if (rg == NULL) {
			ret = -errno;
			reply(c, req, ret, NULL, 0);
			return ret;
		}
		if (!within_limit(d, &c->cred, LIM_MEMORY, rg->size + rg->csize, why, sizeof(why))) {
			ncd_region_free(rg);
			reply(c, req, -EDQUOT, why, strlen(why));
			return -EDQUOT;
		}
	}
	c->slot = (int)slot;
	ctl.slot_conn[slot] = c;
	/* Each client's EAL gets an lcore id of its own, above the daemon's. */
	c->lcore_id = RTE_MAX_LCORE / 2 + slot;
	c->hello = true;
	c->hello_flags = h->flags;
	d->clients[slot] = (struct nc_client_entry){
		.quota = d->cfg.mbuf_quota, .pid = (uint32_t)c->cred.pid, .live = 1 };
	/* Its free and alloc rings, empty, and served by a worker from now on. */
	rte_ring_reset(d->free_rings[slot]);
	rte_ring_reset(d->alloc_rings[slot]);
	__atomic_store_n(&d->regions[slot], rg, __ATOMIC_RELEASE);
	if (!(h->flags & NC_HELLO_F_CONTROL))
		__atomic_fetch_or(&d->slot_active, UINT64_C(1) << slot, __ATOMIC_RELEASE);
	memset(&hr, 0, sizeof(hr));
	hr.slot = slot;
	hr.version = NC_CTL_VERSION;
	hr.flags = h->flags;
	hr.lcore_id = c->lcore_id;
	snprintf(hr.file_prefix, sizeof(hr.file_prefix), "%s", d->file_prefix);
	snprintf(hr.mbuf_pool, sizeof(hr.mbuf_pool), "%s", d->pool->name);
	if (rg == NULL)
		return reply(c, req, 0, &hr, sizeof(hr));
	hr.region_size = rg->size;
	/* The daemon's part (read-only), then the client's. */
	ret = reply_fds(c, req, 0, &hr, sizeof(hr), (const int[]){ rg->fd, rg->cfd }, 2);
	/* The client has its own; the daemon keeps only the mappings. */
	close(rg->fd);
	close(rg->cfd);
	rg->fd = -1;
	rg->cfd = -1;
	return ret;
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
		reply(c, n >= (ssize_t)sizeof(*req) ? req : NULL, ret, NULL, 0);
		return ret;
	}
	if (!c->hello && req->type != NC_CTL_HELLO) {
		reply(c, req, -EPROTO, NULL, 0);
		return -EPROTO;
	}
	if (req->type == NC_CTL_HELLO)
		return do_hello(d, c, req, body);
	if (ctl.handlers[req->type] == NULL) {
		reply(c, req, -EOPNOTSUPP, NULL, 0);
		return -EOPNOTSUPP;
	}
	return ctl.handlers[req->type](d, c, req, body, len);
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
			ctl.bad_messages++;
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
		int fd = accept4(ctl.listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
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
			if (ctl.conns[i].fd < 0 && !ctl.conns[i].pending) {
				c = &ctl.conns[i];
				nfree++;
			}
		/* The last free entries are the operator's; a user has control.limits.connections. */
		if (nfree == 0 || (nfree <= ROOT_RESERVE && !privileged(&cred))) {
			n = snprintf(why, sizeof(why), "the daemon is busy: %d connections",
				     NCD_MAX_CONNECTIONS - (int)nfree);
			err = -ENOSPC;
			ctl.reserve_refusals += nfree > 0;
		} else if (!within_limit(d, &cred, LIM_CONNECTIONS, 1, why, sizeof(why))) {
			n = (int)strlen(why);
			err = -EDQUOT;
		}
		if (err != 0) {
			struct ncd_conn tmp = { .fd = fd };

			/* Unasked (id 0): what the client reads first, in place of its HELLO's reply. */
			reply(&tmp, NULL, err, why, (size_t)n);
			/* What it sent already, read: a close with it unread would reset the client first. */
			while (recv(fd, why, sizeof(why), MSG_DONTWAIT | MSG_TRUNC) > 0)
				;
			close(fd);
			ctl.refused++;
			continue;
		}
		memset(c, 0, sizeof(*c));
		c->fd = fd;
		c->slot = -1;
		c->cred = cred;
		c->accepted_ms = ncd_now_ms();
		ev.data.ptr = c;
		epoll_ctl(ctl.epoll_fd, EPOLL_CTL_ADD, fd, &ev);
		ctl.accepted++;
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
	char dir[sizeof(ctl.path)];

	/* The requests of a client's own channels; other modules have registered theirs. */
	ctl.handlers[NC_CTL_CHANNEL_CREATE] = do_create;
	ctl.handlers[NC_CTL_CHANNEL_ATTACH] = do_attach;
	ctl.handlers[NC_CTL_CHANNEL_DESTROY] = do_destroy;
	ctl.handlers[NC_CTL_CHANNEL_STATS] = do_chan_stats;
	ctl.handlers[NC_CTL_CHANNEL_EVENTFD] = do_eventfd;
	ctl.handlers[NC_CTL_CLIENT_EVENTFD] = do_client_eventfd;
	if (ncd_rates_init(d) != 0) {
		NCD_LOG(ERR, "rates: out of memory for %u channels' samples", d->cfg.max_channels);
		return -1;
	}
	for (unsigned int i = 0; i < NCD_MAX_CONNECTIONS; i++)
		ctl.conns[i] = (struct ncd_conn){ .fd = -1, .slot = -1 };
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
	snprintf(ctl.path, sizeof(ctl.path), "%s", d->cfg.control_socket);
	snprintf(dir, sizeof(dir), "%s", ctl.path);
	if (mkdir(dirname(dir), 0755) != 0 && errno != EEXIST) {
		NCD_LOG(ERR, "mkdir(%s): %s", dir, strerror(errno));
		return -1;
	}
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", ctl.path);
	ctl.listen_fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (ctl.listen_fd < 0) {
		NCD_LOG(ERR, "socket(AF_UNIX, SOCK_SEQPACKET): %s", strerror(errno));
		return -1;
	}
	/* A socket file nobody listens on is stale: a daemon that died left it. */
	if (connect(ctl.listen_fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
		NCD_LOG(ERR, "control socket %s: another daemon is listening on it", ctl.path);
		return -1;
	}
	unlink(ctl.path);
	close(ctl.listen_fd);
	ctl.listen_fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (ctl.listen_fd < 0 || bind(ctl.listen_fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
	    chown(ctl.path, (uid_t)d->cfg.socket_uid, (gid_t)d->cfg.socket_gid) != 0 ||
	    chmod(ctl.path, d->cfg.socket_mode) != 0 || listen(ctl.listen_fd, 16) != 0) {
		NCD_LOG(ERR, "control socket %s: %s", ctl.path, strerror(errno));
		return -1;
	}
	ctl.epoll_fd = epoll_create1(EPOLL_CLOEXEC);
	nev.data.ptr = &ctl.nh_tag;
	if (ctl.epoll_fd < 0 || epoll_ctl(ctl.epoll_fd, EPOLL_CTL_ADD, ctl.listen_fd, &ev) != 0 ||
	    epoll_ctl(ctl.epoll_fd, EPOLL_CTL_ADD, d->nh_efd, &nev) != 0 ||
	    (ncd_nh_events_fd() >= 0 &&
	     epoll_ctl(ctl.epoll_fd, EPOLL_CTL_ADD, ncd_nh_events_fd(), &nev) != 0)) {
		NCD_LOG(ERR, "epoll for the control socket: %s", strerror(errno));
		return -1;
	}
	return 0;
}

void
ncd_control_poll(struct ncd *d, int timeout_ms)
{
	struct epoll_event evs[16];
	int n = epoll_wait(ctl.epoll_fd, evs, 16, timeout_ms);

	/* Telemetry reads the channels and clients from its own thread. */
	pthread_mutex_lock(&d->lock);
	if (d->reload) {
		d->reload = 0;
		ncd_notify("RELOADING=1");
		ncd_reload(d);
		ncd_notify("READY=1");
	}
	/* Clients' IP packets waiting for a next hop: on a signal, and at least every poll. */
	ncd_nh_run(d);
	ncd_nat_expire(d, false);
	ncd_ports_watch(d);
	reclaim_pending(d);
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
		else if (evs[i].data.ptr == &ctl.nh_tag)
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
	for (unsigned int i = 0; i < NCD_MAX_CONNECTIONS; i++)
		if (ctl.conns[i].fd >= 0)
			client_close(d, &ctl.conns[i]);
	if (ctl.epoll_fd >= 0)
		close(ctl.epoll_fd);
	if (ctl.listen_fd >= 0) {
		close(ctl.listen_fd);
		unlink(ctl.path);
	}
	ctl.epoll_fd = ctl.listen_fd = -1;
	/* Pending connections (zero-copy clients still running) keep theirs until now. */
	for (unsigned int i = 0; i < NCD_MAX_CONNECTIONS; i++)
		conn_arrays_free(&ctl.conns[i]);
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
