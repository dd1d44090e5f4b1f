/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rte_flow offload of channels. Each channel's rule becomes a flow rule that
 * MARKs its packets with the channel's id and generation; a worker that sees
 * a mark naming a live channel of that generation skips the trie for it.
 * The trie stays authoritative, so a channel is offloaded only when the NIC's
 * answer cannot differ from the trie's: no other channel that wins over it
 * (higher priority, or equal and older) overlaps it. rte_flow priorities are
 * not relied on: their number and meaning differ from PMD to PMD. Overlapping
 * offloaded rules therefore never exist, and the NIC has no order to get wrong.
 *
 * The control thread does everything here, under ncd.lock when it runs
 * concurrently with telemetry; workers read only ch->mark[] and
 * ncd.channels[].
 *
 * The mock (--mark-mock): no software PMD in DPDK 22.11 accepts MARK. With
 * the mock, a port's flow rules go to a table here instead of the PMD, and an
 * rx callback marks the packets that match them, reading each pattern against
 * the frame as a NIC would (flow_pattern.c). It can also mark wrongly
 * (wrong=N: every Nth packet gets a mark that names no live channel) and
 * mark with a destroyed rule's mark once its channel id has a new owner
 * (stale: as packets that were in the NIC's queue when the id changed
 * hands), which workers must ignore.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <rte_ethdev.h>
#include <rte_flow.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>

#include "channel/channel.h"
#include "ncd.h"
#include "offload/flow_pattern.h"
#include "offload/offload.h"
#include "port/port.h"

_Static_assert(NCD_MAX_CHANNELS - 1 <= NCD_MARK_ID_MASK, "a mark has room for every channel id");

/* ---- the mock ------------------------------------------------------------ */

#define MOCK_SLOTS 256                 /* a small NIC's flow table */

enum { SLOT_FREE, SLOT_LIVE, SLOT_GHOST };

struct mock_slot {
	uint32_t seq;                  /* odd while the control thread rewrites the slot */
	uint8_t state;
	uint32_t mark;
	struct ncd_flow_pattern pat;
};

struct ncd_mock {
	uint32_t wrong;                /* 0, or: every wrong-th packet gets a bad mark */
	bool stale;                    /* destroyed rules go on marking, with their old mark */
	bool noqueue;                  /* refuse QUEUE, as a NIC with MARK only would */
	uint32_t nslots;               /* slots ever used: the callback looks at these */
	uint64_t npkts[NCD_MAX_QUEUES]; /* per queue: each queue has one worker */
	struct mock_slot slot[MOCK_SLOTS];
};

static int
mock_parse(const char *spec, struct ncd_mock *m)
{
	char buf[128], *save = NULL;

	snprintf(buf, sizeof(buf), "%s", spec);
	for (char *t = strtok_r(buf, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save)) {
		char *end;

		if (strncmp(t, "wrong=", 6) == 0) {
			unsigned long v = strtoul(t + 6, &end, 10);

			if (*end != '\0' || v == 0 || v > UINT32_MAX)
				return -1;
			m->wrong = (uint32_t)v;
		} else if (strcmp(t, "stale") == 0) {
			m->stale = true;
		} else if (strcmp(t, "noqueue") == 0) {
			m->noqueue = true;
		} else if (strcmp(t, "on") != 0) {
			return -1;
		}
	}
	return 0;
}

/* The pattern's items point into it: a copy must point into the copy. */
static void
pattern_copy(struct ncd_flow_pattern *dst, const struct ncd_flow_pattern *src)
{
	memcpy(dst, src, sizeof(*dst));
	for (unsigned int i = 0; i < RTE_DIM(dst->items); i++) {
		if (src->items[i].spec != NULL)
			dst->items[i].spec = (const char *)dst + ((const char *)src->items[i].spec -
								  (const char *)src);
		if (src->items[i].mask != NULL)
			dst->items[i].mask = (const char *)dst + ((const char *)src->items[i].mask -
								  (const char *)src);
	}
}

