/* SPDX-License-Identifier: BSD-3-Clause */
/* The packet parser on hand-built frames, and on random bytes (run under ASan too). */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include <check.h>

#include "frames.h"
#include "nc_trie_tools.h"
#include "packet/parse.h"

#define MAC tf_port_mac

static const uint8_t SRC4[4] = { 203, 0, 113, 1 }, DST4[4] = { 192, 0, 2, 1 };

/* IPv4 header (checksum right) + 8 bytes of ports and length + payload, whatever the
 * protocol. Returns the IP header's offset. */
static uint32_t
ipv4(struct tf_frame *f, uint8_t proto, uint16_t frag, uint16_t sport, uint16_t dport,
     uint32_t payload)
{
	uint32_t off = tf_ipv4(f, proto, frag, SRC4, DST4, (uint16_t)(8 + payload), 0);

	tf_l4(f, IPPROTO_UDP, sport, dport, payload);
	return off;
}

static enum ncd_verdict
P(const struct tf_frame *f, struct ncd_parsed *out)
{
	return ncd_parse(f->b, f->len, f->len, MAC, 0, out);
}

/*
 * The header checksum against the test's own RFC 1071 sum (16-bit
 * big-endian words), on random headers of every length, half of them with
 * the checksum made right: BAD_CSUM exactly when that sum is not all ones.
 */
START_TEST(ipv4_checksum_random)
{
	uint64_t s = 11;
	struct ncd_parsed p;

	for (int i = 0; i < 100000; i++) {
		struct tf_frame f;
		unsigned int words = (unsigned int)(nc_rand(&s) % 11);
		uint32_t o, hl = 20 + 4 * words;
		enum ncd_verdict v;
		bool good;

		tf_eth(&f, MAC, 0, 0x0800);
		o = ipv4(&f, IPPROTO_UDP, 0, 1, 53, 4);
		/* Options: room for them, then random bytes over the header but version and lengths. */
		memmove(f.b + o + hl, f.b + o + 20, f.len - o - 20);
		f.len += hl - 20;
		for (uint32_t j = 4; j < hl; j++)
			f.b[o + j] = (uint8_t)nc_rand(&s);
		f.b[o] = (uint8_t)(0x40 | (hl / 4));
		tf_wr16(f.b + o + 2, (uint16_t)(f.len - o));
		f.b[o + 6] = 0;                       /* not a fragment */
		f.b[o + 7] = 0;
		if (i % 2)
			tf_ipv4_csum(&f, o);
		good = tf_fold_not(tf_sum(f.b + o, hl)) == 0;
		v = P(&f, &p);
		ck_assert_msg((v == NCD_PKT_BAD_CSUM) == !good, "header %d (%u bytes): verdict %d, "
			      "sum right %d", i, hl, v, good);
	}
}
END_TEST

START_TEST(ipv4_udp_and_vlans)
{
	struct tf_frame f;
	struct ncd_parsed p;

	for (int tags = 0; tags <= 2; tags++) {
		tf_eth(&f, MAC, tags, 0x0800);
		ipv4(&f, IPPROTO_UDP, 0, 1234, 53, 10);
		ck_assert_int_eq(P(&f, &p), NCD_PKT_OK);
		ck_assert_uint_eq(p.l2_len, 14 + 4 * tags);
		ck_assert_uint_eq(p.l3_len, 38);
		ck_assert_uint_eq(p.key.family, NC_TRIE_AF_INET);
		ck_assert_uint_eq(p.key.proto, IPPROTO_UDP);
		ck_assert_uint_eq(p.key.sport, 1234);
		ck_assert_uint_eq(p.key.dport, 53);
		ck_assert_uint_eq(p.key.flags, 0);
		ck_assert_uint_eq(p.key.dst.v4, htonl(0xc0000201));
	}
	tf_eth(&f, MAC, 3, 0x0800);   /* a third tag: not ours to look into */
	ipv4(&f, IPPROTO_UDP, 0, 1, 2, 0);
	ck_assert_int_eq(P(&f, &p), NCD_PKT_NOT_IP);
	/* Padding after the IP packet: l3_len tells where to trim. */
	tf_eth(&f, MAC, 0, 0x0800);
	ipv4(&f, IPPROTO_UDP, 0, 1, 2, 0);
	f.len += 20;
	ck_assert_int_eq(P(&f, &p), NCD_PKT_OK);
	ck_assert_uint_eq(p.l3_len, 28);
}
END_TEST

