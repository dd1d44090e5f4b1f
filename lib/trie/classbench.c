/* SPDX-License-Identifier: BSD-3-Clause */
/* ClassBench rule files and 5-tuple traces, and rule sets generated in their shape. */
#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>

#include "nc_trie_tools.h"

struct cursor {
	const char *p;
};

static void
skip_ws(struct cursor *c)
{
	while (*c->p == ' ' || *c->p == '\t' || *c->p == '\r' || *c->p == '\n')
		c->p++;
}

static int
parse_ulong(struct cursor *c, int base, unsigned long max, unsigned long *out)
{
	char *end;

	skip_ws(c);
	if (!isxdigit((unsigned char)*c->p))
		return -1;
	errno = 0;
	*out = strtoul(c->p, &end, base);
	if (errno || end == c->p || *out > max)
		return -1;
	c->p = end;
	return 0;
}

static int
expect(struct cursor *c, char ch)
{
	skip_ws(c);
	if (*c->p != ch)
		return -1;
	c->p++;
	return 0;
}

/* "a.b.c.d/len" into an IPv4 prefix. */
static int
parse_prefix(struct cursor *c, union nc_trie_addr *a, uint8_t *len)
{
	unsigned long v, l, addr = 0;

	for (int i = 0; i < 4; i++) {
		if ((i && expect(c, '.')) || parse_ulong(c, 10, 255, &v))
			return -1;
		addr = addr << 8 | v;
	}
	if (expect(c, '/') || parse_ulong(c, 10, 32, &l))
		return -1;
	memset(a, 0, sizeof(*a));
	a->v4 = htonl((uint32_t)addr);
	*len = (uint8_t)l;
	return 0;
}

static int
parse_range(struct cursor *c, struct nc_trie_port *p)
{
	unsigned long lo, hi;

	if (parse_ulong(c, 10, 65535, &lo) || expect(c, ':') || parse_ulong(c, 10, 65535, &hi))
		return -1;
	p->kind = NC_TRIE_PORT_RANGE;
	p->lo = (uint16_t)lo;
	p->hi = (uint16_t)hi;
	return 0;
}

static int
parse_rule(const char *line, struct nc_trie_rule *r, const char **what)
{
	struct cursor c = { line };
	unsigned long v, m;

	memset(r, 0, sizeof(*r));
	r->family = NC_TRIE_AF_INET;
	skip_ws(&c);
	if (*c.p == '@')
		c.p++;
	*what = "source prefix";
	if (parse_prefix(&c, &r->src, &r->src_len))
		return -1;
	*what = "destination prefix";
	if (parse_prefix(&c, &r->dst, &r->dst_len))
		return -1;
	*what = "source port range";
	if (parse_range(&c, &r->sport))
		return -1;
	*what = "destination port range";
	if (parse_range(&c, &r->dport))
		return -1;
	*what = "protocol value/mask";
	if (parse_ulong(&c, 16, 255, &v) || expect(&c, '/') || parse_ulong(&c, 16, 255, &m))
		return -1;
	r->proto = (uint8_t)v;
	r->proto_mask = (uint8_t)m;
	/* An optional flags/mask column follows; it is not part of the 5-tuple. */
	skip_ws(&c);
	if (*c.p != '\0') {
		*what = "flags value/mask";
		if (parse_ulong(&c, 16, 0xffff, &v) || expect(&c, '/') ||
		    parse_ulong(&c, 16, 0xffff, &m))
			return -1;
		skip_ws(&c);
		if (*c.p != '\0') {
			*what = "end of line";
			return -1;
		}
	}
	return 0;
}

typedef int (*line_fn)(const char *line, void *item, const char **what);

/* Read every non-blank line of a file into an array of items of the given size. */
static int
read_lines(const char *path, size_t item_size, line_fn fn, void **out, uint32_t *n, char *err,
	   size_t errlen)
{
	FILE *f = fopen(path, "r");
	char *line = NULL;
	size_t cap = 0, alloc = 0;
	uint32_t count = 0, lineno = 0;
	char *items = NULL;
	int ret = 0;

	if (f == NULL) {
		ret = -errno;
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return ret;
	}
	while (getline(&line, &cap, f) > 0) {
		const char *what = "line";
		const char *p = line;

		lineno++;
		while (isspace((unsigned char)*p))
			p++;
		if (*p == '\0' || *p == '#')
			continue;
		if (count == alloc) {
			size_t na = alloc ? alloc * 2 : 1024;
			char *ni = realloc(items, na * item_size);

			if (ni == NULL) {
				ret = -ENOMEM;
				snprintf(err, errlen, "%s: out of memory", path);
				goto out;
			}
			items = ni;
			alloc = na;
		}
		if (fn(line, items + count * item_size, &what) != 0) {
			ret = -EINVAL;
			snprintf(err, errlen, "%s:%u: bad %s", path, lineno, what);
			goto out;
		}
		count++;
	}
	if (ferror(f)) {
		ret = -EIO;
		snprintf(err, errlen, "%s: read error", path);
	}
out:
	free(line);
	fclose(f);
	if (ret) {
		free(items);
		return ret;
	}
	*out = items;
	*n = count;
	return 0;
}

