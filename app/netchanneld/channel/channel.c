/* SPDX-License-Identifier: BSD-3-Clause */
/* Channels: the classifier's rules, their rings, and the directory clients read. */
#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/resource.h>

#include <rte_branch_prediction.h>
#include <rte_common.h>
#include <rte_hash.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_mbuf_dyn.h>
#include <rte_memzone.h>
#include <rte_prefetch.h>
#include <rte_rcu_qsbr.h>
#include <rte_ring.h>

#include "channel/channel.h"
#include "channel/region.h"
#include "core/match.h"
#include "core/stats.h"
#include "ncd.h"
#include "packet/prefetch.h"
#include "port/port.h"

/* The worker that empties a channel's tx ring: one of those with a queue on its port. */
static int
tx_worker_of(const struct ncd *d, uint16_t port, uint32_t id)
{
	unsigned int n = 0, k;

	for (int pass = 0; pass < 2; pass++) {
		k = 0;
		for (unsigned int w = 0; w < d->cfg.nworkers; w++) {
			const struct ncd_worker_conf *wc = &d->cfg.workers[w];

			for (unsigned int i = 0; i < wc->nrx; i++)
				if (wc->rx[i].port == port) {
					if (pass == 1 && k == id % n)
						return (int)w;
					k++;
					break;
				}
		}
		n = k;
		if (n == 0)
			return -1;
	}
	return -1;
}

#define NCD_CHANNEL_HOOKS 8
static const struct ncd_channel_hooks *hooks[NCD_CHANNEL_HOOKS];
static unsigned int nhooks;

int
ncd_channel_hooks_add(const struct ncd_channel_hooks *h)
{
	if (nhooks == NCD_CHANNEL_HOOKS)
		return -ENOSPC;
	hooks[nhooks++] = h;
	return 0;
}

/* Each hook's member that is set, in the order they were added (fwd) or the reverse. */
#define HOOKS_FWD(k, member) \
	for (unsigned int k = 0; k < nhooks; k++) \
		if (hooks[k]->member != NULL)
#define HOOKS_REV(k, member) \
	for (unsigned int k = nhooks; k-- > 0;) \
		if (hooks[k]->member != NULL)

static int
hooks_prepare(struct ncd *d, const struct ncd_channel_conf *cc)
{
	HOOKS_FWD(k, prepare) {
		int ret = hooks[k]->prepare(d, cc);

		if (ret < 0)
			return ret;
	}
	return 0;
}

static int
hooks_added(struct ncd *d, struct ncd_channel *ch)
{
	HOOKS_FWD(k, added)
		if (hooks[k]->added(d, ch) < 0)
			return -1;
	return 0;
}

/* A static channel's rings kept for its zero-copy consumer by a hook: 0, or -1 (none would). */
static int
hold_rings(struct ncd *d, const struct ncd_channel *ch)
{
	HOOKS_FWD(k, hold_rings)
		if (hooks[k]->hold_rings(d, (unsigned int)ch->consumer - 1, ch->rx, ch->tx) == 0)
			return 0;
	return -1;
}

static void
hooks_gone(struct ncd *d, const struct nc_trie_rule *rule)
{
	HOOKS_REV(k, gone)
		hooks[k]->gone(d, rule);
}

size_t
ncd_ring_memsize(uint32_t ring_size)
{
	/* What rte_ring_create() reserves for an exact-size ring: the next power of two. */
	ssize_t sz = rte_ring_get_memsize(rte_align32pow2(ring_size + 1));

	return sz < 0 ? 0 : (size_t)sz;
}

/*
 * A ring of a channel: single consumer, and multi-producer unless sp (one
 * producer only: a receive ring when one worker runs, which spares it the
 * compare-and-swap per enqueue); its name goes to name (NC_NAME_SIZE).
 * From the shared heap, not a memzone of its own:
 * there are more channels than DPDK has memzones (clients find it by the
 * address in the directory, see nc_proto.h).
 */
static struct rte_ring *
channel_ring(const struct ncd_channel_conf *cc, const char *fmt, uint32_t id, char *name, bool sp)
{
	const unsigned int flags = RING_F_SC_DEQ | RING_F_EXACT_SZ | (sp ? RING_F_SP_ENQ : 0);
	size_t sz = ncd_ring_memsize(cc->ring_size);
	struct rte_ring *r;
	int ret;

	snprintf(name, NC_NAME_SIZE, fmt, id);
	if (sz == 0) {
		rte_errno = EINVAL;
		return NULL;
	}
	r = rte_zmalloc_socket(name, (size_t)sz, RTE_CACHE_LINE_SIZE, (int)rte_socket_id());
	if (r == NULL) {
		NCD_LOG(ERR, "rte_zmalloc(%zu) for ring %s of channel %s: out of memory", sz, name,
			cc->name);
		rte_errno = ENOMEM;
		return NULL;
	}
	ret = rte_ring_init(r, name, cc->ring_size, flags);
	if (ret < 0) {
		NCD_LOG(ERR, "rte_ring_init(%s, %u) for channel %s: %s", name, cc->ring_size,
			cc->name, rte_strerror(-ret));
		rte_free(r);
		rte_errno = -ret;
		return NULL;
	}
	return r;
}

