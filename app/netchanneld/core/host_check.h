/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What a config needs of the host it starts on, checked before EAL starts
 * (docs/config.md, "What --check-config checks").
 */
#ifndef NCD_CORE_HOST_CHECK_H
#define NCD_CORE_HOST_CHECK_H

#include "core/config.h"

/**
 * Check what the config needs of this host: the kernel interfaces its
 * ports take packets from (net_af_xdp, net_af_packet, net_pcap iface=) in
 * this network namespace, which the message names; its PCI devices; EAL's
 * lcores (-l), each a CPU the host has. Errors go to stderr as "NAME: KEY:
 * ...". The
 * hugepages it needs against those free: a warning ("NAME: warning: ..."),
 * the need being an estimate.
 *
 * @param cfg
 *   The config, loaded.
 * @param name
 *   Its name in messages (the path).
 * @param extra
 *   The command line's EAL arguments, after the config's.
 * @param nextra
 *   How many.
 * @return
 *   0, or -1 when something is missing (the start could not succeed).
 */
int ncd_config_check_host(const struct ncd_config *cfg, const char *name, char *const *extra,
			  int nextra);

/**
 * net.ipv4.conf.all.rp_filter in this network namespace: the kernel's
 * reverse path filter takes the larger of it and an interface's own.
 * @return 0, 1 (strict), 2 (loose), or -1 if it cannot be read
 */
int ncd_rp_filter_all(void);

#endif
