/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The packet path: bytes -> frame -> parse -> classify against a fixed rule
 * set. Input: one byte of flags (bit 0: the NIC says the IPv4 checksum is
 * good, bit 1: bad, bit 2: only the first 64 bytes are contiguous, as in a
 * multi-segment mbuf), then the frame. Invariants:
 * - a verdict is one of the known ones; an OK frame has a family and lengths
 *   within the frame;
 * - the parser's fast path (the common IPv4 frame) gives the general
 *   parser's verdict, key and lengths;
 * - the trie's answer is the first-match linear scan's, and the rule it
 *   names really matches the key: only such a packet is delivered;
 * - a frame an offloaded rule's pattern matches (as a NIC reads it) is
 *   either not OK (never delivered) or matched by that rule: a mark never
 *   claims a packet the classifier would not give the channel;
 * - NAT's rewrite of an OK frame (a translation the flags byte picks) either
 *   refuses and leaves the frame as it was, or gives a frame that parses
 *   with the same verdict (its IPv4 header checksum still right) and exactly
 *   the translated 5-tuple.
 * ASan and UBSan catch reads past the frame.
 */
#include <string.h>

#include "core/config.h"
#include "core/match.h"
#include "offload/flow_pattern.h"
#include "fuzz.h"
#include "nc_trie.h"
#include "nc_trie_tools.h"
#include "nat/nat_rewrite.h"
#include "packet/parse.h"

static const char *const RULES[][6] = {
	/* proto, src, dst, sport, dport, priority */
	{ "udp", "any", "192.0.2.1", "any", "53", "10" },
	{ "tcp", "any", "2001:db8::1", "any", "80-443", "0" },
	{ "any", "198.51.100.0/24", "any", "any", "any", "20" },
	{ "udp", "any", "any", "any", "5000", "0" },
	{ "tcp", "10.0.0.0/8", "10.1.0.0/16", "1024-65535", "22", "5" },
	{ "icmp", "any", "192.0.2.0/24", "any", "any", "0" },
	{ "icmpv6", "any", "any", "any", "any", "0" },
	{ "sctp", "any", "2001:db8::/32", "any", "0x1000/0xf000", "3" },
	{ "any", "any", "203.0.113.0/24", "any", "any", "1" },
	{ "udp", "fe80::/10", "any", "546", "547", "0" },
	{ "udp", "any", "any", "any", "any", "0" },
};
#define NRULES (sizeof(RULES) / sizeof(RULES[0]))

static const uint8_t MAC[6] = { 0x02, 0x70, 0x63, 0x61, 0x70, 0x00 };

static struct {
	struct nc_trie *trie;
	struct nc_linear *linear;
	struct nc_trie_rule rule[NRULES];
	uint32_t id[NRULES];
	struct ncd_flow_pattern pat[NRULES][2];
	int npat[NRULES];
} fx;

static void
setup(void)
{
	struct nc_trie_config tc = NC_TRIE_SIZED(nc_trie_config, .name = "fuzz", .socket_id = -1,
			.max_rules = 64);
	char err[128];

	fx.trie = nc_trie_create(&tc);
	fx.linear = nc_linear_create(64);
	FUZZ_ASSERT(fx.trie != NULL && fx.linear != NULL);
	for (unsigned int i = 0; i < NRULES; i++) {
		struct nc_trie_rule *r = &fx.rule[i];
		uint8_t fam = 0;
		const char *why;

		memset(r, 0, sizeof(*r));
		FUZZ_ASSERT(ncd_parse_proto(RULES[i][0], &r->proto, &r->proto_mask, err,
					    sizeof(err)) == 0);
		FUZZ_ASSERT(ncd_parse_prefix(RULES[i][1], &r->src, &r->src_len, &fam, err,
					     sizeof(err)) == 0);
		if (fam)
			r->family = fam;
		fam = 0;
		FUZZ_ASSERT(ncd_parse_prefix(RULES[i][2], &r->dst, &r->dst_len, &fam, err,
					     sizeof(err)) == 0);
		if (fam)
			r->family = fam;
		FUZZ_ASSERT(ncd_parse_port(RULES[i][3], &r->sport, err, sizeof(err)) == 0);
		FUZZ_ASSERT(ncd_parse_port(RULES[i][4], &r->dport, err, sizeof(err)) == 0);
		r->priority = (uint32_t)atoi(RULES[i][5]);
		if (r->proto == 58)
			r->family = NC_TRIE_AF_INET6;
		int id = nc_trie_add(fx.trie, r);

		FUZZ_ASSERT(id >= 0);
		fx.id[i] = (uint32_t)id;
		FUZZ_ASSERT(nc_linear_add(fx.linear, (uint32_t)id, r) == 0);
		fx.npat[i] = ncd_flow_translate(r, fx.pat[i], &why);
	}
}

