/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * NAT's reverse mappings. Workers add a mapping when a flow's first packet
 * is translated and look replies up; the control thread expires them. The
 * rte_hash is lock-free for readers, and with RW_CONCURRENCY_LF a deleted
 * key's slot stays reserved until it is freed explicitly: the control thread
 * frees it after a grace period, so no worker still reading the mapping sees
 * it reused. A slot's state says whether its mapping is whole (workers fill
 * it after the add, with a compare-and-swap so two workers never both do).
 */
#include <errno.h>
#include <string.h>

#include <rte_cycles.h>
#include <rte_hash.h>
#include <rte_hash_crc.h>
#include <rte_malloc.h>
#include <rte_rcu_qsbr.h>

#include "nat/nat.h"
#include "ncd.h"

struct ncd_nat_table ncd_nat_table;

#define SCAN_MS 100                    /* the control thread looks for idle mappings this often */

void
ncd_nat_set_idle(struct ncd *d, uint32_t ms)
{
	d->cfg.nat_idle_ms = ms;
	d->nat->idle_cycles = rte_get_tsc_hz() / 1000 * ms;
}

int
ncd_nat_init(struct ncd *d)
{
	struct ncd_nat_table *t = d->nat;
	struct rte_hash_parameters hp = {
		.name = "ncd_nat",
		.entries = d->cfg.nat_flows,
		.key_len = sizeof(struct ncd_nat_key),
		.hash_func = rte_hash_crc,
		.socket_id = (int)rte_socket_id(),
		.extra_flag = RTE_HASH_EXTRA_FLAGS_RW_CONCURRENCY_LF |
			      RTE_HASH_EXTRA_FLAGS_MULTI_WRITER_ADD | RTE_HASH_EXTRA_FLAGS_EXT_TABLE,
	};
	int32_t max;

	t->capacity = d->cfg.nat_flows;
	ncd_nat_set_idle(d, d->cfg.nat_idle_ms);
	t->h = rte_hash_create(&hp);
	if (t->h == NULL) {
		NCD_LOG(ERR, "rte_hash_create(ncd_nat, %u flows): %s", hp.entries,
			rte_strerror(rte_errno));
		return -1;
	}
	max = rte_hash_max_key_id(t->h);
	t->nslots = (uint32_t)max + 1;
	t->flows = rte_zmalloc("ncd_nat_flows", (size_t)t->nslots * sizeof(*t->flows),
			       RTE_CACHE_LINE_SIZE);
	t->live = rte_zmalloc("ncd_nat_live", (size_t)d->cfg.max_channels * sizeof(*t->live), 0);
	if (max < 0 || t->flows == NULL || t->live == NULL) {
		NCD_LOG(ERR, "NAT flow table (%u slots): out of memory", t->nslots);
		return -1;
	}
	return 0;
}

void
ncd_nat_close(struct ncd *d)
{
	rte_hash_free(d->nat->h);
	d->nat->h = NULL;
	rte_free(d->nat->flows);
	d->nat->flows = NULL;
	rte_free(d->nat->live);
	d->nat->live = NULL;
}

/* Free deleted mappings' slots once no worker can still be reading them. */
static void
release(struct ncd *d, const int32_t *dead, unsigned int n)
{
	if (n == 0)
		return;
	/* Workers that found them before the delete are done with them after this. */
	rte_rcu_qsbr_synchronize(d->qsbr, RTE_QSBR_THRID_INVALID);
	for (unsigned int i = 0; i < n; i++) {
		rte_hash_free_key_with_position(d->nat->h, dead[i]);
		__atomic_store_n(&d->nat->flows[dead[i]].state, NCD_NATF_FREE, __ATOMIC_RELEASE);
	}
	__atomic_fetch_sub(&d->nat->used, n, __ATOMIC_RELAXED);
}

