/* SPDX-License-Identifier: BSD-3-Clause */
/* DPDK telemetry endpoints /netchannel/..., converted from the views. */
#ifndef NCD_TELEMETRY_H
#define NCD_TELEMETRY_H

struct ncd;

/** Register the /netchannel/... telemetry endpoints. @return 0 or -1. */
int ncd_telemetry_init(struct ncd *d);

/** Make the telemetry endpoints answer with an error from now on (shutdown). */
void ncd_telemetry_close(struct ncd *d);

#endif