static int
rule_line(const char *line, void *item, const char **what)
{
	struct nc_trie_rule *r = item;

	if (parse_rule(line, r, what))
		return -1;
	*what = "rule (non-contiguous mask or inverted range)";
	return nc_trie_rule_validate(r) ? -1 : 0;
}

int
nc_classbench_read(const char *path, struct nc_trie_rule **rules, uint32_t *n, char *err,
		   size_t errlen)
{
	void *items = NULL;
	int ret = read_lines(path, sizeof(**rules), rule_line, &items, n, err, errlen);

	if (ret)
		return ret;
	*rules = items;
	if (*n > NC_TRIE_PRIO_MAX + 1u) {
		snprintf(err, errlen, "%s: more than %u rules", path, NC_TRIE_PRIO_MAX + 1u);
		free(items);
		return -E2BIG;
	}
	for (uint32_t i = 0; i < *n; i++)
		(*rules)[i].priority = *n - 1 - i;
	return 0;
}

static int
trace_line(const char *line, void *item, const char **what)
{
	struct nc_trie_key *k = item;
	struct cursor c = { line };
	unsigned long sa, da, sp, dp, pr;

	*what = "trace line (need SA DA SP DP PROTO in decimal)";
	if (parse_ulong(&c, 10, UINT32_MAX, &sa) || parse_ulong(&c, 10, UINT32_MAX, &da) ||
	    parse_ulong(&c, 10, 65535, &sp) || parse_ulong(&c, 10, 65535, &dp) ||
	    parse_ulong(&c, 10, 255, &pr))
		return -1;
	if (*c.p != '\0' && !isspace((unsigned char)*c.p))
		return -1;
	memset(k, 0, sizeof(*k));
	k->family = NC_TRIE_AF_INET;
	k->src.v4 = htonl((uint32_t)sa);
	k->dst.v4 = htonl((uint32_t)da);
	k->sport = (uint16_t)sp;
	k->dport = (uint16_t)dp;
	k->proto = (uint8_t)pr;
	return 0;
}

int
nc_classbench_read_trace(const char *path, struct nc_trie_key **keys, uint32_t *n, char *err,
			 size_t errlen)
{
	void *items = NULL;
	int ret = read_lines(path, sizeof(**keys), trace_line, &items, n, err, errlen);

	if (ret == 0)
		*keys = items;
	return ret;
}

static void
rand_prefix_fill(uint8_t *a, unsigned int bytes, unsigned int len, uint64_t *s)
{
	for (unsigned int b = 0; b < bytes; b++) {
		uint8_t r = (uint8_t)nc_rand(s);

		if (b * 8 >= len)
			a[b] = r;
		else if (len - b * 8 < 8)
			a[b] = (uint8_t)((a[b] & (0xff << (8 - (len - b * 8)))) |
					 (r & (0xff >> (len - b * 8))));
	}
}

static uint16_t
rand_port_in(const struct nc_trie_port *p, uint64_t *s)
{
	uint32_t lo = 0, hi = 65535;

	if (p->kind == NC_TRIE_PORT_RANGE) {
		lo = p->lo;
		hi = p->hi;
	} else if (p->kind == NC_TRIE_PORT_MASK) {
		return (uint16_t)((p->lo & p->hi) | (nc_rand(s) & (uint16_t)~p->hi));
	}
	return (uint16_t)(lo + nc_rand(s) % (hi - lo + 1));
}

void
nc_key_inside(const struct nc_trie_rule *r, struct nc_trie_key *k, uint64_t *s)
{
	unsigned int bytes;

	memset(k, 0, sizeof(*k));
	k->family = r->family != NC_TRIE_AF_ANY ? r->family :
		    (nc_rand(s) & 1) ? NC_TRIE_AF_INET6 : NC_TRIE_AF_INET;
	bytes = k->family == NC_TRIE_AF_INET6 ? 16 : 4;
	memcpy(k->dst.a, r->dst.a, 16);
	memcpy(k->src.a, r->src.a, 16);
	rand_prefix_fill(k->dst.a, bytes, r->family ? r->dst_len : 0, s);
	rand_prefix_fill(k->src.a, bytes, r->family ? r->src_len : 0, s);
	k->proto = (uint8_t)((r->proto & r->proto_mask) | (nc_rand(s) & (uint8_t)~r->proto_mask));
	k->dport = rand_port_in(&r->dport, s);
	k->sport = rand_port_in(&r->sport, s);
}

