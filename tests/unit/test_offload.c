/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Rules as rte_flow patterns: the expected item structures for each kind of
 * rule, the rules that cannot be expressed, which rules overlap, and, on
 * random rules and frames, that a pattern read the way a NIC reads it
 * (ncd_flow_match) never claims a frame the rule does not match per the
 * parser and nc_trie_rule_matches(), and claims every plain one it does.
 */
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include <check.h>
#include <rte_byteorder.h>
#include <rte_ip.h>

#include "core/config.h"
#include "core/match.h"
#include "offload/flow_pattern.h"
#include "frames.h"
#include "nc_trie_tools.h"
#include "packet/parse.h"

static struct nc_trie_rule
rule(const char *proto, const char *src, const char *dst, const char *sport, const char *dport)
{
	struct nc_trie_rule r;
	char err[128];
	uint8_t fam = 0;

	memset(&r, 0, sizeof(r));
	ck_assert_int_eq(ncd_parse_proto(proto, &r.proto, &r.proto_mask, err, sizeof(err)), 0);
	ck_assert_int_eq(ncd_parse_prefix(src, &r.src, &r.src_len, &fam, err, sizeof(err)), 0);
	if (fam)
		r.family = fam;
	fam = 0;
	ck_assert_int_eq(ncd_parse_prefix(dst, &r.dst, &r.dst_len, &fam, err, sizeof(err)), 0);
	if (fam)
		r.family = fam;
	ck_assert_int_eq(ncd_parse_port(sport, &r.sport, err, sizeof(err)), 0);
	ck_assert_int_eq(ncd_parse_port(dport, &r.dport, err, sizeof(err)), 0);
	ck_assert_int_eq(nc_trie_rule_validate(&r), 0);
	return r;
}

static const struct rte_flow_item_ipv4 *
v4spec(const struct ncd_flow_pattern *p) { return p->items[1].spec; }
static const struct rte_flow_item_ipv4 *
v4mask(const struct ncd_flow_pattern *p) { return p->items[1].mask; }

START_TEST(exact_udp4)
{
	struct nc_trie_rule r = rule("udp", "198.51.100.7", "192.0.2.1", "any", "53");
	struct ncd_flow_pattern p[2];
	const char *why = NULL;
	const struct rte_flow_item_udp *us, *um;

	ck_assert_int_eq(ncd_flow_translate(&r, p, &why), 1);
	ck_assert_int_eq(p[0].items[0].type, RTE_FLOW_ITEM_TYPE_ETH);
	ck_assert_ptr_null(p[0].items[0].spec);
	ck_assert_int_eq(p[0].items[1].type, RTE_FLOW_ITEM_TYPE_IPV4);
	ck_assert_uint_eq(v4spec(&p[0])->hdr.src_addr, inet_addr("198.51.100.7"));
	ck_assert_uint_eq(v4mask(&p[0])->hdr.src_addr, 0xffffffffu);
	ck_assert_uint_eq(v4spec(&p[0])->hdr.dst_addr, inet_addr("192.0.2.1"));
	ck_assert_uint_eq(v4mask(&p[0])->hdr.dst_addr, 0xffffffffu);
	ck_assert_uint_eq(v4spec(&p[0])->hdr.next_proto_id, IPPROTO_UDP);
	ck_assert_uint_eq(v4mask(&p[0])->hdr.next_proto_id, 0xff);
	/* Only unfragmented packets: the trie reads no ports in a fragment. */
	ck_assert_uint_eq(v4spec(&p[0])->hdr.fragment_offset, 0);
	ck_assert_uint_eq(rte_be_to_cpu_16(v4mask(&p[0])->hdr.fragment_offset), 0x3fff);
	ck_assert_int_eq(p[0].items[2].type, RTE_FLOW_ITEM_TYPE_UDP);
	us = p[0].items[2].spec;
	um = p[0].items[2].mask;
	ck_assert_uint_eq(um->hdr.src_port, 0);
	ck_assert_uint_eq(rte_be_to_cpu_16(us->hdr.dst_port), 53);
	ck_assert_uint_eq(um->hdr.dst_port, 0xffff);
	ck_assert_int_eq(p[0].items[3].type, RTE_FLOW_ITEM_TYPE_END);
}
END_TEST

