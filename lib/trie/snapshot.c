/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The snapshot: the trie's rules compiled with rte_acl in the background, asked
 * before the trie. The trie stays the authority, as it is for rte_flow offload:
 *
 *   - the writer copies the rules outside the front stage (in nc_trie_reclaim(),
 *     the control thread's idle call) and a thread compiles them; a later call
 *     installs the result with a release store and frees the one it replaces
 *     after a grace period;
 *   - from the copy on, every trie rule added also goes to the delta, a second
 *     trie of the same kind, which a lookup searches after the snapshot; once the
 *     snapshot that holds them is installed and the readers of the one before
 *     are gone, they leave it;
 *   - a delete marks the rule dead in the snapshot (a bitmap by rule id, which
 *     stays in cache where the rules' slots would not): a dead answer
 *     sends its key to the trie, and so does a key without ports (rte_acl
 *     cannot say "no ports").
 *
 * A snapshot answer that is still live is the best of the live rules it holds,
 * and the delta holds every other trie rule: the best of the two (and of the
 * front stage) is the trie's answer.
 *
 * rte_acl needs DPDK's memory: without EAL the table has no snapshot.
 */
#define _GNU_SOURCE /* pthread_setname_np */
#include <pthread.h>
#include <time.h>

#include <rte_acl.h>
#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_malloc.h>

#include "nc_trie_private.h"

/* Below this many trie rules the trie alone is about as fast and needs no thread. */
#define SNAP_MIN_RULES 64

/* A copied rule, sorted by rank before compiling. */
struct job_rule {
	struct nc_trie_rule r;
	uint64_t rank;
	uint32_t id;
};

struct snap_job {
	pthread_t th;
	struct job_rule *rules;
	uint32_t n;
	uint64_t seq;
	int socket_id;
	struct { uint64_t rank; uint32_t id; } *deleted; /* since the copy (writer's) */
	uint32_t ndeleted, deleted_cap;
	struct nct_snap *out;         /* builder's */
	int err;                      /* builder's */
	int done;                     /* builder -> writer, release/acquire */
	int cancel;                   /* writer -> builder: the table goes, stop the search */
	uint64_t start_ns;
	bool all;
	uint8_t order[2];             /* the installed snapshot's orders (build_orders()) */
	uint32_t order_rules[2];      /* and the rule counts they were picked at */
	int force_order;
};

static uint64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static bool
snap_enabled(const struct nc_trie *t)
{
	/* rte_lcore_count() is 0 until rte_eal_init() has run. */
	return !(t->flags & NC_TRIE_F_NO_SNAPSHOT) && rte_lcore_count() > 0;
}

/* Rule i of the sorted copy as rte_acl's: priority is its place, userdata its id + 1. */
static void
acl_rule(const struct job_rule *jr, uint32_t i, unsigned int fam, struct rte_acl_rule_data *d,
	 struct rte_acl_field *f)
{
	d->category_mask = 1;
	d->priority = (int32_t)(i + 1);
	d->userdata = jr->id + 1;
	nct_acl_fields(&jr->r, fam, f);
}

static bool
in_family(const struct nc_trie_rule *r, unsigned int fam)
{
	return r->family == NC_TRIE_AF_ANY || r->family == (fam ? NC_TRIE_AF_INET6 : NC_TRIE_AF_INET);
}

/* A family's contexts in one field order: the snapshot's, or a candidate for it. */
struct acl_set {
	struct rte_acl_ctx *acl[SNAP_MAX_CTX];
	unsigned int n;
	unsigned int order;
	uint64_t bytes; /* the DPDK heap's growth over its build */
	uint64_t ns;    /* the sample's classify time, each context on its fastest method */
};

/* A context of cnt rte_acl rules of family fam (each rsz bytes) read in order o. */
static int
build_ctx(const uint8_t *rules, uint32_t cnt, size_t rsz, unsigned int fam, unsigned int o,
	  int socket_id, struct rte_acl_ctx **out)
{
	static uint32_t serial;
	const unsigned int nf = nct_acl_nfields(fam);
	char name[RTE_ACL_NAMESIZE];
	struct rte_acl_param prm = {
		.name = name, .socket_id = socket_id < 0 ? SOCKET_ID_ANY : socket_id,
		.rule_size = (uint32_t)rsz, .max_rule_num = cnt,
	};
	struct rte_acl_config cfg = { .num_categories = 1, .num_fields = nf };
	struct rte_acl_ctx *ctx;
	int ret;

	/* rte_acl_create() hands back an existing context of the same name: never reuse one. */
	snprintf(name, sizeof(name), "nctrie-snap-%u",
		 __atomic_fetch_add(&serial, 1, __ATOMIC_RELAXED));
	ctx = rte_acl_create(&prm);
	if (ctx == NULL)
		return rte_errno ? -rte_errno : -ENOMEM;
	nct_acl_defs(fam, o, cfg.defs);
	ret = rte_acl_add_rules(ctx, (const struct rte_acl_rule *)rules, cnt);
	if (ret == 0)
		ret = rte_acl_build(ctx, &cfg);
	if (ret != 0) {
		rte_acl_free(ctx);
		return ret < 0 ? ret : -EINVAL;
	}
	/* Its rules are compiled in; rte_acl_build() keeps what it needs. */
	rte_acl_reset_rules(ctx);
	*out = ctx;
	return 0;
}

/* Rules lo..hi-1 into set's contexts of fam: in one, or in halves while there is room. */
static int
build_range(struct acl_set *set, const uint8_t *rules, uint32_t lo, uint32_t hi, size_t rsz,
	    unsigned int fam, int socket_id)
{
	uint32_t mid = lo + (hi - lo) / 2;
	int ret;

	ret = build_ctx(rules + rsz * lo, hi - lo, rsz, fam, set->order, socket_id,
			&set->acl[set->n]);
	if (ret == 0) {
		set->n++;
		return 0;
	}
	/* Typically "Exceeded max number of tries" (-ENOMEM): fewer rules need fewer. */
	if (hi - lo < 2 || set->n + 2 > SNAP_MAX_CTX)
		return ret;
	ret = build_range(set, rules, lo, mid, rsz, fam, socket_id);
	return ret ? ret : build_range(set, rules, mid, hi, rsz, fam, socket_id);
}

static void
set_free(struct acl_set *set)
{
	for (unsigned int i = 0; i < set->n; i++)
		rte_acl_free(set->acl[i]);
	set->n = 0;
}

/* Keys to time a family's contexts with, laid out for rte_acl. */
#define SAMPLE_KEYS 8192

struct sample {
	union {
		struct nct_acl_key4 v4;
		struct nct_acl_key6 v6;
	} in[SAMPLE_KEYS];
	const uint8_t *data[SAMPLE_KEYS];
};

static uint64_t
splitmix(uint64_t *x)
{
	uint64_t z = (*x += UINT64_C(0x9e3779b97f4a7c15));

	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

/* A random address inside prefix p/len (anywhere when len is 0). */
static void
point_in(const union nc_trie_addr *p, unsigned int len, uint64_t *seed, union nc_trie_addr *a)
{
	for (unsigned int i = 0; i < 16; i++) {
		const unsigned int bits = len >= 8 * (i + 1) ? 8 : len > 8 * i ? len - 8 * i : 0;
		const uint8_t m = (uint8_t)(0xff00u >> bits);

		a->a[i] = (uint8_t)((p->a[i] & m) | (splitmix(seed) & ~m));
	}
}

/*
 * The sample, in ClassBench's trace model: half of the keys inside rules of
 * the family (random rules, random points of them), half anywhere (any
 * protocol too). The same for every build (a fixed seed), so that two orders
 * and two builds are timed on the same keys.
 */
static void
sample_keys(const struct snap_job *j, unsigned int fam, struct sample *sm)
{
	static const union nc_trie_addr anywhere;
	uint64_t seed = 1;

	for (unsigned int n = 0; n < SAMPLE_KEYS; n++) {
		const struct nc_trie_rule *r = NULL;
		struct nc_trie_key k = { .family = fam ? NC_TRIE_AF_INET6 : NC_TRIE_AF_INET };
		uint16_t lo, hi;

		for (unsigned int tries = 0; n % 2 == 0 && r == NULL && tries < 16; tries++) {
			r = &j->rules[splitmix(&seed) % j->n].r;
			if (!in_family(r, fam))
				r = NULL;
		}
		point_in(r ? &r->src : &anywhere, r && r->family != NC_TRIE_AF_ANY ? r->src_len : 0,
			 &seed, &k.src);
		point_in(r ? &r->dst : &anywhere, r && r->family != NC_TRIE_AF_ANY ? r->dst_len : 0,
			 &seed, &k.dst);
		k.proto = (uint8_t)(splitmix(&seed) & (r ? (uint8_t)~r->proto_mask : 0xff));
		if (r != NULL)
			k.proto |= r->proto & r->proto_mask;
		lo = 0;
		hi = UINT16_MAX;
		if (r != NULL)
			nc_trie_port_range(&r->sport, &lo, &hi);
		k.sport = (uint16_t)(lo + splitmix(&seed) % ((uint32_t)hi - lo + 1));
		lo = 0;
		hi = UINT16_MAX;
		if (r != NULL)
			nc_trie_port_range(&r->dport, &lo, &hi);
		k.dport = (uint16_t)(lo + splitmix(&seed) % ((uint32_t)hi - lo + 1));
		sm->data[n] = nct_acl_key(fam, &k, &sm->in[n]);
	}
}

/* One sweep of the sample through ctx, in bursts of 32: its time. */
static uint64_t
sweep(const struct rte_acl_ctx *ctx, struct sample *sm)
{
	uint64_t t0 = now_ns();
	uint32_t res[32];

	for (uint32_t k = 0; k + 32 <= SAMPLE_KEYS; k += 32)
		rte_acl_classify(ctx, &sm->data[k], res, 32, 1);
	return now_ns() - t0;
}

/*
 * Context ctx on rte_acl's fastest classify method for it on this CPU, by
 * measurement (as the benchmark picks its reference's): after an untimed
 * sweep of the sample, the methods' sweeps in turn, the best of three each
 * (a freshly built context's first sweeps are up to 3.5 times slower, its
 * lines not yet in cache, and would count against whichever went first).
 * Returns the pick's time.
 */
static uint64_t
pick_alg(struct rte_acl_ctx *ctx, struct sample *sm)
{
	static const enum rte_acl_classify_alg algs[] = {
		RTE_ACL_CLASSIFY_AVX512X32, RTE_ACL_CLASSIFY_AVX512X16, RTE_ACL_CLASSIFY_AVX2,
		RTE_ACL_CLASSIFY_SSE,
	};
	uint64_t best[RTE_DIM(algs)];
	unsigned int pick = 0;

	for (unsigned int a = 0; a < RTE_DIM(algs); a++)
		best[a] = UINT64_MAX;
	sweep(ctx, sm);
	for (int pass = 0; pass < 3; pass++)
		for (unsigned int a = 0; a < RTE_DIM(algs); a++) {
			uint64_t el;

			/* A method this CPU or EAL lacks is refused here and keeps UINT64_MAX. */
			if (rte_acl_set_ctx_classify(ctx, algs[a]) != 0)
				continue;
			el = sweep(ctx, sm);
			if (el < best[a])
				best[a] = el;
		}
	for (unsigned int a = 1; a < RTE_DIM(algs); a++)
		if (best[a] < best[pick])
			pick = a;
	if (best[pick] == UINT64_MAX) {
		rte_acl_set_ctx_classify(ctx, RTE_ACL_CLASSIFY_DEFAULT);
		return sweep(ctx, sm);
	}
	rte_acl_set_ctx_classify(ctx, algs[pick]);
	return best[pick];
}

/* Compile the family's rules into set in its order, and time it on the sample. */
static int
build_set(struct acl_set *set, const uint8_t *rules, uint32_t cnt, size_t rsz, unsigned int fam,
	  int socket_id, struct sample *sm)
{
	const uint64_t heap0 = nct_heap_bytes();
	uint64_t heap1;
	int ret = build_range(set, rules, 0, cnt, rsz, fam, socket_id);

	if (ret != 0) {
		set_free(set);
		return ret;
	}
	heap1 = nct_heap_bytes();
	set->bytes = heap1 > heap0 ? heap1 - heap0 : 0;
	set->ns = 0;
	for (unsigned int i = 0; i < set->n; i++)
		set->ns += pick_alg(set->acl[i], sm);
	return 0;
}

/* A sweep of the sample through each of a set's contexts, on its method: their time. */
static uint64_t
set_sweep(const struct acl_set *set, struct sample *sm)
{
	uint64_t ns = 0;

	for (unsigned int i = 0; i < set->n; i++)
		ns += sweep(set->acl[i], sm);
	return ns;
}

/*
 * The best so far and a candidate timed again in turn, the best of three
 * each: a moment of a slower machine falls on both, not on whichever was
 * timed in it (fw1_10k's search once kept an order of 134 MB over one of
 * 12.7 MB that the benchmark's trace runs 2.3 times as fast).
 */
static void
retime_pair(struct acl_set *best, struct acl_set *cand, struct sample *sm)
{
	uint64_t b = UINT64_MAX, c = UINT64_MAX;

	for (int pass = 0; pass < 3; pass++) {
		uint64_t x, y;

		/* Each after an untimed sweep: the other's, of a big context, evicts its lines. */
		set_sweep(best, sm);
		x = set_sweep(best, sm);
		set_sweep(cand, sm);
		y = set_sweep(cand, sm);
		b = x < b ? x : b;
		c = y < c ? y : c;
	}
	best->ns = b;
	cand->ns = c;
}

/*
 * The family's contexts in the order that classifies the sample fastest,
 * without more memory than DPDK's layout (order 0) takes: each order within
 * that is timed again in turn with the best so far, and replaces it only if
 * 5% faster. All orders are tried when
 * the family's rule count has moved by a quarter since they last were (or
 * the last order no longer builds); otherwise the last one is kept, so that
 * a build under churn costs one compile.
 */
static int
build_orders(const struct snap_job *j, unsigned int fam, const uint8_t *rules, uint32_t cnt,
	     size_t rsz, struct nct_snap *s)
{
	const uint32_t last = j->order_rules[fam];
	bool search = last == 0 || cnt < last - last / 4 || cnt > last + last / 4;
	struct acl_set best = { .n = 0 }, cand;
	uint64_t limit = UINT64_MAX;
	bool have = false;
	struct sample *sm = malloc(sizeof(*sm));
	int ret = 0;

	if (sm == NULL)
		return -ENOMEM;
	sample_keys(j, fam, sm);
	if (j->force_order >= 0 || !search) {
		cand = (struct acl_set){ .order = j->force_order >= 0 ? (unsigned int)j->force_order :
							       j->order[fam] };
		ret = build_set(&cand, rules, cnt, rsz, fam, j->socket_id, sm);
		have = ret == 0;
		best = cand;
		search = !have && j->force_order < 0;
	}
	for (unsigned int o = 0; search && o < NCT_ACL_ORDERS; o++) {
		/* A table freed mid-search waits for one compile, not six. */
		if (__atomic_load_n(&j->cancel, __ATOMIC_ACQUIRE)) {
			ret = -ECANCELED;
			have = false;
			set_free(&best);
			break;
		}
		cand = (struct acl_set){ .order = o };
		ret = build_set(&cand, rules, cnt, rsz, fam, j->socket_id, sm);
		if (ret != 0)
			continue;
		if (o == 0)
			limit = cand.bytes;
		if (have && cand.bytes <= limit)
			retime_pair(&best, &cand, sm);
		if (!have || (cand.bytes <= limit && cand.ns * 20 < best.ns * 19)) {
			set_free(&best);
			best = cand;
			have = true;
		} else {
			set_free(&cand);
		}
	}
	free(sm);
	if (!have)
		return ret ? ret : -ENOMEM;
	memcpy(s->acl[fam], best.acl, sizeof(best.acl));
	s->nacl[fam] = best.n;
	s->order[fam] = (uint8_t)best.order;
	/* A forced order was not picked: the next unforced build searches. */
	s->order_rules[fam] = j->force_order >= 0 ? 0 : search ? cnt : last;
	return 0;
}

/* One family's contexts of the job's rules; none when it has no rule. */
static int
build_family(const struct snap_job *j, unsigned int fam, struct nct_snap *s)
{
	const size_t rsz = RTE_ACL_RULE_SZ(nct_acl_nfields(fam));
	uint8_t *rules;
	uint32_t cnt = 0;
	int ret;

	for (uint32_t i = 0; i < j->n; i++)
		cnt += in_family(&j->rules[i].r, fam);
	if (cnt == 0)
		return 0;
	rules = calloc(cnt, rsz);
	if (rules == NULL)
		return -ENOMEM;
	/*
	 * Best first: rte_acl's tries come out faster so (fw1_1k: 26.0 ns a key
	 * against 29.7 with the same rules worst first).
	 */
	cnt = 0;
	for (uint32_t i = j->n; i-- > 0;)
		if (in_family(&j->rules[i].r, fam)) {
			struct rte_acl_rule *a = (struct rte_acl_rule *)(rules + rsz * cnt++);

			acl_rule(&j->rules[i], i, fam, &a->data, a->field);
		}
	ret = build_orders(j, fam, rules, cnt, rsz, s);
	free(rules);
	return ret;
}

static int
rank_cmp(const void *a, const void *b)
{
	uint64_t x = ((const struct job_rule *)a)->rank, y = ((const struct job_rule *)b)->rank;

	return x < y ? -1 : x > y;
}

static void
snap_free(struct nct_snap *s)
{
	if (s == NULL)
		return;
	for (unsigned int f = 0; f < 2; f++)
		for (unsigned int i = 0; i < s->nacl[f]; i++)
			rte_acl_free(s->acl[f][i]);
	free(s->rank);
	free(s->dead);
	free(s);
}

/* The builder thread: sort, compile both families, hand the result over. */
static void *
builder(void *arg)
{
	struct snap_job *j = arg;
	struct nct_snap *s;
	uint64_t heap0 = nct_heap_bytes(), t0 = now_ns(), heap1;
	int ret = 0;

	/*
	 * At the writer's priority, not SCHED_IDLE: rte_acl takes DPDK's heap and
	 * tailq locks, which spin, and a builder starved while it held one left
	 * the writer spinning behind it (netchanneld's control thread stalled
	 * 0.7 s under a client's channel churn). Its share of the CPU is bounded
	 * by the rate of builds instead (snap_finish()).
	 */
	pthread_setname_np(pthread_self(), "nc-snapshot");
	s = calloc(1, sizeof(*s));
	if (s != NULL) {
		for (uint32_t i = 0; i < j->n; i++)
			if (j->rules[i].id >= s->nids)
				s->nids = j->rules[i].id + 1;
		s->rank = calloc(s->nids + 1, sizeof(*s->rank));
		s->dead = calloc(s->nids / 64 + 1, sizeof(*s->dead));
	}
	if (s == NULL || s->rank == NULL || s->dead == NULL) {
		ret = -ENOMEM;
		goto out;
	}
	/* Ascending rank: a rule's place is its rte_acl priority, higher wins. */
	qsort(j->rules, j->n, sizeof(*j->rules), rank_cmp);
	for (uint32_t i = 0; i < j->n; i++)
		s->rank[j->rules[i].id] = j->rules[i].rank;
	s->n = j->n;
	s->all = j->all;
	for (unsigned int fam = 0; fam < 2 && ret == 0; fam++)
		ret = build_family(j, fam, s);
	heap1 = nct_heap_bytes();
	s->bytes = (heap1 > heap0 ? heap1 - heap0 : 0) + (uint64_t)(s->nids + 1) * sizeof(*s->rank) +
		   (s->nids / 64 + 1) * sizeof(*s->dead);
	s->build_us = (now_ns() - t0) / 1000;
out:
	if (ret != 0) {
		snap_free(s);
		s = NULL;
	}
	j->out = s;
	j->err = ret;
	__atomic_store_n(&j->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* ---- the delta -------------------------------------------------------------- */

static int
delta_create(struct nc_trie *t)
{
	struct nc_trie_config c = NC_TRIE_SIZED(nc_trie_config, .name = "delta",
			.socket_id = t->socket_id, .max_rules = t->max_rules,
			.flags = NC_TRIE_F_NO_SNAPSHOT);

	if (t->delta != NULL)
		return 0;
	t->delta = nct_create(&c, NCT_F_DELTA);
	if (t->delta == NULL)
		return -ENOMEM;
	t->delta->qsbr = t->qsbr;
	return 0;
}

/* Room in the delta for a rule's entries, checked before the table changes. */
int
nct_delta_reserve(struct nc_trie *t, const struct nc_trie_rule *r)
{
	if (!t->delta_on)
		return 0;
	return nct_reclaim_for(t->delta, nct_node_room,
			       (uint64_t)nct_rule_nentries(r) * NODES_PER_ENTRY) ? 0 : -ENOSPC;
}

/* A rule just added, when a copy has been taken since the delta was last emptied. */
void
nct_delta_add(struct nc_trie *t, const struct nc_trie_rule *r, uint32_t id, uint64_t rank)
{
	struct add_ctx a = { t->delta, r, id, rank };

	if (!t->delta_on)
		return;
	nct_rule_foreach_entry(r, nct_entry_insert, &a);
	t->rules[id].delta = 1;
	t->ndelta++;
}

/* A rule as it was added, wherever it lives. */
static void
rule_of(const struct nc_trie *t, uint32_t id, struct nc_trie_rule *r)
{
	if (t->rules[id].tuple == IN_TRIE)
		*r = *t->rules[id].u.full;
	else
		nct_entry_rule(t, id, r);
}

static int
delta_remove(struct nc_trie *t, uint32_t id)
{
	struct rule_slot *sl = &t->rules[id];
	struct nc_trie_rule r;
	struct add_ctx a = { t->delta, &r, id, sl->rank };

	rule_of(t, id, &r);
	if (nct_scratch_reserve(t->delta, (uint64_t)nct_rule_nentries(&r) * NODES_PER_ENTRY) != 0)
		return -ENOMEM;
	nct_rule_foreach_entry(&r, nct_entry_remove, &a);
	nct_scratch_retire(t->delta);
	sl->delta = 0;
	t->ndelta--;
	return 0;
}

/* Mark rule id of this rank dead in s, if s holds it (not a later rule of the same id). */
static void
snap_kill(struct nct_snap *s, uint32_t id, uint64_t rank)
{
	if (id >= s->nids || s->rank[id] != rank)
		return;
	__atomic_fetch_or(&s->dead[id / 64], UINT64_C(1) << (id % 64), __ATOMIC_RELAXED);
	/* Release: a lookup that sees the count sees the bit. */
	__atomic_fetch_add(&s->ndead, 1, __ATOMIC_RELEASE);
}

/* How many of the installed snapshot's rules were deleted since its copy (the writer's read). */
static uint32_t
snap_stale(const struct nc_trie *t)
{
	return t->snap != NULL ? __atomic_load_n(&t->snap->ndead, __ATOMIC_RELAXED) : 0;
}

/*
 * Before a rule leaves the table: out of the delta, dead in the snapshot, and
 * remembered for the one being built. Fails (-ENOMEM) only before it changes
 * anything; without memory to remember it, the build's result is dropped.
 */
int
nct_delta_delete(struct nc_trie *t, uint32_t id)
{
	uint64_t rank = t->rules[id].rank;
	struct snap_job *j = t->job;

	if (t->rules[id].delta && delta_remove(t, id) != 0)
		return -ENOMEM;
	if (t->snap != NULL)
		snap_kill(t->snap, id, rank);
	if (j != NULL && rank_seq(rank) < j->seq && j->deleted_cap != UINT32_MAX) {
		if (j->ndeleted == j->deleted_cap) {
			uint32_t cap = j->deleted_cap ? 2 * j->deleted_cap : 64;
			void *d = realloc(j->deleted, cap * sizeof(*j->deleted));

			if (d == NULL) {
				j->deleted_cap = UINT32_MAX;
				return 0;
			}
			j->deleted = d;
			j->deleted_cap = cap;
		}
		j->deleted[j->ndeleted].id = id;
		j->deleted[j->ndeleted++].rank = rank;
	}
	return 0;
}

/* The delta's rules that the installed snapshot holds (sequence below seq) leave it. */
static bool
delta_prune(struct nc_trie *t, uint64_t seq)
{
	for (uint32_t id = 0; id < t->max_rules && t->ndelta > 0; id++) {
		const struct rule_slot *sl = &t->rules[id];

		if (sl->used && sl->delta && rank_seq(sl->rank) < seq && delta_remove(t, id) != 0)
			return false;
	}
	return true;
}

/* ---- the writer's side: start, install, retire ------------------------------ */

static bool
snap_wanted(const struct nc_trie *t)
{
	if (t->ntrie_rules < SNAP_MIN_RULES)
		return false;
	return t->snap == NULL || t->ndelta > 0 || snap_stale(t) > 0;
}

/*
 * Copy the rules and start a builder; adds go to the delta from now on. The
 * front stage's rules are copied too when they are fewer than the trie's:
 * then a lookup skips the front stage, whose passes would cost more than
 * rte_acl's share of them.
 */
static int
snap_start(struct nc_trie *t)
{
	struct snap_job *j = calloc(1, sizeof(*j));
	const uint32_t total = t->max_rules - t->nfree_ids;
	const bool all = total - t->ntrie_rules <= t->ntrie_rules;
	const uint32_t want = all ? total : t->ntrie_rules;
	uint32_t n = 0;

	if (j == NULL || delta_create(t) != 0)
		goto nomem;
	j->rules = malloc((want ? want : 1) * sizeof(*j->rules));
	if (j->rules == NULL)
		goto nomem;
	for (uint32_t id = 0; id < t->max_rules && n < want; id++) {
		const struct rule_slot *sl = &t->rules[id];

		if (!sl->used || (!all && sl->tuple != IN_TRIE))
			continue;
		j->rules[n] = (struct job_rule){ .rank = sl->rank, .id = id };
		rule_of(t, id, &j->rules[n++].r);
	}
	j->n = n;
	j->all = all;
	j->seq = t->seq;
	j->socket_id = t->socket_id;
	if (t->snap != NULL) {
		memcpy(j->order, t->snap->order, sizeof(j->order));
		memcpy(j->order_rules, t->snap->order_rules, sizeof(j->order_rules));
	}
	j->force_order = t->force_order;
	j->start_ns = now_ns();
	if (pthread_create(&j->th, NULL, builder, j) != 0)
		goto nomem;
	t->job = j;
	t->delta_on = true;
	return 0;
nomem:
	if (j != NULL)
		free(j->rules);
	free(j);
	t->failures++;
	return -ENOMEM;
}

/* Free the replaced snapshot and prune the delta, once the readers of it are gone. */
static void
snap_retire(struct nc_trie *t, bool wait)
{
	if (!t->retire_pending)
		return;
	if (t->qsbr != NULL && rte_rcu_qsbr_check(t->qsbr, t->retire_token, wait) != 1)
		return;
	if (!delta_prune(t, t->prune_seq))
		return; /* no memory for a delete's bookkeeping: next time */
	snap_free(t->retired);
	t->retired = NULL;
	t->retire_pending = false;
}

/* Publish s (or none) in place of the installed snapshot, which retires. */
static void
snap_publish(struct nc_trie *t, struct nct_snap *s, uint64_t prune_seq)
{
	if (t->retire_pending)
		snap_retire(t, true);
	t->retired = t->snap;
	__atomic_store_n(&t->snap, s, __ATOMIC_RELEASE);
	t->prune_seq = prune_seq;
	t->retire_pending = true;
	if (t->qsbr != NULL)
		t->retire_token = rte_rcu_qsbr_start(t->qsbr);
	snap_retire(t, false);
}

/* Take a finished (or, with wait, a running) build and install what it made. */
static int
snap_finish(struct nc_trie *t, bool wait)
{
	struct snap_job *j = t->job;
	uint64_t took;
	int err;

	if (j == NULL || (!wait && !__atomic_load_n(&j->done, __ATOMIC_ACQUIRE)))
		return 0;
	pthread_join(j->th, NULL);
	t->job = NULL;
	err = j->err;
	took = now_ns() - j->start_ns;
	t->build_total_us += took / 1000;
	/* At most half of the time compiling, whatever the churn. */
	t->next_build_ns = now_ns() + took;
	if (err == 0 && j->deleted_cap == UINT32_MAX) {
		err = -ENOMEM;
		snap_free(j->out);
	}
	if (err == 0) {
		/* The deletes since the copy, before any reader can see it. */
		for (uint32_t i = 0; i < j->ndeleted; i++)
			snap_kill(j->out, j->deleted[i].id, j->deleted[i].rank);
		t->builds++;
		snap_publish(t, j->out, j->seq);
	} else {
		t->failures++;
	}
	free(j->deleted);
	free(j->rules);
	free(j);
	return err;
}

void
nct_snap_maintain(struct nc_trie *t, bool wait, bool start)
{
	snap_finish(t, wait);
	snap_retire(t, wait);
	if (!start || t->job != NULL || !snap_enabled(t) || now_ns() < t->next_build_ns)
		return;
	if (t->snap != NULL && t->ntrie_rules < SNAP_MIN_RULES) {
		/* Too few rules to be worth it: back to the trie alone, the delta emptied. */
		snap_publish(t, NULL, t->seq);
		t->delta_on = false;
		return;
	}
	if (snap_wanted(t))
		snap_start(t);
}

int
nc_trie_snapshot_sync(struct nc_trie *t)
{
	int ret;

	if (t == NULL)
		return -EINVAL;
	if (!snap_enabled(t))
		return -ENOTSUP;
	snap_finish(t, true);
	t->next_build_ns = 0;
	nct_snap_maintain(t, false, true);
	ret = snap_finish(t, true);
	snap_retire(t, true);
	return ret;
}

void
nct_snap_free_all(struct nc_trie *t)
{
	if (t->job != NULL) {
		__atomic_store_n(&t->job->cancel, 1, __ATOMIC_RELEASE);
		pthread_join(t->job->th, NULL);
		snap_free(t->job->out);
		free(t->job->deleted);
		free(t->job->rules);
		free(t->job);
	}
	snap_free(t->retired);
	snap_free(t->snap);
	nc_trie_free(t->delta);
}

/* Test and benchmark hook: every snapshot from the next on in order o (-1: pick one). */
void
nct_snap_force_order(struct nc_trie *t, int o)
{
	t->force_order = o >= 0 && o < NCT_ACL_ORDERS ? o : -1;
}

void
nct_snap_stats(const struct nc_trie *t, struct nc_trie_stats *s)
{
	struct nc_trie_stats d = { .size = sizeof(d) };

	s->snapshot_state = !snap_enabled(t) ? NC_TRIE_SNAPSHOT_OFF :
			    t->snap != NULL ? NC_TRIE_SNAPSHOT_READY :
			    t->job != NULL ? NC_TRIE_SNAPSHOT_BUILDING : NC_TRIE_SNAPSHOT_NONE;
	s->delta_rules = t->ndelta;
	s->stale_rules = snap_stale(t);
	s->snapshot_builds = t->builds;
	s->snapshot_failures = t->failures;
	s->snapshot_build_total_us = t->build_total_us;
	if (t->snap != NULL) {
		for (unsigned int f = 0; f < 2; f++)
			snprintf(s->snapshot_layout[f], sizeof(s->snapshot_layout[f]), "%s",
				 t->snap->nacl[f] ? nct_acl_order_name(t->snap->order[f]) : "");
		s->snapshot_rules = t->snap->n;
		s->snapshot_build_us = t->snap->build_us;
		s->snapshot_bytes = t->snap->bytes;
		s->bytes += t->snap->bytes;
	}
	if (t->delta != NULL && nc_trie_get_stats(t->delta, &d) == 0)
		s->bytes += d.bytes;
}
