/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * nc_trie: the netchannels packet classifier.
 *
 * A rule is a 5-tuple of value/mask fields (destination and source prefix,
 * destination and source port as a range or a contiguous mask, protocol)
 * plus a priority. A lookup returns the id of the matching rule with the
 * highest priority; among equal priorities the rule added first wins, so
 * every lookup has exactly one answer.
 *
 * The structure is the netchannels patch's chain of per-field tries
 * (daddr, saddr, dport, sport, proto) joined through wildcard points, with a
 * backtracking search pruned by the best priority found so far, plus an
 * exact-match front stage for fully specified rules and, for rule sets the
 * front stage does not hold (firewall shapes), a snapshot of the rules that
 * rte_acl compiles in the background (nc_trie_snapshot_sync()). The trie is
 * the authority: every answer is the one it gives.
 *
 * Concurrency: one writer (add, delete, reclaim) and any number of readers
 * (lookup) that take no lock. Readers are tracked with rte_rcu_qsbr; memory
 * a writer unlinks is reused only after every registered reader has passed
 * a quiescent state. Without a registered QSBR variable the table is for
 * single-threaded use and memory is reused at once.
 *
 * The core has no EAL dependency: it can be used (and unit tested) in a
 * process that never calls rte_eal_init(); it then has no snapshot, which
 * needs DPDK's memory.
 */
#ifndef NC_TRIE_H
#define NC_TRIE_H

#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

struct rte_rcu_qsbr;

/** Opaque classifier handle. */
struct nc_trie;

/** Lookup result when no rule matches. */
#define NC_TRIE_NOMATCH UINT32_MAX

/** Highest priority a rule may have. */
#define NC_TRIE_PRIO_MAX 0xffffffu

/** Longest name of a table, including the terminating NUL. */
#define NC_TRIE_NAMESIZE 32

/** Address families of keys and rules. */
enum nc_trie_family {
	NC_TRIE_AF_ANY = 0,   /**< rule only: no address constraint, both families */
	NC_TRIE_AF_INET = 4,  /**< IPv4 */
	NC_TRIE_AF_INET6 = 6, /**< IPv6 */
};

/** An IPv4 or IPv6 address in network byte order (IPv4 in the first 4 bytes). */
union nc_trie_addr {
	uint8_t a[16];    /**< bytes, network order */
	uint32_t v4;      /**< IPv4 address, network order */
};

/** Key flags. */
#define NC_TRIE_KEY_F_NOPORTS 0x01 /**< no L4 ports (fragment, or a protocol without ports) */

/** A lookup key: the header fields of one packet. */
struct nc_trie_key {
	uint8_t family;          /**< NC_TRIE_AF_INET or NC_TRIE_AF_INET6 */
	uint8_t proto;           /**< IP protocol (after IPv6 extension headers) */
	uint8_t flags;           /**< NC_TRIE_KEY_F_* */
	uint8_t reserved;        /**< set to 0 */
	uint16_t sport;          /**< source port, host order */
	uint16_t dport;          /**< destination port, host order */
	union nc_trie_addr src;  /**< source address */
	union nc_trie_addr dst;  /**< destination address */
};

/** How a port field is given. */
enum nc_trie_port_kind {
	NC_TRIE_PORT_ANY = 0, /**< any port (a zeroed field is a wildcard) */
	NC_TRIE_PORT_RANGE,   /**< lo..hi inclusive, lo <= hi */
	NC_TRIE_PORT_MASK,    /**< value lo under mask hi; the mask must be a contiguous prefix */
};

/** A port constraint. */
struct nc_trie_port {
	uint16_t lo;   /**< RANGE: first port; MASK: value */
	uint16_t hi;   /**< RANGE: last port; MASK: mask */
	uint8_t kind;  /**< enum nc_trie_port_kind */
};

/**
 * A rule. A zero-initialised rule matches every packet of both families.
 * Address bits past the prefix length are ignored (the value is masked).
 */
struct nc_trie_rule {
	uint8_t family;          /**< NC_TRIE_AF_*; ANY requires both prefix lengths 0 */
	uint8_t proto;           /**< protocol value */
	uint8_t proto_mask;      /**< 0 = any protocol, 0xff = exactly proto; must be contiguous */
	uint8_t dst_len;         /**< destination prefix length (0 = any) */
	uint8_t src_len;         /**< source prefix length (0 = any) */
	union nc_trie_addr dst;  /**< destination prefix */
	union nc_trie_addr src;  /**< source prefix */
	struct nc_trie_port dport; /**< destination port */
	struct nc_trie_port sport; /**< source port */
	uint32_t priority;       /**< 0..NC_TRIE_PRIO_MAX, higher wins */
};

