/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The front stage: exact-match tables of netchanneld's common rule shapes
 * (connected, listener, port), probed before the trie.
 */
#include "nc_trie_private.h"

/* The rank of the rule being added: priority first, then age (t->seq moves on after it). */
uint64_t
nct_next_rank(const struct nc_trie *t, uint32_t priority)
{
	return ((uint64_t)priority << SEQ_BITS) | (SEQ_MAX - t->seq);
}

/* Which front-stage table takes a (normalized) rule, or IN_TRIE. */
unsigned int
nct_rule_tuple(const struct nc_trie_rule *r)
{
	unsigned int w = addr_width(r->family), fam = r->family == NC_TRIE_AF_INET6;
	uint16_t lo, hi, slo, shi;

	if (r->proto_mask != 0xff)
		return IN_TRIE;
	nc_trie_port_range(&r->dport, &lo, &hi);
	if (lo != hi)
		return IN_TRIE;
	nc_trie_port_range(&r->sport, &slo, &shi);
	if (r->family == NC_TRIE_AF_ANY)
		return r->dst_len == 0 && r->src_len == 0 && slo == 0 && shi == UINT16_MAX ?
		       TUPLE_PORT : IN_TRIE;
	if (r->dst_len != w)
		return IN_TRIE;
	if (r->src_len == w && slo == shi)
		return fam * TUPLE_SHAPES + TUPLE_CONNECTED;
	if (r->src_len == 0 && slo == 0 && shi == UINT16_MAX)
		return fam * TUPLE_SHAPES + TUPLE_LISTENER;
	return IN_TRIE;
}

static void
rule_words(const struct nc_trie_rule *r, unsigned int tuple, uint64_t w[5])
{
	uint16_t dport, sport, hi;

	nc_trie_port_range(&r->dport, &dport, &hi);
	if (tuple == TUPLE_PORT) {
		w[0] = w[1] = w[2] = w[3] = 0;
		w[4] = tuple_ports(r->proto, dport, 0);
		return;
	}
	addr_bits(&r->dst, r->family, &w[0], &w[1]);
	if (tuple % TUPLE_SHAPES == TUPLE_CONNECTED) {
		addr_bits(&r->src, r->family, &w[2], &w[3]);
		nc_trie_port_range(&r->sport, &sport, &hi);
	} else {
		w[2] = w[3] = 0;
		sport = 0;
	}
	w[4] = tuple_ports(r->proto, dport, sport);
}

/* Rebuild the rule a front-stage entry stands for. */
void
nct_entry_rule(const struct nc_trie *t, uint32_t id, struct nc_trie_rule *r)
{
	const struct rule_slot *sl = &t->rules[id];
	const struct tentry *e = &t->entries[sl->u.entry];
	unsigned int fam = sl->tuple / TUPLE_SHAPES;
	uint64_t hi;

	memset(r, 0, sizeof(*r));
	r->family = sl->tuple == TUPLE_PORT ? NC_TRIE_AF_ANY :
		    fam ? NC_TRIE_AF_INET6 : NC_TRIE_AF_INET;
	for (int i = 0; i < 2 && sl->tuple != TUPLE_PORT; i++) {
		union nc_trie_addr *a = i ? &r->src : &r->dst;

		if (i && sl->tuple % TUPLE_SHAPES == TUPLE_LISTENER)
			break;
		if (fam) {
			hi = htobe64(e->w[2 * i]);
			memcpy(a->a, &hi, 8);
			hi = htobe64(e->w[2 * i + 1]);
			memcpy(a->a + 8, &hi, 8);
		} else {
			a->v4 = htonl((uint32_t)(e->w[2 * i] >> 32));
		}
		*(i ? &r->src_len : &r->dst_len) = (uint8_t)addr_width(r->family);
		if (i) {
			r->sport.kind = NC_TRIE_PORT_RANGE;
			r->sport.lo = r->sport.hi = (uint16_t)e->w[4];
		}
	}
	r->proto = (uint8_t)(e->w[4] >> 32);
	r->proto_mask = 0xff;
	r->dport.kind = NC_TRIE_PORT_RANGE;
	r->dport.lo = r->dport.hi = (uint16_t)(e->w[4] >> 16);
	r->priority = (uint32_t)(sl->rank >> SEQ_BITS);
}

int
nct_tuple_add(struct nc_trie *t, unsigned int ti, const struct nc_trie_rule *r, uint32_t id,
	  uint64_t *rank_out)
{
	struct tuple *tp = &t->tuples[ti];
	uint64_t w[5];
	uint32_t b, idx;
	struct tentry *e;

	rule_words(r, ti, w);
	if (tp->buckets == NULL) {
		uint32_t n = 1;

		while (n < t->max_rules)
			n <<= 1;
		uint32_t *bk = calloc(n, sizeof(*bk));

		if (bk == NULL)
			return -ENOSPC;
		tp->mask = n - 1;
		/* Release: readers that see the array see its mask and zeroed heads. */
		__atomic_store_n(&tp->buckets, bk, __ATOMIC_RELEASE);
	}
	b = tuple_hash(w, false) & tp->mask;
	for (idx = tp->buckets[b]; idx != NIL; idx = t->entries[idx].next)
		if (words_eq(t->entries[idx].w, w, false) &&
		    t->entries[idx].rank >> SEQ_BITS == r->priority)
			return -EEXIST;
	/*
	 * The array holds max_rules entries, and deleted rules' entries wait for
	 * a grace period while their ids are free again: at capacity, take them
	 * back first (waiting for the readers if need be), never write past it.
	 */
	if (!nct_reclaim_for(t, nct_entry_room, 1))
		return -ENOSPC;
	if (t->ent_free != NIL) {
		idx = t->ent_free;
		t->ent_free = t->entries[idx].next;
	} else {
		idx = t->ent_hwm++;
	}
	*rank_out = nct_next_rank(t, r->priority);
	e = &t->entries[idx];
	memcpy(e->w, w, sizeof(e->w));
	e->rank = *rank_out;
	e->rule = id;
	e->next = tp->buckets[b];
	link_store(&tp->buckets[b], idx);
	if (tp->maxrank < e->rank)
		rank_store(&tp->maxrank, e->rank);
	tp->count++;
	t->rules[id].u.entry = idx;
	return 0;
}

void
nct_tuple_delete(struct nc_trie *t, uint32_t id)
{
	struct rule_slot *sl = &t->rules[id];
	struct tuple *tp = &t->tuples[sl->tuple];
	uint32_t *link = &tp->buckets[tuple_hash(t->entries[sl->u.entry].w, false) & tp->mask];

	while (*link != sl->u.entry)
		link = &t->entries[*link].next;
	link_store(link, t->entries[*link].next);
	t->scratch[t->nscratch++] = sl->u.entry | DQ_ENTRY;
	/* maxrank stays an upper bound; it is exact again once the table empties. */
	if (--tp->count == 0)
		rank_store(&tp->maxrank, 0);
}
