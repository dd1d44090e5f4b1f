/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The node pool and the front stage's entries, and their deferred reuse: an unlinked
 * node or entry keeps its contents until an RCU grace period has passed.
 */
#include "nc_trie_private.h"

int
nct_pool_init(struct pool *p, uint32_t cap, int socket_id)
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
uint32_t
nct_node_alloc(struct nc_trie *t, unsigned int field, uint64_t hi, uint64_t lo, unsigned int len)
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

/* Room for every node a delete may unlink, taken before it touches anything. */
int
nct_scratch_reserve(struct nc_trie *t, uint64_t need)
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

/* The nodes and entries past their grace period back to their pools. */
int
nct_reclaim_nodes(struct nc_trie *t, int wait)
{
	int n = 0;

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

bool
nct_node_room(const struct nc_trie *t, uint64_t need)
{
	return need <= pool_avail(&t->pool);
}

bool
nct_entry_room(const struct nc_trie *t, uint64_t need)
{
	(void)need;
	return t->ent_free != NIL || t->ent_hwm <= t->max_rules;
}

/*
 * Whether there is room (has_room(t, need)) once what deletes left for a
 * grace period is taken back: first what is already past it, then, if
 * still short, after waiting for the readers.
 */
bool
nct_reclaim_for(struct nc_trie *t, bool (*has_room)(const struct nc_trie *, uint64_t), uint64_t need)
{
	if (!has_room(t, need))
		nct_reclaim_nodes(t, 0);
	if (!has_room(t, need) && t->dq_len > 0)
		nct_reclaim_nodes(t, 1);
	return has_room(t, need);
}

/* Hand the nodes the current delete unlinked to the pool, after a grace period. */
void
nct_scratch_retire(struct nc_trie *t)
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
