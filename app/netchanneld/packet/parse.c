/* SPDX-License-Identifier: BSD-3-Clause */
#include <stdbool.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include "packet/parse.h"

#define ETH_HLEN 14
#define VLAN_HLEN 4
#define ETH_P_IP 0x0800
#define ETH_P_IPV6 0x86dd
#define ETH_P_8021Q 0x8100
#define ETH_P_8021AD 0x88a8
#define IPV6_HLEN 40
#define MAX_EXT_HEADERS 8

/*
 * Whether an IPv4 header of len bytes (a multiple of 4) sums to all ones
 * (RFC 1071). 32-bit words into a 64-bit sum, in host order: a ones'
 * complement sum is the same in either byte order up to a byte swap, and
 * all ones is its own swap. A few instructions, where 16-bit big-endian
 * words took a quarter of a miss's cycles.
 */
static inline bool
ip_csum_ok(const uint8_t *h, unsigned int len)
{
	uint64_t s = 0;

	for (unsigned int i = 0; i < len; i += 4) {
		uint32_t w;

		memcpy(&w, h + i, sizeof(w));
		s += w;
	}
	s = (s & 0xffffffff) + (s >> 32);
	s = (s & 0xffffffff) + (s >> 32);
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	return s == 0xffff;
}

static inline int
has_ports(uint8_t proto)
{
	return proto == IPPROTO_TCP || proto == IPPROTO_UDP || proto == IPPROTO_UDPLITE ||
	       proto == IPPROTO_SCTP;
}

/* Read the ports at l4 if the protocol has them; l4_end bounds the IP payload. */
static enum ncd_verdict
parse_ports(const uint8_t *frame, uint32_t avail, uint32_t l4, uint32_t l4_end,
	    struct nc_trie_key *k)
{
	if (!has_ports(k->proto)) {
		k->flags |= NC_TRIE_KEY_F_NOPORTS;
		return NCD_PKT_OK;
	}
	if (k->flags & NC_TRIE_KEY_F_NOPORTS)
		return NCD_PKT_OK;      /* a fragment: no ports to trust */
	if (l4 + 4 > l4_end)
		return NCD_PKT_TRUNC_L4;
	if (l4 + 4 > avail)
		return NCD_PKT_TOO_DEEP;
	k->sport = ncd_rd16(frame + l4);
	k->dport = ncd_rd16(frame + l4 + 2);
	return NCD_PKT_OK;
}

#define IPV4_OPT_EOL 0
#define IPV4_OPT_NOP 1
#define IPV4_OPT_LSRR 131
#define IPV4_OPT_SSRR 137

/* Whether IPv4 options (opt[0..len), in the frame) hold a loose or strict source route. */
static bool
ipv4_source_route(const uint8_t *opt, uint32_t len)
{
	for (uint32_t off = 0; off < len;) {
		if (opt[off] == IPV4_OPT_EOL)
			break;
		if (opt[off] == IPV4_OPT_NOP) {
			off++;
			continue;
		}
		if (opt[off] == IPV4_OPT_LSRR || opt[off] == IPV4_OPT_SSRR)
			return true;
		if (off + 1 >= len || opt[off + 1] < 2)
			break;
		off += opt[off + 1];
	}
	return false;
}

static enum ncd_verdict
parse_ipv4(const uint8_t *f, uint32_t avail, uint32_t frame_len, uint32_t l3,
	   unsigned int flags, struct ncd_parsed *out)
{
	const uint8_t *ip = f + l3;
	uint32_t ihl, tot;
	struct nc_trie_key *k = &out->key;

	if (l3 + 20 > frame_len || l3 + 20 > avail)
		return NCD_PKT_TRUNC_L3;
	if (ip[0] >> 4 != 4)
		return NCD_PKT_BAD_VERSION;
	ihl = (ip[0] & 0xf) * 4u;
	if (ihl < 20)
		return NCD_PKT_BAD_IHL;
	if (l3 + ihl > frame_len || l3 + ihl > avail)
		return NCD_PKT_TRUNC_L3;
	if (flags & NCD_PARSE_CSUM_BAD)
		return NCD_PKT_BAD_CSUM;
	if (!(flags & NCD_PARSE_CSUM_GOOD) && !ip_csum_ok(ip, ihl))
		return NCD_PKT_BAD_CSUM;
	tot = ncd_rd16(ip + 2);
	if (tot < ihl || l3 + tot > frame_len)
		return NCD_PKT_BAD_LEN;
	k->family = NC_TRIE_AF_INET;
	k->proto = ip[9];
	memcpy(k->src.a, ip + 12, 4);
	memcpy(k->dst.a, ip + 16, 4);
	out->source_route = ihl > 20 && ipv4_source_route(ip + 20, ihl - 20);
	/* MF set or a non-zero offset: a fragment. */
	if (ncd_rd16(ip + 6) & 0x3fff) {
		k->flags |= NC_TRIE_KEY_F_NOPORTS;
		out->frag = ncd_rd16(ip + 6) & 0x1fff ? NCD_FRAG_LATER : NCD_FRAG_FIRST;
	}
	out->l3_len = tot;
	out->l4_off = (uint16_t)(l3 + ihl);
	return parse_ports(f, avail, l3 + ihl, l3 + tot, k);
}

