/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Print the layouts of the protocol's and the API's structs, as C has them,
 * in JSON: test_layouts.py holds Python's copies (scripts/nc_wire.py, the
 * netchannel package) to them.
 */
#include <stddef.h>
#include <stdio.h>

#include "nc_proto.h"
#include "netchannel.h"

static void
fields(const char *name, const char *sep)
{
	printf("%s\"%s\": [", sep, name);
}

int
main(void)
{
	printf("{\"name_size\": %d, \"magic\": %u, \"version\": %u, \"sizes\": {", NC_NAME_SIZE,
	       (unsigned int)NC_CTL_MAGIC, (unsigned int)NC_CONTROL_PROTOCOL_VERSION);
#define SIZE(s, sep) printf(sep "\"" #s "\": %zu", sizeof(struct s))
	SIZE(nc_ctl_req, "");
	SIZE(nc_ctl_rep, ", ");
	SIZE(nc_ctl_hello, ", ");
	SIZE(nc_ctl_hello_reply, ", ");
	SIZE(nc_ctl_rule, ", ");
	SIZE(nc_ctl_create, ", ");
	SIZE(nc_ctl_nat, ", ");
	SIZE(nc_ctl_meter, ", ");
	SIZE(nc_ctl_channel, ", ");
	SIZE(nc_ctl_name, ", ");
	SIZE(nc_ctl_id, ", ");
	SIZE(nc_ctl_cli, ", ");
	SIZE(nc_ctl_channel_stats, ", ");
	SIZE(nc_channel_stats, ", ");
	SIZE(nc_channel_opts, ", ");
	SIZE(nc_meter_opts, ", ");
	SIZE(nc_rule, ", ");
	SIZE(nc_port, ", ");
	SIZE(nc_client_info, ", ");
	printf("}, ");
	/* Each field: [name, offset, size]; the stats' names from their one list. */
#define FIELD(s, f) printf("%s[\"" #f "\", %zu, %zu]", first ? "" : ", ", \
			   offsetof(struct s, f), sizeof(((struct s *)0)->f)), first = 0;
	{
		int first = 1;

		fields("nc_ctl_channel_stats", "");
#define CTL_STAT(f, what) FIELD(nc_ctl_channel_stats, f)
		NC_CHANNEL_STATS(CTL_STAT, CTL_STAT)
		printf("]");
	}
	{
		int first = 1;

		fields("nc_channel_stats", ", ");
		FIELD(nc_channel_stats, size)
		FIELD(nc_channel_stats, reserved)
#define API_STAT(f, what) FIELD(nc_channel_stats, f)
		NC_CHANNEL_STATS(API_STAT, API_STAT)
		printf("]");
	}
	{
		int first = 1;

		fields("nc_channel_opts", ", ");
		FIELD(nc_channel_opts, size)
		FIELD(nc_channel_opts, drop)
		FIELD(nc_channel_opts, ring_size)
		FIELD(nc_channel_opts, memory_limit_order)
		FIELD(nc_channel_opts, queue_bytes)
		FIELD(nc_channel_opts, tx)
		FIELD(nc_channel_opts, port)
		FIELD(nc_channel_opts, reserved)
		FIELD(nc_channel_opts, nat)
		FIELD(nc_channel_opts, meter)
		FIELD(nc_channel_opts, shared)
		printf("]");
	}
	{
		int first = 1;

		fields("nc_meter_opts", ", ");
		FIELD(nc_meter_opts, size)
		FIELD(nc_meter_opts, flags)
		FIELD(nc_meter_opts, rate)
		FIELD(nc_meter_opts, burst)
		FIELD(nc_meter_opts, excess_burst)
		FIELD(nc_meter_opts, peak_rate)
		FIELD(nc_meter_opts, peak_burst)
		printf("]");
	}
	{
		int first = 1;

		fields("nc_rule", ", ");
		FIELD(nc_rule, size)
		FIELD(nc_rule, family)
		FIELD(nc_rule, proto)
		FIELD(nc_rule, proto_mask)
		FIELD(nc_rule, dst_len)
		FIELD(nc_rule, src_len)
		FIELD(nc_rule, reserved)
		FIELD(nc_rule, dst)
		FIELD(nc_rule, src)
		FIELD(nc_rule, dport)
		FIELD(nc_rule, sport)
		FIELD(nc_rule, priority)
		printf("]");
	}
	{
		int first = 1;

		fields("nc_client_info", ", ");
		FIELD(nc_client_info, size)
		FIELD(nc_client_info, control_protocol)
		FIELD(nc_client_info, daemon_min_protocol)
		FIELD(nc_client_info, daemon_max_protocol)
		FIELD(nc_client_info, region_layout)
		FIELD(nc_client_info, reserved)
		FIELD(nc_client_info, daemon_build)
		printf("]");
	}
	{
		int first = 1;

		fields("nc_port", ", ");
		FIELD(nc_port, lo)
		FIELD(nc_port, hi)
		FIELD(nc_port, kind)
		FIELD(nc_port, reserved)
		printf("]");
	}
	printf("}\n");
	return 0;
}
