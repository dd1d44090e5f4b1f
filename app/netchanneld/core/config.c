/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Config loading. jansson parses (duplicate keys rejected, so a syntax error
 * has a line and column); a walker then checks every key against the schema,
 * so that an unknown key, a wrong type or a bad value is reported with its
 * JSON path, and nothing starts.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <pwd.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include <jansson.h>

#include "core/config.h"
#include "core/match.h"
#include "core/nat_conf.h"
#include "core/spec.h"
#include "nc_cli.h"

struct ctx {
	struct ncd_config *cfg;
	const char *path;
	char where[256];             /* JSON path of the value being checked */
	char *err;                   /* if set, where the error goes instead of stderr */
	size_t errlen;
};

static int __attribute__((format(printf, 2, 3)))
fail(struct ctx *c, const char *fmt, ...)
{
	va_list ap;

	if (c->err != NULL) {
		int n = snprintf(c->err, c->errlen, "%s%s", c->where, c->where[0] ? ": " : "");

		va_start(ap, fmt);
		if (n >= 0 && (size_t)n < c->errlen)
			vsnprintf(c->err + n, c->errlen - (size_t)n, fmt, ap);
		va_end(ap);
		return -1;
	}
	fprintf(stderr, "%s: %s: ", c->path, c->where);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return -1;
}

/* Descend into key or index of the current path; returns the old length to restore. */
static size_t
push(struct ctx *c, const char *key, int index)
{
	size_t len = strlen(c->where);

	if (key != NULL)
		snprintf(c->where + len, sizeof(c->where) - len, "%s%s", len ? "." : "", key);
	else
		snprintf(c->where + len, sizeof(c->where) - len, "[%d]", index);
	return len;
}

static void
pop(struct ctx *c, size_t len)
{
	c->where[len] = '\0';
}

static const char *
type_name(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT: return "an object";
	case JSON_ARRAY: return "an array";
	case JSON_STRING: return "a string";
	case JSON_INTEGER: return "an integer";
	case JSON_REAL: return "a number";
	case JSON_TRUE: case JSON_FALSE: return "a boolean";
	default: return "null";
	}
}

/* Every key of obj must be in the NULL-terminated list. */
static int
check_keys(struct ctx *c, const json_t *obj, const char *const *keys)
{
	const char *k;
	json_t *v;

	json_object_foreach((json_t *)obj, k, v) {
		unsigned int i;

		/* JSON has no comments: keys that start with "//" are taken as comments. */
		if (strncmp(k, "//", 2) == 0)
			continue;
		for (i = 0; keys[i] != NULL; i++)
			if (strcmp(k, keys[i]) == 0)
				break;
		if (keys[i] == NULL) {
			size_t l = push(c, k, 0);
			char msg[96] = "unknown key";
			int r;

			nc_cli_did_you_mean(msg, sizeof(msg), k, keys, i);
			r = fail(c, "%s", msg);
			pop(c, l);
			return r;
		}
	}
	return 0;
}

static int
want_type(struct ctx *c, const json_t *v, json_type t, const char *what)
{
	if (json_typeof(v) == t || (t == JSON_TRUE && json_is_boolean(v)))
		return 0;
	return fail(c, "expected %s, got %s", what, type_name(v));
}

static int
get_int(struct ctx *c, const json_t *obj, const char *key, int64_t lo, int64_t hi, int64_t dflt,
	int64_t *out)
{
	json_t *v = json_object_get(obj, key);
	size_t l;
	int r = 0;

	*out = dflt;
	if (v == NULL)
		return 0;
	l = push(c, key, 0);
	if (!json_is_integer(v))
		r = fail(c, "expected an integer, got %s", type_name(v));
	else if (json_integer_value(v) < lo || json_integer_value(v) > hi)
		r = fail(c, "%" JSON_INTEGER_FORMAT " is out of range %" PRId64 "..%" PRId64,
			 json_integer_value(v), lo, hi);
	else
		*out = json_integer_value(v);
	pop(c, l);
	return r;
}

static int
get_str(struct ctx *c, const json_t *obj, const char *key, bool required, const char **out)
{
	json_t *v = json_object_get(obj, key);
	size_t l;
	int r = 0;

	*out = NULL;
	if (v == NULL && !required)
		return 0;
	l = push(c, key, 0);
	if (v == NULL)
		r = fail(c, "missing");
	else if (!json_is_string(v))
		r = fail(c, "expected a string, got %s", type_name(v));
	else if (json_string_length(v) == 0)
		r = fail(c, "empty string");
	else
		*out = json_string_value(v);
	pop(c, l);
	return r;
}

static int
get_bool(struct ctx *c, const json_t *obj, const char *key, bool dflt, bool *out)
{
	json_t *v = json_object_get(obj, key);
	size_t l;
	int r = 0;

	*out = dflt;
	if (v == NULL)
		return 0;
	l = push(c, key, 0);
	if (!json_is_boolean(v))
		r = fail(c, "expected a boolean, got %s", type_name(v));
	else
		*out = json_is_true(v);
	pop(c, l);
	return r;
}

/* ---- sections ----------------------------------------------------------- */

static int
load_eal(struct ctx *c, const json_t *root)
{
	json_t *eal = json_object_get(root, "eal"), *v;
	size_t l, i;

	if (eal == NULL)
		return 0;
	l = push(c, "eal", 0);
	if (want_type(c, eal, JSON_ARRAY, "an array of strings"))
		return -1;
	if (json_array_size(eal) > NCD_MAX_EAL_ARGS)
		return fail(c, "more than %d arguments", NCD_MAX_EAL_ARGS);
	json_array_foreach(eal, i, v) {
		size_t l2 = push(c, NULL, (int)i);

		if (want_type(c, v, JSON_STRING, "a string"))
			return -1;
		c->cfg->eal[c->cfg->neal++] = strdup(json_string_value(v));
		pop(c, l2);
	}
	pop(c, l);
	return 0;
}

static int
load_mempool(struct ctx *c, const json_t *root)
{
	static const char *const keys[] = { "mbufs", "cache", NULL };
	json_t *mp = json_object_get(root, "mempool");
	int64_t mbufs, cache;
	size_t l;
	int r = 0;

	l = push(c, "mempool", 0);
	if (mp != NULL && (want_type(c, mp, JSON_OBJECT, "an object") || check_keys(c, mp, keys)))
		return -1;
	if (get_int(c, mp, "mbufs", 1023, 1 << 24, 16383, &mbufs) ||
	    get_int(c, mp, "cache", 0, 512, 256, &cache))
		return -1;
	if (cache * 3 / 2 > mbufs)
		r = fail(c, "cache %" PRId64 " is too large for %" PRId64 " mbufs (at most mbufs/1.5)",
			 cache, mbufs);
	c->cfg->mbufs = (uint32_t)mbufs;
	c->cfg->mbuf_cache = (uint32_t)cache;
	pop(c, l);
	return r;
}

/* An address (prefix false) or a prefix with its length, of exception.host, into h. */
static int
host_addr(struct ctx *c, const char *s, bool prefix, struct ncd_host_addr *h)
{
	char err[160];

	if (ncd_parse_prefix(s, &h->a, &h->len, &h->family, err, sizeof(err)) != 0)
		return fail(c, "%s", err);
	if (h->family == NC_TRIE_AF_ANY)
		return fail(c, "'any' is not an address here");
	if (!prefix && !strchr(s, '/'))
		return 0;
	if (!prefix)
		return fail(c, "'%s': a gateway is an address, not a prefix", s);
	/* An interface address without a length is a host route: say it instead. */
	if (!strchr(s, '/'))
		return fail(c, "'%s': give the prefix length (10.0.0.1/24)", s);
	return 0;
}

/* A list of exception.host: an array of at most NCD_HOST_MAX, its key pushed (pop to *l). */
static int
host_list(struct ctx *c, const json_t *a, const char *key, size_t *l)
{
	*l = push(c, key, 0);
	if (want_type(c, a, JSON_ARRAY, "an array"))
		return -1;
	if (json_array_size(a) > NCD_HOST_MAX)
		return fail(c, "%zu %s, more than %d", json_array_size(a), key, NCD_HOST_MAX);
	return 0;
}

/*
 * exception.host: the addresses (with prefix length), routes (dst, gateway,
 * metric) and MTU the host's kernel has on the exception TAP, applied over
 * netlink whenever the daemon makes the TAP (nexthop.c), so that a restart
 * does not take the host offline.
 */