START_TEST(mac_filtering)
{
	static const uint8_t other[6] = { 2, 0, 0, 0, 0, 0x99 }, bcast[6] = { 0xff, 0xff, 0xff,
									    0xff, 0xff, 0xff };
	static const uint8_t mcast[6] = { 0x01, 0x00, 0x5e, 0, 0, 1 };
	struct tf_frame f;
	struct ncd_parsed p;

	tf_eth(&f, other, 0, 0x0800);
	ipv4(&f, IPPROTO_UDP, 0, 1, 53, 0);
	ck_assert_int_eq(P(&f, &p), NCD_PKT_OTHERHOST);
	tf_eth(&f, bcast, 0, 0x0800);
	ipv4(&f, IPPROTO_UDP, 0, 1, 53, 0);
	ck_assert_int_eq(P(&f, &p), NCD_PKT_OK);
	tf_eth(&f, mcast, 0, 0x0800);
	ipv4(&f, IPPROTO_UDP, 0, 1, 53, 0);
	ck_assert_int_eq(P(&f, &p), NCD_PKT_OK);
	tf_eth(&f, MAC, 0, 0x0806);
	f.len += 28;
	ck_assert_int_eq(P(&f, &p), NCD_PKT_NOT_IP);
}
END_TEST

START_TEST(ipv4_checks)
{
	struct tf_frame f;
	struct ncd_parsed p;
	uint32_t o;

	tf_eth(&f, MAC, 0, 0x0800);
	o = ipv4(&f, IPPROTO_UDP, 0, 1, 53, 4);
	f.b[o + 8] = 1;                       /* ttl changed, checksum not */
	ck_assert_int_eq(P(&f, &p), NCD_PKT_BAD_CSUM);
	/* The NIC's verdict replaces ours. */
	ck_assert_int_eq(ncd_parse(f.b, f.len, f.len, MAC, NCD_PARSE_CSUM_GOOD, &p), NCD_PKT_OK);
	tf_ipv4_csum(&f, o);
	ck_assert_int_eq(ncd_parse(f.b, f.len, f.len, MAC, NCD_PARSE_CSUM_BAD, &p), NCD_PKT_BAD_CSUM);
	f.b[o] = 0x44;                        /* ihl 4 */
	ck_assert_int_eq(P(&f, &p), NCD_PKT_BAD_IHL);
	f.b[o] = 0x65;                        /* version 6 under 0x0800 */
	ck_assert_int_eq(P(&f, &p), NCD_PKT_BAD_VERSION);
	f.b[o] = 0x45;
	f.b[o + 2] = 0x10;                    /* total length past the frame */
	tf_ipv4_csum(&f, o);
	ck_assert_int_eq(P(&f, &p), NCD_PKT_BAD_LEN);
	f.b[o + 2] = 0;
	f.b[o + 3] = 19;                      /* below the header */
	tf_ipv4_csum(&f, o);
	ck_assert_int_eq(P(&f, &p), NCD_PKT_BAD_LEN);
	f.b[o + 3] = 22;                      /* ports cut short */
	tf_ipv4_csum(&f, o);
	ck_assert_int_eq(P(&f, &p), NCD_PKT_TRUNC_L4);
	f.len = o + 12;
	ck_assert_int_eq(P(&f, &p), NCD_PKT_TRUNC_L3);
	f.len = 13;
	ck_assert_int_eq(P(&f, &p), NCD_PKT_TRUNC_L2);
	/* ihl > 5: options are skipped to the ports. */
	tf_eth(&f, MAC, 0, 0x0800);
	o = f.len;
	ipv4(&f, IPPROTO_TCP, 0, 7, 8, 0);
	memmove(f.b + o + 24, f.b + o + 20, 8);
	memset(f.b + o + 20, 1, 4);
	f.b[o] = 0x46;
	f.b[o + 3] = 32;
	f.len += 4;
	tf_ipv4_csum(&f, o);
	ck_assert_int_eq(P(&f, &p), NCD_PKT_OK);
	ck_assert_uint_eq(p.key.sport, 7);
	ck_assert_uint_eq(p.key.dport, 8);
}
END_TEST

