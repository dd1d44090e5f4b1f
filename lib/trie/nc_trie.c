/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The classifier's public calls (nc_trie.h): create and free, add and delete a rule,
 * and introspection. The structures behind them: nc_trie_private.h.
 */
#include "nc_trie_private.h"

struct nc_trie *
nc_trie_create(const struct nc_trie_config *cfg)
{
	struct nc_trie_config c = { 0 };
	uint32_t size;

	if (cfg == NULL) {
		errno = EINVAL;
		return NULL;
	}
	/* As much of the caller's as its size covers; what a newer header adds must be unset. */
	memcpy(&size, cfg, sizeof(size));
	if (size < sizeof(size)) {
		errno = EINVAL;
		return NULL;
	}
	for (uint32_t i = sizeof(c); i < size; i++)
		if (((const uint8_t *)cfg)[i] != 0) {
			errno = EINVAL;
			return NULL;
		}
	memcpy(&c, cfg, RTE_MIN(size, (uint32_t)sizeof(c)));
	if ((c.flags & ~NC_TRIE_F_NO_SNAPSHOT) != 0) {
		errno = EINVAL;
		return NULL;
	}
	return nct_create(&c, 0);
}

/* nc_trie_create(), with internal flags (NCT_F_*) added to the config's. */
struct nc_trie *
nct_create(const struct nc_trie_config *cfg, uint32_t internal)
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
	t->flags = cfg->flags | internal;
	t->force_order = -1;
	if (!(t->flags & NCT_F_DELTA)) {
		t->rules = calloc(cfg->max_rules, sizeof(*t->rules));
		t->free_ids = malloc(cfg->max_rules * sizeof(*t->free_ids));
		if (t->rules == NULL || t->free_ids == NULL)
			goto out_free_tables;
		/* Lowest ids first: the stack pops its top. */
		for (uint32_t i = 0; i < cfg->max_rules; i++)
			t->free_ids[i] = cfg->max_rules - 1 - i;
		t->nfree_ids = cfg->max_rules;
	}
	cap = (uint64_t)cfg->max_rules * NODES_PER_RULE + 4096;
	if (nct_pool_init(&t->pool, (uint32_t)cap, cfg->socket_id) != 0)
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
	nct_snap_free_all(t);
	for (unsigned int i = 0; i < NTABLES; i++)
		free(t->tuples[i].buckets);
	for (uint32_t i = 0; t->rules != NULL && i < t->max_rules; i++)
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
		nct_reclaim_nodes(t, 1);
		nct_snap_maintain(t, true, false);
	} else if (t->qsbr != NULL) {
		return -EEXIST;
	}
	t->qsbr = v;
	if (t->delta != NULL) {
		if (v == NULL)
			nct_reclaim_nodes(t->delta, 1);
		t->delta->qsbr = v;
	}
	return 0;
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
	nct_rule_normalize(&nr, r);
	a.t = t;
	a.id = t->free_ids[t->nfree_ids - 1];
	a.rule = &nr;
	ti = nct_rule_tuple(&nr);
	if (nct_delta_reserve(t, &nr) != 0)
		return -ENOSPC;
	if (ti != IN_TRIE) {
		ret = nct_tuple_add(t, ti, &nr, a.id, &a.rank);
		if (ret)
			return ret;
	} else {
		need = (uint64_t)nct_rule_nentries(&nr) * NODES_PER_ENTRY;
		if (!nct_reclaim_for(t, nct_node_room, need))
			return -ENOSPC;
		ret = nct_rule_foreach_entry(&nr, nct_entry_check_dup, &a);
		if (ret < 0)
			return ret;
		t->rules[a.id].u.full = malloc(sizeof(nr));
		if (t->rules[a.id].u.full == NULL)
			return -ENOSPC;
		*t->rules[a.id].u.full = nr;
		a.rank = nct_next_rank(t, r->priority);
		nct_rule_foreach_entry(&nr, nct_entry_insert, &a);
		t->ntrie_rules++;
	}
	t->nfree_ids--;
	t->seq++;
	t->rules[a.id].rank = a.rank;
	t->rules[a.id].tuple = (uint8_t)ti;
	t->rules[a.id].used = 1;
	nct_delta_add(t, &nr, a.id, a.rank);
	return (int)a.id;
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
	need = sl->tuple != IN_TRIE ? 1 : (uint64_t)nct_rule_nentries(sl->u.full) * NODES_PER_ENTRY;
	if (nct_scratch_reserve(t, need) || nct_delta_delete(t, id) != 0)
		return -ENOMEM;
	if (sl->tuple != IN_TRIE) {
		nct_tuple_delete(t, id);
	} else {
		a.t = t;
		a.id = id;
		a.rank = sl->rank;
		nct_rule_foreach_entry(sl->u.full, nct_entry_remove, &a);
		free(sl->u.full);
		t->ntrie_rules--;
	}
	nct_scratch_retire(t);
	sl->used = 0;
	t->free_ids[t->nfree_ids++] = id;
	nct_reclaim_nodes(t, 0);
	if (t->delta != NULL)
		nct_reclaim_nodes(t->delta, 0);
	return 0;
}

