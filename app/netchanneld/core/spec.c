/* SPDX-License-Identifier: BSD-3-Clause */
/* A channel's spec: limits, NAT words, the whole check (spec.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>

#include "core/match.h"
#include "core/nat_conf.h"
#include "core/spec.h"

const struct ncd_chan_limit ncd_chan_limits[NCD_OPT_N] = {
	[NCD_OPT_PRIORITY] = { "priority", 0, NC_TRIE_PRIO_MAX, 0 },
	[NCD_OPT_RING_SIZE] = { "ring_size", 1, 1 << 20, 1024 },
	[NCD_OPT_QUEUE_BYTES] = { "queue_bytes", 4096, INT64_C(1) << 31, 1 << 20 },
	[NCD_OPT_MEMORY_LIMIT_ORDER] = { "memory_limit_order", 12, 31, 0 },
	[NCD_OPT_QUEUE] = { "queue", 0, NCD_MAX_QUEUES - 1, -1 },
	[NCD_OPT_NAT_PORT] = { "port", 1, 65535, 0 },
};

static int
out_of_range(enum ncd_chan_opt o, int64_t v, char *err, size_t errlen)
{
	const struct ncd_chan_limit *l = &ncd_chan_limits[o];

	if (v >= l->lo && v <= l->hi)
		return 0;
	snprintf(err, errlen, "%" PRId64 " is out of range %" PRId64 "..%" PRId64, v, l->lo, l->hi);
	return -EINVAL;
}

int
ncd_chan_opt_parse(enum ncd_chan_opt o, const char *s, int64_t *v, char *err, size_t errlen)
{
	char *end;
	long long n;

	errno = 0;
	n = strtoll(s, &end, 0);
	if (*s == '\0' || *end != '\0' || errno != 0) {
		snprintf(err, errlen, "'%s' is not a number", s);
		return -EINVAL;
	}
	*v = n;
	return out_of_range(o, n, err, errlen);
}

int
ncd_channel_name_check(const char *name, char *err, size_t errlen)
{
	if (ncd_valid_name(name, NCD_NAME_MAX, true))
		return 0;
	snprintf(err, errlen, "'%.*s': a name is 1-31 letters, digits, '_', '-' or '.'", 64, name);
	return -EINVAL;
}

void
ncd_channel_conf_init(struct ncd_channel_conf *cc)
{
	memset(cc, 0, sizeof(*cc));
	cc->action = NC_ACTION_DELIVER;
	cc->rule.priority = (uint32_t)ncd_chan_limits[NCD_OPT_PRIORITY].dflt;
	cc->ring_size = (uint32_t)ncd_chan_limits[NCD_OPT_RING_SIZE].dflt;
	cc->queue_bytes = (uint64_t)ncd_chan_limits[NCD_OPT_QUEUE_BYTES].dflt;
}

int
ncd_channel_conf_check(const struct ncd_channel_conf *cc, unsigned int nports, const char **field,
		       char *err, size_t errlen)
{
	static const enum ncd_chan_opt ranged[] = { NCD_OPT_PRIORITY, NCD_OPT_RING_SIZE,
						    NCD_OPT_QUEUE_BYTES };
	const int64_t val[] = { cc->rule.priority, cc->ring_size, (int64_t)cc->queue_bytes };

	*field = "name";
	if (ncd_channel_name_check(cc->name, err, errlen) != 0)
		return -EINVAL;
	for (size_t i = 0; i < sizeof(ranged) / sizeof(ranged[0]); i++) {
		*field = ncd_chan_limits[ranged[i]].name;
		if (cc->queue_bytes > INT64_MAX || out_of_range(ranged[i], val[i], err, errlen) != 0)
			return -EINVAL;
	}
	*field = "queue";
	if (cc->steer && out_of_range(NCD_OPT_QUEUE, cc->queue, err, errlen) != 0)
		return -EINVAL;
	*field = "match";
	if (nc_trie_rule_validate(&cc->rule) != 0) {
		snprintf(err, errlen, "the rule is not valid (a mask or range, or a family)");
		return -EINVAL;
	}
	if (cc->action == NC_ACTION_NAT &&
	    ncd_nat_conf_check(&cc->rule, &cc->nat, nports, field, err, errlen) != 0)
		return -EINVAL;
	*field = "tx";
	if (cc->tx && cc->action != NC_ACTION_DELIVER) {
		snprintf(err, errlen, "only a deliver channel has a client to transmit");
		return -EINVAL;
	}
	*field = "consumers";
	if (cc->shared && cc->action != NC_ACTION_DELIVER) {
		snprintf(err, errlen, "only a deliver channel has consumers to share it");
		return -EINVAL;
	}
	*field = "port";
	if (cc->tx && cc->port >= nports) {
		snprintf(err, errlen, "no port %u", cc->port);
		return -EINVAL;
	}
	*field = NULL;
	return 0;
}