START_TEST(prefix_tcp6_range)
{
	struct nc_trie_rule r = rule("tcp", "any", "2001:db8::/32", "1024-2047", "any");
	struct ncd_flow_pattern p[2];
	const char *why = NULL;
	const struct rte_flow_item_ipv6 *s, *m;
	const struct rte_flow_item_tcp *ts, *tm;
	static const uint8_t want_mask[16] = { 0xff, 0xff, 0xff, 0xff };
	static const uint8_t want_spec[16] = { 0x20, 0x01, 0x0d, 0xb8 };
	static const uint8_t zero[16];

	ck_assert_int_eq(ncd_flow_translate(&r, p, &why), 1);
	ck_assert_int_eq(p[0].items[1].type, RTE_FLOW_ITEM_TYPE_IPV6);
	s = p[0].items[1].spec;
	m = p[0].items[1].mask;
	ck_assert_mem_eq(m->hdr.dst_addr, want_mask, 16);
	ck_assert_mem_eq(s->hdr.dst_addr, want_spec, 16);
	ck_assert_mem_eq(m->hdr.src_addr, zero, 16);
	ck_assert_uint_eq(s->hdr.proto, IPPROTO_TCP);
	ck_assert_uint_eq(m->hdr.proto, 0xff);
	ck_assert_uint_eq(m->has_frag_ext, 1);
	ck_assert_uint_eq(s->has_frag_ext, 0);
	ck_assert_int_eq(p[0].items[2].type, RTE_FLOW_ITEM_TYPE_TCP);
	ts = p[0].items[2].spec;
	tm = p[0].items[2].mask;
	ck_assert_uint_eq(rte_be_to_cpu_16(ts->hdr.src_port), 1024);
	ck_assert_uint_eq(rte_be_to_cpu_16(tm->hdr.src_port), 0xfc00);
	ck_assert_uint_eq(tm->hdr.dst_port, 0);
	ck_assert_int_eq(p[0].items[3].type, RTE_FLOW_ITEM_TYPE_END);
}
END_TEST

START_TEST(both_families)
{
	struct nc_trie_rule r = rule("udp", "any", "any", "any", "5000");
	struct ncd_flow_pattern p[2];
	const char *why = NULL;

	ck_assert_int_eq(ncd_flow_translate(&r, p, &why), 2);
	ck_assert_int_eq(p[0].items[1].type, RTE_FLOW_ITEM_TYPE_IPV4);
	ck_assert_int_eq(p[1].items[1].type, RTE_FLOW_ITEM_TYPE_IPV6);
	ck_assert_int_eq(p[0].items[2].type, RTE_FLOW_ITEM_TYPE_UDP);
	ck_assert_int_eq(p[1].items[2].type, RTE_FLOW_ITEM_TYPE_UDP);
	ck_assert_uint_eq(v4mask(&p[0])->hdr.src_addr | v4mask(&p[0])->hdr.dst_addr, 0);
}
END_TEST

START_TEST(no_ports)
{
	struct nc_trie_rule r = rule("icmp", "any", "192.0.2.0/24", "any", "any");
	struct nc_trie_rule any = rule("any", "10.0.0.0/8", "any", "any", "any");
	struct nc_trie_rule sctp = rule("sctp", "any", "192.0.2.1", "any", "4096/0xf000");
	struct ncd_flow_pattern p[2];
	const char *why = NULL;

	ck_assert_int_eq(ncd_flow_translate(&r, p, &why), 1);
	ck_assert_uint_eq(v4spec(&p[0])->hdr.next_proto_id, IPPROTO_ICMP);
	ck_assert_uint_eq(v4mask(&p[0])->hdr.dst_addr, htonl(0xffffff00));
	/* No ports to read: fragments match, as in the trie. */
	ck_assert_uint_eq(v4mask(&p[0])->hdr.fragment_offset, 0);
	ck_assert_int_eq(p[0].items[2].type, RTE_FLOW_ITEM_TYPE_END);

	ck_assert_int_eq(ncd_flow_translate(&any, p, &why), 1);
	ck_assert_uint_eq(v4mask(&p[0])->hdr.next_proto_id, 0);
	ck_assert_uint_eq(v4spec(&p[0])->hdr.src_addr, inet_addr("10.0.0.0"));
	ck_assert_int_eq(p[0].items[2].type, RTE_FLOW_ITEM_TYPE_END);

	ck_assert_int_eq(ncd_flow_translate(&sctp, p, &why), 1);
	ck_assert_int_eq(p[0].items[2].type, RTE_FLOW_ITEM_TYPE_SCTP);
	ck_assert_uint_eq(rte_be_to_cpu_16(((const struct rte_flow_item_sctp *)
					    p[0].items[2].mask)->hdr.dst_port), 0xf000);
	ck_assert_uint_eq(rte_be_to_cpu_16(((const struct rte_flow_item_sctp *)
					    p[0].items[2].spec)->hdr.dst_port), 4096);
}
END_TEST

