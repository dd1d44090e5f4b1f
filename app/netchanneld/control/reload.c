/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Config reload (SIGHUP): what a running daemon can change is changed in
 * place, without a restart; a config that changes anything else, or does not
 * load, leaves the running one as it was, and the log says why.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <rte_cycles.h>

#define NCD_LOGTYPE ncd_logtype_control
#include "channel/channel.h"
#include "control/reload.h"
#include "nat/nat.h"
#include "ncd.h"

static struct {
	uint64_t reloads, failures;
	char last[192];                /* what the last one did, or why it failed */
	time_t last_time;              /* when (0: none yet) */
	bool last_ok;                  /* it applied, every channel made */
	json_t *names;                 /* {added, removed, changed, refused}: channels by name */
} rl = { .last = "none yet" };

void
ncd_notify(const char *state)
{
	const char *path = getenv("NOTIFY_SOCKET");
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	socklen_t len;
	int fd;

	if (path == NULL || (path[0] != '/' && path[0] != '@') || strlen(path) >= sizeof(sa.sun_path))
		return;
	memcpy(sa.sun_path, path, strlen(path));
	/* '@': an abstract socket, whose name starts with a NUL. */
	if (path[0] == '@')
		sa.sun_path[0] = '\0';
	len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(path));
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return;
	if (sendto(fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&sa, len) < 0)
		NCD_LOG(WARNING, "sd_notify(%s) to %s: %s", state, path, strerror(errno));
	close(fd);
}

json_t *
ncd_view_reload(void)
{
	json_t *o = json_pack("{s:I, s:I, s:s, s:I, s:b}", "reloads", (json_int_t)rl.reloads,
			      "failures", (json_int_t)rl.failures, "last", rl.last,
			      "last_time_seconds", (json_int_t)rl.last_time, "last_ok", rl.last_ok);

	json_object_set_new(o, "last_channels",
			    rl.names != NULL ? json_deep_copy(rl.names) : json_object());
	return o;
}

/* A new result: the time, and empty lists of channels. */
static void
result_start(void)
{
	rl.last_time = time(NULL);
	rl.last_ok = false;
	json_decref(rl.names);
	rl.names = json_pack("{s:[], s:[], s:[], s:[]}", "added", "removed", "changed", "refused");
}

/* Channel name under key of the result, and the log line that names it. */
static void
result_name(const char *key, const char *name, const char *why)
{
	json_array_append_new(json_object_get(rl.names, key),
			      why != NULL ? json_pack("{s:s, s:s}", "name", name, "reason", why) :
					    json_string(name));
	if (why != NULL)
		NCD_LOG(ERR, "reload: channel %s refused: %s", name, why);
	else
		NCD_LOG(NOTICE, "reload: channel %s %s", name, key);
}

/* The config channel named name, or NULL. */
static const struct ncd_channel_conf *
conf_channel(const struct ncd_config *cfg, const char *name)
{
	for (unsigned int i = 0; i < cfg->nchannels; i++)
		if (strcmp(cfg->channels[i].name, name) == 0)
			return &cfg->channels[i];
	return NULL;
}

/* Both are loaded into zeroed memory field by field: equal configs compare equal. */
static bool
same_channel(const struct ncd_channel_conf *a, const struct ncd_channel_conf *b)
{
	return a != NULL && b != NULL && memcmp(a, b, sizeof(*a)) == 0;
}

/* The same channel but for its meter, which changes in place (ncd_channel_set_meter()). */
static bool
same_but_meter(const struct ncd_channel_conf *a, const struct ncd_channel_conf *b)
{
	struct ncd_channel_conf x;

	if (a == NULL || b == NULL)
		return false;
	x = *b;
	x.meter = a->meter;
	return memcmp(a, &x, sizeof(x)) == 0;
}

static int __attribute__((format(printf, 3, 4)))
failed(char *why, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(rl.last, sizeof(rl.last), fmt, ap);
	va_end(ap);
	rl.failures++;
	NCD_LOG(ERR, "reload: %s; the running config stays", rl.last);
	if (why != NULL)
		snprintf(why, len, "%s; the running config stays", rl.last);
	return -1;
}

