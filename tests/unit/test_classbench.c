/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The ClassBench reader, and the classifier on the shipped ClassBench sets
 * against a linear first-match scan, in-process and through nctrie-bench.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <arpa/inet.h>

#include <check.h>

#include "nc_trie.h"
#include "nc_trie_tools.h"

static const char *const sets[] = { "acl1_1k", "fw1_1k", "ipc1_1k", "acl1_10k", "fw1_10k",
				    "ipc1_10k" };

static char tmpdir[] = "/tmp/nc_cb_XXXXXX";

static const char *
data_dir(void)
{
	const char *d = getenv("NC_CLASSBENCH_DIR");

	ck_assert_msg(d != NULL, "NC_CLASSBENCH_DIR is not set (meson test sets it)");
	return d;
}

static void
set_path(char *buf, size_t size, const char *set)
{
	snprintf(buf, size, "%s/%s", data_dir(), set);
	ck_assert_msg(access(buf, R_OK) == 0, "ClassBench set %s not readable: %s "
		      "(configure with -Dclassbench_dir=DIR)", buf, strerror(errno));
}

static const char *
write_tmp(const char *name, const char *text)
{
	static char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
	return path;
}

START_TEST(reader_formats)
{
	struct nc_trie_rule *r;
	uint32_t n;
	char err[256];
	const char *p = write_tmp("fmt",
		/* 6 columns, tabs */
		"@10.0.0.0/8\t192.168.1.0/24\t0 : 65535\t80 : 80\t0x06/0xFF\t0x1000/0x1000\t\n"
		/* 5 columns, CRLF */
		"@1.2.3.4/32\t5.6.7.8/32\t1024 : 65535\t53 : 53\t0x11/0xFF\r\n"
		/* spaces, no spaces around ':', blank line */
		"\n@0.0.0.0/0 0.0.0.0/0 0:65535 0:65535 0x00/0x00\n");

	ck_assert_int_eq(nc_classbench_read(p, &r, &n, err, sizeof(err)), 0);
	ck_assert_uint_eq(n, 3);
	/* Line order is priority order. */
	ck_assert_uint_gt(r[0].priority, r[1].priority);
	ck_assert_uint_gt(r[1].priority, r[2].priority);
	ck_assert_uint_eq(r[0].family, NC_TRIE_AF_INET);
	ck_assert_uint_eq(r[0].src_len, 8);
	ck_assert_uint_eq(r[0].src.v4, htonl(0x0a000000));
	ck_assert_uint_eq(r[0].dst_len, 24);
	ck_assert_uint_eq(r[0].dport.lo, 80);
	ck_assert_uint_eq(r[0].dport.hi, 80);
	ck_assert_uint_eq(r[0].sport.hi, 65535);
	ck_assert_uint_eq(r[0].proto, 6);
	ck_assert_uint_eq(r[0].proto_mask, 0xff);
	ck_assert_uint_eq(r[1].sport.lo, 1024);
	ck_assert_uint_eq(r[1].proto, 17);
	ck_assert_uint_eq(r[2].proto_mask, 0);
	free(r);
}
END_TEST

START_TEST(reader_errors)
{
	static const struct {
		const char *text, *msg;
	} bad[] = {
		{ "@1.2.3.4/33\t1.2.3.4/32\t0 : 1\t0 : 1\t0x06/0xFF\n", ":1: bad source prefix" },
		{ "@1.2.3.4/32\t1.2.3/32\t0 : 1\t0 : 1\t0x06/0xFF\n", ":1: bad destination prefix" },
		{ "\n@1.2.3.4/32\t1.2.3.4/32\t0 - 1\t0 : 1\t0x06/0xFF\n", ":2: bad source port range" },
		{ "@1.2.3.4/32\t1.2.3.4/32\t0 : 1\t0 : 70000\t0x06/0xFF\n", ":1: bad destination port" },
		{ "@1.2.3.4/32\t1.2.3.4/32\t0 : 1\t0 : 1\t0x06\n", ":1: bad protocol" },
		{ "@1.2.3.4/32\t1.2.3.4/32\t0 : 1\t0 : 1\t0x06/0x0F\n", ":1: bad rule" },
		{ "@1.2.3.4/32\t1.2.3.4/32\t9 : 1\t0 : 1\t0x06/0xFF\n", ":1: bad rule" },
		{ "@1.2.3.4/32\t1.2.3.4/32\t0 : 1\t0 : 1\t0x06/0xFF\tjunk\n", ":1: bad flags" },
	};
	struct nc_trie_rule *r = NULL;
	uint32_t n;
	char err[256];

	for (unsigned int i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *p = write_tmp("bad", bad[i].text);

		ck_assert_int_eq(nc_classbench_read(p, &r, &n, err, sizeof(err)), -EINVAL);
		ck_assert_msg(strstr(err, bad[i].msg) != NULL, "case %u: '%s' lacks '%s'", i, err,
			      bad[i].msg);
	}
	ck_assert_int_eq(nc_classbench_read("/nonexistent/x", &r, &n, err, sizeof(err)), -ENOENT);
	ck_assert_ptr_nonnull(strstr(err, "/nonexistent/x"));
}
END_TEST

