/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The CLI's commands (the table is cli_table.c). Each command builds a JSON
 * value: printed as is for --json, rendered as indented "key: value" lines
 * for people, and converted for DPDK telemetry, so the three never disagree.
 * Everything here runs on the control thread, or under ncd.lock.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>

#include <jansson.h>
#include <rte_ethdev.h>
#include <rte_log.h>
#include <rte_mempool.h>
#include <rte_ring.h>

#define NCD_LOGTYPE ncd_logtype_control
#include "channel/channel.h"
#include "control/cli.h"
#include "control/control.h"
#include "control/ctl_decode.h"
#include "control/reload.h"
#include "control/views.h"
#include "core/match.h"
#include "core/nat_conf.h"
#include "core/spec.h"
#include "core/stats.h"
#include "datapath/capture.h"
#include "datapath/datapath.h"
#include "nat/nat.h"
#include "nc_cli.h"
#include "ncd.h"

#define U64(v) json_integer((json_int_t)(v))

/* ---- text for people ---------------------------------------------------- */

static void
render(FILE *f, const json_t *v, int indent)
{
	const char *k;
	json_t *x;
	size_t i;

	switch (json_typeof(v)) {
	case JSON_OBJECT:
		json_object_foreach((json_t *)v, k, x) {
			fprintf(f, "%*s%s:", indent, "", k);
			if (json_is_object(x) || json_is_array(x)) {
				if (json_is_array(x) && json_array_size(x) == 0) {
					fprintf(f, " none\n");
					continue;
				}
				fputc('\n', f);
				render(f, x, indent + 2);
			} else {
				fputc(' ', f);
				render(f, x, 0);
			}
		}
		break;
	case JSON_ARRAY:
		json_array_foreach(v, i, x) {
			if (json_is_object(x)) {
				render(f, x, indent);
				if (i + 1 < json_array_size(v))
					fputc('\n', f);
			} else {
				fprintf(f, "%*s- ", indent, "");
				render(f, x, 0);
			}
		}
		break;
	case JSON_STRING:
		fprintf(f, "%s\n", json_string_value(v));
		break;
	case JSON_INTEGER:
		fprintf(f, "%" JSON_INTEGER_FORMAT "\n", json_integer_value(v));
		break;
	case JSON_REAL:
		fprintf(f, "%.3f\n", json_real_value(v));
		break;
	case JSON_TRUE:
		fprintf(f, "yes\n");
		break;
	case JSON_FALSE:
		fprintf(f, "no\n");
		break;
	default:
		fprintf(f, "-\n");
	}
}

/* ---- the commands ------------------------------------------------------ */

struct cmd_ctx {
	struct ncd *d;
	bool priv;
	const struct ncd_conn *viewer; /* NULL: sees everything */
	FILE *out;
	char err[256];
	int *fd_out;                   /* capture: the pipe for the caller; NULL: none can go */
	/* show channel: one line a channel; a page (from an id), and where the next one starts. */
	bool brief, paged;
	uint32_t from;
	int64_t next;
};

/* JSON bytes of one page of "show channel all|brief from ID": a reply holds 64 KiB. */
#define CHANNEL_PAGE_BYTES 40000

static int __attribute__((format(printf, 3, 4)))
fail(struct cmd_ctx *x, int status, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(x->err, sizeof(x->err), fmt, ap);
	va_end(ap);
	return status;
}

/* <port>: an index, a name, or all. Returns how many go to out[]. */
static int
ports_of(struct cmd_ctx *x, const char *arg, unsigned int *out)
{
	char *end;
	unsigned long v;
	unsigned int n = 0;

	for (unsigned int i = 0; i < x->d->cfg.nports; i++)
		if (strcmp(arg, "all") == 0 || strcmp(arg, x->d->cfg.ports[i].name) == 0)
			out[n++] = i;
	if (n > 0)
		return (int)n;
	v = strtoul(arg, &end, 10);
	if (*arg != '\0' && *end == '\0' && v < x->d->cfg.nports) {
		out[0] = (unsigned int)v;
		return 1;
	}
	return fail(x, -ENODEV, "no port '%s' (ports: 0..%u, by name, or all)", arg,
		    x->d->cfg.nports - 1);
}

