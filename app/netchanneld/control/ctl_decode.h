/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The control protocol's decoder: what a message from a client must be
 * before the daemon acts on it. No daemon state, so the fuzzer drives it.
 */
#ifndef NCD_CTL_DECODE_H
#define NCD_CTL_DECODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/config.h"
#include "nc_proto.h"

/**
 * Check a request's framing: its header, its type, its body's size.
 *
 * @param msg        the datagram as received
 * @param n          its length (at most what was received)
 * @param truncated  the datagram was longer than the receive buffer
 * @param body_len   set to the body's length on success
 * @return 0; -EMSGSIZE (truncated), -EBADMSG (no header, bad magic, reserved
 *   bits, or a length that is not the datagram's), -EOPNOTSUPP (unknown type),
 *   -EINVAL (a body of the wrong size for its type)
 */
int ncd_ctl_check(const uint8_t *msg, size_t n, bool truncated, uint32_t *body_len);

/**
 * Decode a CHANNEL_CREATE body into a channel's config: its name, rule,
 * action and limits, with the daemon's defaults for what it leaves 0.
 *
 * @param m       the body (ncd_ctl_check() passed it)
 * @param len     the body's length: a NAT channel's ends with a struct nc_ctl_nat
 * @param nports  the daemon's ports: a transmitting channel names one
 * @param cc      filled in
 * @return 0, or -EINVAL
 */
int ncd_ctl_decode_create(const struct nc_ctl_create *m, size_t len, unsigned int nports,
			  struct ncd_channel_conf *cc);

/**
 * Decode a meter (CHANNEL_METER's body, or CHANNEL_CREATE's tail) into a
 * channel's meter, checked as the config's channels[].meter is.
 *
 * @param w    the meter as the wire has it
 * @param mc   filled in; kind NCD_METER_NONE when every field is 0 (no meter)
 * @param err  the reason, when it is refused
 * @param len  err's size
 * @return 0, -EINVAL or -ENOMEM
 */
int ncd_ctl_decode_meter(const struct nc_ctl_meter *w, struct ncd_meter_conf *mc, char *err,
			 size_t len);

/**
 * Decode a CLI body into a NUL-terminated line.
 *
 * @param m     the body (ncd_ctl_check() passed it)
 * @param len   the body's length
 * @param line  NC_CLI_MAX_LINE bytes
 * @param json  set to whether JSON output is asked for
 * @return 0, or -EINVAL (unknown flags)
 */
int ncd_ctl_decode_cli(const struct nc_ctl_cli *m, size_t len, char *line, bool *json);

#endif
