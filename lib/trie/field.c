/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The per-field tries: a rule's entries inserted into the chain of tries and removed
 * from it, maxrank kept as the best rank beneath each node.
 */
#include "nc_trie_private.h"

/* Find or create the node for prefix p in the trie hanging from *link. */
static uint32_t
field_insert(struct nc_trie *t, unsigned int field, uint32_t *link, const struct prefix *p)
{
	for (;;) {
		uint32_t idx = *link;
		struct node *n;
		unsigned int c;

		if (idx == NIL) {
			uint32_t m = nct_node_alloc(t, field, p->hi, p->lo, p->len);

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
			uint32_t m = nct_node_alloc(t, field, p->hi, p->lo, p->len);

			N(t, m)->child[bit_at(n->hi, n->lo, c)] = idx;
			N(t, m)->maxrank = n->maxrank;
			link_store(link, m);
			return m;
		} else {
			uint32_t b = nct_node_alloc(t, field, p->hi, p->lo, c);
			uint32_t leaf = nct_node_alloc(t, field, p->hi, p->lo, p->len);

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

int
nct_entry_insert(void *arg, const struct entry *e)
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
	m = nct_node_alloc(t, F_RULE, 0, 0, 0);
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
int
nct_entry_check_dup(void *arg, const struct entry *e)
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
		if (nct_rule_same(t->rules[N(t, idx)->next].u.full, a->rule))
			return -EEXIST;
	/* The first entry decides: equal rules have equal first entries. */
	return 1;
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

int
nct_entry_remove(void *arg, const struct entry *e)
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
