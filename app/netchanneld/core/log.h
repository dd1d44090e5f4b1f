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

#include <stdbool.h>

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

/**
 * Whether a line of this kind (its format string) about this uid may be
 * logged now, as the kernel's net_ratelimit() decides: NCD_LOG_BURST lines
 * of a kind and uid a second, the rest suppressed and counted, so that no
 * user can flood the log. For the control thread only.
 *
 * @param suppressed
 *   Set to the lines of this kind and uid suppressed since the last one
 *   logged, for the line to say so.
 */
bool ncd_log_allow(const char *fmt, unsigned int uid, unsigned int *suppressed);

/**
 * Say, for each kind and uid whose lines were suppressed and that logged
 * nothing since, how many (once a second at most; from the control poll).
 */
void ncd_log_flush_suppressed(void);

#define NCD_LOG_BURST 1            /**< lines of a kind and uid a second, at most */

#endif