static int
load_host(struct ctx *c, const json_t *h, struct ncd_port_conf *p)
{
	static const char *const keys[] = { "addresses", "routes", "mtu", NULL };
	static const char *const rkeys[] = { "dst", "gateway", "metric", NULL };
	const json_t *addrs = json_object_get(h, "addresses"), *routes = json_object_get(h, "routes");
	struct ncd_host_conf *hc = &p->host;
	size_t l = push(c, "host", 0), i;
	const json_t *v;
	int64_t mtu;

	if (want_type(c, h, JSON_OBJECT, "an object") || check_keys(c, h, keys) ||
	    get_int(c, h, "mtu", 0, 65535, 0, &mtu))
		return -1;
	if (p->exc_device == NULL || strstr(p->exc_device, "iface=") == NULL)
		return fail(c, "the exception device has no kernel interface (iface=) to configure");
	hc->mtu = (uint16_t)mtu;
	if (addrs != NULL) {
		size_t l2;

		if (host_list(c, addrs, "addresses", &l2))
			return -1;
		json_array_foreach(addrs, i, v) {
			size_t l3 = push(c, NULL, (int)i);

			if (want_type(c, v, JSON_STRING, "a string") ||
			    host_addr(c, json_string_value(v), true, &hc->addr[hc->naddr++]))
				return -1;
			pop(c, l3);
		}
		pop(c, l2);
	}
	if (routes != NULL) {
		size_t l2;

		if (host_list(c, routes, "routes", &l2))
			return -1;
		json_array_foreach(routes, i, v) {
			struct ncd_host_route *r = &hc->route[hc->nroute++];
			const char *dst, *gw;
			struct ncd_host_addr g;
			int64_t metric;
			size_t l3 = push(c, NULL, (int)i);

			if (want_type(c, v, JSON_OBJECT, "an object") || check_keys(c, v, rkeys) ||
			    get_str(c, v, "dst", true, &dst) || get_str(c, v, "gateway", false, &gw) ||
			    get_int(c, v, "metric", 0, UINT32_MAX, 0, &metric))
				return -1;
			push(c, "dst", 0);
			if (strcmp(dst, "default") == 0) {
				/* Its family is the gateway's. */
				if (gw == NULL)
					return fail(c, "a default route needs a gateway");
				if (host_addr(c, gw, false, &g))
					return -1;
				r->dst = (struct ncd_host_addr){ .family = g.family };
			} else if (host_addr(c, dst, true, &r->dst)) {
				return -1;
			}
			pop(c, l3);
			push(c, NULL, (int)i);
			if (gw != NULL) {
				push(c, "gateway", 0);
				if (host_addr(c, gw, false, &g))
					return -1;
				if (g.family != r->dst.family)
					return fail(c, "'%s' is not of the family of dst", gw);
				r->gw = g.a;
				r->has_gw = true;
			}
			r->metric = (uint32_t)metric;
			pop(c, l3);
		}
		pop(c, l2);
	}
	p->has_host = true;
	pop(c, l);
	return 0;
}

/*
 * The XDP program a port in exception mode xdp loads when the config names
 * none: the build tree's when this binary is the build tree's (tests, and
 * `meson devenv`), else the installed one. NULL if it was not built.
 */
static const char *
xdp_prog_default(void)
{
#if defined(NCD_XDP_PROG_INSTALLED) && defined(NCD_XDP_PROG_BUILD) && defined(NCD_BUILD_ROOT)
	char exe[4096];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	if (n > 0) {
		exe[n] = '\0';
		if (strncmp(exe, NCD_BUILD_ROOT "/", strlen(NCD_BUILD_ROOT) + 1) == 0)
			return NCD_XDP_PROG_BUILD;
	}
	return NCD_XDP_PROG_INSTALLED;
#else
	return NULL;
#endif
}

/*
 * exception.mode xdp: the port is net_af_xdp on a kernel interface that
 * keeps the host's addresses; the daemon loads the program (xdp_prog=, so
 * the device must not give one). The TAP stays, without addresses, for what
 * the program sent but no channel took.
 */
static int
load_exception_xdp(struct ctx *c, const json_t *e, struct ncd_port_conf *p, const char *prog)
{
	const char *dflt = xdp_prog_default();

	if (strncmp(p->device, "net_af_xdp", 10) != 0 || strstr(p->device, "iface=") == NULL) {
		push(c, "mode", 0);
		return fail(c, "xdp needs a net_af_xdp port on a kernel interface (iface=), not '%s'"
			    "; on PCI (vfio) ports the TAP is the only mode", p->device);
	}
	if (strstr(p->device, "xdp_prog=") != NULL) {
		push(c, "mode", 0);
		return fail(c, "xdp loads netchanneld's own XDP program: drop xdp_prog= from the "
			    "device (exception.program names another build of it)");
	}
	if (json_object_get(e, "host") != NULL) {
		push(c, "host", 0);
		return fail(c, "mode xdp keeps the host's addresses on the port's own interface: "
			    "configure them there, not on the TAP");
	}
	if (prog == NULL && dflt == NULL) {
		push(c, "mode", 0);
		return fail(c, "xdp: this netchanneld was built without its XDP program (no clang "
			    "at build time): give exception.program");
	}
	p->xdp = true;
	p->host_manager = true;
	p->xdp_prog = strdup(prog != NULL ? prog : dflt);
	return p->xdp_prog == NULL ? fail(c, "out of memory") : 0;
}

static int load_match(struct ctx *c, const json_t *m, struct nc_trie_rule *r);

/*
 * The buckets' defaults, in packets a second: a third of what the TAP takes
 * on the reference machine (0.315 Mpps of 64-byte frames, scripts/bench.sh
 * datapath's tap-exception) for the rest, so that the kernel keeps room for
 * what is protected; ARP, ND and ICMP far over what a host needs and far
 * under a flood. Their bursts are a tenth of a second's.
 */
static const struct {
	const char *name;
	uint64_t pps;
} police_default[NCD_POLICE_PROTECT] = {
	[NCD_POLICE_ARP] = { "arp", 1000 },
	[NCD_POLICE_ND] = { "nd", 1000 },
	[NCD_POLICE_ICMP] = { "icmp", 5000 },
	[NCD_POLICE_OTHER] = { "other", 100000 },
};

/* One bucket: {pps, burst} or {bps, burst_bytes} (keys: the object's own besides). */
static int
load_police_rate(struct ctx *c, const json_t *o, const char *const *keys,
		 struct ncd_police_rate *r)
{
	const int64_t rmax = INT64_C(400000000000), bmax = INT64_C(1) << 32;
	int64_t pps, burst, bps, bb;

	if (want_type(c, o, JSON_OBJECT, "an object") || check_keys(c, o, keys) ||
	    get_int(c, o, "pps", 1, rmax, 0, &pps) || get_int(c, o, "burst", 1, bmax, 0, &burst) ||
	    get_int(c, o, "bps", 8, rmax, 0, &bps) ||
	    get_int(c, o, "burst_bytes", 1, bmax, 0, &bb))
		return -1;
	if ((pps != 0) == (bps != 0))
		return fail(c, "give a rate: pps (packets a second) or bps (bits a second)");
	r->bytes = bps != 0;
	if (r->bytes ? burst != 0 : bb != 0)
		return fail(c, "%s: give its burst in %s", r->bytes ? "bps" : "pps",
			    r->bytes ? "bytes (burst_bytes)" : "packets (burst)");
	r->rate = r->bytes ? (uint64_t)bps / 8 : (uint64_t)pps;
	r->burst = (uint64_t)(r->bytes ? bb : burst);
	if (r->burst == 0)
		return fail(c, "missing: %s", r->bytes ? "burst_bytes" : "burst");
	return 0;
}

/* exception.police: the kernel's path in buckets (docs/config.md). @return 0 or -1. */
static int
load_police(struct ctx *c, const json_t *o, struct ncd_port_conf *p)
{
	static const char *const keys[] = { "arp", "nd", "icmp", "other", "protect", NULL };
	static const char *const rate_keys[] = { "pps", "burst", "bps", "burst_bytes", NULL };
	static const char *const protect_keys[] = { "name", "match", "pps", "burst", "bps",
						    "burst_bytes", NULL };
	struct ncd_police_conf *pc = &p->police;
	const json_t *prot;
	size_t l;

	if (o == NULL)
		return 0;
	l = push(c, "police", 0);
	if (want_type(c, o, JSON_OBJECT, "an object") || check_keys(c, o, keys))
		return -1;
	pc->on = true;
	for (unsigned int b = 0; b < NCD_POLICE_PROTECT; b++) {
		const json_t *r = json_object_get(o, police_default[b].name);
		size_t l2;

		snprintf(pc->name[b], sizeof(pc->name[b]), "%s", police_default[b].name);
		pc->b[b] = (struct ncd_police_rate){ .rate = police_default[b].pps,
						     .burst = police_default[b].pps / 10 };
		if (r == NULL)
			continue;
		l2 = push(c, police_default[b].name, 0);
		if (load_police_rate(c, r, rate_keys, &pc->b[b]))
			return -1;
		pop(c, l2);
	}
	prot = json_object_get(o, "protect");
	if (prot != NULL) {
		size_t l2 = push(c, "protect", 0), i;
		const json_t *e;

		if (want_type(c, prot, JSON_ARRAY, "an array"))
			return -1;
		if (json_array_size(prot) > NCD_POLICE_PROTECT_MAX)
			return fail(c, "%zu entries: at most %d", json_array_size(prot),
				    NCD_POLICE_PROTECT_MAX);
		json_array_foreach(prot, i, e) {
			unsigned int b = NCD_POLICE_PROTECT + (unsigned int)i;
			size_t l3 = push(c, NULL, (int)i);
			const char *name;

			if (want_type(c, e, JSON_OBJECT, "an object") ||
			    load_police_rate(c, e, protect_keys, &pc->b[b]) ||
			    get_str(c, e, "name", false, &name) ||
			    load_match(c, json_object_get(e, "match"), &pc->protect[i]))
				return -1;
			if (name != NULL && !ncd_valid_name(name, NCD_POLICE_NAME_MAX, true)) {
				push(c, "name", 0);
				return fail(c, "'%s': 1-%d letters, digits, '_', '-' or '.'", name,
					    NCD_POLICE_NAME_MAX - 1);
			}
			snprintf(pc->name[b], sizeof(pc->name[b]), "%s",
				 name != NULL ? name : "");
			if (name == NULL)
				snprintf(pc->name[b], sizeof(pc->name[b]), "protect%u", (unsigned int)i & 7);
			for (unsigned int k = 0; k < b; k++)
				if (strcmp(pc->name[k], pc->name[b]) == 0) {
					push(c, "name", 0);
					return fail(c, "'%s': another bucket has that name",
						    pc->name[b]);
				}
			pop(c, l3);
		}
		pc->nprotect = (unsigned int)json_array_size(prot);
		pop(c, l2);
	}
	pop(c, l);
	return 0;
}

