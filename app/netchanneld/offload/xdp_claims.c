/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What a port in exception mode xdp sends the daemon: the keys its XDP
 * program looks up (bpf/ncd_xdp.c), claimed as channels come and released
 * as they go. A channel's claims are in place before ncd_channel_add()
 * returns, so its client's first packet comes to the daemon; they are taken
 * back before its rule leaves the classifier, so its flow goes to the kernel
 * from then on, and what was already on its way to the daemon reaches the
 * kernel through the TAP. Control thread only.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ncd.h"
#include "offload/xdp_claims.h"
#include "port/port.h"
#include "port/xdp.h"

/* Per channel id: the ports (bits) its claims were made on, so only those are taken back. */
static uint32_t *claimed;
static uint32_t nclaimed;

/*
 * A reverse NAT channel's replies come back to the port of its translated
 * source: the reply's destination port is nat.sport, or, when the channel
 * keeps the client's own source port, any port of the protocol.
 * @return keys written (0 or 1)
 */
static unsigned int
nat_reply_key(const struct ncd_channel *ch, struct ncd_xdp_claim_key *k)
{
	const struct ncd_nat_conf *nc = &ch->nat;
	uint8_t family = nc->family != 0 ? nc->family : ch->rule.family;

	if (ch->action != NC_ACTION_NAT || !nc->reverse || family == NC_TRIE_AF_ANY)
		return 0;
	k->family = family;
	k->proto = ch->rule.proto_mask == 0xff ? ch->rule.proto : 0;
	k->dport = k->proto != 0 && (nc->x.flags & NCD_NAT_SPORT) ? nc->x.sport : 0;
	return 1;
}

/* A channel's keys: its rule's, and its NAT replies'. @return how many, or -ENOSPC. */
static int
channel_keys(const struct ncd_channel *ch, struct ncd_xdp_claim_key *keys, unsigned int max)
{
	int n = ncd_xdp_rule_claims(&ch->rule, keys, max - 1);

	if (n < 0)
		return n;
	return n + (int)nat_reply_key(ch, &keys[n]);
}

static int
channel_added(struct ncd *d, struct ncd_channel *ch)
{
	struct ncd_xdp_claim_key keys[NCD_XDP_RULE_KEYS + 1];
	int n = -1;

	for (unsigned int pi = 0; pi < d->cfg.nports; pi++) {
		struct ncd_port *p = &d->ports[pi];
		int rc;

		if (!p->xdp)
			continue;
		if (claimed == NULL) {
			claimed = calloc(d->cfg.max_channels, sizeof(*claimed));
			if (claimed == NULL)
				return -ENOMEM;
			nclaimed = d->cfg.max_channels;
		}
		if (n < 0)
			n = channel_keys(ch, keys, RTE_DIM(keys));
		rc = n < 0 ? n : ncd_xdp_claim_keys(p->xdp_maps.claims_fd, keys, (unsigned int)n, 1);
		if (rc != 0) {
			NCD_LOG(ERR, "channel %s: its claims in port %s's XDP program (%d keys): %s; "
				"the channel is refused", ch->name, d->cfg.ports[pi].name, n,
				strerror(-rc));
			return rc;
		}
		claimed[ch->id] |= 1u << pi;
	}
	return 0;
}

static void
channel_leaving(struct ncd *d, struct ncd_channel *ch)
{
	struct ncd_xdp_claim_key keys[NCD_XDP_RULE_KEYS + 1];
	int n;

	if (claimed == NULL || ch->id >= nclaimed || claimed[ch->id] == 0)
		return;
	n = channel_keys(ch, keys, RTE_DIM(keys));
	for (unsigned int pi = 0; n >= 0 && pi < d->cfg.nports; pi++) {
		int rc;

		if (!(claimed[ch->id] & (1u << pi)))
			continue;
		rc = ncd_xdp_claim_keys(d->ports[pi].xdp_maps.claims_fd, keys, (unsigned int)n, -1);
		if (rc != 0)
			NCD_LOG(ERR, "channel %s: taking its claims back from port %s's XDP program: "
				"%s; its flows still come to the daemon, and go on to the kernel "
				"through the TAP", ch->name, d->cfg.ports[pi].name, strerror(-rc));
	}
	claimed[ch->id] = 0;
}

void
ncd_xdp_claims_close(void)
{
	free(claimed);
	claimed = NULL;
	nclaimed = 0;
}

const struct ncd_channel_hooks ncd_xdp_channel_hooks = {
	.added = channel_added,
	.leaving = channel_leaving,
};
