/* SPDX-License-Identifier: BSD-3-Clause */
/* The control protocol's decoder (see ctl_decode.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "control/ctl_decode.h"
#include "core/nat_conf.h"
#include "core/spec.h"

#include <jansson.h>

/* Body sizes: exact for fixed requests; HELLO's and CLI's are bounded instead. */
static const uint32_t body_size[NC_CTL_TYPE_MAX] = {
	[NC_CTL_CHANNEL_CREATE] = sizeof(struct nc_ctl_create),
	[NC_CTL_CHANNEL_ATTACH] = sizeof(struct nc_ctl_name),
	[NC_CTL_CHANNEL_DESTROY] = sizeof(struct nc_ctl_id),
	[NC_CTL_CHANNEL_LIST] = 0,
	[NC_CTL_STATS] = 0,
	[NC_CTL_CHANNEL_STATS] = sizeof(struct nc_ctl_id),
	[NC_CTL_CHANNEL_EVENTFD] = sizeof(struct nc_ctl_id),
	[NC_CTL_CLIENT_EVENTFD] = 0,
	[NC_CTL_CHANNEL_METER] = sizeof(struct nc_ctl_meter),
};

/* A CHANNEL_CREATE's body: the request, a NAT channel's translation, a meter. */
static bool
create_len_ok(uint32_t len)
{
	const uint32_t c = sizeof(struct nc_ctl_create), n = sizeof(struct nc_ctl_nat),
		       m = sizeof(struct nc_ctl_meter);

	return len == c || len == c + n || len == c + m || len == c + n + m;
}

int
ncd_ctl_check(const uint8_t *msg, size_t n, bool truncated, uint32_t *body_len)
{
	struct nc_ctl_req req;

	if (truncated)
		return -EMSGSIZE;
	if (n < sizeof(req))
		return -EBADMSG;
	/* The buffer may not be aligned for the header. */
	memcpy(&req, msg, sizeof(req));
	if (req.magic != NC_CTL_MAGIC || req.reserved != 0 || req.len != n - sizeof(req))
		return -EBADMSG;
	if (req.type == 0 || req.type >= NC_CTL_TYPE_MAX)
		return -EOPNOTSUPP;
	/* HELLO: version 4's, or version 5's and longer (a newer client's: the rest unread). */
	if (req.type == NC_CTL_HELLO ? req.len != NC_CTL_HELLO_V4_SIZE &&
				       req.len < sizeof(struct nc_ctl_hello) :
	    req.type == NC_CTL_CLI ? req.len < sizeof(struct nc_ctl_cli) ||
				     req.len >= sizeof(struct nc_ctl_cli) + NC_CLI_MAX_LINE :
	    req.type == NC_CTL_CHANNEL_CREATE ? !create_len_ok(req.len) :
		    req.len != body_size[req.type])
		return -EINVAL;
	*body_len = req.len;
	return 0;
}

int
ncd_ctl_decode_create(const struct nc_ctl_create *m, size_t len, unsigned int nports,
		      struct ncd_channel_conf *cc)
{
	const struct nc_ctl_rule *w = &m->rule;
	bool nat = m->action == NC_ACTION_NAT;
	const char *field;
	char err[160];

	bool metered = m->flags & NC_CREATE_F_METER;

