/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * NAT's rewrite against a full recomputation: random packets of every
 * protocol with valid checksums are translated, and the result must carry
 * exactly the new fields, the old bytes everywhere else, and checksums that
 * a full computation finds right. Refusals must leave the frame untouched.
 */
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>

#include <check.h>

#include "frames.h"
#include "nat/nat_rewrite.h"
#include "packet/parse.h"

#define MAC tf_port_mac

struct pkt {
	uint8_t b[2048];
	uint32_t len;
	uint32_t l3, l4;               /* offsets */
	uint8_t family, proto;
};

static int
csum_at(uint8_t proto)
{
	return proto == IPPROTO_TCP ? 16 : proto == IPPROTO_ICMPV6 ? 2 :
	       proto == IPPROTO_ICMP ? 2 : 6;
}

/* The transport checksum a full computation gives (the field itself taken as 0). */
static uint16_t
l4_full(const struct pkt *p, const uint8_t *ip, const uint8_t *l4, uint32_t l4len)
{
	uint8_t tmp[2048];
	uint32_t s = 0, cover = l4len;
	int at = csum_at(p->proto);

	memcpy(tmp, l4, l4len);
	tf_wr16(tmp + at, 0);
	if (p->proto == IPPROTO_UDPLITE && tf_rd16(l4 + 4) != 0)
		cover = tf_rd16(l4 + 4);
	if (p->proto != IPPROTO_ICMP) {
		if (p->family == 4)
			s = tf_sum(ip + 12, 8);
		else
			s = tf_sum(ip + 8, 32);
		s += (l4len >> 16) + (l4len & 0xffff) + p->proto;
	}
	return tf_fold_not(s + tf_sum(tmp, cover));
}

/* A random packet with valid checksums: Ethernet (maybe a tag), IPv4 (maybe options) or IPv6. */
static void
build(struct pkt *p, uint8_t family, uint8_t proto, uint32_t paylen, bool udp_zero)
{
	uint8_t *ip, *l4;
	uint32_t l4len, hl = 8;

	memset(p, 0, sizeof(*p));
	memcpy(p->b, MAC, 6);
	p->b[6] = 2;
	p->b[11] = 1;
	p->l3 = 14;
	if (rand() & 1) {
		tf_wr16(p->b + 12, 0x8100);
		tf_wr16(p->b + 14, 42);
		p->l3 = 18;
	}
	tf_wr16(p->b + p->l3 - 2, family == 4 ? 0x0800 : 0x86dd);
	ip = p->b + p->l3;
	p->family = family;
	p->proto = proto;
	if (proto == IPPROTO_TCP)
		hl = 20;
	if (family == 4) {
		unsigned int opt = (rand() & 1) ? 4 * (1 + rand() % 3) : 0;

		ip[0] = (uint8_t)(0x40 | (5 + opt / 4));
		for (unsigned int i = 0; i < opt; i++)
			ip[20 + i] = 1;        /* NOP options */
		ip[8] = 64;
		ip[9] = proto;
		for (int i = 12; i < 20; i++)
			ip[i] = (uint8_t)rand();
		p->l4 = p->l3 + 20 + opt;
	} else {
		ip[0] = 0x60;
		ip[6] = proto;
		ip[7] = 64;
		for (int i = 8; i < 40; i++)
			ip[i] = (uint8_t)rand();
		p->l4 = p->l3 + 40;
	}
	l4 = p->b + p->l4;
	l4len = hl + paylen;
	for (uint32_t i = 0; i < l4len; i++)
		l4[i] = (uint8_t)rand();
	if (proto == IPPROTO_UDP)
		tf_wr16(l4 + 4, (uint16_t)l4len);
	if (proto == IPPROTO_UDPLITE)
		tf_wr16(l4 + 4, rand() & 1 ? 0 : 8);      /* coverage: all, or the header only */
	if (proto == IPPROTO_TCP)
		l4[12] = 0x50;
	if (family == 4) {
		tf_wr16(ip + 2, (uint16_t)(p->l4 - p->l3 + l4len));
		tf_wr16(ip + 6, 0);
		tf_wr16(ip + 10, 0);
		tf_wr16(ip + 10, tf_fold_not(tf_sum(ip, p->l4 - p->l3)));
	} else {
		tf_wr16(ip + 4, (uint16_t)l4len);
	}
	if (proto == IPPROTO_TCP || proto == IPPROTO_UDP || proto == IPPROTO_UDPLITE ||
	    proto == IPPROTO_ICMPV6 || proto == IPPROTO_ICMP) {
		uint16_t c = l4_full(p, ip, l4, l4len);

		if ((proto == IPPROTO_UDP || proto == IPPROTO_UDPLITE) && c == 0)
			c = 0xffff;
		tf_wr16(l4 + csum_at(proto), udp_zero ? 0 : c);
	}
	p->len = p->l4 + l4len;
}

