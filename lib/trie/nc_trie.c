/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The netchannels classifier: a chain of per-field tries, in the seed's order
 * daddr -> saddr -> dport -> sport -> proto.
 *
 * Each field has a path-compressed binary trie over its bits. A node holds
 * the full prefix it stands for, so a link may skip any number of bits and a
 * lookup checks the prefix at every node. A node where a rule's prefix for
 * this field ends has "next": the root of the next field's trie holding the
 * rules that share this prefix (the seed's wildcard point). Below the last
 * field, "next" is the head of a list of rule entries sorted best first.
 *
 * Lookup walks the key's path in the first field and, at every node with a
 * "next", searches the next field's trie (the seed's backtracking). Every
 * node carries maxrank, the best rank anywhere beneath it, so the search
 * skips whatever cannot beat the best match found so far.
 *
 * A rank is (priority << 40) | (2^40 - 1 - sequence): higher priority wins,
 * then the older rule. Ranks are unique, so answers are deterministic.
 *
 * Port ranges are expanded to prefixes; a rule with several prefixes (and a
 * family-agnostic rule, which lives under both roots) has several entries.
 *
 * Front stage (tuple space search, as in OVS): rules of netchanneld's two
 * common shapes, a connected socket (exact 5-tuple) and a listener (exact
 * destination, dport and protocol, any source), go to one exact-match hash
 * table per shape and family instead of the trie. A lookup probes the tables
 * whose best rank can still win, then searches the trie with that best rank
 * as its pruning bound, so the answer is the same as with the trie alone.
 *
 * Memory: all nodes live in one array reserved up front (MAP_NORESERVE, so
 * only what is used is backed), addressed by 32-bit index; index 0 is nil.
 * Nodes never move, which keeps readers lock-free: the writer publishes a
 * fully built node with a release store, and an unlinked node keeps its
 * contents until an RCU grace period has passed.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <arpa/inet.h>

#include <numa.h>
#include <rte_branch_prediction.h>
#include <rte_rcu_qsbr.h>

#include "nc_trie.h"

#define NIL 0u

enum field { F_DST, F_SRC, F_DPORT, F_SPORT, F_PROTO, F_NUM, F_RULE = F_NUM };

struct node {
	uint64_t maxrank;     /* best rank beneath; for an entry, its rank */
	uint64_t hi, lo;      /* prefix bits, left aligned, zero past len */
	uint32_t child[2];    /* entry: child[0] is the next entry */
	uint32_t next;        /* next field's root; for an entry, the rule id */
	uint8_t len;          /* prefix length */
	uint8_t field;        /* enum field */
	uint16_t unused;
};

struct pool {
	struct node *base;
	size_t map_size;
	uint32_t cap;         /* nodes reserved, index 0 included */
	uint32_t hwm;         /* nodes ever handed out, index 0 included */
	uint32_t free_head;   /* free list through child[0] */
	uint32_t nfree;
};

struct deferred {
	uint32_t idx;
	uint64_t token;
};

/* Front-stage entry: the masked key, its rank and rule, and the hash chain. */
struct tentry {
	uint64_t w[5];        /* dst hi, dst lo, src hi, src lo, proto|dport|sport */
	uint64_t rank;
	uint32_t rule;
	uint32_t next;
};

enum { TUPLE_CONNECTED, TUPLE_LISTENER, TUPLE_SHAPES };
#define NTUPLES (2 * TUPLE_SHAPES)   /* per family */
/* A port of any family: exact protocol and dport, nothing else ("udp dport 53"). */
#define TUPLE_PORT NTUPLES
#define NTABLES (NTUPLES + 1)
#define IN_TRIE NTABLES              /* rule_slot.tuple of a rule in the trie */
/* The tables a key probes: its family's connected and listener tables, and the port table. */
#define KEY_TABLES 3
#define TUPLE_PORT_SLOT 2            /* the port table's place among a key's tables */

struct tuple {
	uint32_t *buckets;    /* chain heads, entry indices */
	uint32_t mask;
	uint32_t count;
	uint64_t maxrank;     /* upper bound of the ranks in the table */
};

/*
 * A trie rule keeps its full copy (needed to find its entries again); a
 * front-stage rule is rebuilt from its entry, which keeps slots small.
 */
struct rule_slot {
	uint64_t rank;
	union {
		struct nc_trie_rule *full;
		uint32_t entry;
	} u;
	uint8_t used;
	uint8_t tuple;        /* its table, or IN_TRIE */
};

/* Deferred objects: nodes, or front-stage entries with this bit set. */
#define DQ_ENTRY 0x80000000u

struct nc_trie {
	char name[NC_TRIE_NAMESIZE];
	int socket_id;
	uint32_t max_rules;
	uint32_t root[2];             /* dst trie of IPv4, of IPv6 */
	struct pool pool;
	struct rule_slot *rules;
	uint32_t *free_ids;           /* stack of unused rule ids */
	uint32_t nfree_ids;
	uint64_t seq;
	struct rte_rcu_qsbr *qsbr;
	struct deferred *dq;          /* FIFO of nodes waiting for a grace period */
	uint32_t dq_head, dq_len, dq_cap;
	uint32_t *scratch;            /* nodes unlinked by the current delete */
	uint32_t nscratch, scratch_cap;
	struct tuple tuples[NTABLES];
	/*
	 * Front-stage entries. Index 0 is nil and stays all zero: a probe may
	 * read it for an empty bucket or a chain's end, and its rank 0 never wins.
	 */
	struct tentry *entries;
	size_t entries_map_size;
	uint32_t ent_hwm, ent_free;   /* free list through next */
	uint32_t ntrie_rules;
};

/* Each entry adds at most a branch and a leaf per field, plus its list entry. */
#define NODES_PER_ENTRY (2 * F_NUM + 1)
#define MAX_PORT_PREFIXES 30
#define SEQ_BITS 40
#define SEQ_MAX ((UINT64_C(1) << SEQ_BITS) - 1)
#define MAX_RULES (UINT32_C(1) << 24)
#define NODES_PER_RULE 64

struct prefix {
	uint64_t hi, lo;
	uint8_t len;
};

/* One entry of a rule: its family root and one prefix per field. */
struct entry {
	unsigned int fam;
	struct prefix p[F_NUM];
};

