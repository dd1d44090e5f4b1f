/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * nctrie-bench perf: nctrie, rte_acl and a linear scan on the same rules and
 * packets, in one run.
 *
 * Lookup: ns/packet at bursts 1, 32 and 64 (median of 5 timed passes of at
 * least 100 ms). Build: time to load every rule. Update: one rule added and
 * removed; nctrie and the scan time each operation (10,000 pairs by default;
 * nctrie with a reader thread looking up on the other core), rte_acl can only
 * rebuild, so each of its updates is a full build of n + 1 rules. Memory:
 * nctrie's own count, rte_acl's growth of the DPDK heap, the scan's array.
 * Answers are compared with the linear scan (mismatches).
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <unistd.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <arpa/inet.h>

#include <rte_acl.h>
#include <rte_hash.h>
#include <rte_hash_crc.h>
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_rcu_qsbr.h>

#include "bench.h"
#include "nc_trie_acl.h"
#include "nc_trie_tools.h"

#define MEASURE_PASSES 5
#define MIN_PASS_NS 100000000.0
#define LINEAR_MAX_RULES 10000
#define LINEAR_SAMPLE 4096

static const unsigned int bursts[] = { 1, 32, 64 };
static bool burst_on[3] = { true, true, true };

struct workload {
	char name[64];
	struct nc_trie_rule *rules;
	uint32_t nrules;
	struct nc_trie_key *keys;
	uint32_t nkeys;
	uint64_t seed;
	unsigned int fam; /* the rte_acl layout: 0 IPv4, 1 IPv6 */
	unsigned int acl_order; /* the order the reference reads fields in (nct_acl_defs()) */
};

struct result {
	const char *classifier;
	const char *variant;
	double lookup_ns[3];
	double build_ms;
	double update_median_ns, update_p99_ns;
	unsigned int updates;
	uint64_t memory_bytes;
	uint64_t mismatches, checked;
	char layout[NC_TRIE_LAYOUT_SIZE]; /* the order rte_acl reads fields in */
	double snapshot_ms;                /* nctrie: its snapshots' compiles, order search included */
	bool ran;
};

static double
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double
percentile(double *v, unsigned int n, double p)
{
	unsigned int i;

	qsort(v, n, sizeof(*v), cmp_double);
	i = (unsigned int)(p * (n - 1) + 0.5);
	return v[i];
}

/* ---- the synthetic "socket" workload ------------------------------------ */

/* Room for a synthetic workload's n rules and npkts keys, zeroed; 0 or -ENOMEM. */
static int
workload_alloc(struct workload *w, uint32_t n, uint32_t npkts)
{
	w->rules = calloc(n, sizeof(*w->rules));
	w->keys = calloc(npkts, sizeof(*w->keys));
	if (w->rules == NULL || w->keys == NULL)
		return -ENOMEM;
	w->nrules = n;
	w->nkeys = npkts;
	return 0;
}

/*
 * netchanneld's own shape: 90% exact 5-tuples (connected sockets), 10%
 * listeners (dst, dport, proto). Exact rules rank above listeners, as a
 * connected socket does. Packets: 80% exact hits, 15% listener hits, 5% misses.
 */
static int
gen_socket(struct workload *w, uint32_t n, uint32_t npkts)
{
	uint32_t nl = n / 10, ne = n - nl;
	uint64_t s = w->seed;

	if (workload_alloc(w, n, npkts) != 0)
		return -ENOMEM;
	for (uint32_t i = 0; i < n; i++) {
		struct nc_trie_rule *r = &w->rules[i];

		r->family = NC_TRIE_AF_INET;
		r->proto = nc_rand(&s) % 2 ? 6 : 17;
		r->proto_mask = 0xff;
		/* 256 local addresses in 10.0.0.0/16. */
		r->dst.v4 = htonl(0x0a000000u | (uint32_t)(nc_rand(&s) % 256) << 8 | 1);
		r->dst_len = 32;
		r->dport.kind = NC_TRIE_PORT_RANGE;
		r->dport.lo = r->dport.hi = (uint16_t)(1 + nc_rand(&s) % 65535);
		if (i < ne) {
			r->src.v4 = (uint32_t)nc_rand(&s);
			r->src_len = 32;
			r->sport.kind = NC_TRIE_PORT_RANGE;
			r->sport.lo = r->sport.hi = (uint16_t)(1 + nc_rand(&s) % 65535);
		}
		r->priority = n - 1 - i;
	}
	for (uint32_t i = 0; i < npkts; i++) {
		struct nc_trie_key *k = &w->keys[i];
		unsigned int c = (unsigned int)(nc_rand(&s) % 100);

		if (c < 80 && ne > 0) {
			nc_key_inside(&w->rules[nc_rand(&s) % ne], k, &s);
		} else if (c < 95 && nl > 0) {
			nc_key_inside(&w->rules[ne + nc_rand(&s) % nl], k, &s);
		} else {
			memset(k, 0, sizeof(*k));
			k->family = NC_TRIE_AF_INET;
			k->proto = 17;
			k->dst.v4 = htonl(0x0b000000u | (uint32_t)(nc_rand(&s) & 0xffffff));
			k->src.v4 = (uint32_t)nc_rand(&s);
			k->sport = (uint16_t)nc_rand(&s);
			k->dport = (uint16_t)nc_rand(&s);
		}
	}
	return 0;
}

/*
 * A daemon that serves ports ("udp dport 53" for every address, as the
 * datapath benchmark's deliver-1): n rules of a protocol (TCP or UDP) and a
 * dport each, of any family. Packets: 95% to one of them, 5% SCTP (misses).
 */
