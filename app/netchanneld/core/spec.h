/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A channel's spec, as the config, the CLI ("channel create") and the
 * control socket (CHANNEL_CREATE) give it: one table of limits and
 * defaults, one check of the whole (with nat_conf.h for a NAT
 * translation). Each front end only turns its own syntax into a struct
 * ncd_channel_conf. No daemon state: the unit tests and fuzzers call it.
 */
#ifndef NCD_CHANNEL_SPEC_H
#define NCD_CHANNEL_SPEC_H

#include <stddef.h>
#include <stdint.h>

#include "core/config.h"

/** A channel's numeric options. */
enum ncd_chan_opt {
	NCD_OPT_PRIORITY,
	NCD_OPT_RING_SIZE,
	NCD_OPT_QUEUE_BYTES,
	NCD_OPT_MEMORY_LIMIT_ORDER,   /* the seed's queue_bytes: 2^order (0: not given) */
	NCD_OPT_QUEUE,                /* offload: the rx queue to steer to (-1: none) */
	NCD_OPT_NAT_PORT,             /* a NAT translation's dport or sport */
	NCD_OPT_N
};

/** An option's name (as the config and the CLI spell it), range and default. */
struct ncd_chan_limit {
	const char *name;
	int64_t lo, hi, dflt;
};

/** The limits and defaults, by enum ncd_chan_opt. */
extern const struct ncd_chan_limit ncd_chan_limits[NCD_OPT_N];

/**
 * Parse a number for option o ("1024", "0x400") and check its range.
 * @return 0, or -EINVAL with err saying why ("'x' is not a number", "... is out of range")
 */
int ncd_chan_opt_parse(enum ncd_chan_opt o, const char *s, int64_t *v, char *err, size_t errlen);

/**
 * Whether name is a channel name: 1-31 letters, digits, '_', '-' or '.'.
 * @return 0, or -EINVAL with err saying so
 */
int ncd_channel_name_check(const char *name, char *err, size_t errlen);

/** A spec with every default: deliver, no match constraint, the default limits. */
void ncd_channel_conf_init(struct ncd_channel_conf *cc);

/**
 * Check a whole spec, as any front end filled it in. Every channel the
 * daemon creates passed this.
 *
 * @param nports  the daemon's ports: a port index must be below it
 * @param field   set to the option at fault, as the config's path below the
 *                channel spells it ("tx", "action.nat", "ring_size", ...)
 * @return 0, or -EINVAL with err saying why
 */
int ncd_channel_conf_check(const struct ncd_channel_conf *cc, unsigned int nports, const char **field,
			   char *err, size_t errlen);

#endif