int
ncd_reload(struct ncd *d, char *why, size_t len)
{
	unsigned int added = 0, removed = 0, changed = 0, refused = 0;
	struct ncd_config next;
	char key[64];

	result_start();
	if (d->cfg.path == NULL)
		return failed(why, len, "the daemon runs on its embedded default config: nothing to "
			      "reload");
	if (ncd_config_load(d->cfg.path, &next) != 0) {
		ncd_config_free(&next);
		return failed(why, len, "%s does not load (the log says why)", d->cfg.path);
	}
	if (!ncd_config_reloadable(&d->cfg, &next, key, sizeof(key))) {
		ncd_config_free(&next);
		return failed(why, len, "%s: %s changed, which needs a restart", d->cfg.path, key);
	}
	/* Channels gone or changed go first, so that a rule may move from one to another. */
	for (unsigned int i = 0; i < d->cfg.nchannels; i++) {
		const struct ncd_channel_conf *old = &d->cfg.channels[i];
		const struct ncd_channel_conf *now = conf_channel(&next, old->name);
		int32_t id = ncd_channel_find(d, old->name);

		if (same_channel(old, now) || id < 0 || d->channels[id]->owner != NCD_OWNER_CONFIG)
			continue;
		/* Only its meter: changed where it is, its traffic and its clients undisturbed. */
		if (same_but_meter(old, now) && ncd_channel_set_meter(d, (uint32_t)id, &now->meter) == 0) {
			changed++;
			result_name("changed", old->name, NULL);
			continue;
		}
		ncd_channel_del(d, (uint32_t)id);
		if (now != NULL) {
			changed++;
			result_name("changed", old->name, NULL);
		} else {
			removed++;
			result_name("removed", old->name, NULL);
		}
	}
	for (unsigned int i = 0; i < next.nchannels; i++) {
		const struct ncd_channel_conf *now = &next.channels[i];
		const struct ncd_channel_conf *old = conf_channel(&d->cfg, now->name);
		int id;

		if ((same_channel(old, now) || same_but_meter(old, now)) &&
		    ncd_channel_find(d, now->name) >= 0)
			continue;
		id = ncd_channel_add(d, now, NCD_OWNER_CONFIG, NCD_NS_ROOT, NULL);
		if (id < 0) {
			const char *r = id == -EEXIST ? "a channel of that name exists (an "
							"operator's or a client's)" :
					id == -EBUSY ? "another channel has the same rule and priority" :
					strerror(-id);

			result_name("refused", now->name, r);
			if (refused++ == 0 && why != NULL)
				snprintf(why, len, "channel %s: %s; the rest of %s applied", now->name,
					 r, d->cfg.path);
		} else if (old == NULL) {
			added++;
			result_name("added", now->name, NULL);
		}
	}
	/* The rest that may change: the control thread alone reads it. */
	free(d->cfg.allow);
	d->cfg.allow = next.allow;
	d->cfg.nallow = next.nallow;
	d->cfg.limits = next.limits;
	d->cfg.hello_timeout_ms = next.hello_timeout_ms;
	ncd_nat_set_idle(d, next.nat_idle_ms);
	__atomic_store_n(&d->cfg.nat_flows_per_channel, next.nat_flows_per_channel,
			 __ATOMIC_RELAXED);
	free(d->cfg.channels);
	d->cfg.channels = next.channels;
	d->cfg.nchannels = next.nchannels;
	json_decref(d->cfg.doc);
	d->cfg.doc = next.doc;
	next.allow = NULL;
	next.channels = NULL;
	next.doc = NULL;
	ncd_config_free(&next);
	rl.reloads++;
	rl.last_ok = refused == 0;
	snprintf(rl.last, sizeof(rl.last), "%s: %u channels added, %u removed, %u changed, %u "
		 "refused; %u allow entries", d->cfg.path, added, removed, changed, refused,
		 d->cfg.nallow);
	NCD_LOG(NOTICE, "reload: %s", rl.last);
	return refused > 0 ? -1 : 0;
}