/* The name hash's key: the namespace, and the name zero padded (rte_hash compares every byte). */
struct name_key {
	uint32_t ns;
	char name[NC_NAME_SIZE];
};

static void
name_key(uint32_t ns, const char *name, struct name_key *key)
{
	memset(key, 0, sizeof(*key));
	key->ns = ns;
	snprintf(key->name, sizeof(key->name), "%s", name);
}

int
ncd_channel_eventfd(struct ncd_channel *ch)
{
	return ncd_eventfd_once(&ch->efd, ch->name);
}

int
ncd_channel_region_attach(struct ncd_channel *ch, struct ncd_region *rg)
{
	int ring;

	if (ch->region != NULL)
		return -EBUSY;
	ring = ncd_region_ring_take(rg, ch->id, ch->dir->generation);
	if (ring < 0)
		return ring;
	ch->region_ring = ring;
	/* A static channel's ring_size may be over the region's: its ring is what it gets. */
	ch->region_limit = ncd_region_limit(rg, ring, ch->dir->ring_size);
	__atomic_store_n(&ch->wakeup, &rg->rx[ring].c->want_wakeup, __ATOMIC_RELAXED);
	/* Release: a worker that sees the region sees its ring and limit. */
	__atomic_store_n(&ch->region, rg, __ATOMIC_RELEASE);
	return ring;
}

/*
 * The share of a channel with a consumer more or less: a copy, published
 * whole (workers read the one they loaded for a burst), or NULL for none.
 */
static int
share_publish(struct ncd *d, struct ncd_channel *ch, const struct ncd_share *next)
{
	struct ncd_share *old = ch->share, *copy = NULL;

	if (next != NULL && next->n > 0) {
		copy = rte_malloc("ncd_share", sizeof(*copy), RTE_CACHE_LINE_SIZE);
		if (copy == NULL)
			return -ENOMEM;
		*copy = *next;
	}
	/* Release: a worker that sees the share sees its consumers' rings and limits. */
	__atomic_store_n(&ch->share, copy, __ATOMIC_RELEASE);
	rte_rcu_qsbr_synchronize(d->qsbr, RTE_QSBR_THRID_INVALID);
	rte_free(old);
	return 0;
}

/*
 * A consumer of a shared channel of ring_size: the client in slot, on ring
 * `ring` of its region rg, which it may fill up to the lesser of the two.
 */
static struct ncd_share_consumer
share_consumer(struct ncd_region *rg, int ring, int slot, uint32_t ring_size)
{
	return (struct ncd_share_consumer){
		.rg = rg, .ring = ring, .slot = slot, .efd = -1,
		.limit = ncd_region_limit(rg, ring, ring_size),
		.wakeup = &rg->rx[ring].c->want_wakeup };
}

int
ncd_channel_share_join(struct ncd *d, struct ncd_channel *ch, struct ncd_region *rg, int slot)
{
	struct ncd_share next = { .n = 0 };
	int ring, ret;

	if (ncd_channel_consumer(ch, slot) != NULL)
		return -EALREADY;
	if (ch->share != NULL)
		next = *ch->share;
	if (next.n == NCD_SHARE_MAX)
		return -EBUSY;
	ring = ncd_region_ring_take(rg, ch->id, ch->dir->generation);
	if (ring < 0)
		return ring;
	next.c[next.n++] = share_consumer(rg, ring, slot, ch->dir->ring_size);
	ret = share_publish(d, ch, &next);
	if (ret < 0)
		ncd_region_ring_put(rg, ring);
	return ret;
}

void
ncd_channel_share_leave(struct ncd *d, struct ncd_channel *ch, int slot)
{
	struct ncd_share next;
	struct ncd_share_consumer gone;
	uint32_t i;

	if (ch->share == NULL)
		return;
	next = *ch->share;
	for (i = 0; i < next.n && next.c[i].slot != slot; i++)
		;
	if (i == next.n)
		return;
	gone = next.c[i];
	/* In order: the flows of the others stay where they were only if their places do. */
	memmove(&next.c[i], &next.c[i + 1], (next.n - i - 1) * sizeof(next.c[0]));
	next.n--;
	/* Without memory for a copy, the share without it cannot be made: it stays, with its ring. */
	if (share_publish(d, ch, &next) != 0) {
		NCD_LOG(ERR, "channel %s: its consumer in slot %d leaves: out of memory", ch->name,
			slot);
		return;
	}
	ncd_region_ring_put(gone.rg, gone.ring);
	if (gone.efd >= 0)
		close(gone.efd);
}