/* <channel>: an id or a name (or all, where allowed). -1 for all. */
static int
channel_of(struct cmd_ctx *x, const char *arg, bool all_ok, int32_t *id)
{
	uint32_t ns = ncd_conn_ns(x->viewer);
	char *end;
	unsigned long v;

	if (all_ok && strcmp(arg, "all") == 0) {
		*id = -1;
		return 0;
	}
	/* The viewer's own namespace first, then root's (static channels, root's clients'). */
	*id = ns != NCD_NS_ROOT ? ncd_channel_find_ns(x->d, ns, arg) : -1;
	if (*id < 0)
		*id = ncd_channel_find(x->d, arg);
	/* Root names a user's channel by its name if no other user's has it. */
	if (*id < 0 && ns == NCD_NS_ROOT) {
		unsigned int n = 0;

		for (uint32_t i = 0; i < x->d->cfg.max_channels; i++)
			if (x->d->channels[i] != NULL && strcmp(x->d->channels[i]->name, arg) == 0 &&
			    n++ == 0)
				*id = (int32_t)i;
		if (n > 1)
			return fail(x, -EINVAL, "%u channels of users are named '%s': give its id", n,
				    arg);
	}
	if (*id < 0) {
		v = strtoul(arg, &end, 10);
		if (*arg != '\0' && *end == '\0' && v < x->d->cfg.max_channels &&
		    x->d->channels[v] != NULL)
			*id = (int32_t)v;
	}
	/* One the caller may not see does not exist, for it. */
	if (*id >= 0 && ncd_conn_sees(x->d, x->viewer, x->d->channels[*id]))
		return 0;
	return fail(x, -ENOENT, "no channel '%s'", arg);
}

static int
cmd_show_port(struct cmd_ctx *x, char **argv, json_t **res)
{
	unsigned int ps[NCD_MAX_PORTS];
	int n = ports_of(x, argv[3], ps);

	if (n < 0)
		return n;
	*res = json_array();
	for (int i = 0; i < n; i++)
		json_array_append_new(*res, strcmp(argv[2], "info") == 0 ? ncd_view_port_info(x->d, ps[i]) :
					    strcmp(argv[2], "stats") == 0 ? ncd_view_port_stats(x->d, ps[i]) :
					    ncd_view_port_xstats(x->d, ps[i]));
	return 0;
}

static int
cmd_clear_port(struct cmd_ctx *x, char **argv, json_t **res)
{
	unsigned int ps[NCD_MAX_PORTS];
	int n = ports_of(x, argv[3], ps);

	if (n < 0)
		return n;
	*res = json_array();
	for (int i = 0; i < n; i++) {
		ncd_port_stats_clear(x->d, ps[i]);
		json_array_append_new(*res, json_string(x->d->cfg.ports[ps[i]].name));
	}
	return 0;
}

/*
 * For a person: a channel's counters that cannot move for it left out (NAT's
 * for other actions, transmit's for a channel that cannot send, delivery's
 * for a drop or NAT channel). JSON keeps them all, for scripts.
 */
static void
text_counters(json_t *ch)
{
	const char *action = json_string_value(json_object_get(ch, "action"));
	bool tx = json_is_true(json_object_get(ch, "tx"));
	json_t *cs = json_object_get(ch, "counters"), *v;
	const char *k;
	void *tmp;

	if (action == NULL || cs == NULL)
		return;
	json_object_foreach_safe(cs, tmp, k, v) {
		bool nat = strncmp(k, "nat", 3) == 0, send = strncmp(k, "tx", 2) == 0;
		bool deliver = strcmp(k, "delivered") == 0 || strcmp(k, "bytes") == 0 ||
			       strncmp(k, "drop_", 5) == 0 || strncmp(k, "wakeup", 6) == 0;

		if ((nat && strcmp(action, "nat") != 0) || (send && !tx) ||
		    (deliver && strcmp(action, "deliver") != 0) ||
		    (strcmp(k, "dropped") == 0 && strcmp(action, "drop") != 0))
			json_object_del(cs, k);
	}
}

/*
 * show channel <channel>|all|brief [from <id>]: "all" and "brief" name the
 * listings (a channel of either name is shown by its id); "from" makes a
 * listing a page, as large as a reply can carry, so that any number of
 * channels can be listed over the control socket, page by page.
 */
