/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Writes the control fuzzer's seeds to DIR: one well-formed request of every
 * type (the structs of nc_proto.h, so they stay right as it changes), and
 * CLI lines of every command.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nc_proto.h"

static const char *dir;
static int seq;

static void
put(uint16_t type, const void *body, uint32_t len)
{
	struct nc_ctl_req req = { .magic = NC_CTL_MAGIC, .type = type, .id = (uint32_t)seq,
				  .len = len };
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/seed-%03d", dir, seq++);
	f = fopen(path, "wb");
	if (f == NULL || fwrite(&req, sizeof(req), 1, f) != 1 ||
	    (len > 0 && fwrite(body, len, 1, f) != 1) || fclose(f) != 0) {
		perror(path);
		exit(1);
	}
}

static void
create(const char *name, uint8_t family, uint8_t proto, uint8_t dlen, uint8_t dkind,
       uint16_t dlo, uint16_t dhi, uint32_t flags)
{
	struct nc_ctl_create c;

	memset(&c, 0, sizeof(c));
	snprintf(c.name, sizeof(c.name), "%s", name);
	c.rule.family = family;
	c.rule.proto = proto;
	c.rule.proto_mask = proto ? 0xff : 0;
	c.rule.dst_len = dlen;
	c.rule.dst[0] = family == 6 ? 0x20 : 192;
	c.rule.dport_kind = dkind;
	c.rule.dport_lo = dlo;
	c.rule.dport_hi = dhi;
	c.rule.priority = 7;
	c.flags = flags;
	c.ring_size = 256;
	put(NC_CTL_CHANNEL_CREATE, &c, sizeof(c));
}

/* CHANNEL_METER. */
static void
meter(const struct nc_ctl_meter *m)
{
	put(NC_CTL_CHANNEL_METER, m, sizeof(*m));
}

/* A channel with a meter: the create body, then the meter. */
static void
create_metered(const struct nc_ctl_meter *m)
{
	uint8_t body[sizeof(struct nc_ctl_create) + sizeof(*m)];
	struct nc_ctl_create c;

	memset(&c, 0, sizeof(c));
	snprintf(c.name, sizeof(c.name), "metered");
	c.rule.family = 4;
	c.rule.proto = 17;
	c.rule.proto_mask = 0xff;
	c.rule.dport_kind = 1;
	c.rule.dport_lo = c.rule.dport_hi = 53;
	c.flags = NC_CREATE_F_METER;
	memcpy(body, &c, sizeof(c));
	memcpy(body + sizeof(c), m, sizeof(*m));
	put(NC_CTL_CHANNEL_CREATE, body, sizeof(body));
}

/* A NAT channel: the create body, then what it writes. */
static void
create_nat(uint32_t flags, uint16_t dport)
{
	uint8_t body[sizeof(struct nc_ctl_create) + sizeof(struct nc_ctl_nat)];
	struct nc_ctl_create c;
	struct nc_ctl_nat n;

	memset(&c, 0, sizeof(c));
	memset(&n, 0, sizeof(n));
	snprintf(c.name, sizeof(c.name), "nat%u", dport);
	c.rule.family = 4;
	c.rule.proto = 6;
	c.rule.proto_mask = 0xff;
	c.rule.dst_len = 32;
	c.rule.dst[0] = 192;
	c.rule.dport_kind = 1;
	c.rule.dport_lo = c.rule.dport_hi = 80;
	c.action = NC_ACTION_NAT;
	n.flags = flags;
	n.family = flags & (NC_NAT_F_DST | NC_NAT_F_SRC) ? 4 : 0;
	n.dst[0] = 198;
	n.src[0] = 203;
	n.dport = dport;
	n.sport = 40000;
	n.via[0] = 2;
	memcpy(body, &c, sizeof(c));
	memcpy(body + sizeof(c), &n, sizeof(n));
	put(NC_CTL_CHANNEL_CREATE, body, sizeof(body));
}

static void
cli(const char *line)
{
	uint8_t buf[sizeof(struct nc_ctl_cli) + NC_CLI_MAX_LINE];
	struct nc_ctl_cli *c = (struct nc_ctl_cli *)buf;
	size_t n = strlen(line);

	c->flags = seq % 2 ? NC_CLI_F_JSON : 0;
	memcpy(c->line, line, n);
	put(NC_CTL_CLI, buf, (uint32_t)(sizeof(*c) + n));
}

int
main(int argc, char **argv)
{
	struct nc_ctl_hello h = { .version = NC_CONTROL_PROTOCOL_VERSION, .pid = 1 };
	struct nc_ctl_name nm;
	struct nc_ctl_id id = { .id = 1 };
	static const char *const lines[] = {
		"show port info 0", "show port stats all", "show port xstats wire0",
		"clear port stats all", "show channel all", "show channel dns", "show clients",
		"show classifier", "show mempool", "channel destroy 3",
		"set log level netchanneld.* debug", "help", "quit",
		"channel create web proto tcp dst 192.0.2.1 dport 80-81 priority 5 queue 0 tx",
		"channel create x src 2001:db8::/32 sport 1024/0xfc00 action drop ring_size 64",
	};

	if (argc != 2) {
		fprintf(stderr, "usage: seed_control DIR\n");
		return 2;
	}
	dir = argv[1];
	put(NC_CTL_HELLO, &h, sizeof(h));
	create("dns", 4, 17, 32, 1, 53, 53, 0);
	create("web6", 6, 6, 32, 1, 80, 443, NC_CREATE_F_TX);
	create("mask", 0, 17, 0, 2, 0x1000, 0xf000, 0);
	create("grp", 4, 17, 32, 1, 5000, 5000, NC_CREATE_F_SHARED);
	create_nat(NC_NAT_F_DST | NC_NAT_F_DPORT | NC_NAT_F_REVERSE, 8080);
	create_nat(NC_NAT_F_SRC | NC_NAT_F_SPORT | NC_NAT_F_VIA | NC_NAT_F_PORT, 9000);
	memset(&nm, 0, sizeof(nm));
	snprintf(nm.name, sizeof(nm.name), "dns");
	put(NC_CTL_CHANNEL_ATTACH, &nm, sizeof(nm));
	put(NC_CTL_CHANNEL_DESTROY, &id, sizeof(id));
	put(NC_CTL_CHANNEL_LIST, NULL, 0);
	put(NC_CTL_STATS, NULL, 0);
	put(NC_CTL_CHANNEL_STATS, &id, sizeof(id));
	put(NC_CTL_CHANNEL_EVENTFD, &id, sizeof(id));
	put(NC_CTL_CLIENT_EVENTFD, NULL, 0);
	meter(&(struct nc_ctl_meter){ .id = 1, .rate = 1000, .burst = 100, .excess_burst = 50 });
	meter(&(struct nc_ctl_meter){ .id = 1, .flags = NC_METER_F_BITS | NC_METER_F_EXCEED_KERNEL,
				       .rate = 100000000, .burst = 65536, .peak_rate = 200000000,
				       .peak_burst = 131072 });
	meter(&(struct nc_ctl_meter){ .id = 1, .flags = NC_METER_F_RFC4115, .rate = 1000,
				       .burst = 100, .excess_burst = 100, .peak_rate = 500 });
	meter(&(struct nc_ctl_meter){ .id = 1 });
	create_metered(&(struct nc_ctl_meter){ .rate = 1000, .burst = 100 });
	for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++)
		cli(lines[i]);
	return 0;
}