int
ncd_channel_share_eventfd(struct ncd_channel *ch, int slot)
{
	struct ncd_share_consumer *k = ncd_channel_consumer(ch, slot);

	return k != NULL ? ncd_eventfd_once(&k->efd, ch->name) : -ENOENT;
}

/* The channel is gone: each consumer's ring is given back (relabelled: ESTALE) and it wakes. */
static void
share_free(struct ncd_channel *ch)
{
	struct ncd_share *sh = ch->share;

	for (uint32_t i = 0; sh != NULL && i < sh->n; i++) {
		ncd_region_ring_put(sh->c[i].rg, sh->c[i].ring);
		if (sh->c[i].efd >= 0) {
			eventfd_write(sh->c[i].efd, 1);
			close(sh->c[i].efd);
		}
	}
	rte_free(sh);
	ch->share = NULL;
}

void
ncd_channel_region_detach(struct ncd *d, struct ncd_channel *ch)
{
	struct ncd_region *rg = ch->region;

	if (rg == NULL)
		return;
	/* Back to its own ring; once no worker is in a burst that saw the region, its ring goes. */
	__atomic_store_n(&ch->region, NULL, __ATOMIC_RELEASE);
	__atomic_store_n(&ch->wakeup, &ch->dir->want_wakeup, __ATOMIC_RELAXED);
	rte_rcu_qsbr_synchronize(d->qsbr, RTE_QSBR_THRID_INVALID);
	ncd_region_ring_put(rg, ch->region_ring);
	ch->region_ring = -1;
}

uint32_t
ncd_channel_rx_count(const struct ncd_channel *ch)
{
	if (ch->region != NULL)
		return ncd_region_rx_count(ch->region, ch->region_ring);
	return ch->rx != NULL ? rte_ring_count(ch->rx) : 0;
}

int32_t
ncd_channel_shadowed(const struct ncd *d, const struct nc_trie_rule *r, uint32_t from)
{
	for (uint32_t id = from; id < d->cfg.max_channels; id++) {
		const struct ncd_channel *ch = d->channels[id];

		if (ch != NULL && r->priority >= ch->rule.priority &&
		    nc_trie_rules_overlap(r, &ch->rule))
			return (int32_t)id;
	}
	return -1;
}

int32_t
ncd_channel_same_rule(const struct ncd *d, const struct nc_trie_rule *r)
{
	for (uint32_t id = 0; id < d->cfg.max_channels; id++)
		if (d->channels[id] != NULL && nc_trie_rules_same(&d->channels[id]->rule, r))
			return (int32_t)id;
	return -1;
}

int32_t
ncd_channel_find_ns(const struct ncd *d, uint32_t ns, const char *name)
{
	struct name_key key;
	void *id;

	name_key(ns, name, &key);
	if (rte_hash_lookup_data(d->names, &key, &id) < 0)
		return -1;
	return (int32_t)(uintptr_t)id;
}

int32_t
ncd_channel_find(const struct ncd *d, const char *name)
{
	return ncd_channel_find_ns(d, NCD_NS_ROOT, name);
}

/* Channels with a meter, which workers look at once a burst (ncd.nmeters): by delta. */
static void
meters_count(struct ncd *d, int delta)
{
	__atomic_store_n(&d->nmeters, d->nmeters + (uint32_t)delta, __ATOMIC_RELAXED);
}

/*
 * A meter as its conf says, each of nw workers metering at its share of the
 * rates (the bursts whole). NULL: none asked, or rte_meter refused it (logged).
 */
static struct ncd_meter *
meter_new(const struct ncd_meter_conf *mc, unsigned int nw, const char *name)
{
	struct ncd_meter *mt;
	int ret = 0;

	if (mc->kind == NCD_METER_NONE)
		return NULL;
	mt = rte_zmalloc("ncd_meter", sizeof(*mt) + nw * sizeof(mt->st[0]), RTE_CACHE_LINE_SIZE);
	if (mt == NULL)
		return NULL;
	mt->conf = *mc;
	mt->kind = mc->kind;
	mt->bytes = mc->bytes;
	mt->exceed_kernel = mc->exceed_kernel;
	if (mc->kind == NCD_METER_SRTCM)
		ret = rte_meter_srtcm_profile_config(&mt->prof.sr, &(struct rte_meter_srtcm_params){
			.cir = mc->rate / nw, .cbs = mc->burst, .ebs = mc->excess_burst });
	else if (mc->kind == NCD_METER_TRTCM)
		ret = rte_meter_trtcm_profile_config(&mt->prof.tr, &(struct rte_meter_trtcm_params){
			.cir = mc->rate / nw, .pir = mc->peak_rate / nw, .cbs = mc->burst,
			.pbs = mc->peak_burst });
	else
		ret = rte_meter_trtcm_rfc4115_profile_config(&mt->prof.r4,
			&(struct rte_meter_trtcm_rfc4115_params){
				.cir = mc->rate / nw, .eir = mc->peak_rate / nw, .cbs = mc->burst,
				.ebs = mc->excess_burst });
	for (unsigned int w = 0; ret == 0 && w < nw; w++)
		ret = mc->kind == NCD_METER_SRTCM ? rte_meter_srtcm_config(&mt->st[w].m.sr, &mt->prof.sr) :
		      mc->kind == NCD_METER_TRTCM ? rte_meter_trtcm_config(&mt->st[w].m.tr, &mt->prof.tr) :
		      rte_meter_trtcm_rfc4115_config(&mt->st[w].m.r4, &mt->prof.r4);
	if (ret != 0) {
		NCD_LOG(ERR, "channel %s: its meter (rte_meter): %s", name, strerror(-ret));
		rte_free(mt);
		return NULL;
	}
	return mt;
}