static int
load_exception(struct ctx *c, const json_t *e, struct ncd_port_conf *p)
{
	static const char *const keys[] = { "device", "mac", "mode", "host", "program", "attach",
					    "police", NULL };
	const char *dev, *mac, *mode, *prog, *attach;
	char dflt[64];
	size_t l;

	snprintf(dflt, sizeof(dflt), "net_tap_%s,iface=%s", p->name, p->name);
	p->exc_mac_port = true;
	if (e == NULL) {
		p->exc_device = strdup(dflt);
		return 0;
	}
	l = push(c, "exception", 0);
	if (want_type(c, e, JSON_OBJECT, "an object") || check_keys(c, e, keys) ||
	    get_str(c, e, "device", false, &dev) || get_str(c, e, "mac", false, &mac) ||
	    get_str(c, e, "mode", false, &mode) || get_str(c, e, "program", false, &prog) ||
	    get_str(c, e, "attach", false, &attach))
		return -1;
	if ((prog != NULL || attach != NULL) && (mode == NULL || strcmp(mode, "xdp") != 0)) {
		push(c, prog != NULL ? "program" : "attach", 0);
		return fail(c, "an XDP program is loaded only in mode xdp");
	}
	if (attach != NULL) {
		p->xdp_attach = strcmp(attach, "native") == 0 ? NCD_XDP_NATIVE :
				strcmp(attach, "generic") == 0 ? NCD_XDP_GENERIC : NCD_XDP_AUTO;
		if (p->xdp_attach == NCD_XDP_AUTO && strcmp(attach, "auto") != 0) {
			push(c, "attach", 0);
			return fail(c, "'%s': expected auto, native or generic", attach);
		}
	}
	if (mode != NULL && strcmp(mode, "xdp") == 0 && load_exception_xdp(c, e, p, prog))
		return -1;
	if (mode != NULL && strcmp(mode, "bifurcated") == 0) {
		/* The kernel keeps its netdev and every unmatched packet: there is no TAP. */
		if (dev != NULL || mac != NULL)
			return fail(c, "mode bifurcated has no exception device: drop device and mac");
		if (p->flow_offload == NCD_OFFLOAD_OFF) {
			push(c, "mode", 0);
			return fail(c, "bifurcated needs flow rules, but flow_offload is off");
		}
		if (json_object_get(e, "police") != NULL) {
			push(c, "police", 0);
			return fail(c, "mode bifurcated has no exception device to police: the "
				    "kernel takes its packets from the NIC");
		}
		p->bifurcated = true;
		p->exc_device = NULL;
		pop(c, l);
		return 0;
	}
	if (mode != NULL && strcmp(mode, "tap") != 0 && strcmp(mode, "xdp") != 0) {
		push(c, "mode", 0);
		return fail(c, "'%s': expected tap, xdp or bifurcated", mode);
	}
	if (dev != NULL && strcmp(dev, "none") == 0)
		p->exc_device = NULL;
	else
		p->exc_device = strdup(dev ? dev : dflt);
	if (p->exc_device == NULL && json_object_get(e, "police") != NULL) {
		push(c, "police", 0);
		return fail(c, "the exception device is none: nothing goes to the kernel to police");
	}
	if (load_police(c, json_object_get(e, "police"), p))
		return -1;
	if (mac != NULL && strcmp(mac, "port") != 0) {
		size_t l2 = push(c, "mac", 0);

		if (ncd_parse_mac(mac, p->exc_mac))
			return fail(c, "'%s' is not \"port\" or a MAC address", mac);
		pop(c, l2);
		p->exc_mac_port = false;
		p->exc_mac_set = true;
	}
	if (json_is_string(json_object_get(e, "host"))) {
		const char *h = json_string_value(json_object_get(e, "host"));
		size_t l2 = push(c, "host", 0);

		/* keep: the daemon keeps what the admin puts on the TAP; manager: someone else does. */
		if (strcmp(h, "manager") == 0)
			p->host_manager = true;
		else if (strcmp(h, "keep") != 0)
			return fail(c, "'%s': expected an object, \"keep\" or \"manager\"", h);
		pop(c, l2);
	} else if (json_object_get(e, "host") != NULL &&
		   load_host(c, json_object_get(e, "host"), p)) {
		return -1;
	}
	pop(c, l);
	return 0;
}

int
ncd_host_conf_load(const char *path, const json_t *h, struct ncd_host_conf *hc)
{
	struct ctx c = { .path = path };
	char iface[] = "iface=";
	struct ncd_port_conf pc = { .exc_device = iface };

	if (load_host(&c, h, &pc) != 0)
		return -1;
	*hc = pc.host;
	return 0;
}

/*
 * The largest frame an exception device of a known type takes, as its PMD
 * reports it (max_rx_pktlen in DPDK 22.11): a port whose MTU gives larger
 * frames cannot start, so --check-config says so. ethdev counts a frame as
 * the MTU plus the Ethernet header and CRC.
 */
static const struct {
	const char *prefix;
	uint32_t max_frame;
} exc_frame_max[] = {
	{ "net_tap", 1522 },
};

static int
exc_mtu_check(struct ctx *c, const struct ncd_port_conf *pc)
{
	uint32_t frame = pc->mtu + 18u;

	for (size_t i = 0; pc->exc_device != NULL && i < sizeof(exc_frame_max) /
							 sizeof(exc_frame_max[0]); i++)
		if (strncmp(pc->exc_device, exc_frame_max[i].prefix,
			    strlen(exc_frame_max[i].prefix)) == 0 &&
		    frame > exc_frame_max[i].max_frame) {
			push(c, "mtu", 0);
			return fail(c, "%u: frames of %u bytes, but the exception device (%s) takes "
				    "at most %u (an MTU of at most %u)", pc->mtu, frame,
				    exc_frame_max[i].prefix, exc_frame_max[i].max_frame,
				    exc_frame_max[i].max_frame - 18);
		}
	return 0;
}

static int
load_ports(struct ctx *c, const json_t *root)
{
	static const char *const keys[] = { "name", "device", "rx_queues", "mtu", "flow_offload",
					    "exception", NULL };
	json_t *ports = json_object_get(root, "ports"), *p;
	size_t l, i;

	l = push(c, "ports", 0);
	if (ports == NULL)
		return fail(c, "missing: at least one port is needed");
	if (want_type(c, ports, JSON_ARRAY, "an array"))
		return -1;
	if (json_array_size(ports) == 0 || json_array_size(ports) > NCD_MAX_PORTS)
		return fail(c, "1..%d ports are needed", NCD_MAX_PORTS);
	json_array_foreach(ports, i, p) {
		struct ncd_port_conf *pc = &c->cfg->ports[i];
		const char *name, *dev, *off;
		int64_t q, mtu;
		size_t l2 = push(c, NULL, (int)i);

		if (want_type(c, p, JSON_OBJECT, "an object") || check_keys(c, p, keys) ||
		    get_str(c, p, "name", true, &name) || get_str(c, p, "device", true, &dev) ||
		    get_int(c, p, "rx_queues", 1, NCD_MAX_QUEUES, 1, &q) ||
		    get_int(c, p, "mtu", 68, 9600, 1500, &mtu) ||
		    get_str(c, p, "flow_offload", false, &off))
			return -1;
		if (!ncd_valid_name(name, NCD_PORT_NAME_MAX, false)) {
			size_t l3 = push(c, "name", 0);

			(void)l3;
			return fail(c, "'%s': 1-15 letters, digits, '_' or '-' (it names the TAP)",
				    name);
		}
		for (size_t j = 0; j < i; j++)
			if (strcmp(c->cfg->ports[j].name, name) == 0) {
				push(c, "name", 0);
				return fail(c, "duplicate port name '%s' (ports[%zu])", name, j);
			}
		snprintf(pc->name, sizeof(pc->name), "%s", name);
		pc->device = strdup(dev);
		pc->rx_queues = (uint16_t)q;
		pc->mtu = (uint16_t)mtu;
		pc->flow_offload = NCD_OFFLOAD_AUTO;
		if (off != NULL) {
			if (strcmp(off, "off") == 0) {
				pc->flow_offload = NCD_OFFLOAD_OFF;
			} else if (strcmp(off, "required") == 0) {
				pc->flow_offload = NCD_OFFLOAD_REQUIRED;
			} else if (strcmp(off, "auto") != 0) {
				push(c, "flow_offload", 0);
				return fail(c, "'%s': expected auto, off or required", off);
			}
		}
		c->cfg->nports++;
		if (load_exception(c, json_object_get(p, "exception"), pc) || exc_mtu_check(c, pc))
			return -1;
		pop(c, l2);
	}
	pop(c, l);
	return 0;
}

static int
port_index(const struct ncd_config *cfg, const char *name)
{
	for (unsigned int i = 0; i < cfg->nports; i++)
		if (strcmp(cfg->ports[i].name, name) == 0)
			return (int)i;
	return -1;
}

/* The lcores EAL will run: its -l/--lcores list, or every online CPU. */
static int
eal_lcores(struct ctx *c, uint64_t *bits, unsigned int *main_lcore)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	bool has_main = false;

	*bits = 0;
	for (unsigned int i = 0; i < c->cfg->neal; i++) {
		const char *a = c->cfg->eal[i];

		if ((strcmp(a, "-l") == 0 || strcmp(a, "--lcores") == 0) && i + 1 < c->cfg->neal) {
			if (ncd_parse_lcores(c->cfg->eal[i + 1], bits)) {
				size_t l = push(c, "eal", 0);

				push(c, NULL, (int)i + 1);
				fail(c, "'%s' is not an lcore list netchanneld understands (e.g. 0-1,3)",
				     c->cfg->eal[i + 1]);
				pop(c, l);
				return -1;
			}
		} else if (strcmp(a, "--main-lcore") == 0 && i + 1 < c->cfg->neal) {
			*main_lcore = (unsigned int)atoi(c->cfg->eal[i + 1]);
			has_main = true;
		}
	}
	if (*bits == 0)
		*bits = ncpu >= 64 ? UINT64_MAX : (UINT64_C(1) << ncpu) - 1;
	if (!has_main)
		*main_lcore = (unsigned int)__builtin_ctzll(*bits);
	return 0;
}