static inline struct node *
N(const struct nc_trie *t, uint32_t idx)
{
	return &t->pool.base[idx];
}

static inline uint64_t
mask_hi(unsigned int len)
{
	return len >= 64 ? UINT64_MAX : ~(UINT64_MAX >> len);
}

static inline uint64_t
mask_lo(unsigned int len)
{
	if (len <= 64)
		return 0;
	return len >= 128 ? UINT64_MAX : ~(UINT64_MAX >> (len - 64));
}

static inline unsigned int
bit_at(uint64_t hi, uint64_t lo, unsigned int pos)
{
	return pos < 64 ? (hi >> (63 - pos)) & 1 : (lo >> (127 - pos)) & 1;
}

static inline bool
prefix_eq(uint64_t hi, uint64_t lo, const struct node *n)
{
	return (((hi ^ n->hi) & mask_hi(n->len)) | ((lo ^ n->lo) & mask_lo(n->len))) == 0;
}

static unsigned int
common_len(uint64_t ahi, uint64_t alo, uint64_t bhi, uint64_t blo)
{
	if (ahi != bhi)
		return __builtin_clzll(ahi ^ bhi);
	if (alo != blo)
		return 64 + __builtin_clzll(alo ^ blo);
	return 128;
}

static uint64_t
load64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return be64toh(v);
}

static void
addr_bits(const union nc_trie_addr *a, unsigned int fam, uint64_t *hi, uint64_t *lo)
{
	if (fam == NC_TRIE_AF_INET6) {
		*hi = load64(a->a);
		*lo = load64(a->a + 8);
	} else {
		*hi = (uint64_t)ntohl(a->v4) << 32;
		*lo = 0;
	}
}

static unsigned int
addr_width(unsigned int fam)
{
	return fam == NC_TRIE_AF_INET6 ? 128 : 32;
}

/* ---- semantics ---------------------------------------------------------- */

static bool
mask8_ok(uint8_t m)
{
	uint8_t inv = (uint8_t)~m;

	return (inv & (uint8_t)(inv + 1)) == 0;
}

static bool
mask16_ok(uint16_t m)
{
	uint16_t inv = (uint16_t)~m;

	return (inv & (uint16_t)(inv + 1)) == 0;
}

void
nc_trie_port_range(const struct nc_trie_port *p, uint16_t *lo, uint16_t *hi)
{
	switch (p->kind) {
	case NC_TRIE_PORT_RANGE:
		*lo = p->lo;
		*hi = p->hi;
		break;
	case NC_TRIE_PORT_MASK:
		*lo = p->lo & p->hi;
		*hi = *lo | (uint16_t)~p->hi;
		break;
	default:
		*lo = 0;
		*hi = UINT16_MAX;
	}
}

int
nc_trie_rule_validate(const struct nc_trie_rule *r)
{
	unsigned int w;

	if (r == NULL)
		return -EINVAL;
	switch (r->family) {
	case NC_TRIE_AF_ANY:
		if (r->dst_len || r->src_len)
			return -EINVAL;
		break;
	case NC_TRIE_AF_INET:
	case NC_TRIE_AF_INET6:
		w = addr_width(r->family);
		if (r->dst_len > w || r->src_len > w)
			return -EINVAL;
		break;
	default:
		return -EINVAL;
	}
	if (!mask8_ok(r->proto_mask))
		return -EINVAL;
	for (int i = 0; i < 2; i++) {
		const struct nc_trie_port *p = i ? &r->sport : &r->dport;

		switch (p->kind) {
		case NC_TRIE_PORT_ANY:
			break;
		case NC_TRIE_PORT_RANGE:
			if (p->lo > p->hi)
				return -EINVAL;
			break;
		case NC_TRIE_PORT_MASK:
			if (!mask16_ok(p->hi))
				return -EINVAL;
			break;
		default:
			return -EINVAL;
		}
	}
	if (r->priority > NC_TRIE_PRIO_MAX)
		return -EINVAL;
	return 0;
}

static bool
addr_match(const union nc_trie_addr *pfx, unsigned int len, const union nc_trie_addr *a,
	   unsigned int fam)
{
	uint64_t ph, pl, ah, al;

	addr_bits(pfx, fam, &ph, &pl);
	addr_bits(a, fam, &ah, &al);
	return (((ph ^ ah) & mask_hi(len)) | ((pl ^ al) & mask_lo(len))) == 0;
}

static bool
port_match(const struct nc_trie_port *p, uint16_t port, bool noports)
{
	uint16_t lo, hi;

	nc_trie_port_range(p, &lo, &hi);
	if (lo == 0 && hi == UINT16_MAX)
		return true;
	return !noports && port >= lo && port <= hi;
}

int
nc_trie_rule_matches(const struct nc_trie_rule *r, const struct nc_trie_key *k)
{
	bool noports = k->flags & NC_TRIE_KEY_F_NOPORTS;

	if (r->family != NC_TRIE_AF_ANY && r->family != k->family)
		return 0;
	if (((r->proto ^ k->proto) & r->proto_mask) != 0)
		return 0;
	if (r->family != NC_TRIE_AF_ANY &&
	    (!addr_match(&r->dst, r->dst_len, &k->dst, k->family) ||
	     !addr_match(&r->src, r->src_len, &k->src, k->family)))
		return 0;
	return port_match(&r->dport, k->dport, noports) &&
	       port_match(&r->sport, k->sport, noports);
}

int
nc_trie_rules_overlap(const struct nc_trie_rule *a, const struct nc_trie_rule *b)
{
	uint16_t alo, ahi, blo, bhi;

	if (a->family != NC_TRIE_AF_ANY && b->family != NC_TRIE_AF_ANY && a->family != b->family)
		return 0;
	if (((a->proto ^ b->proto) & a->proto_mask & b->proto_mask) != 0)
		return 0;
	/* Two prefixes meet when the shorter one matches the longer one's address. */
	if (a->family != NC_TRIE_AF_ANY && b->family != NC_TRIE_AF_ANY) {
		const struct nc_trie_rule *sd = a->dst_len <= b->dst_len ? a : b;
		const struct nc_trie_rule *ss = a->src_len <= b->src_len ? a : b;

		if (!addr_match(&sd->dst, sd->dst_len, sd == a ? &b->dst : &a->dst, a->family) ||
		    !addr_match(&ss->src, ss->src_len, ss == a ? &b->src : &a->src, a->family))
			return 0;
	}
	for (int i = 0; i < 2; i++) {
		nc_trie_port_range(i ? &a->sport : &a->dport, &alo, &ahi);
		nc_trie_port_range(i ? &b->sport : &b->dport, &blo, &bhi);
		if (alo > bhi || blo > ahi)
			return 0;
	}
	return 1;
}