START_TEST(trace_reader)
{
	struct nc_trie_key *k;
	uint32_t n;
	char err[256];
	const char *p = write_tmp("trace", "167772161 3232235777 1000 80 6 0 12\r\n"
					   "1 2 3 4 17\n");

	ck_assert_int_eq(nc_classbench_read_trace(p, &k, &n, err, sizeof(err)), 0);
	ck_assert_uint_eq(n, 2);
	ck_assert_uint_eq(k[0].src.v4, htonl(167772161));
	ck_assert_uint_eq(k[0].dst.v4, htonl(3232235777u));
	ck_assert_uint_eq(k[0].sport, 1000);
	ck_assert_uint_eq(k[0].dport, 80);
	ck_assert_uint_eq(k[0].proto, 6);
	ck_assert_uint_eq(k[1].proto, 17);
	free(k);
	p = write_tmp("trace", "1 2 3 4\n");
	ck_assert_int_eq(nc_classbench_read_trace(p, &k, &n, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, ":1: bad trace line"));
}
END_TEST

/*
 * In-process: the trie against the first-match scan on each shipped set,
 * whole and without its catch-all rules (both address prefixes /1 or
 * shorter), so that misses occur too.
 */
START_TEST(shipped_sets)
{
	const char *set = sets[_i / 2];
	int drop_default = _i % 2;
	uint32_t nkeys = strstr(set, "10k") ? 50000 : 200000;
	struct nc_trie_rule *rules;
	struct nc_trie_key *keys;
	struct nc_linear *l;
	struct nc_trie *t;
	struct nc_trie_config cfg = NC_TRIE_SIZED(nc_trie_config, .name = "cb", .socket_id = -1);
	uint32_t n, *res, bad = 0, hits = 0, distinct = 0;
	uint8_t *seen;
	char path[512], err[512];

	set_path(path, sizeof(path), set);
	ck_assert_msg(nc_classbench_read(path, &rules, &n, err, sizeof(err)) == 0, "%s", err);
	ck_assert_uint_gt(n, 500);
	if (drop_default) {
		uint32_t kept = 0;

		for (uint32_t i = 0; i < n; i++)
			if (rules[i].src_len + rules[i].dst_len >= 2)
				rules[kept++] = rules[i];
		n = kept;
	}
	seen = calloc(n, 1);
	cfg.max_rules = n;
	t = nc_trie_create(&cfg);
	l = nc_linear_create(n);
	ck_assert_ptr_nonnull(t);
	for (uint32_t i = 0; i < n; i++) {
		ck_assert_int_eq(nc_trie_add(t, &rules[i]), (int)i);
		ck_assert_int_eq(nc_linear_add(l, i, &rules[i]), 0);
	}
	keys = malloc(nkeys * sizeof(*keys));
	res = malloc(nkeys * sizeof(*res));
	nc_trace_generate(rules, n, keys, nkeys, 0x4001 + (uint64_t)_i);
	nc_trie_lookup_bulk(t, keys, res, nkeys);
	for (uint32_t i = 0; i < nkeys; i++) {
		/* First match in line order, independently of priorities. */
		uint32_t want = NC_TRIE_NOMATCH;

		for (uint32_t j = 0; j < n; j++)
			if (nc_trie_rule_matches(&rules[j], &keys[i])) {
				want = j;
				break;
			}
		hits += want != NC_TRIE_NOMATCH;
		if (want != NC_TRIE_NOMATCH && !seen[want]) {
			seen[want] = 1;
			distinct++;
		}
		if (res[i] != want && bad++ < 5)
			fprintf(stderr, "%s: key %u: trie %d, first match %d\n", set, i, (int)res[i],
				(int)want);
	}
	fprintf(stderr, "%s%s: %u rules, %u keys, %u hits on %u distinct rules, %u mismatches\n",
		set, drop_default ? " (no catch-alls)" : "", n, nkeys, hits, distinct, bad);
	ck_assert_uint_eq(bad, 0);
	/* The trace reaches much of the set, and misses only without the catch-all. */
	ck_assert_uint_gt(distinct, n / 4);
	if (drop_default) {
		ck_assert_uint_gt(hits, nkeys / 3);
		ck_assert_uint_lt(hits, nkeys);
	} else {
		ck_assert_uint_eq(hits, nkeys);
	}
	free(seen);
	free(res);
	free(keys);
	nc_linear_free(l);
	nc_trie_free(t);
	free(rules);
}
END_TEST

