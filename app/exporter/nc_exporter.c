/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * nc-exporter: netchanneld's counters for Prometheus. Each scrape of
 * /metrics connects to the daemon's control socket as a control-only client
 * (no region, nothing it could change), reads the same views ncctl shows
 * (ports, channels page by page, mempool, workers, clients) and answers in
 * the Prometheus text format, version 0.0.4.
 *
 * A separate process, as VPP's exporter is: the daemon's control thread
 * parses no HTTP, a scrape cannot stall it for longer than a CLI request
 * does, and the exporter runs as any user of the socket's group.
 *
 *   nc-exporter [-s SOCKET] [-l ADDR:PORT]
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>
#include <microhttpd.h>
#include <rte_build_config.h>

#include "nc_pages.h"
#include "netchannel.h"

#define DEFAULT_LISTEN "127.0.0.1:9487"

/*
 * What slow and bad clients may take. Connections are served by an epoll
 * loop in each of THREADS threads, so one that trickles its request in
 * (slowloris) holds a connection slot, not a thread: with CONNECTIONS
 * slots, PER_ADDRESS of them for one address, and TIMEOUT_S of silence
 * before a connection is closed, 64 slow clients from 64 addresses leave
 * every scrape its answer.
 */
#define THREADS 2u
#define CONNECTIONS 1024u
#define PER_ADDRESS 16u
#define TIMEOUT_S 5u
#define MEMORY_PER_CONNECTION (16u << 10)  /* a request's headers; Prometheus sends < 1 KiB */

static const char *sock_path;
static volatile sig_atomic_t stop;

static void
on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

/*
 * The metric families of one scrape, in the order first seen: Prometheus
 * wants each family's samples together, under one HELP and one TYPE line.
 */
#define MAX_FAMILIES 256

struct family {
	char *head;                    /* its HELP and TYPE lines */
	char *body;                    /* its samples */
	size_t len;
	FILE *f;                       /* writes body */
};

struct scrape {
	json_t *index;                 /* name -> its place in fam[] */
	struct family fam[MAX_FAMILIES];
	unsigned int n;
};

/* A label value, escaped as the text format says: backslash, quote, newline. */
static void
escape(char *dst, size_t len, const char *s)
{
	size_t n = 0;

	for (; *s != '\0' && n + 3 < len; s++) {
		if (*s == '\\' || *s == '"' || *s == '\n')
			dst[n++] = '\\';
		dst[n++] = *s == '\n' ? 'n' : *s;
	}
	dst[n] = '\0';
}

/* One sample of family name (a counter or a gauge), labels already formatted ("" for none). */
static void
sample(struct scrape *sc, const char *name, bool counter, const char *help, const char *labels,
       double v)
{
	json_t *at = json_object_get(sc->index, name);
	struct family *f;

	if (at == NULL) {
		size_t hl = 0;
		FILE *h;

		if (sc->n == MAX_FAMILIES)
			return;
		f = &sc->fam[sc->n];
		h = open_memstream(&f->head, &hl);
		f->f = open_memstream(&f->body, &f->len);
		if (h == NULL || f->f == NULL) {
			if (h != NULL)
				fclose(h);
			free(f->head);
			f->head = NULL;
			return;
		}
		fprintf(h, "# HELP %s %s\n# TYPE %s %s\n", name, help, name,
			counter ? "counter" : "gauge");
		fclose(h);
		json_object_set_new(sc->index, name, json_integer(sc->n++));
	} else {
		f = &sc->fam[json_integer_value(at)];
	}
	fprintf(f->f, "%s%s%s%s %.17g\n", name, labels[0] ? "{" : "", labels, labels[0] ? "}" : "",
		v);
}

/* Keys whose numbers are levels, not counts: gauges, and no _total. */
static bool
is_gauge(const char *key)
{
	static const char *const gauges[] = { "ifindex", "up", "down", "ring_count",
		"bytes_queued", "size", "cache", "in_use", "available", "lcore", "interval_s",
		"socket", "last_time_seconds", "claimed_keys" };

	for (size_t i = 0; i < sizeof(gauges) / sizeof(gauges[0]); i++)
		if (strcmp(key, gauges[i]) == 0)
			return true;
	/* Rates: per second, over the daemon's last interval. */
	return strstr(key, "_pps") != NULL || strstr(key, "_bps") != NULL ||
	       strstr(key, "share") != NULL || strstr(key, "per_") != NULL;
}