static void
slot_write(struct mock_slot *s, uint8_t state, uint32_t mark, const struct ncd_flow_pattern *p)
{
	__atomic_store_n(&s->seq, s->seq + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	s->mark = mark;
	if (p != NULL)
		pattern_copy(&s->pat, p);
	__atomic_store_n(&s->state, state, __ATOMIC_RELAXED);
	__atomic_store_n(&s->seq, s->seq + 1, __ATOMIC_RELEASE);
}

static struct rte_flow *
mock_create(struct ncd_mock *m, const struct ncd_flow_pattern *p,
	    const struct rte_flow_action *act, char *why, size_t wl)
{
	uint32_t mark = 0, i, ghost = MOCK_SLOTS;

	for (; act->type != RTE_FLOW_ACTION_TYPE_END; act++) {
		if (act->type == RTE_FLOW_ACTION_TYPE_MARK) {
			mark = ((const struct rte_flow_action_mark *)act->conf)->id;
		} else if (act->type != RTE_FLOW_ACTION_TYPE_QUEUE || m->noqueue) {
			snprintf(why, wl, "mock: action %d not supported", (int)act->type);
			return NULL;
		}
	}
	/* A free slot, else the oldest ghost: stale marks last as long as there is room. */
	for (i = 0; i < MOCK_SLOTS; i++) {
		if (m->slot[i].state == SLOT_FREE)
			break;
		if (m->slot[i].state == SLOT_GHOST && ghost == MOCK_SLOTS)
			ghost = i;
	}
	if (i == MOCK_SLOTS)
		i = ghost;
	if (i == MOCK_SLOTS) {
		snprintf(why, wl, "mock: flow table full (%d rules)", MOCK_SLOTS);
		return NULL;
	}
	slot_write(&m->slot[i], SLOT_LIVE, mark, p);
	if (i >= m->nslots)
		__atomic_store_n(&m->nslots, i + 1, __ATOMIC_RELEASE);
	return (struct rte_flow *)&m->slot[i];
}

static void
mock_destroy(struct ncd_mock *m, struct rte_flow *f)
{
	struct mock_slot *s = (struct mock_slot *)f;

	if (m->stale)
		/* One earlier generation per id is enough to be stale. */
		for (uint32_t i = 0; i < m->nslots; i++)
			if (m->slot[i].state == SLOT_GHOST &&
			    (m->slot[i].mark & NCD_MARK_ID_MASK) == (s->mark & NCD_MARK_ID_MASK))
				slot_write(&m->slot[i], SLOT_FREE, 0, NULL);
	slot_write(s, m->stale ? SLOT_GHOST : SLOT_FREE, s->mark, NULL);
}

/* The slot's mark if it matches, read consistently against the control thread's rewrites. */
static bool
mock_slot_match(const struct mock_slot *s, uint8_t want, const uint8_t *f, uint32_t len,
		uint32_t *mark)
{
	uint32_t seq = __atomic_load_n(&s->seq, __ATOMIC_ACQUIRE);
	bool hit;

	if ((seq & 1) || __atomic_load_n(&s->state, __ATOMIC_RELAXED) != want)
		return false;
	hit = ncd_flow_match(s->pat.items, f, len);
	*mark = s->mark;
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	return hit && __atomic_load_n(&s->seq, __ATOMIC_RELAXED) == seq;
}

static uint16_t
mock_rx(uint16_t port __rte_unused, uint16_t queue, struct rte_mbuf **pkts, uint16_t n,
	uint16_t max __rte_unused, void *arg)
{
	struct ncd_mock *m = arg;
	uint32_t ns = __atomic_load_n(&m->nslots, __ATOMIC_ACQUIRE);

	for (uint16_t i = 0; i < n; i++) {
		const uint8_t *f = rte_pktmbuf_mtod(pkts[i], const uint8_t *);
		uint32_t len = pkts[i]->data_len, mark = 0;
		bool hit = false;
		uint64_t k = ++m->npkts[queue % NCD_MAX_QUEUES];

		for (uint32_t s = 0; !hit && s < ns; s++)
			hit = mock_slot_match(&m->slot[s], SLOT_LIVE, f, len, &mark);
		/*
		 * Packets still queued when a channel id changed hands carry the old
		 * owner's mark: a ghost marks what it matches when the live rule that
		 * matches the packet has the ghost's channel id.
		 */
		for (uint32_t s = 0; hit && m->stale && s < ns; s++) {
			uint32_t old;

			if (mock_slot_match(&m->slot[s], SLOT_GHOST, f, len, &old) &&
			    (old & NCD_MARK_ID_MASK) == (mark & NCD_MARK_ID_MASK)) {
				mark = old;
				break;
			}
		}
		if (m->wrong != 0 && k % m->wrong == 0) {
			/* Three kinds, in turn: an id beyond any channel, a wrong generation, 0. */
			switch ((k / m->wrong) % 3) {
			case 0: mark = NCD_MARK_ID_MASK; break;
			case 1: mark = hit ? mark ^ (0x40u << NCD_MARK_ID_BITS) : NCD_MARK_ID_MASK; break;
			default: mark = 0; break;
			}
			hit = true;
		}
		if (hit) {
			pkts[i]->ol_flags |= RTE_MBUF_F_RX_FDIR | RTE_MBUF_F_RX_FDIR_ID;
			pkts[i]->hash.fdir.hi = mark;
		}
	}
	return n;
}

/* ---- flow rules ---------------------------------------------------------- */

static bool
port_offloads(const struct ncd *d, unsigned int pi)
{
	return d->cfg.ports[pi].flow_offload != NCD_OFFLOAD_OFF;
}

static bool
port_requires(const struct ncd *d, unsigned int pi)
{
	return d->cfg.ports[pi].flow_offload == NCD_OFFLOAD_REQUIRED || d->cfg.ports[pi].bifurcated;
}

static struct rte_flow *
flow_make(struct ncd *d, unsigned int pi, const struct ncd_flow_pattern *pat,
	  const struct rte_flow_action *act, char *why, size_t wl)
{
	struct ncd_port *p = &d->ports[pi];
	struct rte_flow_attr attr = { .ingress = 1 };
	struct rte_flow_error err = { 0 };
	struct rte_flow *f;
	const char *what = "rte_flow_validate";
	int ret;

	if (p->mock != NULL)
		return mock_create(p->mock, pat, act, why, wl);
	/* Validate can pass where create fails: both, always. */
	ret = rte_flow_validate(p->port_id, &attr, pat->items, act, &err);
	if (ret == 0) {
		f = rte_flow_create(p->port_id, &attr, pat->items, act, &err);
		if (f != NULL)
			return f;
		what = "rte_flow_create";
		ret = -rte_errno;
	}
	snprintf(why, wl, "%s: %s", what, err.message != NULL ? err.message : strerror(-ret));
	return NULL;
}

static void
flow_unmake(struct ncd *d, unsigned int pi, struct rte_flow *f)
{
	struct rte_flow_error err = { 0 };

	if (d->ports[pi].mock != NULL)
		mock_destroy(d->ports[pi].mock, f);
	else if (rte_flow_destroy(d->ports[pi].port_id, f, &err) != 0)
		NCD_LOG(WARNING, "rte_flow_destroy(%s): %s", d->cfg.ports[pi].name,
			err.message != NULL ? err.message : "failed");
}

/* Marks may stop at once; the rules go after. */
static void
uninstall(struct ncd *d, unsigned int pi, struct ncd_channel *ch)
{
	struct ncd_chan_offload *o = &ch->off[pi];

	__atomic_store_n(&ch->mark[pi], 0, __ATOMIC_RELEASE);
	for (unsigned int k = 0; k < RTE_DIM(o->flow); k++)
		if (o->flow[k] != NULL) {
			flow_unmake(d, pi, o->flow[k]);
			o->flow[k] = NULL;
			d->ports[pi].flows--;
		}
}

static void
software(struct ncd_channel *ch, unsigned int pi, bool beaten, const char *fmt, const char *arg)
{
	ch->off[pi].state = NCD_OFF_SOFTWARE;
	ch->off[pi].beaten = beaten;
	snprintf(ch->off[pi].why, sizeof(ch->off[pi].why), fmt, arg);
}

/* MARK and QUEUE, then MARK alone, then software. @return 0 or -ENOTSUP. */
static int
install(struct ncd *d, unsigned int pi, struct ncd_channel *ch)
{
	struct ncd_port *p = &d->ports[pi];
	struct ncd_chan_offload *o = &ch->off[pi];
	struct ncd_flow_pattern pat[2];
	const char *why = NULL;
	uint32_t mark = ((ch->dir->generation % NCD_MARK_GENS) + 1) << NCD_MARK_ID_BITS | ch->id;
	struct rte_flow_action_mark am = { .id = mark };
	struct rte_flow_action_queue aq = { .index = ch->queue >= 0 ? (uint16_t)ch->queue : 0 };
	bool isolated = d->cfg.ports[pi].bifurcated;
	int n = ncd_flow_translate(&ch->rule, pat, &why);

	if (n < 0) {
		software(ch, pi, false, "the rule has %s", why);
		return -ENOTSUP;
	}
	/*
	 * An isolated (bifurcated) port has no default queue: a rule without a
	 * fate action would deliver nothing, so there it is MARK and QUEUE (the
	 * channel's queue, or 0) or nothing.
	 */
	for (int step = ch->queue >= 0 || isolated ? 0 : 1; step < (isolated ? 1 : 2); step++) {
		struct rte_flow_action act[3] = {
			{ .type = RTE_FLOW_ACTION_TYPE_MARK, .conf = &am },
			{ .type = step == 0 ? RTE_FLOW_ACTION_TYPE_QUEUE : RTE_FLOW_ACTION_TYPE_END,
			  .conf = &aq },
			{ .type = RTE_FLOW_ACTION_TYPE_END },
		};
		int k;

		if (step == 0 && ch->queue >= (int32_t)d->cfg.ports[pi].rx_queues) {
			snprintf(o->why, sizeof(o->why), "queue %d: the port has %u", ch->queue,
				 d->cfg.ports[pi].rx_queues);
			continue;
		}
		/* The mark is good before the rule exists: the first marked packet counts. */
		__atomic_store_n(&ch->mark[pi], mark, __ATOMIC_RELEASE);
		for (k = 0; k < n; k++) {
			o->flow[k] = flow_make(d, pi, &pat[k], act, o->why, sizeof(o->why));
			if (o->flow[k] == NULL)
				break;
			p->flows++;
		}
		if (k == n) {
			o->state = step == 0 ? NCD_OFF_MARK_QUEUE : NCD_OFF_MARK;
			o->beaten = false;
			o->why[0] = '\0';
			return 0;
		}
		p->flow_errors++;
		uninstall(d, pi, ch);
	}
	/* o->why has the PMD's last refusal. */
	o->state = NCD_OFF_SOFTWARE;
	o->beaten = false;
	NCD_LOG(DEBUG, "channel %s on %s: in software: %s", ch->name, d->cfg.ports[pi].name, o->why);
	return -ENOTSUP;
}

/* Does a win over b in the classifier: higher priority, or equal and older? */
static bool
beats(const struct ncd_channel *a, const struct ncd_channel *b)
{
	return a->rule.priority > b->rule.priority ||
	       (a->rule.priority == b->rule.priority && a->seq < b->seq);
}

static const struct ncd_channel *
beaten_by(const struct ncd *d, const struct ncd_channel *ch)
{
	for (uint32_t i = 0; i < d->cfg.max_channels; i++) {
		const struct ncd_channel *c = d->channels[i];

		if (c != NULL && c != ch && beats(c, ch) && ncd_rules_overlap(&c->rule, &ch->rule))
			return c;
	}
	return NULL;
}

/* One channel on one port, from scratch. @return 0, or -ENOTSUP (it runs in software). */
static int
offload_one(struct ncd *d, unsigned int pi, struct ncd_channel *ch)
{
	const struct ncd_channel *c;

	if (!port_offloads(d, pi)) {
		ch->off[pi].state = NCD_OFF_OFF;
		snprintf(ch->off[pi].why, sizeof(ch->off[pi].why), "flow_offload is off");
		return 0;
	}
	if (!d->ports[pi].flow_api) {
		software(ch, pi, false, "%s", "the PMD has no rte_flow (rte_flow_validate: ENOSYS)");
		return -ENOTSUP;
	}
	if (!d->ports[pi].marks) {
		software(ch, pi, false, "%s", "the PMD refused to deliver marks "
			 "(rte_eth_rx_metadata_negotiate)");
		return -ENOTSUP;
	}
	c = beaten_by(d, ch);
	if (c != NULL) {
		software(ch, pi, true, "overlaps channel %s, which wins over it", c->name);
		return -ENOTSUP;
	}
	return install(d, pi, ch);
}

static int
offload_all_ports(struct ncd *d, struct ncd_channel *ch)
{
	for (unsigned int pi = 0; pi < d->cfg.nports; pi++)
		if (offload_one(d, pi, ch) != 0 && port_requires(d, pi)) {
			NCD_LOG(ERR, "channel %s: port %s requires offload, but: %s", ch->name,
				d->cfg.ports[pi].name, ch->off[pi].why);
			return -ENOTSUP;
		}
	return 0;
}

/* ---- the daemon's calls -------------------------------------------------- */

/* Set at shutdown: channels then go one by one, and none may take a rule again. */
static bool closing;

int
ncd_offload_port_init(struct ncd *d, unsigned int pi)
{
	struct ncd_port *p = &d->ports[pi];
	const struct ncd_port_conf *pc = &d->cfg.ports[pi];
	uint64_t features = RTE_ETH_RX_METADATA_USER_MARK;
	struct rte_flow_error err = { 0 };
	int ret;

	p->mark_negotiated = -1;
	/*
	 * A PMD without rte_flow answers every rule with ENOSYS: learn it once, so
	 * that channels go to software without a rule tried each, nor each one's
	 * overlap scan of every other channel (quadratic with 100,000 channels).
	 */
	p->flow_api = rte_flow_validate(p->port_id, &(struct rte_flow_attr){ .ingress = 1 },
					(const struct rte_flow_item[]){ { .type = RTE_FLOW_ITEM_TYPE_END } },
					(const struct rte_flow_action[]){ { .type = RTE_FLOW_ACTION_TYPE_END } },
					&err) != -ENOSYS;
	if (!port_offloads(d, pi))
		return 0;
	/* Bifurcated: only what flow rules take comes to DPDK; the rest stays with the kernel. */
	if (pc->bifurcated && rte_flow_isolate(p->port_id, 1, &err) != 0) {
		NCD_LOG(ERR, "port %s: exception mode bifurcated, but rte_flow_isolate: %s", pc->name,
			err.message != NULL ? err.message : rte_strerror(rte_errno));
		return -1;
	}
	ret = rte_eth_rx_metadata_negotiate(p->port_id, &features);
	if (ret == 0)
		p->mark_negotiated = (features & RTE_ETH_RX_METADATA_USER_MARK) != 0;
	/* -ENOTSUP: the PMD has nothing to negotiate; it may mark anyway. */
	p->marks = p->mark_negotiated != 0;
	if (d->mark_mock != NULL) {
		p->mock = rte_zmalloc("ncd_mock", sizeof(*p->mock), RTE_CACHE_LINE_SIZE);
		if (p->mock == NULL || mock_parse(d->mark_mock, p->mock) != 0) {
			NCD_LOG(ERR, "--mark-mock '%s': expected on, wrong=N, stale, noqueue "
				"(comma-separated)", d->mark_mock);
			return -1;
		}
		p->marks = true;
		p->flow_api = true;
	}
	return 0;
}

int
ncd_offload_start(struct ncd *d)
{
	for (unsigned int pi = 0; pi < d->cfg.nports; pi++) {
		struct ncd_port *p = &d->ports[pi];

		for (uint16_t q = 0; p->mock != NULL && q < d->cfg.ports[pi].rx_queues; q++)
			if (rte_eth_add_rx_callback(p->port_id, q, mock_rx, p->mock) == NULL) {
				NCD_LOG(ERR, "rte_eth_add_rx_callback(%s, %u): %s",
					d->cfg.ports[pi].name, q, rte_strerror(rte_errno));
				return -1;
			}
	}
	for (uint32_t i = 0; i < d->cfg.max_channels; i++)
		if (d->channels[i] != NULL && offload_all_ports(d, d->channels[i]) != 0)
			return -1;
	return 0;
}

static bool
offloaded_anywhere(const struct ncd *d)
{
	for (unsigned int pi = 0; pi < d->cfg.nports; pi++)
		if (d->ports[pi].flows > 0)
			return true;
	return false;
}

int
ncd_offload_prepare(struct ncd *d, const struct nc_trie_rule *rule, const char *name)
{
	for (unsigned int pi = 0; pi < d->cfg.nports; pi++) {
		struct ncd_flow_pattern pat[2];
		const char *why;

		if (!port_requires(d, pi))
			continue;
		if (ncd_flow_translate(rule, pat, &why) < 0) {
			NCD_LOG(ERR, "channel %s: port %s requires offload, but the rule has %s",
				name, d->cfg.ports[pi].name, why);
			return -ENOTSUP;
		}
		/* One of the two would have to stay in software. */
		for (uint32_t i = 0; i < d->cfg.max_channels; i++)
			if (d->channels[i] != NULL && ncd_rules_overlap(&d->channels[i]->rule, rule)) {
				NCD_LOG(ERR, "channel %s: port %s requires offload, but the rule "
					"overlaps channel %s", name, d->cfg.ports[pi].name,
					d->channels[i]->name);
				return -ENOTSUP;
			}
	}
	/* The new channel is the youngest: it wins over channels of lower priority. */
	if (!offloaded_anywhere(d))
		return 0;
	for (uint32_t i = 0; i < d->cfg.max_channels; i++) {
		struct ncd_channel *c = d->channels[i];

		if (c == NULL || c->rule.priority >= rule->priority ||
		    !ncd_rules_overlap(&c->rule, rule))
			continue;
		for (unsigned int pi = 0; pi < d->cfg.nports; pi++)
			if (c->off[pi].state == NCD_OFF_MARK || c->off[pi].state == NCD_OFF_MARK_QUEUE) {
				uninstall(d, pi, c);
				software(c, pi, true, "overlaps channel %s, which wins over it", name);
			}
	}
	return 0;
}

int
ncd_offload_add(struct ncd *d, struct ncd_channel *ch)
{
	/* Before the ports start, ncd_offload_start() does it. */
	if (!d->ports[0].started || closing)
		return 0;
	return offload_all_ports(d, ch);
}

void
ncd_offload_remove(struct ncd *d, struct ncd_channel *ch)
{
	for (unsigned int pi = 0; pi < d->cfg.nports; pi++)
		uninstall(d, pi, ch);
}

void
ncd_offload_refresh(struct ncd *d, const struct nc_trie_rule *gone)
{
	if (!d->ports[0].started || d->stop || closing)
		return;
	for (uint32_t i = 0; i < d->cfg.max_channels; i++) {
		struct ncd_channel *c = d->channels[i];

		if (c == NULL || !ncd_rules_overlap(&c->rule, gone))
			continue;
		for (unsigned int pi = 0; pi < d->cfg.nports; pi++)
			if (c->off[pi].beaten)
				offload_one(d, pi, c);
	}
}

void
ncd_offload_close(struct ncd *d)
{
	closing = true;
	for (uint32_t i = 0; i < d->cfg.max_channels; i++)
		if (d->channels[i] != NULL)
			ncd_offload_remove(d, d->channels[i]);
	for (unsigned int pi = 0; pi < d->cfg.nports; pi++) {
		rte_free(d->ports[pi].mock);
		d->ports[pi].mock = NULL;
	}
}

static int
channel_prepare(struct ncd *d, const struct ncd_channel_conf *cc)
{
	return ncd_offload_prepare(d, &cc->rule, cc->name);
}

static int
channel_added(struct ncd *d, struct ncd_channel *ch)
{
	return ncd_offload_add(d, ch) != 0 ? -1 : 0;
}

const struct ncd_channel_hooks ncd_offload_channel_hooks = {
	.prepare = channel_prepare,
	.added = channel_added,
	.leaving = ncd_offload_remove,
	.gone = ncd_offload_refresh,
};