struct ncd_txm *
ncd_txm_new(const struct ncd_meter_conf *mc, unsigned int n, const char *what)
{
	struct ncd_txm *t = rte_zmalloc("ncd_txm", sizeof(*t), RTE_CACHE_LINE_SIZE);

	if (t == NULL)
		return NULL;
	rte_spinlock_init(&t->lock);
	t->refs = 1;
	for (t->n = 0; t->n < n && t->n < NCD_TXM_MAX; t->n++) {
		t->m[t->n] = meter_new(&mc[t->n], 1, what);
		if (t->m[t->n] == NULL) {
			ncd_txm_put(t);
			return NULL;
		}
	}
	return t;
}

void
ncd_txm_put(struct ncd_txm *t)
{
	if (t == NULL || --t->refs > 0)
		return;
	for (unsigned int k = 0; k < t->n; k++)
		rte_free(t->m[k]);
	rte_free(t);
}

bool
ncd_txm_pass(struct ncd_txm *ch, struct ncd_txm *user, uint32_t len, uint64_t now,
	     enum rte_color *colour)
{
	struct ncd_txm *t[2] = { ch, user };
	struct ncd_meter_state saved[2][NCD_TXM_MAX];
	enum rte_color worst = RTE_COLOR_GREEN;
	unsigned int k, j;

	/* Always the channel's lock before the user's: two workers never wait on each other. */
	for (k = 0; k < 2; k++) {
		if (t[k] == NULL)
			continue;
		rte_spinlock_lock(&t[k]->lock);
		for (j = 0; j < t[k]->n; j++) {
			enum rte_color c;

			saved[k][j] = t[k]->m[j]->st[0];
			c = ncd_meter_colour(t[k]->m[j], &t[k]->m[j]->st[0], now,
					     t[k]->m[j]->bytes ? len : 1);
			if (c == RTE_COLOR_RED)
				goto red;
			if (c > worst)
				worst = c;
		}
	}
	for (k = 0; k < 2; k++)
		if (t[k] != NULL)
			rte_spinlock_unlock(&t[k]->lock);
	*colour = worst;
	return true;
red:
	/* Held: every bucket as it was, as though this packet had not been asked about. */
	for (;;) {
		while (j-- > 0)
			t[k]->m[j]->st[0] = saved[k][j];
		rte_spinlock_unlock(&t[k]->lock);
		do {
			if (k-- == 0) {
				*colour = RTE_COLOR_RED;
				return false;
			}
		} while (t[k] == NULL);
		j = t[k]->n;
	}
}

int
ncd_channel_set_meter(struct ncd *d, uint32_t id, const struct ncd_meter_conf *mc)
{
	struct ncd_channel *ch = id < d->cfg.max_channels ? d->channels[id] : NULL;
	struct ncd_meter *mt, *old;

	if (ch == NULL)
		return -ENOENT;
	mt = meter_new(mc, d->cfg.nworkers, ch->name);
	if (mt == NULL && mc->kind != NCD_METER_NONE)
		return -ENOMEM;
	/*
	 * Release: a worker that sees the new meter sees its profile and full
	 * buckets. Its packets go on as they were meanwhile: a burst meters
	 * under the old meter or the new one, never none.
	 */
	old = ch->meter;
	meters_count(d, (mt != NULL) - (old != NULL));
	__atomic_store_n(&ch->meter, mt, __ATOMIC_RELEASE);
	rte_rcu_qsbr_synchronize(d->qsbr, RTE_QSBR_THRID_INVALID);
	rte_free(old);
	NCD_LOG(NOTICE, "channel %s: meter %s", ch->name, mt == NULL ? "off" :
		old == NULL ? "on" : "changed");
	return 0;
}