	if (len != sizeof(*m) + (nat ? sizeof(struct nc_ctl_nat) : 0) +
		   (metered ? sizeof(struct nc_ctl_meter) : 0))
		return -EINVAL;
	/* The framing: what the wire reserves, and what it cannot say twice. */
	if ((m->flags & ~(NC_CREATE_F_TX | NC_CREATE_F_METER | NC_CREATE_F_SHARED)) || m->reserved != 0 || m->action > NC_ACTION_NAT ||
	    (m->queue_bytes != 0 && m->memory_limit_order != 0) ||
	    (m->memory_limit_order != 0 &&
	     (m->memory_limit_order < ncd_chan_limits[NCD_OPT_MEMORY_LIMIT_ORDER].lo ||
	      m->memory_limit_order > ncd_chan_limits[NCD_OPT_MEMORY_LIMIT_ORDER].hi)))
		return -EINVAL;
	/* Its name is checked whole before it is copied: the wire's may lack a NUL. */
	if (ncd_channel_name_check(m->name, err, sizeof(err)) != 0)
		return -EINVAL;
	ncd_channel_conf_init(cc);
	snprintf(cc->name, sizeof(cc->name), "%s", m->name);
	cc->rule.family = w->family;
	cc->rule.proto = w->proto;
	cc->rule.proto_mask = w->proto_mask;
	cc->rule.dst_len = w->dst_len;
	cc->rule.src_len = w->src_len;
	memcpy(cc->rule.dst.a, w->dst, 16);
	memcpy(cc->rule.src.a, w->src, 16);
	cc->rule.dport = (struct nc_trie_port){ w->dport_lo, w->dport_hi, w->dport_kind };
	cc->rule.sport = (struct nc_trie_port){ w->sport_lo, w->sport_hi, w->sport_kind };
	cc->rule.priority = w->priority;
	cc->action = (enum nc_dir_action)m->action;
	if (nat) {
		struct nc_ctl_nat n;

		/* The body may not be aligned for it. */
		memcpy(&n, (const uint8_t *)m + sizeof(*m), sizeof(n));
		if (ncd_nat_from_wire(&n, &cc->nat) != 0)
			return -EINVAL;
	}
	if (metered) {
		struct nc_ctl_meter w;

		memcpy(&w, (const uint8_t *)m + len - sizeof(w), sizeof(w));
		if (w.id != 0 || ncd_ctl_decode_meter(&w, &cc->meter, err, sizeof(err)) != 0 ||
		    cc->meter.kind == NCD_METER_NONE)
			return -EINVAL;
	}
	cc->tx = m->flags & NC_CREATE_F_TX;
	cc->shared = m->flags & NC_CREATE_F_SHARED;
	cc->port = m->port;
	/* 0: the default. */
	if (m->ring_size != 0)
		cc->ring_size = m->ring_size;
	if (m->queue_bytes != 0)
		cc->queue_bytes = m->queue_bytes;
	else if (m->memory_limit_order != 0)
		cc->queue_bytes = UINT64_C(1) << m->memory_limit_order;
	return ncd_channel_conf_check(cc, nports, &field, err, sizeof(err)) == 0 ? 0 : -EINVAL;
}

int
ncd_ctl_decode_cli(const struct nc_ctl_cli *m, size_t len, char *line, bool *json)
{
	size_t n = len - sizeof(*m);

	if (m->flags & ~NC_CLI_F_JSON)
		return -EINVAL;
	memcpy(line, m->line, n);
	line[n] = '\0';
	*json = m->flags & NC_CLI_F_JSON;
	return 0;
}

/* A number of the meter's, under its config key, if given. */
static void
meter_key(json_t *o, const char *key, uint64_t v)
{
	if (v != 0)
		json_object_set_new(o, key, json_integer(v > INT64_MAX ? INT64_MAX : (json_int_t)v));
}

int
ncd_ctl_decode_meter(const struct nc_ctl_meter *w, struct ncd_meter_conf *mc, char *err,
		     size_t len)
{
	const bool bits = w->flags & NC_METER_F_BITS, r4115 = w->flags & NC_METER_F_RFC4115;
	json_t *o;
	int ret;

	memset(mc, 0, sizeof(*mc));
	if (w->flags & ~(NC_METER_F_BITS | NC_METER_F_EXCEED_KERNEL | NC_METER_F_RFC4115)) {
		snprintf(err, len, "meter: unknown flags 0x%x", w->flags);
		return -EINVAL;
	}
	if (w->flags == 0 && w->rate == 0 && w->burst == 0 && w->excess_burst == 0 &&
	    w->peak_rate == 0 && w->peak_burst == 0)
		return 0;                  /* no meter */
	/* The config's keys, so that the wire is checked as the config is, word for word. */
	o = json_object();
	if (o == NULL) {
		snprintf(err, len, "meter: out of memory");
		return -ENOMEM;
	}
	meter_key(o, bits ? "bps" : "pps", w->rate);
	meter_key(o, bits ? "burst_bytes" : "burst", w->burst);
	meter_key(o, bits ? "excess_burst_bytes" : "excess_burst", w->excess_burst);
	if (r4115) {
		json_object_set_new(o, "mode", json_string("rfc4115"));
		meter_key(o, "eir", w->peak_rate);
	} else {
		meter_key(o, bits ? "peak_bps" : "peak_pps", w->peak_rate);
	}
	meter_key(o, bits ? "peak_burst_bytes" : "peak_burst", w->peak_burst);
	if (w->flags & NC_METER_F_EXCEED_KERNEL)
		json_object_set_new(o, "exceed", json_string("kernel"));
	ret = ncd_meter_from_json(o, mc, err, len);
	json_decref(o);
	return ret == 0 ? 0 : -EINVAL;
}
