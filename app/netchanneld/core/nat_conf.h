/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A NAT channel's translation (struct ncd_nat_conf), as the config and the
 * CLI write it (words) and as CHANNEL_CREATE sends it (struct nc_ctl_nat):
 * one decoder of each, and one check against the channel's rule. No daemon
 * state: the unit tests and fuzzers call them.
 */
#ifndef NCD_NAT_CONF_H
#define NCD_NAT_CONF_H

#include <stddef.h>

#include "core/config.h"
#include "nc_proto.h"

/**
 * One word of a NAT translation and its value: dst or src (one address),
 * dport or sport (1..65535), via (a MAC), reverse (no value: pass NULL).
 * The out port ("port") is the front end's: it names ports its own way.
 * @return 0, or -EINVAL with err saying why (it names the value, not the key)
 */
int ncd_nat_option(struct ncd_nat_conf *nc, const char *key, const char *value, char *err,
		   size_t errlen);

/**
 * A translation as CHANNEL_CREATE sends it: its framing is checked here
 * (known flags, reserved bytes, an address's family and padding), its
 * meaning by ncd_nat_conf_check().
 * @return 0, or -EINVAL
 */
int ncd_nat_from_wire(const struct nc_ctl_nat *n, struct ncd_nat_conf *nc);

/**
 * Whether a translation can apply to its channel's rule: something to
 * write, one family, the rule's family, ports only for TCP, UDP and
 * UDP-Lite, an out port below nports.
 * @param field  set to the option at fault ("action.nat", "action.nat.port")
 * @return 0, or -EINVAL with err saying why
 */
int ncd_nat_conf_check(const struct nc_trie_rule *rule, const struct ncd_nat_conf *nc,
		       unsigned int nports, const char **field, char *err, size_t errlen);

#endif
