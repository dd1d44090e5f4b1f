/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * nc_trie: the seed's semantics, the API's errors, a differential test
 * against the linear scan, and lock-free readers under a writer.
 *
 * Built twice: test_trie runs without EAL, so tables have no snapshot (the
 * front stage and the trie answer); test_trie_snapshot (NC_TEST_SNAPSHOT)
 * initialises EAL, and the differential and RCU tests check the snapshot:
 * each differential check runs first against the snapshot as it is (rules
 * added and deleted since its copy: the delta and the dead answers), then
 * against one built from the rules of the moment.
 */
#define _GNU_SOURCE /* sched_setaffinity */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>

#include <check.h>
#include <rte_eal.h>
#include <rte_malloc.h>
#include <rte_rcu_qsbr.h>

#include "nc_trie.h"
#include "nc_trie_tools.h"

/* ---- helpers ------------------------------------------------------------ */

static struct nc_trie *
mk(uint32_t cap)
{
	struct nc_trie_config cfg = NC_TRIE_SIZED(nc_trie_config, .name = "test", .socket_id = -1,
			.max_rules = cap);
	struct nc_trie *t = nc_trie_create(&cfg);

	ck_assert_ptr_nonnull(t);
	return t;
}

static void
addr(union nc_trie_addr *a, const char *s)
{
	memset(a, 0, sizeof(*a));
	ck_assert_int_eq(inet_pton(strchr(s, ':') ? AF_INET6 : AF_INET, s, a->a), 1);
}

/* A rule on addresses ("any" or "a/len"), protocol, dport and priority. */
static struct nc_trie_rule
R(const char *dst, const char *src, int proto, struct nc_trie_port dport, uint32_t prio)
{
	struct nc_trie_rule r;
	char buf[64];

	memset(&r, 0, sizeof(r));
	for (int i = 0; i < 2; i++) {
		const char *s = i ? src : dst;
		char *slash;

		if (s == NULL)
			continue;
		snprintf(buf, sizeof(buf), "%s", s);
		slash = strchr(buf, '/');
		ck_assert_ptr_nonnull(slash);
		*slash = '\0';
		addr(i ? &r.src : &r.dst, buf);
		r.family = strchr(buf, ':') ? NC_TRIE_AF_INET6 : NC_TRIE_AF_INET;
		if (i)
			r.src_len = (uint8_t)atoi(slash + 1);
		else
			r.dst_len = (uint8_t)atoi(slash + 1);
	}
	if (proto >= 0) {
		r.proto = (uint8_t)proto;
		r.proto_mask = 0xff;
	}
	r.dport = dport;
	r.priority = prio;
	return r;
}

static const struct nc_trie_port ANY = { 0, 0, NC_TRIE_PORT_ANY };

static struct nc_trie_port
P(uint16_t lo, uint16_t hi)
{
	return (struct nc_trie_port){ lo, hi, NC_TRIE_PORT_RANGE };
}

static struct nc_trie_port
PM(uint16_t v, uint16_t m)
{
	return (struct nc_trie_port){ v, m, NC_TRIE_PORT_MASK };
}

static struct nc_trie_key
K(const char *dst, const char *src, uint8_t proto, uint16_t sport, uint16_t dport)
{
	struct nc_trie_key k;

	memset(&k, 0, sizeof(k));
	addr(&k.dst, dst);
	addr(&k.src, src);
	k.family = strchr(dst, ':') ? NC_TRIE_AF_INET6 : NC_TRIE_AF_INET;
	k.proto = proto;
	k.sport = sport;
	k.dport = dport;
	return k;
}

static int
add_ok(struct nc_trie *t, struct nc_trie_rule r)
{
	int id = nc_trie_add(t, &r);

	ck_assert_msg(id >= 0, "nc_trie_add: %s", strerror(-id));
	return id;
}

/* Rules compare by what they say, not by their padding bytes. */
#define ck_assert_rule_eq(a, b) do { \
		char fa_[256], fb_[256]; \
		nc_trie_rule_format((a), fa_, sizeof(fa_)); \
		nc_trie_rule_format((b), fb_, sizeof(fb_)); \
		ck_assert_str_eq(fa_, fb_); \
	} while (0)

#define LOOKUP(t, ...) ({ struct nc_trie_key k_ = K(__VA_ARGS__); nc_trie_lookup((t), &k_); })

/* ---- semantics ---------------------------------------------------------- */

/* The seed refused (val & mask) == 0: "any source" was impossible. */
START_TEST(wildcard_source)
{
	struct nc_trie *t = mk(16);
	int dns = add_ok(t, R("192.0.2.1/32", NULL, IPPROTO_UDP, P(53, 53), 10));

	ck_assert_uint_eq(LOOKUP(t, "192.0.2.1", "203.0.113.9", IPPROTO_UDP, 4000, 53), dns);
	ck_assert_uint_eq(LOOKUP(t, "192.0.2.1", "0.0.0.0", IPPROTO_UDP, 0, 53), dns);
	ck_assert_uint_eq(LOOKUP(t, "192.0.2.1", "255.255.255.255", IPPROTO_UDP, 65535, 53), dns);
	ck_assert_uint_eq(LOOKUP(t, "192.0.2.2", "203.0.113.9", IPPROTO_UDP, 4000, 53),
			  NC_TRIE_NOMATCH);
	ck_assert_uint_eq(LOOKUP(t, "192.0.2.1", "203.0.113.9", IPPROTO_TCP, 4000, 53),
			  NC_TRIE_NOMATCH);
	ck_assert_uint_eq(LOOKUP(t, "192.0.2.1", "203.0.113.9", IPPROTO_UDP, 4000, 54),
			  NC_TRIE_NOMATCH);
	nc_trie_free(t);
}
END_TEST

/* A match on a short prefix must not hide a better rule on a longer one, and vice versa. */
START_TEST(overlapping_prefixes)
{
	struct nc_trie *t = mk(16);
	int p8 = add_ok(t, R("10.0.0.0/8", NULL, -1, ANY, 1));
	int p16 = add_ok(t, R("10.1.0.0/16", NULL, -1, ANY, 5));
	int p24 = add_ok(t, R("10.1.2.0/24", NULL, -1, ANY, 3));
	int p32 = add_ok(t, R("10.1.2.3/32", NULL, -1, ANY, 9));
	int src = add_ok(t, R("10.0.0.0/8", "172.16.0.0/12", -1, ANY, 7));

	ck_assert_uint_eq(LOOKUP(t, "10.1.2.4", "1.1.1.1", 6, 1, 2), p16);  /* /16 beats /24 */
	ck_assert_uint_eq(LOOKUP(t, "10.1.2.3", "1.1.1.1", 6, 1, 2), p32);
	ck_assert_uint_eq(LOOKUP(t, "10.2.0.1", "1.1.1.1", 6, 1, 2), p8);
	ck_assert_uint_eq(LOOKUP(t, "10.2.0.1", "172.20.0.1", 6, 1, 2), src);
	ck_assert_uint_eq(LOOKUP(t, "10.1.0.1", "172.20.0.1", 6, 1, 2), src); /* 7 beats 5 */
	ck_assert_uint_eq(LOOKUP(t, "11.0.0.1", "172.20.0.1", 6, 1, 2), NC_TRIE_NOMATCH);
	ck_assert_int_eq(nc_trie_delete(t, (uint32_t)p16), 0);
	ck_assert_uint_eq(LOOKUP(t, "10.1.2.4", "1.1.1.1", 6, 1, 2), p24);
	ck_assert_int_eq(nc_trie_delete(t, (uint32_t)p24), 0);
	ck_assert_uint_eq(LOOKUP(t, "10.1.2.4", "1.1.1.1", 6, 1, 2), p8);
	nc_trie_free(t);
}
END_TEST

START_TEST(priority_ties)
{
	struct nc_trie *t = mk(16);
	int a = add_ok(t, R("192.0.2.0/24", NULL, -1, ANY, 4));
	int b = add_ok(t, R("192.0.2.0/25", NULL, -1, ANY, 4));
	int c;

	/* Equal priority: the older rule wins, whatever its prefix length. */
	ck_assert_uint_eq(LOOKUP(t, "192.0.2.1", "1.2.3.4", 6, 1, 1), a);
	ck_assert_int_eq(nc_trie_delete(t, (uint32_t)a), 0);
	ck_assert_uint_eq(LOOKUP(t, "192.0.2.1", "1.2.3.4", 6, 1, 1), b);
	/* Re-added, it is now the younger one, even if it reuses its old id. */
	c = add_ok(t, R("192.0.2.0/24", NULL, -1, ANY, 4));
	ck_assert_uint_eq(LOOKUP(t, "192.0.2.1", "1.2.3.4", 6, 1, 1), b);
	ck_assert_uint_eq(LOOKUP(t, "192.0.2.200", "1.2.3.4", 6, 1, 1), c);
	/* A later rule of higher priority wins. */
	int d = add_ok(t, R("192.0.2.0/28", NULL, -1, ANY, 5));
	ck_assert_uint_eq(LOOKUP(t, "192.0.2.1", "1.2.3.4", 6, 1, 1), d);
	nc_trie_free(t);
}
END_TEST

START_TEST(port_masks_and_ranges)
{
	struct nc_trie *t = mk(16);
	int m = add_ok(t, R("192.0.2.1/32", NULL, IPPROTO_TCP, PM(0x1000, 0xf000), 1));
	int r = add_ok(t, R("192.0.2.2/32", NULL, IPPROTO_TCP, P(1000, 2000), 1));
	int odd = add_ok(t, R("192.0.2.3/32", NULL, IPPROTO_TCP, P(1, 65534), 1));
	struct nc_trie_rule s = R("192.0.2.4/32", NULL, IPPROTO_TCP, ANY, 1);
	int sp;

	s.sport = P(1024, 65535);
	sp = add_ok(t, s);
	ck_assert_uint_eq(LOOKUP(t, "192.0.2.1", "1.1.1.1", 6, 9, 0x1000), m);
	ck_assert_uint_eq(LOOKUP(t, "192.0.2.1", "1.1.1.1", 6, 9, 0x1fff), m);
	ck_assert_uint_eq(LOOKUP(t, "192.0.2.1", "1.1.1.1", 6, 9, 0x0fff), NC_TRIE_NOMATCH);
	ck_assert_uint_eq(LOOKUP(t, "192.0.2.1", "1.1.1.1", 6, 9, 0x2000), NC_TRIE_NOMATCH);
	ck_assert_uint_eq(LOOKUP(t, "192.0.2.2", "1.1.1.1", 6, 9, 1000), r);
	ck_assert_uint_eq(LOOKUP(t, "192.0.2.2", "1.1.1.1", 6, 9, 2000), r);
	ck_assert_uint_eq(LOOKUP(t, "192.0.2.2", "1.1.1.1", 6, 9, 1500), r);
	ck_assert_uint_eq(LOOKUP(t, "192.0.2.2", "1.1.1.1", 6, 9, 999), NC_TRIE_NOMATCH);
	ck_assert_uint_eq(LOOKUP(t, "192.0.2.2", "1.1.1.1", 6, 9, 2001), NC_TRIE_NOMATCH);
	ck_assert_uint_eq(LOOKUP(t, "192.0.2.3", "1.1.1.1", 6, 9, 1), odd);
	ck_assert_uint_eq(LOOKUP(t, "192.0.2.3", "1.1.1.1", 6, 9, 65534), odd);
	ck_assert_uint_eq(LOOKUP(t, "192.0.2.3", "1.1.1.1", 6, 9, 0), NC_TRIE_NOMATCH);
	ck_assert_uint_eq(LOOKUP(t, "192.0.2.3", "1.1.1.1", 6, 9, 65535), NC_TRIE_NOMATCH);
	ck_assert_uint_eq(LOOKUP(t, "192.0.2.4", "1.1.1.1", 6, 1024, 7), sp);
	ck_assert_uint_eq(LOOKUP(t, "192.0.2.4", "1.1.1.1", 6, 1023, 7), NC_TRIE_NOMATCH);
	/* A range is one rule, whatever number of prefixes it takes. */
	struct nc_trie_stats st = { .size = sizeof(st) };
	ck_assert_int_eq(nc_trie_get_stats(t, &st), 0);
	ck_assert_uint_eq(st.rules, 4);
	nc_trie_free(t);
}
END_TEST