START_TEST(fragments_and_other_protocols)
{
	struct tf_frame f;
	struct ncd_parsed p;

	tf_eth(&f, MAC, 0, 0x0800);
	ipv4(&f, IPPROTO_UDP, 0x2000, 1, 53, 0);      /* MF: first fragment */
	ck_assert_int_eq(P(&f, &p), NCD_PKT_OK);
	ck_assert_uint_eq(p.key.flags, NC_TRIE_KEY_F_NOPORTS);
	ck_assert_uint_eq(p.key.dport, 0);
	tf_eth(&f, MAC, 0, 0x0800);
	ipv4(&f, IPPROTO_UDP, 0x0003, 1, 53, 0);      /* later fragment */
	ck_assert_int_eq(P(&f, &p), NCD_PKT_OK);
	ck_assert_uint_eq(p.key.flags, NC_TRIE_KEY_F_NOPORTS);
	tf_eth(&f, MAC, 0, 0x0800);
	ipv4(&f, IPPROTO_ICMP, 0, 0x0800, 0, 0);
	ck_assert_int_eq(P(&f, &p), NCD_PKT_OK);
	ck_assert_uint_eq(p.key.flags, NC_TRIE_KEY_F_NOPORTS);
	ck_assert_uint_eq(p.key.proto, IPPROTO_ICMP);
	for (int i = 0; i < 3; i++) {
		static const uint8_t protos[] = { IPPROTO_TCP, IPPROTO_SCTP, IPPROTO_UDPLITE };

		tf_eth(&f, MAC, 0, 0x0800);
		ipv4(&f, protos[i], 0, 100, 200, 0);
		ck_assert_int_eq(P(&f, &p), NCD_PKT_OK);
		ck_assert_uint_eq(p.key.dport, 200);
	}
}
END_TEST

static void
ipv6_hdr(struct tf_frame *f, uint8_t nh, uint16_t plen)
{
	uint8_t src[16], dst[16];

	inet_pton(AF_INET6, "2001:db8::99", src);
	inet_pton(AF_INET6, "2001:db8::1", dst);
	tf_ipv6(f, nh, plen, src, dst);
}

/*
 * Source routes: IPv4 LSRR and SSRR (after a NOP) are flagged, other
 * options are not; IPv6 routing header 0 is, wherever it is in the chain
 * (after a mobility header too), and routing header 2 is not.
 */
START_TEST(source_routes)
{
	static const struct {
		uint8_t opt[4];
		uint8_t flagged;
	} v4[] = {
		{ { 131, 3, 4, 0 }, 1 },       /* LSRR */
		{ { 1, 137, 3, 0 }, 1 },       /* NOP, SSRR */
		{ { 7, 3, 4, 0 }, 0 },         /* record route */
		{ { 1, 1, 1, 1 }, 0 },
		{ { 0, 131, 3, 0 }, 0 },       /* after the end of the list */
	};
	struct tf_frame f;
	struct ncd_parsed p;
	uint8_t ext[8] = { 0 };

	for (unsigned int i = 0; i < sizeof(v4) / sizeof(v4[0]); i++) {
		uint32_t o;

		tf_eth(&f, MAC, 0, 0x0800);
		o = tf_ipv4(&f, IPPROTO_UDP, 0, SRC4, DST4, 8, 1);
		memcpy(f.b + o + 20, v4[i].opt, 4);
		tf_ipv4_csum(&f, o);
		tf_l4(&f, IPPROTO_UDP, 7, 9, 0);
		ck_assert_int_eq(P(&f, &p), NCD_PKT_OK);
		ck_assert_uint_eq(p.source_route, v4[i].flagged);
	}
	for (unsigned int type = 0; type < 3; type += 2) {
		tf_eth(&f, MAC, 0, 0x86dd);
		ipv6_hdr(&f, 135, 24);
		ext[0] = IPPROTO_ROUTING;
		tf_put(&f, ext, 8);
		ext[0] = IPPROTO_UDP;
		ext[2] = (uint8_t)type;
		tf_put(&f, ext, 8);
		tf_put16(&f, 7);
		tf_put16(&f, 9);
		f.len += 4;
		ck_assert_int_eq(P(&f, &p), NCD_PKT_OK);
		ck_assert_uint_eq(p.source_route, type == 0);
	}
	/* The fast path's frame: none. */
	tf_eth(&f, MAC, 0, 0x0800);
	ipv4(&f, IPPROTO_UDP, 0, 7, 9, 0);
	p.source_route = 1;
	ck_assert_int_eq(P(&f, &p), NCD_PKT_OK);
	ck_assert_uint_eq(p.source_route, 0);
}
END_TEST

