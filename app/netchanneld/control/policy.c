/* SPDX-License-Identifier: BSD-3-Clause */
#define _GNU_SOURCE /* struct ucred, accept4 */
/*
 * What each user of the control socket may do and see: control.allow, the
 * limits it is held to (control.limits, an allow entry's), the pool's room
 * kept for root, and the views of clients that it may see.
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

const char *const lim_names[LIM_N] = { "connections", "channels", "memory_mb", "eventfds",
				       "mbufs" };

/* root, or the daemon's own user: the operator, whom no limit or reserve holds back. */
bool
ctl_privileged(const struct ucred *cr)
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

	if (ctl_privileged(cr))
		return NULL;
	return a != NULL ? &a->limits : &d->cfg.limits;
}

/*
 * A user's transmit limit as meters: srTCM, a burst of a tenth of a
 * second's (at least a packet, or a 9,216-byte frame), no excess burst.
 */
struct ncd_txm *
ctl_user_txm(struct ncd *d, const struct ucred *cr)
{
	const struct ncd_limits *l = user_limits(d, cr);
	struct ncd_meter_conf mc[NCD_TXM_MAX];
	char what[48];
	unsigned int n = 0;
	struct ncd_txm *t;

	if (l == NULL || (l->tx_pps == 0 && l->tx_bps == 0))
		return NULL;
	for (unsigned int s = 0; s < NCD_MAX_CLIENTS; s++) {
		t = d->slot_txm[s];
		if (t != NULL && t->uid == cr->uid) {
			t->refs++;
			return t;
		}
	}
	memset(mc, 0, sizeof(mc));
	if (l->tx_pps != 0)
		mc[n++] = (struct ncd_meter_conf){ .kind = NCD_METER_SRTCM, .rate = l->tx_pps,
						   .burst = RTE_MAX(l->tx_pps / 10, UINT64_C(1)) };
	if (l->tx_bps != 0)
		mc[n++] = (struct ncd_meter_conf){ .kind = NCD_METER_SRTCM, .bytes = true,
						   .rate = l->tx_bps / 8,
						   .burst = RTE_MAX(l->tx_bps / 80, UINT64_C(9216)) };
	snprintf(what, sizeof(what), "uid %u's transmit limit", cr->uid);
	t = ncd_txm_new(mc, n, what);
	if (t == NULL) {
		NCD_LOG(ERR, "control: %s: out of memory", what);
		return NULL;
	}
	t->uid = cr->uid;
	return t;
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
uint64_t
ctl_ring_mbufs(const struct ncd *d, uint32_t size)
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
			n += ctl_ring_mbufs(d, ch->dir->ring_size);
	}
	for (unsigned int k = 0; k < c->nattached; k++) {
		const struct ncd_channel *ch = d->channels[c->attached[k].id];

		if (ch != NULL && ch->rx != NULL)
			n += ctl_ring_mbufs(d, ch->dir->ring_size);
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

	if (ctl_privileged(cr) || more == 0)
		return true;
	for (unsigned int i = 0; i < NCD_MAX_CONNECTIONS; i++)
		if (!ctl_privileged(&ncd_ctl.conns[i].cred))
			total += conn_mbufs(d, &ncd_ctl.conns[i]);
	if (total <= cap)
		return true;
	ncd_ctl.reserve_refusals++;
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
		const struct ncd_conn *c = &ncd_ctl.conns[i];

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
bool
ctl_within_limit(const struct ncd *d, const struct ucred *cr, int k, uint64_t more, char *why,
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
	ncd_ctl.limit_refusals[k]++;
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
int
ctl_may_hold_mbufs(const struct ncd *d, const struct ncd_conn *c, uint64_t more, char *why,
	           size_t len)
{
	if (!ctl_within_limit(d, &c->cred, LIM_MBUFS, more, why, len))
		return -EDQUOT;
	if (!within_pool_reserve(d, &c->cred, more, why, len))
		return -ENOSPC;
	return 0;
}

/* Whether the user of c may see everything: root, or an allow entry's "view": "all". */
static bool
sees_all(const struct ncd *d, const struct ncd_conn *c)
{
	return c == NULL || ctl_privileged(&c->cred) || ALLOW_ENTRY(d, &c->cred, view_all) != NULL;
}

/*
 * A static channel's "attach": may this peer attach to it? Root may; other
 * users only if the channel names their uid or gid (SO_PEERCRED's, the
 * process's effective ones), whatever control.allow lets them claim.
 */
bool
ctl_may_attach(const struct ncd_channel *ch, const struct ucred *cr)
{
	if (ctl_privileged(cr))
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
		return ctl_may_attach(ch, &c->cred);
	owner = ch->owner < NCD_MAX_CLIENTS ? ncd_ctl.slot_conn[ch->owner] : NULL;
	return owner != NULL && owner->cred.uid == c->cred.uid;
}

/* Who owns a channel, for a message: the user of the client that made it, or the operator. */
void
ctl_owner_name(const struct ncd_channel *ch, char *buf, size_t len)
{
	const struct ncd_conn *o = ch->owner >= 0 && ch->owner < NCD_MAX_CLIENTS ?
				   ncd_ctl.slot_conn[ch->owner] : NULL;

	if (o != NULL)
		snprintf(buf, len, "uid %u (pid %d)", o->cred.uid, (int)o->cred.pid);
	else
		snprintf(buf, len, "the operator");
}

/* Whether the user of c made channel ch (a static channel is the operator's). */
bool
ctl_same_user(const struct ncd_conn *c, const struct ncd_channel *ch)
{
	const struct ncd_conn *o = ch->owner >= 0 && ch->owner < NCD_MAX_CLIENTS ?
				   ncd_ctl.slot_conn[ch->owner] : NULL;

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
		ctl_owner_name(o, owner, sizeof(owner));
		NCD_LOG(NOTICE, "control: channel %s of %s takes flows of channel %s of %s "
			"(priority %u over %u)", ch->name, who, o->name, owner, ch->rule.priority,
			o->rule.priority);
	}
}

/* control.allow: may this user's channels take flows of others' (an entry's "preempt")? */
bool
ctl_may_preempt(const struct ncd *d, const struct ucred *cr)
{
	return ctl_privileged(cr) || ALLOW_ENTRY(d, cr, preempt) != NULL;
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
		const struct ncd_conn *c = &ncd_ctl.conns[i];
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
		/* The control protocol agreed on, and the library's build as it said. */
		json_object_set_new(o, "protocol", json_integer(c->hello ? c->version : 0));
		json_object_set_new(o, "build", json_string(c->hello ? c->build : ""));
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

/* control.allow: may this peer claim a rule on these destination ports? */
bool
ctl_allowed(const struct ncd *d, const struct ucred *cr, const struct nc_trie_rule *r)
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

/* control.allow: may this peer be a zero-copy client, a process inside the daemon's memory? */
bool
ctl_zero_copy_allowed(const struct ncd *d, const struct ucred *cr)
{
	return cr->uid == 0 || ALLOW_ENTRY(d, cr, zero_copy) != NULL;
}
