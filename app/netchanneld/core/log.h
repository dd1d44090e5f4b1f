/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The daemon's log: every line on stdout with its time first (unless
 * journald stamps it), and the PMDs' and their libraries' messages that are
 * harmless on a host like this one (no multiq qdisc for net_tap, no bpffs
 * for libxdp's dispatcher, ...) kept out of it: each such condition is said
 * once, in plain words, by ncd_log_notes(). With netchanneld.main at debug,
 * the original messages are logged too.
 */
#ifndef NCD_CORE_LOG_H
#define NCD_CORE_LOG_H

/**
 * Take over DPDK's log stream, and libbpf's and libxdp's messages (before
 * rte_eal_init(), so that the probes' messages pass through it).
 */
void ncd_log_setup(void);

/**
 * Say at NOTICE each harmless condition whose messages were kept out of the
 * log, once in the daemon's life (after the ports are up, and at each
 * control poll: a TAP made again says its messages again).
 */
void ncd_log_notes(void);

#endif
