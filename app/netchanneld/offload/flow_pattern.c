/* SPDX-License-Identifier: BSD-3-Clause */
/* Rules as rte_flow patterns (see flow_pattern.h). */
#include <errno.h>
#include <string.h>

#include <rte_byteorder.h>
#include <rte_ether.h>
#include <rte_ip.h>

#include "offload/flow_pattern.h"

/* A port match as spec and mask, when it is one: any, a value/prefix mask, or an aligned range. */
static bool
port_as_mask(const struct nc_trie_port *p, uint16_t *spec, uint16_t *mask)
{
	uint16_t lo, hi;
	uint32_t size;

	nc_trie_port_range(p, &lo, &hi);
	size = (uint32_t)hi - lo + 1;
	if ((size & (size - 1)) != 0 || (lo & (size - 1)) != 0)
		return false;
	*mask = (uint16_t)~(size - 1);
	*spec = lo;
	return true;
}

static void
prefix_mask(uint8_t *mask, unsigned int bytes, unsigned int len)
{
	memset(mask, 0, bytes);
	for (unsigned int i = 0; i < len; i++)
		mask[i / 8] |= (uint8_t)(0x80 >> (i % 8));
}

static void
masked_copy(uint8_t *dst, const uint8_t *src, const uint8_t *mask, unsigned int bytes)
{
	for (unsigned int i = 0; i < bytes; i++)
		dst[i] = src[i] & mask[i];
}

static int
one_pattern(const struct nc_trie_rule *r, uint8_t family, struct ncd_flow_pattern *p,
	    const char **why)
{
	uint16_t sp = 0, spm = 0, dp = 0, dpm = 0;
	bool has_ports = r->sport.kind != NC_TRIE_PORT_ANY || r->dport.kind != NC_TRIE_PORT_ANY;
	bool l4 = r->proto_mask == 0xff && (r->proto == IPPROTO_TCP || r->proto == IPPROTO_UDP ||
					    r->proto == IPPROTO_SCTP);
	struct rte_flow_item *it = p->items;

	memset(p, 0, sizeof(*p));
	if (r->proto_mask != 0 && r->proto_mask != 0xff) {
		*why = "a partial protocol mask";
		return -ENOTSUP;
	}
	if (has_ports && !l4) {
		*why = "ports without TCP, UDP or SCTP";
		return -ENOTSUP;
	}
	if (!port_as_mask(&r->sport, &sp, &spm) || !port_as_mask(&r->dport, &dp, &dpm)) {
		*why = "a port range that is not a prefix";
		return -ENOTSUP;
	}
	/* Any Ethernet frame; the NIC finds the IP header. */
	(it++)->type = RTE_FLOW_ITEM_TYPE_ETH;
	if (family == NC_TRIE_AF_INET) {
		struct rte_ipv4_hdr *s = &p->l3_spec.v4.hdr, *m = &p->l3_mask.v4.hdr;
		uint8_t am[4];

		prefix_mask(am, 4, r->src_len);
		memcpy(&m->src_addr, am, 4);
		masked_copy((uint8_t *)&s->src_addr, r->src.a, am, 4);
		prefix_mask(am, 4, r->dst_len);
		memcpy(&m->dst_addr, am, 4);
		masked_copy((uint8_t *)&s->dst_addr, r->dst.a, am, 4);
		m->next_proto_id = r->proto_mask;
		s->next_proto_id = r->proto & r->proto_mask;
		/* The classifier reads no ports in a fragment, first or not: nor may the NIC. */
		if (has_ports)
			m->fragment_offset = rte_cpu_to_be_16(RTE_IPV4_HDR_MF_FLAG |
							      RTE_IPV4_HDR_OFFSET_MASK);
		it->type = RTE_FLOW_ITEM_TYPE_IPV4;
	} else {
		struct rte_flow_item_ipv6 *s = &p->l3_spec.v6, *m = &p->l3_mask.v6;

		prefix_mask(m->hdr.src_addr, 16, r->src_len);
		masked_copy(s->hdr.src_addr, r->src.a, m->hdr.src_addr, 16);
		prefix_mask(m->hdr.dst_addr, 16, r->dst_len);
		masked_copy(s->hdr.dst_addr, r->dst.a, m->hdr.dst_addr, 16);
		m->hdr.proto = r->proto_mask;
		s->hdr.proto = r->proto & r->proto_mask;
		if (has_ports)
			m->has_frag_ext = 1;
		it->type = RTE_FLOW_ITEM_TYPE_IPV6;
	}
	it->spec = &p->l3_spec;
	it->mask = &p->l3_mask;
	it++;
	if (l4 && has_ports) {
		/* tcp, udp and sctp headers all start with the two ports. */
		rte_be16_t *s = (rte_be16_t *)&p->l4_spec, *m = (rte_be16_t *)&p->l4_mask;

		s[0] = rte_cpu_to_be_16(sp & spm);
		m[0] = rte_cpu_to_be_16(spm);
		s[1] = rte_cpu_to_be_16(dp & dpm);
		m[1] = rte_cpu_to_be_16(dpm);
		it->type = r->proto == IPPROTO_TCP ? RTE_FLOW_ITEM_TYPE_TCP :
			   r->proto == IPPROTO_UDP ? RTE_FLOW_ITEM_TYPE_UDP : RTE_FLOW_ITEM_TYPE_SCTP;
		it->spec = &p->l4_spec;
		it->mask = &p->l4_mask;
		it++;
	}
	it->type = RTE_FLOW_ITEM_TYPE_END;
	return 0;
}

