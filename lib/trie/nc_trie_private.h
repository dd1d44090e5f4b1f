/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The classifier's insides, shared by its files (not installed):
 *   nc_trie.c  the public calls: create, free, add, delete, introspection
 *   rule.c     a rule's semantics: validation, matching, overlap, its entries
 *   pool.c     the node pool and the deferred reuse of nodes and entries
 *   field.c    the per-field tries: insertion and removal of a rule's entries
 *   front.c    the front stage: tuple tables of the common shapes
 *   lookup.c   lookups, one key or a burst
 *   snapshot.c the compiled snapshot (rte_acl, built in the background) and the delta
 *
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
#ifndef NC_TRIE_PRIVATE_H
#define NC_TRIE_PRIVATE_H

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
#include "nc_trie_acl.h"

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
	uint8_t delta;        /* also in the delta trie */
};

/*
 * rte_acl refuses a context that needs more than 8 tries: the rules are then
 * split in halves (by rank), each compiled apart, the answers merged by rank.
 */
#define SNAP_MAX_CTX 8

/*
 * A compiled snapshot of the trie's rules (snapshot.c). Immutable once
 * installed; replaced whole, freed after a grace period.
 */
struct nct_snap {
	/* Per family (IPv4, IPv6), as many as rte_acl needed (none: no rule of the family). */
	struct rte_acl_ctx *acl[2][SNAP_MAX_CTX];
	unsigned int nacl[2];
	/* By rule id (rte_acl's userdata - 1), ids up to nids - 1. */
	uint64_t *rank;               /* its rank when compiled; 0: not in the snapshot */
	uint64_t *dead;               /* deleted since (atomic bits) */
	uint32_t ndead;               /* how many bits of dead are set (atomic): 0, no check */
	uint32_t nids;
	uint32_t n;
	bool all;                     /* front-stage rules too: lookups skip the front stage */
	uint8_t order[2];             /* the order rte_acl reads each family's fields in */
	uint32_t order_rules[2];      /* the family's rule count when that order was picked (0: forced) */
	uint64_t bytes;
	uint64_t build_us;
};

struct snap_job;

/*
 * nc_trie.flags, internal: a snapshot's delta, a trie whose entries name
 * another table's rule ids. It has no rule slots or ids of its own.
 */
#define NCT_F_DELTA 0x80000000u




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
	uint32_t flags;               /* NC_TRIE_F_* */
	/* The snapshot (snapshot.c). Readers load snap with acquire, then the delta's roots. */
	struct nct_snap *snap;
	struct nc_trie *delta;        /* trie rules the snapshot lacks */
	bool delta_on;                /* adds go to the delta too: a copy was taken */
	uint32_t ndelta;
	struct snap_job *job;         /* a build under way */
	struct nct_snap *retired;     /* replaced, freed after retire_token's grace period */
	uint64_t retire_token;
	uint64_t prune_seq;           /* delta rules below this: drop once retired is gone */
	bool retire_pending;
	uint32_t builds, failures;
	uint64_t next_build_ns;
	uint64_t build_total_us;      /* every build's wall time, failed ones too */
	int force_order;              /* the snapshots' field order; < 0: each build picks */
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

static inline unsigned int
common_len(uint64_t ahi, uint64_t alo, uint64_t bhi, uint64_t blo)
{
	if (ahi != bhi)
		return __builtin_clzll(ahi ^ bhi);
	if (alo != blo)
		return 64 + __builtin_clzll(alo ^ blo);
	return 128;
}

static inline uint64_t
load64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return be64toh(v);
}

static inline void
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

