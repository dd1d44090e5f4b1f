/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Helpers for the classifier's tests and benchmarks (not installed): the
 * linear-scan reference, the ClassBench reader, and trace generation.
 */
#ifndef NC_TRIE_TOOLS_H
#define NC_TRIE_TOOLS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "nc_trie.h"

/** Deterministic PRNG (xorshift64*), so every failing case can be replayed from its seed. */
static inline uint64_t
nc_rand(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * UINT64_C(2685821657736338717);
}

/**
 * Test and benchmark hook: from the next build on, compile t's snapshots with
 * rte_acl reading fields in order o (0..5, the strings of
 * nc_trie_stats.snapshot_layout in lib/trie/nc_trie_acl.h's order), or let
 * each build pick one as it does by default (-1).
 */
void nct_snap_force_order(struct nc_trie *t, int o);

/** Linear-scan classifier: rules kept sorted best first; the first match is the answer. */
struct nc_linear;

/**
 * Create a linear-scan table for ids 0..cap-1.
 * @return the table, or NULL with errno set (ENOMEM).
 */
struct nc_linear *nc_linear_create(uint32_t cap);

/** Free a linear-scan table (NULL is a no-op). */
void nc_linear_free(struct nc_linear *l);

/**
 * Add a rule under a caller-chosen id. Ties of priority go to the rule added first.
 * @return 0, -EINVAL (id out of range or in use).
 */
int nc_linear_add(struct nc_linear *l, uint32_t id, const struct nc_trie_rule *r);

/**
 * Remove the rule with this id.
 * @return 0 or -ENOENT.
 */
int nc_linear_delete(struct nc_linear *l, uint32_t id);

/** The id of the best matching rule, or NC_TRIE_NOMATCH. */
uint32_t nc_linear_lookup(const struct nc_linear *l, const struct nc_trie_key *k);

/** Bytes the table holds. */
uint64_t nc_linear_bytes(const struct nc_linear *l);

/** Number of rules in the table. */
uint32_t nc_linear_count(const struct nc_linear *l);

/**
 * Read a ClassBench rule file. Accepts the 6-column (with flags) and
 * 5-column forms, tabs or spaces, "lo : hi" or "lo:hi", and CRLF. Priority
 * follows line order: the first rule gets the highest priority.
 *
 * @param path   file to read
 * @param rules  receives a malloc'ed array (free() it)
 * @param n      receives the number of rules
 * @param err    receives "PATH:LINE: message" on failure
 * @param errlen size of err
 * @return 0, or -errno (-EINVAL for a syntax error, with err set)
 */
int nc_classbench_read(const char *path, struct nc_trie_rule **rules, uint32_t *n, char *err,
		       size_t errlen);

/**
 * Read a trace: one packet a line, at least five decimal columns SA DA SP DP PROTO
 * (further columns ignored).
 * @return 0 or -errno, with err set as for nc_classbench_read().
 */
int nc_classbench_read_trace(const char *path, struct nc_trie_key **keys, uint32_t *n, char *err,
			     size_t errlen);

/**
 * Fill keys with IPv4 headers: about half are a random point inside a random
 * rule's box, the rest uniform random.
 */
void nc_trace_generate(const struct nc_trie_rule *rules, uint32_t nrules, struct nc_trie_key *keys,
		       uint32_t n, uint64_t seed);

/** A random key inside rule r's box (for family ANY, the key's family is random). */
void nc_key_inside(const struct nc_trie_rule *r, struct nc_trie_key *k, uint64_t *seed);

/**
 * A ClassBench-style IPv4 rule set shaped like a seed set (its family: acl,
 * fw, ipc), so that the classifier is measured on sets it was not tuned on.
 * As ClassBench draws from a seed file's statistics, each rule draws its parts
 * from different seed rules picked at random: the prefix lengths (the pair,
 * as the seed has them), the port ranges (the pair), the protocol, and the
 * networks of its addresses: the top bits of another seed rule's prefixes (at
 * least 8, then a random share of the rest), the bits below at random.
 *
 * @param like   the seed rules (IPv4)
 * @param nlike  how many; 0 gives n rules matching everything
 * @param out    receives n rules, priorities n-1 (the first) down to 0
 * @param n      rules to make
 * @param seed   the generator's seed: other seeds, other sets
 */
void nc_classbench_generate(const struct nc_trie_rule *like, uint32_t nlike,
			    struct nc_trie_rule *out, uint32_t n, uint64_t seed);

/**
 * Write IPv4 rules in ClassBench's format, one a line, in their order (the
 * reader gives the first line the highest priority).
 *
 * @return 0, or -EIO if a write failed
 */
int nc_classbench_write(FILE *f, const struct nc_trie_rule *rules, uint32_t n);

#endif /* NC_TRIE_TOOLS_H */