static int
gen_port(struct workload *w, uint32_t n, uint32_t npkts)
{
	uint64_t s = w->seed;

	if (workload_alloc(w, n, npkts) != 0)
		return -ENOMEM;
	for (uint32_t i = 0; i < n; i++) {
		struct nc_trie_rule *r = &w->rules[i];

		r->family = NC_TRIE_AF_ANY;
		r->proto = i % 2 ? 6 : 17;
		r->proto_mask = 0xff;
		r->dport.kind = NC_TRIE_PORT_RANGE;
		r->dport.lo = r->dport.hi = (uint16_t)(5000 + i / 2);
		r->priority = n - 1 - i;
	}
	for (uint32_t i = 0; i < npkts; i++) {
		struct nc_trie_key *k = &w->keys[i];

		memset(k, 0, sizeof(*k));
		k->family = NC_TRIE_AF_INET;
		k->dst.v4 = htonl(0x0a000000u | (uint32_t)(nc_rand(&s) & 0xffff));
		k->src.v4 = (uint32_t)nc_rand(&s);
		k->sport = (uint16_t)nc_rand(&s);
		if (nc_rand(&s) % 100 < 95) {
			const struct nc_trie_rule *r = &w->rules[nc_rand(&s) % n];

			k->proto = r->proto;
			k->dport = r->dport.lo;
		} else {
			k->proto = 132;
			k->dport = (uint16_t)nc_rand(&s);
		}
	}
	return 0;
}

/*
 * The workload in IPv6 (--ipv6): each IPv4 prefix a of length l becomes
 * 2001:db8:a::/(32 + l) (a site's /48s and /64s where IPv4 has /16s and
 * /32s), a wildcard stays one; each key's address 2001:db8:a: and 64 random
 * bits, which no rule looks at and the classifiers must still read.
 */
static void
addr_to_v6(union nc_trie_addr *a, uint8_t *len, bool key, uint64_t *s)
{
	const uint32_t v4 = a->v4;
	const uint64_t low = key ? nc_rand(s) : 0;

	if (!key && *len == 0)
		return;
	memset(a, 0, sizeof(*a));
	a->a[0] = 0x20, a->a[1] = 0x01, a->a[2] = 0x0d, a->a[3] = 0xb8;
	memcpy(a->a + 4, &v4, 4);
	memcpy(a->a + 8, &low, 8);
	if (!key)
		*len = (uint8_t)(32 + *len);
}

static void
workload_to_v6(struct workload *w)
{
	uint64_t s = w->seed ^ 0x66;
	uint8_t unused = 0;

	for (uint32_t i = 0; i < w->nrules; i++) {
		struct nc_trie_rule *r = &w->rules[i];

		if (r->family == NC_TRIE_AF_ANY && r->src_len == 0 && r->dst_len == 0)
			continue;
		r->family = NC_TRIE_AF_INET6;
		addr_to_v6(&r->src, &r->src_len, false, &s);
		addr_to_v6(&r->dst, &r->dst_len, false, &s);
	}
	for (uint32_t i = 0; i < w->nkeys; i++) {
		w->keys[i].family = NC_TRIE_AF_INET6;
		addr_to_v6(&w->keys[i].src, &unused, true, &s);
		addr_to_v6(&w->keys[i].dst, &unused, true, &s);
	}
	w->fam = 1;
	strncat(w->name, "-v6", sizeof(w->name) - strlen(w->name) - 1);
}

/* A rule of the workload's shape for the update test, at a priority no other rule has. */
static void
update_rule(const struct workload *w, struct nc_trie_rule *r, uint64_t *s, uint32_t i)
{
	const unsigned int host = w->fam ? 64 : 32, at = w->fam ? 4 : 0;

	*r = w->rules[nc_rand(s) % w->nrules];
	if (r->src_len == host) {
		const uint32_t a = (uint32_t)nc_rand(s);

		memcpy(r->src.a + at, &a, 4);
	}
	r->priority = w->nrules + i % (NC_TRIE_PRIO_MAX - w->nrules);
}

/* ---- nctrie ------------------------------------------------------------- */

struct reader_arg {
	const struct nc_trie *t;
	const struct nc_trie_key *keys;
	uint32_t nkeys;
	struct rte_rcu_qsbr *v;
	volatile int stop;
	uint64_t lookups;
};

static int
reader_main(void *p)
{
	struct reader_arg *a = p;
	uint32_t res[32], pos = 0;

	rte_rcu_qsbr_thread_register(a->v, 0);
	rte_rcu_qsbr_thread_online(a->v, 0);
	while (!a->stop) {
		if (pos + 32 > a->nkeys)
			pos = 0;
		nc_trie_lookup_bulk(a->t, a->keys + pos, res, 32);
		pos += 32;
		a->lookups += 32;
		rte_rcu_qsbr_quiescent(a->v, 0);
	}
	rte_rcu_qsbr_thread_offline(a->v, 0);
	rte_rcu_qsbr_thread_unregister(a->v, 0);
	return 0;
}

/* Classify keys [i, i + burst) of a classifier's input. */
typedef void (*burst_fn)(const void *ctx, uint32_t i, unsigned int burst, uint32_t *res);

/* Every whole burst of the keys once: how many keys that was. */
static uint32_t
sweep(burst_fn fn, const void *ctx, uint32_t n, unsigned int burst)
{
	uint32_t res[64];

	for (uint32_t i = 0; i + burst <= n; i += burst)
		fn(ctx, i, burst, res);
	return n / burst * burst;
}

/* One pass over the keys, again until MIN_PASS_NS: its ns/packet. */
static double
time_pass(burst_fn fn, const void *ctx, uint32_t n, unsigned int burst)
{
	double t0 = now_ns(), el;
	uint64_t cnt = 0;

	do {
		cnt += sweep(fn, ctx, n, burst);
		el = now_ns() - t0;
	} while (el < MIN_PASS_NS);
	return el / (double)cnt;
}

/* A classifier's lookups, for the timing of all of them together. */
struct timed {
	burst_fn fn;
	const void *ctx;
	double *ns; /* its result's lookup_ns, by burst */
};

/*
 * Each classifier's median ns/packet at each burst, their passes taken in
 * turn and the first of each round changing: this machine slows down and
 * speeds up by tens of percent over seconds, and that way it does so for
 * all of them, so that the ratios hold.
 */
