/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * nctrie-bench: the classifier on rule sets it has never seen.
 *
 *   nctrie-bench classify --rules FILE --trace FILE [--out FILE] [--algo trie|linear]
 *   nctrie-bench gen-trace --rules FILE [--count N] [--seed S] [--out FILE]
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>

#include <rte_version.h>

#include "nc_trie.h"
#include "nc_version.h"
#include "nc_trie_tools.h"
#include "bench.h"

static void
usage(FILE *f)
{
	fprintf(f,
		"usage: nctrie-bench classify --rules FILE --trace FILE [--out FILE] [--algo trie|linear]\n"
		"       nctrie-bench gen-trace --rules FILE [--count N] [--seed S] [--out FILE]\n"
		"       nctrie-bench gen-rules --like FILE [--count N] [--seed S] [--out FILE]\n"
		"       nctrie-bench perf [--rules FILE | --synthetic socket:N|port:N] [--trace FILE | --packets N]\n"
		"                         [--burst 1|32|64] [--updates N] [--acl-rebuilds N] [--seed S] [--json]\n"
		"                         [--classifiers nctrie,rte_acl,rte_hash,linear] [--ipv6] [--acl-order 0..5]\n"
		"       nctrie-bench --version\n"
		"\n"
		"classify: one line per trace line, the 0-based index of the matching rule\n"
		"          (ClassBench priority: first line highest), or -1.\n"
		"gen-trace: SA DA SP DP PROTO lines, half inside random rules, half uniform.\n"
		"gen-rules: a ClassBench-style rule set of the family of the --like set: each\n"
		"           rule's prefix lengths, ports, protocol and networks drawn from\n"
		"           different rules of it; other seeds, other sets (default 10000 rules).\n"
		"perf: lookup ns/packet, build time, update latency, memory and mismatches of\n"
		"      nctrie, rte_acl (its fastest SIMD path here) and a linear scan.\n"
		"      --ipv6: the workload in IPv6, each prefix a/l as 2001:db8:a::/(32+l),\n"
		"      each key's address 2001:db8:a: and 64 random bits.\n"
		"      --acl-order: the order rte_acl reads fields in (0: proto,src,dst,ports,\n"
		"      DPDK's layout; 1-5 as in nc_trie_acl.h); the last column names it,\n"
		"      and the order nctrie's snapshot picked.\n"
		"      Exit 3 if nctrie or rte_acl disagrees with the linear scan.\n");
}

static FILE *
open_out(const char *path)
{
	FILE *f = path ? fopen(path, "w") : stdout;

	if (f == NULL)
		fprintf(stderr, "nctrie-bench: fopen(%s): %s\n", path, strerror(errno));
	return f;
}

static int
close_out(FILE *f, const char *path)
{
	int bad = ferror(f);

	if (f != stdout)
		bad |= fclose(f);
	else
		bad |= fflush(f);
	if (bad) {
		fprintf(stderr, "nctrie-bench: write %s failed\n", path ? path : "stdout");
		return 1;
	}
	return 0;
}

int
bench_load_rules(const char *path, struct nc_trie_rule **rules, uint32_t *n)
{
	char err[512];
	int ret = nc_classbench_read(path, rules, n, err, sizeof(err));

	if (ret)
		fprintf(stderr, "nctrie-bench: %s\n", err);
	return ret;
}

struct nc_trie *
bench_build_trie(const struct nc_trie_rule *rules, uint32_t n, uint32_t extra)
{
	struct nc_trie_config cfg = NC_TRIE_SIZED(nc_trie_config, .name = "bench", .socket_id = -1,
			.max_rules = n + extra);
	struct nc_trie *t = nc_trie_create(&cfg);

	if (t == NULL) {
		fprintf(stderr, "nctrie-bench: nc_trie_create: %s\n", strerror(errno));
		return NULL;
	}
	for (uint32_t i = 0; i < n; i++) {
		int id = nc_trie_add(t, &rules[i]);

		/* Ids come out in order on a new table: id == rule index. */
		if (id != (int)i) {
			fprintf(stderr, "nctrie-bench: nc_trie_add(rule %u): %s\n", i,
				id < 0 ? strerror(-id) : "unexpected id");
			nc_trie_free(t);
			return NULL;
		}
	}
	return t;
}

