/* SPDX-License-Identifier: BSD-3-Clause */
/* The packet parser on hand-built frames, and on random bytes (run under ASan too). */
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include <check.h>

#include "nc_trie_tools.h"
#include "datapath/parse.h"

static const uint8_t MAC[6] = { 0x02, 0x70, 0x63, 0x61, 0x70, 0x00 };

struct frame {
	uint8_t b[2048];
	uint32_t len;
};

static void
put(struct frame *f, const void *p, uint32_t n)
{
	memcpy(f->b + f->len, p, n);
	f->len += n;
}

static void
put16(struct frame *f, uint16_t v)
{
	uint8_t b[2] = { (uint8_t)(v >> 8), (uint8_t)v };

	put(f, b, 2);
}

static void
eth(struct frame *f, const uint8_t *dst, int tags, uint16_t type)
{
	static const uint8_t src[6] = { 2, 0, 0, 0, 0, 1 };

	f->len = 0;
	put(f, dst, 6);
	put(f, src, 6);
	for (int i = 0; i < tags; i++) {
		put16(f, i == 0 && tags > 1 ? 0x88a8 : 0x8100);
		put16(f, (uint16_t)(10 + i));
	}
	put16(f, type);
}

static uint16_t
csum(const uint8_t *h, unsigned int len)
{
	uint32_t s = 0;

	for (unsigned int i = 0; i < len; i += 2)
		s += (uint32_t)(h[i] << 8 | h[i + 1]);
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)~s;
}

/* IPv4 header (checksum right) + UDP ports + payload. Returns the IP header's offset. */
static uint32_t
ipv4(struct frame *f, uint8_t proto, uint16_t frag, uint16_t sport, uint16_t dport,
     uint32_t payload)
{
	uint32_t off = f->len;
	uint8_t h[20] = { 0x45, 0, 0, 0, 0, 1, (uint8_t)(frag >> 8), (uint8_t)frag, 64, proto };
	uint16_t tot = (uint16_t)(20 + 8 + payload), c;

	h[2] = (uint8_t)(tot >> 8);
	h[3] = (uint8_t)tot;
	inet_pton(AF_INET, "203.0.113.1", h + 12);
	inet_pton(AF_INET, "192.0.2.1", h + 16);
	c = csum(h, 20);
	h[10] = (uint8_t)(c >> 8);
	h[11] = (uint8_t)c;
	put(f, h, 20);
	put16(f, sport);
	put16(f, dport);
	put16(f, (uint16_t)(8 + payload));
	put16(f, 0);
	memset(f->b + f->len, 'x', payload);
	f->len += payload;
	return off;
}

static void
refresh_csum(struct frame *f, uint32_t off)
{
	uint16_t c;

	f->b[off + 10] = f->b[off + 11] = 0;
	c = csum(f->b + off, (f->b[off] & 0xf) * 4u);
	f->b[off + 10] = (uint8_t)(c >> 8);
	f->b[off + 11] = (uint8_t)c;
}

static enum ncd_verdict
P(const struct frame *f, struct ncd_parsed *out)
{
	return ncd_parse(f->b, f->len, f->len, MAC, 0, out);
}

