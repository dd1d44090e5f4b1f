/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The control protocol's decoder, on any datagram a client could send:
 * framing, the fixed bodies and the CLI line, as the daemon decodes them
 * before acting. Invariants: an accepted datagram's body is exactly its
 * length; an accepted channel is one the daemon can create (a valid rule,
 * a name, limits in range); a CLI line is NUL-terminated within its body and
 * splits into at most NC_CLI_MAX_WORDS words inside the buffer.
 */
#include <errno.h>
#include <string.h>

#include "nc_cli.h"
#include "core/spec.h"
#include "control/ctl_decode.h"
#include "core/match.h"
#include "fuzz.h"

/* The body alone, in a buffer of exactly its size: a read past it is ASan's. */
static void *
body_copy(const uint8_t *data, uint32_t len)
{
	void *b = malloc(len ? len : 1);

	FUZZ_ASSERT(b != NULL);
	memcpy(b, data + sizeof(struct nc_ctl_req), len);
	return b;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct nc_ctl_req req;
	uint32_t len = 0;
	int r = ncd_ctl_check(data, size, false, &len);
	void *body;

	FUZZ_ASSERT(r == 0 || r == -EBADMSG || r == -EOPNOTSUPP || r == -EINVAL);
	FUZZ_ASSERT(ncd_ctl_check(data, size, true, &len) == -EMSGSIZE);
	if (r != 0)
		return 0;
	FUZZ_ASSERT(sizeof(req) + len == size);
	memcpy(&req, data, sizeof(req));
	body = body_copy(data, len);
	switch (req.type) {
	case NC_CTL_CHANNEL_CREATE: {
		struct ncd_channel_conf cc;

		if (ncd_ctl_decode_create(body, len, 2, &cc) == 0) {
			const char *field;
			char err[160];

			FUZZ_ASSERT(nc_trie_rule_validate(&cc.rule) == 0);
			FUZZ_ASSERT(ncd_channel_conf_check(&cc, 2, &field, err, sizeof(err)) == 0);
			FUZZ_ASSERT(cc.action != NC_ACTION_NAT || !cc.nat.has_port || cc.nat.port < 2);
			FUZZ_ASSERT(ncd_valid_name(cc.name, sizeof(cc.name), true));
			FUZZ_ASSERT(cc.ring_size >= 1 && cc.ring_size <= (1u << 20));
			FUZZ_ASSERT(cc.queue_bytes >= 4096 && cc.queue_bytes <= (UINT64_C(1) << 31));
			FUZZ_ASSERT(!cc.tx || (cc.port < 2 && cc.action == NC_ACTION_DELIVER));
			FUZZ_ASSERT(cc.meter.kind == NCD_METER_NONE || cc.meter.rate > 0);
		}
		break;
	}
	case NC_CTL_CHANNEL_METER: {
		struct ncd_meter_conf mc;
		char err[200];

		/* Accepted: a meter rte_meter takes, or none; refused: a reason. */
		r = ncd_ctl_decode_meter(body, &mc, err, sizeof(err));
		FUZZ_ASSERT(r == 0 || r == -EINVAL || r == -ENOMEM);
		if (r == 0 && mc.kind != NCD_METER_NONE)
			FUZZ_ASSERT(mc.rate > 0 && mc.burst > 0);
		else if (r != 0)
			FUZZ_ASSERT(strncmp(err, "meter", 5) == 0);
		break;
	}
	case NC_CTL_CHANNEL_ATTACH:
		(void)ncd_valid_name(((struct nc_ctl_name *)body)->name, NC_NAME_SIZE, true);
		break;
	case NC_CTL_CLI: {
		char line[NC_CLI_MAX_LINE], buf[NC_CLI_MAX_LINE], err[256], *argv[NC_CLI_MAX_WORDS];
		bool json;
		int argc;

		if (ncd_ctl_decode_cli(body, len, line, &json) != 0)
			break;
		FUZZ_ASSERT(strlen(line) <= len - sizeof(struct nc_ctl_cli));
		if (nc_cli_match(line, buf, argv, &argc, err, sizeof(err)) != NULL) {
			FUZZ_ASSERT(argc > 0 && argc <= NC_CLI_MAX_WORDS);
			for (int i = 0; i < argc; i++)
				FUZZ_ASSERT(argv[i] >= buf && argv[i] + strlen(argv[i]) < buf + sizeof(buf));
		} else {
			FUZZ_ASSERT(strlen(err) < sizeof(err));
		}
		break;
	}
	default:
		break;
	}
	free(body);
	return 0;
}