static enum ncd_verdict
parse_ipv6(const uint8_t *f, uint32_t avail, uint32_t frame_len, uint32_t l3,
	   struct ncd_parsed *out)
{
	const uint8_t *ip = f + l3;
	struct nc_trie_key *k = &out->key;
	uint32_t end, off;
	uint8_t nh;

	if (l3 + IPV6_HLEN > frame_len || l3 + IPV6_HLEN > avail)
		return NCD_PKT_TRUNC_L3;
	if (ip[0] >> 4 != 6)
		return NCD_PKT_BAD_VERSION;
	/* A payload length of 0 is a jumbogram: not on these links. */
	end = l3 + IPV6_HLEN + ncd_rd16(ip + 4);
	if (ncd_rd16(ip + 4) == 0 || end > frame_len)
		return NCD_PKT_BAD_LEN;
	k->family = NC_TRIE_AF_INET6;
	memcpy(k->src.a, ip + 8, 16);
	memcpy(k->dst.a, ip + 24, 16);
	nh = ip[6];
	off = l3 + IPV6_HLEN;
	for (int n = 0;; n++) {
		uint32_t len;

		switch (nh) {
		case IPPROTO_HOPOPTS:
		case IPPROTO_ROUTING:
		case IPPROTO_DSTOPTS:
		case 135: /* mobility */
		case IPPROTO_AH:
		case IPPROTO_FRAGMENT:
			if (off + 8 > end)
				return NCD_PKT_BAD_EXT;
			if (off + 8 > avail)
				return NCD_PKT_TOO_DEEP;
			break;
		default:
			break;
		}
		switch (nh) {
		case IPPROTO_ROUTING:
			/* Its type is the third byte (off + 8 <= avail above). */
			out->source_route |= f[off + 2] == 0;
			/* fall through */
		case IPPROTO_HOPOPTS:
		case IPPROTO_DSTOPTS:
		case 135:
			len = (f[off + 1] + 1u) * 8;
			break;
		case IPPROTO_AH:
			len = (f[off + 1] + 2u) * 4;
			break;
		case IPPROTO_FRAGMENT:
			/* Any fragment, first included: ports are not to be matched. */
			k->flags |= NC_TRIE_KEY_F_NOPORTS;
			out->frag = ncd_rd16(f + off + 2) & 0xfff8 ? NCD_FRAG_LATER : NCD_FRAG_FIRST;
			out->frag_hdr = (uint16_t)off;
			/* A later fragment's payload starts mid-datagram: no header to walk. */
			if (out->frag == NCD_FRAG_LATER) {
				k->proto = f[off];
				out->l3_len = end - l3;
				out->l4_off = (uint16_t)(off + 8);
				return NCD_PKT_OK;
			}
			len = 8;
			break;
		default:
			k->proto = nh;
			out->l3_len = end - l3;
			out->l4_off = (uint16_t)off;
			return parse_ports(f, avail, off, end, k);
		}
		if (n >= MAX_EXT_HEADERS || off + len > end)
			return NCD_PKT_BAD_EXT;
		nh = f[off];
		off += len;
	}
}

enum ncd_verdict
ncd_parse_slow(const uint8_t *f, uint32_t avail, uint32_t frame_len, const uint8_t port_mac[6],
	       unsigned int flags, struct ncd_parsed *out)
{
	uint32_t l3 = ETH_HLEN;
	uint16_t type;

	memset(&out->key, 0, sizeof(out->key));
	out->frag = NCD_FRAG_NONE;
	out->frag_hdr = 0;
	out->l4_off = 0;
	out->source_route = 0;
	if (avail > frame_len)
		avail = frame_len;
	if (avail < ETH_HLEN)
		return NCD_PKT_TRUNC_L2;
	/* Group bit clear: unicast, which must be ours to be classified. */
	if (port_mac != NULL && !(f[0] & 1) && memcmp(f, port_mac, 6) != 0)
		return NCD_PKT_OTHERHOST;
	type = ncd_rd16(f + 12);
	for (int tags = 0; type == ETH_P_8021Q || type == ETH_P_8021AD; tags++) {
		if (tags == 2)
			return NCD_PKT_NOT_IP;
		if (l3 + VLAN_HLEN > avail)
			return NCD_PKT_TRUNC_L2;
		type = ncd_rd16(f + l3 + 2);
		l3 += VLAN_HLEN;
	}
	out->l2_len = (uint16_t)l3;
	if (type == ETH_P_IP)
		return parse_ipv4(f, avail, frame_len, l3, flags, out);
	if (type == ETH_P_IPV6)
		return parse_ipv6(f, avail, frame_len, l3, out);
	return NCD_PKT_NOT_IP;
}