START_TEST(ipv6_and_extensions)
{
	struct tf_frame f;
	struct ncd_parsed p;
	uint8_t ext[8] = { 0 };

	tf_eth(&f, MAC, 1, 0x86dd);
	ipv6_hdr(&f, IPPROTO_TCP, 8);
	tf_put16(&f, 40000);
	tf_put16(&f, 443);
	f.len += 4;
	ck_assert_int_eq(P(&f, &p), NCD_PKT_OK);
	ck_assert_uint_eq(p.key.family, NC_TRIE_AF_INET6);
	ck_assert_uint_eq(p.key.dport, 443);
	ck_assert_uint_eq(p.l3_len, 48);
	ck_assert_uint_eq(p.key.dst.a[15], 1);
	/* Hop-by-hop, then destination options, then UDP. */
	tf_eth(&f, MAC, 0, 0x86dd);
	ipv6_hdr(&f, IPPROTO_HOPOPTS, 24);
	ext[0] = IPPROTO_DSTOPTS;
	tf_put(&f, ext, 8);
	ext[0] = IPPROTO_UDP;
	tf_put(&f, ext, 8);
	tf_put16(&f, 5);
	tf_put16(&f, 6);
	f.len += 4;
	ck_assert_int_eq(P(&f, &p), NCD_PKT_OK);
	ck_assert_uint_eq(p.key.proto, IPPROTO_UDP);
	ck_assert_uint_eq(p.key.dport, 6);
	/* A fragment header: no ports. */
	tf_eth(&f, MAC, 0, 0x86dd);
	ipv6_hdr(&f, IPPROTO_FRAGMENT, 16);
	ext[0] = IPPROTO_TCP;
	ext[3] = 1;
	tf_put(&f, ext, 8);
	f.len += 8;
	ck_assert_int_eq(P(&f, &p), NCD_PKT_OK);
	ck_assert_uint_eq(p.key.flags, NC_TRIE_KEY_F_NOPORTS);
	ck_assert_uint_eq(p.key.proto, IPPROTO_TCP);
	ck_assert_uint_eq(p.frag, NCD_FRAG_FIRST);
	ck_assert_uint_eq(p.frag_hdr, 14 + 40);
	/*
	 * A later fragment: what follows its header is the middle of the datagram, never walked
	 * as headers (here it would read as a destination options header past the payload).
	 */
	tf_eth(&f, MAC, 0, 0x86dd);
	ipv6_hdr(&f, IPPROTO_FRAGMENT, 16);
	ext[0] = IPPROTO_DSTOPTS;
	ext[2] = 0x05;                                 /* offset 80 bytes */
	ext[3] = 0;
	tf_put(&f, ext, 8);
	memset(f.b + f.len, 0xff, 8);
	f.len += 8;
	ck_assert_int_eq(P(&f, &p), NCD_PKT_OK);
	ck_assert_uint_eq(p.frag, NCD_FRAG_LATER);
	ck_assert_uint_eq(p.key.flags, NC_TRIE_KEY_F_NOPORTS);
	ck_assert_uint_eq(p.key.proto, IPPROTO_DSTOPTS);
	ck_assert_uint_eq(p.l3_len, 40 + 16);
	ext[2] = 0;
	/* Extension header beyond the payload length. */
	tf_eth(&f, MAC, 0, 0x86dd);
	ipv6_hdr(&f, IPPROTO_DSTOPTS, 4);
	f.len += 8;
	ck_assert_int_eq(P(&f, &p), NCD_PKT_BAD_EXT);
	/* Payload length beyond the frame, and a zero one. */
	tf_eth(&f, MAC, 0, 0x86dd);
	ipv6_hdr(&f, IPPROTO_UDP, 100);
	f.len += 8;
	ck_assert_int_eq(P(&f, &p), NCD_PKT_BAD_LEN);
	f.b[14 + 4] = f.b[14 + 5] = 0;
	ck_assert_int_eq(P(&f, &p), NCD_PKT_BAD_LEN);
	/* Headers past what the caller made contiguous: not malformed, just deep. */
	tf_eth(&f, MAC, 0, 0x86dd);
	ipv6_hdr(&f, IPPROTO_DSTOPTS, 24);
	ext[0] = IPPROTO_UDP;
	ext[1] = 1;
	tf_put(&f, ext, 8);
	f.len += 16;
	ck_assert_int_eq(ncd_parse(f.b, 14 + 40 + 4, f.len, MAC, 0, &p), NCD_PKT_TOO_DEEP);
}
END_TEST