static inline unsigned int
addr_width(unsigned int fam)
{
	return fam == NC_TRIE_AF_INET6 ? 128 : 32;
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

struct add_ctx {
	struct nc_trie *t;
	const struct nc_trie_rule *rule;
	uint32_t id;
	uint64_t rank;
};

static inline uint64_t
tuple_ports(uint8_t proto, uint16_t dport, uint16_t sport)
{
	return (uint64_t)proto << 32 | (uint32_t)dport << 16 | sport;
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

/*
 * tuple_hash() of a port table entry's words, {0, 0, 0, 0, w4}: the steps
 * of its address words are the same for every key.
 */
static inline uint32_t
port_hash(uint64_t h0, uint64_t w4)
{
	return (uint32_t)hash_step(h0, w4);
}

/* The h0 of port_hash(): tuple_hash()'s steps over two zero words. */
static inline uint64_t
port_hash_base(void)
{
	return hash_step(hash_step(0, 0), 0);
}

static inline bool
words_eq(const uint64_t a[5], const uint64_t b[5], const bool v4)
{
	uint64_t d = (a[0] ^ b[0]) | (a[2] ^ b[2]) | (a[4] ^ b[4]);

	return (v4 ? d : d | (a[1] ^ b[1]) | (a[3] ^ b[3])) == 0;
}


/* nc_trie.c */
struct nc_trie *nct_create(const struct nc_trie_config *cfg, uint32_t internal);

/* rule.c */
void nct_rule_normalize(struct nc_trie_rule *out, const struct nc_trie_rule *r);
bool nct_rule_same(const struct nc_trie_rule *a, const struct nc_trie_rule *b);
int nct_rule_foreach_entry(const struct nc_trie_rule *r, int (*fn)(void *, const struct entry *),
	void *arg);
unsigned int nct_rule_nentries(const struct nc_trie_rule *r);

/* pool.c */
int nct_pool_init(struct pool *p, uint32_t cap, int socket_id);
uint32_t nct_node_alloc(struct nc_trie *t, unsigned int field, uint64_t hi, uint64_t lo,
	unsigned int len);
int nct_scratch_reserve(struct nc_trie *t, uint64_t need);
bool nct_node_room(const struct nc_trie *t, uint64_t need);
bool nct_entry_room(const struct nc_trie *t, uint64_t need);
bool nct_reclaim_for(struct nc_trie *t, bool (*has_room)(const struct nc_trie *, uint64_t),
	uint64_t need);
void nct_scratch_retire(struct nc_trie *t);

int nct_reclaim_nodes(struct nc_trie *t, int wait);

/* field.c */
int nct_entry_insert(void *arg, const struct entry *e);
int nct_entry_check_dup(void *arg, const struct entry *e);
int nct_entry_remove(void *arg, const struct entry *e);

/* front.c */
uint64_t nct_next_rank(const struct nc_trie *t, uint32_t priority);
unsigned int nct_rule_tuple(const struct nc_trie_rule *r);
void nct_entry_rule(const struct nc_trie *t, uint32_t id, struct nc_trie_rule *r);
int nct_tuple_add(struct nc_trie *t, unsigned int ti, const struct nc_trie_rule *r, uint32_t id,
	uint64_t *rank_out);
void nct_tuple_delete(struct nc_trie *t, uint32_t id);

/* snapshot.c */
static inline uint64_t
rank_seq(uint64_t rank)
{
	return SEQ_MAX - (rank & SEQ_MAX);
}

static inline const struct nct_snap *
snap_load(const struct nc_trie *t)
{
	return __atomic_load_n(&t->snap, __ATOMIC_ACQUIRE);
}

/* Whether the snapshot's rule of this id was deleted after its copy (relaxed, as maxrank). */
static inline bool
snap_dead(const struct nct_snap *s, uint32_t id)
{
	return (__atomic_load_n(&s->dead[id / 64], __ATOMIC_RELAXED) >> (id % 64)) & 1;
}

void nct_delta_add(struct nc_trie *t, const struct nc_trie_rule *r, uint32_t id, uint64_t rank);
int nct_delta_reserve(struct nc_trie *t, const struct nc_trie_rule *r);
int nct_delta_delete(struct nc_trie *t, uint32_t id);
void nct_snap_maintain(struct nc_trie *t, bool wait, bool start);
void nct_snap_free_all(struct nc_trie *t);
void nct_snap_stats(const struct nc_trie *t, struct nc_trie_stats *s);

#endif