START_TEST(not_expressible)
{
	struct ncd_flow_pattern p[2];
	const char *why = NULL;
	struct nc_trie_rule r = rule("any", "any", "192.0.2.1", "any", "53");

	ck_assert_int_eq(ncd_flow_translate(&r, p, &why), -ENOTSUP);
	ck_assert_str_eq(why, "ports without TCP, UDP or SCTP");
	r = rule("udp", "any", "192.0.2.1", "any", "1000-2000");
	ck_assert_int_eq(ncd_flow_translate(&r, p, &why), -ENOTSUP);
	ck_assert_str_eq(why, "a port range that is not a prefix");
	r = rule("udp", "any", "192.0.2.1", "1001-1002", "any");
	ck_assert_int_eq(ncd_flow_translate(&r, p, &why), -ENOTSUP);
	r = rule("udp", "any", "192.0.2.1", "any", "any");
	r.proto_mask = 0xf0;
	r.proto = 0x10;
	ck_assert_int_eq(ncd_flow_translate(&r, p, &why), -ENOTSUP);
	ck_assert_str_eq(why, "a partial protocol mask");
	/* Aligned ranges are prefixes; the whole range is any. */
	r = rule("udp", "any", "192.0.2.1", "0-65535", "1024-1279");
	ck_assert_int_eq(ncd_flow_translate(&r, p, &why), 1);
}
END_TEST

START_TEST(overlaps)
{
	struct nc_trie_rule lis = rule("udp", "any", "192.0.2.1", "any", "53");
	struct nc_trie_rule exact = rule("udp", "198.51.100.7", "192.0.2.1", "4000", "53");
	struct nc_trie_rule other_port = rule("udp", "any", "192.0.2.1", "any", "54");
	struct nc_trie_rule tcp = rule("tcp", "any", "192.0.2.1", "any", "53");
	struct nc_trie_rule any = rule("any", "any", "any", "any", "any");
	struct nc_trie_rule v6 = rule("udp", "any", "2001:db8::1", "any", "53");
	struct nc_trie_rule net = rule("udp", "any", "192.0.2.0/24", "any", "32-63");
	struct nc_trie_rule net2 = rule("udp", "any", "192.0.3.0/24", "any", "any");

	ck_assert(ncd_rules_overlap(&lis, &exact));
	ck_assert(ncd_rules_overlap(&exact, &lis));
	ck_assert(!ncd_rules_overlap(&lis, &other_port));
	ck_assert(!ncd_rules_overlap(&lis, &tcp));
	ck_assert(ncd_rules_overlap(&any, &tcp));
	ck_assert(ncd_rules_overlap(&any, &v6));
	ck_assert(!ncd_rules_overlap(&lis, &v6));
	ck_assert(ncd_rules_overlap(&net, &lis));
	ck_assert(ncd_rules_overlap(&net, &other_port));
	ck_assert(!ncd_rules_overlap(&net, &net2));
}
END_TEST

/* ---- frames -------------------------------------------------------------- */

/* 24 bytes of transport: the ports (TCP's data offset, UDP's length) and a payload. */
static void
build(struct tf_frame *f, const struct nc_trie_key *k, uint16_t frag, bool v6frag)
{
	const uint32_t l4len = 24;

	tf_eth(f, tf_port_mac, 0, k->family == NC_TRIE_AF_INET ? 0x0800 : 0x86dd);
	if (k->family == NC_TRIE_AF_INET) {
		tf_ipv4(f, k->proto, frag, k->src.a, k->dst.a, l4len, 0);
	} else {
		/* A fragment header's M flag: the first fragment. */
		const uint8_t fh[8] = { k->proto, 0, 0, 1 };

		tf_ipv6(f, v6frag ? IPPROTO_FRAGMENT : k->proto, l4len + (v6frag ? 8 : 0), k->src.a,
			k->dst.a);
		if (v6frag)
			tf_put(f, fh, sizeof(fh));
	}
	tf_l4(f, k->proto, k->sport, k->dport, l4len - (k->proto == IPPROTO_TCP ? 20 : 8));
}

