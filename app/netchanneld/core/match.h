/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The match syntax: addresses and prefixes, ports and ranges, protocols,
 * MACs, names and lcore lists, as the config, the CLI and ncctl write them.
 */
#ifndef NCD_CORE_MATCH_H
#define NCD_CORE_MATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nc_trie.h"

/**
 * Parse an address or prefix ("192.0.2.1", "2001:db8::/32", "any").
 * @return 0, or -1 with a message in err.
 */
int ncd_parse_prefix(const char *s, union nc_trie_addr *a, uint8_t *len, uint8_t *family,
		     char *err, size_t errlen);

/**
 * Parse a port match: "53", "1024-65535", "0x1000/0xf000", "any".
 * @return 0, or -1 with a message in err.
 */
int ncd_parse_port(const char *s, struct nc_trie_port *p, char *err, size_t errlen);

/**
 * Parse a protocol: tcp, udp, udplite, sctp, icmp, icmpv6, a number 0..255, or any.
 * @return 0 (mask set to 0 for any, 0xff otherwise), or -1 with a message in err.
 */
int ncd_parse_proto(const char *s, uint8_t *proto, uint8_t *mask, char *err, size_t errlen);

/** Parse a MAC "02:00:00:00:00:01". @return 0 or -1. */
int ncd_parse_mac(const char *s, uint8_t mac[6]);

/**
 * Whether s is a name netchanneld accepts: 1..max-1 letters, digits, '_' or
 * '-' (and '.' if dots), NUL terminated within max bytes.
 */
bool ncd_valid_name(const char *s, size_t max, bool dots);

/**
 * Parse an lcore list as EAL's -l takes it ("0-1,3"), or --lcores with
 * where each runs ("0@0,1@1,2@1": lcores 0, 1 and 2), into a bitmap of the
 * lcores. Not --lcores' groups of lcores in parentheses.
 * @return 0 or -1.
 */
int ncd_parse_lcores(const char *s, uint64_t *bits);

#endif