static int
cmd_classify(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "rules", required_argument, NULL, 'r' },
		{ "trace", required_argument, NULL, 't' },
		{ "out", required_argument, NULL, 'o' },
		{ "algo", required_argument, NULL, 'a' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *rules_path = NULL, *trace_path = NULL, *out_path = NULL, *algo = "trie";
	struct nc_trie_rule *rules = NULL;
	struct nc_trie_key *keys = NULL;
	struct nc_linear *lin = NULL;
	struct nc_trie *t = NULL;
	uint32_t nrules, nkeys, *res = NULL;
	char err[512];
	FILE *out;
	int c, ret = 1;

	while ((c = getopt_long(argc, argv, "r:t:o:a:h", opts, NULL)) != -1) {
		switch (c) {
		case 'r': rules_path = optarg; break;
		case 't': trace_path = optarg; break;
		case 'o': out_path = optarg; break;
		case 'a': algo = optarg; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (rules_path == NULL || trace_path == NULL ||
	    (strcmp(algo, "trie") && strcmp(algo, "linear"))) {
		usage(stderr);
		return 2;
	}
	if (bench_load_rules(rules_path, &rules, &nrules))
		return 1;
	if (nc_classbench_read_trace(trace_path, &keys, &nkeys, err, sizeof(err))) {
		fprintf(stderr, "nctrie-bench: %s\n", err);
		goto out_free_rules;
	}
	res = malloc((nkeys ? nkeys : 1) * sizeof(*res));
	if (res == NULL)
		goto out_free_keys;
	if (strcmp(algo, "trie") == 0) {
		t = bench_build_trie(rules, nrules, 0);
		if (t == NULL)
			goto out_free_res;
		nc_trie_lookup_bulk(t, keys, res, nkeys);
	} else {
		lin = nc_linear_create(nrules);
		if (lin == NULL)
			goto out_free_res;
		for (uint32_t i = 0; i < nrules; i++)
			nc_linear_add(lin, i, &rules[i]);
		for (uint32_t i = 0; i < nkeys; i++)
			res[i] = nc_linear_lookup(lin, &keys[i]);
	}
	out = open_out(out_path);
	if (out == NULL)
		goto out_free_tables;
	for (uint32_t i = 0; i < nkeys; i++)
		fprintf(out, "%d\n", res[i] == NC_TRIE_NOMATCH ? -1 : (int)res[i]);
	ret = close_out(out, out_path);
out_free_tables:
	nc_linear_free(lin);
	nc_trie_free(t);
out_free_res:
	free(res);
out_free_keys:
	free(keys);
out_free_rules:
	free(rules);
	return ret;
}

static int
cmd_gen_trace(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "rules", required_argument, NULL, 'r' },
		{ "count", required_argument, NULL, 'n' },
		{ "seed", required_argument, NULL, 's' },
		{ "out", required_argument, NULL, 'o' },
		{ NULL, 0, NULL, 0 },
	};
	const char *rules_path = NULL, *out_path = NULL;
	unsigned long count = 10000, seed = 1;
	struct nc_trie_rule *rules;
	struct nc_trie_key *keys;
	uint32_t nrules;
	FILE *out;
	int c, ret;

	while ((c = getopt_long(argc, argv, "r:n:s:o:", opts, NULL)) != -1) {
		switch (c) {
		case 'r': rules_path = optarg; break;
		case 'n': count = strtoul(optarg, NULL, 0); break;
		case 's': seed = strtoul(optarg, NULL, 0); break;
		case 'o': out_path = optarg; break;
		default: usage(stderr); return 2;
		}
	}
	if (rules_path == NULL || count == 0 || count > UINT32_MAX) {
		usage(stderr);
		return 2;
	}
	if (bench_load_rules(rules_path, &rules, &nrules))
		return 1;
	keys = malloc(count * sizeof(*keys));
	out = keys ? open_out(out_path) : NULL;
	if (out == NULL) {
		free(keys);
		free(rules);
		return 1;
	}
	nc_trace_generate(rules, nrules, keys, (uint32_t)count, seed);
	for (unsigned long i = 0; i < count; i++)
		fprintf(out, "%u\t%u\t%u\t%u\t%u\n", ntohl(keys[i].src.v4), ntohl(keys[i].dst.v4),
			keys[i].sport, keys[i].dport, keys[i].proto);
	ret = close_out(out, out_path);
	free(keys);
	free(rules);
	return ret;
}

static int
cmd_gen_rules(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "like", required_argument, NULL, 'l' },
		{ "count", required_argument, NULL, 'n' },
		{ "seed", required_argument, NULL, 's' },
		{ "out", required_argument, NULL, 'o' },
		{ NULL, 0, NULL, 0 },
	};
	const char *like_path = NULL, *out_path = NULL;
	unsigned long count = 10000, seed = 1;
	struct nc_trie_rule *like, *rules;
	uint32_t nlike;
	FILE *out;
	int c, ret;

	while ((c = getopt_long(argc, argv, "l:n:s:o:", opts, NULL)) != -1) {
		switch (c) {
		case 'l': like_path = optarg; break;
		case 'n': count = strtoul(optarg, NULL, 0); break;
		case 's': seed = strtoul(optarg, NULL, 0); break;
		case 'o': out_path = optarg; break;
		default: usage(stderr); return 2;
		}
	}
	if (like_path == NULL || count == 0 || count > NC_TRIE_PRIO_MAX + 1ul) {
		usage(stderr);
		return 2;
	}
	if (bench_load_rules(like_path, &like, &nlike))
		return 1;
	rules = malloc(count * sizeof(*rules));
	if (rules == NULL)
		fprintf(stderr, "nctrie-bench: gen-rules: no memory for %lu rules\n", count);
	out = rules ? open_out(out_path) : NULL;
	if (out == NULL) {
		free(rules);
		free(like);
		return 1;
	}
	nc_classbench_generate(like, nlike, rules, (uint32_t)count, seed);
	ret = nc_classbench_write(out, rules, (uint32_t)count) ? 1 : 0;
	ret |= close_out(out, out_path);
	free(rules);
	free(like);
	return ret;
}

int
main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (strcmp(argv[1], "classify") == 0)
		return cmd_classify(argc - 1, argv + 1);
	if (strcmp(argv[1], "gen-trace") == 0)
		return cmd_gen_trace(argc - 1, argv + 1);
	if (strcmp(argv[1], "gen-rules") == 0)
		return cmd_gen_rules(argc - 1, argv + 1);
	if (strcmp(argv[1], "perf") == 0)
		return bench_perf(argc - 1, argv + 1);
	if (strcmp(argv[1], "--version") == 0) {
		printf("nctrie-bench (netchanneld) %s (%s), %s\n", NC_PROJECT_VERSION, NC_GIT_DESCRIBE,
		       rte_version());
		return 0;
	}
	if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
		usage(stdout);
		return 0;
	}
	fprintf(stderr, "nctrie-bench: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}