void
nc_trace_generate(const struct nc_trie_rule *rules, uint32_t nrules, struct nc_trie_key *keys,
		  uint32_t n, uint64_t seed)
{
	uint64_t s = seed | 1;

	for (uint32_t i = 0; i < n; i++) {
		struct nc_trie_key *k = &keys[i];

		if (nrules > 0 && (nc_rand(&s) & 1)) {
			nc_key_inside(&rules[nc_rand(&s) % nrules], k, &s);
			continue;
		}
		memset(k, 0, sizeof(*k));
		k->family = NC_TRIE_AF_INET;
		k->src.v4 = (uint32_t)nc_rand(&s);
		k->dst.v4 = (uint32_t)nc_rand(&s);
		k->sport = (uint16_t)nc_rand(&s);
		k->dport = (uint16_t)nc_rand(&s);
		k->proto = (uint8_t)nc_rand(&s);
	}
}

/* An address of prefix length len in the network of a seed prefix (net, nlen). */
static void
gen_prefix(const union nc_trie_addr *net, unsigned int nlen, unsigned int len,
	   union nc_trie_addr *a, uint64_t *s)
{
	unsigned int keep = len < nlen ? len : nlen;

	if (keep > 8)
		keep = 8 + (unsigned int)(nc_rand(s) % (keep - 7));
	memset(a, 0, sizeof(*a));
	memcpy(a->a, net->a, 4);
	rand_prefix_fill(a->a, 4, keep, s);
	a->v4 &= len ? htonl(~0u << (32 - len)) : 0;
}

/* A seed rule whose prefix (src or dst) is at least min(len, 8) long, if a few tries find one. */
static const struct nc_trie_rule *
pick_net(const struct nc_trie_rule *like, uint32_t nlike, bool src, unsigned int len, uint64_t *s)
{
	const unsigned int want = len < 8 ? len : 8;
	const struct nc_trie_rule *r = &like[nc_rand(s) % nlike];

	for (int i = 0; i < 8 && (src ? r->src_len : r->dst_len) < want; i++)
		r = &like[nc_rand(s) % nlike];
	return r;
}

void
nc_classbench_generate(const struct nc_trie_rule *like, uint32_t nlike, struct nc_trie_rule *out,
		       uint32_t n, uint64_t seed)
{
	uint64_t s = seed | 1;

	for (uint32_t i = 0; i < n; i++) {
		struct nc_trie_rule *r = &out[i];
		const struct nc_trie_rule *shape, *ports, *proto, *sn, *dn;

		memset(r, 0, sizeof(*r));
		r->family = NC_TRIE_AF_INET;
		r->priority = n - 1 - i;
		if (nlike == 0)
			continue;
		shape = &like[nc_rand(&s) % nlike];
		ports = &like[nc_rand(&s) % nlike];
		proto = &like[nc_rand(&s) % nlike];
		sn = pick_net(like, nlike, true, shape->src_len, &s);
		dn = pick_net(like, nlike, false, shape->dst_len, &s);
		r->src_len = shape->src_len;
		r->dst_len = shape->dst_len;
		gen_prefix(&sn->src, sn->src_len, r->src_len, &r->src, &s);
		gen_prefix(&dn->dst, dn->dst_len, r->dst_len, &r->dst, &s);
		r->sport = ports->sport;
		r->dport = ports->dport;
		r->proto = proto->proto;
		r->proto_mask = proto->proto_mask;
	}
}

int
nc_classbench_write(FILE *f, const struct nc_trie_rule *rules, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		const struct nc_trie_rule *r = &rules[i];
		const uint8_t *sa = r->src.a, *da = r->dst.a;
		uint16_t slo, shi, dlo, dhi;

		nc_trie_port_range(&r->sport, &slo, &shi);
		nc_trie_port_range(&r->dport, &dlo, &dhi);
		if (fprintf(f, "@%u.%u.%u.%u/%u\t%u.%u.%u.%u/%u\t%u : %u\t%u : %u\t0x%02X/0x%02X\n",
			    sa[0], sa[1], sa[2], sa[3], r->src_len, da[0], da[1], da[2], da[3],
			    r->dst_len, slo, shi, dlo, dhi, r->proto, r->proto_mask) < 0)
			return -EIO;
	}
	return ferror(f) ? -EIO : 0;
}
