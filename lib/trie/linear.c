/* SPDX-License-Identifier: BSD-3-Clause */
/* The semantic reference: a first-match scan over rules sorted best first. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "nc_trie_tools.h"

struct lrule {
	struct nc_trie_rule rule;
	uint64_t seq;
	uint32_t id;
};

struct nc_linear {
	struct lrule *v;      /* sorted: priority descending, then seq ascending */
	uint32_t n, cap;
	uint8_t *used;
	uint64_t seq;
};

struct nc_linear *
nc_linear_create(uint32_t cap)
{
	struct nc_linear *l = calloc(1, sizeof(*l));

	if (l == NULL)
		return NULL;
	l->v = calloc(cap ? cap : 1, sizeof(*l->v));
	l->used = calloc(cap ? cap : 1, 1);
	if (l->v == NULL || l->used == NULL) {
		nc_linear_free(l);
		errno = ENOMEM;
		return NULL;
	}
	l->cap = cap;
	return l;
}

void
nc_linear_free(struct nc_linear *l)
{
	if (l == NULL)
		return;
	free(l->v);
	free(l->used);
	free(l);
}

int
nc_linear_add(struct nc_linear *l, uint32_t id, const struct nc_trie_rule *r)
{
	uint32_t pos = l->n;

	if (id >= l->cap || l->used[id])
		return -EINVAL;
	/* A new rule goes after every rule of its priority: they are older. */
	while (pos > 0 && l->v[pos - 1].rule.priority < r->priority)
		pos--;
	memmove(&l->v[pos + 1], &l->v[pos], (l->n - pos) * sizeof(*l->v));
	l->v[pos].rule = *r;
	l->v[pos].seq = l->seq++;
	l->v[pos].id = id;
	l->n++;
	l->used[id] = 1;
	return 0;
}

int
nc_linear_delete(struct nc_linear *l, uint32_t id)
{
	if (id >= l->cap || !l->used[id])
		return -ENOENT;
	for (uint32_t i = 0; i < l->n; i++)
		if (l->v[i].id == id) {
			memmove(&l->v[i], &l->v[i + 1], (l->n - i - 1) * sizeof(*l->v));
			l->n--;
			break;
		}
	l->used[id] = 0;
	return 0;
}

uint32_t
nc_linear_lookup(const struct nc_linear *l, const struct nc_trie_key *k)
{
	for (uint32_t i = 0; i < l->n; i++)
		if (nc_trie_rule_matches(&l->v[i].rule, k))
			return l->v[i].id;
	return NC_TRIE_NOMATCH;
}

uint32_t
nc_linear_count(const struct nc_linear *l)
{
	return l->n;
}

uint64_t
nc_linear_bytes(const struct nc_linear *l)
{
	return sizeof(*l) + (uint64_t)l->cap * (sizeof(*l->v) + sizeof(*l->used));
}