/* Copy a valid rule with its values masked, so equal rules compare equal. */
static void
rule_normalize(struct nc_trie_rule *out, const struct nc_trie_rule *r)
{
	memset(out, 0, sizeof(*out));
	out->family = r->family;
	out->proto_mask = r->proto_mask;
	out->proto = r->proto & r->proto_mask;
	out->dst_len = r->dst_len;
	out->src_len = r->src_len;
	for (int i = 0; i < 2; i++) {
		const union nc_trie_addr *a = i ? &r->src : &r->dst;
		union nc_trie_addr *o = i ? &out->src : &out->dst;
		unsigned int len = i ? r->src_len : r->dst_len;
		unsigned int bytes = r->family == NC_TRIE_AF_INET6 ? 16 : 4;

		for (unsigned int b = 0; b < bytes && b * 8 < len; b++) {
			unsigned int keep = len - b * 8 >= 8 ? 8 : len - b * 8;

			o->a[b] = a->a[b] & (uint8_t)(0xff << (8 - keep));
		}
	}
	for (int i = 0; i < 2; i++) {
		const struct nc_trie_port *p = i ? &r->sport : &r->dport;
		struct nc_trie_port *o = i ? &out->sport : &out->dport;

		o->kind = p->kind;
		if (p->kind == NC_TRIE_PORT_RANGE) {
			o->lo = p->lo;
			o->hi = p->hi;
		} else if (p->kind == NC_TRIE_PORT_MASK) {
			o->lo = p->lo & p->hi;
			o->hi = p->hi;
		}
	}
	out->priority = r->priority;
}

static bool
rule_same(const struct nc_trie_rule *a, const struct nc_trie_rule *b)
{
	uint16_t alo, ahi, blo, bhi;

	if (a->family != b->family || a->proto != b->proto || a->proto_mask != b->proto_mask ||
	    a->dst_len != b->dst_len || a->src_len != b->src_len || a->priority != b->priority ||
	    memcmp(&a->dst, &b->dst, sizeof(a->dst)) || memcmp(&a->src, &b->src, sizeof(a->src)))
		return false;
	for (int i = 0; i < 2; i++) {
		nc_trie_port_range(i ? &a->sport : &a->dport, &alo, &ahi);
		nc_trie_port_range(i ? &b->sport : &b->dport, &blo, &bhi);
		if (alo != blo || ahi != bhi)
			return false;
	}
	return true;
}

/* Split an inclusive range into the fewest aligned prefixes. */
static unsigned int
port_prefixes(const struct nc_trie_port *p, struct prefix *out)
{
	uint16_t lo16, hi16;
	uint32_t lo, hi;
	unsigned int n = 0;

	nc_trie_port_range(p, &lo16, &hi16);
	lo = lo16;
	hi = hi16;
	while (lo <= hi) {
		unsigned int k = lo ? (unsigned int)__builtin_ctz(lo) : 16;

		if (k > 16)
			k = 16;
		while (k > 0 && lo + (UINT32_C(1) << k) - 1 > hi)
			k--;
		out[n].hi = (uint64_t)lo << 48;
		out[n].lo = 0;
		out[n].len = (uint8_t)(16 - k);
		n++;
		lo += UINT32_C(1) << k;
	}
	return n;
}

/*
 * Call fn for every entry of a rule (families x dport prefixes x sport
 * prefixes). Stops at the first non-zero return and returns it.
 */
static int
rule_foreach_entry(const struct nc_trie_rule *r, int (*fn)(void *, const struct entry *),
		   void *arg)
{
	struct prefix dp[MAX_PORT_PREFIXES], sp[MAX_PORT_PREFIXES];
	unsigned int nd = port_prefixes(&r->dport, dp);
	unsigned int ns = port_prefixes(&r->sport, sp);
	struct entry e;
	int ret;

	for (unsigned int fam = 0; fam < 2; fam++) {
		unsigned int af = fam ? NC_TRIE_AF_INET6 : NC_TRIE_AF_INET;

		if (r->family != NC_TRIE_AF_ANY && r->family != af)
			continue;
		e.fam = fam;
		addr_bits(&r->dst, af, &e.p[F_DST].hi, &e.p[F_DST].lo);
		e.p[F_DST].len = r->dst_len;
		addr_bits(&r->src, af, &e.p[F_SRC].hi, &e.p[F_SRC].lo);
		e.p[F_SRC].len = r->src_len;
		e.p[F_PROTO].hi = (uint64_t)r->proto << 56;
		e.p[F_PROTO].lo = 0;
		e.p[F_PROTO].len = (uint8_t)__builtin_popcount(r->proto_mask);
		for (unsigned int i = 0; i < nd; i++) {
			e.p[F_DPORT] = dp[i];
			for (unsigned int j = 0; j < ns; j++) {
				e.p[F_SPORT] = sp[j];
				ret = fn(arg, &e);
				if (ret)
					return ret;
			}
		}
	}
	return 0;
}

static unsigned int
rule_nentries(const struct nc_trie_rule *r)
{
	struct prefix tmp[MAX_PORT_PREFIXES];
	unsigned int fams = r->family == NC_TRIE_AF_ANY ? 2 : 1;

	return fams * port_prefixes(&r->dport, tmp) * port_prefixes(&r->sport, tmp);
}

/* ---- node pool and deferred reuse -------------------------------------- */

static int
pool_init(struct pool *p, uint32_t cap, int socket_id)
{
	p->map_size = (size_t)cap * sizeof(struct node);
	p->base = mmap(NULL, p->map_size, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p->base == MAP_FAILED)
		return -ENOMEM;
	if (socket_id >= 0 && numa_available() >= 0)
		numa_tonode_memory(p->base, p->map_size, socket_id);
	p->cap = cap;
	p->hwm = 1; /* index 0 is nil */
	p->free_head = NIL;
	p->nfree = 0;
	return 0;
}