int
nc_trie_reclaim(struct nc_trie *t, int wait)
{
	int n;

	if (t == NULL)
		return -EINVAL;
	n = nct_reclaim_nodes(t, wait);
	if (t->delta != NULL)
		n += nct_reclaim_nodes(t->delta, wait);
	nct_snap_maintain(t, wait != 0, true);
	return n;
}

int
nc_trie_get_rule(const struct nc_trie *t, uint32_t id, struct nc_trie_rule *r)
{
	if (t == NULL || r == NULL || id >= t->max_rules)
		return -EINVAL;
	if (!t->rules[id].used)
		return -ENOENT;
	if (t->rules[id].tuple != IN_TRIE)
		nct_entry_rule(t, id, r);
	else
		*r = *t->rules[id].u.full;
	return 0;
}

/* ---- introspection ------------------------------------------------------ */

int
nc_trie_get_stats(const struct nc_trie *t, struct nc_trie_stats *out)
{
	struct nc_trie_stats all = { .size = sizeof(all) }, *s = &all;
	uint32_t size;

	if (t == NULL || out == NULL)
		return -EINVAL;
	memcpy(&size, out, sizeof(size));
	if (size < sizeof(size))
		return -EINVAL;
	s->rules = t->max_rules - t->nfree_ids;
	s->exact_rules = s->rules - t->ntrie_rules;
	s->nodes = t->pool.hwm - 1 - t->pool.nfree;
	s->deferred = t->dq_len;
	s->bytes = sizeof(*t) + (uint64_t)t->pool.hwm * sizeof(struct node) +
		   (uint64_t)t->ent_hwm * sizeof(struct tentry) +
		   (uint64_t)t->ntrie_rules * sizeof(struct nc_trie_rule) +
		   (t->rules != NULL ? (uint64_t)t->max_rules * (sizeof(*t->rules) +
								 sizeof(*t->free_ids)) : 0) +
		   (uint64_t)t->dq_cap * sizeof(*t->dq) + (uint64_t)t->scratch_cap * sizeof(uint32_t);
	for (unsigned int i = 0; i < NTABLES; i++)
		if (t->tuples[i].buckets != NULL) {
			s->tuples++;
			s->bytes += ((uint64_t)t->tuples[i].mask + 1) * sizeof(uint32_t);
		}
	nct_snap_stats(t, s);
	/* As much as the caller's size covers; the rest of it 0, and its size what was filled. */
	all.size = RTE_MIN(size, (uint32_t)sizeof(all));
	memcpy(out, &all, all.size);
	memset((uint8_t *)out + all.size, 0, size - all.size);
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
	struct nc_trie_stats s = { .size = sizeof(s) };

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