static struct nc_trie_rule
random_rule(uint64_t *seed)
{
	static const uint8_t protos[] = { IPPROTO_TCP, IPPROTO_UDP, IPPROTO_SCTP, IPPROTO_ICMP, 0 };
	struct nc_trie_rule r;
	uint64_t x = nc_rand(seed);

	memset(&r, 0, sizeof(r));
	r.family = (x & 3) == 0 ? NC_TRIE_AF_ANY : (x & 1) ? NC_TRIE_AF_INET : NC_TRIE_AF_INET6;
	r.proto = protos[(x >> 2) % 5];
	r.proto_mask = r.proto ? 0xff : 0;
	if (r.family != NC_TRIE_AF_ANY) {
		unsigned int bits = r.family == NC_TRIE_AF_INET ? 32 : 128;

		for (int i = 0; i < 16; i++) {
			/* Few distinct values, so random keys often fall inside. */
			r.src.a[i] = (uint8_t)(nc_rand(seed) & 1);
			r.dst.a[i] = (uint8_t)(nc_rand(seed) & 1);
		}
		r.src_len = (uint8_t)(nc_rand(seed) % 3 == 0 ? 0 : nc_rand(seed) % (bits + 1));
		r.dst_len = (uint8_t)(nc_rand(seed) % (bits + 1));
		for (unsigned int i = r.src_len; i < 128; i++)
			r.src.a[i / 8] &= (uint8_t)~(0x80 >> (i % 8));
		for (unsigned int i = r.dst_len; i < 128; i++)
			r.dst.a[i / 8] &= (uint8_t)~(0x80 >> (i % 8));
	}
	if (r.proto == IPPROTO_TCP || r.proto == IPPROTO_UDP || r.proto == IPPROTO_SCTP) {
		struct nc_trie_port *ps[2] = { &r.sport, &r.dport };

		for (int i = 0; i < 2; i++) {
			unsigned int plen = (unsigned int)(nc_rand(seed) % 17);
			uint16_t v = (uint16_t)(nc_rand(seed) & 0x0f0f);

			if (nc_rand(seed) & 1)
				continue;
			ps[i]->kind = (nc_rand(seed) & 1) ? NC_TRIE_PORT_MASK : NC_TRIE_PORT_RANGE;
			uint16_t mask = plen ? (uint16_t)(0xffffu << (16 - plen)) : 0;

			if (ps[i]->kind == NC_TRIE_PORT_MASK) {
				ps[i]->lo = v & mask;
				ps[i]->hi = mask;
			} else {
				ps[i]->lo = v & mask;
				ps[i]->hi = (uint16_t)((v & mask) | (uint16_t)~mask);
			}
		}
	}
	ck_assert_int_eq(nc_trie_rule_validate(&r), 0);
	return r;
}

START_TEST(nic_reading_agrees)
{
	uint64_t seed = 12345;
	unsigned long claimed = 0, plain = 0;

	for (int t = 0; t < 3000; t++) {
		struct nc_trie_rule r = random_rule(&seed);
		struct ncd_flow_pattern p[2];
		const char *why;
		int n = ncd_flow_translate(&r, p, &why);

		ck_assert_int_gt(n, 0);
		for (int j = 0; j < 40; j++) {
			struct nc_trie_key k;
			struct ncd_parsed parsed;
			struct tf_frame f;
			uint64_t x = nc_rand(&seed);
			uint16_t frag = (x & 7) == 0 ? 0x2000 : (x & 7) == 1 ? 0x0010 : 0;
			bool v6frag = (x & 7) == 2, nic = false, trie;

			if (j % 2 == 0) {
				nc_key_inside(&r, &k, &seed);
			} else {
				struct nc_trie_rule other = random_rule(&seed);

				nc_key_inside(&other, &k, &seed);
			}
			/* Random keys may carry any protocol: keep the ones a frame can. */
			if (k.proto != IPPROTO_TCP && k.proto != IPPROTO_UDP && k.proto != IPPROTO_SCTP &&
			    k.proto != IPPROTO_ICMP)
				k.proto = IPPROTO_UDP;
			build(&f, &k, k.family == NC_TRIE_AF_INET ? frag : 0,
			      k.family == NC_TRIE_AF_INET6 && v6frag);
			ck_assert_int_eq(ncd_parse(f.b, f.len, f.len, NULL, NCD_PARSE_CSUM_GOOD, &parsed),
					 NCD_PKT_OK);
			trie = nc_trie_rule_matches(&r, &parsed.key);
			for (int i = 0; i < n; i++)
				nic |= ncd_flow_match(p[i].items, f.b, f.len);
			/* Never a mark the classifier would not give. */
			ck_assert_msg(!nic || trie, "rule %d key %d: the pattern claims a frame the "
				      "rule does not match", t, j);
			claimed += nic;
			/* A plain frame (no fragment, no extension header): always marked. */
			if (!frag && !v6frag && trie) {
				ck_assert_msg(nic, "rule %d key %d: the pattern misses a plain frame", t, j);
				plain++;
			}
		}
	}
	ck_assert_uint_gt(claimed, 10000);
	ck_assert_uint_gt(plain, 10000);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("offload");
	TCase *tc = tcase_create("patterns");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, exact_udp4);
	tcase_add_test(tc, prefix_tcp6_range);
	tcase_add_test(tc, both_families);
	tcase_add_test(tc, no_ports);
	tcase_add_test(tc, not_expressible);
	tcase_add_test(tc, overlaps);
	tcase_add_test(tc, nic_reading_agrees);
	tcase_set_timeout(tc, 120);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
