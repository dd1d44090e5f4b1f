/* SPDX-License-Identifier: BSD-3-Clause */
/* A NAT channel's translation, decoded from the config's and the CLI's words or from the wire,
 * and checked against its rule (nat_conf.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <netinet/in.h>

#include "core/match.h"
#include "core/nat_conf.h"
#include "core/spec.h"

/* A NAT translation's family once its dst and src were of different ones. */
#define NAT_FAMILIES_DIFFER 0xff

int
ncd_nat_option(struct ncd_nat_conf *nc, const char *key, const char *value, char *err,
	       size_t errlen)
{
	if (strcmp(key, "reverse") == 0) {
		nc->reverse = true;
		return 0;
	}
	if (strcmp(key, "dst") == 0 || strcmp(key, "src") == 0) {
		bool dst = key[0] == 'd';
		union nc_trie_addr a;
		uint8_t len, fam;
		char e[128];

		if (ncd_parse_prefix(value, &a, &len, &fam, e, sizeof(e)) != 0 || fam == 0 ||
		    len != (fam == NC_TRIE_AF_INET ? 32 : 128)) {
			snprintf(err, errlen, "'%s': expected one IPv4 or IPv6 address", value);
			return -EINVAL;
		}
		memcpy(dst ? nc->x.dst : nc->x.src, a.a, 16);
		nc->x.flags |= dst ? NCD_NAT_DST : NCD_NAT_SRC;
		/* ncd_channel_conf_check() says if the two differ. */
		nc->family = nc->family == 0 || nc->family == fam ? fam : NAT_FAMILIES_DIFFER;
		return 0;
	}
	if (strcmp(key, "dport") == 0 || strcmp(key, "sport") == 0) {
		int64_t v;

		if (ncd_chan_opt_parse(NCD_OPT_NAT_PORT, value, &v, err, errlen) != 0)
			return -EINVAL;
		if (key[0] == 'd') {
			nc->x.dport = (uint16_t)v;
			nc->x.flags |= NCD_NAT_DPORT;
		} else {
			nc->x.sport = (uint16_t)v;
			nc->x.flags |= NCD_NAT_SPORT;
		}
		return 0;
	}
	if (strcmp(key, "via") == 0) {
		if (ncd_parse_mac(value, nc->via) != 0) {
			snprintf(err, errlen, "'%s': expected a MAC address such as 02:00:00:00:00:01",
				 value);
			return -EINVAL;
		}
		nc->has_via = true;
		return 0;
	}
	snprintf(err, errlen, "unknown nat option '%s' (dst, dport, src, sport, port, via, reverse)",
		 key);
	return -EINVAL;
}

int
ncd_nat_conf_check(const struct nc_trie_rule *r, const struct ncd_nat_conf *nc,
		   unsigned int nports, const char **field, char *err, size_t len)
{
	*field = "action.nat";
	if (nc->family == NAT_FAMILIES_DIFFER) {
		snprintf(err, len, "dst and src are of different families");
		return -EINVAL;
	}
	if (!(nc->x.flags & (NCD_NAT_ADDRS | NCD_NAT_PORTS))) {
		snprintf(err, len, "nothing to translate: give dst, dport, src or sport");
		return -EINVAL;
	}
	if (((nc->x.flags & NCD_NAT_DPORT) && nc->x.dport == 0) ||
	    ((nc->x.flags & NCD_NAT_SPORT) && nc->x.sport == 0)) {
		snprintf(err, len, "a port to write is 1..65535");
		return -EINVAL;
	}
	if (nc->has_port && nc->port >= nports) {
		*field = "action.nat.port";
		snprintf(err, len, "no port %u", nc->port);
		return -EINVAL;
	}
	if (nc->family != 0 && r->family != nc->family) {
		snprintf(err, len, "its addresses are %s, but the match %s: give the match's dst, "
			 "src or family", nc->family == NC_TRIE_AF_INET ? "IPv4" : "IPv6",
			 r->family == NC_TRIE_AF_ANY ? "takes both families" :
			 nc->family == NC_TRIE_AF_INET ? "is IPv6" : "is IPv4");
		return -EINVAL;
	}
	if ((nc->x.flags & NCD_NAT_PORTS) &&
	    (r->proto_mask != 0xff || (r->proto != IPPROTO_TCP && r->proto != IPPROTO_UDP &&
				       r->proto != IPPROTO_UDPLITE))) {
		snprintf(err, len, "rewriting ports needs a match with proto tcp, udp or udplite");
		return -EINVAL;
	}
	return 0;
}

/* The wire's flags of a NAT translation, and the rewrite's that they stand for. */
static const struct {
	uint32_t wire, nat;
} nat_flags[] = {
	{ NC_NAT_F_DST, NCD_NAT_DST }, { NC_NAT_F_DPORT, NCD_NAT_DPORT },
	{ NC_NAT_F_SRC, NCD_NAT_SRC }, { NC_NAT_F_SPORT, NCD_NAT_SPORT },
};

int
ncd_nat_from_wire(const struct nc_ctl_nat *n, struct ncd_nat_conf *nc)
{
	if ((n->flags & ~(NC_NAT_F_DST | NC_NAT_F_DPORT | NC_NAT_F_SRC | NC_NAT_F_SPORT |
			  NC_NAT_F_PORT | NC_NAT_F_VIA | NC_NAT_F_REVERSE)) ||
	    n->reserved != 0 || n->reserved2 != 0)
		return -EINVAL;
	/* Addresses: of the family given, and nothing beyond an IPv4 address's 4 bytes. */
	if (n->flags & (NC_NAT_F_DST | NC_NAT_F_SRC)) {
		static const uint8_t zero[12];

		if ((n->family != NC_TRIE_AF_INET && n->family != NC_TRIE_AF_INET6) ||
		    (n->family == NC_TRIE_AF_INET &&
		     (memcmp(n->dst + 4, zero, 12) || memcmp(n->src + 4, zero, 12))))
			return -EINVAL;
	} else if (n->family != 0) {
		return -EINVAL;
	}
	memset(nc, 0, sizeof(*nc));
	for (size_t i = 0; i < sizeof(nat_flags) / sizeof(nat_flags[0]); i++)
		if (n->flags & nat_flags[i].wire)
			nc->x.flags |= nat_flags[i].nat;
	if (n->flags & NC_NAT_F_DST)
		memcpy(nc->x.dst, n->dst, 16);
	if (n->flags & NC_NAT_F_SRC)
		memcpy(nc->x.src, n->src, 16);
	nc->x.dport = n->flags & NC_NAT_F_DPORT ? n->dport : 0;
	nc->x.sport = n->flags & NC_NAT_F_SPORT ? n->sport : 0;
	nc->family = n->family;
	nc->has_port = n->flags & NC_NAT_F_PORT;
	nc->port = nc->has_port ? n->port : 0;
	nc->has_via = n->flags & NC_NAT_F_VIA;
	if (nc->has_via)
		memcpy(nc->via, n->via, 6);
	nc->reverse = n->flags & NC_NAT_F_REVERSE;
	return 0;
}

