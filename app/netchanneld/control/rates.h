/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Rates: the control thread samples the ports' and channels' counters about
 * once a second and keeps the last two samples; a view's rates are the
 * difference over that interval. The workers are not touched.
 */
#ifndef NCD_CONTROL_RATES_H
#define NCD_CONTROL_RATES_H

#include <jansson.h>
#include <stdint.h>

struct ncd;

/** The samples' memory (one per channel id). @return 0, or -1 (out of memory) */
int ncd_rates_init(struct ncd *d);

/** Free it. */
void ncd_rates_free(void);

/** Take a sample if a second has passed since the last (control thread, every poll). */
void ncd_rates_tick(struct ncd *d);

/**
 * A port's rates over the last interval: rx, delivered, to_kernel and drops
 * in packets a second, and the NIC's rx and tx in packets and bits a
 * second. @return the object, or JSON null before two samples
 */
json_t *ncd_rates_port(unsigned int port);

/**
 * A worker's load over the last interval: its loops a second, packets a
 * second, the share of loops whose rx bursts brought packets (busy_share),
 * and packets per such loop. @return the object, or JSON null
 */
json_t *ncd_rates_worker(unsigned int worker);

/**
 * A channel's: hits, delivered, drops and tx in packets a second, delivered
 * and tx in bits a second. @return the object, or JSON null before two
 * samples of this channel (a new channel, or its id reused)
 */
json_t *ncd_rates_channel(const struct ncd *d, uint32_t id);

#endif