/*
 * Key k as a metric's name wants it: Prometheus' names spell their units out (promtool
 * refuses an abbreviation), so the daemon's "interval_s" is interval_seconds and
 * "loops_per_s" loops_per_second. @return k, or buf with the name
 */
static const char *
base_units(const char *k, char *buf, size_t len)
{
	size_t kl = strlen(k);

	if (kl > 6 && strcmp(k + kl - 6, "_per_s") == 0)
		snprintf(buf, len, "%.*s_per_second", (int)(kl - 6), k);
	else if (kl > 2 && strcmp(k + kl - 2, "_s") == 0)
		snprintf(buf, len, "%.*s_seconds", (int)(kl - 2), k);
	else
		return k;
	return buf;
}

/*
 * The objects of a port's whose keys are a label's values: its reasons, and
 * its policer's buckets (netchannel_port_police_dropped_total{bucket="arp"}).
 */
static const char *
label_of(const char *by, const char *label, const char *key)
{
	if (by != NULL && strcmp(key, by) == 0)
		return label;
	if (by != NULL && strcmp(by, "reasons") == 0 &&
	    (strcmp(key, "police_passed") == 0 || strcmp(key, "police_dropped") == 0))
		return "bucket";
	return NULL;
}

/*
 * The numbers of an object as samples of families prefix_<key>[_total]:
 * nested objects add their key to the name, except `by` (and a port's
 * policer's), whose keys become the label `label` (a port's reasons).
 */
static void
numbers(struct scrape *sc, const char *prefix, const json_t *o, const char *labels,
	const char *by, const char *label, const char *what)
{
	const char *k;
	json_t *v;

	json_object_foreach((json_t *)o, k, v) {
		char name[256], help[256], lab[512], esc[128], unit[128];

		if (json_is_object(v)) {
			const char *lb = label_of(by, label, k);

			if (lb != NULL) {
				const char *r;
				json_t *x;

				/* reasons: netchannel_port_reason_total; else the key's own name. */
				snprintf(name, sizeof(name), "%s_%s_total", prefix,
					 strcmp(k, by) == 0 ? label : k);
				snprintf(help, sizeof(help), "%s, by %s (docs/counters.md)", what, lb);
				json_object_foreach(v, r, x) {
					if (!json_is_integer(x))
						continue;
					escape(esc, sizeof(esc), r);
					snprintf(lab, sizeof(lab), "%s,%s=\"%s\"", labels, lb, esc);
					sample(sc, name, true, help, lab, (double)json_integer_value(x));
				}
				continue;
			}
			snprintf(name, sizeof(name), "%s_%s", prefix, k);
			numbers(sc, name, v, labels, NULL, NULL, what);
			continue;
		}
		if (!json_is_number(v) && !json_is_boolean(v))
			continue;
		size_t kl = strlen(k);
		/* A real is a gauge (a share, a rate), but a number of seconds only grows. */
		bool seconds = kl > 8 && strcmp(k + kl - 8, "_seconds") == 0;
		bool gauge = is_gauge(k) || json_is_boolean(v) || (json_is_real(v) && !seconds);
		/* "_count" is a histogram's in Prometheus: a ring's occupancy is its packets. */
		const char *as = strcmp(k, "ring_count") == 0 ? "ring_packets" : base_units(k, unit,
											sizeof(unit));

		snprintf(name, sizeof(name), "%s_%s%s", prefix, as, gauge ? "" : "_total");
		snprintf(help, sizeof(help), "%s: %s (docs/counters.md)", what, k);
		sample(sc, name, !gauge, help, labels,
		       json_is_boolean(v) ? json_is_true(v) : json_number_value(v));
	}
}

/* A JSON view from the daemon, or NULL. */
static json_t *
view(struct nc_client *c, const char *line)
{
	char *out = NULL;
	json_t *v = NULL;

	if (nc_cli(c, line, 1, &out) == 0)
		v = json_loads(out, 0, NULL);
	free(out);
	return v;
}