static void
random_xlate(struct ncd_nat_xlate *x, bool ports)
{
	memset(x, 0, sizeof(*x));
	x->flags = (uint32_t)(rand() & (ports ? 0xf : NCD_NAT_ADDRS));
	if (x->flags == 0)
		x->flags = NCD_NAT_DST;
	for (int i = 0; i < 16; i++) {
		x->dst[i] = (uint8_t)rand();
		x->src[i] = (uint8_t)rand();
	}
	x->dport = (uint16_t)(1 + rand() % 65535);
	x->sport = (uint16_t)(1 + rand() % 65535);
}

/* What the rewrite must leave: the fields of x written, every other byte but the checksums as before. */
static void
check_translated(const struct pkt *in, const struct pkt *out, const struct ncd_nat_xlate *x,
		 bool udp_zero)
{
	const uint8_t *ip = out->b + out->l3, *l4 = out->b + out->l4;
	unsigned int alen = in->family == 4 ? 4 : 16, src = in->family == 4 ? 12 : 8;
	uint32_t l4len = in->len - in->l4;
	int at = csum_at(in->proto);
	bool has_csum = in->proto == IPPROTO_TCP || in->proto == IPPROTO_UDP ||
			in->proto == IPPROTO_UDPLITE || in->proto == IPPROTO_ICMPV6 ||
			in->proto == IPPROTO_ICMP;
	struct pkt expect = *in;

	if (x->flags & NCD_NAT_SRC)
		memcpy(expect.b + in->l3 + src, x->src, alen);
	if (x->flags & NCD_NAT_DST)
		memcpy(expect.b + in->l3 + src + alen, x->dst, alen);
	if (x->flags & NCD_NAT_SPORT)
		tf_wr16(expect.b + in->l4, x->sport);
	if (x->flags & NCD_NAT_DPORT)
		tf_wr16(expect.b + in->l4 + 2, x->dport);
	/* Checksums compared below: take them from the output. */
	if (in->family == 4)
		memcpy(expect.b + in->l3 + 10, ip + 10, 2);
	if (has_csum)
		memcpy(expect.b + in->l4 + at, l4 + at, 2);
	ck_assert_mem_eq(expect.b, out->b, in->len);
	if (in->family == 4)
		ck_assert_uint_eq(tf_fold_not(tf_sum(ip, in->l4 - in->l3)), 0);
	if (!has_csum)
		return;
	if (udp_zero && in->family == 4 && in->proto == IPPROTO_UDP) {
		ck_assert_uint_eq(tf_rd16(l4 + at), 0);
		return;
	}
	{
		uint16_t want = l4_full(out, ip, l4, l4len), got = tf_rd16(l4 + at);

		if (in->proto == IPPROTO_UDP || in->proto == IPPROTO_UDPLITE) {
			ck_assert_uint_ne(got, 0);
			if (want == 0)
				want = 0xffff;
		}
		ck_assert_msg(got == want, "proto %u family %u: checksum %04x, full computation %04x",
			      in->proto, in->family, got, want);
	}
}