static int
cmd_show_channel(struct cmd_ctx *x, char **argv, int argc, json_t **res)
{
	int32_t id = -1;
	int ret = 0;

	x->brief = strcmp(argv[2], "brief") == 0;
	if (!x->brief)
		ret = channel_of(x, argv[2], true, &id);
	if (ret != 0)
		return ret;
	if (argc > 3) {
		char *end;
		unsigned long v = argc == 5 ? strtoul(argv[4], &end, 10) : 0;

		if (argc != 5 || strcmp(argv[3], "from") != 0 || id >= 0 || *argv[4] == '\0' ||
		    *end != '\0' || v >= x->d->cfg.max_channels)
			return fail(x, -EINVAL, "usage: show channel all|brief [from <id>], an id "
				    "below %u", x->d->cfg.max_channels);
		x->paged = true;
		x->from = (uint32_t)v;
		*res = ncd_view_channel_page(x->d, x->viewer, x->from, x->brief, CHANNEL_PAGE_BYTES,
					     &x->next);
		return 0;
	}
	if (x->brief)
		*res = ncd_view_channel_list(x->d, x->viewer);
	else
		*res = id < 0 ? ncd_view_channels(x->d, x->viewer) :
			ncd_view_channel(x->d, (uint32_t)id);
	return 0;
}

/* show channel brief, as text: a line a channel, under a header (a page's first only). */
static void
print_brief(FILE *f, const json_t *a, bool header)
{
	const json_t *v;
	size_t i;

	if (header)
		fprintf(f, "%-7s %-31s %-7s %-8s %12s %12s %10s  %s\n", "id", "name", "action",
			"owner", "hits", "delivered", "drops", "rule");
	json_array_foreach(a, i, v)
		fprintf(f, "%-7" JSON_INTEGER_FORMAT " %-31s %-7s %-8s %12" JSON_INTEGER_FORMAT
			" %12" JSON_INTEGER_FORMAT " %10" JSON_INTEGER_FORMAT "  %s\n",
			json_integer_value(json_object_get(v, "id")),
			json_string_value(json_object_get(v, "name")),
			json_string_value(json_object_get(v, "action")),
			json_string_value(json_object_get(v, "owner")),
			json_integer_value(json_object_get(v, "hits")),
			json_integer_value(json_object_get(v, "delivered")),
			json_integer_value(json_object_get(v, "drops")),
			json_string_value(json_object_get(v, "rule")));
}

/* One word (and its value) of "action nat ...": what the translation writes. */
static int
nat_option(struct cmd_ctx *x, struct ncd_nat_conf *nc, char **argv, int argc, int *i)
{
	const char *k = argv[*i], *v = *i + 1 < argc ? argv[*i + 1] : NULL;
	char err[160];

	if (strcmp(k, "reverse") == 0)
		return ncd_nat_option(nc, k, NULL, err, sizeof(err)) == 0 ? 0 :
		       fail(x, -EINVAL, "nat: %s", err);
	if (v == NULL)
		return fail(x, -EINVAL, "nat %s: a value is missing", k);
	(*i)++;
	if (strcmp(k, "port") == 0) {
		unsigned int ps[NCD_MAX_PORTS];
		int n = ports_of(x, v, ps);

		if (n != 1)
			return n < 0 ? n : fail(x, -EINVAL, "nat port: one port, not all");
		nc->has_port = true;
		nc->port = (uint16_t)ps[0];
		return 0;
	}
	if (ncd_nat_option(nc, k, v, err, sizeof(err)) != 0)
		return fail(x, -EINVAL, "nat %s: %s", k, err);
	return 0;
}

/*
 * "attach uid:N", "attach gid:N" or "attach uid:N,gid:M": one more entry of
 * the channel's "attach" list. @return 0, or -1 with the reason in err
 */
static int
attach_option(const char *v, struct ncd_channel_conf *cc, char *err, size_t len)
{
	struct ncd_attach_conf a = { -1, -1 };
	char *end;

	if (cc->nattach == NCD_ATTACH_MAX) {
		snprintf(err, len, "%d entries at most", NCD_ATTACH_MAX);
		return -1;
	}
	while (*v != '\0') {
		int64_t *to = strncmp(v, "uid:", 4) == 0 ? &a.uid :
			      strncmp(v, "gid:", 4) == 0 ? &a.gid : NULL;
		unsigned long n;

		errno = 0;
		n = to != NULL ? strtoul(v + 4, &end, 10) : 0;
		if (to == NULL || end == v + 4 || errno != 0 || n >= UINT32_MAX ||
		    (*end != '\0' && *end != ',')) {
			snprintf(err, len, "'%s': uid:N, gid:N or uid:N,gid:M", v);
			return -1;
		}
		*to = (int64_t)n;
		v = *end == ',' ? end + 1 : end;
	}
	if (a.uid < 0 && a.gid < 0) {
		snprintf(err, len, "uid:N, gid:N or uid:N,gid:M");
		return -1;
	}
	cc->attach[cc->nattach++] = a;
	return 0;
}