static void
time_interleaved(const struct timed *c, unsigned int n, uint32_t nkeys)
{
	for (unsigned int b = 0; b < 3; b++) {
		double pass[3][MEASURE_PASSES];

		if (!burst_on[b])
			continue;
		for (unsigned int p = 0; p < MEASURE_PASSES; p++)
			for (unsigned int j = 0; j < n; j++) {
				const unsigned int k = (j + p) % n;

				/* Untimed, one sweep: the caches hold the other's structures. */
				sweep(c[k].fn, c[k].ctx, nkeys, bursts[b]);
				pass[k][p] = time_pass(c[k].fn, c[k].ctx, nkeys, bursts[b]);
			}
		for (unsigned int k = 0; k < n; k++)
			c[k].ns[b] = percentile(pass[k], MEASURE_PASSES, 0.5);
	}
}

struct nctrie_input {
	const struct nc_trie *t;
	const struct nc_trie_key *keys;
};

static void
nctrie_burst(const void *ctx, uint32_t i, unsigned int burst, uint32_t *res)
{
	const struct nctrie_input *in = ctx;

	nc_trie_lookup_bulk(in->t, &in->keys[i], res, burst);
}

/* The trie of the workload's rules, its snapshot compiled: its build time, memory and answers. */
static struct nc_trie *
nctrie_prepare(const struct workload *w, struct result *r, uint32_t *answers)
{
	struct nc_trie_stats st = { .size = sizeof(st) };
	struct nc_trie *t;
	double t0;

	r->classifier = "nctrie";
	r->variant = "";
	t0 = now_ns();
	t = bench_build_trie(w->rules, w->nrules, 16);
	if (t == NULL)
		return NULL;
	r->build_ms = (now_ns() - t0) / 1e6;
	/* What a table gets within a build's time of its last change: its snapshot. */
	nc_trie_snapshot_sync(t);
	nc_trie_get_stats(t, &st);
	r->memory_bytes = st.bytes;
	r->snapshot_ms = st.snapshot_build_total_us / 1e3;
	memcpy(r->layout, st.snapshot_layout[w->fam], sizeof(r->layout));
	nc_trie_lookup_bulk(t, w->keys, answers, w->nkeys);
	return t;
}

/* Single-rule updates of the trie, with a reader on another core; then it goes. */
static int
nctrie_updates(const struct workload *w, struct result *r, struct nc_trie *t,
	       unsigned int updates)
{
	struct reader_arg ra = { 0 };
	unsigned int reader_lcore = rte_get_next_lcore(rte_lcore_id(), 1, 0);
	uint64_t s = w->seed ^ 0x55;
	unsigned int done = 0;
	double *lat;
	size_t vsz;

	vsz = rte_rcu_qsbr_get_memsize(1);
	ra.v = rte_zmalloc("bench_qsbr", vsz, RTE_CACHE_LINE_SIZE);
	lat = malloc(2 * (updates ? updates : 1) * sizeof(*lat));
	if (ra.v == NULL || lat == NULL || rte_rcu_qsbr_init(ra.v, 1) != 0) {
		fprintf(stderr, "nctrie-bench: out of memory for the update test\n");
		nc_trie_free(t);
		return -1;
	}
	nc_trie_rcu_qsbr_add(t, ra.v);
	ra.t = t;
	ra.keys = w->keys;
	ra.nkeys = w->nkeys;
	if (reader_lcore < RTE_MAX_LCORE)
		rte_eal_remote_launch(reader_main, &ra, reader_lcore);
	for (unsigned int i = 0; i < updates; i++) {
		struct nc_trie_rule nr;
		uint64_t c0, c1, c2;
		int id;

		update_rule(w, &nr, &s, i);
		c0 = rte_rdtsc_precise();
		id = nc_trie_add(t, &nr);
		c1 = rte_rdtsc_precise();
		if (id < 0 || nc_trie_delete(t, (uint32_t)id) != 0) {
			fprintf(stderr, "nctrie-bench: update %u failed: %s\n", i, strerror(-id));
			break;
		}
		c2 = rte_rdtsc_precise();
		lat[2 * i] = (double)(c1 - c0) * 1e9 / (double)rte_get_tsc_hz();
		lat[2 * i + 1] = (double)(c2 - c1) * 1e9 / (double)rte_get_tsc_hz();
		done++;
	}
	ra.stop = 1;
	if (reader_lcore < RTE_MAX_LCORE)
		rte_eal_wait_lcore(reader_lcore);
	r->updates = done;
	if (done) {
		r->update_p99_ns = percentile(lat, 2 * done, 0.99);
		r->update_median_ns = percentile(lat, 2 * done, 0.5);
	}
	free(lat);
	nc_trie_rcu_qsbr_add(t, NULL);
	rte_free(ra.v);
	nc_trie_free(t);
	r->ran = true;
	return 0;
}

/* ---- rte_acl ------------------------------------------------------------ */

/*
 * The snapshot's layouts (nc_trie_acl.h): both compile the same rules from
 * the same fields, IPv4's 5 or IPv6's 11.
 */
/* Rule i of an array of the workload's rte_acl rules. */
static struct rte_acl_rule *
acl_at(const struct workload *w, void *rules, uint32_t i)
{
	const size_t sz = RTE_ACL_RULE_SZ(nct_acl_nfields(w->fam));

	return (struct rte_acl_rule *)((uint8_t *)rules + (size_t)i * sz);
}

static void
acl_rule(const struct workload *w, const struct nc_trie_rule *r, uint32_t idx, uint32_t prio,
	 struct rte_acl_rule *a)
{
	memset(a, 0, RTE_ACL_RULE_SZ(nct_acl_nfields(w->fam)));
	a->data.category_mask = 1;
	a->data.priority = (int32_t)prio;
	a->data.userdata = idx + 1;
	nct_acl_fields(r, w->fam, a->field);
}