START_TEST(families)
{
	struct nc_trie *t = mk(16);
	int v4 = add_ok(t, R("0.0.0.0/0", NULL, IPPROTO_UDP, ANY, 5));
	int v6 = add_ok(t, R("2001:db8::/32", NULL, IPPROTO_UDP, ANY, 5));
	int any = add_ok(t, R(NULL, NULL, IPPROTO_ICMPV6, ANY, 1));
	struct nc_trie_rule r = R(NULL, NULL, IPPROTO_TCP, P(22, 22), 1);
	int ssh = add_ok(t, r);

	ck_assert_uint_eq(LOOKUP(t, "192.0.2.1", "1.1.1.1", IPPROTO_UDP, 1, 1), v4);
	/* An IPv4 rule, even 0.0.0.0/0, never matches an IPv6 key. */
	ck_assert_uint_eq(LOOKUP(t, "2001:db9::1", "::1", IPPROTO_UDP, 1, 1), NC_TRIE_NOMATCH);
	ck_assert_uint_eq(LOOKUP(t, "2001:db8::1", "::1", IPPROTO_UDP, 1, 1), v6);
	/* Same leading bytes, other family. */
	ck_assert_uint_eq(LOOKUP(t, "32.1.13.184", "1.1.1.1", IPPROTO_TCP, 1, 1), NC_TRIE_NOMATCH);
	/* No address constraint: both families. */
	ck_assert_uint_eq(LOOKUP(t, "2001:db8::1", "::1", IPPROTO_ICMPV6, 0, 0), any);
	ck_assert_uint_eq(LOOKUP(t, "192.0.2.1", "1.1.1.1", IPPROTO_ICMPV6, 0, 0), any);
	ck_assert_uint_eq(LOOKUP(t, "192.0.2.1", "1.1.1.1", IPPROTO_TCP, 5, 22), ssh);
	ck_assert_uint_eq(LOOKUP(t, "fe80::1", "fe80::2", IPPROTO_TCP, 5, 22), ssh);
	nc_trie_free(t);
}
END_TEST

START_TEST(ipv6_prefixes)
{
	struct nc_trie *t = mk(16);
	int a = add_ok(t, R("2001:db8:1::/48", NULL, IPPROTO_TCP, ANY, 1));
	int b = add_ok(t, R("2001:db8:1:2::/64", "fe80::/10", IPPROTO_TCP, ANY, 2));
	int c = add_ok(t, R("2001:db8:1:2:3:4:5:6/128", NULL, IPPROTO_TCP, P(443, 443), 3));
	int d = add_ok(t, R("2001:db8:1:2:3:4:5:7/127", NULL, IPPROTO_TCP, ANY, 3));

	ck_assert_uint_eq(LOOKUP(t, "2001:db8:1:ffff::1", "::1", 6, 1, 1), a);
	ck_assert_uint_eq(LOOKUP(t, "2001:db8:1:2::1", "fe80::99", 6, 1, 1), b);
	ck_assert_uint_eq(LOOKUP(t, "2001:db8:1:2::1", "fec0::99", 6, 1, 1), a);
	ck_assert_uint_eq(LOOKUP(t, "2001:db8:1:2:3:4:5:6", "::1", 6, 1, 443), c);
	ck_assert_uint_eq(LOOKUP(t, "2001:db8:1:2:3:4:5:6", "::1", 6, 1, 80), d);
	ck_assert_uint_eq(LOOKUP(t, "2001:db8:1:2:3:4:5:7", "::1", 6, 1, 443), d);
	ck_assert_uint_eq(LOOKUP(t, "2001:db8:1:2:3:4:5:8", "::1", 6, 1, 443), a);
	ck_assert_uint_eq(LOOKUP(t, "2001:db8:2::", "::1", 6, 1, 443), NC_TRIE_NOMATCH);
	nc_trie_free(t);
}
END_TEST

/* Fragments and protocols without ports match only rules whose port fields are wildcards. */
START_TEST(no_ports)
{
	struct nc_trie *t = mk(16);
	int dns = add_ok(t, R("192.0.2.1/32", NULL, IPPROTO_UDP, P(53, 53), 5));
	int low = add_ok(t, R("192.0.2.1/32", NULL, -1, P(0, 1023), 4));
	int any = add_ok(t, R("192.0.2.1/32", NULL, IPPROTO_UDP, ANY, 1));
	struct nc_trie_key k = K("192.0.2.1", "1.1.1.1", IPPROTO_UDP, 0, 53);

	ck_assert_uint_eq(nc_trie_lookup(t, &k), dns);
	k.flags = NC_TRIE_KEY_F_NOPORTS;
	ck_assert_uint_eq(nc_trie_lookup(t, &k), any);
	k.proto = IPPROTO_ICMP;
	k.dport = 0;
	ck_assert_uint_eq(nc_trie_lookup(t, &k), NC_TRIE_NOMATCH);
	k.flags = 0;
	ck_assert_uint_eq(nc_trie_lookup(t, &k), low);
	nc_trie_free(t);
}
END_TEST

START_TEST(proto_and_host_bits)
{
	struct nc_trie *t = mk(16);
	struct nc_trie_rule r = R("10.1.2.3/8", NULL, -1, ANY, 1);
	struct nc_trie_rule back;
	int id = add_ok(t, r);

	/* Bits past the prefix are ignored (the seed's val & mask). */
	ck_assert_uint_eq(LOOKUP(t, "10.200.0.1", "1.1.1.1", 99, 1, 1), id);
	ck_assert_int_eq(nc_trie_get_rule(t, (uint32_t)id, &back), 0);
	ck_assert_uint_eq(back.dst.a[1], 0);
	/* So the same prefix with other host bits is the same rule. */
	r = R("10.9.9.9/8", NULL, -1, ANY, 1);
	ck_assert_int_eq(nc_trie_add(t, &r), -EEXIST);
	/* Protocol prefix mask: 0xf0 matches 0x10..0x1f. */
	r = R("10.0.0.0/8", NULL, 0x11, ANY, 2);
	r.proto_mask = 0xf0;
	int pm = add_ok(t, r);
	ck_assert_uint_eq(LOOKUP(t, "10.0.0.1", "1.1.1.1", 0x1f, 1, 1), pm);
	ck_assert_uint_eq(LOOKUP(t, "10.0.0.1", "1.1.1.1", 0x20, 1, 1), id);
	nc_trie_free(t);
}
END_TEST

/* Connected and listener rules live in the front stage; priorities still decide. */
START_TEST(front_stage)
{
	struct nc_trie *t = mk(16);
	struct nc_trie_rule conn = R("192.0.2.1/32", "198.51.100.7/32", IPPROTO_TCP, P(80, 80), 2);
	struct nc_trie_rule lis = R("192.0.2.1/32", NULL, IPPROTO_TCP, P(80, 80), 1), back;
	struct nc_trie_stats st = { .size = sizeof(st) };
	int c, l, w;

	conn.sport = P(40000, 40000);
	c = add_ok(t, conn);
	l = add_ok(t, lis);
	ck_assert_int_eq(nc_trie_get_stats(t, &st), 0);
	ck_assert_uint_eq(st.exact_rules, 2);
	ck_assert_uint_eq(st.tuples, 2);
	ck_assert_uint_eq(st.nodes, 0);
	ck_assert_uint_eq(LOOKUP(t, "192.0.2.1", "198.51.100.7", IPPROTO_TCP, 40000, 80), c);
	ck_assert_uint_eq(LOOKUP(t, "192.0.2.1", "198.51.100.7", IPPROTO_TCP, 40001, 80), l);
	ck_assert_uint_eq(LOOKUP(t, "192.0.2.1", "198.51.100.8", IPPROTO_TCP, 40000, 80), l);
	ck_assert_uint_eq(LOOKUP(t, "192.0.2.1", "198.51.100.7", IPPROTO_UDP, 40000, 80),
			  NC_TRIE_NOMATCH);
	ck_assert_int_eq(nc_trie_add(t, &conn), -EEXIST);
	ck_assert_int_eq(nc_trie_add(t, &lis), -EEXIST);
	/* The same rule read back, ports as ranges. */
	ck_assert_int_eq(nc_trie_get_rule(t, (uint32_t)c, &back), 0);
	ck_assert_rule_eq(&back, &conn);
	ck_assert_int_eq(nc_trie_get_rule(t, (uint32_t)l, &back), 0);
	ck_assert_rule_eq(&back, &lis);
	/* A wider trie rule of higher priority beats both; removed, they are back. */
	w = add_ok(t, R("192.0.2.0/24", NULL, IPPROTO_TCP, ANY, 3));
	ck_assert_uint_eq(LOOKUP(t, "192.0.2.1", "198.51.100.7", IPPROTO_TCP, 40000, 80), w);
	ck_assert_int_eq(nc_trie_delete(t, (uint32_t)w), 0);
	ck_assert_uint_eq(LOOKUP(t, "192.0.2.1", "198.51.100.7", IPPROTO_TCP, 40000, 80), c);
	/* A listener of higher priority than the connected socket wins. */
	lis.priority = 5;
	int l5 = add_ok(t, lis);
	ck_assert_uint_eq(LOOKUP(t, "192.0.2.1", "198.51.100.7", IPPROTO_TCP, 40000, 80), l5);
	/* A key without ports (a fragment) never matches them. */
	struct nc_trie_key k = K("192.0.2.1", "198.51.100.7", IPPROTO_TCP, 40000, 80);
	k.flags = NC_TRIE_KEY_F_NOPORTS;
	ck_assert_uint_eq(nc_trie_lookup(t, &k), NC_TRIE_NOMATCH);
	ck_assert_int_eq(nc_trie_delete(t, (uint32_t)l5), 0);
	ck_assert_int_eq(nc_trie_delete(t, (uint32_t)l), 0);
	ck_assert_int_eq(nc_trie_delete(t, (uint32_t)l), -ENOENT);
	ck_assert_uint_eq(LOOKUP(t, "192.0.2.1", "198.51.100.8", IPPROTO_TCP, 40000, 80),
			  NC_TRIE_NOMATCH);
	ck_assert_uint_eq(LOOKUP(t, "192.0.2.1", "198.51.100.7", IPPROTO_TCP, 40000, 80), c);
	/* IPv6 connected socket. */
	struct nc_trie_rule c6 = R("2001:db8::1/128", "2001:db8::2/128", IPPROTO_UDP, P(53, 53), 1);
	c6.sport = P(5353, 5353);
	int i6 = add_ok(t, c6);
	ck_assert_uint_eq(LOOKUP(t, "2001:db8::1", "2001:db8::2", IPPROTO_UDP, 5353, 53), i6);
	ck_assert_uint_eq(LOOKUP(t, "2001:db8::1", "2001:db8::3", IPPROTO_UDP, 5353, 53),
			  NC_TRIE_NOMATCH);
	ck_assert_int_eq(nc_trie_get_rule(t, (uint32_t)i6, &back), 0);
	ck_assert_rule_eq(&back, &c6);
	nc_trie_free(t);
}
END_TEST