/* Whether some rule of like has the same value of part (see generated_sets). */
static bool
like_has(const struct nc_trie_rule *like, uint32_t n, const struct nc_trie_rule *r, int part)
{
	for (uint32_t j = 0; j < n; j++) {
		const struct nc_trie_rule *x = &like[j];

		if ((part == 0 && x->src_len == r->src_len && x->dst_len == r->dst_len) ||
		    (part == 1 && !memcmp(&x->sport, &r->sport, sizeof(r->sport)) &&
		     !memcmp(&x->dport, &r->dport, sizeof(r->dport))) ||
		    (part == 2 && x->proto == r->proto && x->proto_mask == r->proto_mask))
			return true;
	}
	return false;
}

/*
 * nc_classbench_generate(): a set in the family's shape (every rule's prefix
 * lengths, ports and protocol are some seed rule's), not the seed set itself,
 * another with another seed; it survives ClassBench's format; and the trie
 * agrees with the first-match scan on it.
 */
START_TEST(generated_sets)
{
	static const char *const like_sets[] = { "acl1_10k", "fw1_10k", "ipc1_10k" };
	const uint32_t n = 2000, nkeys = 50000;
	struct nc_trie_rule *like, *gen = malloc(n * sizeof(*gen)), *gen2 = malloc(n * sizeof(*gen2));
	struct nc_trie_rule *back;
	struct nc_trie_config cfg = NC_TRIE_SIZED(nc_trie_config, .name = "gen", .socket_id = -1,
			.max_rules = n);
	struct nc_trie_key *keys = malloc(nkeys * sizeof(*keys));
	uint32_t nlike, nback, *res = malloc(nkeys * sizeof(*res)), same_addr = 0, bad = 0;
	char path[512], out[600], err[512];
	struct nc_trie *t;
	FILE *f;

	set_path(path, sizeof(path), like_sets[_i]);
	ck_assert_msg(nc_classbench_read(path, &like, &nlike, err, sizeof(err)) == 0, "%s", err);
	nc_classbench_generate(like, nlike, gen, n, 7);
	nc_classbench_generate(like, nlike, gen2, n, 8);
	ck_assert_int_ne(memcmp(gen, gen2, n * sizeof(*gen)), 0);
	for (uint32_t i = 0; i < n; i++) {
		ck_assert_int_eq(nc_trie_rule_validate(&gen[i]), 0);
		ck_assert_uint_eq(gen[i].priority, n - 1 - i);
		for (int part = 0; part < 3; part++)
			ck_assert_msg(like_has(like, nlike, &gen[i], part), "rule %u part %d", i, part);
		for (uint32_t j = 0; j < nlike; j++)
			if (like[j].src.v4 == gen[i].src.v4 && like[j].dst.v4 == gen[i].dst.v4 &&
			    like[j].src_len == gen[i].src_len && like[j].dst_len == gen[i].dst_len) {
				same_addr++;
				break;
			}
	}
	/* Catch-alls and /8s may repeat; the set as a whole is new. */
	ck_assert_msg(same_addr < n / 10, "%u of %u rules have a seed rule's addresses", same_addr, n);
	snprintf(out, sizeof(out), "%s/gen_%s", tmpdir, like_sets[_i]);
	f = fopen(out, "w");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(nc_classbench_write(f, gen, n), 0);
	ck_assert_int_eq(fclose(f), 0);
	ck_assert_msg(nc_classbench_read(out, &back, &nback, err, sizeof(err)) == 0, "%s", err);
	ck_assert_uint_eq(nback, n);
	for (uint32_t i = 0; i < n; i++) {
		char a[256], b[256];

		nc_trie_rule_format(&gen[i], a, sizeof(a));
		nc_trie_rule_format(&back[i], b, sizeof(b));
		ck_assert_str_eq(a, b);
	}
	t = nc_trie_create(&cfg);
	ck_assert_ptr_nonnull(t);
	for (uint32_t i = 0; i < n; i++)
		ck_assert_int_eq(nc_trie_add(t, &gen[i]), (int)i);
	nc_trace_generate(gen, n, keys, nkeys, 0x6001 + (uint64_t)_i);
	nc_trie_lookup_bulk(t, keys, res, nkeys);
	for (uint32_t i = 0; i < nkeys; i++) {
		uint32_t want = NC_TRIE_NOMATCH;

		for (uint32_t j = 0; j < n && want == NC_TRIE_NOMATCH; j++)
			if (nc_trie_rule_matches(&gen[j], &keys[i]))
				want = j;
		bad += res[i] != want;
	}
	ck_assert_uint_eq(bad, 0);
	nc_trie_free(t);
	free(back);
	free(res);
	free(keys);
	free(gen2);
	free(gen);
	free(like);
}
END_TEST