/* NAT's rewrite on a copy of the frame: the invariants above. */
static void
check_nat(const uint8_t *frame, uint32_t avail, uint32_t len, unsigned int flags, unsigned int which,
	  const struct ncd_parsed *p)
{
	static uint8_t buf[65536];
	struct ncd_nat_xlate x;
	struct ncd_parsed q;
	struct nc_trie_key want;
	unsigned int alen = p->key.family == NC_TRIE_AF_INET ? 4 : 16;

	memset(&x, 0, sizeof(x));
	x.flags = which & 0xf;
	for (unsigned int i = 0; i < alen; i++) {
		x.dst[i] = (uint8_t)(0xc6 + i * which);
		x.src[i] = (uint8_t)(0xcb + i);
	}
	x.dport = (uint16_t)(8080 + which);
	x.sport = (uint16_t)(40000 - which);
	memcpy(buf, frame, len);
	if (ncd_nat_rewrite(buf, avail, p, &x, 0) != NCD_NAT_OK) {
		FUZZ_ASSERT(memcmp(buf, frame, len) == 0);
		return;
	}
	FUZZ_ASSERT(ncd_parse(buf, avail, len, MAC, flags, &q) == NCD_PKT_OK);
	want = p->key;
	if (x.flags & NCD_NAT_DST)
		memcpy(want.dst.a, x.dst, alen);
	if (x.flags & NCD_NAT_SRC)
		memcpy(want.src.a, x.src, alen);
	if (x.flags & NCD_NAT_DPORT)
		want.dport = x.dport;
	if (x.flags & NCD_NAT_SPORT)
		want.sport = x.sport;
	FUZZ_ASSERT(memcmp(&want, &q.key, sizeof(want)) == 0);
	FUZZ_ASSERT(q.l2_len == p->l2_len && q.l3_len == p->l3_len && q.l4_off == p->l4_off);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ncd_parsed p, q;
	unsigned int flags;
	uint32_t len, avail, t, l;
	enum ncd_verdict v;
	const uint8_t *frame;

	if (fx.trie == NULL)
		setup();
	if (size < 1 || size > 65536)
		return 0;
	flags = data[0] & 3;
	frame = data + 1;
	len = (uint32_t)size - 1;
	avail = (data[0] & 4) && len > 64 ? 64 : len;
	v = ncd_parse(frame, avail, len, MAC, flags, &p);
	FUZZ_ASSERT(v < NCD_PKT_NVERDICTS);
	/* The fast path decides nothing the general parser would decide otherwise. */
	memset(&q, 0xa5, sizeof(q));
	FUZZ_ASSERT(ncd_parse_slow(frame, avail, len, MAC, flags, &q) == v);
	if (v == NCD_PKT_OK)
		FUZZ_ASSERT(memcmp(&p.key, &q.key, sizeof(p.key)) == 0 && p.l3_len == q.l3_len &&
			    p.l2_len == q.l2_len && p.l4_off == q.l4_off &&
			    p.frag_hdr == q.frag_hdr && p.frag == q.frag);
	if (v == NCD_PKT_OK) {
		FUZZ_ASSERT(p.key.family == NC_TRIE_AF_INET || p.key.family == NC_TRIE_AF_INET6);
		FUZZ_ASSERT((uint32_t)p.l2_len + p.l3_len <= len);
		nc_trie_lookup_bulk(fx.trie, &p.key, &t, 1);
		l = nc_linear_lookup(fx.linear, &p.key);
		FUZZ_ASSERT(t == l);
		for (unsigned int i = 0; i < NRULES; i++)
			if (fx.id[i] == t)
				FUZZ_ASSERT(nc_trie_rule_matches(&fx.rule[i], &p.key));
		check_nat(frame, avail, len, flags, data[0] >> 3, &p);
	}
	for (unsigned int i = 0; i < NRULES; i++)
		for (int k = 0; k < fx.npat[i]; k++)
			if (ncd_flow_match(fx.pat[i][k].items, frame, len))
				FUZZ_ASSERT(v != NCD_PKT_OK || nc_trie_rule_matches(&fx.rule[i], &p.key));
	return 0;
}