/* Build a context of the workload's rules (plus an optional extra one). */
static struct rte_acl_ctx *
acl_build(const struct workload *w, const void *rules, const struct rte_acl_rule *extra,
	  unsigned int gen)
{
	char name[RTE_ACL_NAMESIZE];
	struct rte_acl_param prm = {
		.name = name, .socket_id = SOCKET_ID_ANY, .rule_size = RTE_ACL_RULE_SZ(nct_acl_nfields(w->fam)),
		.max_rule_num = w->nrules + 1,
	};
	struct rte_acl_config cfg = { .num_categories = 1, .num_fields = nct_acl_nfields(w->fam) };
	struct rte_acl_ctx *ctx;
	int ret;

	snprintf(name, sizeof(name), "bench%u", gen);
	nct_acl_defs(w->fam, w->acl_order, cfg.defs);
	ctx = rte_acl_create(&prm);
	if (ctx == NULL) {
		fprintf(stderr, "nctrie-bench: rte_acl_create: %s\n", rte_strerror(rte_errno));
		return NULL;
	}
	ret = rte_acl_add_rules(ctx, rules, w->nrules);
	if (ret == 0 && extra != NULL)
		ret = rte_acl_add_rules(ctx, extra, 1);
	if (ret == 0)
		ret = rte_acl_build(ctx, &cfg);
	if (ret != 0) {
		fprintf(stderr, "nctrie-bench: rte_acl build: %s\n", strerror(-ret));
		rte_acl_free(ctx);
		return NULL;
	}
	return ctx;
}

struct acl_input {
	const struct rte_acl_ctx *ctx;
	const uint8_t **data;
};

static void
acl_burst(const void *ctx, uint32_t i, unsigned int burst, uint32_t *res)
{
	const struct acl_input *in = ctx;

	rte_acl_classify(in->ctx, &in->data[i], res, burst, 1);
}

/* rte_acl's context of the workload's rules and its input, kept for the timing. */
struct acl_state {
	void *rules;
	uint8_t *keys;
	const uint8_t **data;
	struct rte_acl_ctx *ctx;
};

/* rte_acl's context, on its fastest classify path here: its build time, memory and answers. */
static int
acl_prepare(const struct workload *w, struct result *r, uint32_t *answers, struct acl_state *st)
{
	static const struct {
		enum rte_acl_classify_alg alg;
		const char *name;
	} algs[] = {
		{ RTE_ACL_CLASSIFY_AVX512X32, "avx512x32" }, { RTE_ACL_CLASSIFY_AVX512X16, "avx512x16" },
		{ RTE_ACL_CLASSIFY_AVX2, "avx2" }, { RTE_ACL_CLASSIFY_SSE, "sse" },
		{ RTE_ACL_CLASSIFY_SCALAR, "scalar" },
	};
	const size_t key_sz = w->fam ? sizeof(struct nct_acl_key6) : sizeof(struct nct_acl_key4);
	double t0, best = 0, pass[RTE_DIM(algs)][MEASURE_PASSES];
	uint64_t heap0;

	r->classifier = "rte_acl";
	snprintf(r->layout, sizeof(r->layout), "%s", nct_acl_order_name(w->acl_order));
	st->rules = malloc((size_t)w->nrules * RTE_ACL_RULE_SZ(nct_acl_nfields(w->fam)));
	st->keys = malloc(w->nkeys * key_sz);
	st->data = malloc(w->nkeys * sizeof(*st->data));
	if (st->rules == NULL || st->keys == NULL || st->data == NULL)
		return -1;
	for (uint32_t i = 0; i < w->nrules; i++)
		acl_rule(w, &w->rules[i], i, w->nrules - i, acl_at(w, st->rules, i));
	for (uint32_t i = 0; i < w->nkeys; i++)
		st->data[i] = nct_acl_key(w->fam, &w->keys[i], st->keys + i * key_sz);
	heap0 = nct_heap_bytes();
	t0 = now_ns();
	st->ctx = acl_build(w, st->rules, NULL, 0);
	if (st->ctx == NULL)
		return -1;
	r->build_ms = (now_ns() - t0) / 1e6;
	r->memory_bytes = nct_heap_bytes() - heap0;

	/* Its best path on this CPU, by measurement at burst 32, the methods' passes in turn. */
	for (unsigned int p = 0; p < MEASURE_PASSES; p++)
		for (unsigned int j = 0; j < RTE_DIM(algs); j++) {
			const unsigned int a = (j + p) % RTE_DIM(algs);

			pass[a][p] = rte_acl_set_ctx_classify(st->ctx, algs[a].alg) != 0 ? 0 :
				time_pass(acl_burst, &(struct acl_input){ st->ctx, st->data },
					  w->nkeys, 32);
		}
	for (unsigned int a = 0; a < RTE_DIM(algs); a++) {
		const double ns = percentile(pass[a], MEASURE_PASSES, 0.5);

		if (ns > 0 && (best == 0 || ns < best)) {
			best = ns;
			r->variant = algs[a].name;
		}
	}
	for (unsigned int a = 0; a < RTE_DIM(algs); a++)
		if (strcmp(algs[a].name, r->variant) == 0)
			rte_acl_set_ctx_classify(st->ctx, algs[a].alg);
	for (uint32_t i = 0; i + 64 <= w->nkeys; i += 64)
		rte_acl_classify(st->ctx, &st->data[i], &answers[i], 64, 1);
	if (w->nkeys % 64)
		rte_acl_classify(st->ctx, &st->data[w->nkeys / 64 * 64],
				 &answers[w->nkeys / 64 * 64], w->nkeys % 64, 1);
	for (uint32_t i = 0; i < w->nkeys; i++)
		answers[i] = answers[i] ? answers[i] - 1 : NC_TRIE_NOMATCH;
	return 0;
}

/* An update of rte_acl: a rebuild of every rule plus the new one. Then it all goes. */
static void
acl_rebuilds(const struct workload *w, struct result *r, struct acl_state *st,
	     unsigned int rebuilds)
{
	uint64_t s = w->seed ^ 0xaa;
	double t0, *lat = malloc((rebuilds ? rebuilds : 1) * sizeof(*lat));

	rte_acl_free(st->ctx);
	for (unsigned int i = 0; lat != NULL && i < rebuilds; i++) {
		RTE_ACL_RULE_DEF(, NCT_ACL_V6_FIELDS) extra; /* room for either layout */
		struct nc_trie_rule nr;
		struct rte_acl_ctx *ctx;

		update_rule(w, &nr, &s, i);
		acl_rule(w, &nr, w->nrules, w->nrules + 1, (struct rte_acl_rule *)&extra);
		t0 = now_ns();
		ctx = acl_build(w, st->rules, (struct rte_acl_rule *)&extra, i + 1);
		lat[i] = now_ns() - t0;
		rte_acl_free(ctx);
	}
	r->updates = rebuilds;
	if (lat != NULL && rebuilds) {
		r->update_p99_ns = percentile(lat, rebuilds, 0.99);
		r->update_median_ns = percentile(lat, rebuilds, 0.5);
	}
	free(lat);
	r->ran = true;
}

