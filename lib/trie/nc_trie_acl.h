/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Rules and keys as rte_acl reads them: the snapshot's layout (snapshot.c,
 * lookup.c), which the benchmark's rte_acl reference uses too, so that both
 * compile the same rules from the same fields. Not installed.
 *
 * Keys are in network byte order: the protocol alone first (rte_acl wants a
 * 1-byte first field), then 4-byte groups: source, destination, and the ports
 * (sport then dport, each big-endian) in one group.
 */
#ifndef NC_TRIE_ACL_H
#define NC_TRIE_ACL_H

#include <stddef.h>
#include <string.h>
#include <arpa/inet.h>

#include <rte_acl.h>
#include <rte_malloc.h>

#include "nc_trie.h"

#define NCT_ACL_V4_FIELDS 5
#define NCT_ACL_V6_FIELDS 11

struct nct_acl_key4 {
	uint8_t proto;
	uint8_t pad[3];
	uint32_t src, dst, ports;
};

struct nct_acl_key6 {
	uint8_t proto;
	uint8_t pad[3];
	uint8_t src[16], dst[16];
	uint32_t ports;
};

/* A key's ports as rte_acl reads them. */
static inline uint32_t
nct_acl_ports(const struct nc_trie_key *k)
{
	return (uint32_t)htons(k->sport) | (uint32_t)htons(k->dport) << 16;
}

/*
 * An IPv4 key as rte_acl reads it, in four 32-bit stores: built in a
 * temporary and copied, its byte and word stores stalled the 16-byte load of
 * the copy (no store forwarding), half of a snapshot lookup's own time.
 */
static inline void
nct_acl_key4(const struct nc_trie_key *k, struct nct_acl_key4 *a)
{
	const uint32_t proto = k->proto; /* the padding zero */

	memcpy(a, &proto, sizeof(proto));
	a->src = k->src.v4;
	a->dst = k->dst.v4;
	a->ports = nct_acl_ports(k);
}

/* An IPv6 key as rte_acl reads it. */
static inline void
nct_acl_key6(const struct nc_trie_key *k, struct nct_acl_key6 *a)
{
	a->proto = k->proto;
	memcpy(a->src, k->src.a, sizeof(a->src));
	memcpy(a->dst, k->dst.a, sizeof(a->dst));
	a->ports = nct_acl_ports(k);
}

/* How many fields family fam's layout has (0 IPv4, 1 IPv6). */
static inline unsigned int
nct_acl_nfields(unsigned int fam)
{
	return fam ? NCT_ACL_V6_FIELDS : NCT_ACL_V4_FIELDS;
}

/* Key k laid out for family fam into a (an nct_acl_key4 or _key6): what rte_acl reads. */
static inline const uint8_t *
nct_acl_key(unsigned int fam, const struct nc_trie_key *k, void *a)
{
	if (fam)
		nct_acl_key6(k, a);
	else
		nct_acl_key4(k, a);
	return a;
}

/*
 * The orders rte_acl may read the groups after the protocol in (which must
 * come first, being its one 1-byte field): source, destination, ports. The
 * key's layout stays; only the order of its reads changes, and with it the
 * size of the tries and how many a set needs (fw1_10k: 137 MB in 3 tries and
 * 92 ns a key in the first order, 12.7 MB in 1 and 53 ns in "src,ports,dst").
 * Order 0 is the layout of DPDK's examples.
 */
#define NCT_ACL_ORDERS 6

static const uint8_t nct_acl_order_groups[NCT_ACL_ORDERS][3] = {
	{ 0, 1, 2 }, { 1, 0, 2 }, { 0, 2, 1 }, { 1, 2, 0 }, { 2, 0, 1 }, { 2, 1, 0 },
};

/* Order o's name, as show classifier prints it. */
static inline const char *
nct_acl_order_name(unsigned int o)
{
	static const char *const names[NCT_ACL_ORDERS] = {
		"proto,src,dst,ports", "proto,dst,src,ports", "proto,src,ports,dst",
		"proto,dst,ports,src", "proto,ports,src,dst", "proto,ports,dst,src",
	};

	return o < NCT_ACL_ORDERS ? names[o] : "";
}