/* A port of any family ("udp dport 53") is the front stage's too, for both families. */
START_TEST(front_stage_port)
{
	struct nc_trie *t = mk(16);
	struct nc_trie_rule port = R(NULL, NULL, IPPROTO_UDP, P(53, 53), 1), back;
	struct nc_trie_rule masked = R(NULL, NULL, IPPROTO_UDP, PM(53, 0xffff), 1);
	struct nc_trie_rule v4 = R("192.0.2.0/24", NULL, IPPROTO_UDP, ANY, 2);
	struct nc_trie_stats st = { .size = sizeof(st) };
	int p, w, p9;

	p = add_ok(t, port);
	ck_assert_int_eq(nc_trie_get_stats(t, &st), 0);
	ck_assert_uint_eq(st.exact_rules, 1);
	ck_assert_uint_eq(st.nodes, 0);
	ck_assert_uint_eq(LOOKUP(t, "192.0.2.1", "198.51.100.7", IPPROTO_UDP, 1234, 53), p);
	ck_assert_uint_eq(LOOKUP(t, "2001:db8::1", "2001:db8::2", IPPROTO_UDP, 1234, 53), p);
	ck_assert_uint_eq(LOOKUP(t, "192.0.2.1", "198.51.100.7", IPPROTO_TCP, 1234, 53),
			  NC_TRIE_NOMATCH);
	ck_assert_uint_eq(LOOKUP(t, "192.0.2.1", "198.51.100.7", IPPROTO_UDP, 1234, 54),
			  NC_TRIE_NOMATCH);
	/* The same rule written as a full mask is the same rule. */
	ck_assert_int_eq(nc_trie_add(t, &masked), -EEXIST);
	ck_assert_int_eq(nc_trie_get_rule(t, (uint32_t)p, &back), 0);
	ck_assert_rule_eq(&back, &port);
	/* A trie rule of higher priority wins where it matches, and only there. */
	w = add_ok(t, v4);
	ck_assert_uint_eq(LOOKUP(t, "192.0.2.1", "198.51.100.7", IPPROTO_UDP, 1234, 53), w);
	ck_assert_uint_eq(LOOKUP(t, "192.0.3.1", "198.51.100.7", IPPROTO_UDP, 1234, 53), p);
	/* Equal priority: the older rule wins, whichever stage holds it. */
	v4.priority = 1;
	v4.dst_len = 16;
	int w1 = add_ok(t, v4);
	ck_assert_uint_eq(LOOKUP(t, "192.0.3.1", "198.51.100.7", IPPROTO_UDP, 1234, 53), p);
	ck_assert_uint_eq(LOOKUP(t, "192.0.3.1", "198.51.100.7", IPPROTO_UDP, 1234, 9), w1);
	/* Family-specific and with a source port: the trie's, not this table's. */
	struct nc_trie_rule fam = port;
	fam.family = NC_TRIE_AF_INET6;
	fam.priority = 9;
	p9 = add_ok(t, fam);
	ck_assert_uint_eq(LOOKUP(t, "2001:db8::1", "2001:db8::2", IPPROTO_UDP, 1234, 53), p9);
	ck_assert_uint_eq(LOOKUP(t, "192.0.3.1", "198.51.100.7", IPPROTO_UDP, 1234, 53), p);
	ck_assert_int_eq(nc_trie_get_stats(t, &st), 0);
	ck_assert_uint_eq(st.exact_rules, 1);
	/* A key without ports never matches it; removed, it matches nothing. */
	struct nc_trie_key k = K("10.0.0.1", "198.51.100.7", IPPROTO_UDP, 1234, 53);
	ck_assert_uint_eq(nc_trie_lookup(t, &k), p);
	k.flags = NC_TRIE_KEY_F_NOPORTS;
	ck_assert_uint_eq(nc_trie_lookup(t, &k), NC_TRIE_NOMATCH);
	ck_assert_int_eq(nc_trie_delete(t, (uint32_t)p), 0);
	ck_assert_uint_eq(LOOKUP(t, "192.0.3.1", "198.51.100.7", IPPROTO_UDP, 1234, 53), w1);
	ck_assert_uint_eq(LOOKUP(t, "10.0.0.1", "198.51.100.7", IPPROTO_UDP, 1234, 53),
			  NC_TRIE_NOMATCH);
	nc_trie_free(t);
}
END_TEST

START_TEST(bulk_matches_single)
{
	struct nc_trie *t = mk(64);
	struct nc_trie_key keys[40];
	uint32_t res[40];
	unsigned int hits = 0;

	add_ok(t, R("192.0.2.0/24", NULL, IPPROTO_UDP, ANY, 1));
	add_ok(t, R("192.0.2.128/25", NULL, IPPROTO_UDP, P(100, 200), 2));
	add_ok(t, R("2001:db8::/32", NULL, -1, ANY, 1));
	for (unsigned int i = 0; i < 40; i++) {
		char a[64];

		snprintf(a, sizeof(a), i % 2 ? "192.0.2.%u" : "2001:db%x::1", i % 2 ? (i * 7) % 256 : 8 + i % 3);
		keys[i] = K(a, i % 2 ? "1.1.1.1" : "::2", IPPROTO_UDP, 1, (uint16_t)(i * 10));
	}
	ck_assert_uint_eq(nc_trie_lookup_bulk(t, keys, res, 40), ({
		for (unsigned int i = 0; i < 40; i++) {
			ck_assert_uint_eq(res[i], nc_trie_lookup(t, &keys[i]));
			hits += res[i] != NC_TRIE_NOMATCH;
		}
		hits;
	}));
	ck_assert_uint_gt(hits, 0);
	ck_assert_uint_lt(hits, 40);
	nc_trie_free(t);
}
END_TEST

/* ---- API errors --------------------------------------------------------- */

