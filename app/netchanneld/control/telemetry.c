/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * DPDK telemetry endpoints (/netchannel/...), for dpdk-telemetry.py and any
 * client of the telemetry socket. They show the CLI's views (cli.c), so the
 * two always agree. DPDK 22.11's telemetry values are one level deep (a dict
 * may hold arrays of numbers or strings, not dicts), so nested values are
 * flattened into path-like keys: "reasons/bad_csum", "wire0/stats/rx" (telemetry
 * names allow letters, digits, '_' and '/' only; other characters become '_'), and
 * reals, which it has no type for, into strings of their decimal value.
 *
 * The callbacks run on the telemetry thread: they take ncd.lock, which the
 * control thread holds while it changes channels and clients.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <rte_telemetry.h>

#include "control/reload.h"
#include "control/telemetry.h"
#include "control/views.h"
#include "nat/nat.h"
#include "ncd.h"

static bool closing;

/* key/sub, in the characters telemetry accepts in a name. */
static void
join(char *k, size_t size, const char *key, const char *sub)
{
	snprintf(k, size, "%s%s%s", key, key[0] ? "/" : "", sub);
	for (char *p = k; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || *p == '_' || *p == '/'))
			*p = '_';
}

/* Put value v under key into t (a dict), flattening objects into "key/sub". */
static void
put(struct rte_tel_data *t, const char *key, const json_t *v)
{
	char k[RTE_TEL_MAX_STRING_LEN], idx[24];
	const char *sub;
	json_t *x;
	size_t i;

	switch (json_typeof(v)) {
	case JSON_OBJECT:
		json_object_foreach((json_t *)v, sub, x) {
			join(k, sizeof(k), key, sub);
			put(t, k, x);
		}
		break;
	case JSON_ARRAY: {
		struct rte_tel_data *a = rte_tel_data_alloc();
		bool nums = true;

		json_array_foreach(v, i, x)
			if (!json_is_integer(x))
				nums = false;
		if (a == NULL)
			break;
		if (nums) {
			rte_tel_data_start_array(a, RTE_TEL_U64_VAL);
			json_array_foreach(v, i, x)
				rte_tel_data_add_array_u64(a, (uint64_t)json_integer_value(x));
		} else {
			/* Objects in a list: their fields under "key.index". */
			bool objs = json_array_size(v) > 0 && json_is_object(json_array_get(v, 0));

			if (objs) {
				rte_tel_data_free(a);
				json_array_foreach(v, i, x) {
					snprintf(idx, sizeof(idx), "%zu", i);
					join(k, sizeof(k), key, idx);
					put(t, k, x);
				}
				break;
			}
			rte_tel_data_start_array(a, RTE_TEL_STRING_VAL);
			json_array_foreach(v, i, x)
				rte_tel_data_add_array_string(a, json_is_string(x) ? json_string_value(x) : "?");
		}
		if (rte_tel_data_add_dict_container(t, key, a, 0) != 0)
			rte_tel_data_free(a);
		break;
	}
	case JSON_STRING:
		rte_tel_data_add_dict_string(t, key, json_string_value(v));
		break;
	case JSON_INTEGER:
		if (json_integer_value(v) >= 0)
			rte_tel_data_add_dict_u64(t, key, (uint64_t)json_integer_value(v));
		else
			rte_tel_data_add_dict_int(t, key, (int)json_integer_value(v));
		break;
	case JSON_REAL: {
		/* DPDK 22.11's telemetry has no type for a real: a rate or a share goes as text. */
		char num[32];

		snprintf(num, sizeof(num), "%.6g", json_real_value(v));
		rte_tel_data_add_dict_string(t, key, num);
		break;
	}
	case JSON_TRUE:
	case JSON_FALSE:
		rte_tel_data_add_dict_u64(t, key, json_is_true(v));
		break;
	default:
		break;
	}
}

/* Build a view under the lock and hand it to telemetry. */
static int
answer(struct rte_tel_data *t, json_t *(*view)(const struct ncd *, const char *, int *),
       const char *params)
{
	int err = 0;
	json_t *v;

	pthread_mutex_lock(&ncd.lock);
	v = closing ? NULL : view(&ncd, params, &err);
	pthread_mutex_unlock(&ncd.lock);
	if (v == NULL)
		return err ? err : -ENODEV;
	rte_tel_data_start_dict(t);
	put(t, "", v);
	json_decref(v);
	return 0;
}

/* Every port's counters summed, and the totals that matter at a glance. */
static json_t *
v_stats(const struct ncd *d, const char *params, int *err)
{
	json_t *o = json_object(), *ports = json_object();

	(void)params;
	(void)err;
	for (unsigned int i = 0; i < d->cfg.nports; i++) {
		json_t *p = ncd_view_port_stats(d, i);

		json_object_del(p, "port");
		json_object_del(p, "name");
		json_object_set_new(ports, d->cfg.ports[i].name, p);
	}
	json_object_set_new(o, "ports", ports);
	json_object_set_new(o, "mempool", ncd_view_mempool(d));
	json_object_set_new(o, "classifier", ncd_view_classifier(d));
	return o;
}