/**
 * A struct that carries its size (nc_trie_config, nc_trie_stats), initialised
 * for this header: `struct nc_trie_config c = NC_TRIE_SIZED(nc_trie_config,
 * .name = "t", .socket_id = -1, .max_rules = 16);`. The library reads and
 * writes only what the size covers: fields a caller's older header lacks
 * count as 0; fields a newer header adds must be 0 when passed in (EINVAL
 * otherwise) and are left 0 when given back, size saying how much was filled.
 */
#define NC_TRIE_SIZED(type, ...) ((struct type){ .size = sizeof(struct type), __VA_ARGS__ })

/** Parameters of nc_trie_create(). */
struct nc_trie_config {
	uint32_t size;      /**< sizeof(struct nc_trie_config) (NC_TRIE_SIZED()) */
	const char *name;   /**< for logs and dumps; at most NC_TRIE_NAMESIZE - 1 chars */
	int socket_id;      /**< NUMA node for the table's memory, or -1 for any */
	uint32_t max_rules; /**< capacity: rule ids are 0..max_rules-1 */
	uint32_t flags;     /**< NC_TRIE_F_*; other bits are refused (EINVAL) */
};

/**
 * nc_trie_config.flags: no compiled snapshot; lookups use the front stage and
 * the trie alone (see nc_trie_snapshot_sync()).
 */
#define NC_TRIE_F_NO_SNAPSHOT 0x1u

/** nc_trie_stats.snapshot_state. */
enum nc_trie_snapshot_state {
	NC_TRIE_SNAPSHOT_NONE = 0,     /**< none installed, none being built */
	NC_TRIE_SNAPSHOT_BUILDING = 1, /**< none installed, one being built */
	NC_TRIE_SNAPSHOT_READY = 2,    /**< one installed (another may be being built) */
	NC_TRIE_SNAPSHOT_OFF = 3,      /**< disabled: NC_TRIE_F_NO_SNAPSHOT, or no EAL */
};

/** Size of nc_trie_stats.snapshot_layout's strings, with their NUL. */
#define NC_TRIE_LAYOUT_SIZE 24

/** Counters of a table (nc_trie_get_stats()). */
struct nc_trie_stats {
	/** In: sizeof(struct nc_trie_stats) (NC_TRIE_SIZED()). Out: how much was filled. */
	uint32_t size;
	uint32_t rules;        /**< rules in the table */
	uint32_t exact_rules;  /**< of which in the exact-match front stage */
	uint32_t tuples;       /**< front-stage tables (one per mask signature) in use */
	uint32_t nodes;        /**< trie nodes in use (including deferred ones) */
	uint32_t deferred;     /**< nodes and entries waiting for an RCU grace period */
	uint64_t bytes;        /**< memory in use by the table, the snapshot and the delta included */
	uint32_t snapshot_state;    /**< enum nc_trie_snapshot_state */
	uint32_t snapshot_rules;    /**< rules compiled into the installed snapshot */
	uint32_t delta_rules;       /**< trie rules it lacks, added since its rules were copied */
	uint32_t stale_rules;       /**< its rules deleted since (their keys go to the trie) */
	uint32_t snapshot_builds;   /**< snapshots installed since the table was created */
	uint32_t snapshot_failures; /**< builds that failed (the trie answers meanwhile) */
	uint64_t snapshot_build_us; /**< how long the installed one took to build */
	uint64_t snapshot_bytes;    /**< its memory: the DPDK heap's growth over its build */
	uint64_t snapshot_build_total_us; /**< every build's wall time (failed ones too), summed */
	/**
	 * The order the installed snapshot's rte_acl reads its IPv4 ([0]) and
	 * IPv6 ([1]) fields in, such as "proto,src,ports,dst" (empty: no rule of
	 * the family). Each build keeps the last order unless the family's rule
	 * count has moved by a quarter; then it times every order and keeps the
	 * fastest that takes no more memory than "proto,src,dst,ports".
	 */
	char snapshot_layout[2][NC_TRIE_LAYOUT_SIZE];
};