/* channel create NAME [key value | tx]...: the config's words, on one line. */
static int
cmd_channel_create(struct cmd_ctx *x, char **argv, int argc, json_t **res)
{
	/* The numeric options, by the words that give them. */
	static const enum ncd_chan_opt numeric[] = { NCD_OPT_PRIORITY, NCD_OPT_RING_SIZE,
						     NCD_OPT_QUEUE_BYTES, NCD_OPT_QUEUE };
	struct ncd_channel_conf cc;
	const char *field;
	char err[160];
	int id;

	if (ncd_channel_name_check(argv[2], err, sizeof(err)) != 0)
		return fail(x, -EINVAL, "%s", err);
	ncd_channel_conf_init(&cc);
	snprintf(cc.name, sizeof(cc.name), "%s", argv[2]);
	for (int i = 3; i < argc; i++) {
		const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		uint8_t fam = 0;
		size_t o;

		if (cc.action == NC_ACTION_NAT) {
			/* After "action nat", the words say what it writes. */
			int r = nat_option(x, &cc.nat, argv, argc, &i);

			if (r != 0)
				return r;
			continue;
		}
		if (strcmp(k, "tx") == 0) {
			cc.tx = true;
			continue;
		}
		if (v == NULL)
			return fail(x, -EINVAL, "%s: a value is missing", k);
		i++;
		for (o = 0; o < RTE_DIM(numeric) && strcmp(k, ncd_chan_limits[numeric[o]].name); o++)
			;
		if (o < RTE_DIM(numeric)) {
			int64_t n;

			if (ncd_chan_opt_parse(numeric[o], v, &n, err, sizeof(err)) != 0)
				return fail(x, -EINVAL, "%s: %s", k, err);
			switch (numeric[o]) {
			case NCD_OPT_PRIORITY: cc.rule.priority = (uint32_t)n; break;
			case NCD_OPT_RING_SIZE: cc.ring_size = (uint32_t)n; break;
			case NCD_OPT_QUEUE_BYTES: cc.queue_bytes = (uint64_t)n; break;
			default: cc.steer = true; cc.queue = (uint16_t)n; break;
			}
		} else if (strcmp(k, "proto") == 0) {
			if (ncd_parse_proto(v, &cc.rule.proto, &cc.rule.proto_mask, err, sizeof(err)))
				return fail(x, -EINVAL, "proto: %s", err);
		} else if (strcmp(k, "dst") == 0 || strcmp(k, "src") == 0) {
			bool dst = k[0] == 'd';

			if (ncd_parse_prefix(v, dst ? &cc.rule.dst : &cc.rule.src,
					     dst ? &cc.rule.dst_len : &cc.rule.src_len, &fam, err,
					     sizeof(err)))
				return fail(x, -EINVAL, "%s: %s", k, err);
			if (fam != 0 && cc.rule.family != 0 && fam != cc.rule.family)
				return fail(x, -EINVAL, "src and dst are of different families");
			if (fam != 0)
				cc.rule.family = fam;
		} else if (strcmp(k, "dport") == 0 || strcmp(k, "sport") == 0) {
			if (ncd_parse_port(v, k[0] == 'd' ? &cc.rule.dport : &cc.rule.sport, err,
					   sizeof(err)))
				return fail(x, -EINVAL, "%s: %s", k, err);
		} else if (strcmp(k, "action") == 0) {
			if (strcmp(v, "drop") == 0)
				cc.action = NC_ACTION_DROP;
			else if (strcmp(v, "nat") == 0)
				cc.action = NC_ACTION_NAT;
			else if (strcmp(v, "deliver") != 0)
				return fail(x, -EINVAL, "action: '%s': deliver, drop or nat", v);
		} else if (strcmp(k, "consumers") == 0) {
			if (strcmp(v, "shared") != 0 && strcmp(v, "one") != 0)
				return fail(x, -EINVAL, "consumers: '%s': one or shared", v);
			cc.shared = v[0] == 's';
		} else if (strcmp(k, "attach") == 0) {
			if (attach_option(v, &cc, err, sizeof(err)) != 0)
				return fail(x, -EINVAL, "attach: %s", err);
		} else if (strcmp(k, "meter") == 0) {
			if (ncd_meter_from_words(v, &cc.meter, err, sizeof(err)) != 0)
				return fail(x, -EINVAL, "%s", err);
		} else if (strcmp(k, "port") == 0) {
			unsigned int ps[NCD_MAX_PORTS];
			int n = ports_of(x, v, ps);

			if (n != 1)
				return n < 0 ? n : fail(x, -EINVAL, "port: one port, not all");
			cc.port = (uint16_t)ps[0];
		} else {
			static const char *const opts[] = { "proto", "src", "dst", "sport", "dport",
				"priority", "action", "ring_size", "queue_bytes", "port", "queue", "tx",
				"consumers", "attach", "meter" };
			char msg[256];

			snprintf(msg, sizeof(msg), "unknown option '%s' (proto, src, dst, sport, dport, "
				 "priority, action, ring_size, queue_bytes, port, queue, tx, consumers, "
				 "attach, meter)", k);
			nc_cli_did_you_mean(msg, sizeof(msg), k, opts, RTE_DIM(opts));
			return fail(x, -EINVAL, "%s", msg);
		}
	}
	if (ncd_channel_conf_check(&cc, x->d->cfg.nports, &field, err, sizeof(err)) != 0)
		return fail(x, -EINVAL, "%s: %s", field, err);
	id = ncd_channel_add(x->d, &cc, NCD_OWNER_OPERATOR, NCD_NS_ROOT, NULL);
	if (id == -EEXIST)
		return fail(x, id, "a channel named '%s' exists", cc.name);
	if (id == -EBUSY) {
		int32_t o = ncd_channel_same_rule(x->d, &cc.rule);

		if (o >= 0)
			return fail(x, id, "channel %s (%d) has the same rule and priority",
				    x->d->channels[o]->name, o);
		return fail(x, id, "another channel has the same rule and priority");
	}
	if (id == -ENOTSUP)
		return fail(x, id, "a port requires offload and cannot offload this rule (the "
			    "daemon's log says why)");
	if (id < 0)
		return fail(x, id, "channel create: %s", strerror(-id));
	ncd_log_shadowing(x->d, (uint32_t)id, "the operator");
	*res = ncd_view_channel(x->d, (uint32_t)id);
	return 0;
}