/* The rules and keys acl_prepare() laid out. */
static void
acl_state_free(struct acl_state *st)
{
	free(st->data);
	free(st->keys);
	free(st->rules);
}

/* ---- rte_hash ------------------------------------------------------------ */

/*
 * The peer of an exact 5-tuple lookup (a channel per connected socket):
 * DPDK's cuckoo hash, two of them as a kernel's socket lookup has, the
 * connected sockets' 5-tuples first and the listeners' (protocol,
 * destination, port) for what those miss, each in bulk. Only for workloads
 * of those two shapes (socket:N), the connected ones of higher priority.
 */
struct listen_key {
	uint8_t family, proto;
	uint16_t dport;
	uint8_t dst[16];
};

struct hash_state {
	struct rte_hash *exact, *listen;
	uint32_t *exact_id, *listen_id;     /* the rule at each key position */
	struct nc_trie_key *ek;             /* the input's keys, as the tables hash them */
	struct listen_key *lk;
	const void **ekp, **lkp;
};

static bool
port_one(const struct nc_trie_port *p)
{
	return p->kind == NC_TRIE_PORT_RANGE && p->lo == p->hi;
}

static bool
port_any(const struct nc_trie_port *p)
{
	return p->kind == NC_TRIE_PORT_ANY || (p->kind == NC_TRIE_PORT_RANGE && p->lo == 0 &&
						p->hi == 65535);
}

/* A key as the exact table hashes it: only what the family uses, the rest zero. */
static void
exact_key(uint8_t family, uint8_t proto, const union nc_trie_addr *src,
	  const union nc_trie_addr *dst, uint16_t sport, uint16_t dport, struct nc_trie_key *k)
{
	const size_t alen = family == NC_TRIE_AF_INET ? 4 : 16;

	memset(k, 0, sizeof(*k));
	k->family = family;
	k->proto = proto;
	k->sport = sport;
	k->dport = dport;
	memcpy(k->src.a, src->a, alen);
	memcpy(k->dst.a, dst->a, alen);
}

static void
listen_key(uint8_t family, uint8_t proto, const union nc_trie_addr *dst, uint16_t dport,
	   struct listen_key *k)
{
	memset(k, 0, sizeof(*k));
	k->family = family;
	k->proto = proto;
	k->dport = dport;
	memcpy(k->dst, dst->a, family == NC_TRIE_AF_INET ? 4 : 16);
}

/* Which of the two tables a rule goes in: 1 exact, 2 listening, 0 neither (not applicable). */
static int
hash_shape(const struct nc_trie_rule *r)
{
	const unsigned int host = r->family == NC_TRIE_AF_INET ? 32 : 128;

	if (r->family == NC_TRIE_AF_ANY || r->proto_mask != 0xff || r->dst_len != host ||
	    !port_one(&r->dport))
		return 0;
	if (r->src_len == host && port_one(&r->sport))
		return 1;
	return r->src_len == 0 && port_any(&r->sport) ? 2 : 0;
}

/* Add rule id to its table (the first of equal keys stays: rules come highest priority first). */
static int
hash_add(struct hash_state *st, const struct nc_trie_rule *r, uint32_t id)
{
	struct nc_trie_key ek;
	struct listen_key lk;
	int32_t pos;

	if (hash_shape(r) == 1) {
		exact_key(r->family, r->proto, &r->src, &r->dst, r->sport.lo, r->dport.lo, &ek);
		if (rte_hash_lookup(st->exact, &ek) >= 0)
			return 0;
		pos = rte_hash_add_key(st->exact, &ek);
		if (pos >= 0)
			st->exact_id[pos] = id;
	} else {
		listen_key(r->family, r->proto, &r->dst, r->dport.lo, &lk);
		if (rte_hash_lookup(st->listen, &lk) >= 0)
			return 0;
		pos = rte_hash_add_key(st->listen, &lk);
		if (pos >= 0)
			st->listen_id[pos] = id;
	}
	return pos < 0 ? pos : 0;
}

static void
hash_burst(const void *ctx, uint32_t i, unsigned int burst, uint32_t *res)
{
	const struct hash_state *st = ctx;
	const void *lkeys[64];
	int32_t pos[64], lpos[64];
	unsigned int miss[64], nm = 0;

	rte_hash_lookup_bulk(st->exact, &st->ekp[i], burst, pos);
	for (unsigned int j = 0; j < burst; j++) {
		if (pos[j] >= 0) {
			res[j] = st->exact_id[pos[j]];
			continue;
		}
		lkeys[nm] = st->lkp[i + j];
		miss[nm++] = j;
	}
	if (nm == 0)
		return;
	rte_hash_lookup_bulk(st->listen, lkeys, nm, lpos);
	for (unsigned int j = 0; j < nm; j++)
		res[miss[j]] = lpos[j] >= 0 ? st->listen_id[lpos[j]] : NC_TRIE_NOMATCH;
}

static void
hash_state_free(struct hash_state *st)
{
	rte_hash_free(st->exact);
	rte_hash_free(st->listen);
	free(st->exact_id);
	free(st->listen_id);
	free(st->ek);
	free(st->lk);
	free(st->ekp);
	free(st->lkp);
	memset(st, 0, sizeof(*st));
}