static inline uint32_t
pool_avail(const struct pool *p)
{
	return p->cap - p->hwm + p->nfree;
}

/* Callers have checked pool_avail(). */
static uint32_t
node_alloc(struct nc_trie *t, unsigned int field, uint64_t hi, uint64_t lo, unsigned int len)
{
	struct pool *p = &t->pool;
	uint32_t idx;
	struct node *n;

	if (p->free_head != NIL) {
		idx = p->free_head;
		p->free_head = N(t, idx)->child[0];
		p->nfree--;
	} else {
		idx = p->hwm++;
	}
	n = N(t, idx);
	n->maxrank = 0;
	n->hi = hi & mask_hi(len);
	n->lo = lo & mask_lo(len);
	n->child[0] = n->child[1] = NIL;
	n->next = NIL;
	n->len = (uint8_t)len;
	n->field = (uint8_t)field;
	return idx;
}

static void
node_release(struct nc_trie *t, uint32_t idx)
{
	N(t, idx)->child[0] = t->pool.free_head;
	t->pool.free_head = idx;
	t->pool.nfree++;
}

static void
entry_release(struct nc_trie *t, uint32_t idx)
{
	t->entries[idx].next = t->ent_free;
	t->ent_free = idx;
}

/* Readers load links with acquire: a node is fully built before it is linked. */
static inline uint32_t
link_load(const uint32_t *link)
{
	return __atomic_load_n(link, __ATOMIC_ACQUIRE);
}

/* Release: the node's contents are visible before any reader can reach it. */
static inline void
link_store(uint32_t *link, uint32_t idx)
{
	__atomic_store_n(link, idx, __ATOMIC_RELEASE);
}

/*
 * maxrank only prunes: a stale value makes a reader miss a rule that is being
 * added, or search a little more, never lose an unchanged rule. Relaxed.
 */
static inline uint64_t
rank_load(const uint64_t *r)
{
	return __atomic_load_n(r, __ATOMIC_RELAXED);
}

static inline void
rank_store(uint64_t *r, uint64_t v)
{
	__atomic_store_n(r, v, __ATOMIC_RELAXED);
}

/* Room for every node a delete may unlink, taken before it touches anything. */
static int
scratch_reserve(struct nc_trie *t, uint64_t need)
{
	uint32_t *s;

	if (need <= t->scratch_cap)
		return 0;
	s = realloc(t->scratch, need * sizeof(*s));
	if (s == NULL)
		return -ENOMEM;
	t->scratch = s;
	t->scratch_cap = (uint32_t)need;
	return 0;
}

static int
dq_reserve(struct nc_trie *t, uint32_t more)
{
	uint32_t cap = t->dq_cap ? t->dq_cap : 256;
	struct deferred *q;

	if (t->dq_len + more <= t->dq_cap)
		return 0;
	while (cap < t->dq_len + more)
		cap *= 2;
	q = malloc(cap * sizeof(*q));
	if (q == NULL)
		return -ENOMEM;
	for (uint32_t i = 0; i < t->dq_len; i++)
		q[i] = t->dq[(t->dq_head + i) % t->dq_cap];
	free(t->dq);
	t->dq = q;
	t->dq_head = 0;
	t->dq_cap = cap;
	return 0;
}

int
nc_trie_reclaim(struct nc_trie *t, int wait)
{
	int n = 0;

	if (t == NULL)
		return -EINVAL;
	while (t->dq_len > 0) {
		struct deferred *d = &t->dq[t->dq_head];

		if (t->qsbr != NULL && rte_rcu_qsbr_check(t->qsbr, d->token, wait != 0) != 1)
			break;
		if (d->idx & DQ_ENTRY)
			entry_release(t, d->idx & ~DQ_ENTRY);
		else
			node_release(t, d->idx);
		t->dq_head = (t->dq_head + 1) % t->dq_cap;
		t->dq_len--;
		n++;
	}
	return n;
}

static bool
node_room(const struct nc_trie *t, uint64_t need)
{
	return need <= pool_avail(&t->pool);
}

static bool
entry_room(const struct nc_trie *t, uint64_t need)
{
	(void)need;
	return t->ent_free != NIL || t->ent_hwm <= t->max_rules;
}

/*
 * Whether there is room (has_room(t, need)) once what deletes left for a
 * grace period is taken back: first what is already past it, then, if
 * still short, after waiting for the readers.
 */
static bool
reclaim_for(struct nc_trie *t, bool (*has_room)(const struct nc_trie *, uint64_t), uint64_t need)
{
	if (!has_room(t, need))
		nc_trie_reclaim(t, 0);
	if (!has_room(t, need) && t->dq_len > 0)
		nc_trie_reclaim(t, 1);
	return has_room(t, need);
}

/* Hand the nodes the current delete unlinked to the pool, after a grace period. */
static void
scratch_retire(struct nc_trie *t)
{
	uint64_t token;

	if (t->nscratch == 0)
		return;
	if (t->qsbr == NULL || dq_reserve(t, t->nscratch) != 0) {
		/* No readers to wait for, or no memory to queue: wait now. */
		if (t->qsbr != NULL)
			rte_rcu_qsbr_synchronize(t->qsbr, RTE_QSBR_THRID_INVALID);
		for (uint32_t i = 0; i < t->nscratch; i++)
			if (t->scratch[i] & DQ_ENTRY)
				entry_release(t, t->scratch[i] & ~DQ_ENTRY);
			else
				node_release(t, t->scratch[i]);
	} else {
		token = rte_rcu_qsbr_start(t->qsbr);
		for (uint32_t i = 0; i < t->nscratch; i++) {
			struct deferred *d = &t->dq[(t->dq_head + t->dq_len) % t->dq_cap];

			d->idx = t->scratch[i];
			d->token = token;
			t->dq_len++;
		}
	}
	t->nscratch = 0;
}

/* ---- create / free ------------------------------------------------------ */