static int
cmd_channel_destroy(struct cmd_ctx *x, char **argv, json_t **res)
{
	int32_t id;
	int ret = channel_of(x, argv[2], false, &id);

	if (ret != 0)
		return ret;
	if (x->d->channels[id]->owner >= 0) {
		pid_t pid;
		uid_t uid;

		ncd_client_cred(x->d->channels[id]->owner, &pid, &uid);
		return fail(x, -EPERM, "channel '%s' belongs to client pid %d: it goes when the "
			    "client does", x->d->channels[id]->name, (int)pid);
	}
	*res = json_pack("{s:s, s:i}", "destroyed", x->d->channels[id]->name, "id", (int)id);
	ncd_channel_del(x->d, (uint32_t)id);
	return 0;
}

/* channel meter <channel> off|KEY=VALUE,...: any channel's, a client's too, in place. */
static int
cmd_channel_meter(struct cmd_ctx *x, char **argv, json_t **res)
{
	struct ncd_meter_conf mc = { .kind = NCD_METER_NONE };
	char err[200];
	int32_t id;
	int ret = channel_of(x, argv[2], false, &id);

	if (ret != 0)
		return ret;
	if (strcmp(argv[3], "off") != 0 && ncd_meter_from_words(argv[3], &mc, err, sizeof(err)) != 0)
		return fail(x, -EINVAL, "%s", err);
	ret = ncd_channel_set_meter(x->d, (uint32_t)id, &mc);
	if (ret != 0)
		return fail(x, ret, "channel meter: %s", strerror(-ret));
	*res = ncd_view_channel(x->d, (uint32_t)id);
	return 0;
}