START_TEST(create_errors)
{
	struct nc_trie_config cfg = NC_TRIE_SIZED(nc_trie_config, .name = "x", .socket_id = -1,
			.max_rules = 0);
	char longname[NC_TRIE_NAMESIZE + 1];

	errno = 0;
	ck_assert_ptr_null(nc_trie_create(NULL));
	ck_assert_int_eq(errno, EINVAL);
	errno = 0;
	ck_assert_ptr_null(nc_trie_create(&cfg));
	ck_assert_int_eq(errno, EINVAL);
	cfg.max_rules = (1u << 24) + 1;
	ck_assert_ptr_null(nc_trie_create(&cfg));
	cfg.max_rules = 4;
	cfg.name = NULL;
	ck_assert_ptr_null(nc_trie_create(&cfg));
	cfg.name = "";
	ck_assert_ptr_null(nc_trie_create(&cfg));
	memset(longname, 'a', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	cfg.name = longname;
	errno = 0;
	ck_assert_ptr_null(nc_trie_create(&cfg));
	ck_assert_int_eq(errno, EINVAL);
	cfg.name = "ok";
	/* Only the documented flags: an internal one is not the caller's to set. */
	for (uint32_t bit = 1; bit != 0; bit <<= 1) {
		cfg.flags = bit;
		errno = 0;
		if (bit == NC_TRIE_F_NO_SNAPSHOT) {
			nc_trie_free(nc_trie_create(&cfg));
			continue;
		}
		ck_assert_ptr_null(nc_trie_create(&cfg));
		ck_assert_int_eq(errno, EINVAL);
	}
	cfg.flags = 0;
	cfg.socket_id = 0;
	struct nc_trie *t = nc_trie_create(&cfg);
	ck_assert_ptr_nonnull(t);
	nc_trie_free(t);
	nc_trie_free(NULL);
}
END_TEST

/*
 * The structs that carry their size: an older caller's shorter config works, a newer one's
 * unknown field set is refused, and stats are written no further than the caller's size.
 */
START_TEST(sized_structs)
{
	struct {
		struct nc_trie_config c;
		uint64_t newer;        /* a field a newer header might add */
	} big = { NC_TRIE_SIZED(nc_trie_config, .name = "sz", .socket_id = -1, .max_rules = 4),
		  0 };
	struct {
		struct nc_trie_stats s;
		uint8_t guard[64];
	} st;
	struct nc_trie *t;

	big.c.size = offsetof(struct nc_trie_config, flags);      /* an older header: no flags */
	t = nc_trie_create(&big.c);
	ck_assert_ptr_nonnull(t);
	nc_trie_free(t);
	big.c.size = sizeof(big);                                 /* a newer one, field unset */
	t = nc_trie_create(&big.c);
	ck_assert_ptr_nonnull(t);
	struct nc_trie_rule r = R("192.0.2.0/24", NULL, IPPROTO_TCP, ANY, 1);

	ck_assert_int_eq(nc_trie_add(t, &r), 0);
	big.newer = 1;                                            /* ... and set: refused */
	errno = 0;
	ck_assert_ptr_null(nc_trie_create(&big.c));
	ck_assert_int_eq(errno, EINVAL);
	big.c.size = 2;
	ck_assert_ptr_null(nc_trie_create(&big.c));
	memset(&st, 0xa5, sizeof(st));
	st.s.size = offsetof(struct nc_trie_stats, exact_rules);  /* size and rules only */
	ck_assert_int_eq(nc_trie_get_stats(t, &st.s), 0);
	ck_assert_uint_eq(st.s.size, offsetof(struct nc_trie_stats, exact_rules));
	ck_assert_uint_eq(st.s.rules, 1);
	ck_assert_uint_eq(st.s.exact_rules, 0xa5a5a5a5u);        /* past its size: untouched */
	st.s.size = sizeof(st);                                   /* a newer caller's */
	ck_assert_int_eq(nc_trie_get_stats(t, &st.s), 0);
	ck_assert_uint_eq(st.s.size, sizeof(st.s));
	for (size_t i = 0; i < sizeof(st.guard); i++)
		ck_assert_uint_eq(st.guard[i], 0);                /* what it does not know: 0 */
	st.s.size = 0;
	ck_assert_int_eq(nc_trie_get_stats(t, &st.s), -EINVAL);
	nc_trie_free(t);
}
END_TEST

START_TEST(add_errors)
{
	struct nc_trie *t = mk(4);
	struct nc_trie_rule good = R("192.0.2.0/24", NULL, IPPROTO_TCP, P(1, 2), 1), r;
	struct nc_trie_stats st = { .size = sizeof(st) };

	ck_assert_int_eq(nc_trie_add(NULL, &good), -EINVAL);
	ck_assert_int_eq(nc_trie_add(t, NULL), -EINVAL);
	r = good; r.family = 5;
	ck_assert_int_eq(nc_trie_add(t, &r), -EINVAL);
	r = good; r.dst_len = 33;
	ck_assert_int_eq(nc_trie_add(t, &r), -EINVAL);
	r = good; r.family = NC_TRIE_AF_INET6; r.src_len = 129;
	ck_assert_int_eq(nc_trie_add(t, &r), -EINVAL);
	r = good; r.family = NC_TRIE_AF_ANY;     /* address constraint without a family */
	ck_assert_int_eq(nc_trie_add(t, &r), -EINVAL);
	r = good; r.proto_mask = 0x0f;           /* not a prefix: the seed took ffs() */
	ck_assert_int_eq(nc_trie_add(t, &r), -EINVAL);
	r = good; r.dport = PM(80, 0xff0f);
	ck_assert_int_eq(nc_trie_add(t, &r), -EINVAL);
	r = good; r.sport = PM(80, 0x0001);
	ck_assert_int_eq(nc_trie_add(t, &r), -EINVAL);
	r = good; r.dport = P(2000, 1000);       /* inverted range */
	ck_assert_int_eq(nc_trie_add(t, &r), -EINVAL);
	r = good; r.dport.kind = 7;
	ck_assert_int_eq(nc_trie_add(t, &r), -EINVAL);
	r = good; r.priority = NC_TRIE_PRIO_MAX + 1;
	ck_assert_int_eq(nc_trie_add(t, &r), -EINVAL);
	ck_assert_int_eq(nc_trie_rule_validate(NULL), -EINVAL);
	ck_assert_int_eq(nc_trie_rule_validate(&good), 0);
	/* Nothing was added by the refused calls. */
	ck_assert_int_eq(nc_trie_get_stats(t, &st), 0);
	ck_assert_uint_eq(st.rules, 0);
	ck_assert_uint_eq(st.nodes, 0);

	/* Duplicates: same fields and priority. The same fields at another priority are fine. */
	int id = add_ok(t, good);
	ck_assert_int_eq(nc_trie_add(t, &good), -EEXIST);
	r = good; r.dport = PM(0, 0xfffe);       /* the same range 0..1? no: 0-1 differs from 1-2 */
	add_ok(t, r);
	r = good; r.priority = 2;
	add_ok(t, r);
	r = good; r.dport = PM(2, 0xfffe);       /* 2..3 */
	add_ok(t, r);
	/* Full table. */
	r = good; r.priority = 3;
	ck_assert_int_eq(nc_trie_add(t, &r), -ENOSPC);
	ck_assert_int_eq(nc_trie_delete(t, (uint32_t)id), 0);
	ck_assert_int_eq(nc_trie_add(t, &r), id);
	/* Deletes. */
	ck_assert_int_eq(nc_trie_delete(t, (uint32_t)id), 0);
	ck_assert_int_eq(nc_trie_delete(t, (uint32_t)id), -ENOENT);
	ck_assert_int_eq(nc_trie_delete(t, 4), -EINVAL);
	ck_assert_int_eq(nc_trie_delete(NULL, 0), -EINVAL);
	ck_assert_int_eq(nc_trie_get_rule(t, (uint32_t)id, &r), -ENOENT);
	ck_assert_int_eq(nc_trie_get_rule(t, 99, &r), -EINVAL);
	ck_assert_int_eq(nc_trie_get_rule(t, 1, NULL), -EINVAL);
	ck_assert_int_eq(nc_trie_get_stats(NULL, &st), -EINVAL);
	ck_assert_int_eq(nc_trie_dump(NULL, stdout), -EINVAL);
	ck_assert_int_eq(nc_trie_reclaim(NULL, 0), -EINVAL);
	ck_assert_int_eq(nc_trie_rcu_qsbr_add(NULL, NULL), -EINVAL);
	/* Everything deleted: no node is left behind. */
	for (uint32_t i = 0; i < 4; i++)
		nc_trie_delete(t, i);
	ck_assert_int_eq(nc_trie_get_stats(t, &st), 0);
	ck_assert_uint_eq(st.rules, 0);
	ck_assert_uint_eq(st.nodes, 0);
	nc_trie_free(t);
}
END_TEST

START_TEST(dump_and_format)
{
	struct nc_trie *t = mk(4);
	struct nc_trie_rule r = R("192.0.2.0/24", "2.0.0.0/8", IPPROTO_UDP, P(53, 53), 7);
	char buf[256], *mem = NULL;
	size_t memlen = 0;
	FILE *f;

	r.sport = P(1024, 65535);
	add_ok(t, r);
	ck_assert_int_gt(nc_trie_rule_format(&r, buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "ipv4 proto 17 dst 192.0.2.0/24 src 2.0.0.0/8 dport 53 "
			      "sport 1024-65535 priority 7");
	/* Truncation reports the full length, as snprintf does. */
	ck_assert_int_eq(nc_trie_rule_format(&r, buf, 8), (int)strlen("ipv4 proto 17 dst 192.0.2.0/24 "
		"src 2.0.0.0/8 dport 53 sport 1024-65535 priority 7"));
	ck_assert_str_eq(buf, "ipv4 pr");
	f = open_memstream(&mem, &memlen);
	ck_assert_int_eq(nc_trie_dump(t, f), 0);
	fclose(f);
	ck_assert_ptr_nonnull(strstr(mem, "1 rules"));
	ck_assert_ptr_nonnull(strstr(mem, "dst 192.0.2.0/24"));
	ck_assert_ptr_nonnull(strstr(mem, "rule 0"));
	free(mem);
	nc_trie_free(t);
}
END_TEST

/* ---- differential against the linear scan ------------------------------- */

struct world {
	union nc_trie_addr v4[16], v6[16];
	uint16_t ports[8];
};

static void
world_init(struct world *w, uint64_t *s)
{
	for (int i = 0; i < 16; i++) {
		memset(&w->v4[i], 0, sizeof(w->v4[i]));
		w->v4[i].v4 = (uint32_t)nc_rand(s);
		for (int b = 0; b < 16; b++)
			w->v6[i].a[b] = (uint8_t)nc_rand(s);
	}
	for (int i = 0; i < 8; i++)
		w->ports[i] = (uint16_t)nc_rand(s);
	w->ports[0] = 53;
	w->ports[1] = 80;
}

/* An address near one of the world's, so rules and keys overlap a lot. */
static void
near_addr(const struct world *w, unsigned int fam, union nc_trie_addr *a, uint64_t *s)
{
	unsigned int bytes = fam == NC_TRIE_AF_INET6 ? 16 : 4;

	*a = fam == NC_TRIE_AF_INET6 ? w->v6[nc_rand(s) % 16] : w->v4[nc_rand(s) % 16];
	if (nc_rand(s) % 2)
		a->a[bytes - 1 - nc_rand(s) % 2] ^= (uint8_t)nc_rand(s);
}

static uint8_t
rand_len(unsigned int width, uint64_t *s)
{
	switch (nc_rand(s) % 4) {
	case 0: return 0;
	case 1: return (uint8_t)width;
	default: return (uint8_t)(nc_rand(s) % (width + 1));
	}
}

static void
rand_port(const struct world *w, struct nc_trie_port *p, uint64_t *s)
{
	uint16_t base = w->ports[nc_rand(s) % 8];
	unsigned int len;

	switch (nc_rand(s) % 6) {
	case 0: case 1:
		*p = ANY;
		break;
	case 2: case 3:
		*p = P(base, base);
		break;
	case 4: {
		uint16_t a = (uint16_t)(base - nc_rand(s) % 300), b = (uint16_t)(base + nc_rand(s) % 300);
		*p = a <= b ? P(a, b) : P(b, a);
		break;
	}
	default:
		len = (unsigned int)(nc_rand(s) % 17);
		*p = PM(base, len ? (uint16_t)(0xffff << (16 - len)) : 0);
	}
}

/* netchanneld's common shapes, which take the exact-match front stage. */
static void
rand_socket_rule(const struct world *w, struct nc_trie_rule *r, uint64_t *s)
{
	unsigned int width;

	memset(r, 0, sizeof(*r));
	r->family = nc_rand(s) % 3 ? NC_TRIE_AF_INET : NC_TRIE_AF_INET6;
	width = r->family == NC_TRIE_AF_INET6 ? 128 : 32;
	near_addr(w, r->family, &r->dst, s);
	r->dst_len = (uint8_t)width;
	r->proto = nc_rand(s) % 2 ? IPPROTO_TCP : IPPROTO_UDP;
	r->proto_mask = 0xff;
	r->dport = P(w->ports[nc_rand(s) % 8], 0);
	r->dport.hi = r->dport.lo;
	if (nc_rand(s) % 2) {
		near_addr(w, r->family, &r->src, s);
		r->src_len = (uint8_t)width;
		r->sport = nc_rand(s) % 2 ? P(w->ports[nc_rand(s) % 8], 0) : PM((uint16_t)nc_rand(s), 0xffff);
		if (r->sport.kind == NC_TRIE_PORT_RANGE)
			r->sport.hi = r->sport.lo;
	} else if (nc_rand(s) % 4 == 0) {
		/* A port of any family: no address at all. */
		r->family = NC_TRIE_AF_ANY;
		r->dst_len = 0;
		memset(&r->dst, 0, sizeof(r->dst));
	}
	r->priority = (uint32_t)(nc_rand(s) % 8);
}

static void
rand_rule(const struct world *w, struct nc_trie_rule *r, uint64_t *s)
{
	static const uint8_t protos[] = { IPPROTO_TCP, IPPROTO_UDP, IPPROTO_SCTP, IPPROTO_ICMP };
	unsigned int fam = nc_rand(s) % 10;

	if (nc_rand(s) % 10 < 3) {
		rand_socket_rule(w, r, s);
		return;
	}
	memset(r, 0, sizeof(*r));
	r->family = fam < 5 ? NC_TRIE_AF_INET : fam < 8 ? NC_TRIE_AF_INET6 : NC_TRIE_AF_ANY;
	if (r->family != NC_TRIE_AF_ANY) {
		unsigned int width = r->family == NC_TRIE_AF_INET6 ? 128 : 32;

		near_addr(w, r->family, &r->dst, s);
		near_addr(w, r->family, &r->src, s);
		r->dst_len = rand_len(width, s);
		r->src_len = rand_len(width, s);
	}
	switch (nc_rand(s) % 3) {
	case 0: break;
	case 1: r->proto = protos[nc_rand(s) % 4]; r->proto_mask = 0xff; break;
	default: r->proto = (uint8_t)nc_rand(s); r->proto_mask = (uint8_t)(0xff << (nc_rand(s) % 9)); break;
	}
	rand_port(w, &r->dport, s);
	rand_port(w, &r->sport, s);
	r->priority = (uint32_t)(nc_rand(s) % 8);
}

static void
rand_key(const struct world *w, struct nc_trie_key *k, uint64_t *s)
{
	memset(k, 0, sizeof(*k));
	k->family = nc_rand(s) % 2 ? NC_TRIE_AF_INET : NC_TRIE_AF_INET6;
	near_addr(w, k->family, &k->dst, s);
	near_addr(w, k->family, &k->src, s);
	k->proto = (uint8_t)(nc_rand(s) % 4 ? (nc_rand(s) % 2 ? IPPROTO_TCP : IPPROTO_UDP) : nc_rand(s));
	k->dport = nc_rand(s) % 2 ? w->ports[nc_rand(s) % 8] : (uint16_t)nc_rand(s);
	k->sport = nc_rand(s) % 2 ? w->ports[nc_rand(s) % 8] : (uint16_t)nc_rand(s);
	if (nc_rand(s) % 10 == 0)
		k->flags = NC_TRIE_KEY_F_NOPORTS;
}

static void
report_mismatch(const struct nc_trie *t, const struct nc_linear *l, const struct nc_trie_key *k,
		uint32_t got, uint32_t want)
{
	char a[64], b[64], rb[256];
	struct nc_trie_rule r;

	(void)l;
	inet_ntop(k->family == NC_TRIE_AF_INET6 ? AF_INET6 : AF_INET, k->dst.a, a, sizeof(a));
	inet_ntop(k->family == NC_TRIE_AF_INET6 ? AF_INET6 : AF_INET, k->src.a, b, sizeof(b));
	fprintf(stderr, "mismatch: key dst %s src %s proto %u sport %u dport %u flags %u: "
		"trie %d, linear %d\n", a, b, k->proto, k->sport, k->dport, k->flags, (int)got,
		(int)want);
	for (int i = 0; i < 2; i++) {
		uint32_t id = i ? want : got;

		if (id != NC_TRIE_NOMATCH && nc_trie_get_rule(t, id, &r) == 0) {
			nc_trie_rule_format(&r, rb, sizeof(rb));
			fprintf(stderr, "  %s rule %u: %s\n", i ? "linear" : "trie", id, rb);
		}
	}
}

/* Keys: random ones, and points inside live rules. Returns the number of mismatches. */
static unsigned int
differential_once(const struct nc_trie *t, const struct nc_linear *l, const struct world *w,
		  const struct nc_trie_rule *rules, const uint32_t *live, uint32_t nlive,
		  uint32_t nkeys, uint64_t *s)
{
	struct nc_trie_key keys[64];
	uint32_t res[64];
	unsigned int bad = 0;

	for (uint32_t done = 0; done < nkeys; done += 64) {
		/*
		 * One batch in three holds IPv4 keys with ports only, one IPv6
		 * keys with ports only: the bulk lookup's paths for such chunks
		 * hash and compare fewer words, or take the snapshot's answers.
		 */
		const unsigned int kind = done / 64 % 3;
		const uint8_t fam = kind == 1 ? NC_TRIE_AF_INET : kind == 2 ? NC_TRIE_AF_INET6 : 0;

		for (unsigned int i = 0; i < 64; i++) {
			do {
				if (nlive > 0 && nc_rand(s) % 2) {
					nc_key_inside(&rules[live[nc_rand(s) % nlive]], &keys[i], s);
					if (nc_rand(s) % 10 == 0)
						keys[i].flags = NC_TRIE_KEY_F_NOPORTS;
				} else {
					rand_key(w, &keys[i], s);
				}
			} while (fam && keys[i].family != fam);
			if (fam)
				keys[i].flags = 0;
		}
		nc_trie_lookup_bulk(t, keys, res, 64);
		for (unsigned int i = 0; i < 64; i++) {
			uint32_t want = nc_linear_lookup(l, &keys[i]);

			if (res[i] != want) {
				if (bad < 5)
					report_mismatch(t, l, &keys[i], res[i], want);
				bad++;
			}
		}
	}
	return bad;
}

/*
 * The differential check; with the snapshot, against the table's snapshot as
 * it is, then against a fresh one, which must be installed once the trie
 * holds 64 rules outside the front stage.
 */
static unsigned int
differential(struct nc_trie *t, const struct nc_linear *l, const struct world *w,
	     const struct nc_trie_rule *rules, const uint32_t *live, uint32_t nlive, uint32_t nkeys,
	     uint64_t *s)
{
	unsigned int bad = differential_once(t, l, w, rules, live, nlive, nkeys, s);
	struct nc_trie_stats st = { .size = sizeof(st) };

#ifdef NC_TEST_SNAPSHOT
	ck_assert_int_eq(nc_trie_snapshot_sync(t), 0);
	ck_assert_int_eq(nc_trie_get_stats(t, &st), 0);
	if (st.rules - st.exact_rules >= 64) {
		ck_assert_uint_eq(st.snapshot_state, NC_TRIE_SNAPSHOT_READY);
		ck_assert_uint_eq(st.delta_rules, 0);
		ck_assert_uint_eq(st.stale_rules, 0);
		ck_assert_uint_ge(st.snapshot_rules, st.rules - st.exact_rules);
	}
	bad += differential_once(t, l, w, rules, live, nlive, nkeys, s);
#else
	ck_assert_int_eq(nc_trie_snapshot_sync(t), -ENOTSUP);
	ck_assert_int_eq(nc_trie_get_stats(t, &st), 0);
	ck_assert_uint_eq(st.snapshot_state, NC_TRIE_SNAPSHOT_OFF);
#endif
	return bad;
}

/* Add rule r to the trie and the scan alike, as live; false if it duplicated one. */
static bool
add_both(struct nc_trie *t, struct nc_linear *l, const struct nc_trie_rule *r,
	 struct nc_trie_rule *rules, uint32_t *live, uint32_t *nlive)
{
	int id = nc_trie_add(t, r);

	if (id == -EEXIST)
		return false;
	ck_assert_int_ge(id, 0);
	ck_assert_int_eq(nc_linear_add(l, (uint32_t)id, r), 0);
	rules[id] = *r;
	live[(*nlive)++] = (uint32_t)id;
	return true;
}

/*
 * Add a random rule to the trie and the scan alike; false if it duplicated
 * one. front: of the front stage's shapes only, four in five of them IPv4
 * connected sockets, so that one table fills up.
 */
static bool
add_random(struct nc_trie *t, struct nc_linear *l, const struct world *w,
	   struct nc_trie_rule *rules, uint32_t *live, uint32_t *nlive, uint64_t *s, bool front)
{
	struct nc_trie_rule r;

	if (!front)
		rand_rule(w, &r, s);
	else if (nc_rand(s) % 5 == 0)
		rand_socket_rule(w, &r, s);
	else
		do
			rand_socket_rule(w, &r, s);
		while (r.family != NC_TRIE_AF_INET || r.src_len != 32);
	return add_both(t, l, &r, rules, live, nlive);
}

/* A table of random rules with the scan beside it, as the differential tests use them. */
struct rset {
	struct nc_trie *t;
	struct nc_linear *l;
	struct nc_trie_rule *rules;   /* by id */
	uint32_t *live, nlive;        /* ids in use */
	struct world w;
	uint64_t s;
};

/* n rules, front_pct of them of the front stage's shapes only, the rest of any shape. */
static void
rset_init(struct rset *r, uint32_t n, uint64_t seed, unsigned int front_pct)
{
	r->t = mk(n);
	r->l = nc_linear_create(n);
	r->rules = calloc(n, sizeof(*r->rules));
	r->live = calloc(n, sizeof(*r->live));
	r->nlive = 0;
	r->s = seed;
	ck_assert_ptr_nonnull(r->l);
	ck_assert_ptr_nonnull(r->rules);
	ck_assert_ptr_nonnull(r->live);
	world_init(&r->w, &r->s);
	while (r->nlive < n)
		add_random(r->t, r->l, &r->w, r->rules, r->live, &r->nlive, &r->s,
			   nc_rand(&r->s) % 100 < front_pct);
}

#ifdef NC_TEST_SNAPSHOT
/* The differential check against the table as it is (its snapshot left as the updates left it). */
static unsigned int
rset_check(struct rset *r, uint32_t nkeys)
{
	return differential_once(r->t, r->l, &r->w, r->rules, r->live, r->nlive, nkeys, &r->s);
}
#endif

static void
rset_free(struct rset *r)
{
	free(r->live);
	free(r->rules);
	nc_linear_free(r->l);
	nc_trie_free(r->t);
}

static void
random_set_of(uint32_t nrules, uint32_t nkeys, uint64_t seed, unsigned int front_pct)
{
	struct rset r;
	unsigned int bad;

	rset_init(&r, nrules, seed, front_pct);
	bad = differential(r.t, r.l, &r.w, r.rules, r.live, r.nlive, nkeys, &r.s);
	ck_assert_msg(bad == 0, "%u of %u keys differ (rules %u, seed %#lx)", bad, nkeys, nrules,
		      (unsigned long)seed);
	rset_free(&r);
}

static void
random_set(uint32_t nrules, uint32_t nkeys, uint64_t seed)
{
	random_set_of(nrules, nkeys, seed, 0);
}

/* Over a million keys in all: many on small sets, fewer on the 10,000-rule set. */
/*
 * nc_trie_rules_overlap() is exact: when it says two rules overlap, a key
 * built from the meet of their fields matches both; when it says they do not,
 * no random key (nor that key) matches both.
 */
START_TEST(rules_overlap)
{
	uint64_t s = 0x0ba7;
	struct world w;
	unsigned int yes = 0, no = 0;

	world_init(&w, &s);
	for (int i = 0; i < 20000; i++) {
		struct nc_trie_rule a, b;
		struct nc_trie_key k;
		uint16_t alo, ahi, blo, bhi;
		int ov;

		rand_rule(&w, &a, &s);
		rand_rule(&w, &b, &s);
		ov = nc_trie_rules_overlap(&a, &b);
		ck_assert_int_eq(ov, nc_trie_rules_overlap(&b, &a));
		/* The witness: each field where the two meet. */
		memset(&k, 0, sizeof(k));
		k.family = a.family != NC_TRIE_AF_ANY ? a.family :
			   b.family != NC_TRIE_AF_ANY ? b.family : NC_TRIE_AF_INET;
		k.proto = (uint8_t)((a.proto & a.proto_mask) | (b.proto & b.proto_mask));
		k.dst = a.dst_len >= b.dst_len ? a.dst : b.dst;
		k.src = a.src_len >= b.src_len ? a.src : b.src;
		nc_trie_port_range(&a.dport, &alo, &ahi);
		nc_trie_port_range(&b.dport, &blo, &bhi);
		k.dport = alo > blo ? alo : blo;
		nc_trie_port_range(&a.sport, &alo, &ahi);
		nc_trie_port_range(&b.sport, &blo, &bhi);
		k.sport = alo > blo ? alo : blo;
		if (ov) {
			ck_assert_msg(nc_trie_rule_matches(&a, &k) && nc_trie_rule_matches(&b, &k),
				      "rules said to overlap, but their meet matches not both");
			yes++;
			continue;
		}
		no++;
		ck_assert(!(nc_trie_rule_matches(&a, &k) && nc_trie_rule_matches(&b, &k)));
		for (int j = 0; j < 10; j++) {
			rand_key(&w, &k, &s);
			ck_assert(!(nc_trie_rule_matches(&a, &k) && nc_trie_rule_matches(&b, &k)));
		}
	}
	/* Both answers were exercised. */
	ck_assert_uint_gt(yes, 100);
	ck_assert_uint_gt(no, 100);
}
END_TEST

/*
 * nc_trie_rules_same() says what nc_trie_add() says with -EEXIST: the same
 * rule written another way (bits past a prefix, a port as a full mask) is
 * the same; another priority, prefix or port is not.
 */
START_TEST(rules_same)
{
	struct nc_trie *t = mk(16);
	struct nc_trie_rule r = R("192.0.2.0/24", NULL, IPPROTO_UDP, P(53, 53), 5);
	struct nc_trie_rule host_bits = R("192.0.2.77/24", NULL, IPPROTO_UDP, PM(53, 0xffff), 5);
	struct nc_trie_rule other_prio = R("192.0.2.0/24", NULL, IPPROTO_UDP, P(53, 53), 6);
	struct nc_trie_rule other_len = R("192.0.2.0/25", NULL, IPPROTO_UDP, P(53, 53), 5);
	struct nc_trie_rule other_port = R("192.0.2.0/24", NULL, IPPROTO_UDP, P(53, 54), 5);

	ck_assert_int_eq(nc_trie_rules_same(&r, &r), 1);
	ck_assert_int_eq(nc_trie_rules_same(&r, &host_bits), 1);
	ck_assert_int_eq(nc_trie_rules_same(&host_bits, &r), 1);
	ck_assert_int_eq(nc_trie_rules_same(&r, &other_prio), 0);
	ck_assert_int_eq(nc_trie_rules_same(&r, &other_len), 0);
	ck_assert_int_eq(nc_trie_rules_same(&r, &other_port), 0);
	add_ok(t, r);
	ck_assert_int_eq(nc_trie_add(t, &host_bits), -EEXIST);
	add_ok(t, other_prio);
	add_ok(t, other_len);
	add_ok(t, other_port);
	nc_trie_free(t);
}
END_TEST

START_TEST(diff_100) { random_set(100, 600000, 0x1001); }
END_TEST
START_TEST(diff_1000) { random_set(1000, 300000, 0x1002); }
END_TEST
START_TEST(diff_10000) { random_set(10000, 120000, 0x1003); }
END_TEST
/*
 * The front stage alone, its IPv4 connected table at a load of 0.8: hash
 * chains of three entries and more, which the bulk lookup walks apart from
 * the first two.
 */
START_TEST(diff_front_stage) { random_set_of(4096, 300000, 0x1004, 100); }
END_TEST
/*
 * Mostly front-stage rules, a few hundred in the trie: the snapshot then
 * holds the trie's rules only, and lookups still probe the front stage.
 */
START_TEST(diff_front_heavy) { random_set_of(3000, 200000, 0x1005, 85); }
END_TEST

/*
 * Ports of any family (the port table) and a few rules of other shapes in
 * the trie, the other tables empty and no snapshot: the bulk lookup's path
 * for a daemon that serves a few ports. Checked again as the port rules go,
 * down to none.
 */
START_TEST(diff_port_table)
{
	static const uint8_t protos[] = { IPPROTO_TCP, IPPROTO_UDP, IPPROTO_SCTP, IPPROTO_UDPLITE };
	const uint32_t cap = 400;
	struct nc_trie *t = mk(cap);
	struct nc_linear *l = nc_linear_create(cap);
	struct nc_trie_rule *rules = calloc(cap, sizeof(*rules));
	uint32_t *live = calloc(cap, sizeof(*live)), nlive = 0, nports, ntrie = 0;
	struct nc_trie_stats st = { .size = sizeof(st) };
	struct world w;
	uint64_t s = 0x2002;
	unsigned int bad;

	ck_assert_ptr_nonnull(l);
	world_init(&w, &s);
	while (nlive < 300) {
		struct nc_trie_rule r = { .family = NC_TRIE_AF_ANY, .proto_mask = 0xff };
		uint16_t port = nc_rand(&s) % 2 ? w.ports[nc_rand(&s) % 8] : (uint16_t)nc_rand(&s);

		r.proto = protos[nc_rand(&s) % 4];
		r.dport = P(port, port);
		r.priority = (uint32_t)(nc_rand(&s) % 8);
		add_both(t, l, &r, rules, live, &nlive);
	}
	nports = nlive;
	/* Rules of other shapes, none of the connected or listener tables'. */
	while (ntrie < 40) {
		struct nc_trie_rule r;

		rand_rule(&w, &r, &s);
		if (r.family != NC_TRIE_AF_ANY && r.dst_len == (r.family == NC_TRIE_AF_INET6 ? 128 : 32))
			r.dst_len--;
		ntrie += add_both(t, l, &r, rules, live, &nlive);
	}
	ck_assert_int_eq(nc_trie_get_stats(t, &st), 0);
	ck_assert_uint_ge(st.exact_rules, nports);
	ck_assert_uint_lt(st.exact_rules, nlive);
	ck_assert(st.snapshot_state == NC_TRIE_SNAPSHOT_NONE ||
		  st.snapshot_state == NC_TRIE_SNAPSHOT_OFF);
	bad = differential_once(t, l, &w, rules, live, nlive, 200000, &s);
	ck_assert_msg(bad == 0, "%u keys differ with %u port rules", bad, nports);
	/* The port rules (the first nports of live) go in random order; the trie's stay. */
	while (nports > 0) {
		uint32_t i = (uint32_t)(nc_rand(&s) % nports), id = live[i];

		ck_assert_int_eq(nc_trie_delete(t, id), 0);
		ck_assert_int_eq(nc_linear_delete(l, id), 0);
		live[i] = live[--nports];
		live[nports] = live[--nlive];
		if (nports % 50 == 0) {
			bad = differential_once(t, l, &w, rules, live, nlive, 20000, &s);
			ck_assert_msg(bad == 0, "%u keys differ with %u port rules", bad, nports);
		}
	}
	free(live);
	free(rules);
	nc_linear_free(l);
	nc_trie_free(t);
}
END_TEST

/* Random add/delete sequences, checked against the scan after every batch. */
START_TEST(diff_updates)
{
	const uint32_t cap = 3000, ops = 120000, batch = 1000;
	struct nc_trie *t = mk(cap);
	struct nc_linear *l = nc_linear_create(cap);
	struct nc_trie_rule *rules = calloc(cap, sizeof(*rules));
	uint32_t *live = calloc(cap, sizeof(*live)), nlive = 0;
	struct nc_trie_stats st = { .size = sizeof(st) };
	struct world w;
	uint64_t s = 0x2001;
	unsigned int bad = 0;

	world_init(&w, &s);
	for (uint32_t op = 1; op <= ops; op++) {
		/* Drift the target size so the table grows, shrinks and empties. */
		uint32_t target = (op / 20000) % 2 ? 200 : cap;

		if (nlive > 0 && (nlive >= target || nc_rand(&s) % 2)) {
			uint32_t i = (uint32_t)(nc_rand(&s) % nlive), id = live[i];

			ck_assert_int_eq(nc_trie_delete(t, id), 0);
			ck_assert_int_eq(nc_linear_delete(l, id), 0);
			live[i] = live[--nlive];
		} else if (!add_random(t, l, &w, rules, live, &nlive, &s, false)) {
			continue;
		}
		if (op % batch == 0) {
			bad += differential(t, l, &w, rules, live, nlive, 1024, &s);
			ck_assert_int_eq(nc_trie_get_stats(t, &st), 0);
			ck_assert_uint_eq(st.rules, nlive);
		}
	}
	ck_assert_msg(bad == 0, "%u mismatches over %u operations", bad, ops);
	while (nlive > 0)
		ck_assert_int_eq(nc_trie_delete(t, live[--nlive]), 0);
	ck_assert_int_eq(nc_trie_get_stats(t, &st), 0);
	ck_assert_uint_eq(st.rules, 0);
	ck_assert_uint_eq(st.nodes, 0);
	free(live);
	free(rules);
	nc_linear_free(l);
	nc_trie_free(t);
}
END_TEST

#ifdef NC_TEST_SNAPSHOT
/*
 * A fault: DPDK's heap taken, so that rte_acl cannot build. The build fails,
 * is counted, the table keeps answering from the trie; with the memory back,
 * the next one is installed.
 */
START_TEST(snapshot_without_memory)
{
	struct nc_trie_stats st = { .size = sizeof(st) };
	struct rset r;
	void *hog[4096];
	uint32_t nhog = 0;

	rset_init(&r, 1000, 0x7001, 0);
	for (size_t sz = 64u << 20; sz >= 4096 && nhog < RTE_DIM(hog); )
		if ((hog[nhog] = rte_malloc(NULL, sz, 0)) != NULL)
			nhog++;
		else
			sz /= 2;
	ck_assert_int_eq(nc_trie_snapshot_sync(r.t), -ENOMEM);
	ck_assert_int_eq(nc_trie_get_stats(r.t, &st), 0);
	ck_assert_uint_eq(st.snapshot_state, NC_TRIE_SNAPSHOT_NONE);
	ck_assert_uint_eq(st.snapshot_failures, 1);
	ck_assert_uint_eq(rset_check(&r, 20000), 0);
	while (nhog > 0)
		rte_free(hog[--nhog]);
	ck_assert_int_eq(nc_trie_snapshot_sync(r.t), 0);
	ck_assert_int_eq(nc_trie_get_stats(r.t, &st), 0);
	ck_assert_uint_eq(st.snapshot_state, NC_TRIE_SNAPSHOT_READY);
	ck_assert_uint_eq(st.snapshot_failures, 1);
	ck_assert_uint_eq(st.snapshot_builds, 1);
	ck_assert_uint_eq(rset_check(&r, 20000), 0);
	rset_free(&r);
}
END_TEST

/*
 * Deletes only, after a snapshot: nothing in the delta, so IPv4 chunks take
 * the snapshot's answers as they are (its fast path), and a deleted rule's
 * answer must still go to the trie. Then a fresh snapshot leaves them out.
 */
START_TEST(snapshot_dead_answers)
{
	struct nc_trie_stats st = { .size = sizeof(st) };
	struct rset r;

	rset_init(&r, 3000, 0x7002, 0);
	ck_assert_int_eq(nc_trie_snapshot_sync(r.t), 0);
	for (int i = 0; i < 1000; i++) {
		uint32_t j = (uint32_t)(nc_rand(&r.s) % r.nlive), id = r.live[j];

		ck_assert_int_eq(nc_trie_delete(r.t, id), 0);
		ck_assert_int_eq(nc_linear_delete(r.l, id), 0);
		r.live[j] = r.live[--r.nlive];
	}
	ck_assert_int_eq(nc_trie_get_stats(r.t, &st), 0);
	ck_assert_uint_eq(st.delta_rules, 0);
	ck_assert_uint_ge(st.stale_rules, 600);
	ck_assert_uint_eq(rset_check(&r, 100000), 0);
	ck_assert_int_eq(nc_trie_snapshot_sync(r.t), 0);
	ck_assert_int_eq(nc_trie_get_stats(r.t, &st), 0);
	ck_assert_uint_eq(st.stale_rules, 0);
	ck_assert_uint_eq(st.snapshot_rules, r.nlive);
	ck_assert_uint_eq(rset_check(&r, 100000), 0);
	rset_free(&r);
}
END_TEST

/*
 * Every order the snapshot's rte_acl may read fields in gives the trie's
 * answers, in both families, before and after deletes and adds; and the
 * order a build picks by itself is one of them.
 */
START_TEST(snapshot_orders)
{
	static const char *const names[] = {
		"proto,src,dst,ports", "proto,dst,src,ports", "proto,src,ports,dst",
		"proto,dst,ports,src", "proto,ports,src,dst", "proto,ports,dst,src",
	};
	struct nc_trie_stats st = { .size = sizeof(st) };
	struct rset r;

	rset_init(&r, 1500, 0x7003, 0);
	for (int o = -1; o < (int)RTE_DIM(names); o++) {
		nct_snap_force_order(r.t, o);
		ck_assert_int_eq(nc_trie_snapshot_sync(r.t), 0);
		ck_assert_int_eq(nc_trie_get_stats(r.t, &st), 0);
		for (unsigned int f = 0; f < 2; f++) {
			bool known = false;

			for (unsigned int i = 0; i < RTE_DIM(names); i++)
				known |= strcmp(st.snapshot_layout[f], names[i]) == 0;
			ck_assert_msg(o < 0 ? known : strcmp(st.snapshot_layout[f], names[o]) == 0,
				      "family %u: layout \"%s\" in order %d", f,
				      st.snapshot_layout[f], o);
		}
		ck_assert_uint_eq(rset_check(&r, 50000), 0);
		/* Deletes (dead answers) and adds (the delta) on top of this order's snapshot. */
		for (int i = 0; i < 100; i++) {
			uint32_t j = (uint32_t)(nc_rand(&r.s) % r.nlive), id = r.live[j];

			ck_assert_int_eq(nc_trie_delete(r.t, id), 0);
			ck_assert_int_eq(nc_linear_delete(r.l, id), 0);
			r.live[j] = r.live[--r.nlive];
		}
		while (r.nlive < 1500)
			add_random(r.t, r.l, &r.w, r.rules, r.live, &r.nlive, &r.s, false);
		ck_assert_uint_eq(rset_check(&r, 50000), 0);
	}
	rset_free(&r);
}
END_TEST

static double
mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* fw1_1k in a new table (its rules in file order, ClassBench priorities). */
static struct nc_trie *
fw1_1k_table(void)
{
	const char *d = getenv("NC_CLASSBENCH_DIR");
	struct nc_trie_rule *rules;
	struct nc_trie *t;
	char path[4096], err[256];
	uint32_t n;

	ck_assert_msg(d != NULL, "NC_CLASSBENCH_DIR is not set (meson test sets it)");
	snprintf(path, sizeof(path), "%s/fw1_1k", d);
	ck_assert_msg(nc_classbench_read(path, &rules, &n, err, sizeof(err)) == 0, "%s", err);
	t = mk(n);
	for (uint32_t i = 0; i < n; i++)
		ck_assert_int_ge(nc_trie_add(t, &rules[i]), 0);
	free(rules);
	return t;
}

/*
 * A table freed while its first build searches the six orders waits for the
 * compile under way, not for the search: against the whole search's time on
 * the same rules (about 1.8 s on fw1_1k, its first compile 0.15 s), well
 * under a third.
 */
START_TEST(snapshot_free_mid_search)
{
	struct nc_trie_stats st = { .size = sizeof(st) };
	struct nc_trie *t = fw1_1k_table();
	double t0 = mono_s(), search, cut;

	ck_assert_int_eq(nc_trie_snapshot_sync(t), 0);
	search = mono_s() - t0;
	nc_trie_free(t);
	t = fw1_1k_table();
	ck_assert_int_ge(nc_trie_reclaim(t, 0), 0);
	ck_assert_int_eq(nc_trie_get_stats(t, &st), 0);
	ck_assert_uint_eq(st.snapshot_state, NC_TRIE_SNAPSHOT_BUILDING);
	t0 = mono_s();
	nc_trie_free(t);
	cut = mono_s() - t0;
	fprintf(stderr, "snapshot_free_mid_search: freed in %.3f s, the search took %.3f s\n", cut,
		search);
	ck_assert_msg(cut * 3 < search, "freed mid-search in %.3f s, the search takes %.3f s", cut,
		      search);
}
END_TEST

/*
 * The order a build picks takes no more memory than DPDK's layout on the same
 * rules: on fw1_1k the fastest order (proto,dst,ports,src, about 1.8x faster)
 * takes 2.6x the memory and must not be picked.
 */
START_TEST(snapshot_pick_memory)
{
	struct nc_trie_stats dpdk = { .size = sizeof(dpdk) }, picked = { .size = sizeof(picked) };
	struct nc_trie *t = fw1_1k_table();

	nct_snap_force_order(t, 0);
	ck_assert_int_eq(nc_trie_snapshot_sync(t), 0);
	ck_assert_int_eq(nc_trie_get_stats(t, &dpdk), 0);
	nc_trie_free(t);
	t = fw1_1k_table();
	ck_assert_int_eq(nc_trie_snapshot_sync(t), 0);
	ck_assert_int_eq(nc_trie_get_stats(t, &picked), 0);
	nc_trie_free(t);
	ck_assert_str_eq(dpdk.snapshot_layout[0], "proto,src,dst,ports");
	ck_assert_msg(picked.snapshot_bytes * 20 <= dpdk.snapshot_bytes * 21,
		      "picked %s: %lu bytes against %lu in DPDK's layout", picked.snapshot_layout[0],
		      (unsigned long)picked.snapshot_bytes, (unsigned long)dpdk.snapshot_bytes);
}
END_TEST
#endif

/* ---- lock-free readers under a writer ----------------------------------- */

#define STABLE_RULES 300
#define STABLE_KEYS 4096
#define CHURN_MAX 600
#ifdef NC_TEST_SNAPSHOT
#define SNAPSHOTS_UNDER_READERS 3
#else
#define SNAPSHOTS_UNDER_READERS 0
#endif

struct rcu_test {
	struct nc_trie *t;
	struct rte_rcu_qsbr *v;
	struct nc_trie_key keys[STABLE_KEYS];
	uint32_t want[STABLE_KEYS];
	atomic_int stop;
	atomic_ulong lookups, wrong;
	unsigned int thread_id;
};

static void *
reader(void *arg)
{
	struct rcu_test *rt = arg;
	unsigned int id = __atomic_fetch_add(&rt->thread_id, 1, __ATOMIC_RELAXED);
	unsigned long n = 0, wrong = 0;
	uint32_t res[32];

	rte_rcu_qsbr_thread_register(rt->v, id);
	rte_rcu_qsbr_thread_online(rt->v, id);
	while (!atomic_load_explicit(&rt->stop, memory_order_relaxed)) {
		unsigned int base = (unsigned int)(n % (STABLE_KEYS / 32)) * 32;

		nc_trie_lookup_bulk(rt->t, &rt->keys[base], res, 32);
		for (unsigned int i = 0; i < 32; i++)
			wrong += res[i] != rt->want[base + i];
		n++;
		rte_rcu_qsbr_quiescent(rt->v, id);
	}
	rte_rcu_qsbr_thread_offline(rt->v, id);
	rte_rcu_qsbr_thread_unregister(rt->v, id);
	atomic_fetch_add(&rt->lookups, n * 32);
	atomic_fetch_add(&rt->wrong, wrong);
	return NULL;
}

START_TEST(rcu_readers_and_writer)
{
	struct rcu_test *rt = calloc(1, sizeof(*rt));
	struct nc_trie_rule stable[STABLE_RULES];
	uint32_t churn[CHURN_MAX], nchurn = 0, sids[STABLE_RULES];
	struct nc_linear *l = nc_linear_create(STABLE_RULES + CHURN_MAX);
	size_t sz = rte_rcu_qsbr_get_memsize(2);
	struct nc_trie_stats before = { .size = sizeof(before) }, after = { .size = sizeof(after) };
	unsigned long updates = 0;
	pthread_t th;
	struct world w;
	uint64_t s = 0x3001;
	struct timespec t0, now;

	ck_assert_ptr_nonnull(rt);
	rt->v = aligned_alloc(64, (sz + 63) & ~(size_t)63);
	ck_assert_int_eq(rte_rcu_qsbr_init(rt->v, 2), 0);
	rt->t = mk(STABLE_RULES + CHURN_MAX);
	ck_assert_int_eq(nc_trie_rcu_qsbr_add(rt->t, rt->v), 0);
	ck_assert_int_eq(nc_trie_rcu_qsbr_add(rt->t, rt->v), -EEXIST);
	world_init(&w, &s);
	/* Stable rules outrank every churning one, so their keys' answers never change. */
	for (uint32_t i = 0; i < STABLE_RULES;) {
		int id;

		rand_rule(&w, &stable[i], &s);
		stable[i].priority = 1000 + (uint32_t)(nc_rand(&s) % 8);
		id = nc_trie_add(rt->t, &stable[i]);
		if (id == -EEXIST)
			continue;
		ck_assert_int_ge(id, 0);
		sids[i] = (uint32_t)id;
		nc_linear_add(l, (uint32_t)id, &stable[i]);
		i++;
	}
	for (uint32_t i = 0; i < STABLE_KEYS; i++) {
		nc_key_inside(&stable[nc_rand(&s) % STABLE_RULES], &rt->keys[i], &s);
		rt->want[i] = nc_linear_lookup(l, &rt->keys[i]);
		ck_assert_uint_ne(rt->want[i], NC_TRIE_NOMATCH);
	}
#ifdef NC_TEST_SNAPSHOT
	ck_assert_int_eq(nc_trie_snapshot_sync(rt->t), 0);
#endif
	nc_trie_get_stats(rt->t, &before);
	ck_assert_int_eq(pthread_create(&th, NULL, reader, rt), 0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		for (int i = 0; i < 100; i++, updates++) {
			if (nchurn > 0 && (nchurn == CHURN_MAX || nc_rand(&s) % 2)) {
				uint32_t j = (uint32_t)(nc_rand(&s) % nchurn);

				ck_assert_int_eq(nc_trie_delete(rt->t, churn[j]), 0);
				churn[j] = churn[--nchurn];
			} else {
				struct nc_trie_rule r;
				int id;

				/* Near the stable keys' paths, to split and merge their nodes. */
				if (nc_rand(&s) % 2) {
					r = stable[nc_rand(&s) % STABLE_RULES];
					r.dst_len = (uint8_t)(r.dst_len + (r.dst_len < 32 && r.family));
					r.dport = ANY;
				} else {
					rand_rule(&w, &r, &s);
				}
				r.priority = (uint32_t)(nc_rand(&s) % 1000);
				id = nc_trie_add(rt->t, &r);
				if (id == -EEXIST)
					continue;
				ck_assert_int_ge(id, 0);
				churn[nchurn++] = (uint32_t)id;
			}
		}
		/*
		 * The control thread's idle call, and its idle time, which the
		 * builder uses: with EAL, snapshots come and go meanwhile.
		 */
		nc_trie_reclaim(rt->t, 0);
		usleep(100);
		clock_gettime(CLOCK_MONOTONIC, &now);
		nc_trie_get_stats(rt->t, &after);
		/*
		 * 3 s, and with EAL until 3 snapshots were installed under the
		 * readers (each may search six field orders: seconds under ASan on
		 * a slow machine), for at most a minute.
		 */
	} while (now.tv_sec - t0.tv_sec < 3 ||
		 (SNAPSHOTS_UNDER_READERS > 0 && now.tv_sec - t0.tv_sec < 60 &&
		  after.snapshot_builds < before.snapshot_builds + SNAPSHOTS_UNDER_READERS));
	atomic_store(&rt->stop, 1);
	pthread_join(th, NULL);
	fprintf(stderr, "rcu: %lu lookups, %lu updates, %lu wrong\n",
		atomic_load(&rt->lookups), updates, atomic_load(&rt->wrong));
	ck_assert_uint_gt(atomic_load(&rt->lookups), 0);
	ck_assert_uint_gt(updates, 1000);
	ck_assert_uint_eq(atomic_load(&rt->wrong), 0);
	nc_trie_get_stats(rt->t, &after);
	fprintf(stderr, "rcu: %u snapshots installed, %u under the readers in %ld s\n",
		after.snapshot_builds, after.snapshot_builds - before.snapshot_builds,
		(long)(now.tv_sec - t0.tv_sec));
#ifdef NC_TEST_SNAPSHOT
	/* Installed under the readers' feet, not only before they started. */
	ck_assert_uint_ge(after.snapshot_builds, before.snapshot_builds + SNAPSHOTS_UNDER_READERS);
#endif
	while (nchurn > 0)
		ck_assert_int_eq(nc_trie_delete(rt->t, churn[--nchurn]), 0);
	ck_assert_int_ge(nc_trie_reclaim(rt->t, 1), 0);
	nc_trie_get_stats(rt->t, &after);
	ck_assert_uint_eq(after.deferred, 0);
	ck_assert_uint_eq(after.nodes, before.nodes);
	for (uint32_t i = 0; i < STABLE_RULES; i++)
		ck_assert_int_eq(nc_trie_delete(rt->t, sids[i]), 0);
	ck_assert_int_eq(nc_trie_rcu_qsbr_add(rt->t, NULL), 0);
	nc_trie_get_stats(rt->t, &after);
	ck_assert_uint_eq(after.nodes, 0);
	nc_trie_free(rt->t);
	nc_linear_free(l);
	free(rt->v);
	free(rt);
}
END_TEST

/*
 * A reader that holds every grace period up for about a millisecond: it
 * reports a quiescent state only between sleeps while online.
 */
static void *
slow_reader(void *arg)
{
	struct rcu_test *rt = arg;
	uint32_t res[32];

	rte_rcu_qsbr_thread_register(rt->v, 0);
	rte_rcu_qsbr_thread_online(rt->v, 0);
	while (!atomic_load_explicit(&rt->stop, memory_order_relaxed)) {
		nc_trie_lookup_bulk(rt->t, rt->keys, res, 32);
		atomic_fetch_add(&rt->wrong, res[0] != rt->want[0]);
		usleep(1000);
		rte_rcu_qsbr_quiescent(rt->v, 0);
	}
	rte_rcu_qsbr_thread_offline(rt->v, 0);
	rte_rcu_qsbr_thread_unregister(rt->v, 0);
	return NULL;
}

/* Connected-socket rule i: 192.0.2.1:80 from 10.<i>:<1024 + i % 60000>, tcp. */
static struct nc_trie_rule
socket_rule(uint32_t i)
{
	struct nc_trie_rule r = R("192.0.2.1/32", NULL, IPPROTO_TCP, P(80, 80), 1);

	r.src.v4 = htonl(0x0a000000u | i);
	r.src_len = 32;
	r.sport = P(1024 + i % 60000, 1024 + i % 60000);
	return r;
}

/*
 * A full front stage under churn, its readers slow: a deleted rule's entry
 * waits for a grace period while its id is free at once, so the next add
 * finds the entry array full. It must take the entry back (waiting for the
 * reader), not write past the array (which crashed nctrie-bench once).
 */
START_TEST(front_stage_full_churn)
{
	enum { CAP = 511 };   /* the entries then fill exactly 7 pages */
	struct rcu_test *rt = calloc(1, sizeof(*rt));
	size_t sz = rte_rcu_qsbr_get_memsize(1);
	uint32_t ids[CAP], next = CAP;
	struct nc_trie_stats st = { .size = sizeof(st) };
	struct nc_trie_rule r;
	uint64_t s = 0x5eed;
	pthread_t th;

	ck_assert_ptr_nonnull(rt);
	rt->v = aligned_alloc(64, (sz + 63) & ~(size_t)63);
	ck_assert_int_eq(rte_rcu_qsbr_init(rt->v, 1), 0);
	rt->t = mk(CAP);
	ck_assert_int_eq(nc_trie_rcu_qsbr_add(rt->t, rt->v), 0);
	for (uint32_t i = 0; i < CAP; i++)
		ids[i] = (uint32_t)add_ok(rt->t, socket_rule(i));
	/* The reader keeps looking up rule 0's flow, which never goes. */
	rt->keys[0] = K("192.0.2.1", "10.0.0.0", IPPROTO_TCP, 1024, 80);
	rt->want[0] = ids[0];
	ck_assert_uint_eq(nc_trie_lookup(rt->t, &rt->keys[0]), ids[0]);
	ck_assert_int_eq(pthread_create(&th, NULL, slow_reader, rt), 0);
	for (int n = 0; n < 300; n++) {
		uint32_t j = 1 + (uint32_t)(nc_rand(&s) % (CAP - 1));

		ck_assert_int_eq(nc_trie_delete(rt->t, ids[j]), 0);
		ids[j] = (uint32_t)add_ok(rt->t, socket_rule(next++));
	}
	/* Full: one more is refused, not written anywhere. */
	r = socket_rule(next);
	ck_assert_int_eq(nc_trie_add(rt->t, &r), -ENOSPC);
	atomic_store(&rt->stop, 1);
	pthread_join(th, NULL);
	ck_assert_uint_eq(atomic_load(&rt->wrong), 0);
	ck_assert_int_eq(nc_trie_get_stats(rt->t, &st), 0);
	ck_assert_uint_eq(st.rules, CAP);
	ck_assert_uint_eq(st.exact_rules, CAP);
	/* Every live rule still answers for its own flow. */
	for (uint32_t i = 0; i < CAP; i++) {
		struct nc_trie_rule back;
		char src[INET_ADDRSTRLEN];
		struct in_addr a;

		ck_assert_int_eq(nc_trie_get_rule(rt->t, ids[i], &back), 0);
		a.s_addr = back.src.v4;
		inet_ntop(AF_INET, &a, src, sizeof(src));
		ck_assert_uint_eq(LOOKUP(rt->t, "192.0.2.1", src, IPPROTO_TCP, back.sport.lo, 80),
				  ids[i]);
	}
	nc_trie_free(rt->t);
	free(rt->v);
	free(rt);
}
END_TEST

static Suite *
trie_suite(void)
{
	Suite *s = suite_create("trie");
	TCase *tc = tcase_create("semantics");

	tcase_add_test(tc, wildcard_source);
	tcase_add_test(tc, overlapping_prefixes);
	tcase_add_test(tc, priority_ties);
	tcase_add_test(tc, port_masks_and_ranges);
	tcase_add_test(tc, families);
	tcase_add_test(tc, ipv6_prefixes);
	tcase_add_test(tc, no_ports);
	tcase_add_test(tc, proto_and_host_bits);
	tcase_add_test(tc, front_stage);
	tcase_add_test(tc, front_stage_port);
	tcase_add_test(tc, bulk_matches_single);
	suite_add_tcase(s, tc);

	tc = tcase_create("api");
	tcase_add_test(tc, create_errors);
	tcase_add_test(tc, sized_structs);
	tcase_add_test(tc, add_errors);
	tcase_add_test(tc, dump_and_format);
	tcase_add_test(tc, rules_overlap);
	tcase_add_test(tc, rules_same);
	suite_add_tcase(s, tc);

	tc = tcase_create("differential");
	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, diff_100);
	tcase_add_test(tc, diff_1000);
	tcase_add_test(tc, diff_front_stage);
	tcase_add_test(tc, diff_front_heavy);
	tcase_add_test(tc, diff_port_table);
#ifdef NC_TEST_SNAPSHOT
	tcase_add_test(tc, snapshot_without_memory);
	tcase_add_test(tc, snapshot_dead_answers);
	tcase_add_test(tc, snapshot_orders);
	tcase_add_test(tc, snapshot_free_mid_search);
	tcase_add_test(tc, snapshot_pick_memory);
#endif
	suite_add_tcase(s, tc);

	/* At scale: the suite "slow" (CK_INCLUDE_TAGS=scale), once, in the normal build. */
	tc = tcase_create("scale");
	tcase_set_tags(tc, "scale");
	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, diff_10000);
	tcase_add_test(tc, diff_updates);
	suite_add_tcase(s, tc);

	tc = tcase_create("rcu");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, rcu_readers_and_writer);
	tcase_add_test(tc, front_stage_full_churn);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr;
	int failed;

#ifdef NC_TEST_SNAPSHOT
	char *eal[] = { "test_trie_snapshot", "--no-huge", "-m", "1024", "--no-pci",
			"--no-shconf", "--no-telemetry", "--log-level=lib.eal:error", "-l", "0" };

	/* rte_acl's memory; the tests fork, and each child uses the parent's EAL. */
	cpu_set_t all;

	if (rte_eal_init(RTE_DIM(eal), eal) < 0) {
		fprintf(stderr, "test_trie_snapshot: rte_eal_init failed\n");
		return EXIT_FAILURE;
	}
	/* EAL pinned this thread to one CPU; the readers and the builder should not share it. */
	CPU_ZERO(&all);
	for (int c = 0; c < CPU_SETSIZE; c++)
		CPU_SET(c, &all);
	sched_setaffinity(0, sizeof(all), &all);
#endif
	sr = srunner_create(trie_suite());

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