/* A channel as its conf says, not yet anywhere. NULL: out of memory, or its meter refused. */
static struct ncd_channel *
channel_new(struct ncd *d, const struct ncd_channel_conf *cc, int owner, uint32_t ns)
{
	struct ncd_channel *ch = rte_zmalloc("ncd_channel", sizeof(*ch), RTE_CACHE_LINE_SIZE);

	if (ch == NULL)
		return NULL;
	ch->meter = meter_new(&cc->meter, d->cfg.nworkers, cc->name);
	if (ch->meter == NULL && cc->meter.kind != NCD_METER_NONE) {
		rte_free(ch);
		return NULL;
	}
	if (cc->tx_meter.kind != NCD_METER_NONE) {
		ch->tx_meter = ncd_txm_new(&cc->tx_meter, 1, cc->name);
		if (ch->tx_meter == NULL) {
			rte_free(ch->meter);
			rte_free(ch);
			return NULL;
		}
	}
	meters_count(d, ch->meter != NULL);
	snprintf(ch->name, sizeof(ch->name), "%s", cc->name);
	ch->action = cc->action;
	ch->rule = cc->rule;
	ch->queue_bytes = cc->queue_bytes;
	ch->owner = owner;
	ch->ns = ns;
	ch->efd = -1;                  /* made when a client first asks (ncd_channel_eventfd) */
	ch->queue = cc->steer ? cc->queue : -1;
	ch->shared = cc->shared;
	ch->nattach = cc->nattach;
	memcpy(ch->attach, cc->attach, sizeof(ch->attach));
	if (cc->action == NC_ACTION_NAT)
		ch->nat = cc->nat;
	ch->seq = d->channel_seq++;
	return ch;
}

/* Where its packets go: a ring of an isolated client's region, or a ring of its own. */
static int
rx_setup(struct ncd *d, struct ncd_channel *ch, const struct ncd_channel_conf *cc,
	 struct ncd_region *region, struct nc_dir_entry *e)
{
	int ret;

	e->rx_ring[0] = '\0';
	if (cc->action != NC_ACTION_DELIVER)
		return 0;
	if (region == NULL) {
		/* Any worker may enqueue; one client dequeues. */
		ch->rx = channel_ring(cc, NC_RX_RING_FMT, ch->id, e->rx_ring, d->cfg.nworkers == 1);
		return ch->rx == NULL ? -rte_errno : 0;
	}
	/* Labelled with the generation the entry gets when published, as the client will be told. */
	ret = ncd_region_ring_take(region, ch->id, e->generation + 1);
	if (ret < 0)
		return ret;
	if (ch->shared) {
		/*
		 * A client's shared channel: its maker is its first consumer, and it
		 * is delivered by share from the start, so that others join without
		 * a change of path under the workers.
		 */
		struct ncd_share *sh = rte_zmalloc("ncd_share", sizeof(*sh), RTE_CACHE_LINE_SIZE);

		if (sh == NULL) {
			ncd_region_ring_put(region, ret);
			return -ENOMEM;
		}
		sh->n = 1;
		sh->c[0] = share_consumer(region, ret, ch->owner, cc->ring_size);
		ch->share = sh;
		return 0;
	}
	ch->region = region;
	ch->region_ring = ret;
	/* Its ring is one of the region's, whose size was fixed at HELLO: at most that. */
	ch->region_limit = ncd_region_limit(region, ret, cc->ring_size);
	ch->wakeup = &region->rx[ret].c->want_wakeup;
	return 0;
}

/*
 * What it sends, and who sends it: an isolated client's region's tx ring,
 * which the region's worker empties on any port it has a queue on, or a
 * ring of its own, which clients (and the control thread, resolved IP
 * packets) fill and one worker of the port empties.
 */
static int
tx_setup(struct ncd *d, struct ncd_channel *ch, const struct ncd_channel_conf *cc,
	 struct ncd_region *region, struct nc_dir_entry *e)
{
	int w;

	e->tx_ring[0] = '\0';
	if (!cc->tx)
		return 0;
	if (region != NULL) {
		if (cc->port >= d->cfg.nports || d->ports[cc->port].txq[region->worker] == NCD_NO_TXQ) {
			NCD_LOG(ERR, "channel %s: worker %u has no queue on port %u to transmit on",
				cc->name, region->worker, cc->port);
			return -EINVAL;
		}
		w = (int)region->worker;
	} else {
		w = cc->port < d->cfg.nports ? tx_worker_of(d, cc->port, ch->id) : -1;
		if (w < 0) {
			NCD_LOG(ERR, "channel %s: no worker polls port %u to transmit on", cc->name,
				cc->port);
			return -EINVAL;
		}
		ch->tx = channel_ring(cc, NC_TX_RING_FMT, ch->id, e->tx_ring, false);
		if (ch->tx == NULL)
			return -rte_errno;
	}
	ch->can_tx = true;
	ch->port = cc->port;
	ch->tx_worker = (unsigned int)w;
	/* What it may send: from the flows it receives, to anywhere. */
	ch->tx_rule = cc->rule;
	ch->tx_rule.src_len = 0;
	memset(&ch->tx_rule.src, 0, sizeof(ch->tx_rule.src));
	memset(&ch->tx_rule.sport, 0, sizeof(ch->tx_rule.sport));
	return 0;
}