/* A number option's value, in [lo, hi]. */
static int
capture_num(struct cmd_ctx *x, char **argv, int argc, int i, uint64_t lo, uint64_t hi,
	    uint64_t *v)
{
	char *end;

	if (i + 1 >= argc)
		return fail(x, -EINVAL, "capture: %s needs a value", argv[i]);
	errno = 0;
	*v = strtoull(argv[i + 1], &end, 10);
	if (errno != 0 || *end != '\0' || argv[i + 1][0] == '-' || *v < lo || *v > hi)
		return fail(x, -EINVAL, "capture: %s '%s': %" PRIu64 "..%" PRIu64, argv[i],
			    argv[i + 1], lo, hi);
	return 0;
}

/* capture port|channel <name> [count N] [snaplen N] [filter EXPR...] */
static int
cmd_capture(struct cmd_ctx *x, char **argv, int argc, json_t **res)
{
	static const char *const opts[] = { "count", "snaplen", "filter" };
	struct ncd_capture_req req = { .port = -1, .channel = -1,
				       .count = NCD_CAPTURE_DEFAULT_COUNT, .snaplen = 65535 };
	char filter[NC_CLI_MAX_LINE] = "";
	unsigned int port;
	uint64_t v;
	int ret;

	if (x->fd_out == NULL)
		return fail(x, -ENOTSUP, "capture: through the control socket only (ncctl capture): "
			    "the capture comes with the reply, as a pipe");
	if (strcmp(argv[1], "port") == 0) {
		if (strcmp(argv[2], "all") == 0)
			return fail(x, -EINVAL, "capture: one port at a time");
		ret = ports_of(x, argv[2], &port);
		if (ret < 0)
			return ret;
		req.port = (int)port;
	} else {
		ret = channel_of(x, argv[2], false, &req.channel);
		if (ret < 0)
			return ret;
	}
	for (int i = 3; i < argc; i += 2) {
		if (strcmp(argv[i], "count") == 0) {
			ret = capture_num(x, argv, argc, i, 1, NCD_CAPTURE_COUNT_MAX, &req.count);
		} else if (strcmp(argv[i], "snaplen") == 0) {
			ret = capture_num(x, argv, argc, i, 64, 65535, &v);
			req.snaplen = (uint32_t)v;
		} else if (strcmp(argv[i], "filter") == 0) {
			if (i + 1 >= argc)
				return fail(x, -EINVAL, "capture: filter needs an expression");
			/* The rest of the line, words joined as the shell gave them. */
			for (int j = i + 1; j < argc; j++) {
				size_t at = strlen(filter);

				snprintf(filter + at, sizeof(filter) - at, "%s%s", j > i + 1 ? " " : "",
					 argv[j]);
			}
			req.filter = filter;
			break;
		} else {
			ret = fail(x, -EINVAL, "capture: unknown option '%s' (count, snaplen, filter)",
				   argv[i]);
			nc_cli_did_you_mean(x->err, sizeof(x->err), argv[i], opts, RTE_DIM(opts));
		}
		if (ret < 0)
			return ret;
	}
	return ncd_capture_start(x->d, &req, x->err, sizeof(x->err), x->fd_out, res);
}

static int
cmd_set_log(struct cmd_ctx *x, char **argv, json_t **res)
{
	static const char *const names[] = { "emerg", "alert", "crit", "err", "warning", "notice",
					     "info", "debug" };
	char *end;
	long lvl = strtol(argv[4], &end, 10);

	if (*argv[4] == '\0' || *end != '\0') {
		lvl = 0;
		for (unsigned int i = 0; i < RTE_DIM(names); i++)
			if (strcmp(argv[4], names[i]) == 0)
				lvl = (long)i + 1;
	}
	if (lvl < RTE_LOG_EMERG || lvl > RTE_LOG_DEBUG)
		return fail(x, -EINVAL, "level '%s': emerg, alert, crit, err, warning, notice, info, "
			    "debug, or 1..8", argv[4]);
	if (rte_log_set_level_pattern(argv[3], (uint32_t)lvl) != 0)
		return fail(x, -EINVAL, "log type pattern '%s' refused", argv[3]);
	*res = json_pack("{s:s, s:s}", "type", argv[3], "level", names[lvl - 1]);
	return 0;
}

static json_t *
help_json(void)
{
	json_t *a = json_array();

	for (unsigned int i = 0; i < NC_CLI_NCMDS; i++)
		json_array_append_new(a, json_pack("{s:s, s:s}", "command", nc_cli_cmds[i].syntax,
						   "help", nc_cli_cmds[i].help));
	return a;
}