static int
load_idle(struct ctx *c, const json_t *w, struct ncd_worker_conf *wc)
{
	const char *idle;

	if (get_str(c, w, "idle", false, &idle))
		return -1;
	if (idle == NULL || strcmp(idle, "poll") == 0)
		wc->idle = NCD_IDLE_POLL;
	else if (strcmp(idle, "adaptive") == 0)
		wc->idle = NCD_IDLE_ADAPTIVE;
	else if (strcmp(idle, "interrupt") == 0)
		wc->idle = NCD_IDLE_INTERRUPT;
	else {
		size_t l = push(c, "idle", 0);

		(void)l;
		return fail(c, "'%s': expected poll, adaptive or interrupt", idle);
	}
	return 0;
}

static int
load_workers(struct ctx *c, const json_t *root)
{
	static const char *const keys[] = { "lcore", "rx", "idle", NULL };
	static const char *const rxkeys[] = { "port", "queue", NULL };
	json_t *ws = json_object_get(root, "workers"), *w;
	uint8_t assigned[NCD_MAX_PORTS][NCD_MAX_QUEUES] = { { 0 } };
	unsigned int main_lcore, total = 0, given = 0;
	uint64_t lcores;
	size_t l, i;

	if (eal_lcores(c, &lcores, &main_lcore))
		return -1;
	l = push(c, "workers", 0);
	if (ws == NULL) {
		/* One worker, on the first lcore after the main one. */
		uint64_t rest = lcores & ~(UINT64_C(1) << main_lcore);

		if (rest == 0)
			return fail(c, "missing, and EAL's lcore list has no lcore besides the main "
				       "one (%u) to run a worker", main_lcore);
		c->cfg->workers = calloc(1, sizeof(*c->cfg->workers));
		c->cfg->workers[0].lcore = (unsigned int)__builtin_ctzll(rest);
		c->cfg->nworkers = 1;
	} else {
		if (want_type(c, ws, JSON_ARRAY, "an array"))
			return -1;
		if (json_array_size(ws) == 0 || json_array_size(ws) > NCD_MAX_WORKERS)
			return fail(c, "1..%d workers are needed", NCD_MAX_WORKERS);
		c->cfg->workers = calloc(json_array_size(ws), sizeof(*c->cfg->workers));
		json_array_foreach(ws, i, w) {
			struct ncd_worker_conf *wc = &c->cfg->workers[i];
			json_t *rx, *q;
			int64_t lc;
			size_t l2 = push(c, NULL, (int)i), j;

			if (want_type(c, w, JSON_OBJECT, "an object") || check_keys(c, w, keys))
				return -1;
			if (json_object_get(w, "lcore") == NULL) {
				push(c, "lcore", 0);
				return fail(c, "missing");
			}
			if (get_int(c, w, "lcore", 0, 63, 0, &lc))
				return -1;
			push(c, "lcore", 0);
			if (!(lcores & (UINT64_C(1) << lc)))
				return fail(c, "lcore %" PRId64 " is not in EAL's lcore list", lc);
			if ((unsigned int)lc == main_lcore)
				return fail(c, "lcore %" PRId64 " is EAL's main lcore, which runs the "
					       "control thread", lc);
			for (j = 0; j < i; j++)
				if (c->cfg->workers[j].lcore == (unsigned int)lc)
					return fail(c, "lcore %" PRId64 " has two workers (workers[%zu])",
						    lc, j);
			pop(c, l2);
			push(c, NULL, (int)i);
			wc->lcore = (unsigned int)lc;
			if (load_idle(c, w, wc))
				return -1;
			c->cfg->nworkers++;
			rx = json_object_get(w, "rx");
			if (rx == NULL) {
				pop(c, l2);
				continue;
			}
			push(c, "rx", 0);
			if (want_type(c, rx, JSON_ARRAY, "an array"))
				return -1;
			json_array_foreach(rx, j, q) {
				const char *pn;
				int64_t qi;
				int pi;
				size_t l3 = push(c, NULL, (int)j);

				if (want_type(c, q, JSON_OBJECT, "an object") ||
				    check_keys(c, q, rxkeys) || get_str(c, q, "port", true, &pn) ||
				    get_int(c, q, "queue", 0, NCD_MAX_QUEUES - 1, 0, &qi))
					return -1;
				pi = port_index(c->cfg, pn);
				if (pi < 0) {
					push(c, "port", 0);
					return fail(c, "no port named '%s'", pn);
				}
				if (qi >= c->cfg->ports[pi].rx_queues) {
					push(c, "queue", 0);
					return fail(c, "port '%s' has %u rx queues (0..%u)", pn,
						    c->cfg->ports[pi].rx_queues,
						    c->cfg->ports[pi].rx_queues - 1);
				}
				if (assigned[pi][qi]) {
					push(c, "queue", 0);
					return fail(c, "rx queue %" PRId64 " of port '%s' is assigned twice",
						    qi, pn);
				}
				assigned[pi][qi] = 1;
				wc->rx[wc->nrx++] = (struct ncd_rxq_conf){ (uint16_t)pi, (uint16_t)qi };
				given++;
				pop(c, l3);
			}
			pop(c, l2);
		}
	}
	for (unsigned int p = 0; p < c->cfg->nports; p++)
		total += c->cfg->ports[p].rx_queues;
	if (given == 0) {
		/* Round robin over the workers. */
		unsigned int k = 0;

		for (unsigned int p = 0; p < c->cfg->nports; p++)
			for (unsigned int q = 0; q < c->cfg->ports[p].rx_queues; q++, k++) {
				struct ncd_worker_conf *wc = &c->cfg->workers[k % c->cfg->nworkers];

				wc->rx[wc->nrx++] = (struct ncd_rxq_conf){ (uint16_t)p, (uint16_t)q };
			}
	} else if (given != total) {
		for (unsigned int p = 0; p < c->cfg->nports; p++)
			for (unsigned int q = 0; q < c->cfg->ports[p].rx_queues; q++)
				if (!assigned[p][q])
					return fail(c, "rx queue %u of port '%s' is assigned to no worker",
						    q, c->cfg->ports[p].name);
	}
	pop(c, l);
	return 0;
}

/* A user or group: a name the host knows, or a number. @return it, or -1 (reported) */
static int64_t
user_or_group(struct ctx *c, const char *key, const char *v, bool group)
{
	char *end;
	long n = strtol(v, &end, 10);

	push(c, key, 0);
	if (*v != '\0' && *end == '\0' && n >= 0 && n < INT32_MAX)
		return n;
	if (group) {
		const struct group *g = getgrnam(v);

		if (g != NULL)
			return g->gr_gid;
	} else {
		const struct passwd *pw = getpwnam(v);

		if (pw != NULL)
			return pw->pw_uid;
	}
	fail(c, "no %s '%s' on this host", group ? "group" : "user", v);
	return -1;
}

/* A count: get_int() into a uint32_t. */
static int
load_u32(struct ctx *c, const json_t *root, const char *key, int64_t lo, int64_t hi, int64_t dflt,
	 uint32_t *out)
{
	int64_t v;

	if (get_int(c, root, key, lo, hi, dflt, &v))
		return -1;
	*out = (uint32_t)v;
	return 0;
}

/* A count that must be a power of two in lo..hi (get_int()'s, then that). */
static int
get_pow2(struct ctx *c, const json_t *obj, const char *key, int64_t lo, int64_t hi, int64_t dflt,
	 uint32_t *out)
{
	if (load_u32(c, obj, key, lo, hi, dflt, out))
		return -1;
	if (*out & (*out - 1)) {
		push(c, key, 0);
		return fail(c, "%" PRIu32 " is not a power of 2", *out);
	}
	return 0;
}

/*
 * control.region: an isolated client's region, the memory one connection
 * may hold (docs/protocol.md): its rings' sizes and its buffers.
 */
static int
load_region(struct ctx *c, const json_t *ctl)
{
	static const char *const keys[] = { "rx_ring_size", "rx_buffers", "tx_ring_size", NULL };
	const json_t *r = ctl != NULL ? json_object_get(ctl, "region") : NULL;
	struct ncd_region_conf *rc = &c->cfg->region;
	size_t l = strlen(c->where);

	*rc = (struct ncd_region_conf){ .rx_ring_size = 1024, .rx_buffers = 4096,
					.tx_ring_size = 256 };
	if (r == NULL)
		return 0;
	push(c, "region", 0);
	if (want_type(c, r, JSON_OBJECT, "an object") || check_keys(c, r, keys) ||
	    get_pow2(c, r, "rx_ring_size", 32, 65536, 1024, &rc->rx_ring_size) ||
	    get_pow2(c, r, "rx_buffers", 64, 262144, 4096, &rc->rx_buffers) ||
	    get_pow2(c, r, "tx_ring_size", 32, 65536, 256, &rc->tx_ring_size))
		return -1;
	pop(c, l);
	return 0;
}

/*
 * A limits object (control.limits, or an allow entry's): its fields replace
 * those of *lim, which holds the defaults.
 */