void
ncd_nat_expire(struct ncd *d, bool force)
{
	struct ncd_nat_table *t = d->nat;
	uint64_t now = rte_get_tsc_cycles();
	int32_t dead[256];
	unsigned int ndead = 0;

	/* Nothing to look for: no mapping, and no channel that makes them. */
	if (t->h == NULL || (!force && now < t->next_scan) ||
	    (__atomic_load_n(&t->used, __ATOMIC_RELAXED) == 0 && d->nat_reverse == 0))
		return;
	t->next_scan = now + rte_get_tsc_hz() / 1000 * SCAN_MS;
	for (uint32_t pos = 0; pos < t->nslots; pos++) {
		struct ncd_nat_flow *f = &t->flows[pos];
		uint32_t st = __atomic_load_n(&f->state, __ATOMIC_ACQUIRE);
		bool gone;

		if (st != NCD_NATF_LIVE)
			continue;
		gone = !ncd_nat_flow_alive(d->channels, f);
		if (!gone && now - __atomic_load_n(&f->last, __ATOMIC_RELAXED) < t->idle_cycles)
			continue;
		/* Out of the hash: no new lookup finds it; the slot stays reserved. */
		__atomic_store_n(&f->state, NCD_NATF_DEAD, __ATOMIC_RELEASE);
		if (rte_hash_del_key(t->h, &f->key) != (int32_t)pos)
			NCD_LOG(WARNING, "NAT mapping %u: not in the table where expected", pos);
		if (gone) {
			t->gone++;
		} else {
			/* Its channel's share; a gone channel's id starts again from 0 when reused. */
			__atomic_fetch_sub(&t->live[f->chan], 1, __ATOMIC_RELAXED);
			t->expired++;
		}
		dead[ndead++] = (int32_t)pos;
		if (ndead == RTE_DIM(dead)) {
			release(d, dead, ndead);
			ndead = 0;
		}
	}
	release(d, dead, ndead);
}

json_t *
ncd_view_nat(const struct ncd *d)
{
	const struct ncd_nat_table *t = d->nat;
	uint32_t nat = 0, rev = 0;

	for (uint32_t i = 0; i < d->cfg.max_channels; i++)
		if (d->channels[i] != NULL && d->channels[i]->action == NC_ACTION_NAT) {
			nat++;
			rev += d->channels[i]->nat.reverse;
		}
	return json_pack("{s:i, s:i, s:i, s:I, s:I, s:I, s:i, s:i}", "capacity", (int)t->capacity,
			 "flows_per_channel", (int)d->cfg.nat_flows_per_channel, "used",
			 (int)__atomic_load_n(&t->used, __ATOMIC_RELAXED), "expired",
			 (json_int_t)t->expired, "gone", (json_int_t)t->gone, "idle_timeout_ms",
			 (json_int_t)d->cfg.nat_idle_ms, "channels", (int)nat, "reverse_channels",
			 (int)rev);
}

/* The mappings of a channel that had the id before are not this one's. */
static void
channel_init(struct ncd *d, struct ncd_channel *ch)
{
	if (d->nat->live != NULL)
		__atomic_store_n(&d->nat->live[ch->id], 0, __ATOMIC_RELAXED);
}

/* Workers start looking replies up before the first packet that makes a mapping. */
static int
channel_added(struct ncd *d, struct ncd_channel *ch)
{
	if (ch->action == NC_ACTION_NAT && ch->nat.reverse)
		__atomic_fetch_add(&d->nat_reverse, 1, __ATOMIC_RELEASE);
	return 0;
}

/* Its reverse mappings go now, not when they would have been idle long enough. */
static void
channel_left(struct ncd *d, const struct ncd_channel *ch)
{
	if (ch->action == NC_ACTION_NAT && ch->nat.reverse) {
		__atomic_fetch_sub(&d->nat_reverse, 1, __ATOMIC_RELAXED);
		ncd_nat_expire(d, true);
	}
}

const struct ncd_channel_hooks ncd_nat_channel_hooks = {
	.init = channel_init,
	.added = channel_added,
	.left = channel_left,
};