/* The running config: the document as last loaded, with the socket the daemon listens on. */
static json_t *
cmd_show_config(const struct ncd *d)
{
	json_t *doc = d->cfg.doc != NULL ? json_deep_copy(d->cfg.doc) : json_object();
	json_t *ctl = json_object_get(doc, "control");

	if (ctl == NULL) {
		ctl = json_object();
		json_object_set_new(doc, "control", ctl);
	}
	json_object_set_new(ctl, "socket", json_string(d->cfg.control_socket));
	return doc;
}

/* reload: as SIGHUP, answered with what it did (show reload), or why not. */
static int
cmd_reload(struct cmd_ctx *x, json_t **res)
{
	char why[256] = "";

	if (ncd_reload(x->d, why, sizeof(why)) != 0)
		return fail(x, -EINVAL, "%s", why);
	*res = ncd_view_reload();
	return 0;
}

int
ncd_cli_exec(struct ncd *d, const char *line, bool json, bool priv, const struct ncd_conn *viewer,
	     const char *who, FILE *out, int *fd_out)
{
	struct cmd_ctx x = { .d = d, .priv = priv, .viewer = viewer, .out = out, .fd_out = fd_out };
	char buf[NC_CLI_MAX_LINE], *argv[NC_CLI_MAX_WORDS];
	const struct nc_cli_cmd *c;
	json_t *res = NULL;
	int argc, ret = 0;
	bool change = false;

	c = nc_cli_match(line, buf, argv, &argc, x.err, sizeof(x.err));
	if (c == NULL) {
		if (x.err[0] == '\0')
			return 0;          /* an empty line */
		ret = -EINVAL;
		goto out;
	}
	switch (c->id) {
	case NC_CLI_CLEAR_PORT:
	case NC_CLI_CHANNEL_CREATE:
	case NC_CLI_CHANNEL_DESTROY:
	case NC_CLI_CHANNEL_METER:
	case NC_CLI_SET_LOG_LEVEL:
	case NC_CLI_CAPTURE:
	case NC_CLI_RELOAD:
	case NC_CLI_SHOW_CONFIG:
		if (!priv) {
			ret = fail(&x, -EPERM, "'%s' %s: root or the daemon's user only", c->syntax,
				   c->id == NC_CLI_CAPTURE ? "sees every user's packets" :
				   c->id == NC_CLI_SHOW_CONFIG ? "shows every user's rights" :
								 "changes the daemon");
			goto out;
		}
		change = c->id != NC_CLI_SHOW_CONFIG;
		break;
	default:
		break;
	}
	switch (c->id) {
	case NC_CLI_SHOW_PORT: ret = cmd_show_port(&x, argv, &res); break;
	case NC_CLI_CLEAR_PORT: ret = cmd_clear_port(&x, argv, &res); break;
	case NC_CLI_SHOW_CHANNEL: ret = cmd_show_channel(&x, argv, argc, &res); break;
	case NC_CLI_SHOW_CLIENTS: res = ncd_view_clients(d, viewer); break;
	case NC_CLI_SHOW_CLASSIFIER: res = ncd_view_classifier(d); break;
	case NC_CLI_SHOW_MEMPOOL: res = ncd_view_mempool(d); break;
	case NC_CLI_SHOW_NAT: res = ncd_view_nat(d); break;
	case NC_CLI_SHOW_VERSION: res = ncd_view_version(); break;
	case NC_CLI_SHOW_WORKERS: res = ncd_view_workers(d); break;
	case NC_CLI_CHANNEL_CREATE: ret = cmd_channel_create(&x, argv, argc, &res); break;
	case NC_CLI_CHANNEL_DESTROY: ret = cmd_channel_destroy(&x, argv, &res); break;
	case NC_CLI_CHANNEL_METER: ret = cmd_channel_meter(&x, argv, &res); break;
	case NC_CLI_SET_LOG_LEVEL: ret = cmd_set_log(&x, argv, &res); break;
	case NC_CLI_CAPTURE: ret = cmd_capture(&x, argv, argc, &res); break;
	case NC_CLI_SHOW_CAPTURE: res = ncd_capture_view(); break;
	case NC_CLI_SHOW_CONFIG: res = cmd_show_config(d); break;
	case NC_CLI_SHOW_RELOAD: res = ncd_view_reload(); break;
	case NC_CLI_RELOAD: ret = cmd_reload(&x, &res); break;
	case NC_CLI_HELP:
		if (json)
			res = help_json();
		else
			nc_cli_help(out);
		break;
	case NC_CLI_QUIT:
		return 1;
	case NC_CLI_NCMDS:
		break;
	}
out:
	/* What an operator changed, and who: the log says it, as it says what clients do. */
	if (change) {
		int n = (int)strlen(line);

		while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == ' '))
			n--;
		NCD_LOG(NOTICE, "cli: %s: %.*s%s%s", who, n, line, ret < 0 ? ": failed: " : "",
			ret < 0 ? x.err : "");
	}
	if (ret < 0) {
		if (json) {
			json_t *e = json_pack("{s:s, s:i}", "error", x.err, "errno", -ret);

			json_dumpf(e, out, JSON_COMPACT);
			fputc('\n', out);
			json_decref(e);
		} else {
			fprintf(out, "error: %s\n", x.err);
		}
	} else if (res != NULL && x.paged && json) {
		/* A page says where the next one starts (null: it was the last). */
		json_t *page = json_pack("{s:O, s:o}", "channels", res, "next",
					 x.next >= 0 ? json_integer(x.next) : json_null());

		json_dumpf(page, out, JSON_COMPACT);
		fputc('\n', out);
		json_decref(page);
	} else if (res != NULL && x.brief && !json) {
		print_brief(out, res, !x.paged || x.from == 0);
		if (x.paged && x.next >= 0)
			fprintf(out, "next: %" PRId64 "\n", x.next);
	} else if (res != NULL) {
		if (json) {
			json_dumpf(res, out, JSON_COMPACT);
			fputc('\n', out);
		} else {
			if (c->id == NC_CLI_SHOW_CHANNEL) {
				json_t *v;
				size_t i;

				if (json_is_array(res))
					json_array_foreach(res, i, v)
						text_counters(v);
				else
					text_counters(res);
			}
			/* An empty list says so, rather than nothing that looks like a hang. */
			if (json_is_array(res) && json_array_size(res) == 0 && !x.paged)
				fputs("none\n", out);
			else
				render(out, res, 0);
			if (x.paged && x.next >= 0)
				fprintf(out, "next: %" PRId64 "\n", x.next);
		}
	}
	json_decref(res);
	return ret;
}