/**
 * Create a classifier table.
 *
 * @param cfg
 *   Name, NUMA socket and capacity, its size set. Passing NULL is an error.
 * @return
 *   The table, or NULL with errno set: EINVAL (bad parameter: NULL, a size
 *   that does not hold the size itself, a field this library does not know
 *   set, empty or too long name, max_rules 0 or above 2^24, an unknown flag),
 *   ENOMEM (out of memory).
 */
struct nc_trie *nc_trie_create(const struct nc_trie_config *cfg);

/**
 * Free a table and all its memory. No reader may be using it. A snapshot
 * build under way is joined; one that is timing field orders stops after the
 * compile in progress.
 *
 * @param t
 *   The table; NULL is a no-op.
 */
void nc_trie_free(struct nc_trie *t);

/**
 * Check a rule without adding it.
 *
 * @param r
 *   The rule.
 * @return
 *   0 if nc_trie_add() would accept its fields, -EINVAL otherwise (NULL, bad
 *   family, prefix longer than the family's address, family ANY with an
 *   address constraint, non-contiguous port or protocol mask, inverted port
 *   range, unknown port kind, priority above NC_TRIE_PRIO_MAX).
 */
int nc_trie_rule_validate(const struct nc_trie_rule *r);

/**
 * The classifier's semantics: whether a valid rule matches a key.
 *
 * This is the reference every lookup answer must agree with (the
 * differential tests and the benchmark's linear scan use it).
 *
 * @param r
 *   A rule that passes nc_trie_rule_validate().
 * @param k
 *   The key.
 * @return
 *   1 if it matches, 0 if not.
 */
int nc_trie_rule_matches(const struct nc_trie_rule *r, const struct nc_trie_key *k);

/**
 * Whether two valid rules overlap: some key with ports matches both (what
 * one channel's rule, at a priority not below the other's, would take from
 * it).
 *
 * @return
 *   1 if they overlap, 0 if no key matches both.
 */
int nc_trie_rules_overlap(const struct nc_trie_rule *a, const struct nc_trie_rule *b);

/**
 * Whether two valid rules are the same rule, priority included, as nc_trie_add()
 * judges it (-EEXIST): the same keys match both (bits past a prefix's length,
 * and a port's masked-off bits, do not count; a port match and the range it
 * covers are the same).
 *
 * @return
 *   1 if they are, 0 if not.
 */
int nc_trie_rules_same(const struct nc_trie_rule *a, const struct nc_trie_rule *b);

/**
 * The ports a port match covers, as an inclusive range (ANY: 0..65535).
 *
 * @param p
 *   A port match that passes nc_trie_rule_validate() as part of a rule.
 * @param lo
 *   Receives the first port.
 * @param hi
 *   Receives the last port.
 */
void nc_trie_port_range(const struct nc_trie_port *p, uint16_t *lo, uint16_t *hi);

/**
 * Add a rule. Writer side: not concurrent with another add, delete or
 * reclaim on the same table.
 *
 * @param t
 *   The table.
 * @param r
 *   The rule (copied).
 * @return
 *   The rule id (0..max_rules-1), or a negative errno: -EINVAL (NULL or a
 *   rule nc_trie_rule_validate() refuses), -EEXIST (a rule with the same
 *   fields and priority is in the table), -ENOSPC (max_rules rules, or the
 *   table's node memory, is used up; the table is unchanged).
 */
int nc_trie_add(struct nc_trie *t, const struct nc_trie_rule *r);

/**
 * Delete a rule. Writer side. Memory it frees is reused after a grace period
 * when a QSBR variable is registered.
 *
 * @param t
 *   The table.
 * @param id
 *   A rule id from nc_trie_add().
 * @return
 *   0, -EINVAL (NULL table, id out of range), -ENOENT (no such rule, e.g.
 *   deleted twice), or -ENOMEM (no memory for the delete's bookkeeping; the
 *   rule stays in the table).
 */
int nc_trie_delete(struct nc_trie *t, uint32_t id);

/**
 * Read back a rule.
 *
 * @param t
 *   The table.
 * @param id
 *   The rule id.
 * @param r
 *   Receives the rule as stored: addresses masked to their prefix, and for a
 *   rule of the exact-match front stage, exact ports as one-port ranges.
 * @return
 *   0, -EINVAL (NULL argument, id out of range) or -ENOENT.
 */
