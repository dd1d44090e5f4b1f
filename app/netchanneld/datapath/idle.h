/* SPDX-License-Identifier: BSD-3-Clause */
/* Workers that sleep when there is nothing to do (idle.c): the worker loop's side. */
#ifndef NCD_DP_IDLE_H
#define NCD_DP_IDLE_H

#include "datapath/datapath.h"

struct ncd;

/* adaptive: spin this long after the last work (the second half pausing), then sleep. */
#define NCD_IDLE_SPIN_US 200
/* interrupt: spin only this long, enough for a client's answer to the last packet. */
#define NCD_IDLE_INT_SPIN_US 50
/* The longest sleep: what a client's first send or a timer may wait for. */
#define NCD_IDLE_MAX_SLEEP_US 1000
/* Sleeps start this long after the last work and double up to the longest. */
#define NCD_IDLE_NAP_MIN_US 10

/** On the worker's lcore, before its loop: its timer slack, its clock of work. */
void ncd_idle_start(struct ncd_worker *w);

/**
 * At the end of each loop of a worker whose idle mode is not poll: note
 * whether the loop did anything; spin, back off, or sleep until a queue's
 * wake fd fires or NCD_IDLE_MAX_SLEEP_US pass.
 */
void ncd_idle_loop(struct ncd *d, struct ncd_worker *w);

#endif