START_TEST(ipv4_udp_and_vlans)
{
	struct frame f;
	struct ncd_parsed p;

	for (int tags = 0; tags <= 2; tags++) {
		eth(&f, MAC, tags, 0x0800);
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
	eth(&f, MAC, 3, 0x0800);   /* a third tag: not ours to look into */
	ipv4(&f, IPPROTO_UDP, 0, 1, 2, 0);
	ck_assert_int_eq(P(&f, &p), NCD_PKT_NOT_IP);
	/* Padding after the IP packet: l3_len tells where to trim. */
	eth(&f, MAC, 0, 0x0800);
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
	struct frame f;
	struct ncd_parsed p;

	eth(&f, other, 0, 0x0800);
	ipv4(&f, IPPROTO_UDP, 0, 1, 53, 0);
	ck_assert_int_eq(P(&f, &p), NCD_PKT_OTHERHOST);
	eth(&f, bcast, 0, 0x0800);
	ipv4(&f, IPPROTO_UDP, 0, 1, 53, 0);
	ck_assert_int_eq(P(&f, &p), NCD_PKT_OK);
	eth(&f, mcast, 0, 0x0800);
	ipv4(&f, IPPROTO_UDP, 0, 1, 53, 0);
	ck_assert_int_eq(P(&f, &p), NCD_PKT_OK);
	eth(&f, MAC, 0, 0x0806);
	f.len += 28;
	ck_assert_int_eq(P(&f, &p), NCD_PKT_NOT_IP);
}
END_TEST

START_TEST(ipv4_checks)
{
	struct frame f;
	struct ncd_parsed p;
	uint32_t o;

	eth(&f, MAC, 0, 0x0800);
	o = ipv4(&f, IPPROTO_UDP, 0, 1, 53, 4);
	f.b[o + 8] = 1;                       /* ttl changed, checksum not */
	ck_assert_int_eq(P(&f, &p), NCD_PKT_BAD_CSUM);
	/* The NIC's verdict replaces ours. */
	ck_assert_int_eq(ncd_parse(f.b, f.len, f.len, MAC, NCD_PARSE_CSUM_GOOD, &p), NCD_PKT_OK);
	refresh_csum(&f, o);
	ck_assert_int_eq(ncd_parse(f.b, f.len, f.len, MAC, NCD_PARSE_CSUM_BAD, &p), NCD_PKT_BAD_CSUM);
	f.b[o] = 0x44;                        /* ihl 4 */
	ck_assert_int_eq(P(&f, &p), NCD_PKT_BAD_IHL);
	f.b[o] = 0x65;                        /* version 6 under 0x0800 */
	ck_assert_int_eq(P(&f, &p), NCD_PKT_BAD_VERSION);
	f.b[o] = 0x45;
	f.b[o + 2] = 0x10;                    /* total length past the frame */
	refresh_csum(&f, o);
	ck_assert_int_eq(P(&f, &p), NCD_PKT_BAD_LEN);
	f.b[o + 2] = 0;
	f.b[o + 3] = 19;                      /* below the header */
	refresh_csum(&f, o);
	ck_assert_int_eq(P(&f, &p), NCD_PKT_BAD_LEN);
	f.b[o + 3] = 22;                      /* ports cut short */
	refresh_csum(&f, o);
	ck_assert_int_eq(P(&f, &p), NCD_PKT_TRUNC_L4);
	f.len = o + 12;
	ck_assert_int_eq(P(&f, &p), NCD_PKT_TRUNC_L3);
	f.len = 13;
	ck_assert_int_eq(P(&f, &p), NCD_PKT_TRUNC_L2);
	/* ihl > 5: options are skipped to the ports. */
	eth(&f, MAC, 0, 0x0800);
	o = f.len;
	ipv4(&f, IPPROTO_TCP, 0, 7, 8, 0);
	memmove(f.b + o + 24, f.b + o + 20, 8);
	memset(f.b + o + 20, 1, 4);
	f.b[o] = 0x46;
	f.b[o + 3] = 32;
	f.len += 4;
	refresh_csum(&f, o);
	ck_assert_int_eq(P(&f, &p), NCD_PKT_OK);
	ck_assert_uint_eq(p.key.sport, 7);
	ck_assert_uint_eq(p.key.dport, 8);
}
END_TEST

START_TEST(fragments_and_other_protocols)
{
	struct frame f;
	struct ncd_parsed p;

	eth(&f, MAC, 0, 0x0800);
	ipv4(&f, IPPROTO_UDP, 0x2000, 1, 53, 0);      /* MF: first fragment */
	ck_assert_int_eq(P(&f, &p), NCD_PKT_OK);
	ck_assert_uint_eq(p.key.flags, NC_TRIE_KEY_F_NOPORTS);
	ck_assert_uint_eq(p.key.dport, 0);
	eth(&f, MAC, 0, 0x0800);
	ipv4(&f, IPPROTO_UDP, 0x0003, 1, 53, 0);      /* later fragment */
	ck_assert_int_eq(P(&f, &p), NCD_PKT_OK);
	ck_assert_uint_eq(p.key.flags, NC_TRIE_KEY_F_NOPORTS);
	eth(&f, MAC, 0, 0x0800);
	ipv4(&f, IPPROTO_ICMP, 0, 0x0800, 0, 0);
	ck_assert_int_eq(P(&f, &p), NCD_PKT_OK);
	ck_assert_uint_eq(p.key.flags, NC_TRIE_KEY_F_NOPORTS);
	ck_assert_uint_eq(p.key.proto, IPPROTO_ICMP);
	for (int i = 0; i < 3; i++) {
		static const uint8_t protos[] = { IPPROTO_TCP, IPPROTO_SCTP, IPPROTO_UDPLITE };

		eth(&f, MAC, 0, 0x0800);
		ipv4(&f, protos[i], 0, 100, 200, 0);
		ck_assert_int_eq(P(&f, &p), NCD_PKT_OK);
		ck_assert_uint_eq(p.key.dport, 200);
	}
}
END_TEST

static void
ipv6_hdr(struct frame *f, uint8_t nh, uint16_t plen)
{
	uint8_t h[40] = { 0x60, 0, 0, 0, (uint8_t)(plen >> 8), (uint8_t)plen, nh, 64 };

	inet_pton(AF_INET6, "2001:db8::99", h + 8);
	inet_pton(AF_INET6, "2001:db8::1", h + 24);
	put(f, h, 40);
}

START_TEST(ipv6_and_extensions)
{
	struct frame f;
	struct ncd_parsed p;
	uint8_t ext[8] = { 0 };

	eth(&f, MAC, 1, 0x86dd);
	ipv6_hdr(&f, IPPROTO_TCP, 8);
	put16(&f, 40000);
	put16(&f, 443);
	f.len += 4;
	ck_assert_int_eq(P(&f, &p), NCD_PKT_OK);
	ck_assert_uint_eq(p.key.family, NC_TRIE_AF_INET6);
	ck_assert_uint_eq(p.key.dport, 443);
	ck_assert_uint_eq(p.l3_len, 48);
	ck_assert_uint_eq(p.key.dst.a[15], 1);
	/* Hop-by-hop, then destination options, then UDP. */
	eth(&f, MAC, 0, 0x86dd);
	ipv6_hdr(&f, IPPROTO_HOPOPTS, 24);
	ext[0] = IPPROTO_DSTOPTS;
	put(&f, ext, 8);
	ext[0] = IPPROTO_UDP;
	put(&f, ext, 8);
	put16(&f, 5);
	put16(&f, 6);
	f.len += 4;
	ck_assert_int_eq(P(&f, &p), NCD_PKT_OK);
	ck_assert_uint_eq(p.key.proto, IPPROTO_UDP);
	ck_assert_uint_eq(p.key.dport, 6);
	/* A fragment header: no ports. */
	eth(&f, MAC, 0, 0x86dd);
	ipv6_hdr(&f, IPPROTO_FRAGMENT, 16);
	ext[0] = IPPROTO_TCP;
	ext[3] = 1;
	put(&f, ext, 8);
	f.len += 8;
	ck_assert_int_eq(P(&f, &p), NCD_PKT_OK);
	ck_assert_uint_eq(p.key.flags, NC_TRIE_KEY_F_NOPORTS);
	ck_assert_uint_eq(p.key.proto, IPPROTO_TCP);
	/* Extension header beyond the payload length. */
	eth(&f, MAC, 0, 0x86dd);
	ipv6_hdr(&f, IPPROTO_DSTOPTS, 4);
	f.len += 8;
	ck_assert_int_eq(P(&f, &p), NCD_PKT_BAD_EXT);
	/* Payload length beyond the frame, and a zero one. */
	eth(&f, MAC, 0, 0x86dd);
	ipv6_hdr(&f, IPPROTO_UDP, 100);
	f.len += 8;
	ck_assert_int_eq(P(&f, &p), NCD_PKT_BAD_LEN);
	f.b[14 + 4] = f.b[14 + 5] = 0;
	ck_assert_int_eq(P(&f, &p), NCD_PKT_BAD_LEN);
	/* Headers past what the caller made contiguous: not malformed, just deep. */
	eth(&f, MAC, 0, 0x86dd);
	ipv6_hdr(&f, IPPROTO_DSTOPTS, 24);
	ext[0] = IPPROTO_UDP;
	ext[1] = 1;
	put(&f, ext, 8);
	f.len += 16;
	ck_assert_int_eq(ncd_parse(f.b, 14 + 40 + 4, f.len, MAC, 0, &p), NCD_PKT_TOO_DEEP);
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
	tcase_add_test(tc, fragments_and_other_protocols);
	tcase_add_test(tc, ipv6_and_extensions);
	tcase_add_test(tc, random_bytes);
	tcase_set_timeout(tc, 120);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