/* The whole scrape, as text (malloc'ed); netchannel_up says whether the daemon answered. */
static char *
scrape(void)
{
	struct scrape sc = { .index = json_object() };
	struct nc_client *c = nc_connect(sock_path, NC_CONNECT_CONTROL);
	json_t *ports = NULL, *chans = json_array(), *mp = NULL, *workers = NULL, *clients = NULL;
	json_t *reload = NULL;
	char *err = NULL, *text = NULL;
	size_t i;
	json_t *v;
	int up = c != NULL;

	if (c != NULL) {
		ports = view(c, "show port stats all");
		mp = view(c, "show mempool");
		workers = view(c, "show workers");
		clients = view(c, "show clients");
		reload = view(c, "show reload");
		if (nc_pages_channels(c, "all", chans, NULL, &err) != 0 || ports == NULL)
			up = 0;
		free(err);
		nc_disconnect(c);
	}
	sample(&sc, "netchannel_up", false, "1 if netchanneld answered this scrape", "", up);
	json_array_foreach(ports, i, v) {
		char lab[128], esc[64];
		json_t *p = json_deep_copy(v);

		escape(esc, sizeof(esc), json_string_value(json_object_get(p, "name")));
		snprintf(lab, sizeof(lab), "port=\"%s\"", esc);
		json_object_del(p, "name");
		json_object_del(p, "port");
		numbers(&sc, "netchannel_port", p, lab, "reasons", "reason", "a port's counter");
		json_decref(p);
	}
	json_array_foreach(chans, i, v) {
		char lab[256], esc[64];
		json_t *o = json_object_get(v, "owner"), *k = json_object();

		escape(esc, sizeof(esc), json_string_value(json_object_get(v, "name")));
		snprintf(lab, sizeof(lab), "channel=\"%s\",id=\"%lld\",action=\"%s\",owner=\"%s\"", esc,
			 (long long)json_integer_value(json_object_get(v, "id")),
			 json_string_value(json_object_get(v, "action")),
			 json_string_value(json_object_get(o, "kind")));
		/* What a channel counts, its rings' levels and its rates: not its rule or offload. */
		json_object_set(k, "counters", json_object_get(v, "counters"));
		json_object_set(k, "rates", json_object_get(v, "rates"));
		json_object_set(k, "ring_count", json_object_get(v, "ring_count"));
		json_object_set(k, "bytes_queued", json_object_get(v, "bytes_queued"));
		/* The counters' own names, not counters_hits: the channel family is the prefix. */
		numbers(&sc, "netchannel_channel", json_object_get(k, "counters"), lab, NULL, NULL,
			"a channel's counter");
		json_object_del(k, "counters");
		numbers(&sc, "netchannel_channel", k, lab, NULL, NULL, "a channel's level or rate");
		json_decref(k);
	}
	if (mp != NULL) {
		char lab[128], esc[64];

		escape(esc, sizeof(esc), json_string_value(json_object_get(mp, "name")));
		snprintf(lab, sizeof(lab), "pool=\"%s\"", esc);
		json_object_del(mp, "name");
		numbers(&sc, "netchannel_mempool", mp, lab, NULL, NULL, "the mbuf pool");
	}
	json_array_foreach(workers, i, v) {
		const char *idle = json_string_value(json_object_get(v, "idle"));
		char lab[96];

		/* Its idle mode (workers[].idle) as a label of each of its samples. */
		snprintf(lab, sizeof(lab), "worker=\"%lld\",idle=\"%s\"",
			 (long long)json_integer_value(json_object_get(v, "worker")),
			 idle != NULL ? idle : "poll");
		json_object_del(v, "worker");
		json_object_del(v, "rx");
		numbers(&sc, "netchannel_worker", v, lab, NULL, NULL, "a worker's load");
	}
	if (json_is_array(clients))
		sample(&sc, "netchannel_clients", false, "connections to the control socket", "",
		       (double)json_array_size(clients));
	/* The reloads: counts, and the last one's time and whether it applied (not its names). */
	if (reload != NULL)
		numbers(&sc, "netchannel_reload", reload, "", NULL, NULL, "config reloads");

	/* Families in the order first seen, each whole. */
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	for (unsigned int k = 0; k < sc.n; k++) {
		fclose(sc.fam[k].f);
		if (f != NULL)
			fprintf(f, "%s%s", sc.fam[k].head, sc.fam[k].body ? sc.fam[k].body : "");
		free(sc.fam[k].head);
		free(sc.fam[k].body);
	}
	if (f != NULL)
		fclose(f);
	json_decref(sc.index);
	json_decref(ports);
	json_decref(chans);
	json_decref(mp);
	json_decref(workers);
	json_decref(clients);
	json_decref(reload);
	return text;
}