static int
run(const char *cmd)
{
	int st = system(cmd);

	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The command-line contract: nctrie-bench classify against its linear scan. */
START_TEST(bench_classify)
{
	const char *bench = getenv("NCTRIE_BENCH");
	const char *set = sets[_i];
	char path[512], cmd[2048];

	ck_assert_msg(bench != NULL, "NCTRIE_BENCH is not set (meson test sets it)");
	set_path(path, sizeof(path), set);
	/* The whole set, and the set without its catch-alls (so that -1 appears). */
	snprintf(cmd, sizeof(cmd),
		 "cd %s && awk -F'\\t' '{ split($1, s, \"/\"); split($2, d, \"/\"); "
		 "if (s[2] + d[2] >= 2) print }' '%s' > nodefault && "
		 "'%s' gen-trace --rules '%s' --count 20000 --seed 7 --out t && "
		 "for r in '%s' nodefault; do "
		 "'%s' classify --rules \"$r\" --trace t --out trie && "
		 "'%s' classify --rules \"$r\" --trace t --algo linear --out lin && "
		 "test $(wc -l < trie) -eq 20000 && cmp trie lin && "
		 "test $(sort -u trie | wc -l) -gt 100 || exit 1; done && grep -q -- '^-1$' trie",
		 tmpdir, path, bench, path, path, bench, bench);
	ck_assert_int_eq(run(cmd), 0);
	/* Usage errors exit 2; a bad file exits 1 with a message. */
	snprintf(cmd, sizeof(cmd), "'%s' classify --rules '%s' 2>/dev/null", bench, path);
	ck_assert_int_eq(run(cmd), 2);
	snprintf(cmd, sizeof(cmd), "'%s' classify --rules /nonexistent --trace %s/t 2>/dev/null",
		 bench, tmpdir);
	ck_assert_int_eq(run(cmd), 1);
	/* gen-rules: a set of the count asked, which classify reads and agrees on. */
	snprintf(cmd, sizeof(cmd),
		 "cd %s && '%s' gen-rules --like '%s' --count 700 --seed 3 --out g && "
		 "test $(wc -l < g) -eq 700 && '%s' gen-trace --rules g --count 5000 --out gt && "
		 "'%s' classify --rules g --trace gt --out a && "
		 "'%s' classify --rules g --trace gt --algo linear --out b && cmp a b",
		 tmpdir, bench, path, bench, bench, bench);
	ck_assert_int_eq(run(cmd), 0);
	snprintf(cmd, sizeof(cmd), "'%s' gen-rules --count 5 2>/dev/null", bench);
	ck_assert_int_eq(run(cmd), 2);
}
END_TEST

/*
 * nctrie-bench perf runs, in IPv6 too, agrees with the scan, and prints the
 * contract's fields (no timing).
 */
START_TEST(bench_perf_smoke)
{
	const char *bench = getenv("NCTRIE_BENCH");
	char path[512], cmd[4096];

	ck_assert_ptr_nonnull(bench);
	set_path(path, sizeof(path), "fw1_1k");
	snprintf(cmd, sizeof(cmd),
		 "cd %s && '%s' perf --synthetic socket:2000 --packets 4096 --updates 200 --burst 32 "
		 "--json > perf.json && '%s' perf --rules '%s' --packets 4096 --updates 200 "
		 "--acl-rebuilds 1 --burst 1 --json >> perf.json && '%s' perf --rules '%s' --ipv6 "
		 "--packets 4096 --updates 200 --acl-rebuilds 1 --burst 32 --json >> perf.json && "
		 "test $(wc -l < perf.json) -eq 10 && "
		 "! grep -v '\"mismatches\": 0,' perf.json && "
		 "for f in classifier variant workload rules burst lookup_ns build_ms update_median_ns "
		 "update_p99_ns memory_bytes mismatches; do "
		 "test $(grep -c \"\\\"$f\\\": \" perf.json) -eq 10 || exit 1; done && "
		 "grep -q '\"classifier\": \"rte_acl\"' perf.json && "
		 "test $(grep -c '\"classifier\": \"rte_hash\"' perf.json) -eq 1 && "
		 "grep -q '\"classifier\": \"linear\"' perf.json && "
		 "test $(grep -c '\"workload\": \"fw1_1k-v6\"' perf.json) -eq 3",
		 tmpdir, bench, bench, path, bench, path);
	ck_assert_int_eq(run(cmd), 0);
	/* A daemon that serves ports: the port table alone, the bulk lookup's shortest path. */
	snprintf(cmd, sizeof(cmd),
		 "cd %s && '%s' perf --synthetic port:50 --packets 4096 --updates 200 --burst 32 "
		 "--json > port.json && test $(grep -c '\"workload\": \"port:50\"' port.json) -eq 3 && "
		 "test $(grep -c '\"mismatches\": 0,' port.json) -eq 3",
		 tmpdir, bench);
	ck_assert_int_eq(run(cmd), 0);
	snprintf(cmd, sizeof(cmd), "'%s' perf --synthetic port:0 2>/dev/null", bench);
	ck_assert_int_eq(run(cmd), 2);
	snprintf(cmd, sizeof(cmd), "'%s' perf --synthetic bogus:3 2>/dev/null", bench);
	ck_assert_int_eq(run(cmd), 2);
	snprintf(cmd, sizeof(cmd), "'%s' perf --synthetic socket:100 --burst 7 2>/dev/null", bench);
	ck_assert_int_eq(run(cmd), 2);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("classbench");
	TCase *tc = tcase_create("reader");
	SRunner *sr;
	int failed;
	char cmd[64];

	if (mkdtemp(tmpdir) == NULL) {
		perror("mkdtemp");
		return EXIT_FAILURE;
	}
	tcase_add_test(tc, reader_formats);
	tcase_add_test(tc, reader_errors);
	tcase_add_test(tc, trace_reader);
	suite_add_tcase(s, tc);
	/* Every shipped and generated set: the suite "slow" (CK_INCLUDE_TAGS=scale). */
	tc = tcase_create("sets");
	tcase_set_tags(tc, "scale");
	tcase_set_timeout(tc, 600);
	tcase_add_loop_test(tc, shipped_sets, 0, 12);
	tcase_add_loop_test(tc, generated_sets, 0, 3);
	tcase_add_loop_test(tc, bench_classify, 0, 6);
	tcase_add_test(tc, bench_perf_smoke);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", tmpdir);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