static int
load_limits(struct ctx *c, const json_t *obj, struct ncd_limits *lim)
{
	static const char *const keys[] = { "connections", "channels", "memory_mb", "eventfds",
					    "mbufs", "tx_pps", "tx_bps", NULL };
	const int64_t rmax = INT64_C(400000000000);
	const json_t *o = json_object_get(obj, "limits");
	int64_t conns, chans, mb, efds, mbufs, txp, txb;
	size_t l = strlen(c->where);

	if (o == NULL)
		return 0;
	push(c, "limits", 0);
	if (want_type(c, o, JSON_OBJECT, "an object") || check_keys(c, o, keys) ||
	    get_int(c, o, "connections", 1, NCD_MAX_CONNECTIONS, lim->connections, &conns) ||
	    get_int(c, o, "channels", 0, 1 << 20, lim->channels, &chans) ||
	    get_int(c, o, "memory_mb", 0, 1 << 20, (int64_t)(lim->memory >> 20), &mb) ||
	    get_int(c, o, "eventfds", 0, 1 << 20, lim->eventfds, &efds) ||
	    get_int(c, o, "mbufs", 0, c->cfg->mbufs, lim->mbufs, &mbufs) ||
	    get_int(c, o, "tx_pps", 0, rmax, (int64_t)lim->tx_pps, &txp) ||
	    get_int(c, o, "tx_bps", 0, rmax, (int64_t)lim->tx_bps, &txb))
		return -1;
	*lim = (struct ncd_limits){ .connections = (uint32_t)conns, .channels = (uint32_t)chans,
				    .memory = (uint64_t)mb << 20, .eventfds = (uint32_t)efds,
				    .mbufs = (uint32_t)mbufs, .tx_pps = (uint64_t)txp,
				    .tx_bps = (uint64_t)txb };
	pop(c, l);
	return 0;
}

/*
 * control.owner, .group and .mode: who may open the control socket. Any
 * process that may, and that control.allow allows, is a client.
 */
static int
load_socket_access(struct ctx *c, const json_t *ctl)
{
	const char *owner = NULL, *group = NULL, *mode = NULL;
	char *end;
	size_t l = strlen(c->where);

	if (get_str(c, ctl, "owner", false, &owner) || get_str(c, ctl, "group", false, &group) ||
	    get_str(c, ctl, "mode", false, &mode))
		return -1;
	if (owner != NULL && (c->cfg->socket_uid = user_or_group(c, "owner", owner, false)) < 0)
		return -1;
	pop(c, l);
	if (group != NULL && (c->cfg->socket_gid = user_or_group(c, "group", group, true)) < 0)
		return -1;
	pop(c, l);
	if (mode != NULL) {
		long m = strtol(mode, &end, 8);

		push(c, "mode", 0);
		if (*mode == '\0' || *end != '\0' || m < 0 || m > 0777)
			return fail(c, "'%s' is not a mode in octal, 0 to 0777", mode);
		c->cfg->socket_mode = (uint32_t)m;
		pop(c, l);
	}
	return 0;
}

int
ncd_socket_path_check(const char *path, char *err, size_t len)
{
	if (path[0] != '/') {
		snprintf(err, len, "'%s' is not an absolute path", path);
		return -1;
	}
	/* Checked here, not at bind(): --check-config passes only what can start. */
	if (strlen(path) >= NCD_SOCKET_PATH_MAX) {
		snprintf(err, len, "%zu bytes, longer than a Unix socket's path takes (%d)",
			 strlen(path), NCD_SOCKET_PATH_MAX - 1);
		return -1;
	}
	return 0;
}

static int
load_control(struct ctx *c, const json_t *root)
{
	static const char *const keys[] = { "socket", "allow", "mbuf_quota", "owner", "group", "mode",
					    "region", "hello_timeout_ms", "limits", NULL };
	static const char *const akeys[] = { "uid", "gid", "dport", "zero_copy", "limits", "view",
					     "preempt", NULL };
	json_t *ctl = json_object_get(root, "control"), *allow, *a;
	const char *sock = NULL;
	int64_t quota = c->cfg->mbufs / 4, hello_ms = 1000;
	size_t l, i;

	l = push(c, "control", 0);
	if (ctl != NULL && (want_type(c, ctl, JSON_OBJECT, "an object") ||
			    check_keys(c, ctl, keys) || get_str(c, ctl, "socket", false, &sock) ||
			    get_int(c, ctl, "mbuf_quota", 1, c->cfg->mbufs, quota, &quota) ||
			    get_int(c, ctl, "hello_timeout_ms", 100, 60000, 1000, &hello_ms)))
		return -1;
	c->cfg->mbuf_quota = (uint32_t)quota;
	c->cfg->hello_timeout_ms = (uint32_t)hello_ms;
	c->cfg->limits = (struct ncd_limits){ .connections = 16, .channels = 64,
					      .memory = UINT64_C(256) << 20, .eventfds = 64,
					      .mbufs = c->cfg->mbufs / 2 };
	if (load_region(c, ctl) || (ctl != NULL && load_limits(c, ctl, &c->cfg->limits)) ||
	    (ctl != NULL && load_socket_access(c, ctl)))
		return -1;
	if (sock != NULL) {
		char err[160];

		if (ncd_socket_path_check(sock, err, sizeof(err)) != 0) {
			push(c, "socket", 0);
			return fail(c, "%s", err);
		}
	}
	c->cfg->control_socket = strdup(sock ? sock : "/run/netchanneld/netchanneld.sock");
	allow = ctl ? json_object_get(ctl, "allow") : NULL;
	if (allow == NULL) {
		/* Root only, by default. */
		c->cfg->allow = calloc(1, sizeof(*c->cfg->allow));
		c->cfg->allow[0] = (struct ncd_allow_conf){ .uid = 0, .gid = -1, .port_hi = UINT16_MAX,
							    .zero_copy = true };
		c->cfg->nallow = 1;
		pop(c, l);
		return 0;
	}
	push(c, "allow", 0);
	if (want_type(c, allow, JSON_ARRAY, "an array"))
		return -1;
	c->cfg->allow = calloc(json_array_size(allow) + 1, sizeof(*c->cfg->allow));
	json_array_foreach(allow, i, a) {
		struct ncd_allow_conf *ac = &c->cfg->allow[i];
		const char *dp, *view;
		struct nc_trie_port p;
		char err[128];
		size_t l2 = push(c, NULL, (int)i);

		if (want_type(c, a, JSON_OBJECT, "an object") || check_keys(c, a, akeys) ||
		    get_int(c, a, "uid", 0, UINT32_MAX - 1, -1, &ac->uid) ||
		    get_int(c, a, "gid", 0, UINT32_MAX - 1, -1, &ac->gid) ||
		    get_str(c, a, "dport", false, &dp) ||
		    get_bool(c, a, "zero_copy", false, &ac->zero_copy) ||
		    get_bool(c, a, "preempt", false, &ac->preempt) ||
		    get_str(c, a, "view", false, &view))
			return -1;
		if (view != NULL && strcmp(view, "all") != 0 && strcmp(view, "own") != 0) {
			push(c, "view", 0);
			return fail(c, "'%s' is not \"own\" or \"all\"", view);
		}
		ac->view_all = view != NULL && strcmp(view, "all") == 0;
		ac->limits = c->cfg->limits;
		ac->has_limits = json_object_get(a, "limits") != NULL;
		if (load_limits(c, a, &ac->limits))
			return -1;
		ac->port_lo = 0;
		ac->port_hi = UINT16_MAX;
		if (dp != NULL) {
			push(c, "dport", 0);
			if (ncd_parse_port(dp, &p, err, sizeof(err)))
				return fail(c, "%s", err);
			if (p.kind == NC_TRIE_PORT_MASK)
				return fail(c, "a range lo-hi is needed here");
			if (p.kind == NC_TRIE_PORT_RANGE) {
				ac->port_lo = p.lo;
				ac->port_hi = p.hi;
			}
		}
		c->cfg->nallow++;
		pop(c, l2);
	}
	pop(c, l);
	return 0;
}