struct nc_trie *
nc_trie_create(const struct nc_trie_config *cfg)
{
	struct nc_trie *t;
	uint64_t cap;

	if (cfg == NULL || cfg->name == NULL || cfg->name[0] == '\0' ||
	    strlen(cfg->name) >= NC_TRIE_NAMESIZE || cfg->max_rules == 0 ||
	    cfg->max_rules > MAX_RULES) {
		errno = EINVAL;
		return NULL;
	}
	t = calloc(1, sizeof(*t));
	if (t == NULL)
		goto out_nomem;
	snprintf(t->name, sizeof(t->name), "%s", cfg->name);
	t->socket_id = cfg->socket_id;
	t->max_rules = cfg->max_rules;
	t->rules = calloc(cfg->max_rules, sizeof(*t->rules));
	t->free_ids = malloc(cfg->max_rules * sizeof(*t->free_ids));
	if (t->rules == NULL || t->free_ids == NULL)
		goto out_free_tables;
	/* Lowest ids first: the stack pops its top. */
	for (uint32_t i = 0; i < cfg->max_rules; i++)
		t->free_ids[i] = cfg->max_rules - 1 - i;
	t->nfree_ids = cfg->max_rules;
	cap = (uint64_t)cfg->max_rules * NODES_PER_RULE + 4096;
	if (pool_init(&t->pool, (uint32_t)cap, cfg->socket_id) != 0)
		goto out_free_tables;
	/* Like the node pool: reserved, backed as it is used. */
	t->entries_map_size = ((size_t)cfg->max_rules + 1) * sizeof(*t->entries);
	t->entries = mmap(NULL, t->entries_map_size, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (t->entries == MAP_FAILED)
		goto out_unmap_pool;
	if (cfg->socket_id >= 0 && numa_available() >= 0)
		numa_tonode_memory(t->entries, t->entries_map_size, cfg->socket_id);
	t->ent_hwm = 1;
	return t;

out_unmap_pool:
	munmap(t->pool.base, t->pool.map_size);
out_free_tables:
	free(t->free_ids);
	free(t->rules);
	free(t);
out_nomem:
	errno = ENOMEM;
	return NULL;
}

void
nc_trie_free(struct nc_trie *t)
{
	if (t == NULL)
		return;
	for (unsigned int i = 0; i < NTABLES; i++)
		free(t->tuples[i].buckets);
	for (uint32_t i = 0; i < t->max_rules; i++)
		if (t->rules[i].used && t->rules[i].tuple == IN_TRIE)
			free(t->rules[i].u.full);
	munmap(t->entries, t->entries_map_size);
	munmap(t->pool.base, t->pool.map_size);
	free(t->dq);
	free(t->scratch);
	free(t->free_ids);
	free(t->rules);
	free(t);
}

int
nc_trie_rcu_qsbr_add(struct nc_trie *t, struct rte_rcu_qsbr *v)
{
	if (t == NULL)
		return -EINVAL;
	if (v == NULL) {
		nc_trie_reclaim(t, 1);
		t->qsbr = NULL;
		return 0;
	}
	if (t->qsbr != NULL)
		return -EEXIST;
	t->qsbr = v;
	return 0;
}

/* ---- insertion ---------------------------------------------------------- */

/* Find or create the node for prefix p in the trie hanging from *link. */
static uint32_t
field_insert(struct nc_trie *t, unsigned int field, uint32_t *link, const struct prefix *p)
{
	for (;;) {
		uint32_t idx = *link;
		struct node *n;
		unsigned int c;

		if (idx == NIL) {
			uint32_t m = node_alloc(t, field, p->hi, p->lo, p->len);

			link_store(link, m);
			return m;
		}
		n = N(t, idx);
		c = common_len(p->hi, p->lo, n->hi, n->lo);
		if (c > p->len)
			c = p->len;
		if (c >= n->len) {
			if (p->len == n->len)
				return idx;
			link = &n->child[bit_at(p->hi, p->lo, n->len)];
			continue;
		}
		/* p and n diverge above n: a new node takes n's place. */
		if (c == p->len) {
			uint32_t m = node_alloc(t, field, p->hi, p->lo, p->len);

			N(t, m)->child[bit_at(n->hi, n->lo, c)] = idx;
			N(t, m)->maxrank = n->maxrank;
			link_store(link, m);
			return m;
		} else {
			uint32_t b = node_alloc(t, field, p->hi, p->lo, c);
			uint32_t leaf = node_alloc(t, field, p->hi, p->lo, p->len);

			N(t, b)->child[bit_at(n->hi, n->lo, c)] = idx;
			N(t, b)->child[bit_at(p->hi, p->lo, c)] = leaf;
			N(t, b)->maxrank = n->maxrank;
			link_store(link, b);
			return leaf;
		}
	}
}

/* The node for prefix p in the trie hanging from link, or NIL. */
static uint32_t
field_find(const struct nc_trie *t, uint32_t link, const struct prefix *p)
{
	while (link != NIL) {
		const struct node *n = N(t, link);

		if (n->len > p->len || !prefix_eq(p->hi, p->lo, n))
			return NIL;
		if (n->len == p->len)
			return link;
		link = n->child[bit_at(p->hi, p->lo, n->len)];
	}
	return NIL;
}

struct add_ctx {
	struct nc_trie *t;
	const struct nc_trie_rule *rule;
	uint32_t id;
	uint64_t rank;
};

static int
entry_insert(void *arg, const struct entry *e)
{
	struct add_ctx *a = arg;
	struct nc_trie *t = a->t;
	uint32_t *link = &t->root[e->fam];
	uint32_t idx = NIL, m;

	for (unsigned int f = 0; f < F_NUM; f++) {
		idx = field_insert(t, f, link, &e->p[f]);
		link = &N(t, idx)->next;
	}
	while (*link != NIL && N(t, *link)->maxrank > a->rank)
		link = &N(t, *link)->child[0];
	m = node_alloc(t, F_RULE, 0, 0, 0);
	N(t, m)->maxrank = a->rank;
	N(t, m)->next = a->id;
	N(t, m)->child[0] = *link;
	link_store(link, m);

	/* Raise maxrank along the path, now that the entry is reachable. */
	idx = t->root[e->fam];
	for (unsigned int f = 0; f < F_NUM; f++) {
		for (;;) {
			struct node *n = N(t, idx);

			if (n->maxrank < a->rank)
				rank_store(&n->maxrank, a->rank);
			if (n->len == e->p[f].len)
				break;
			idx = n->child[bit_at(e->p[f].hi, e->p[f].lo, n->len)];
		}
		idx = N(t, idx)->next;
	}
	return 0;
}

/* -EEXIST if a rule with the same fields and priority is in the table. */
static int
entry_check_dup(void *arg, const struct entry *e)
{
	struct add_ctx *a = arg;
	const struct nc_trie *t = a->t;
	uint32_t idx = t->root[e->fam];

	for (unsigned int f = 0; f < F_NUM && idx != NIL; f++) {
		idx = field_find(t, idx, &e->p[f]);
		if (idx == NIL)
			return 0;
		idx = N(t, idx)->next;
	}
	for (; idx != NIL; idx = N(t, idx)->child[0])
		if (rule_same(t->rules[N(t, idx)->next].u.full, a->rule))
			return -EEXIST;
	/* The first entry decides: equal rules have equal first entries. */
	return 1;
}

/* ---- front stage -------------------------------------------------------- */

/* The rank of the rule being added: priority first, then age (t->seq moves on after it). */
static inline uint64_t
next_rank(const struct nc_trie *t, uint32_t priority)
{
	return ((uint64_t)priority << SEQ_BITS) | (SEQ_MAX - t->seq);
}

/* Which front-stage table takes a (normalized) rule, or IN_TRIE. */
static unsigned int
rule_tuple(const struct nc_trie_rule *r)
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

static inline uint64_t
tuple_ports(uint8_t proto, uint16_t dport, uint16_t sport)
{
	return (uint64_t)proto << 32 | (uint32_t)dport << 16 | sport;
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

static inline uint64_t
hash_step(uint64_t h, uint64_t w)
{
#ifdef __SSE4_2__
	return __builtin_ia32_crc32di(h, w);
#else
	return ((h ^ w) * UINT64_C(0x9e3779b97f4a7c15)) >> 17 ^ h;
#endif
}

/*
 * The low words of IPv4 addresses are always zero: skip them (same hash per
 * table). v4: the caller knows them zero (IPv4 keys in IPv4 and port
 * tables), so a chunk of IPv4 keys hashes and compares three words, not five.
 */
static inline uint32_t
tuple_hash(const uint64_t w[5], const bool v4)
{
	uint64_t h = hash_step(hash_step(0, w[0]), w[2]);

	if (!v4 && (w[1] | w[3]) != 0)
		h = hash_step(hash_step(h, w[1]), w[3]);
	return (uint32_t)hash_step(h, w[4]);
}

static inline bool
words_eq(const uint64_t a[5], const uint64_t b[5], const bool v4)
{
	uint64_t d = (a[0] ^ b[0]) | (a[2] ^ b[2]) | (a[4] ^ b[4]);

	return (v4 ? d : d | (a[1] ^ b[1]) | (a[3] ^ b[3])) == 0;
}

/* Rebuild the rule a front-stage entry stands for. */
static void
entry_rule(const struct nc_trie *t, uint32_t id, struct nc_trie_rule *r)
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

static int
tuple_add(struct nc_trie *t, unsigned int ti, const struct nc_trie_rule *r, uint32_t id,
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
	if (!reclaim_for(t, entry_room, 1))
		return -ENOSPC;
	if (t->ent_free != NIL) {
		idx = t->ent_free;
		t->ent_free = t->entries[idx].next;
	} else {
		idx = t->ent_hwm++;
	}
	*rank_out = next_rank(t, r->priority);
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

static void
tuple_delete(struct nc_trie *t, uint32_t id)
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

int
nc_trie_add(struct nc_trie *t, const struct nc_trie_rule *r)
{
	struct nc_trie_rule nr;
	struct add_ctx a;
	unsigned int ti;
	uint64_t need;
	int ret;

	if (t == NULL || nc_trie_rule_validate(r) != 0)
		return -EINVAL;
	if (t->nfree_ids == 0 || t->seq > SEQ_MAX)
		return -ENOSPC;
	rule_normalize(&nr, r);
	a.t = t;
	a.id = t->free_ids[t->nfree_ids - 1];
	a.rule = &nr;
	ti = rule_tuple(&nr);
	if (ti != IN_TRIE) {
		ret = tuple_add(t, ti, &nr, a.id, &a.rank);
		if (ret)
			return ret;
	} else {
		need = (uint64_t)rule_nentries(&nr) * NODES_PER_ENTRY;
		if (!reclaim_for(t, node_room, need))
			return -ENOSPC;
		ret = rule_foreach_entry(&nr, entry_check_dup, &a);
		if (ret < 0)
			return ret;
		t->rules[a.id].u.full = malloc(sizeof(nr));
		if (t->rules[a.id].u.full == NULL)
			return -ENOSPC;
		*t->rules[a.id].u.full = nr;
		a.rank = next_rank(t, r->priority);
		rule_foreach_entry(&nr, entry_insert, &a);
		t->ntrie_rules++;
	}
	t->nfree_ids--;
	t->seq++;
	t->rules[a.id].rank = a.rank;
	t->rules[a.id].tuple = (uint8_t)ti;
	t->rules[a.id].used = 1;
	return (int)a.id;
}

/* ---- deletion ----------------------------------------------------------- */

/* Longest path: every bit of every field, plus a root per field. */
#define MAX_PATH (129 + 129 + 17 + 17 + 9)

struct path_step {
	uint32_t *link;
	uint32_t idx;
	bool gone;
};

static uint64_t
node_best(const struct nc_trie *t, const struct node *n)
{
	uint64_t m = 0;

	for (int i = 0; i < 2; i++)
		if (n->child[i] != NIL && N(t, n->child[i])->maxrank > m)
			m = N(t, n->child[i])->maxrank;
	/* Below the last field, next is the best entry; above, a subtrie root. */
	if (n->next != NIL && N(t, n->next)->maxrank > m)
		m = N(t, n->next)->maxrank;
	return m;
}

static int
entry_remove(void *arg, const struct entry *e)
{
	struct add_ctx *a = arg;
	struct nc_trie *t = a->t;
	struct path_step path[MAX_PATH];
	unsigned int np = 0;
	uint32_t *link = &t->root[e->fam];
	struct node *n = NULL;

	for (unsigned int f = 0; f < F_NUM; f++) {
		for (;;) {
			n = N(t, *link);
			path[np++] = (struct path_step){ link, *link, false };
			if (n->len == e->p[f].len)
				break;
			link = &n->child[bit_at(e->p[f].hi, e->p[f].lo, n->len)];
		}
		link = &n->next;
	}
	while (N(t, *link)->next != a->id)
		link = &N(t, *link)->child[0];
	t->scratch[t->nscratch++] = *link;
	link_store(link, N(t, *link)->child[0]);

	/* Bottom up: unlink nodes that hold no rule and no longer branch. */
	for (unsigned int i = np; i-- > 0;) {
		n = N(t, path[i].idx);
		if (n->next != NIL || (n->child[0] != NIL && n->child[1] != NIL))
			continue;
		link_store(path[i].link, n->child[0] != NIL ? n->child[0] : n->child[1]);
		path[i].gone = true;
		t->scratch[t->nscratch++] = path[i].idx;
	}
	for (unsigned int i = np; i-- > 0;)
		if (!path[i].gone) {
			n = N(t, path[i].idx);
			rank_store(&n->maxrank, node_best(t, n));
		}
	return 0;
}

int
nc_trie_delete(struct nc_trie *t, uint32_t id)
{
	struct rule_slot *sl;
	struct add_ctx a;
	uint64_t need;

	if (t == NULL || id >= t->max_rules)
		return -EINVAL;
	sl = &t->rules[id];
	if (!sl->used)
		return -ENOENT;
	need = sl->tuple != IN_TRIE ? 1 : (uint64_t)rule_nentries(sl->u.full) * NODES_PER_ENTRY;
	if (scratch_reserve(t, need))
		return -ENOMEM;
	if (sl->tuple != IN_TRIE) {
		tuple_delete(t, id);
	} else {
		a.t = t;
		a.id = id;
		a.rank = sl->rank;
		rule_foreach_entry(sl->u.full, entry_remove, &a);
		free(sl->u.full);
		t->ntrie_rules--;
	}
	scratch_retire(t);
	sl->used = 0;
	t->free_ids[t->nfree_ids++] = id;
	nc_trie_reclaim(t, 0);
	return 0;
}

int
nc_trie_get_rule(const struct nc_trie *t, uint32_t id, struct nc_trie_rule *r)
{
	if (t == NULL || r == NULL || id >= t->max_rules)
		return -EINVAL;
	if (!t->rules[id].used)
		return -ENOENT;
	if (t->rules[id].tuple != IN_TRIE)
		entry_rule(t, id, r);
	else
		*r = *t->rules[id].u.full;
	return 0;
}

/* ---- lookup ------------------------------------------------------------- */

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
entry_take(struct best *b, const struct tentry *e, const uint64_t w[5], const bool v4)
{
	uint64_t hit = -(uint64_t)((e->rank > b->rank) &
				   words_eq(e->w, w, v4));

	b->rank = (e->rank & hit) | (b->rank & ~hit);
	b->rule = (e->rule & (uint32_t)hit) | (b->rule & ~(uint32_t)hit);
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

uint32_t
nc_trie_lookup(const struct nc_trie *t, const struct nc_trie_key *key)
{
	struct best b = { 0, NC_TRIE_NOMATCH };
	unsigned int fam;
	struct kaddr a;

	if (!key_family(key, &fam))
		return NC_TRIE_NOMATCH;
	addr_bits(&key->dst, key->family, &a.dhi, &a.dlo);
	addr_bits(&key->src, key->family, &a.shi, &a.slo);
	/* Front-stage rules all name a dport: a key without ports cannot match them. */
	for (int i = 0; i < KEY_TABLES && !(key->flags & NC_TRIE_KEY_F_NOPORTS); i++) {
		const struct tuple *tp = key_table(t, fam, i);
		const uint32_t *bk = tuple_buckets(tp);
		uint64_t w[5];

		if (bk == NULL || rank_load(&tp->maxrank) <= b.rank)
			continue;
		key_words(key, &a, i, w);
		tuple_probe(t, link_load(&bk[tuple_hash(w, false) & tp->mask]), w, &b, false);
	}
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
 * Bulk lookup, a chunk of keys at a time: the front stage (the table of
 * the highest maxrank first, and a later table only for the keys whose
 * best so far it can still beat: where connected sockets outrank
 * listeners, as in a stack and in the socket workload, a connected hit
 * never touches the listener table), then the trie, with each key's best as
 * its pruning bound.
 */
unsigned int
nc_trie_lookup_bulk(const struct nc_trie *t, const struct nc_trie_key *keys, uint32_t *results,
		    unsigned int n)
{
	struct pass_table pt[2][KEY_TABLES];
	struct chunk c;
	unsigned int hits = 0;

	/* As with the tables, a trie filled meanwhile may be missed. */
	const uint32_t root[2] = { link_load(&t->root[0]), link_load(&t->root[1]) };

	pass_order(t, pt);
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
			if (c.ok[i]) {
				addr_bits(&k->dst, k->family, &c.a[i].dhi, &c.a[i].dlo);
				addr_bits(&k->src, k->family, &c.a[i].shi, &c.a[i].slo);
			}
		}
		if (v4)
			front_stage(t, pt, &c, true);
		else
			front_stage(t, pt, &c, false);
		for (unsigned int i = 0; i < c.m; i++) {
			if (c.ok[i])
				trie_search(t, &c.k[i], root[c.fam[i]], &c.b[i]);
			results[base + i] = c.b[i].rule;
			hits += c.b[i].rule != NC_TRIE_NOMATCH;
		}
	}
	return hits;
}

/* ---- introspection ------------------------------------------------------ */

int
nc_trie_get_stats(const struct nc_trie *t, struct nc_trie_stats *s)
{
	if (t == NULL || s == NULL)
		return -EINVAL;
	memset(s, 0, sizeof(*s));
	s->rules = t->max_rules - t->nfree_ids;
	s->exact_rules = s->rules - t->ntrie_rules;
	s->nodes = t->pool.hwm - 1 - t->pool.nfree;
	s->deferred = t->dq_len;
	s->bytes = sizeof(*t) + (uint64_t)t->pool.hwm * sizeof(struct node) +
		   (uint64_t)t->ent_hwm * sizeof(struct tentry) +
		   (uint64_t)t->ntrie_rules * sizeof(struct nc_trie_rule) +
		   (uint64_t)t->max_rules * (sizeof(*t->rules) + sizeof(*t->free_ids)) +
		   (uint64_t)t->dq_cap * sizeof(*t->dq) + (uint64_t)t->scratch_cap * sizeof(uint32_t);
	for (unsigned int i = 0; i < NTABLES; i++)
		if (t->tuples[i].buckets != NULL) {
			s->tuples++;
			s->bytes += ((uint64_t)t->tuples[i].mask + 1) * sizeof(uint32_t);
		}
	return 0;
}

static const char *const field_names[] = { "dst", "src", "dport", "sport", "proto" };

static void
format_prefix(const struct node *n, char *buf, size_t size, unsigned int fam)
{
	uint8_t a[16];
	uint64_t hi = htobe64(n->hi), lo = htobe64(n->lo);

	switch (n->field) {
	case F_DST:
	case F_SRC:
		memcpy(a, &hi, 8);
		memcpy(a + 8, &lo, 8);
		inet_ntop(fam ? AF_INET6 : AF_INET, a, buf, (socklen_t)size);
		snprintf(buf + strlen(buf), size - strlen(buf), "/%u", n->len);
		break;
	case F_DPORT:
	case F_SPORT:
		snprintf(buf, size, "%u/%u", (unsigned int)(n->hi >> 48), n->len);
		break;
	default:
		snprintf(buf, size, "%u/%u", (unsigned int)(n->hi >> 56), n->len);
	}
}

static void
dump_trie(const struct nc_trie *t, FILE *f, uint32_t idx, unsigned int depth, unsigned int fam)
{
	const struct node *n;
	char buf[64];

	if (idx == NIL)
		return;
	n = N(t, idx);
	format_prefix(n, buf, sizeof(buf), fam);
	fprintf(f, "%*s%s %s maxrank=%#" PRIx64 "%s\n", (int)depth * 2, "", field_names[n->field],
		buf, n->maxrank, n->next != NIL ? " *" : "");
	if (n->field == F_PROTO)
		for (uint32_t e = n->next; e != NIL; e = N(t, e)->child[0])
			fprintf(f, "%*srule %u rank=%#" PRIx64 "\n", (int)(depth + 1) * 2, "",
				N(t, e)->next, N(t, e)->maxrank);
	else
		dump_trie(t, f, n->next, depth + 1, fam);
	dump_trie(t, f, n->child[0], depth + 1, fam);
	dump_trie(t, f, n->child[1], depth + 1, fam);
}

int
nc_trie_dump(const struct nc_trie *t, FILE *f)
{
	struct nc_trie_stats s;

	if (t == NULL || f == NULL)
		return -EINVAL;
	nc_trie_get_stats(t, &s);
	fprintf(f, "nc_trie %s: %u rules (%u exact), %u nodes, %" PRIu64 " bytes, %u deferred\n",
		t->name, s.rules, s.exact_rules, s.nodes, s.bytes, s.deferred);
	for (unsigned int i = 0; i < NTABLES; i++)
		if (t->tuples[i].buckets != NULL)
			fprintf(f, "exact table %s %s: %u rules, %u buckets\n",
				i == TUPLE_PORT ? "any" : i / TUPLE_SHAPES ? "ipv6" : "ipv4",
				i == TUPLE_PORT ? "port" :
				i % TUPLE_SHAPES == TUPLE_CONNECTED ? "connected" : "listener",
				t->tuples[i].count, t->tuples[i].mask + 1);
	for (unsigned int fam = 0; fam < 2; fam++) {
		fprintf(f, "%s:\n", fam ? "ipv6" : "ipv4");
		dump_trie(t, f, t->root[fam], 1, fam);
	}
	return 0;
}

static int
format_port(char *buf, size_t size, const char *name, const struct nc_trie_port *p)
{
	switch (p->kind) {
	case NC_TRIE_PORT_RANGE:
		if (p->lo == p->hi)
			return snprintf(buf, size, " %s %u", name, p->lo);
		return snprintf(buf, size, " %s %u-%u", name, p->lo, p->hi);
	case NC_TRIE_PORT_MASK:
		return snprintf(buf, size, " %s %u/%#x", name, p->lo, p->hi);
	default:
		return 0;
	}
}

int
nc_trie_rule_format(const struct nc_trie_rule *r, char *buf, size_t size)
{
	char a[INET6_ADDRSTRLEN];
	size_t len = 0;
	int af;

	if (r == NULL || (buf == NULL && size > 0))
		return -EINVAL;
#define APPEND(...)                                                                       \
	do {                                                                              \
		int w_ = snprintf(len < size ? buf + len : NULL, len < size ? size - len : 0, \
				  __VA_ARGS__);                                           \
		if (w_ > 0)                                                               \
			len += (size_t)w_;                                                \
	} while (0)
	af = r->family == NC_TRIE_AF_INET6 ? AF_INET6 : AF_INET;
	APPEND("%s", r->family == NC_TRIE_AF_INET6 ? "ipv6" :
		     r->family == NC_TRIE_AF_INET ? "ipv4" : "any");
	if (r->proto_mask == 0xff)
		APPEND(" proto %u", r->proto);
	else if (r->proto_mask != 0)
		APPEND(" proto %u/%#x", r->proto, r->proto_mask);
	if (r->dst_len) {
		inet_ntop(af, r->dst.a, a, sizeof(a));
		APPEND(" dst %s/%u", a, r->dst_len);
	}
	if (r->src_len) {
		inet_ntop(af, r->src.a, a, sizeof(a));
		APPEND(" src %s/%u", a, r->src_len);
	}
	for (int i = 0; i < 2; i++) {
		int w = format_port(len < size ? buf + len : NULL, len < size ? size - len : 0,
				    i ? "sport" : "dport", i ? &r->sport : &r->dport);
		len += (size_t)w;
	}
	APPEND(" priority %u", r->priority);
#undef APPEND
	return (int)len;
}
