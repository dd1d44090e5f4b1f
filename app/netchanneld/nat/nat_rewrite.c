/* SPDX-License-Identifier: BSD-3-Clause */
/* The NAT rewrite (see nat.h): headers and checksums, nothing else. */
#include <string.h>
#include <netinet/in.h>

#include "nat/nat_rewrite.h"

const char *const ncd_nat_result_names[NCD_NAT_NRESULTS] = {
	[NCD_NAT_OK] = "ok",
	[NCD_NAT_FRAGMENT] = "fragment",
	[NCD_NAT_NO_PORTS] = "no_ports",
	[NCD_NAT_FAMILY] = "family",
	[NCD_NAT_SHORT] = "short",
};

static inline void
wr16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

/*
 * RFC 1624, eqn. 3: HC' = ~(~HC + ~m + m'). delta already holds the sum of
 * ~m + m' over every 16-bit word that changes.
 */
static inline uint16_t
csum_update(uint16_t hc, uint32_t delta)
{
	return (uint16_t)~ncd_csum_fold((uint16_t)~hc + ncd_csum_fold(delta));
}

/* ~old + new over n bytes (even), as 16-bit words. */
static inline uint32_t
delta_of(const uint8_t *old, const uint8_t *new, unsigned int n)
{
	uint32_t d = 0;

	for (unsigned int i = 0; i < n; i += 2)
		d += (uint16_t)~ncd_rd16(old + i) + ncd_rd16(new + i);
	return d;
}

/* Where a protocol keeps a checksum that covers the pseudo-header, or -1. */
static int
l4_csum_at(uint8_t proto, uint8_t family)
{
	switch (proto) {
	case IPPROTO_TCP: return 16;
	case IPPROTO_UDP:
	case IPPROTO_UDPLITE: return 6;
	case IPPROTO_ICMPV6: return family == NC_TRIE_AF_INET6 ? 2 : -1;
	default: return -1;
	}
}