/*
 * The field definitions of family fam (0 IPv4, 1 IPv6), read in order o:
 * nct_acl_nfields(fam) of them. A rule's fields keep their places
 * (nct_acl_fields()) whatever the order.
 */
static inline void
nct_acl_defs(unsigned int fam, unsigned int o, struct rte_acl_field_def *d)
{
	const unsigned int words = fam ? 4 : 1;
	const size_t off[3] = {
		fam ? offsetof(struct nct_acl_key6, src) : offsetof(struct nct_acl_key4, src),
		fam ? offsetof(struct nct_acl_key6, dst) : offsetof(struct nct_acl_key4, dst),
		fam ? offsetof(struct nct_acl_key6, ports) : offsetof(struct nct_acl_key4, ports),
	};
	unsigned int n = 1, in = 1;

	d[0] = (struct rte_acl_field_def){ .type = RTE_ACL_FIELD_TYPE_BITMASK, .size = 1,
					   .field_index = 0, .input_index = 0, .offset = 0 };
	for (unsigned int g = 0; g < 3; g++) {
		const unsigned int grp = nct_acl_order_groups[o % NCT_ACL_ORDERS][g];

		if (grp == 2) {
			/* Both ports in one 4-byte group: one input index. */
			for (unsigned int i = 0; i < 2; i++, n++)
				d[n] = (struct rte_acl_field_def){ .type = RTE_ACL_FIELD_TYPE_RANGE,
					.size = 2, .field_index = (uint8_t)(1 + 2 * words + i),
					.input_index = (uint8_t)in, .offset = (uint32_t)(off[2] + 2 * i) };
			in++;
			continue;
		}
		for (unsigned int w = 0; w < words; w++, n++, in++)
			d[n] = (struct rte_acl_field_def){ .type = RTE_ACL_FIELD_TYPE_MASK, .size = 4,
				.field_index = (uint8_t)(1 + grp * words + w),
				.input_index = (uint8_t)in, .offset = (uint32_t)(off[grp] + 4 * w) };
	}
}

/* A 32-bit word of an address prefix: its value and how many of its bits count. */
static inline void
nct_acl_word(const union nc_trie_addr *a, unsigned int len, unsigned int w,
	     struct rte_acl_field *f)
{
	uint32_t v;
	int bits = (int)len - 32 * (int)w;

	memcpy(&v, a->a + 4 * w, 4);
	f->mask_range.u32 = bits <= 0 ? 0 : bits >= 32 ? 32 : (uint32_t)bits;
	f->value.u32 = f->mask_range.u32 ? ntohl(v) : 0;
}

/* A valid rule's fields for family fam's layout (a family-agnostic rule fits both). */
static inline void
nct_acl_fields(const struct nc_trie_rule *r, unsigned int fam, struct rte_acl_field *f)
{
	const unsigned int words = fam ? 4 : 1;
	uint16_t lo, hi;

	f[0].value.u8 = r->proto & r->proto_mask;
	f[0].mask_range.u8 = r->proto_mask;
	for (unsigned int w = 0; w < words; w++) {
		nct_acl_word(&r->src, r->family == NC_TRIE_AF_ANY ? 0 : r->src_len, w, &f[1 + w]);
		nct_acl_word(&r->dst, r->family == NC_TRIE_AF_ANY ? 0 : r->dst_len, w,
			     &f[1 + words + w]);
	}
	for (unsigned int i = 0; i < 2; i++) {
		nc_trie_port_range(i ? &r->dport : &r->sport, &lo, &hi);
		f[1 + 2 * words + i].value.u16 = lo;
		f[1 + 2 * words + i].mask_range.u16 = hi;
	}
}

/* What DPDK's heaps hold: rte_acl's memory is measured as their growth over a build. */
static inline uint64_t
nct_heap_bytes(void)
{
	struct rte_malloc_socket_stats st;
	uint64_t total = 0;

	for (unsigned int i = 0; i < rte_socket_count(); i++)
		if (rte_malloc_get_socket_stats(rte_socket_id_by_idx(i), &st) == 0)
			total += st.heap_allocsz_bytes;
	return total;
}

#endif
