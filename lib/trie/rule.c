/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A rule's semantics: validation, matching a key, overlap, its normal form, and the
 * entries (one prefix per field) its port ranges and family expand to.
 */
#include "nc_trie_private.h"

static bool
mask8_ok(uint8_t m)
{
	uint8_t inv = (uint8_t)~m;

	return (inv & (uint8_t)(inv + 1)) == 0;
}

static bool
mask16_ok(uint16_t m)
{
	uint16_t inv = (uint16_t)~m;

	return (inv & (uint16_t)(inv + 1)) == 0;
}

void
nc_trie_port_range(const struct nc_trie_port *p, uint16_t *lo, uint16_t *hi)
{
	switch (p->kind) {
	case NC_TRIE_PORT_RANGE:
		*lo = p->lo;
		*hi = p->hi;
		break;
	case NC_TRIE_PORT_MASK:
		*lo = p->lo & p->hi;
		*hi = *lo | (uint16_t)~p->hi;
		break;
	default:
		*lo = 0;
		*hi = UINT16_MAX;
	}
}

int
nc_trie_rule_validate(const struct nc_trie_rule *r)
{
	unsigned int w;

	if (r == NULL)
		return -EINVAL;
	switch (r->family) {
	case NC_TRIE_AF_ANY:
		if (r->dst_len || r->src_len)
			return -EINVAL;
		break;
	case NC_TRIE_AF_INET:
	case NC_TRIE_AF_INET6:
		w = addr_width(r->family);
		if (r->dst_len > w || r->src_len > w)
			return -EINVAL;
		break;
	default:
		return -EINVAL;
	}
	if (!mask8_ok(r->proto_mask))
		return -EINVAL;
	for (int i = 0; i < 2; i++) {
		const struct nc_trie_port *p = i ? &r->sport : &r->dport;

		switch (p->kind) {
		case NC_TRIE_PORT_ANY:
			break;
		case NC_TRIE_PORT_RANGE:
			if (p->lo > p->hi)
				return -EINVAL;
			break;
		case NC_TRIE_PORT_MASK:
			if (!mask16_ok(p->hi))
				return -EINVAL;
			break;
		default:
			return -EINVAL;
		}
	}
	if (r->priority > NC_TRIE_PRIO_MAX)
		return -EINVAL;
	return 0;
}

static bool
addr_match(const union nc_trie_addr *pfx, unsigned int len, const union nc_trie_addr *a,
	   unsigned int fam)
{
	uint64_t ph, pl, ah, al;

	addr_bits(pfx, fam, &ph, &pl);
	addr_bits(a, fam, &ah, &al);
	return (((ph ^ ah) & mask_hi(len)) | ((pl ^ al) & mask_lo(len))) == 0;
}

static bool
port_match(const struct nc_trie_port *p, uint16_t port, bool noports)
{
	uint16_t lo, hi;

	nc_trie_port_range(p, &lo, &hi);
	if (lo == 0 && hi == UINT16_MAX)
		return true;
	return !noports && port >= lo && port <= hi;
}

int
nc_trie_rule_matches(const struct nc_trie_rule *r, const struct nc_trie_key *k)
{
	bool noports = k->flags & NC_TRIE_KEY_F_NOPORTS;

	if (r->family != NC_TRIE_AF_ANY && r->family != k->family)
		return 0;
	if (((r->proto ^ k->proto) & r->proto_mask) != 0)
		return 0;
	if (r->family != NC_TRIE_AF_ANY &&
	    (!addr_match(&r->dst, r->dst_len, &k->dst, k->family) ||
	     !addr_match(&r->src, r->src_len, &k->src, k->family)))
		return 0;
	return port_match(&r->dport, k->dport, noports) &&
	       port_match(&r->sport, k->sport, noports);
}

int
nc_trie_rules_overlap(const struct nc_trie_rule *a, const struct nc_trie_rule *b)
{
	uint16_t alo, ahi, blo, bhi;

	if (a->family != NC_TRIE_AF_ANY && b->family != NC_TRIE_AF_ANY && a->family != b->family)
		return 0;
	if (((a->proto ^ b->proto) & a->proto_mask & b->proto_mask) != 0)
		return 0;
	/* Two prefixes meet when the shorter one matches the longer one's address. */
	if (a->family != NC_TRIE_AF_ANY && b->family != NC_TRIE_AF_ANY) {
		const struct nc_trie_rule *sd = a->dst_len <= b->dst_len ? a : b;
		const struct nc_trie_rule *ss = a->src_len <= b->src_len ? a : b;

		if (!addr_match(&sd->dst, sd->dst_len, sd == a ? &b->dst : &a->dst, a->family) ||
		    !addr_match(&ss->src, ss->src_len, ss == a ? &b->src : &a->src, a->family))
			return 0;
	}
	for (int i = 0; i < 2; i++) {
		nc_trie_port_range(i ? &a->sport : &a->dport, &alo, &ahi);
		nc_trie_port_range(i ? &b->sport : &b->dport, &blo, &bhi);
		if (alo > bhi || blo > ahi)
			return 0;
	}
	return 1;
}