int nc_trie_get_rule(const struct nc_trie *t, uint32_t id, struct nc_trie_rule *r);

/**
 * Look up one key. Reader side: lock-free, safe against a concurrent writer
 * when the calling thread is registered and online with the table's QSBR
 * variable.
 *
 * @param t
 *   The table.
 * @param k
 *   The key.
 * @return
 *   The id of the best matching rule, or NC_TRIE_NOMATCH.
 */
uint32_t nc_trie_lookup(const struct nc_trie *t, const struct nc_trie_key *k);

/**
 * Look up n keys. Reader side, as nc_trie_lookup().
 *
 * @param t
 *   The table.
 * @param keys
 *   Array of n keys.
 * @param results
 *   Receives n results: rule ids or NC_TRIE_NOMATCH.
 * @param n
 *   Number of keys.
 * @return
 *   The number of keys that matched a rule.
 */
unsigned int nc_trie_lookup_bulk(const struct nc_trie *t, const struct nc_trie_key *keys,
				 uint32_t *results, unsigned int n);

/**
 * Register the QSBR variable that the table's readers report to. From then
 * on, memory unlinked by delete is reused only after a grace period.
 *
 * @param t
 *   The table.
 * @param v
 *   An initialised QSBR variable, or NULL to go back to immediate reuse
 *   (after reclaiming everything deferred, waiting for readers if needed).
 * @return
 *   0, -EINVAL (NULL table), -EEXIST (a variable is already registered).
 */
int nc_trie_rcu_qsbr_add(struct nc_trie *t, struct rte_rcu_qsbr *v);

/**
 * Reuse the memory whose grace period has ended, and keep the snapshot
 * current. Writer side; call it from the control thread when idle (every
 * 100 ms, say). Add and delete reuse memory too, but only this call installs
 * a finished snapshot or starts the build of a new one: when the trie holds
 * at least 64 rules outside the front stage and rules were added or deleted
 * since the installed snapshot's copy (or there is none), it copies the
 * rules and a thread compiles them with rte_acl, at most half of the time.
 *
 * @param t
 *   The table.
 * @param wait
 *   Non-zero: wait until every deferred object can be reused, and for a
 *   build under way, which is then installed.
 * @return
 *   The number of objects made reusable, or -EINVAL.
 */
int nc_trie_reclaim(struct nc_trie *t, int wait);

/**
 * Bring the snapshot up to date now and wait for it: build one from the
 * current rules if the table wants one (see nc_trie_reclaim()), install it,
 * and wait for the readers before freeing the one it replaces. Writer side.
 *
 * The snapshot is rte_acl compiled from the rules outside the front stage,
 * and the front stage's too when they are fewer (lookups then skip the
 * front stage). A lookup asks it, then searches the rules added since its
 * copy (a second trie, the delta); a key whose snapshot answer was deleted
 * since, or that has no ports, is searched in the trie. Answers are the
 * trie's.
 *
 * @param t
 *   The table.
 * @return
 *   0 (installed, or none wanted), -EINVAL (NULL), -ENOTSUP (disabled by
 *   NC_TRIE_F_NO_SNAPSHOT, or no EAL: rte_acl needs DPDK's memory), or the
 *   build's negative errno (the trie answers meanwhile).
 */
int nc_trie_snapshot_sync(struct nc_trie *t);

/**
 * Read the table's counters. Writer side (not concurrent with updates).
 *
 * @param t
 *   The table.
 * @param s
 *   Receives the counters, as far as its size (set by the caller) covers.
 * @return
 *   0 or -EINVAL (no table, no s, or a size that does not hold the size itself).
 */
int nc_trie_get_stats(const struct nc_trie *t, struct nc_trie_stats *s);

/**
 * Write a human-readable dump of the table's structure, for debugging.
 *
 * @param t
 *   The table.
 * @param f
 *   Output stream.
 * @return
 *   0 or -EINVAL.
 */
int nc_trie_dump(const struct nc_trie *t, FILE *f);

/**
 * Format a rule as text, in the config's match syntax.
 *
 * @param r
 *   The rule.
 * @param buf
 *   Output buffer.
 * @param size
 *   Its size.
 * @return
 *   The length snprintf() would have written, or -EINVAL.
 */
int nc_trie_rule_format(const struct nc_trie_rule *r, char *buf, size_t size);

#ifdef __cplusplus
}
#endif

#endif /* NC_TRIE_H */