START_TEST(random_packets_match_full_computation)
{
	static const uint8_t protos[] = { IPPROTO_TCP, IPPROTO_UDP, IPPROTO_UDPLITE, IPPROTO_ICMP,
					  IPPROTO_ICMPV6, 47 };

	srand(1);
	for (int n = 0; n < 20000; n++) {
		uint8_t family = rand() & 1 ? 4 : 6, proto = protos[rand() % 6];
		bool ports = proto == IPPROTO_TCP || proto == IPPROTO_UDP || proto == IPPROTO_UDPLITE;
		bool udp_zero = proto == IPPROTO_UDP && rand() % 4 == 0;
		struct pkt in, out;
		struct ncd_parsed pp;
		struct ncd_nat_xlate x;
		enum ncd_nat_result r;

		if (proto == IPPROTO_ICMPV6 && family == 4)
			proto = IPPROTO_ICMP;
		if (proto == IPPROTO_ICMP && family == 6)
			proto = IPPROTO_ICMPV6;
		build(&in, family, proto, (uint32_t)(rand() % 301), udp_zero);
		ck_assert_int_eq(ncd_parse(in.b, in.len, in.len, MAC, 0, &pp), NCD_PKT_OK);
		ck_assert_uint_eq(pp.l4_off, in.l4);
		random_xlate(&x, ports);
		out = in;
		r = ncd_nat_rewrite(out.b, out.len, &pp, &x, 0);
		ck_assert_int_eq(r, NCD_NAT_OK);
		check_translated(&in, &out, &x, udp_zero);
	}
}
END_TEST

/* Set a packet's transport checksum right again after its bytes changed. */
static void
refresh_l4(struct pkt *p)
{
	uint8_t *ip = p->b + p->l3, *l4 = p->b + p->l4;
	uint16_t c = l4_full(p, ip, l4, p->len - p->l4);

	tf_wr16(l4 + csum_at(p->proto), c == 0 ? 0xffff : c);
}

/* UDP (and UDP-Lite) whose new checksum sums to 0: written 0xffff, as 0 means "none". */
START_TEST(udp_checksum_never_becomes_zero)
{
	static const uint8_t protos[] = { IPPROTO_UDP, IPPROTO_UDPLITE };

	srand(4);
	for (int k = 0; k < 4; k++) {
		struct pkt in, out;
		struct ncd_parsed pp;
		struct ncd_nat_xlate x;
		uint8_t *last;
		uint32_t w;

		build(&in, k & 1 ? 6 : 4, protos[k / 2], 30, false);
		if (in.proto == IPPROTO_UDPLITE)
			tf_wr16(in.b + in.l4 + 4, 0);     /* coverage: all, so the last word counts */
		random_xlate(&x, true);
		last = in.b + in.len - 2;
		/* The payload word that makes the translated packet's checksum 0. */
		for (w = 0; w <= 0xffff; w++) {
			tf_wr16(last, (uint16_t)w);
			refresh_l4(&in);
			out = in;
			ck_assert_int_eq(ncd_parse(out.b, out.len, out.len, MAC, 0, &pp), NCD_PKT_OK);
			ck_assert_int_eq(ncd_nat_rewrite(out.b, out.len, &pp, &x, 0), NCD_NAT_OK);
			if (l4_full(&out, out.b + out.l3, out.b + out.l4, out.len - out.l4) == 0)
				break;
		}
		ck_assert_uint_le(w, 0xffff);
		ck_assert_uint_eq(tf_rd16(out.b + out.l4 + 6), 0xffff);
	}
}
END_TEST

