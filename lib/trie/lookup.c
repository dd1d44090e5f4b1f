/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Lookups: one key, or a burst in chunks of 32 (the front stage's tables pass by
 * pass, then the snapshot and the delta, or the trie, bounded by each key's best).
 */
#include <rte_acl.h>

#include "nc_trie_private.h"

struct ikey {
	uint64_t hi[F_NUM];
	uint64_t lo[2];
	uint8_t lim[F_NUM];   /* longest prefix this key can match, per field */
};

struct best {
	uint64_t rank;
	uint32_t rule;
};

static void
search(const struct nc_trie *t, unsigned int f, uint32_t idx, const struct ikey *k,
       struct best *b)
{
	const uint64_t hi = k->hi[f], lo = f < 2 ? k->lo[f] : 0;
	const unsigned int lim = k->lim[f];

	while (idx != NIL) {
		const struct node *n = N(t, idx);
		uint32_t nx;

		if (rank_load(&n->maxrank) <= b->rank || n->len > lim || !prefix_eq(hi, lo, n))
			return;
		nx = link_load(&n->next);
		if (nx != NIL) {
			if (f == F_PROTO) {
				const struct node *e = N(t, nx);

				if (e->maxrank > b->rank) {
					b->rank = e->maxrank;
					b->rule = e->next;
				}
			} else {
				search(t, f + 1, nx, k, b);
			}
		}
		if (n->len >= lim)
			return;
		idx = link_load(&n->child[bit_at(hi, lo, n->len)]);
	}
}

static inline void
key_convert(const struct nc_trie_key *key, struct ikey *k)
{
	unsigned int w = addr_width(key->family);
	uint8_t plim = (key->flags & NC_TRIE_KEY_F_NOPORTS) ? 0 : 16;

	addr_bits(&key->dst, key->family, &k->hi[F_DST], &k->lo[F_DST]);
	addr_bits(&key->src, key->family, &k->hi[F_SRC], &k->lo[F_SRC]);
	k->hi[F_DPORT] = (uint64_t)key->dport << 48;
	k->hi[F_SPORT] = (uint64_t)key->sport << 48;
	k->hi[F_PROTO] = (uint64_t)key->proto << 56;
	k->lim[F_DST] = k->lim[F_SRC] = (uint8_t)w;
	k->lim[F_DPORT] = k->lim[F_SPORT] = plim;
	k->lim[F_PROTO] = 8;
}

/* Chain heads of a table, or NULL before its first rule (published with release). */
static inline const uint32_t *
tuple_buckets(const struct tuple *tp)
{
	return __atomic_load_n(&tp->buckets, __ATOMIC_ACQUIRE);
}

/*
 * An entry's rule becomes the key's best if it matches and ranks higher.
 * Without a branch: which entries match is data, and a mispredicted branch
 * per probe cost more than the probe's loads.
 */
static __rte_always_inline void
best_take(struct best *b, const struct tentry *e, const bool match)
{
	uint64_t hit = -(uint64_t)((e->rank > b->rank) & match);

	b->rank = (e->rank & hit) | (b->rank & ~hit);
	b->rule = (e->rule & (uint32_t)hit) | (b->rule & ~(uint32_t)hit);
}

/* best_take() of an entry that matches when its words are the key's (v4 as in front_stage()). */
static __rte_always_inline void
entry_take(struct best *b, const struct tentry *e, const uint64_t w[5], const bool v4)
{
	best_take(b, e, words_eq(e->w, w, v4));
}

/* The rest of a chain, from head; v4 as in front_stage(). */
static __rte_always_inline void
tuple_probe(const struct nc_trie *t, uint32_t head, const uint64_t w[5], struct best *b,
	    const bool v4)
{
	for (uint32_t idx = head; idx != NIL;) {
		const struct tentry *e = &t->entries[idx];

		entry_take(b, e, w, v4);
		idx = link_load(&e->next);
	}
}

/*
 * A 56-byte entry straddles two lines at six of every eight indices, and
 * words_eq() reads both ends of it: fetch both, or the second is a miss
 * the probe waits for.
 */
static inline void
entry_prefetch(const struct nc_trie *t, uint32_t idx)
{
	const char *e = (const char *)&t->entries[idx];

	__builtin_prefetch(e);
	__builtin_prefetch(e + sizeof(struct tentry) - 1);
}

/* A key's addresses as the tables and the trie read them. */
struct kaddr {
	uint64_t dhi, dlo, shi, slo;
};

/*
 * The key's words as table i of its family (0 connected, 1 listener, 2 the
 * port table) masks them: the same words rule_words() makes of a rule.
 */
static inline void
key_words(const struct nc_trie_key *key, const struct kaddr *a, int i, uint64_t w[5])
{
	w[0] = i == TUPLE_PORT_SLOT ? 0 : a->dhi;
	w[1] = i == TUPLE_PORT_SLOT ? 0 : a->dlo;
	w[2] = i == TUPLE_CONNECTED ? a->shi : 0;
	w[3] = i == TUPLE_CONNECTED ? a->slo : 0;
	w[4] = tuple_ports(key->proto, key->dport, i == TUPLE_CONNECTED ? key->sport : 0);
}

/* A key's family's front-stage table i (see key_words()). */
static inline const struct tuple *
key_table(const struct nc_trie *t, unsigned int fam, int i)
{
	return i == TUPLE_PORT_SLOT ? &t->tuples[TUPLE_PORT] : &t->tuples[fam * TUPLE_SHAPES + i];
}

/* The trie from a family's root, after the front stage: best is the bound to beat. */
static inline void
trie_search(const struct nc_trie *t, const struct nc_trie_key *key, uint32_t root,
	    struct best *b)
{
	if (root != NIL) {
		struct ikey k;

		key_convert(key, &k);
		search(t, F_DST, root, &k, b);
	}
}

/* Whether a key can be looked up at all, and its family's index (0 IPv4, 1 IPv6). */
static inline bool
key_family(const struct nc_trie_key *key, unsigned int *fam)
{
	*fam = key->family == NC_TRIE_AF_INET6;
	return key->family == NC_TRIE_AF_INET || key->family == NC_TRIE_AF_INET6;
}

/* The front stage for one key of family fam (addresses a). */
static void
front_one(const struct nc_trie *t, const struct nc_trie_key *key, unsigned int fam,
	  const struct kaddr *a, struct best *b)
{
	/* Front-stage rules all name a dport: a key without ports cannot match them. */
	for (int i = 0; i < KEY_TABLES && !(key->flags & NC_TRIE_KEY_F_NOPORTS); i++) {
		const struct tuple *tp = key_table(t, fam, i);
		const uint32_t *bk = tuple_buckets(tp);
		uint64_t w[5];

		if (bk == NULL || rank_load(&tp->maxrank) <= b->rank)
			continue;
		key_words(key, a, i, w);
		tuple_probe(t, link_load(&bk[tuple_hash(w, false) & tp->mask]), w, b, false);
	}
}

uint32_t
nc_trie_lookup(const struct nc_trie *t, const struct nc_trie_key *key)
{
	struct best b = { 0, NC_TRIE_NOMATCH };
	unsigned int fam;
	struct kaddr a;

	if (snap_load(t) != NULL) {
		uint32_t r;

		nc_trie_lookup_bulk(t, key, &r, 1);
		return r;
	}
	if (!key_family(key, &fam))
		return NC_TRIE_NOMATCH;
	addr_bits(&key->dst, key->family, &a.dhi, &a.dlo);
	addr_bits(&key->src, key->family, &a.shi, &a.slo);
	front_one(t, key, fam, &a, &b);
	trie_search(t, key, link_load(&t->root[fam]), &b);
	return b.rule;
}

#define BULK_CHUNK 32

/* One pass of a bulk lookup: a family's table, as the pass reads it. */
struct pass_table {
	const uint32_t *bk;            /* chain heads, or NULL: nothing to probe */
	uint64_t maxrank;
	uint32_t mask;
	int shape;                     /* which of the family's tables (see key_words()) */
};

/*
 * Each family's tables by maxrank, best first; an empty one has no heads.
 * A table filled meanwhile may be missed, as by any lookup concurrent with
 * a rule's add.
 */
static void
pass_order(const struct nc_trie *t, struct pass_table pt[2][KEY_TABLES])
{
	for (unsigned int f = 0; f < 2; f++)
		for (int i = 0; i < KEY_TABLES; i++) {
			const struct tuple *tp = key_table(t, f, i);
			struct pass_table x = { tuple_buckets(tp), rank_load(&tp->maxrank), tp->mask, i };
			int j;

			if (x.maxrank == 0)
				x.bk = NULL;
			for (j = i; j > 0 && pt[f][j - 1].maxrank < x.maxrank; j--)
				pt[f][j] = pt[f][j - 1];
			pt[f][j] = x;
		}
}

/* A chunk's keys, as the front stage's passes read them. */
struct chunk {
	const struct nc_trie_key *k;
	unsigned int m;
	struct kaddr a[BULK_CHUNK];
	unsigned int fam[BULK_CHUNK];
	bool ok[BULK_CHUNK], front[BULK_CHUNK];
	struct best b[BULK_CHUNK];
};

/* Pass p's table for key i of a chunk: of its family's, or IPv4's in a v4 chunk. */
static __rte_always_inline const struct pass_table *
key_pass(const struct pass_table pt[2][KEY_TABLES], const struct chunk *c, unsigned int i, int p,
	 const bool v4)
{
	return &pt[v4 ? 0 : c->fam[i]][p];
}

/*
 * The front stage of a chunk: one pass per table, the best table first.
 * Within a pass, each step's memory misses (the bucket, the first entry,
 * the entry after it) overlap across the pass's keys. v4 is a constant at
 * each call: the chunk holds IPv4 keys with ports only, and the compiler
 * drops the other family's words.
 */
static __rte_always_inline void
front_stage(const struct nc_trie *t, const struct pass_table pt[2][KEY_TABLES], struct chunk *c,
	    const bool v4)
{
	/* The current pass: its keys, their words, bucket positions and chain heads. */
	uint8_t in[BULK_CHUNK];
	uint64_t w[BULK_CHUNK][5];
	uint32_t pos[BULK_CHUNK], head[BULK_CHUNK];

	for (int p = 0; p < KEY_TABLES; p++) {
		unsigned int np = 0;
		uint32_t more;            /* whether a key's chain goes on */

		if (pt[0][p].bk == NULL && (v4 || pt[1][p].bk == NULL))
			continue;
		/*
		 * The pass's keys. Whether a key's best can still improve is data
		 * (a fifth of keys in a second pass of the socket workload): the
		 * selection, like the probe steps below, takes no branch on it.
		 */
		for (unsigned int i = 0; i < c->m; i++) {
			const struct pass_table *x = key_pass(pt, c, i, p, v4);

			in[np] = (uint8_t)i;
			np += (v4 || c->front[i]) & (x->bk != NULL) & (x->maxrank > c->b[i].rank);
		}
		/* Their buckets. */
		for (unsigned int j = 0; j < np; j++) {
			unsigned int i = in[j];
			const struct pass_table *x = key_pass(pt, c, i, p, v4);

			key_words(&c->k[i], &c->a[i], x->shape, w[j]);
			pos[j] = tuple_hash(w[j], v4) & x->mask;
			__builtin_prefetch(&x->bk[pos[j]]);
		}
		/* The heads, and the first entries (the nil entry for an empty bucket). */
		for (unsigned int j = 0; j < np; j++) {
			head[j] = link_load(&key_pass(pt, c, in[j], p, v4)->bk[pos[j]]);
			entry_prefetch(t, head[j]);
		}
		/*
		 * The first entry, the key's own or a hash collision's (a third
		 * of probes at the tables' load), then the second, each with a
		 * prefetch of the next, so that their misses overlap across the
		 * pass's keys. The rest of a chain is rare. A step no key of the
		 * pass needs is skipped as a whole: one branch a pass, taken the
		 * same way pass after pass in a table with few collisions.
		 */
		more = 1;
		for (int step = 0; step < 2 && more != NIL; step++) {
			more = NIL;
			for (unsigned int j = 0; j < np; j++) {
				const struct tentry *e = &t->entries[head[j]];

				entry_take(&c->b[in[j]], e, w[j], v4);
				head[j] = link_load(&e->next);
				entry_prefetch(t, head[j]);
				more |= head[j];
			}
		}
		for (unsigned int j = 0; j < np && more != NIL; j++)
			if (unlikely(head[j] != NIL))
				tuple_probe(t, head[j], w[j], &c->b[in[j]], v4);
	}
}

/*
 * Take a context's answers res for keys idx: a dead one sends its key to the
 * trie, a live one is the key's best if it ranks higher. Without merge (one
 * context, no delta to bound), a key with nothing found yet takes the answer
 * as it is and leaves its rank unread: a miss, at 10^4 rules.
 */
static __rte_always_inline void
snap_take(const struct nct_snap *s, struct chunk *c, bool slow[], const uint8_t idx[],
	  const uint32_t res[], unsigned int n, const bool merge)
{
	for (unsigned int j = 0; j < n; j++) {
		struct best *b = &c->b[idx[j]];
		uint32_t id = res[j] - 1;
		uint64_t rank;

		if (res[j] == 0)
			continue;
		if (unlikely(snap_dead(s, id))) {
			slow[idx[j]] = true;
			continue;
		}
		if (b->rank == 0 && !merge) {
			b->rule = id;
			continue;
		}
		rank = s->rank[id];
		if (rank > b->rank)
			*b = (struct best){ rank, id };
	}
}

/*
 * The snapshot's answers for a chunk, after the front stage (or, with init,
 * in its place: the keys' family and best are set here, in the same pass).
 * slow[i]: key i must search the trie (no ports, or its snapshot answer was
 * deleted since); otherwise the delta (from droot) is all that is left.
 */
static __rte_always_inline void
snap_stage(const struct nct_snap *s, struct chunk *c, bool slow[], const uint32_t droot[2],
	   const bool init)
{
	struct nct_acl_key4 k4[BULK_CHUNK];
	struct nct_acl_key6 k6[BULK_CHUNK];
	const uint8_t *data[2][BULK_CHUNK];
	uint8_t idx[2][BULK_CHUNK];
	uint32_t res[BULK_CHUNK];
	unsigned int n[2] = { 0, 0 };

	for (unsigned int i = 0; i < c->m; i++) {
		const struct nc_trie_key *k = &c->k[i];
		unsigned int f;

		if (init) {
			c->ok[i] = key_family(k, &c->fam[i]);
			c->b[i] = (struct best){ 0, NC_TRIE_NOMATCH };
		}
		f = c->fam[i];
		slow[i] = c->ok[i] && (k->flags & NC_TRIE_KEY_F_NOPORTS);
		if (!c->ok[i] || slow[i] || s->nacl[f] == 0)
			continue;
		if (f == 0) {
			nct_acl_key4(k, &k4[n[0]]);
			data[0][n[0]] = (const uint8_t *)&k4[n[0]];
		} else {
			nct_acl_key6(k, &k6[n[1]]);
			data[1][n[1]] = (const uint8_t *)&k6[n[1]];
		}
		idx[f][n[f]++] = (uint8_t)i;
	}
	for (unsigned int f = 0; f < 2; f++)
		for (unsigned int x = 0; x < s->nacl[f] && n[f] > 0; x++) {
			/* One context (the rule): its answer needs no rank to merge. */
			const bool merge = s->nacl[f] > 1 || droot[f] != NIL;

			rte_acl_classify(s->acl[f][x], data[f], res, n[f], 1);
			snap_take(s, c, slow, idx[f], res, n[f], merge);
		}
}

/* A key the snapshot holds no answer for, from scratch: front stage and trie. */
static uint32_t
full_one(const struct nc_trie *t, const struct nc_trie_key *k, unsigned int fam,
	 const uint32_t root[2])
{
	struct best b = { 0, NC_TRIE_NOMATCH };
	struct kaddr a;

	addr_bits(&k->dst, k->family, &a.dhi, &a.dlo);
	addr_bits(&k->src, k->family, &a.shi, &a.slo);
	front_one(t, k, fam, &a, &b);
	trie_search(t, k, root[fam], &b);
	return b.rule;
}

/*
 * The common case of a snapshot of every rule, checked by the caller: one
 * context of family f and an empty delta of f. For a chunk of keys of f with
 * ports, rte_acl's answers are the results, but for dead ones; false if the
 * chunk has another key. Without the general path's bookkeeping per key (a
 * third of a lookup's time at 1,000 IPv4 rules, where rte_acl takes 15 ns a
 * key).
 */
static __rte_always_inline bool
snap_fast(const struct nc_trie *t, const struct nct_snap *s, const unsigned int f,
	  const struct nc_trie_key *keys, unsigned int m, uint32_t *results, const uint32_t root[2],
	  unsigned int *hits)
{
	union {
		struct nct_acl_key4 k4[BULK_CHUNK];
		struct nct_acl_key6 k6[BULK_CHUNK];
	} a;
	const uint8_t *data[BULK_CHUNK];
	const uint8_t family = f ? NC_TRIE_AF_INET6 : NC_TRIE_AF_INET;
	unsigned int ok = 1;

	for (unsigned int i = 0; i < m; i++) {
		ok &= (keys[i].family == family) & !(keys[i].flags & NC_TRIE_KEY_F_NOPORTS);
		data[i] = nct_acl_key(f, &keys[i], f ? (void *)&a.k6[i] : (void *)&a.k4[i]);
	}
	if (!ok)
		return false;
	rte_acl_classify(s->acl[f][0], data, results, m, 1);
	/*
	 * No rule of the snapshot dead once its answers are in: they stand (a
	 * delete after this load is one the lookup ran before, as with a dead
	 * bit read before it was set). A loop the compiler vectorises.
	 */
	if (__atomic_load_n(&s->ndead, __ATOMIC_ACQUIRE) == 0) {
		unsigned int h = 0;

		for (unsigned int i = 0; i < m; i++) {
			results[i]--;
			h += results[i] != NC_TRIE_NOMATCH;
		}
		*hits += h;
		return true;
	}
	for (unsigned int i = 0; i < m; i++) {
		/* userdata is id + 1, 0 for none: minus one, NC_TRIE_NOMATCH. */
		results[i]--;
		if (unlikely(results[i] != NC_TRIE_NOMATCH && snap_dead(s, results[i])))
			results[i] = full_one(t, &keys[i], f, root);
		*hits += results[i] != NC_TRIE_NOMATCH;
	}
	return true;
}

/*
 * After the front stage and the snapshot: the delta for the keys the
 * snapshot answered, the trie (and, when the snapshot holds every rule so
 * that the front stage was skipped, the front stage) for the others.
 */
static __rte_always_inline unsigned int
chunk_finish(const struct nc_trie *t, const struct nct_snap *s, struct chunk *c,
	     const bool slow[], const uint32_t root[2], const uint32_t droot[2], uint32_t *results)
{
	unsigned int hits = 0;

	for (unsigned int i = 0; i < c->m; i++) {
		const struct nc_trie_key *k = &c->k[i];

		if (!c->ok[i]) {
			;
		} else if (s != NULL && !slow[i]) {
			trie_search(t->delta, k, droot[c->fam[i]], &c->b[i]);
		} else if (s != NULL && s->all) {
			c->b[i].rule = full_one(t, k, c->fam[i], root);
		} else {
			trie_search(t, k, root[c->fam[i]], &c->b[i]);
		}
		results[i] = c->b[i].rule;
		hits += c->b[i].rule != NC_TRIE_NOMATCH;
	}
	return hits;
}

/*
 * The port table alone in the front stage, and no snapshot (a daemon that
 * serves a few ports, with or without rules of other shapes in the trie):
 * a key's words are its protocol and dport, one probe of one table a key,
 * then its family's trie, bounded by what the probe found. The passes'
 * bookkeeping (each chunk's families and bounds, each pass's selection of
 * keys and their five words) was half of such a lookup. A port entry's
 * address words are zero, as its key's: its last word decides. The buckets
 * of a chunk are asked for before any is read, as in front_stage().
 */
static unsigned int
port_only(const struct nc_trie *t, const uint32_t *bk, uint32_t mask,
	  const struct nc_trie_key *keys, uint32_t *results, unsigned int n, const uint32_t root[2])
{
	const uint64_t h0 = port_hash_base();
	unsigned int hits = 0;

	for (unsigned int base = 0; base < n; base += BULK_CHUNK) {
		const unsigned int m = n - base < BULK_CHUNK ? n - base : BULK_CHUNK;
		const struct nc_trie_key *k = &keys[base];
		uint64_t w4[BULK_CHUNK];
		uint32_t pos[BULK_CHUNK];

		for (unsigned int i = 0; i < m; i++) {
			w4[i] = tuple_ports(k[i].proto, k[i].dport, 0);
			pos[i] = port_hash(h0, w4[i]) & mask;
			__builtin_prefetch(&bk[pos[i]]);
		}
		for (unsigned int i = 0; i < m; i++) {
			struct best b = { 0, NC_TRIE_NOMATCH };
			unsigned int fam;

			if (!key_family(&k[i], &fam)) {
				results[base + i] = NC_TRIE_NOMATCH;
				continue;
			}
			/* Front-stage rules all name a dport: a key without ports cannot match them. */
			for (uint32_t idx = k[i].flags & NC_TRIE_KEY_F_NOPORTS ? NIL :
					    link_load(&bk[pos[i]]); idx != NIL;) {
				const struct tentry *e = &t->entries[idx];

				best_take(&b, e, e->w[4] == w4[i]);
				idx = link_load(&e->next);
			}
			trie_search(t, &k[i], root[fam], &b);
			results[base + i] = b.rule;
			hits += b.rule != NC_TRIE_NOMATCH;
		}
	}
	return hits;
}

/*
 * Bulk lookup, a chunk of keys at a time: the front stage (the table of
 * the highest maxrank first, and a later table only for the keys whose
 * best so far it can still beat: where connected sockets outrank
 * listeners, as in a stack and in the socket workload, a connected hit
 * never touches the listener table), then the snapshot and the delta, or
 * the trie, with each key's best as its pruning bound. A snapshot of every
 * rule takes the front stage's place.
 */
unsigned int
nc_trie_lookup_bulk(const struct nc_trie *t, const struct nc_trie_key *keys, uint32_t *results,
		    unsigned int n)
{
	struct pass_table pt[2][KEY_TABLES];
	struct chunk c;
	bool slow[BULK_CHUNK];
	unsigned int hits = 0;

	/* As with the tables, a trie filled meanwhile may be missed. */
	const uint32_t root[2] = { link_load(&t->root[0]), link_load(&t->root[1]) };
	/* The delta after the snapshot: it holds whatever that snapshot lacks. */
	const struct nct_snap *s = snap_load(t);
	const uint32_t droot[2] = { s != NULL ? link_load(&t->delta->root[0]) : NIL,
				    s != NULL ? link_load(&t->delta->root[1]) : NIL };

	if (s != NULL && s->all) {
		const bool fast4 = s->nacl[0] == 1 && droot[0] == NIL;
		const bool fast6 = s->nacl[1] == 1 && droot[1] == NIL;

		for (unsigned int base = 0; base < n; base += BULK_CHUNK) {
			c.k = &keys[base];
			c.m = n - base < BULK_CHUNK ? n - base : BULK_CHUNK;
			if (fast4 && c.k[0].family == NC_TRIE_AF_INET &&
			    snap_fast(t, s, 0, c.k, c.m, &results[base], root, &hits))
				continue;
			if (fast6 && c.k[0].family == NC_TRIE_AF_INET6 &&
			    snap_fast(t, s, 1, c.k, c.m, &results[base], root, &hits))
				continue;
			snap_stage(s, &c, slow, droot, true);
			hits += chunk_finish(t, s, &c, slow, root, droot, &results[base]);
		}
		return hits;
	}
	pass_order(t, pt);
	/*
	 * Only the connected and listener tables read the addresses: the port
	 * table's rules, the trie (which converts its own) and an empty front
	 * stage do not, and a miss or a port rule's hit then skips the swaps.
	 */
	bool addr = false, front = false;

	for (unsigned int f = 0; f < 2; f++)
		for (int p = 0; p < KEY_TABLES; p++) {
			addr |= pt[f][p].bk != NULL && pt[f][p].shape != TUPLE_PORT_SLOT;
			front |= pt[f][p].bk != NULL;
		}
	if (front && !addr && s == NULL) {
		const struct tuple *tp = &t->tuples[TUPLE_PORT];
		const uint32_t *bk = tuple_buckets(tp);

		/* Emptied since pass_order() saw it: the trie alone, below. */
		if (bk != NULL)
			return port_only(t, bk, tp->mask, keys, results, n, root);
	}
	/* Nothing in the front stage and no snapshot: the trie alone, a key at a time. */
	if (!front && s == NULL) {
		for (unsigned int i = 0; i < n; i++) {
			struct best b = { 0, NC_TRIE_NOMATCH };
			unsigned int fam;

			if (key_family(&keys[i], &fam))
				trie_search(t, &keys[i], root[fam], &b);
			results[i] = b.rule;
			hits += b.rule != NC_TRIE_NOMATCH;
		}
		return hits;
	}
	for (unsigned int base = 0; base < n; base += BULK_CHUNK) {
		bool v4 = true;

		c.k = &keys[base];
		c.m = n - base < BULK_CHUNK ? n - base : BULK_CHUNK;
		for (unsigned int i = 0; i < c.m; i++) {
			const struct nc_trie_key *k = &c.k[i];

			c.ok[i] = key_family(k, &c.fam[i]);
			/* Front-stage rules all name a dport: a key without ports cannot match them. */
			c.front[i] = c.ok[i] && !(k->flags & NC_TRIE_KEY_F_NOPORTS);
			v4 &= c.front[i] && c.fam[i] == 0;
			c.b[i] = (struct best){ 0, NC_TRIE_NOMATCH };
			if (c.ok[i] && addr) {
				addr_bits(&k->dst, k->family, &c.a[i].dhi, &c.a[i].dlo);
				addr_bits(&k->src, k->family, &c.a[i].shi, &c.a[i].slo);
			}
		}
		if (v4)
			front_stage(t, pt, &c, true);
		else
			front_stage(t, pt, &c, false);
		if (s != NULL)
			snap_stage(s, &c, slow, droot, false);
		hits += chunk_finish(t, s, &c, slow, root, droot, &results[base]);
	}
	return hits;
}