/* CLI requests on the control socket: the line runs here, its output is the reply's body. */
static int
serve_cli(struct ncd *d, struct ncd_conn *c, const struct nc_ctl_req *req, const void *body,
	  uint32_t len)
{
	char line[NC_CLI_MAX_LINE], *buf = NULL, who[64];
	size_t blen = 0;
	uid_t uid;
	gid_t gid;
	pid_t pid;
	bool json, priv;
	FILE *f;
	int ret, fd = -1;

	/* Only root and the daemon's own user may change things; anyone connected may look. */
	ncd_conn_peer(c, &uid, &gid, &pid);
	priv = ncd_conn_privileged(c);
	if (ncd_ctl_decode_cli(body, len, line, &json) != 0)
		return ncd_ctl_reply(c, req, -EINVAL, NULL, 0);
	f = open_memstream(&buf, &blen);
	if (f == NULL)
		return ncd_ctl_reply(c, req, -ENOMEM, NULL, 0);
	snprintf(who, sizeof(who), "pid %d uid %u", (int)pid, (unsigned int)uid);
	ret = ncd_cli_exec(d, line, json, priv, c, who, f, &fd);
	fclose(f);
	if (ret == 1)
		ret = 0;                       /* quit: the client's own business */
	if (blen + sizeof(struct nc_ctl_rep) > NC_CTL_MAX_MSG) {
		free(buf);
		buf = NULL;
		blen = 0;
		ret = -E2BIG;
	}
	/* A capture's pipe: the caller's now (a caller that does not take it ends the capture). */
	ncd_ctl_reply_fd(c, req, ret, buf, blen, fd);
	if (fd >= 0)
		close(fd);
	free(buf);
	/* A refused or bad command is an answer, not a broken message. */
	return 0;
}

int
ncd_cli_register(void)
{
	return ncd_control_register(NC_CTL_CLI, serve_cli);
}