static enum MHD_Result
answer(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
       const char *version, const char *upload, size_t *upload_len, void **state)
{
	struct MHD_Response *r;
	enum MHD_Result ret;
	char *text;

	(void)cls;
	(void)version;
	(void)upload;
	(void)upload_len;
	(void)state;
	if (strcmp(method, "GET") != 0 || strcmp(url, "/metrics") != 0) {
		static char nf[] = "nc-exporter: only GET /metrics\n";

		r = MHD_create_response_from_buffer(strlen(nf), nf, MHD_RESPMEM_PERSISTENT);
		ret = MHD_queue_response(conn, MHD_HTTP_NOT_FOUND, r);
		MHD_destroy_response(r);
		return ret;
	}
	text = scrape();
	if (text == NULL)
		return MHD_NO;
	r = MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
	MHD_add_response_header(r, "Content-Type", "text/plain; version=0.0.4; charset=utf-8");
	ret = MHD_queue_response(conn, MHD_HTTP_OK, r);
	MHD_destroy_response(r);
	return ret;
}

static void
usage(FILE *f)
{
	fprintf(f, "usage: nc-exporter [-s SOCKET] [-l ADDR:PORT]\n"
		   "  -s, --socket   netchanneld's control socket (default %s)\n"
		   "  -l, --listen   where Prometheus scrapes /metrics (default %s)\n"
		   "  -V, --version  print the version and exit\n", NC_DEFAULT_SOCKET,
		DEFAULT_LISTEN);
}

int
main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "listen", required_argument, NULL, 'l' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	const char *listen = DEFAULT_LISTEN;
	struct sockaddr_in sa = { .sin_family = AF_INET };
	struct MHD_Daemon *mhd;
	char host[64];
	const char *colon;
	long port;
	int o;

	sock_path = NC_DEFAULT_SOCKET;
	while ((o = getopt_long(argc, argv, "s:l:hV", opts, NULL)) != -1) {
		switch (o) {
		case 's': sock_path = optarg; break;
		case 'l': listen = optarg; break;
		case 'h': usage(stdout); return 0;
		case 'V':
			/* The DPDK headers it was built with, as rte_version() says it: nothing linked. */
			printf("nc-exporter (netchanneld) %s, DPDK %d.%02d.%d%s\n", nc_version(),
			       RTE_VER_YEAR, RTE_VER_MONTH, RTE_VER_MINOR, RTE_VER_SUFFIX);
			return 0;
		default: usage(stderr); return 2;
		}
	}
	colon = strrchr(listen, ':');
	port = colon ? strtol(colon + 1, NULL, 10) : 0;
	if (colon == NULL || (size_t)(colon - listen) >= sizeof(host) || port <= 0 || port > 65535) {
		fprintf(stderr, "nc-exporter: --listen %s: expected IPv4-ADDRESS:PORT\n", listen);
		return 2;
	}
	snprintf(host, sizeof(host), "%.*s", (int)(colon - listen), listen);
	if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
		fprintf(stderr, "nc-exporter: --listen %s: '%s' is not an IPv4 address\n", listen, host);
		return 2;
	}
	sa.sin_port = htons((uint16_t)port);
	mhd = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL, 0, NULL, NULL,
			       answer, NULL, MHD_OPTION_SOCK_ADDR, &sa,
			       MHD_OPTION_THREAD_POOL_SIZE, THREADS,
			       MHD_OPTION_CONNECTION_LIMIT, CONNECTIONS,
			       MHD_OPTION_PER_IP_CONNECTION_LIMIT, PER_ADDRESS,
			       MHD_OPTION_CONNECTION_TIMEOUT, TIMEOUT_S,
			       MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)MEMORY_PER_CONNECTION,
			       MHD_OPTION_END);
	if (mhd == NULL) {
		fprintf(stderr, "nc-exporter: MHD_start_daemon on %s: %s\n", listen, strerror(errno));
		return 1;
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	printf("nc-exporter: serving http://%s/metrics from %s\n", listen, sock_path);
	fflush(stdout);
	while (!stop)
		pause();
	MHD_stop_daemon(mhd);
	return 0;
}