/* The two tables of the workload's rules, and the input as they take it: 0, or -1 (not its shape). */
static int
hash_prepare(const struct workload *w, struct result *r, uint32_t *answers, struct hash_state *st,
	     bool asked)
{
	/* A spare slot a rule for the updates, and the cuckoo's headroom. */
	uint32_t entries = w->nrules + w->nrules / 4 + 64;
	struct rte_hash_parameters p = {
		.entries = entries, .hash_func = rte_hash_crc, .socket_id = 0,
	};
	char name[2][32];
	size_t heap0;
	double t0;

	r->classifier = "rte_hash";
	r->variant = "";
	for (uint32_t i = 0; i < w->nrules; i++)
		if (hash_shape(&w->rules[i]) == 0) {
			/* Most workloads are not its shape: said only when it was asked for by name. */
			if (asked)
				fprintf(stderr, "nctrie-bench: rte_hash: rule %u is neither a connected nor a "
					"listening socket's: not measured\n", i);
			return -1;
		}
	snprintf(name[0], sizeof(name[0]), "bx%d", (int)getpid());
	snprintf(name[1], sizeof(name[1]), "bl%d", (int)getpid());
	st->exact_id = calloc(entries * 2, sizeof(uint32_t));
	st->listen_id = calloc(entries * 2, sizeof(uint32_t));
	st->ek = malloc(w->nkeys * sizeof(*st->ek));
	st->lk = malloc(w->nkeys * sizeof(*st->lk));
	st->ekp = malloc(w->nkeys * sizeof(*st->ekp));
	st->lkp = malloc(w->nkeys * sizeof(*st->lkp));
	heap0 = nct_heap_bytes();
	t0 = now_ns();
	p.name = name[0];
	p.key_len = sizeof(struct nc_trie_key);
	st->exact = rte_hash_create(&p);
	p.name = name[1];
	p.key_len = sizeof(struct listen_key);
	st->listen = rte_hash_create(&p);
	if (st->exact == NULL || st->listen == NULL || st->exact_id == NULL ||
	    st->listen_id == NULL || st->ek == NULL || st->lk == NULL || st->ekp == NULL ||
	    st->lkp == NULL) {
		fprintf(stderr, "nctrie-bench: rte_hash: out of memory\n");
		hash_state_free(st);
		return -1;
	}
	for (uint32_t i = 0; i < w->nrules; i++)
		if (hash_add(st, &w->rules[i], i) != 0) {
			fprintf(stderr, "nctrie-bench: rte_hash: adding rule %u failed\n", i);
			hash_state_free(st);
			return -1;
		}
	r->build_ms = (now_ns() - t0) / 1e6;
	/* The tables in DPDK's heap, and the rule id beside each key position. */
	r->memory_bytes = nct_heap_bytes() - heap0 + 2 * entries * 2 * sizeof(uint32_t);
	for (uint32_t i = 0; i < w->nkeys; i++) {
		const struct nc_trie_key *k = &w->keys[i];

		exact_key(k->family, k->proto, &k->src, &k->dst, k->sport, k->dport, &st->ek[i]);
		listen_key(k->family, k->proto, &k->dst, k->dport, &st->lk[i]);
		st->ekp[i] = &st->ek[i];
		st->lkp[i] = &st->lk[i];
	}
	for (uint32_t i = 0; i + 64 <= w->nkeys; i += 64)
		hash_burst(st, i, 64, &answers[i]);
	for (uint32_t i = w->nkeys / 64 * 64; i < w->nkeys; i++)
		hash_burst(st, i, 1, &answers[i]);
	return 0;
}

/* Single-rule updates: a connected socket's key added, then deleted. */
static void
hash_updates(const struct workload *w, struct result *r, struct hash_state *st,
	     unsigned int updates)
{
	uint64_t s = w->seed ^ 0x55;
	unsigned int done = 0;
	double *lat = malloc(2 * (updates ? updates : 1) * sizeof(*lat));

	for (unsigned int i = 0; lat != NULL && i < updates; i++) {
		struct nc_trie_rule nr;
		struct nc_trie_key k;
		uint64_t c0, c1, c2;
		int32_t pos;

		update_rule(w, &nr, &s, i);
		exact_key(nr.family, nr.proto, &nr.src, &nr.dst, nr.sport.lo, nr.dport.lo, &k);
		if (rte_hash_lookup(st->exact, &k) >= 0)
			continue;
		c0 = rte_rdtsc_precise();
		pos = rte_hash_add_key(st->exact, &k);
		c1 = rte_rdtsc_precise();
		if (pos < 0 || rte_hash_del_key(st->exact, &k) < 0)
			break;
		c2 = rte_rdtsc_precise();
		lat[2 * done] = (double)(c1 - c0) * 1e9 / (double)rte_get_tsc_hz();
		lat[2 * done + 1] = (double)(c2 - c1) * 1e9 / (double)rte_get_tsc_hz();
		done++;
	}
	r->updates = done;
	if (done) {
		r->update_p99_ns = percentile(lat, 2 * done, 0.99);
		r->update_median_ns = percentile(lat, 2 * done, 0.5);
	}
	free(lat);
	r->ran = true;
}

/* ---- linear scan -------------------------------------------------------- */

static int
run_linear(const struct workload *w, struct result *r, uint32_t *answers, uint32_t nanswer,
	   unsigned int updates, bool timed)
{
	struct nc_linear *l = nc_linear_create(w->nrules + 1);
	uint64_t s = w->seed ^ 0x77;
	double t0, *lat;

	r->classifier = "linear";
	r->variant = "";
	if (l == NULL)
		return -1;
	t0 = now_ns();
	for (uint32_t i = 0; i < w->nrules; i++)
		nc_linear_add(l, i, &w->rules[i]);
	r->build_ms = (now_ns() - t0) / 1e6;
	r->memory_bytes = nc_linear_bytes(l);
	for (uint32_t i = 0; i < nanswer; i++)
		answers[i] = nc_linear_lookup(l, &w->keys[i]);
	if (timed) {
		/* One pass over a sample is enough: a scan's cost does not depend on bursts. */
		uint32_t n = w->nkeys < 20000 ? w->nkeys : 20000;

		t0 = now_ns();
		for (uint32_t i = 0; i < n; i++)
			answers[i] = nc_linear_lookup(l, &w->keys[i]);
		for (unsigned int b = 0; b < 3; b++)
			r->lookup_ns[b] = (now_ns() - t0) / n;
		lat = malloc(2 * (updates ? updates : 1) * sizeof(*lat));
		for (unsigned int i = 0; lat != NULL && i < updates; i++) {
			struct nc_trie_rule nr;
			double a, b, c;

			update_rule(w, &nr, &s, i);
			a = now_ns();
			nc_linear_add(l, w->nrules, &nr);
			b = now_ns();
			nc_linear_delete(l, w->nrules);
			c = now_ns();
			lat[2 * i] = b - a;
			lat[2 * i + 1] = c - b;
		}
		r->updates = updates;
		if (lat != NULL && updates) {
			r->update_p99_ns = percentile(lat, 2 * updates, 0.99);
			r->update_median_ns = percentile(lat, 2 * updates, 0.5);
		}
		free(lat);
		r->ran = true;
	}
	nc_linear_free(l);
	return 0;
}