/*
 * The fast path against the general parser: frames the fast path would
 * take (untagged IPv4, TCP, UDP, UDP-Lite or SCTP), each with a few of its
 * first 42 bytes changed at random (checksum, lengths, MAC, ports...), with
 * the NIC's checksum flags and a multi-segment frame's shorter avail at
 * random: the same verdict, and for OK the same key and lengths.
 */
START_TEST(fast_path_agrees)
{
	static const uint8_t protos[] = { IPPROTO_TCP, IPPROTO_UDP, IPPROTO_UDPLITE, IPPROTO_SCTP };
	uint64_t s = 0xfa57;
	unsigned int ok = 0;

	for (int i = 0; i < 200000; i++) {
		struct ncd_parsed p, q;
		struct tf_frame f;
		enum ncd_verdict v;
		uint32_t avail, o;
		unsigned int flags = (unsigned int)(nc_rand(&s) % 4);

		tf_eth(&f, MAC, 0, 0x0800);
		o = tf_ipv4(&f, protos[i % 4], 0, SRC4, DST4, (uint16_t)(8 + i % 24), 0);
		tf_l4(&f, IPPROTO_UDP, (uint16_t)i, 53, (uint32_t)(i % 24));
		unsigned int flips = (unsigned int)(nc_rand(&s) % 4);

		for (unsigned int k = flips; k > 0; k--)
			f.b[nc_rand(&s) % (o + 28)] ^= (uint8_t)(1u << (nc_rand(&s) % 8));
		avail = nc_rand(&s) % 8 ? f.len : (uint32_t)(nc_rand(&s) % (f.len + 1));
		/* And it takes what it is for: a frame left whole and right. */
		if (flips == 0 && avail == f.len && !(flags & NCD_PARSE_CSUM_BAD))
			ck_assert(ncd_parse_fast(f.b, avail, f.len, MAC, flags, &p));
		memset(&p, 0x5a, sizeof(p));
		memset(&q, 0xa5, sizeof(q));
		v = ncd_parse(f.b, avail, f.len, MAC, flags, &p);
		ck_assert_int_eq(v, ncd_parse_slow(f.b, avail, f.len, MAC, flags, &q));
		if (v != NCD_PKT_OK)
			continue;
		ok++;
		ck_assert(memcmp(&p.key, &q.key, sizeof(p.key)) == 0);
		ck_assert(p.l3_len == q.l3_len && p.l2_len == q.l2_len && p.l4_off == q.l4_off &&
			  p.frag_hdr == q.frag_hdr && p.frag == q.frag);
	}
	/* A quarter are left as they were: OK but for a short avail. */
	ck_assert_uint_gt(ok, 40000);
}
END_TEST

/* Random and truncated frames: any verdict, but no read past the bytes given (ASan). */
START_TEST(random_bytes)
{
	uint64_t s = 0x5001;
	struct ncd_parsed p;

	for (int i = 0; i < 200000; i++) {
		uint32_t n = (uint32_t)(nc_rand(&s) % 128);
		uint8_t *b = malloc(n ? n : 1);
		enum ncd_verdict v;

		for (uint32_t j = 0; j < n; j++)
			b[j] = (uint8_t)nc_rand(&s);
		if (n >= 14) {
			memcpy(b, MAC, 6);
			b[12] = (uint8_t[]){ 0x08, 0x86, 0x81 }[i % 3];
			b[13] = (uint8_t[]){ 0x00, 0xdd, 0x00 }[i % 3];
			if (n > 14)
				b[14] = (uint8_t)((i % 2 ? 0x45 : 0x60) | (b[14] & 0x0f));
		}
		v = ncd_parse(b, n, n + (uint32_t)(nc_rand(&s) % 64), MAC, 0, &p);
		ck_assert_int_lt(v, NCD_PKT_NVERDICTS);
		if (v == NCD_PKT_OK)
			ck_assert(p.key.family == NC_TRIE_AF_INET || p.key.family == NC_TRIE_AF_INET6);
		free(b);
	}
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("parse");
	TCase *tc = tcase_create("frames");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, ipv4_udp_and_vlans);
	tcase_add_test(tc, mac_filtering);
	tcase_add_test(tc, ipv4_checks);
	tcase_add_test(tc, ipv4_checksum_random);
	tcase_add_test(tc, fragments_and_other_protocols);
	tcase_add_test(tc, ipv6_and_extensions);
	tcase_add_test(tc, source_routes);
	tcase_add_test(tc, random_bytes);
	tcase_add_test(tc, fast_path_agrees);
	tcase_set_timeout(tc, 120);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