int
ncd_flow_translate(const struct nc_trie_rule *r, struct ncd_flow_pattern p[2], const char **why)
{
	if (r->family != NC_TRIE_AF_ANY)
		return one_pattern(r, r->family, &p[0], why) < 0 ? -ENOTSUP : 1;
	if (one_pattern(r, NC_TRIE_AF_INET, &p[0], why) < 0 ||
	    one_pattern(r, NC_TRIE_AF_INET6, &p[1], why) < 0)
		return -ENOTSUP;
	return 2;
}

static bool
prefixes_overlap(const uint8_t *a, unsigned int alen, const uint8_t *b, unsigned int blen)
{
	unsigned int len = alen < blen ? alen : blen;

	for (unsigned int i = 0; i < len; i++) {
		uint8_t bit = (uint8_t)(0x80 >> (i % 8));

		if ((a[i / 8] & bit) != (b[i / 8] & bit))
			return false;
	}
	return true;
}

static bool
ports_overlap(const struct nc_trie_port *a, const struct nc_trie_port *b)
{
	uint16_t alo, ahi, blo, bhi;

	nc_trie_port_range(a, &alo, &ahi);
	nc_trie_port_range(b, &blo, &bhi);
	return alo <= bhi && blo <= ahi;
}

bool
ncd_rules_overlap(const struct nc_trie_rule *a, const struct nc_trie_rule *b)
{
	uint8_t pm = a->proto_mask & b->proto_mask;

	if (a->family != NC_TRIE_AF_ANY && b->family != NC_TRIE_AF_ANY && a->family != b->family)
		return false;
	if ((a->proto & pm) != (b->proto & pm))
		return false;
	/* A family-any rule has no address constraint (both lengths are 0). */
	return prefixes_overlap(a->src.a, a->src_len, b->src.a, b->src_len) &&
	       prefixes_overlap(a->dst.a, a->dst_len, b->dst.a, b->dst_len) &&
	       ports_overlap(&a->sport, &b->sport) && ports_overlap(&a->dport, &b->dport);
}

static bool
bytes_match(const uint8_t *pkt, const uint8_t *spec, const uint8_t *mask, unsigned int n)
{
	for (unsigned int i = 0; i < n; i++)
		if ((pkt[i] & mask[i]) != (spec[i] & mask[i]))
			return false;
	return true;
}

bool
ncd_flow_match(const struct rte_flow_item *items, const uint8_t *f, uint32_t len)
{
	uint32_t off = RTE_ETHER_HDR_LEN, l4 = 0;
	uint16_t type;
	uint8_t proto = 0;

	if (len < RTE_ETHER_HDR_LEN)
		return false;
	type = (uint16_t)(f[12] << 8 | f[13]);
	for (const struct rte_flow_item *it = items; it->type != RTE_FLOW_ITEM_TYPE_END; it++) {
		switch (it->type) {
		case RTE_FLOW_ITEM_TYPE_ETH:
			break;
		case RTE_FLOW_ITEM_TYPE_IPV4: {
			const struct rte_ipv4_hdr *s = it->spec, *m = it->mask;
			const struct rte_ipv4_hdr *h = (const void *)(f + off);

			if (type != RTE_ETHER_TYPE_IPV4 || len < off + sizeof(*h) ||
			    (h->version_ihl >> 4) != 4 || (h->version_ihl & 15) < 5)
				return false;
			if (!bytes_match((const uint8_t *)&h->src_addr, (const uint8_t *)&s->src_addr,
					 (const uint8_t *)&m->src_addr, 8) ||
			    (h->next_proto_id & m->next_proto_id) != (s->next_proto_id & m->next_proto_id) ||
			    (h->fragment_offset & m->fragment_offset) !=
			    (s->fragment_offset & m->fragment_offset))
				return false;
			proto = h->next_proto_id;
			l4 = off + (h->version_ihl & 15u) * 4;
			break;
		}
		case RTE_FLOW_ITEM_TYPE_IPV6: {
			const struct rte_flow_item_ipv6 *s = it->spec, *m = it->mask;
			const struct rte_ipv6_hdr *h = (const void *)(f + off);

			if (type != RTE_ETHER_TYPE_IPV6 || len < off + sizeof(*h) ||
			    (f[off] >> 4) != 6)
				return false;
			if (!bytes_match(h->src_addr, s->hdr.src_addr, m->hdr.src_addr, 32) ||
			    (h->proto & m->hdr.proto) != (s->hdr.proto & m->hdr.proto))
				return false;
			/* This reader sees no extension headers: a fragment header is one. */
			if (m->has_frag_ext && h->proto == IPPROTO_FRAGMENT)
				return false;
			proto = h->proto;
			l4 = off + sizeof(*h);
			break;
		}
		case RTE_FLOW_ITEM_TYPE_TCP:
		case RTE_FLOW_ITEM_TYPE_UDP:
		case RTE_FLOW_ITEM_TYPE_SCTP: {
			uint8_t want = it->type == RTE_FLOW_ITEM_TYPE_TCP ? IPPROTO_TCP :
				       it->type == RTE_FLOW_ITEM_TYPE_UDP ? IPPROTO_UDP : IPPROTO_SCTP;

			if (l4 == 0 || proto != want || len < l4 + 4 ||
			    !bytes_match(f + l4, it->spec, it->mask, 4))
				return false;
			break;
		}
		default:
			return false;
		}
	}
	return true;
}