/* ---- driver ------------------------------------------------------------- */

static void
print_results(const struct workload *w, const struct result *res, unsigned int n, bool json)
{
	if (!json) {
		printf("workload %s: %u rules, %u packets\n", w->name, w->nrules, w->nkeys);
		printf("  %-8s %-10s %9s %9s %9s %10s %12s %12s %12s %9s %11s  %s\n", "", "variant",
		       "ns/pkt@1", "ns/pkt@32", "ns/pkt@64", "build ms", "upd med ns",
		       "upd p99 ns", "memory B", "B/rule", "mismatch", "rte_acl reads");
	}
	for (unsigned int i = 0; i < n; i++) {
		const struct result *r = &res[i];

		if (!r->ran)
			continue;
		if (!json) {
			char ns[3][16];

			for (unsigned int b = 0; b < 3; b++)
				snprintf(ns[b], sizeof(ns[b]), burst_on[b] ? "%.1f" : "-",
					 r->lookup_ns[b]);
			printf("  %-8s %-10s %9s %9s %9s %10.1f %12.0f %12.0f %12" PRIu64
			       " %9.1f %5" PRIu64 "/%-5" PRIu64 "  %s\n",
			       r->classifier, r->variant, ns[0], ns[1], ns[2], r->build_ms,
			       r->update_median_ns, r->update_p99_ns,
			       r->memory_bytes, (double)r->memory_bytes / w->nrules, r->mismatches,
			       r->checked, r->layout[0] ? r->layout : "-");
			continue;
		}
		for (unsigned int b = 0; b < 3; b++)
			if (burst_on[b])
				printf("{\"classifier\": \"%s\", \"variant\": \"%s\", \"workload\": \"%s\", "
			       "\"rules\": %u, \"packets\": %u, \"burst\": %u, \"lookup_ns\": %.2f, "
			       "\"build_ms\": %.2f, \"update_median_ns\": %.0f, "
			       "\"update_p99_ns\": %.0f, \"updates\": %u, \"memory_bytes\": %" PRIu64
			       ", \"mismatches\": %" PRIu64 ", \"checked\": %" PRIu64 ", \"layout\": \"%s\""
			       ", \"snapshot_ms\": %.1f}\n",
			       r->classifier, r->variant, w->name, w->nrules, w->nkeys, bursts[b],
			       r->lookup_ns[b], r->build_ms, r->update_median_ns, r->update_p99_ns,
			       r->updates, r->memory_bytes, r->mismatches, r->checked, r->layout,
			       r->snapshot_ms);
	}
	fflush(stdout);
}

static uint64_t
count_mismatches(const uint32_t *a, const uint32_t *ref, uint32_t n)
{
	uint64_t bad = 0;

	for (uint32_t i = 0; i < n; i++)
		bad += a[i] != ref[i];
	return bad;
}

static char runtime_dir[PATH_MAX];

/* EAL leaves its runtime directory behind; a benchmark should not. */
static void
eal_fini(void)
{
	DIR *d;
	struct dirent *e;

	rte_eal_cleanup();
	d = opendir(runtime_dir);
	while (d != NULL && (e = readdir(d)) != NULL)
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			unlinkat(dirfd(d), e->d_name, 0);
	if (d != NULL)
		closedir(d);
	rmdir(runtime_dir);
}

static int
eal_init(void)
{
	char prefix[64];
	char *argv[] = {
		"nctrie-bench", "--no-huge", "-m", "8192", "--no-pci", "--no-shconf",
		"--no-telemetry", "--log-level=lib.eal:error", "--force-max-simd-bitwidth=512",
		"--file-prefix", prefix, "-l", "0-1", NULL,
	};
	int argc = (int)RTE_DIM(argv) - 1;

	snprintf(prefix, sizeof(prefix), "nctrie-bench-%d", (int)getpid());

	/* One core only: run the update test without a reader. */
	if (rte_eal_init(argc, argv) < 0) {
		argv[argc - 1] = "0";
		if (rte_eal_init(argc, argv) < 0) {
			fprintf(stderr, "nctrie-bench: rte_eal_init: %s\n", rte_strerror(rte_errno));
			return -1;
		}
	}
	snprintf(runtime_dir, sizeof(runtime_dir), "%s", rte_eal_get_runtime_dir());
	return 0;
}