static json_t *
v_ports(const struct ncd *d, const char *params, int *err)
{
	json_t *o = json_object();

	(void)params;
	(void)err;
	for (unsigned int i = 0; i < d->cfg.nports; i++) {
		json_t *p = ncd_view_port_info(d, i);

		json_object_set_new(p, "stats", ncd_view_port_stats(d, i));
		json_object_set_new(o, d->cfg.ports[i].name, p);
	}
	return o;
}

/* Channels a /netchannel/channels reply lists: telemetry's replies hold 16 KiB. */
#define TEL_CHANNELS_PAGE 256

/* The channels' ids and names, from the id in params (0 without) on, a page; "next" goes on. */
static json_t *
v_channels(const struct ncd *d, const char *params, int *err)
{
	json_t *ids = json_array(), *names = json_array(), *next = json_null();
	char *end;
	unsigned long from = params != NULL && *params != '\0' ? strtoul(params, &end, 10) : 0;
	unsigned int n = 0;

	if (params != NULL && *params != '\0' && (*end != '\0' || from > d->cfg.max_channels)) {
		json_decref(ids);
		json_decref(names);
		*err = -EINVAL;
		return NULL;
	}
	for (uint32_t i = (uint32_t)from; i < d->cfg.max_channels; i++) {
		if (d->channels[i] == NULL)
			continue;
		if (n++ == TEL_CHANNELS_PAGE) {
			next = json_integer(i);
			break;
		}
		json_array_append_new(ids, json_integer(i));
		json_array_append_new(names, json_string(d->channels[i]->name));
	}
	return json_pack("{s:o, s:o, s:o}", "ids", ids, "names", names, "next", next);
}

static json_t *
v_channel(const struct ncd *d, const char *params, int *err)
{
	char *end;
	unsigned long id = params ? strtoul(params, &end, 10) : 0;

	if (params == NULL || *params == '\0' || *end != '\0' || id >= d->cfg.max_channels ||
	    d->channels[id] == NULL) {
		*err = -EINVAL;
		return NULL;
	}
	return ncd_view_channel(d, (uint32_t)id);
}

static json_t *
v_clients(const struct ncd *d, const char *params, int *err)
{
	json_t *a = ncd_view_clients(d, NULL);

	(void)params;
	(void)err;
	return json_pack("{s:i, s:o}", "count", (int)json_array_size(a), "clients", a);
}

static json_t *
v_mempool(const struct ncd *d, const char *params, int *err)
{
	(void)params;
	(void)err;
	return ncd_view_mempool(d);
}

static json_t *
v_nat(const struct ncd *d, const char *params, int *err)
{
	(void)params;
	(void)err;
	return ncd_view_nat(d);
}

static json_t *
v_workers(const struct ncd *d, const char *params, int *err)
{
	json_t *a = ncd_view_workers(d);

	(void)params;
	(void)err;
	return json_pack("{s:i, s:o}", "count", (int)json_array_size(a), "workers", a);
}

static json_t *
v_reload(const struct ncd *d, const char *params, int *err)
{
	(void)d;
	(void)params;
	(void)err;
	return ncd_view_reload();
}

#define ENDPOINT(fn) \
	static int tel_##fn(const char *cmd, const char *params, struct rte_tel_data *t) \
	{ (void)cmd; return answer(t, v_##fn, params); }
ENDPOINT(stats)
ENDPOINT(ports)
ENDPOINT(channels)
ENDPOINT(channel)
ENDPOINT(clients)
ENDPOINT(mempool)
ENDPOINT(nat)
ENDPOINT(workers)
ENDPOINT(reload)

int
ncd_telemetry_init(struct ncd *d)
{
	static const struct {
		const char *path;
		telemetry_cb fn;
		const char *help;
	} eps[] = {
		{ "/netchannel/stats", tel_stats, "Every port's counters, the mempool and the classifier" },
		{ "/netchannel/ports", tel_ports, "Each port's description and counters" },
		{ "/netchannel/channels", tel_channels,
		  "The channels' ids and names, 256 from the id given (0 without); next: where the "
		  "next page starts, or null" },
		{ "/netchannel/channel", tel_channel, "One channel. Parameter: its id" },
		{ "/netchannel/clients", tel_clients, "The connected clients" },
		{ "/netchannel/mempool", tel_mempool, "The mbuf pool: size, in_use, available" },
		{ "/netchannel/workers", tel_workers, "Each worker's loops, packets and load" },
		{ "/netchannel/nat", tel_nat, "NAT's reverse mappings: capacity, used, expired" },
		{ "/netchannel/reload", tel_reload,
		  "The reloads: how many, failures, the last one's time, result and channels" },
	};

	if (!d->cfg.telemetry)
		return 0;
	for (unsigned int i = 0; i < RTE_DIM(eps); i++)
		if (rte_telemetry_register_cmd(eps[i].path, eps[i].fn, eps[i].help) != 0) {
			NCD_LOG(ERR, "rte_telemetry_register_cmd(%s) failed", eps[i].path);
			return -1;
		}
	return 0;
}

void
ncd_telemetry_close(struct ncd *d)
{
	/* From now on the endpoints answer with an error: the state is going away. */
	pthread_mutex_lock(&d->lock);
	closing = true;
	pthread_mutex_unlock(&d->lock);
}