/* Copy a valid rule with its values masked, so equal rules compare equal. */
void
nct_rule_normalize(struct nc_trie_rule *out, const struct nc_trie_rule *r)
{
	memset(out, 0, sizeof(*out));
	out->family = r->family;
	out->proto_mask = r->proto_mask;
	out->proto = r->proto & r->proto_mask;
	out->dst_len = r->dst_len;
	out->src_len = r->src_len;
	for (int i = 0; i < 2; i++) {
		const union nc_trie_addr *a = i ? &r->src : &r->dst;
		union nc_trie_addr *o = i ? &out->src : &out->dst;
		unsigned int len = i ? r->src_len : r->dst_len;
		unsigned int bytes = r->family == NC_TRIE_AF_INET6 ? 16 : 4;

		for (unsigned int b = 0; b < bytes && b * 8 < len; b++) {
			unsigned int keep = len - b * 8 >= 8 ? 8 : len - b * 8;

			o->a[b] = a->a[b] & (uint8_t)(0xff << (8 - keep));
		}
	}
	for (int i = 0; i < 2; i++) {
		const struct nc_trie_port *p = i ? &r->sport : &r->dport;
		struct nc_trie_port *o = i ? &out->sport : &out->dport;

		o->kind = p->kind;
		if (p->kind == NC_TRIE_PORT_RANGE) {
			o->lo = p->lo;
			o->hi = p->hi;
		} else if (p->kind == NC_TRIE_PORT_MASK) {
			o->lo = p->lo & p->hi;
			o->hi = p->hi;
		}
	}
	out->priority = r->priority;
}

bool
nct_rule_same(const struct nc_trie_rule *a, const struct nc_trie_rule *b)
{
	uint16_t alo, ahi, blo, bhi;

	if (a->family != b->family || a->proto != b->proto || a->proto_mask != b->proto_mask ||
	    a->dst_len != b->dst_len || a->src_len != b->src_len || a->priority != b->priority ||
	    memcmp(&a->dst, &b->dst, sizeof(a->dst)) || memcmp(&a->src, &b->src, sizeof(a->src)))
		return false;
	for (int i = 0; i < 2; i++) {
		nc_trie_port_range(i ? &a->sport : &a->dport, &alo, &ahi);
		nc_trie_port_range(i ? &b->sport : &b->dport, &blo, &bhi);
		if (alo != blo || ahi != bhi)
			return false;
	}
	return true;
}

int
nc_trie_rules_same(const struct nc_trie_rule *a, const struct nc_trie_rule *b)
{
	struct nc_trie_rule na, nb;

	nct_rule_normalize(&na, a);
	nct_rule_normalize(&nb, b);
	return nct_rule_same(&na, &nb);
}

/* Split an inclusive range into the fewest aligned prefixes. */
static unsigned int
port_prefixes(const struct nc_trie_port *p, struct prefix *out)
{
	uint16_t lo16, hi16;
	uint32_t lo, hi;
	unsigned int n = 0;

	nc_trie_port_range(p, &lo16, &hi16);
	lo = lo16;
	hi = hi16;
	while (lo <= hi) {
		unsigned int k = lo ? (unsigned int)__builtin_ctz(lo) : 16;

		if (k > 16)
			k = 16;
		while (k > 0 && lo + (UINT32_C(1) << k) - 1 > hi)
			k--;
		out[n].hi = (uint64_t)lo << 48;
		out[n].lo = 0;
		out[n].len = (uint8_t)(16 - k);
		n++;
		lo += UINT32_C(1) << k;
	}
	return n;
}

/*
 * Call fn for every entry of a rule (families x dport prefixes x sport
 * prefixes). Stops at the first non-zero return and returns it.
 */
int
nct_rule_foreach_entry(const struct nc_trie_rule *r, int (*fn)(void *, const struct entry *),
		   void *arg)
{
	struct prefix dp[MAX_PORT_PREFIXES], sp[MAX_PORT_PREFIXES];
	unsigned int nd = port_prefixes(&r->dport, dp);
	unsigned int ns = port_prefixes(&r->sport, sp);
	struct entry e;
	int ret;

	for (unsigned int fam = 0; fam < 2; fam++) {
		unsigned int af = fam ? NC_TRIE_AF_INET6 : NC_TRIE_AF_INET;

		if (r->family != NC_TRIE_AF_ANY && r->family != af)
			continue;
		e.fam = fam;
		addr_bits(&r->dst, af, &e.p[F_DST].hi, &e.p[F_DST].lo);
		e.p[F_DST].len = r->dst_len;
		addr_bits(&r->src, af, &e.p[F_SRC].hi, &e.p[F_SRC].lo);
		e.p[F_SRC].len = r->src_len;
		e.p[F_PROTO].hi = (uint64_t)r->proto << 56;
		e.p[F_PROTO].lo = 0;
		e.p[F_PROTO].len = (uint8_t)__builtin_popcount(r->proto_mask);
		for (unsigned int i = 0; i < nd; i++) {
			e.p[F_DPORT] = dp[i];
			for (unsigned int j = 0; j < ns; j++) {
				e.p[F_SPORT] = sp[j];
				ret = fn(arg, &e);
				if (ret)
					return ret;
			}
		}
	}
	return 0;
}

unsigned int
nct_rule_nentries(const struct nc_trie_rule *r)
{
	struct prefix tmp[MAX_PORT_PREFIXES];
	unsigned int fams = r->family == NC_TRIE_AF_ANY ? 2 : 1;

	return fams * port_prefixes(&r->dport, tmp) * port_prefixes(&r->sport, tmp);
}