int
bench_perf(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "rules", required_argument, NULL, 'r' },
		{ "synthetic", required_argument, NULL, 'S' },
		{ "trace", required_argument, NULL, 't' },
		{ "packets", required_argument, NULL, 'p' },
		{ "burst", required_argument, NULL, 'b' },
		{ "updates", required_argument, NULL, 'u' },
		{ "acl-rebuilds", required_argument, NULL, 'a' },
		{ "seed", required_argument, NULL, 's' },
		{ "json", no_argument, NULL, 'j' },
		{ "classifiers", required_argument, NULL, 'c' },
		{ "ipv6", no_argument, NULL, '6' },
		{ "acl-order", required_argument, NULL, 'o' },
		{ NULL, 0, NULL, 0 },
	};
	const char *rules_path = NULL, *synthetic = NULL, *trace = NULL;
	const char *which = "nctrie,rte_acl,rte_hash,linear";
	bool hash_asked = false;
	unsigned long packets = 262144, updates = 10000, rebuilds = 0, only_burst = 0;
	struct workload w = { .seed = 1 };
	/* nctrie, rte_acl, the scan, rte_hash */
	struct result res[4] = { 0 };
	struct nc_trie *t = NULL;
	struct acl_state as = { 0 };
	struct hash_state hs = { 0 };
	struct nctrie_input nin;
	struct acl_input ain;
	struct timed tm[3];
	unsigned int ntm = 0;
	uint32_t *ref, *ans;
	uint32_t nref;
	bool json = false, ipv6 = false;
	char err[512];
	int c;

	while ((c = getopt_long(argc, argv, "r:S:t:p:b:u:a:s:jc:6o:", opts, NULL)) != -1) {
		switch (c) {
		case 'r': rules_path = optarg; break;
		case 'S': synthetic = optarg; break;
		case 't': trace = optarg; break;
		case 'p': packets = strtoul(optarg, NULL, 0); break;
		case 'b': only_burst = strtoul(optarg, NULL, 0); break;
		case 'u': updates = strtoul(optarg, NULL, 0); break;
		case 'a': rebuilds = strtoul(optarg, NULL, 0); break;
		case 's': w.seed = strtoul(optarg, NULL, 0); break;
		case 'j': json = true; break;
		case 'c': which = optarg; hash_asked = strstr(optarg, "rte_hash") != NULL; break;
		case '6': ipv6 = true; break;
		case 'o': w.acl_order = (unsigned int)strtoul(optarg, NULL, 0); break;
		default: return 2;
		}
	}
	if ((rules_path == NULL) == (synthetic == NULL) || packets == 0 || packets > 1u << 26 ||
	    w.acl_order >= NCT_ACL_ORDERS ||
	    (only_burst && only_burst != 1 && only_burst != 32 && only_burst != 64)) {
		fprintf(stderr, "nctrie-bench perf: give --rules FILE or --synthetic socket:N|port:N, "
				"--packets 1..2^26, --burst 1|32|64, --acl-order 0..%d\n", NCT_ACL_ORDERS - 1);
		return 2;
	}
	if (synthetic != NULL) {
		unsigned long n;

		if (sscanf(synthetic, "port:%lu", &n) == 1 && n >= 1 && n <= 2 * 60000) {
			snprintf(w.name, sizeof(w.name), "port:%lu", n);
			if (gen_port(&w, (uint32_t)n, (uint32_t)packets))
				return 1;
		} else if (sscanf(synthetic, "socket:%lu", &n) == 1 && n >= 10 && n <= 1000000) {
			snprintf(w.name, sizeof(w.name), "socket:%lu", n);
			if (gen_socket(&w, (uint32_t)n, (uint32_t)packets))
				return 1;
		} else {
			fprintf(stderr, "nctrie-bench perf: --synthetic socket:N (N in 10..1000000) "
					"or port:N (N in 1..120000)\n");
			return 2;
		}
	} else {
		const char *base = strrchr(rules_path, '/');

		snprintf(w.name, sizeof(w.name), "%s", base ? base + 1 : rules_path);
		if (bench_load_rules(rules_path, &w.rules, &w.nrules))
			return 1;
		if (trace != NULL) {
			if (nc_classbench_read_trace(trace, &w.keys, &w.nkeys, err, sizeof(err))) {
				fprintf(stderr, "nctrie-bench: %s\n", err);
				return 1;
			}
		} else {
			w.nkeys = (uint32_t)packets;
			w.keys = malloc(w.nkeys * sizeof(*w.keys));
			if (w.keys == NULL)
				return 1;
			nc_trace_generate(w.rules, w.nrules, w.keys, w.nkeys, w.seed);
		}
	}
	if (ipv6)
		workload_to_v6(&w);
	if (w.nkeys < 64) {
		fprintf(stderr, "nctrie-bench perf: need at least 64 packets\n");
		return 2;
	}
	for (unsigned int b = 0; only_burst && b < 3; b++)
		burst_on[b] = bursts[b] == only_burst;
	if (rebuilds == 0)
		rebuilds = w.nrules > 20000 ? 1 : 3;
	if (eal_init())
		return 1;
	ref = malloc(w.nkeys * sizeof(*ref));
	ans = malloc(w.nkeys * sizeof(*ans));
	if (ref == NULL || ans == NULL)
		return 1;
	/* The scan always answers: it is the reference. It is timed only if asked for. */
	nref = w.nrules <= LINEAR_MAX_RULES ? w.nkeys : LINEAR_SAMPLE;
	run_linear(&w, &res[2], ref, nref, (unsigned int)updates,
		   w.nrules <= LINEAR_MAX_RULES && strstr(which, "linear"));
	res[2].checked = nref;
	if (strstr(which, "nctrie") && (t = nctrie_prepare(&w, &res[0], ans)) != NULL) {
		res[0].mismatches = count_mismatches(ans, ref, nref);
		res[0].checked = nref;
		tm[ntm++] = (struct timed){ nctrie_burst, &nin, res[0].lookup_ns };
		nin = (struct nctrie_input){ t, w.keys };
	}
	if (strstr(which, "rte_acl") && acl_prepare(&w, &res[1], ans, &as) == 0) {
		res[1].mismatches = count_mismatches(ans, ref, nref);
		res[1].checked = nref;
		tm[ntm++] = (struct timed){ acl_burst, &ain, res[1].lookup_ns };
		ain = (struct acl_input){ as.ctx, as.data };
	}
	if (strstr(which, "rte_hash") && hash_prepare(&w, &res[3], ans, &hs, hash_asked) == 0) {
		res[3].mismatches = count_mismatches(ans, ref, nref);
		res[3].checked = nref;
		tm[ntm++] = (struct timed){ hash_burst, &hs, res[3].lookup_ns };
	}
	time_interleaved(tm, ntm, w.nkeys);
	if (t != NULL && nctrie_updates(&w, &res[0], t, (unsigned int)updates) != 0)
		res[0].ran = false;
	if (as.ctx != NULL)
		acl_rebuilds(&w, &res[1], &as, (unsigned int)rebuilds);
	acl_state_free(&as);
	if (hs.exact != NULL)
		hash_updates(&w, &res[3], &hs, (unsigned int)updates);
	hash_state_free(&hs);
	print_results(&w, res, 4, json);
	free(ans);
	free(ref);
	free(w.keys);
	free(w.rules);
	eal_fini();
	return (res[0].mismatches || res[1].mismatches || res[3].mismatches) ? 3 : 0;
}