START_TEST(refusals_leave_the_frame)
{
	struct pkt in, out;
	struct ncd_parsed pp;
	struct ncd_nat_xlate x;

	srand(2);
	/* Ports of a protocol without ports. */
	build(&in, 4, 47, 40, false);
	ck_assert_int_eq(ncd_parse(in.b, in.len, in.len, MAC, 0, &pp), NCD_PKT_OK);
	memset(&x, 0, sizeof(x));
	x.flags = NCD_NAT_DPORT | NCD_NAT_DST;
	x.dport = 80;
	out = in;
	ck_assert_int_eq(ncd_nat_rewrite(out.b, out.len, &pp, &x, 0), NCD_NAT_NO_PORTS);
	ck_assert_mem_eq(in.b, out.b, in.len);
	/* Headers beyond the bytes given (a multi-segment frame's first segment). */
	build(&in, 6, IPPROTO_TCP, 40, false);
	ck_assert_int_eq(ncd_parse(in.b, in.len, in.len, MAC, 0, &pp), NCD_PKT_OK);
	out = in;
	ck_assert_int_eq(ncd_nat_rewrite(out.b, in.l4 + 10, &pp, &x, 0), NCD_NAT_SHORT);
	ck_assert_mem_eq(in.b, out.b, in.len);
	/* An IPv6 UDP datagram without a checksum needs all of it to get one. */
	build(&in, 6, IPPROTO_UDP, 100, true);
	ck_assert_int_eq(ncd_parse(in.b, in.len, in.len, MAC, 0, &pp), NCD_PKT_OK);
	x.flags = NCD_NAT_DST;
	out = in;
	ck_assert_int_eq(ncd_nat_rewrite(out.b, in.len - 1, &pp, &x, 0), NCD_NAT_SHORT);
	ck_assert_mem_eq(in.b, out.b, in.len);
	ck_assert_int_eq(ncd_nat_rewrite(out.b, in.len, &pp, &x, 0), NCD_NAT_OK);
	check_translated(&in, &out, &x, false);
}
END_TEST

/* Fragments: addresses yes (the first one's checksum adjusted for the whole datagram), ports no. */
START_TEST(fragments)
{
	for (int n = 0; n < 100; n++) {
		struct pkt whole, first, later, out;
		struct ncd_parsed pp;
		struct ncd_nat_xlate x;
		uint32_t cut;

		srand((unsigned int)n);
		/* IPv6's fragment header: in the pcap test (tests/integration/test_nat.py). */
		build(&whole, 4, IPPROTO_UDP, 200, false);
		/* First fragment: MF set, the first 64 bytes of the payload. */
		cut = whole.l4 + 64;
		first = whole;
		first.len = cut;
		tf_wr16(first.b + first.l3 + 6, 0x2000);
		tf_wr16(first.b + first.l3 + 2, (uint16_t)(cut - first.l3));
		tf_wr16(first.b + first.l3 + 10, 0);
		tf_wr16(first.b + first.l3 + 10, tf_fold_not(tf_sum(first.b + first.l3, first.l4 - first.l3)));
		ck_assert_int_eq(ncd_parse(first.b, first.len, first.len, MAC, 0, &pp), NCD_PKT_OK);
		ck_assert_uint_eq(pp.frag, NCD_FRAG_FIRST);
		memset(&x, 0, sizeof(x));
		x.flags = NCD_NAT_DPORT;
		x.dport = 99;
		out = first;
		ck_assert_int_eq(ncd_nat_rewrite(out.b, out.len, &pp, &x, 0), NCD_NAT_FRAGMENT);
		ck_assert_mem_eq(first.b, out.b, first.len);
		x.flags = NCD_NAT_DST | NCD_NAT_SRC;
		memset(x.dst, 7, 4);
		memset(x.src, 9, 4);
		ck_assert_int_eq(ncd_nat_rewrite(out.b, out.len, &pp, &x, 0), NCD_NAT_OK);
		ck_assert_uint_eq(tf_fold_not(tf_sum(out.b + out.l3, out.l4 - out.l3)), 0);
		/* Reassembled with the rest of the datagram, the checksum is right. */
		memcpy(whole.b + whole.l3 + 12, out.b + out.l3 + 12, 8);
		memcpy(whole.b + whole.l4, out.b + out.l4, 8);
		ck_assert_uint_eq(tf_rd16(whole.b + whole.l4 + 6),
				  l4_full(&whole, whole.b + whole.l3, whole.b + whole.l4,
					  whole.len - whole.l4));
		/* A later fragment: only the IP header changes. */
		later = first;
		tf_wr16(later.b + later.l3 + 6, 8);       /* offset 64 bytes, no MF */
		tf_wr16(later.b + later.l3 + 10, 0);
		tf_wr16(later.b + later.l3 + 10, tf_fold_not(tf_sum(later.b + later.l3, later.l4 - later.l3)));
		ck_assert_int_eq(ncd_parse(later.b, later.len, later.len, MAC, 0, &pp), NCD_PKT_OK);
		ck_assert_uint_eq(pp.frag, NCD_FRAG_LATER);
		out = later;
		ck_assert_int_eq(ncd_nat_rewrite(out.b, out.len, &pp, &x, 0), NCD_NAT_OK);
		ck_assert_mem_eq(out.b + out.l4, later.b + later.l4, later.len - later.l4);
		ck_assert_uint_eq(tf_fold_not(tf_sum(out.b + out.l3, out.l4 - out.l3)), 0);
	}
}
END_TEST