/* Its directory entry filled and made live, and the channel found by the workers. */
static void
publish(struct ncd *d, struct ncd_channel *ch, const struct ncd_channel_conf *cc,
	struct nc_dir_entry *e)
{
	snprintf(e->name, sizeof(e->name), "%s", cc->name);
	e->id = ch->id;
	e->action = cc->action;
	e->ring_size = cc->ring_size;
	e->rx_ring_addr = (uint64_t)(uintptr_t)ch->rx;
	e->tx_ring_addr = (uint64_t)(uintptr_t)ch->tx;
	e->queue_bytes = cc->queue_bytes;
	e->generation++;
	ch->desc_gen = (uint32_t)(e->generation & 0xffff) << NC_DESC_GEN_SHIFT;
	__atomic_store_n(&e->bytes_in, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&e->bytes_out, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&e->want_wakeup, 0, __ATOMIC_RELAXED);
	/* Release: a client that sees the entry live sees all of it. */
	__atomic_store_n(&e->state, NC_DIR_LIVE, __ATOMIC_RELEASE);
	/* Release: a worker that finds the channel finds it whole (its ring, its limits). */
	__atomic_store_n(&d->channels[ch->id], ch, __ATOMIC_RELEASE);
}

int
ncd_channel_add(struct ncd *d, const struct ncd_channel_conf *cc, int owner, uint32_t ns,
		struct ncd_region *region)
{
	struct ncd_channel *ch;
	struct nc_dir_entry *e;
	struct name_key key;
	int id, ret;

	if (ncd_channel_find_ns(d, ns, cc->name) >= 0)
		return -EEXIST;
	if (cc->action == NC_ACTION_NAT && cc->nat.has_port && cc->nat.port >= d->cfg.nports)
		return -EINVAL;
	ch = channel_new(d, cc, owner, ns);
	if (ch == NULL)
		return -ENOMEM;
	ret = hooks_prepare(d, cc);
	if (ret < 0)
		goto out_free;
	/*
	 * The rule goes in first, for its id; until channels[id] is published
	 * below, workers that match it see no channel and pass the packet to the
	 * kernel, as before the channel existed.
	 */
	id = nc_trie_add(d->trie, &cc->rule);
	if (id < 0) {
		/* The same rule and priority: another channel holds that flow. */
		ret = id == -EEXIST ? -EBUSY : id;
		goto out_free;
	}
	ch->id = (uint32_t)id;
	name_key(ns, cc->name, &key);
	/* The table holds max_channels names (extendable buckets): it cannot be full here. */
	ret = rte_hash_add_key_data(d->names, &key, (void *)(uintptr_t)id);
	if (ret < 0) {
		NCD_LOG(ERR, "rte_hash_add_key_data(%s): %s", cc->name, strerror(-ret));
		goto out_delete;
	}
	e = &d->dir->e[id];
	ch->dir = e;
	ch->wakeup = &e->want_wakeup;
	ch->region_ring = -1;
	ret = rx_setup(d, ch, cc, region, e);
	if (ret == 0)
		ret = tx_setup(d, ch, cc, region, e);
	if (ret < 0)
		goto out_delete;
	memset(&d->ctl_cstats[id], 0, sizeof(d->ctl_cstats[id]));
	HOOKS_FWD(k, init)
		hooks[k]->init(d, ch);
	publish(d, ch, cc, e);
	if (hooks_added(d, ch) != 0) {
		/* A module cannot have it (a required port cannot offload it): as if never added. */
		ncd_channel_del(d, (uint32_t)id);
		return -ENOTSUP;
	}
	return id;

out_delete:
	if (ch->region != NULL)
		ncd_region_ring_put(ch->region, ch->region_ring);
	share_free(ch);
	rte_free(ch->rx);
	rte_free(ch->tx);
	rte_hash_del_key(d->names, &key);
	nc_trie_delete(d->trie, (uint32_t)id);
out_free:
	/* prepare may have taken flow rules away from channels this one would have beaten. */
	hooks_gone(d, &cc->rule);
	if (ch->efd >= 0)
		close(ch->efd);
	meters_count(d, -(ch->meter != NULL));
	rte_free(ch->meter);
	ncd_txm_put(ch->tx_meter);
	rte_free(ch);
	return ret;
}

