/* SPDX-License-Identifier: BSD-3-Clause */
#define _GNU_SOURCE /* struct ucred, accept4 */
/*
 * The requests of a client's own channels: HELLO, CHANNEL_CREATE, _ATTACH,
 * _DESTROY, _STATS, _EVENTFD and CLIENT_EVENTFD, each checked against what
 * its user may do (policy.c) before it is acted on.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
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
#include "nc_build.h"
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

/* What the connection in client slot `slot` is told of a channel it made or attached to. */
static void
channel_info(const struct ncd *d, const struct ncd_channel *ch, int slot,
	     struct nc_ctl_channel *info)
{
	const struct ncd_share_consumer *k;

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
	/* A consumer of a shared channel: its packets come on a ring of its own. */
	if ((k = ncd_channel_consumer(ch, slot)) != NULL) {
		info->flags |= NC_CHANNEL_F_REGION;
		info->region_ring = (uint32_t)k->ring;
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

	return ctl_reply(c, req, -ENOSPC, why, (size_t)n);
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

/*
 * A shared CHANNEL_CREATE whose rule and priority a shared channel of the
 * same user has already: the connection joins it, as a socket joins its
 * user's SO_REUSEPORT group, and is told of that channel (its name, not the
 * one asked for). @return the reply's result, or 1: no such channel, make one.
 */
static int
join_shared(struct ncd *d, struct ncd_conn *c, const struct nc_ctl_req *req,
	    const struct ncd_channel_conf *cc)
{
	int32_t id = ncd_channel_same_rule(d, &cc->rule);
	struct ncd_channel *ch = id >= 0 ? d->channels[id] : NULL;
	struct nc_ctl_channel info;
	char why[160];
	int ret;

	/* Another user's, a static one (attached by name), or one not shared: EBUSY as ever. */
	if (ch == NULL || !ch->shared || ch->owner < 0 || !ctl_same_user(c, ch))
		return 1;
	if (ctl_conn_room(&c->attached, &c->cap_attached, c->nattached, 1, sizeof(c->attached[0])))
		return ctl_reply(c, req, -ENOMEM, NULL, 0);
	ret = attach_shared(d, c, ch, why, sizeof(why));
	if (ret != 0)
		return ctl_reply(c, req, ret, why, strlen(why));
	c->attached[c->nattached].id = (uint32_t)id;
	c->attached[c->nattached++].gen = ch->dir->generation;
	NCD_LOG_USER(INFO, c->cred.uid, "control: pid %d joined shared channel %s (%d), one of %u "
		     "consumers", (int)c->cred.pid, ch->name, id, ch->share->n);
	channel_info(d, ch, c->slot, &info);
	return ctl_reply(c, req, 0, &info, sizeof(info));
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

	if (ncd_ctl_decode_create(m, len, d->cfg.nports, &cc) != 0) {
		struct nc_ctl_meter mw;
		struct ncd_meter_conf mc;

		/* A meter the config would refuse: its reason, as the config gives it. */
		if ((m->flags & NC_CREATE_F_METER) && len >= sizeof(*m) + sizeof(mw)) {
			memcpy(&mw, (const uint8_t *)body + len - sizeof(mw), sizeof(mw));
			if (ncd_ctl_decode_meter(&mw, &mc, why, sizeof(why)) != 0)
				return ctl_reply(c, req, -EINVAL, why, strlen(why));
		}
		return ctl_reply(c, req, -EINVAL, NULL, 0);
	}
	/*
	 * A control connection has no region and reads no ring: a deliver
	 * channel of its own would hold every mbuf its flows bring until the
	 * connection closes, and a flood would empty the pool for everyone.
	 */
	if (cc.action == NC_ACTION_DELIVER && (c->hello_flags & NC_HELLO_F_CONTROL)) {
		int n = snprintf(why, sizeof(why), "a control connection (NC_CONNECT_CONTROL) "
				 "receives nothing, so it may not own a deliver channel: connect "
				 "as a client");

		return ctl_reply(c, req, -EINVAL, why, (size_t)n);
	}
	/* A NAT channel sends the flow on to anywhere: not for any user the allow list names. */
	if (!ctl_allowed(d, &c->cred, &cc.rule) ||
	    (cc.action == NC_ACTION_NAT && !ctl_privileged(&c->cred)))
		return ctl_reply(c, req, -EPERM, NULL, 0);
	if (cc.shared) {
		/* Shared among connections, each with a ring of its region: an isolated client's. */
		if (cc.action != NC_ACTION_DELIVER || rg == NULL) {
			int n = snprintf(why, sizeof(why), "a shared channel is a deliver channel of "
					 "isolated clients: not a %s", rg == NULL ?
					 "zero-copy client's" : "drop or NAT channel");

			return ctl_reply(c, req, -EINVAL, why, (size_t)n);
		}
		ret = join_shared(d, c, req, &cc);
		if (ret <= 0)
			return ret;
	}
	if (ctl_conn_room(&c->channels, &c->cap_channels, c->nchannels, 1, sizeof(c->channels[0])))
		return ctl_reply(c, req, -ENOMEM, NULL, 0);
	if (!ctl_within_limit(d, &c->cred, LIM_CHANNELS, 1, why, sizeof(why)) ||
	    !ctl_within_limit(d, &c->cred, LIM_MEMORY, ncd_ring_memsize(cc.ring_size) *
			  ((cc.action == NC_ACTION_DELIVER && rg == NULL) + (cc.tx && rg == NULL)),
			  why, sizeof(why)))
		return ctl_reply(c, req, -EDQUOT, why, strlen(why));
	/* A zero-copy client's deliver channel: a ring whose mbufs its user answers for. */
	ret = ctl_may_hold_mbufs(d, c, cc.action == NC_ACTION_DELIVER && rg == NULL ?
			     ctl_ring_mbufs(d, cc.ring_size) : 0, why, sizeof(why));
	if (ret != 0)
		return ctl_reply(c, req, ret, why, strlen(why));
	/* Another user's flows are not to be taken (the same rule and priority is EBUSY below). */
	for (int32_t k = ctl_may_preempt(d, &c->cred) ? -1 : ncd_channel_shadowed(d, &cc.rule, 0);
	     k >= 0; k = ncd_channel_shadowed(d, &cc.rule, (uint32_t)k + 1)) {
		const struct ncd_channel *o = d->channels[k];
		char owner[64];
		int n;

		if (ctl_same_user(c, o))
			continue;
		/* Another owner's channel, named only to a user who may see it. */
		if (ncd_conn_sees(d, c, o)) {
			ctl_owner_name(o, owner, sizeof(owner));
			n = snprintf(why, sizeof(why), "it would take the flows of channel %s of %s "
				     "(priority %u, this one %u)", o->name, owner,
				     o->rule.priority, cc.rule.priority);
		} else {
			n = snprintf(why, sizeof(why), "it would take the flows of a channel of "
				     "another owner (priority %u, this one %u)", o->rule.priority,
				     cc.rule.priority);
		}
		ncd_ctl.shadow_refusals++;
		NCD_LOG_USER(INFO, c->cred.uid, "control: pid %d uid %u refused: %s",
			     (int)c->cred.pid, c->cred.uid, why);
		return ctl_reply(c, req, -EADDRINUSE, why, (size_t)n);
	}
	/* The last channels of max_channels are the operator's. */
	if (!ctl_privileged(&c->cred) &&
	    (uint32_t)rte_hash_count(d->names) + reserve >= d->cfg.max_channels) {
		int n = snprintf(why, sizeof(why), "max_channels: %d of %u in use, and the last %u "
				 "are root's", rte_hash_count(d->names), d->cfg.max_channels, reserve);

		ncd_ctl.reserve_refusals++;
		return ctl_reply(c, req, -ENOSPC, why, (size_t)n);
	}
	/* Its name in its user's namespace: a name taken there tells it nothing of others'. */
	id = ncd_channel_add(d, &cc, c->slot, ncd_conn_ns(c), rg);
	if (id == -ENOSPC && rg != NULL && !rg->one_ring)
		return reply_rings_full(c, req, rg);
	if (id == -EBUSY) {
		/* Named to a user who may see it; another owner's only as such. */
		int32_t o = ncd_channel_same_rule(d, &cc.rule);

		if (o >= 0 && ncd_conn_sees(d, c, d->channels[o]))
			snprintf(why, sizeof(why), "channel %s (%d) has the same rule and priority%s",
				 d->channels[o]->name, o, d->channels[o]->shared && !cc.shared &&
				 ctl_same_user(c, d->channels[o]) ?
				 "; it is shared: a channel created shared joins it" : "");
		else
			snprintf(why, sizeof(why), "%s has the same rule and priority",
				 o >= 0 ? "a channel of another owner" : "another channel");
		return ctl_reply(c, req, id, why, strlen(why));
	}
	if (id < 0)
		return ctl_reply(c, req, id, NULL, 0);
	c->channels[c->nchannels++] = (uint32_t)id;
	NCD_LOG_USER(INFO, c->cred.uid, "control: pid %d created channel %s (%d)",
		     (int)c->cred.pid, cc.name, id);
	ctl_owner_name(d->channels[id], why, sizeof(why));
	ncd_log_shadowing(d, (uint32_t)id, why);
	channel_info(d, d->channels[id], c->slot, &info);
	return ctl_reply(c, req, 0, &info, sizeof(info));
}

static int
do_destroy(struct ncd *d, struct ncd_conn *c, const struct nc_ctl_req *req, const void *body,
           uint32_t len __rte_unused)
{
	const struct nc_ctl_id *m = body;

	for (unsigned int i = 0; i < c->nchannels; i++)
		if (c->channels[i] == m->id) {
			ctl_release(d, c, i, false);
			return ctl_reply(c, req, 0, NULL, 0);
		}
	/* A static channel it attached to: let go of it, and leave it. */
	for (unsigned int i = 0; i < c->nattached; i++)
		if (c->attached[i].id == m->id) {
			ctl_detach(d, c, i);
			return ctl_reply(c, req, 0, NULL, 0);
		}
	/*
	 * Not this connection's: static channels and others' are not to be
	 * destroyed here. One the user may not see is no channel at all, so that
	 * ids cannot be probed.
	 */
	return ctl_reply(c, req, m->id < d->cfg.max_channels && d->channels[m->id] != NULL &&
		     ncd_conn_sees(d, c, d->channels[m->id]) ? -EPERM : -ENOENT, NULL, 0);
}

/*
 * CHANNEL_METER: a meter on one of the connection's own channels, changed or
 * taken off while its traffic flows. Static channels are the operator's
 * (channel meter, reload), and others' are no channel at all.
 */
static int
do_meter(struct ncd *d, struct ncd_conn *c, const struct nc_ctl_req *req, const void *body,
	 uint32_t len __rte_unused)
{
	struct nc_ctl_meter m;
	struct ncd_meter_conf mc;
	char why[200];
	int ret;

	/* The body may not be aligned for it. */
	memcpy(&m, body, sizeof(m));
	for (unsigned int i = 0; i < c->nchannels; i++) {
		if (c->channels[i] != m.id)
			continue;
		ret = ncd_ctl_decode_meter(&m, &mc, why, sizeof(why));
		if (ret != 0)
			return ctl_reply(c, req, ret, why, strlen(why));
		ret = ncd_channel_set_meter(d, m.id, &mc);
		if (ret == 0)
			NCD_LOG_USER(INFO, c->cred.uid, "control: pid %d set the meter of channel %s",
				     (int)c->cred.pid, d->channels[m.id]->name);
		return ctl_reply(c, req, ret, NULL, 0);
	}
	if (m.id < d->cfg.max_channels && d->channels[m.id] != NULL &&
	    ncd_conn_sees(d, c, d->channels[m.id])) {
		int n = snprintf(why, sizeof(why), "channel %s is not this connection's: its meter "
				 "is its owner's (the operator's: channel meter)",
				 d->channels[m.id]->name);

		return ctl_reply(c, req, -EPERM, why, (size_t)n);
	}
	return ctl_reply(c, req, -ENOENT, NULL, 0);
}

static int
do_attach(struct ncd *d, struct ncd_conn *c, const struct nc_ctl_req *req, const void *body,
          uint32_t len __rte_unused)
{
	const struct nc_ctl_name *m = body;
	struct nc_ctl_channel info;
	int32_t id;

	if (!ncd_valid_name(m->name, sizeof(m->name), true))
		return ctl_reply(c, req, -EINVAL, NULL, 0);
	id = ncd_channel_find(d, m->name);
	if (id >= 0 && d->channels[id] != NULL) {
		const struct ncd_channel *ch = d->channels[id];

		/* One it may not see is none; a client's own it may see (its user's) is not for it. */
		if (!ncd_conn_sees(d, c, ch))
			return ctl_reply(c, req, -ENOENT, NULL, 0);
		if (ch->owner >= 0 || !ctl_may_attach(ch, &c->cred))
			return ctl_reply(c, req, -EPERM, NULL, 0);
		if (c->hello_flags & NC_HELLO_F_CONTROL)
			return ctl_reply(c, req, -EOPNOTSUPP, NULL, 0);
		/*
		 * One consumer at a time: its ring has one. An isolated client's gets
		 * the packets in its region while it is attached.
		 */
		if (ch->action == NC_ACTION_DELIVER) {
			if (ctl_conn_room(&c->attached, &c->cap_attached, c->nattached, 1,
				      sizeof(c->attached[0])) != 0)
				return ctl_reply(c, req, -ENOMEM, NULL, 0);
			if (ch->shared) {
				char why[160];
				int ret = attach_shared(d, c, d->channels[id], why, sizeof(why));

				if (ret != 0)
					return ctl_reply(c, req, ret, why, strlen(why));
			} else if (ch->consumer != 0) {
				return ctl_reply(c, req, -EBUSY, NULL, 0);
			} else if (d->regions[c->slot] == NULL && ch->rx != NULL) {
				/* A zero-copy consumer drains the channel's ring: its mbufs are its. */
				char why[160];
				int ret = ctl_may_hold_mbufs(d, c, ctl_ring_mbufs(d, ch->dir->ring_size), why,
							 sizeof(why));

				if (ret != 0)
					return ctl_reply(c, req, ret, why, strlen(why));
			} else if (d->regions[c->slot] != NULL) {
				int ret = ncd_channel_region_attach(d->channels[id], d->regions[c->slot]);

				if (ret == -ENOSPC)
					return reply_rings_full(c, req, d->regions[c->slot]);
				if (ret < 0)
					return ctl_reply(c, req, ret, NULL, 0);
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
		channel_info(d, ch, c->slot, &info);
		return ctl_reply(c, req, 0, &info, sizeof(info));
	}
	return ctl_reply(c, req, -ENOENT, NULL, 0);
}

/* The channel a request names, if the connection may use it: its own, one it shares, or a
 * static one it may attach to. */
static int
usable_channel(const struct ncd *d, const struct ncd_conn *c, uint32_t id, struct ncd_channel **out)
{
	struct ncd_channel *ch = id < d->cfg.max_channels ? d->channels[id] : NULL;

	if (ch == NULL || !ncd_conn_sees(d, c, ch))
		return -ENOENT;
	if (ch->owner != c->slot && ncd_channel_consumer(ch, c->slot) == NULL &&
	    (ch->owner >= 0 || !ctl_may_attach(ch, &c->cred)))
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
		return ctl_reply(c, req, -EINVAL, NULL, 0);
	ret = ncd_region_eventfd(rg);
	if (ret < 0)
		return ctl_reply(c, req, ret, NULL, 0);
	return ctl_reply_fd(c, req, 0, NULL, 0, ret);
}

static int
do_eventfd(struct ncd *d, struct ncd_conn *c, const struct nc_ctl_req *req, const void *body,
           uint32_t len __rte_unused)
{
	const struct nc_ctl_id *m = body;
	struct ncd_channel *ch;
	int ret = usable_channel(d, c, m->id, &ch);

	if (ret != 0)
		return ctl_reply(c, req, ret, NULL, 0);
	if (ch->action != NC_ACTION_DELIVER) /* nothing to wait for: drop and NAT channels */
		return ctl_reply(c, req, -EINVAL, NULL, 0);
	/* A one-ring client's channels all wake it through its ring's eventfd. */
	if (d->regions[c->slot] != NULL && d->regions[c->slot]->one_ring)
		return do_client_eventfd(d, c, req, NULL, 0);
	/* A channel of its own costs the daemon an eventfd; a static channel has one anyway. */
	if (ch->efd < 0 && ch->owner == c->slot) {
		char why[160];

		if (!ctl_within_limit(d, &c->cred, LIM_EVENTFDS, 1, why, sizeof(why)))
			return ctl_reply(c, req, -EDQUOT, why, strlen(why));
	}
	/* Each consumer of a shared channel sleeps on an eventfd of its own. */
	ret = ch->shared ? ncd_channel_share_eventfd(ch, c->slot) : ncd_channel_eventfd(ch);
	if (ret < 0)
		return ctl_reply(c, req, ret, NULL, 0);
	return ctl_reply_fd(c, req, 0, NULL, 0, ret);
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
		return ctl_reply(c, req, ret, NULL, 0);
	ncd_chan_stats_sum(d, m->id, &s);
#define COUNTER(name, what) .name = s.name,
#define NOW(name, what)
	st = (struct nc_ctl_channel_stats){ NC_CHANNEL_STATS(COUNTER, NOW) };
#undef COUNTER
#undef NOW
	st.rx_count = ncd_channel_rx_count(ch);
	st.tx_count = ch->tx ? rte_ring_count(ch->tx) : 0;
	return ctl_reply(c, req, 0, &st, sizeof(st));
}

/* HELLO's refusal, with its reason (a version 4 library keeps reasons under 160 bytes). */
static int
hello_refuse(struct ncd_conn *c, const struct nc_ctl_req *req, int ret, const char *fmt, ...)
{
	char why[NC_CTL_REASON_MAX];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	ctl_reply(c, req, ret, why, (size_t)RTE_MIN(n, (int)sizeof(why) - 1));
	return ret;
}

/*
 * The version HELLO agrees on: the highest the client and the daemon both
 * speak, or 0 (refused). A version 4 HELLO (16 bytes, min_version 0) speaks
 * its version only.
 */
static uint32_t
hello_version(const struct nc_ctl_hello *h, uint32_t *lo)
{
	uint32_t hi = h->version;

	*lo = h->min_version != 0 ? h->min_version : h->version;
	if (*lo > hi || hi < NC_CONTROL_PROTOCOL_MIN || *lo > NC_CONTROL_PROTOCOL_VERSION)
		return 0;
	return RTE_MIN(hi, (uint32_t)NC_CONTROL_PROTOCOL_VERSION);
}

/*
 * HELLO: the versions agreed on, then the connection becomes a client, with
 * a slot of the client table: an isolated one gets its region (in the
 * layout of the version agreed), a zero-copy one the slot's mbuf rings.
 */
int
ctl_do_hello(struct ncd *d, struct ncd_conn *c, const struct nc_ctl_req *req, const void *body,
	     uint32_t len)
{
	const uint32_t known = NC_HELLO_F_ZEROCOPY | NC_HELLO_F_CONTROL | NC_HELLO_F_ONE_RING;
	unsigned int slot = NCD_MAX_CLIENTS, nfree = 0;
	struct nc_ctl_hello_reply hr;
	struct ncd_region *rg = NULL;
	char build[NC_BUILD_SIZE];
	struct nc_ctl_hello h;
	uint32_t version, lo;
	char why[160];
	int ret;

	/* What a newer client adds past the HELLO this daemon knows is not read. */
	memset(&h, 0, sizeof(h));
	memcpy(&h, body, RTE_MIN(len, (uint32_t)sizeof(h)));
	h.build[sizeof(h.build) - 1] = '\0';
	if (c->hello)
		return hello_refuse(c, req, -EPROTO, "HELLO again: this connection said HELLO");
	version = hello_version(&h, &lo);
	if (version == 0)
		return hello_refuse(c, req, -EPROTO, "control protocol: the client speaks versions "
				    "%u to %u, this daemon %d to %d", lo, h.version,
				    NC_CONTROL_PROTOCOL_MIN, NC_CONTROL_PROTOCOL_VERSION);
	/* One of zero-copy, control, or an isolated client (with one ring, or a ring per channel). */
	if ((h.flags & ~known) || __builtin_popcount(h.flags) > 1)
		return hello_refuse(c, req, -EINVAL, "HELLO flags 0x%x: one of zero-copy (0x%x), "
				    "control (0x%x) or one ring (0x%x), or none", h.flags,
				    NC_HELLO_F_ZEROCOPY, NC_HELLO_F_CONTROL, NC_HELLO_F_ONE_RING);
	if ((h.flags & NC_HELLO_F_ZEROCOPY) && !ctl_zero_copy_allowed(d, &c->cred)) {
		NCD_LOG_USER(NOTICE, c->cred.uid, "control: pid %d uid %u refused zero-copy "
			     "(control.allow's zero_copy)", (int)c->cred.pid, c->cred.uid);
		/* The user may well be a client: only this kind of one is refused. */
		return hello_refuse(c, req, -EPERM, "uid %u may not be a zero-copy client (a DPDK "
				    "secondary process in the daemon's memory): that takes "
				    "control.allow's zero_copy; an isolated client does not",
				    c->cred.uid);
	}
	nc_build_zc(build, sizeof(build));
	/* A DPDK secondary process maps the daemon's memory: it must be of the daemon's build. */
	if ((h.flags & NC_HELLO_F_ZEROCOPY) &&
	    (len <= NC_CTL_HELLO_V4_SIZE || strcmp(h.build, build) != 0)) {
		NCD_LOG_USER(NOTICE, c->cred.uid, "control: pid %d uid %u refused zero-copy: "
			     "its build \"%s\" is not the daemon's", (int)c->cred.pid, c->cred.uid,
			     len <= NC_CTL_HELLO_V4_SIZE ? "(unsaid)" : h.build);
		if (len <= NC_CTL_HELLO_V4_SIZE)
			return hello_refuse(c, req, -EPROTO, "zero-copy needs the daemon's build "
					    "(%s (%s)); the client's (protocol %u) is unsaid",
					    NC_PROJECT_VERSION, NC_GIT_DESCRIBE, h.version);
		return hello_refuse(c, req, -EPROTO, "zero-copy needs the daemon's exact build: "
				    "the client is \"%s\", the daemon \"%s\"", h.build, build);
	}
	/* A zero-copy client may hold its quota of mbufs: its user answers for them. */
	if ((h.flags & NC_HELLO_F_ZEROCOPY) &&
	    (ret = ctl_may_hold_mbufs(d, c, d->cfg.mbuf_quota, why, sizeof(why))) != 0) {
		ctl_reply(c, req, ret, why, strlen(why));
		return ret;
	}
	for (unsigned int i = NCD_MAX_CLIENTS; i-- > 0;)
		if (ncd_ctl.slot_conn[i] == NULL) {
			slot = i;
			nfree++;
		}
	/* The last free slots are the operator's. */
	if (nfree == 0 || (nfree <= ROOT_RESERVE && !ctl_privileged(&c->cred))) {
		int n = snprintf(why, sizeof(why), "the daemon is busy: %d clients",
				 NCD_MAX_CLIENTS - (int)nfree);

		ncd_ctl.reserve_refusals += nfree > 0;
		ctl_reply(c, req, -ENOSPC, why, (size_t)n);
		return -ENOSPC;
	}
	if (h.flags == 0 || h.flags == NC_HELLO_F_ONE_RING) {
		/* Version 4's clients know only the region of one part. */
		rg = ncd_region_create(d, slot, h.flags == NC_HELLO_F_ONE_RING,
				       version >= 5 ? NC_REGION_LAYOUT_VERSION :
						      NC_REGION_LAYOUT_ONE_PART);
		if (rg == NULL) {
			ret = -errno;
			ctl_reply(c, req, ret, NULL, 0);
			return ret;
		}
		if (!ctl_within_limit(d, &c->cred, LIM_MEMORY, rg->size + rg->csize, why, sizeof(why))) {
			ncd_region_free(rg);
			ctl_reply(c, req, -EDQUOT, why, strlen(why));
			return -EDQUOT;
		}
	}
	c->slot = (int)slot;
	ncd_ctl.slot_conn[slot] = c;
	/* Before its rings are served: a client is held to its user's transmit limit from the first. */
	d->slot_txm[slot] = h.flags & NC_HELLO_F_CONTROL ? NULL : ctl_user_txm(d, &c->cred);
	/* Each client's EAL gets an lcore id of its own, above the daemon's. */
	c->lcore_id = RTE_MAX_LCORE / 2 + slot;
	c->hello = true;
	c->hello_flags = h.flags;
	c->version = version;
	snprintf(c->build, sizeof(c->build), "%s", len > NC_CTL_HELLO_V4_SIZE ? h.build : "");
	d->clients[slot] = (struct nc_client_entry){
		.quota = d->cfg.mbuf_quota, .pid = (uint32_t)c->cred.pid, .live = 1 };
	/* Its free and alloc rings, empty, and served by a worker from now on. */
	rte_ring_reset(d->free_rings[slot]);
	rte_ring_reset(d->alloc_rings[slot]);
	__atomic_store_n(&d->regions[slot], rg, __ATOMIC_RELEASE);
	if (!(h.flags & NC_HELLO_F_CONTROL))
		__atomic_fetch_or(&d->slot_active, UINT64_C(1) << slot, __ATOMIC_RELEASE);
	memset(&hr, 0, sizeof(hr));
	hr.slot = slot;
	hr.version = version;
	hr.flags = h.flags;
	hr.lcore_id = c->lcore_id;
	snprintf(hr.file_prefix, sizeof(hr.file_prefix), "%s", d->file_prefix);
	snprintf(hr.mbuf_pool, sizeof(hr.mbuf_pool), "%s", d->pool->name);
	hr.min_version = NC_CONTROL_PROTOCOL_MIN;
	hr.max_version = NC_CONTROL_PROTOCOL_VERSION;
	hr.region_layout = rg != NULL ? rg->layout : 0;
	memcpy(hr.build, build, sizeof(hr.build));
	/* Version 4's reply is 120 bytes exactly: its clients take no other. */
	len = version >= 5 ? sizeof(hr) : NC_CTL_HELLO_REPLY_V4_SIZE;
	if (rg == NULL)
		return ctl_reply(c, req, 0, &hr, len);
	hr.region_size = rg->size;
	/* The daemon's part (read-only), then the client's; or the one part of layout 1. */
	ret = ctl_reply_fds(c, req, 0, &hr, len, (const int[]){ rg->fd, rg->cfd },
			    rg->layout == NC_REGION_LAYOUT_ONE_PART ? 1 : 2);
	/* The client has its own; the daemon keeps only the mappings. */
	close(rg->fd);
	if (rg->cfd >= 0)
		close(rg->cfd);
	rg->fd = -1;
	rg->cfd = -1;
	return ret;
}

int
ncd_requests_register(void)
{
	if (ncd_control_register(NC_CTL_CHANNEL_CREATE, do_create) != 0 ||
	    ncd_control_register(NC_CTL_CHANNEL_ATTACH, do_attach) != 0 ||
	    ncd_control_register(NC_CTL_CHANNEL_DESTROY, do_destroy) != 0 ||
	    ncd_control_register(NC_CTL_CHANNEL_STATS, do_chan_stats) != 0 ||
	    ncd_control_register(NC_CTL_CHANNEL_EVENTFD, do_eventfd) != 0 ||
	    ncd_control_register(NC_CTL_CLIENT_EVENTFD, do_client_eventfd) != 0 ||
	    ncd_control_register(NC_CTL_CHANNEL_METER, do_meter) != 0)
		return -1;
	return 0;
}