/* A match field may be a string, or for ports and protocols a number. */
static int
match_str(struct ctx *c, const json_t *m, const char *key, char *buf, size_t size,
	  const char **out)
{
	json_t *v = json_object_get(m, key);

	*out = NULL;
	if (v == NULL)
		return 0;
	if (json_is_integer(v) && strcmp(key, "dst") && strcmp(key, "src")) {
		snprintf(buf, size, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
		*out = buf;
		return 0;
	}
	if (!json_is_string(v)) {
		size_t l = push(c, key, 0);
		int r = fail(c, "expected a string%s, got %s",
			     strcmp(key, "dst") && strcmp(key, "src") ? " or an integer" : "",
			     type_name(v));

		pop(c, l);
		return r;
	}
	*out = json_string_value(v);
	return 0;
}

static int
load_match(struct ctx *c, const json_t *m, struct nc_trie_rule *r)
{
	static const char *const keys[] = { "dst", "src", "dport", "sport", "proto", "family", NULL };
	uint8_t fam[2] = { NC_TRIE_AF_ANY, NC_TRIE_AF_ANY };
	const char *s, *family;
	char buf[32], err[160];
	size_t l;

	memset(r, 0, sizeof(*r));
	l = push(c, "match", 0);
	if (m == NULL)
		return fail(c, "missing");
	size_t lm = strlen(c->where);

	if (want_type(c, m, JSON_OBJECT, "an object") || check_keys(c, m, keys))
		return -1;
	for (int i = 0; i < 2; i++) {
		const char *key = i ? "src" : "dst";

		if (match_str(c, m, key, buf, sizeof(buf), &s))
			return -1;
		if (s != NULL && ncd_parse_prefix(s, i ? &r->src : &r->dst, i ? &r->src_len :
						  &r->dst_len, &fam[i], err, sizeof(err))) {
			push(c, key, 0);
			return fail(c, "%s", err);
		}
	}
	for (int i = 0; i < 2; i++) {
		const char *key = i ? "sport" : "dport";

		if (match_str(c, m, key, buf, sizeof(buf), &s))
			return -1;
		if (s != NULL && ncd_parse_port(s, i ? &r->sport : &r->dport, err, sizeof(err))) {
			push(c, key, 0);
			return fail(c, "%s", err);
		}
	}
	if (match_str(c, m, "proto", buf, sizeof(buf), &s))
		return -1;
	if (s != NULL && ncd_parse_proto(s, &r->proto, &r->proto_mask, err, sizeof(err))) {
		push(c, "proto", 0);
		return fail(c, "%s", err);
	}
	if (fam[0] && fam[1] && fam[0] != fam[1])
		return fail(c, "dst and src are of different address families");
	r->family = fam[0] ? fam[0] : fam[1];
	if (get_str(c, m, "family", false, &family))
		return -1;
	if (family != NULL) {
		uint8_t f = strcmp(family, "ipv4") == 0 ? NC_TRIE_AF_INET :
			    strcmp(family, "ipv6") == 0 ? NC_TRIE_AF_INET6 : 0;

		push(c, "family", 0);
		if (f == 0)
			return fail(c, "'%s': expected ipv4 or ipv6", family);
		if (r->family != NC_TRIE_AF_ANY && r->family != f)
			return fail(c, "%s, but the addresses are %s", family,
				    r->family == NC_TRIE_AF_INET ? "IPv4" : "IPv6");
		r->family = f;
		pop(c, lm);
	}
	pop(c, l);
	return 0;
}

/* action: { "nat": { dst, dport, src, sport, port, via, reverse } } */
static int
load_nat(struct ctx *c, const json_t *act, struct ncd_channel_conf *cc)
{
	static const char *const akeys[] = { "nat", NULL };
	static const char *const keys[] = { "dst", "dport", "src", "sport", "port", "via",
					    "reverse", NULL };
	static const char *const addrs[] = { "dst", "src", "via" };
	const struct ncd_chan_limit *pl = &ncd_chan_limits[NCD_OPT_NAT_PORT];
	const json_t *n = json_object_get(act, "nat");
	struct ncd_nat_conf *nc = &cc->nat;
	const char *port, *s;
	int64_t ports[2];
	bool reverse;
	char err[160], num[16];
	size_t l;

	if (check_keys(c, act, akeys))
		return -1;
	if (n == NULL)
		return fail(c, "expected \"deliver\", \"drop\" or { \"nat\": {...} }, got an object "
			    "without nat");
	l = push(c, "nat", 0);
	if (want_type(c, n, JSON_OBJECT, "an object") || check_keys(c, n, keys) ||
	    get_int(c, n, "dport", pl->lo, pl->hi, pl->dflt, &ports[0]) ||
	    get_int(c, n, "sport", pl->lo, pl->hi, pl->dflt, &ports[1]) ||
	    get_str(c, n, "port", false, &port) || get_bool(c, n, "reverse", false, &reverse))
		return -1;
	memset(nc, 0, sizeof(*nc));
	for (unsigned int i = 0; i < sizeof(addrs) / sizeof(addrs[0]); i++) {
		if (get_str(c, n, addrs[i], false, &s))
			return -1;
		if (s != NULL && ncd_nat_option(nc, addrs[i], s, err, sizeof(err)) != 0) {
			push(c, addrs[i], 0);
			return fail(c, "%s", err);
		}
	}
	for (unsigned int i = 0; i < 2; i++) {
		snprintf(num, sizeof(num), "%" PRId64, ports[i]);
		if (ports[i] != 0 && ncd_nat_option(nc, i ? "sport" : "dport", num, err, sizeof(err)))
			return fail(c, "%s", err);
	}
	if (reverse)
		ncd_nat_option(nc, "reverse", NULL, err, sizeof(err));
	if (port != NULL) {
		int pi = port_index(c->cfg, port);

		if (pi < 0) {
			push(c, "port", 0);
			return fail(c, "no port named '%s'", port);
		}
		nc->has_port = true;
		nc->port = (uint16_t)pi;
	}
	cc->action = NC_ACTION_NAT;
	pop(c, l);
	return 0;
}

static int
load_nat_table(struct ctx *c, const json_t *root)
{
	static const char *const keys[] = { "flows", "idle_timeout_ms", "flows_per_channel", NULL };
	const json_t *n = json_object_get(root, "nat");
	int64_t flows, idle, per;
	size_t l;

	c->cfg->nat_flows = 65536;
	c->cfg->nat_flows_per_channel = 65536 / 2;
	c->cfg->nat_idle_ms = 60000;
	if (n == NULL)
		return 0;
	l = push(c, "nat", 0);
	/* By default one channel may fill half the table: the others keep the rest. */
	if (want_type(c, n, JSON_OBJECT, "an object") || check_keys(c, n, keys) ||
	    get_int(c, n, "flows", 8, 1 << 20, 65536, &flows) ||
	    get_int(c, n, "idle_timeout_ms", 100, 86400000, 60000, &idle) ||
	    get_int(c, n, "flows_per_channel", 1, flows, flows / 2, &per))
		return -1;
	c->cfg->nat_flows = (uint32_t)flows;
	c->cfg->nat_flows_per_channel = (uint32_t)per;
	c->cfg->nat_idle_ms = (uint32_t)idle;
	pop(c, l);
	return 0;
}

/*
 * fragments: { datagrams, timeout_ms }. What the tables hold comes out of
 * the mbuf pool, up to NCD_FRAG_MAX_PIECES mbufs a datagram: at most half
 * of the pool, or the ports starve of buffers under a fragment flood.
 */
static int
load_fragments(struct ctx *c, const json_t *root)
{
	static const char *const keys[] = { "datagrams", "timeout_ms", NULL };
	const json_t *f = json_object_get(root, "fragments");
	const uint64_t per = (uint64_t)NCD_FRAG_MAX_PIECES * c->cfg->nworkers;
	int64_t n, ms, def = (int64_t)(c->cfg->mbufs / 4 / per);
	size_t l;

	l = push(c, "fragments", 0);
	if (f != NULL && (want_type(c, f, JSON_OBJECT, "an object") || check_keys(c, f, keys)))
		return -1;
	if (get_int(c, f, "datagrams", 1, 65536, def < 1 ? 1 : def > 1024 ? 1024 : def, &n) ||
	    get_int(c, f, "timeout_ms", 10, 30000, 2000, &ms))
		return -1;
	if ((uint64_t)n * per > c->cfg->mbufs / 2) {
		push(c, "datagrams", 0);
		return fail(c, "%" PRId64 " datagrams x %u fragments x %u worker(s) may hold %" PRIu64
			    " mbufs, over half of mempool.mbufs (%u)", n, NCD_FRAG_MAX_PIECES,
			    c->cfg->nworkers, (uint64_t)n * per, c->cfg->mbufs);
	}
	c->cfg->frag_datagrams = (uint32_t)n;
	c->cfg->frag_timeout_ms = (uint32_t)ms;
	pop(c, l);
	return 0;
}

/* A static channel's "attach": [{"uid": N}, {"gid": N}, {"uid": N, "gid": N}...]. */
static int
load_attach(struct ctx *c, const json_t *arr, struct ncd_channel_conf *cc)
{
	static const char *const keys[] = { "uid", "gid", NULL };
	const json_t *a;
	size_t i, l, la;

	if (arr == NULL)
		return 0;
	l = push(c, "attach", 0);
	la = strlen(c->where);
	if (want_type(c, arr, JSON_ARRAY, "an array"))
		return -1;
	if (json_array_size(arr) > NCD_ATTACH_MAX)
		return fail(c, "%zu entries, more than %d", json_array_size(arr), NCD_ATTACH_MAX);
	json_array_foreach(arr, i, a) {
		struct ncd_attach_conf *ac = &cc->attach[i];

		push(c, NULL, (int)i);
		if (want_type(c, a, JSON_OBJECT, "an object") || check_keys(c, a, keys) ||
		    get_int(c, a, "uid", 0, UINT32_MAX - 1, -1, &ac->uid) ||
		    get_int(c, a, "gid", 0, UINT32_MAX - 1, -1, &ac->gid))
			return -1;
		if (ac->uid < 0 && ac->gid < 0)
			return fail(c, "a uid, a gid or both: an entry that names neither would let "
				    "anyone attach");
		pop(c, la);
	}
	cc->nattach = (uint8_t)json_array_size(arr);
	pop(c, l);
	return 0;
}

/* A channel's "consumers", "queue" and "port": who reads it, and where it is steered and sent. */
static int
load_placement(struct ctx *c, const char *consumers, int64_t queue, const char *port,
	       struct ncd_channel_conf *cc)
{
	if (consumers != NULL) {
		if (strcmp(consumers, "shared") != 0 && strcmp(consumers, "one") != 0) {
			push(c, "consumers", 0);
			return fail(c, "'%s': expected one or shared", consumers);
		}
		cc->shared = strcmp(consumers, "shared") == 0;
	}
	if (queue >= 0) {
		unsigned int most = 0;

		for (unsigned int pi = 0; pi < c->cfg->nports; pi++)
			if (c->cfg->ports[pi].rx_queues > most)
				most = c->cfg->ports[pi].rx_queues;
		if (queue >= (int64_t)most) {
			push(c, "queue", 0);
			return fail(c, "%" PRId64 ": no port has that rx queue (the most is %u)", queue,
				    most);
		}
		cc->steer = true;
		cc->queue = (uint16_t)queue;
	}
	if (port != NULL) {
		int pi = port_index(c->cfg, port);

		if (pi < 0) {
			push(c, "port", 0);
			return fail(c, "no port named '%s'", port);
		}
		cc->port = (uint16_t)pi;
	}
	return 0;
}

/* A channel's name: a valid one, not an earlier channel's (seen: name -> index). */
static int
load_name(struct ctx *c, const char *name, size_t i, json_t *seen, struct ncd_channel_conf *cc)
{
	char err[160];

	/* Checked whole before it is cut to fit cc->name. */
	if (ncd_channel_name_check(name, err, sizeof(err)) != 0) {
		push(c, "name", 0);
		return fail(c, "%s", err);
	}
	if (json_object_get(seen, name) != NULL) {
		push(c, "name", 0);
		return fail(c, "duplicate channel name '%s' (channels[%" JSON_INTEGER_FORMAT "])", name,
			    json_integer_value(json_object_get(seen, name)));
	}
	if (json_object_set_new(seen, name, json_integer((json_int_t)i)) != 0)
		return fail(c, "json_object_set: out of memory");
	snprintf(cc->name, sizeof(cc->name), "%s", name);
	return 0;
}

/* A channel's "action": deliver (the default), drop, or { "nat": {...} }. */
static int
load_action(struct ctx *c, const json_t *act, struct ncd_channel_conf *cc)
{
	if (act == NULL)
		return 0;
	push(c, "action", 0);
	if (json_is_object(act))
		return load_nat(c, act, cc);
	if (!json_is_string(act))
		return fail(c, "expected \"deliver\", \"drop\" or { \"nat\": {...} }, got %s",
			    type_name(act));
	if (strcmp(json_string_value(act), "drop") == 0)
		cc->action = NC_ACTION_DROP;
	else if (strcmp(json_string_value(act), "deliver") != 0)
		return fail(c, "'%s': expected deliver, drop or { \"nat\": {...} }",
			    json_string_value(act));
	return 0;
}

/* A meter's key, if given, in lo..hi into *v (else 0). @return 0 or -1. */
static int
meter_int(struct ctx *c, const json_t *m, const char *key, int64_t lo, int64_t hi, uint64_t *v)
{
	int64_t x;

	if (get_int(c, m, key, lo, hi, 0, &x))
		return -1;
	*v = (uint64_t)x;
	return 0;
}

/*
 * channels[].meter: in packets ({pps, burst, excess_burst}) or in bits a
 * second and bytes ({bps, burst_bytes, excess_burst_bytes}); a peak rate and
 * burst make it RFC 2698's trTCM; "mode": "rfc4115" takes eir (in the
 * meter's unit) and the excess burst. @return 0 or -1.
 */
static int
load_meter_as(struct ctx *c, const char *key, const json_t *m, struct ncd_meter_conf *mc)
{
	static const char *const keys[] = { "pps", "burst", "excess_burst", "bps", "burst_bytes",
					    "excess_burst_bytes", "peak_pps", "peak_burst",
					    "peak_bps", "peak_burst_bytes", "mode", "eir", "exceed",
					    NULL };
	const int64_t rmax = INT64_C(400000000000), bmax = INT64_C(1) << 32;
	uint64_t pps, burst, ebs, bps, bb, ebb, ppps, pb, pbps, pbb, eir;
	const char *mode, *exceed;
	bool rfc4115;
	size_t l;

	if (m == NULL)
		return 0;
	l = push(c, key, 0);
	if (want_type(c, m, JSON_OBJECT, "an object") || check_keys(c, m, keys) ||
	    meter_int(c, m, "pps", 1, rmax, &pps) || meter_int(c, m, "burst", 1, bmax, &burst) ||
	    meter_int(c, m, "excess_burst", 0, bmax, &ebs) ||
	    meter_int(c, m, "bps", 8, rmax, &bps) ||
	    meter_int(c, m, "burst_bytes", 1, bmax, &bb) ||
	    meter_int(c, m, "excess_burst_bytes", 0, bmax, &ebb) ||
	    meter_int(c, m, "peak_pps", 1, rmax, &ppps) ||
	    meter_int(c, m, "peak_burst", 1, bmax, &pb) ||
	    meter_int(c, m, "peak_bps", 8, rmax, &pbps) ||
	    meter_int(c, m, "peak_burst_bytes", 1, bmax, &pbb) ||
	    meter_int(c, m, "eir", 1, rmax, &eir) || get_str(c, m, "mode", false, &mode) ||
	    get_str(c, m, "exceed", false, &exceed))
		return -1;
	if ((pps != 0) == (bps != 0))
		return fail(c, "give a rate: pps (packets a second) or bps (bits a second)");
	mc->bytes = bps != 0;
	/* The other unit's keys would be ignored without a word: refused. */
	if (mc->bytes ? (burst || ebs || ppps || pb) : (bb || ebb || pbps || pbb))
		return fail(c, "%s: give its bursts in %s (%s)", mc->bytes ? "bps" : "pps",
			    mc->bytes ? "bytes" : "packets",
			    mc->bytes ? "burst_bytes, excess_burst_bytes, peak_bps, peak_burst_bytes" :
					"burst, excess_burst, peak_pps, peak_burst");
	if (mc->bytes) {
		pps = bps / 8;
		burst = bb;
		ebs = ebb;
		ppps = pbps / 8;
		pb = pbb;
		eir /= 8;
	}
	if (burst == 0)
		return fail(c, "missing: %s", mc->bytes ? "burst_bytes" : "burst");
	rfc4115 = mode != NULL && strcmp(mode, "rfc4115") == 0;
	if (mode != NULL && !rfc4115 && strcmp(mode, "rfc2697") != 0 &&
	    strcmp(mode, "rfc2698") != 0) {
		push(c, "mode", 0);
		return fail(c, "'%s': expected rfc2697, rfc2698 or rfc4115", mode);
	}
	mc->rate = pps;
	mc->burst = burst;
	if (rfc4115) {
		if (eir == 0 || ebs == 0)
			return fail(c, "mode rfc4115 needs eir and %s", mc->bytes ?
				    "excess_burst_bytes" : "excess_burst");
		if (ppps || pb)
			return fail(c, "mode rfc4115 has eir, not a peak rate");
		mc->kind = NCD_METER_RFC4115;
		mc->peak_rate = eir;
		mc->excess_burst = ebs;
	} else if (ppps || pb || (mode != NULL && strcmp(mode, "rfc2698") == 0)) {
		if (ppps == 0 || pb == 0)
			return fail(c, "a peak rate needs both %s", mc->bytes ?
				    "peak_bps and peak_burst_bytes" : "peak_pps and peak_burst");
		if (ppps < pps)
			return fail(c, "the peak rate is below the committed rate (RFC 2698: PIR >= CIR)");
		if (ebs)
			return fail(c, "trTCM (a peak rate) has no excess burst");
		if (eir)
			return fail(c, "eir is mode rfc4115's");
		mc->kind = NCD_METER_TRTCM;
		mc->peak_rate = ppps;
		mc->peak_burst = pb;
	} else {
		if (eir)
			return fail(c, "eir is mode rfc4115's");
		mc->kind = NCD_METER_SRTCM;
		mc->excess_burst = ebs;
	}
	if (exceed != NULL && strcmp(exceed, "kernel") != 0 && strcmp(exceed, "drop") != 0) {
		push(c, "exceed", 0);
		return fail(c, "'%s': expected drop or kernel", exceed);
	}
	mc->exceed_kernel = exceed != NULL && strcmp(exceed, "kernel") == 0;
	pop(c, l);
	return 0;
}

/* channels[].meter. */
static int
load_meter(struct ctx *c, const json_t *m, struct ncd_meter_conf *mc)
{
	return load_meter_as(c, "meter", m, mc);
}

/*
 * channels[].tx_meter: a meter's shape, for what the channel's clients send.
 * Over it, their packets wait on their ring: there is nothing to exceed to.
 */
static int
load_tx_meter(struct ctx *c, const json_t *m, struct ncd_channel_conf *cc)
{
	size_t l;

	if (m == NULL)
		return 0;
	if (load_meter_as(c, "tx_meter", m, &cc->tx_meter))
		return -1;
	l = push(c, "tx_meter", 0);
	if (json_object_get(m, "exceed") != NULL) {
		push(c, "exceed", 0);
		return fail(c, "a transmit meter holds the client's packets on its ring, to be "
			    "sent when the rate allows: nothing exceeds");
	}
	if (!cc->tx)
		return fail(c, "the channel does not transmit: give it \"tx\": true");
	pop(c, l);
	return 0;
}

int
ncd_meter_from_words(const char *spec, struct ncd_meter_conf *mc, char *err, size_t len)
{
	json_t *o = json_object();
	char buf[512], *save = NULL;
	int ret;

	memset(mc, 0, sizeof(*mc));
	if ((size_t)snprintf(buf, sizeof(buf), "%s", spec) >= sizeof(buf)) {
		json_decref(o);
		snprintf(err, len, "too long");
		return -1;
	}
	for (char *kv = strtok_r(buf, ",", &save); kv != NULL; kv = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(kv, '='), *end;
		long long n;

		if (eq == NULL || eq == kv) {
			json_decref(o);
			snprintf(err, len, "'%s': expected KEY=VALUE", kv);
			return -1;
		}
		*eq++ = '\0';
		errno = 0;
		n = strtoll(eq, &end, 10);
		/* mode and exceed are words; the rest are numbers. */
		json_object_set_new(o, kv, *eq != '\0' && *end == '\0' && errno == 0 ?
				    json_integer(n) : json_string(eq));
	}
	ret = ncd_meter_from_json(o, mc, err, len);
	json_decref(o);
	return ret;
}

int
ncd_meter_from_json(const json_t *o, struct ncd_meter_conf *mc, char *err, size_t len)
{
	struct ctx c = { .path = "meter", .err = err, .errlen = len };

	memset(mc, 0, sizeof(*mc));
	/* Its path: "meter: " leads the error; the key at fault follows it. */
	return load_meter(&c, o, mc);
}

/* channels[i]: into cc, its rule checked against the earlier ones' (in t). @return 0 or -1. */
static int
load_channel(struct ctx *c, const json_t *ch, size_t i, json_t *seen, struct nc_trie *t,
	     struct ncd_channel_conf *cc)
{
	static const char *const keys[] = { "name", "match", "priority", "action", "ring_size",
					    "queue_bytes", "memory_limit_order", "tx", "port", "queue",
					    "consumers", "attach", "meter", "tx_meter", NULL };
	const struct ncd_chan_limit *lim = ncd_chan_limits;
	const char *name, *port = NULL, *field, *consumers = NULL;
	int64_t prio, ring, qb, order, queue;
	size_t l2 = push(c, NULL, (int)i);
	char err[160];
	int id;

	ncd_channel_conf_init(cc);
	if (want_type(c, ch, JSON_OBJECT, "an object") || check_keys(c, ch, keys) ||
	    get_str(c, ch, "name", true, &name))
		return -1;
#define LIMITS(o) lim[o].lo, lim[o].hi, lim[o].dflt
	if (get_int(c, ch, "priority", LIMITS(NCD_OPT_PRIORITY), &prio) ||
	    get_int(c, ch, "ring_size", LIMITS(NCD_OPT_RING_SIZE), &ring) ||
	    get_int(c, ch, "queue_bytes", LIMITS(NCD_OPT_QUEUE_BYTES), &qb) ||
	    get_int(c, ch, "memory_limit_order", LIMITS(NCD_OPT_MEMORY_LIMIT_ORDER), &order) ||
	    get_bool(c, ch, "tx", false, &cc->tx) || get_str(c, ch, "port", false, &port) ||
	    get_int(c, ch, "queue", LIMITS(NCD_OPT_QUEUE), &queue) ||
	    get_str(c, ch, "consumers", false, &consumers))
		return -1;
#undef LIMITS
	if (load_attach(c, json_object_get(ch, "attach"), cc) ||
	    load_placement(c, consumers, queue, port, cc) || load_name(c, name, i, seen, cc))
		return -1;
	if (order && json_object_get(ch, "queue_bytes"))
		return fail(c, "give queue_bytes or memory_limit_order, not both");
	cc->ring_size = (uint32_t)ring;
	cc->queue_bytes = order ? UINT64_C(1) << order : (uint64_t)qb;
	if (load_match(c, json_object_get(ch, "match"), &cc->rule))
		return -1;
	cc->rule.priority = (uint32_t)prio;
	if (load_action(c, json_object_get(ch, "action"), cc) ||
	    load_meter(c, json_object_get(ch, "meter"), &cc->meter) ||
	    load_tx_meter(c, json_object_get(ch, "tx_meter"), cc))
		return -1;
	pop(c, l2);
	push(c, NULL, (int)i);
	if (ncd_channel_conf_check(cc, c->cfg->nports, &field, err, sizeof(err)) != 0) {
		push(c, field, 0);
		return fail(c, "%s", err);
	}
	id = nc_trie_add(t, &cc->rule);
	if (id == -EEXIST)
		return fail(c, "the same match and priority as an earlier channel");
	if (id < 0)
		return fail(c, "match: %s", strerror(-id));
	pop(c, l2);
	return 0;
}

static int
load_channels(struct ctx *c, const json_t *root)
{
	json_t *chs = json_object_get(root, "channels"), *ch;
	struct nc_trie_config tc = NC_TRIE_SIZED(nc_trie_config, .name = "config", .socket_id = -1,
			.max_rules = c->cfg->max_channels);
	struct nc_trie *t;
	json_t *seen;
	size_t l, i;
	int ret = -1;

	if (chs == NULL)
		return 0;
	l = push(c, "channels", 0);
	if (want_type(c, chs, JSON_ARRAY, "an array"))
		return -1;
	if (json_array_size(chs) > c->cfg->max_channels)
		return fail(c, "%zu channels, more than max_channels (%u)", json_array_size(chs),
			    c->cfg->max_channels);
	c->cfg->channels = calloc(json_array_size(chs) + 1, sizeof(*c->cfg->channels));
	if (c->cfg->channels == NULL)
		return fail(c, "calloc: %s", strerror(errno));
	/* Rules are checked for duplicates the way the daemon will add them. */
	t = nc_trie_create(&tc);
	if (t == NULL)
		return fail(c, "nc_trie_create: %s", strerror(errno));
	/* Names seen so far, to their index: a hash table, so 100K channels load in linear time. */
	seen = json_object();
	json_array_foreach(chs, i, ch) {
		if (load_channel(c, ch, i, seen, t, &c->cfg->channels[i]) != 0)
			goto out;
		c->cfg->nchannels++;
	}
	pop(c, l);
	ret = 0;
out:
	json_decref(seen);
	nc_trie_free(t);
	return ret;
}

/* Load from a file, or, with text, from that text (path then only names it in messages). */
static int
config_load(const char *path, const char *text, struct ncd_config *cfg)
{
	static const char *const keys[] = { "eal", "mempool", "ports", "workers", "control",
					    "channels", "telemetry", "nat", "max_channels",
					    "rx_timestamps", "heap_reserve_mb", "fragments", "state_dir",
					    NULL };
	const char *state_dir;
	struct ctx c = { .cfg = cfg, .path = path };
	json_error_t jerr;
	json_t *root;
	int ret = -1;

	memset(cfg, 0, sizeof(*cfg));
	cfg->socket_uid = cfg->socket_gid = -1;
	cfg->socket_mode = 0660;
	cfg->path = path;
	root = text ? json_loads(text, JSON_REJECT_DUPLICATES, &jerr) :
		      json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
	if (root == NULL) {
		if (jerr.line < 0)
			fprintf(stderr, "%s: %s\n", path, jerr.text);
		else
			fprintf(stderr, "%s:%d:%d: %s\n", path, jerr.line, jerr.column, jerr.text);
		return -1;
	}
	if (!json_is_object(root)) {
		fprintf(stderr, "%s: expected an object at the top, got %s\n", path, type_name(root));
		goto out;
	}
	if (check_keys(&c, root, keys) || load_eal(&c, root) || load_mempool(&c, root) ||
	    load_ports(&c, root) || load_workers(&c, root) || load_control(&c, root) ||
	    load_nat_table(&c, root) || load_fragments(&c, root) ||
	    load_u32(&c, root, "max_channels", 1, NCD_MAX_CHANNELS, NCD_DEFAULT_CHANNELS,
		     &cfg->max_channels) ||
	    load_channels(&c, root))
		goto out;
	if (get_str(&c, root, "state_dir", false, &state_dir))
		goto out;
	if (state_dir != NULL && state_dir[0] != '/') {
		push(&c, "state_dir", 0);
		fail(&c, "'%s': an absolute path", state_dir);
		goto out;
	}
	cfg->state_dir = strdup(state_dir != NULL ? state_dir : "/run/netchanneld");
	if (get_bool(&c, root, "telemetry", true, &cfg->telemetry) ||
	    get_bool(&c, root, "rx_timestamps", false, &cfg->rx_timestamps) ||
	    load_u32(&c, root, "heap_reserve_mb", 0, NCD_MAX_HEAP_RESERVE_MB,
		     NCD_DEFAULT_HEAP_RESERVE_MB, &cfg->heap_reserve_mb))
		goto out;
	cfg->doc = json_incref(root);
	/* What a reload may not change, to compare the next config with. */
	cfg->fixed = json_deep_copy(root);
	json_object_del(cfg->fixed, "channels");
	for (unsigned int i = 0; i < 2; i++) {
		json_t *o = json_object_get(cfg->fixed, i ? "nat" : "control");
		static const char *const reloadable[2][4] = {
			{ "allow", "limits", "hello_timeout_ms", NULL },
			{ "idle_timeout_ms", "flows_per_channel", NULL } };

		for (unsigned int k = 0; o != NULL && reloadable[i][k] != NULL; k++)
			json_object_del(o, reloadable[i][k]);
	}
	ret = 0;
out:
	json_decref(root);
	return ret;
}

bool
ncd_config_reloadable(const struct ncd_config *cfg, const struct ncd_config *next, char *key,
		      size_t len)
{
	const char *k;
	json_t *v;

	if (json_equal(cfg->fixed, next->fixed))
		return true;
	/* Name what differs: a key of either, one level down for the objects. */
	for (int pass = 0; pass < 2; pass++) {
		const json_t *a = pass ? next->fixed : cfg->fixed, *b = pass ? cfg->fixed : next->fixed;

		json_object_foreach((json_t *)a, k, v) {
			const json_t *w = json_object_get(b, k);
			const char *sub;
			json_t *x;

			if (json_equal(v, w))
				continue;
			snprintf(key, len, "%s", k);
			if (json_is_object(v) && json_is_object(w))
				json_object_foreach(v, sub, x)
					if (!json_equal(x, json_object_get(w, sub))) {
						snprintf(key, len, "%s.%s", k, sub);
						break;
					}
			return false;
		}
	}
	snprintf(key, len, "?");
	return false;
}

int
ncd_config_load(const char *path, struct ncd_config *cfg)
{
	return config_load(path, NULL, cfg);
}

int
ncd_config_load_text(const char *name, const char *text, struct ncd_config *cfg)
{
	return config_load(name, text, cfg);
}

void
ncd_config_free(struct ncd_config *cfg)
{
	for (unsigned int i = 0; i < cfg->neal; i++)
		free(cfg->eal[i]);
	for (unsigned int i = 0; i < NCD_MAX_PORTS; i++) {
		free(cfg->ports[i].device);
		free(cfg->ports[i].exc_device);
		free(cfg->ports[i].xdp_prog);
	}
	free(cfg->workers);
	free(cfg->control_socket);
	free(cfg->state_dir);
	free(cfg->allow);
	free(cfg->channels);
	json_decref(cfg->fixed);
	json_decref(cfg->doc);
	memset(cfg, 0, sizeof(*cfg));
}