unsigned int
ncd_ring_free_burst(const struct ncd *d, struct rte_ring *r)
{
	struct rte_mbuf *m[NCD_BURST];
	unsigned int n = rte_ring_dequeue_burst(r, (void **)m, NCD_BURST, NULL);

	/*
	 * A client gives back mbufs whose first line it read last (their length):
	 * the worker's next look at it, in the free below, was a miss it waited
	 * for, mbuf by mbuf, and the rx burst that reuses the mbuf writes the line.
	 * Fetched for writing, all of a burst's at once, the misses overlap and
	 * the line is this core's to write. deliver-1, interleaved, 3 runs each:
	 * 17.7-17.9 Mpps against 14.0-14.4 without, 15.1-15.4 with a read prefetch.
	 */
	for (unsigned int i = 0; i < n; i++)
		ncd_prefetch_for_write(m[i]);
	for (unsigned int i = 0; i < n; i++)
		ncd_unmark(d, m[i]);
	if (n > 0)
		rte_pktmbuf_free_bulk(m, n);
	return n;
}

unsigned int
ncd_ring_drain(const struct ncd *d, struct rte_ring *r, bool from_tail)
{
	unsigned int n, total = 0;

	if (r == NULL)
		return 0;
	/*
	 * A consumer killed in a zero-copy dequeue moved the head, not the tail:
	 * what lies between is still the ring's (single-consumer rings only).
	 */
	if (from_tail && r->cons.sync_type == RTE_RING_SYNC_ST)
		r->cons.head = r->cons.tail;
	while ((n = ncd_ring_free_burst(d, r)) > 0)
		total += n;
	return total;
}

void
ncd_channel_del(struct ncd *d, uint32_t id)
{
	struct ncd_channel *ch = d->channels[id];
	struct nc_trie_rule gone;
	struct name_key key;

	if (ch == NULL)
		return;
	/* The NIC stops marking first (offload's, the last added), so no mark names it once gone. */
	HOOKS_REV(k, leaving)
		hooks[k]->leaving(d, ch);
	gone = ch->rule;
	/*
	 * Out of the classifier, then a grace period: after it no worker is in a
	 * burst that looked the rule up, so none holds the channel or its ring.
	 */
	nc_trie_delete(d->trie, id);
	rte_rcu_qsbr_synchronize(d->qsbr, RTE_QSBR_THRID_INVALID);
	HOOKS_REV(k, quiet)
		hooks[k]->quiet(d, ch);
	__atomic_store_n(&d->channels[id], NULL, __ATOMIC_RELAXED);
	name_key(ch->ns, ch->name, &key);
	rte_hash_del_key(d->names, &key);
	HOOKS_REV(k, left)
		hooks[k]->left(d, ch);
	__atomic_store_n(&ch->dir->state, NC_DIR_FREE, __ATOMIC_RELEASE);
	/*
	 * A static channel's zero-copy consumer checks the entry before each
	 * burst, but may be in the middle of one: its rings stay whole, with what
	 * they hold, until it lets go (its connection ends). Otherwise whatever no
	 * client took, and whatever it sent that no worker took, goes back now.
	 */
	if (ch->consumer > 0 && ch->region == NULL && hold_rings(d, ch) == 0) {
		ch->rx = ch->tx = NULL;
	} else {
		ncd_ring_drain(d, ch->rx, ch->consumer_gone);
		ncd_ring_drain(d, ch->tx, false);
	}
	if (ch->region != NULL)
		ncd_region_ring_put(ch->region, ch->region_ring);
	share_free(ch);
	rte_free(ch->rx);
	rte_free(ch->tx);
	/* A consumer asleep on its copy of the eventfd wakes, and finds the channel gone (ESTALE). */
	if (ch->efd >= 0) {
		eventfd_write(ch->efd, 1);
		close(ch->efd);
	}
	meters_count(d, -(ch->meter != NULL));
	rte_free(ch->meter);
	ncd_txm_put(ch->tx_meter);
	rte_free(ch);
	hooks_gone(d, &gone);
}

/*
 * A channel's eventfd exists once a client asks for it (one that sleeps),
 * and each connection has a socket: with many channels, the usual soft limit
 * of 1024 open files is too low. Take what the hard limit allows; an eventfd
 * that still cannot be had is refused to its client (EMFILE), and logged.
 */
static void
raise_fd_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
			NCD_LOG(WARNING, "setrlimit(RLIMIT_NOFILE, %lu): %s",
				(unsigned long)rl.rlim_max, strerror(errno));
	}
}

