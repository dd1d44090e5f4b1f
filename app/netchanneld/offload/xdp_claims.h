/* SPDX-License-Identifier: BSD-3-Clause */
/* Exception mode xdp: channels' claims in their ports' XDP programs (xdp_claims.c). */
#ifndef NCD_XDP_CLAIMS_H
#define NCD_XDP_CLAIMS_H

#include "channel/channel.h"

/**
 * The XDP claims' part in channels' lives (ncd_channel_hooks_add()): a
 * channel's keys claimed on every port in exception mode xdp once it is
 * published, and taken back before it leaves the classifier.
 */
extern const struct ncd_channel_hooks ncd_xdp_channel_hooks;

/** Forget every channel's claims (shutdown; the maps go with the ports). */
void ncd_xdp_claims_close(void);

#endif
