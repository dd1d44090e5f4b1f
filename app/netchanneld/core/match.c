/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The match syntax (match.h): the words of a config's "match", of the CLI's
 * "channel create" and of ncctl, parsed in one place.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include <rte_ether.h>

#include "core/match.h"

int
ncd_parse_prefix(const char *s, union nc_trie_addr *a, uint8_t *len, uint8_t *family, char *err,
		 size_t errlen)
{
	char buf[INET6_ADDRSTRLEN + 8], *slash, *end;
	unsigned long l;
	int af;

	memset(a, 0, sizeof(*a));
	if (strcmp(s, "any") == 0) {
		*len = 0;
		*family = NC_TRIE_AF_ANY;
		return 0;
	}
	if (strlen(s) >= sizeof(buf)) {
		snprintf(err, errlen, "'%s' is not an address", s);
		return -1;
	}
	strcpy(buf, s);
	slash = strchr(buf, '/');
	if (slash != NULL)
		*slash = '\0';
	af = strchr(buf, ':') ? AF_INET6 : AF_INET;
	if (inet_pton(af, buf, a->a) != 1) {
		snprintf(err, errlen, "'%s' is not an IPv4 or IPv6 address", s);
		return -1;
	}
	*family = af == AF_INET6 ? NC_TRIE_AF_INET6 : NC_TRIE_AF_INET;
	l = af == AF_INET6 ? 128 : 32;
	if (slash != NULL) {
		unsigned long max = l;

		errno = 0;
		l = strtoul(slash + 1, &end, 10);
		if (errno || end == slash + 1 || *end != '\0' || l > max) {
			snprintf(err, errlen, "'%s': prefix length must be 0..%lu", s, max);
			return -1;
		}
	}
	*len = (uint8_t)l;
	return 0;
}

static int
parse_u16(const char *s, uint16_t *v)
{
	char *end;
	unsigned long x;

	if (!isdigit((unsigned char)*s))
		return -1;
	errno = 0;
	x = strtoul(s, &end, 0);
	if (errno || *end != '\0' || x > 65535)
		return -1;
	*v = (uint16_t)x;
	return 0;
}

int
ncd_parse_port(const char *s, struct nc_trie_port *p, char *err, size_t errlen)
{
	char buf[32], *sep;

	memset(p, 0, sizeof(*p));
	if (strcmp(s, "any") == 0)
		return 0;
	if (strlen(s) >= sizeof(buf))
		goto bad;
	strcpy(buf, s);
	if ((sep = strchr(buf, '-')) != NULL) {
		*sep = '\0';
		p->kind = NC_TRIE_PORT_RANGE;
		if (parse_u16(buf, &p->lo) || parse_u16(sep + 1, &p->hi))
			goto bad;
		if (p->lo > p->hi) {
			snprintf(err, errlen, "port range '%s' is inverted", s);
			return -1;
		}
		return 0;
	}
	if ((sep = strchr(buf, '/')) != NULL) {
		uint16_t inv;

		*sep = '\0';
		p->kind = NC_TRIE_PORT_MASK;
		if (parse_u16(buf, &p->lo) || parse_u16(sep + 1, &p->hi))
			goto bad;
		inv = (uint16_t)~p->hi;
		if ((inv & (uint16_t)(inv + 1)) != 0) {
			snprintf(err, errlen, "port mask in '%s' is not a contiguous prefix", s);
			return -1;
		}
		return 0;
	}
	p->kind = NC_TRIE_PORT_RANGE;
	if (parse_u16(buf, &p->lo))
		goto bad;
	p->hi = p->lo;
	return 0;
bad:
	snprintf(err, errlen, "'%s' is not a port, lo-hi range, value/mask or any", s);
	return -1;
}

int
ncd_parse_proto(const char *s, uint8_t *proto, uint8_t *mask, char *err, size_t errlen)
{
	static const struct {
		const char *name;
		uint8_t proto;
	} names[] = {
		{ "tcp", IPPROTO_TCP }, { "udp", IPPROTO_UDP }, { "udplite", IPPROTO_UDPLITE },
		{ "sctp", IPPROTO_SCTP }, { "icmp", IPPROTO_ICMP }, { "icmpv6", IPPROTO_ICMPV6 },
	};
	uint16_t v;

	*proto = 0;
	*mask = 0;
	if (strcmp(s, "any") == 0)
		return 0;
	for (unsigned int i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strcmp(s, names[i].name) == 0) {
			*proto = names[i].proto;
			*mask = 0xff;
			return 0;
		}
	if (parse_u16(s, &v) == 0 && v <= 255) {
		*proto = (uint8_t)v;
		*mask = 0xff;
		return 0;
	}
	snprintf(err, errlen, "'%s' is not a protocol (tcp, udp, udplite, sctp, icmp, icmpv6, "
		 "0..255 or any)", s);
	return -1;
}

int
ncd_parse_lcores(const char *s, uint64_t *bits)
{
	const char *p = s;

	*bits = 0;
	while (*p) {
		char *end;
		unsigned long lo = strtoul(p, &end, 10), hi = lo;

		if (end == p || lo >= 64)
			return -1;
		p = end;
		if (*p == '-') {
			hi = strtoul(p + 1, &end, 10);
			if (end == p + 1 || hi >= 64 || hi < lo)
				return -1;
			p = end;
		}
		for (unsigned long i = lo; i <= hi; i++)
			*bits |= UINT64_C(1) << i;
		/* --lcores' "@CPUS": where they run (a CPU, a range, or a list in parentheses). */
		if (*p == '@') {
			p++;
			if (*p == '(') {
				p = strchr(p, ')');
				if (p == NULL)
					return -1;
				p++;
			} else {
				p += strspn(p, "0123456789-");
			}
		}
		if (*p == ',')
			p++;
		else if (*p != '\0')
			return -1;
	}
	return *bits ? 0 : -1;
}

int
ncd_parse_mac(const char *s, uint8_t mac[6])
{
	struct rte_ether_addr a;

	if (rte_ether_unformat_addr(s, &a) != 0)
		return -1;
	memcpy(mac, a.addr_bytes, 6);
	return 0;
}

bool
ncd_valid_name(const char *s, size_t max, bool dots)
{
	size_t n = strnlen(s, max);

	if (n == 0 || n >= max)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)s[i]) && s[i] != '_' && s[i] != '-' &&
		    !(dots && s[i] == '.'))
			return false;
	return true;
}