enum ncd_nat_result
ncd_nat_rewrite(uint8_t *f, uint32_t avail, const struct ncd_parsed *p,
		const struct ncd_nat_xlate *x, unsigned int flags)
{
	const struct nc_trie_key *k = &p->key;
	bool v4 = k->family == NC_TRIE_AF_INET;
	unsigned int alen = v4 ? 4 : 16;
	uint8_t *ip = f + p->l2_len, *l4 = f + p->l4_off;
	uint8_t *src = ip + (v4 ? 12 : 8), *dst = src + alen;
	uint32_t l3_end = p->l2_len + p->l3_len;
	int at = l4_csum_at(k->proto, k->family);
	uint32_t pdelta = 0, l4delta = 0;      /* pseudo-header (addresses), transport header */
	bool has_ports = !(k->flags & NC_TRIE_KEY_F_NOPORTS);
	bool full = false;                     /* IPv6 UDP without a checksum: compute it */

	if (k->family != NC_TRIE_AF_INET && k->family != NC_TRIE_AF_INET6)
		return NCD_NAT_FAMILY;
	if (x->flags & NCD_NAT_PORTS) {
		if (p->frag != NCD_FRAG_NONE)
			return NCD_NAT_FRAGMENT;
		if (!has_ports || (k->proto != IPPROTO_TCP && k->proto != IPPROTO_UDP &&
				   k->proto != IPPROTO_UDPLITE))
			return NCD_NAT_NO_PORTS;
	}
	/* A later fragment carries no transport header; a first one must hold the checksum. */
	if (p->frag == NCD_FRAG_LATER)
		at = -1;
	if (at >= 0 && (uint32_t)p->l4_off + (uint32_t)at + 2 > l3_end)
		return p->frag == NCD_FRAG_FIRST ? NCD_NAT_FRAGMENT : NCD_NAT_SHORT;
	if (at >= 0 && p->l4_off + (uint32_t)at + 2 > avail)
		return NCD_NAT_SHORT;
	if ((x->flags & NCD_NAT_PORTS) && p->l4_off + 4u > avail)
		return NCD_NAT_SHORT;
	if (at >= 0 && k->proto == IPPROTO_UDP && ncd_rd16(l4 + at) == 0) {
		if (v4)
			at = -1;               /* no checksum, and none is needed */
		else if (p->frag != NCD_FRAG_NONE)
			return NCD_NAT_FRAGMENT;
		else if (l3_end > avail)
			return NCD_NAT_SHORT;
		else
			full = true;
	}

	/* Work out every change before writing any, so a refusal leaves the frame as it was. */
	if (x->flags & NCD_NAT_SRC) {
		pdelta += delta_of(src, x->src, alen);
		memcpy(src, x->src, alen);
	}
	if (x->flags & NCD_NAT_DST) {
		pdelta += delta_of(dst, x->dst, alen);
		memcpy(dst, x->dst, alen);
	}
	if (x->flags & NCD_NAT_SPORT) {
		l4delta += (uint16_t)~ncd_rd16(l4) + x->sport;
		wr16(l4, x->sport);
	}
	if (x->flags & NCD_NAT_DPORT) {
		l4delta += (uint16_t)~ncd_rd16(l4 + 2) + x->dport;
		wr16(l4 + 2, x->dport);
	}
	if (v4) {
		if (flags & NCD_NAT_F_IP_CSUM_OFFLOAD)
			wr16(ip + 10, 0);
		else if (x->flags & NCD_NAT_ADDRS)
			wr16(ip + 10, csum_update(ncd_rd16(ip + 10), pdelta));
	}
	if (full) {
		/* Pseudo-header (addresses, length, next header) and the whole datagram. */
		uint32_t len = l3_end - p->l4_off, s;
		uint16_t c;

		wr16(l4 + at, 0);
		s = ncd_csum_sum(src, 32) + (len >> 16) + (len & 0xffff) + k->proto +
		    ncd_csum_sum(l4, len);
		c = (uint16_t)~ncd_csum_fold(s);
		wr16(l4 + at, c == 0 ? 0xffff : c);
	} else if (at >= 0 && (pdelta | l4delta)) {
		uint16_t c = csum_update(ncd_rd16(l4 + at), pdelta + l4delta);

		/* In UDP, 0 means "no checksum": the same value in one's complement is 0xffff. */
		if (c == 0 && (k->proto == IPPROTO_UDP || k->proto == IPPROTO_UDPLITE))
			c = 0xffff;
		wr16(l4 + at, c);
	}
	return NCD_NAT_OK;
}

void
ncd_nat_reverse_of(const struct nc_trie_key *p, const struct ncd_nat_xlate *x,
		   struct ncd_nat_xlate *rev)
{
	memset(rev, 0, sizeof(*rev));
	/* What x wrote at the destination goes back as the reply's source, and so on. */
	if (x->flags & NCD_NAT_DST) {
		rev->flags |= NCD_NAT_SRC;
		memcpy(rev->src, p->dst.a, 16);
	}
	if (x->flags & NCD_NAT_DPORT) {
		rev->flags |= NCD_NAT_SPORT;
		rev->sport = p->dport;
	}
	if (x->flags & NCD_NAT_SRC) {
		rev->flags |= NCD_NAT_DST;
		memcpy(rev->dst, p->src.a, 16);
	}
	if (x->flags & NCD_NAT_SPORT) {
		rev->flags |= NCD_NAT_DPORT;
		rev->dport = p->sport;
	}
}

void
ncd_nat_reply_key(const struct nc_trie_key *p, const struct ncd_nat_xlate *x,
		  struct nc_trie_key *r)
{
	memset(r, 0, sizeof(*r));
	r->family = p->family;
	r->proto = p->proto;
	r->flags = p->flags & NC_TRIE_KEY_F_NOPORTS;
	memcpy(r->src.a, x->flags & NCD_NAT_DST ? x->dst : p->dst.a, 16);
	memcpy(r->dst.a, x->flags & NCD_NAT_SRC ? x->src : p->src.a, 16);
	r->sport = x->flags & NCD_NAT_DPORT ? x->dport : p->dport;
	r->dport = x->flags & NCD_NAT_SPORT ? x->sport : p->sport;
}