START_TEST(reverse_undoes)
{
	srand(3);
	for (int n = 0; n < 2000; n++) {
		struct pkt in, out, reply;
		struct ncd_parsed pp, rp;
		struct ncd_nat_xlate x, rev;
		struct nc_trie_key rk;
		uint8_t family = rand() & 1 ? 4 : 6;
		unsigned int alen = family == 4 ? 4 : 16, src = family == 4 ? 12 : 8;

		build(&in, family, IPPROTO_TCP, 20, false);
		ck_assert_int_eq(ncd_parse(in.b, in.len, in.len, MAC, 0, &pp), NCD_PKT_OK);
		random_xlate(&x, true);
		if (family == 4) {
			memset(x.dst + 4, 0, 12);
			memset(x.src + 4, 0, 12);
		}
		out = in;
		ck_assert_int_eq(ncd_nat_rewrite(out.b, out.len, &pp, &x, 0), NCD_NAT_OK);
		/* The reply: the translated packet with its addresses and ports swapped. */
		reply = out;
		memcpy(reply.b + reply.l3 + src, out.b + out.l3 + src + alen, alen);
		memcpy(reply.b + reply.l3 + src + alen, out.b + out.l3 + src, alen);
		tf_wr16(reply.b + reply.l4, tf_rd16(out.b + out.l4 + 2));
		tf_wr16(reply.b + reply.l4 + 2, tf_rd16(out.b + out.l4));
		if (family == 4) {
			tf_wr16(reply.b + reply.l3 + 10, 0);
			tf_wr16(reply.b + reply.l3 + 10,
			     tf_fold_not(tf_sum(reply.b + reply.l3, reply.l4 - reply.l3)));
		}
		ck_assert_int_eq(ncd_parse(reply.b, reply.len, reply.len, MAC, 0, &rp), NCD_PKT_OK);
		ncd_nat_reply_key(&pp.key, &x, &rk);
		ck_assert_mem_eq(&rk, &rp.key, sizeof(rk));
		ncd_nat_reverse_of(&pp.key, &x, &rev);
		ck_assert_int_eq(ncd_nat_rewrite(reply.b, reply.len, &rp, &rev, 0), NCD_NAT_OK);
		/* Back at the client: from what it sent to, to where it sent from. */
		ck_assert_mem_eq(reply.b + reply.l3 + src, in.b + in.l3 + src + alen, alen);
		ck_assert_mem_eq(reply.b + reply.l3 + src + alen, in.b + in.l3 + src, alen);
		ck_assert_uint_eq(tf_rd16(reply.b + reply.l4), tf_rd16(in.b + in.l4 + 2));
		ck_assert_uint_eq(tf_rd16(reply.b + reply.l4 + 2), tf_rd16(in.b + in.l4));
	}
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("nat");
	TCase *tc = tcase_create("rewrite");
	SRunner *sr;
	int failed;

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, random_packets_match_full_computation);
	tcase_add_test(tc, udp_checksum_never_becomes_zero);
	tcase_add_test(tc, refusals_leave_the_frame);
	tcase_add_test(tc, fragments);
	tcase_add_test(tc, reverse_undoes);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
