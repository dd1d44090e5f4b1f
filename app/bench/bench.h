/* SPDX-License-Identifier: BSD-3-Clause */
/* Shared by nctrie-bench's commands. */
#ifndef NCTRIE_BENCH_H
#define NCTRIE_BENCH_H

#include <stdint.h>

#include "nc_trie.h"

/** Read a ClassBench file, printing the error. @return 0 or -errno. */
int bench_load_rules(const char *path, struct nc_trie_rule **rules, uint32_t *n);

/** A table holding rules[0..n) with id == index and room for extra more, or NULL (printed). */
struct nc_trie *bench_build_trie(const struct nc_trie_rule *rules, uint32_t n, uint32_t extra);

/** nctrie-bench perf: nctrie, rte_acl and a linear scan side by side. @return exit code. */
int bench_perf(int argc, char **argv);

#endif