int
ncd_channels_init(struct ncd *d)
{
	struct nc_trie_config tc = NC_TRIE_SIZED(nc_trie_config, .name = "channels",
			.socket_id = (int)rte_socket_id(), .max_rules = d->cfg.max_channels);
	size_t sz = sizeof(*d->dir) + d->cfg.max_channels * sizeof(struct nc_dir_entry);
	size_t qsz = rte_rcu_qsbr_get_memsize(d->cfg.nworkers);
	struct rte_hash_parameters hp = {
		.name = "ncd_names", .entries = d->cfg.max_channels,
		.key_len = sizeof(struct name_key),
		.socket_id = (int)rte_socket_id(), .extra_flag = RTE_HASH_EXTRA_FLAGS_EXT_TABLE,
	};

	raise_fd_limit();
	/* Entries at least 8: rte_hash refuses smaller tables. */
	hp.entries = RTE_MAX(hp.entries, 8u);
	d->names = rte_hash_create(&hp);
	if (d->names == NULL) {
		NCD_LOG(ERR, "rte_hash_create(%s, %u): %s", hp.name, hp.entries,
			rte_strerror(rte_errno));
		return -1;
	}
	d->dir_mz = rte_memzone_reserve_aligned(NC_DIR_MZ, sz, (int)rte_socket_id(), 0,
						RTE_CACHE_LINE_SIZE);
	if (d->dir_mz == NULL) {
		NCD_LOG(ERR, "rte_memzone_reserve(%s): %s", NC_DIR_MZ, rte_strerror(rte_errno));
		return -1;
	}
	d->dir = d->dir_mz->addr;
	memset(d->dir, 0, sz);
	d->dir->magic = NC_DIR_MAGIC;
	d->dir->version = NC_SHM_LAYOUT_VERSION;
	d->dir->max_channels = d->cfg.max_channels;
	snprintf(d->dir->mbuf_pool, sizeof(d->dir->mbuf_pool), "%s", d->pool->name);

	/* Clients' shared state, and the mark on the mbufs they hold. */
	d->clients_mz = rte_memzone_reserve_aligned(NC_CLIENTS_MZ,
						    NC_MAX_CLIENTS * sizeof(struct nc_client_entry),
						    (int)rte_socket_id(), 0, RTE_CACHE_LINE_SIZE);
	d->owner_off = rte_mbuf_dynfield_register(&(const struct rte_mbuf_dynfield){
		.name = NC_MBUF_OWNER_FIELD, .size = sizeof(uint32_t), .align = sizeof(uint32_t) });
	if (d->clients_mz == NULL || d->owner_off < 0) {
		NCD_LOG(ERR, "client table (%s) or mbuf owner field (%s): %s", NC_CLIENTS_MZ,
			NC_MBUF_OWNER_FIELD, rte_strerror(rte_errno));
		return -1;
	}
	d->clients = d->clients_mz->addr;
	memset(d->clients, 0, NC_MAX_CLIENTS * sizeof(struct nc_client_entry));
	d->rx_tsc_off = -1;
	if (d->cfg.rx_timestamps) {
		d->rx_tsc_off = rte_mbuf_dynfield_register(&(const struct rte_mbuf_dynfield){
			.name = NC_MBUF_RX_TSC_FIELD, .size = sizeof(uint64_t),
			.align = sizeof(uint64_t) });
		if (d->rx_tsc_off < 0) {
			NCD_LOG(ERR, "mbuf rx time field (%s): %s", NC_MBUF_RX_TSC_FIELD,
				rte_strerror(rte_errno));
			return -1;
		}
	}

	d->trie = nc_trie_create(&tc);
	d->qsbr = rte_zmalloc("ncd_qsbr", qsz, RTE_CACHE_LINE_SIZE);
	if (d->trie == NULL || d->qsbr == NULL ||
	    rte_rcu_qsbr_init(d->qsbr, d->cfg.nworkers) != 0 ||
	    nc_trie_rcu_qsbr_add(d->trie, d->qsbr) != 0) {
		NCD_LOG(ERR, "classifier setup: %s", strerror(errno));
		return -1;
	}
	for (unsigned int i = 0; i < d->cfg.nchannels; i++) {
		int ret = ncd_channel_add(d, &d->cfg.channels[i], NCD_OWNER_CONFIG, NCD_NS_ROOT,
					  NULL);

		if (ret < 0) {
			NCD_LOG(ERR, "channel %s: %s", d->cfg.channels[i].name, strerror(-ret));
			return -1;
		}
	}
	return 0;
}

void
ncd_channels_free(struct ncd *d)
{
	for (uint32_t i = 0; d->trie != NULL && i < d->cfg.max_channels; i++)
		ncd_channel_del(d, i);
	if (d->trie != NULL)
		nc_trie_rcu_qsbr_add(d->trie, NULL);
	nc_trie_free(d->trie);
	d->trie = NULL;
	rte_free(d->qsbr);
	d->qsbr = NULL;
	rte_memzone_free(d->dir_mz);
	d->dir_mz = NULL;
	d->dir = NULL;
	rte_memzone_free(d->clients_mz);
	d->clients_mz = NULL;
	d->clients = NULL;
	rte_hash_free(d->names);
	d->names = NULL;
}
