/* SPDX-License-Identifier: BSD-3-Clause */
/* The counters' names that are not field names: the parser's verdicts. */
#include "core/stats.h"

const char *const ncd_verdict_names[NCD_PKT_NVERDICTS] = {
	[NCD_PKT_OK] = "ok",
	[NCD_PKT_NOT_IP] = "not_ip",
	[NCD_PKT_OTHERHOST] = "other_host",
	[NCD_PKT_TOO_DEEP] = "too_deep",
	[NCD_PKT_TRUNC_L2] = "trunc_l2",
	[NCD_PKT_TRUNC_L3] = "trunc_l3",
	[NCD_PKT_BAD_VERSION] = "bad_version",
	[NCD_PKT_BAD_IHL] = "bad_ihl",
	[NCD_PKT_BAD_CSUM] = "bad_csum",
	[NCD_PKT_BAD_LEN] = "bad_len",
	[NCD_PKT_BAD_EXT] = "bad_ext",
	[NCD_PKT_TRUNC_L4] = "trunc_l4",
};
