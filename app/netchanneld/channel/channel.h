/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Channels: a rule, an action, limits and an owner. The directory in shared
 * memory that clients read, the classifier's rules, and the rings.
 */
#ifndef NCD_CHANNEL_H
#define NCD_CHANNEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <rte_common.h>
#include <rte_meter.h>
#include <rte_spinlock.h>

#include "core/config.h"
#include "nc_proto.h"
#include "nc_trie.h"

struct ncd;
struct ncd_capture;
struct ncd_region;
struct rte_mbuf;
struct rte_flow;
struct rte_ring;

/* A channel's offload on each port (offload/ fills it): */
enum ncd_off_state {
	NCD_OFF_OFF,                   /* the port does not offload */
	NCD_OFF_SOFTWARE,              /* tried, or not possible: the trie alone */
	NCD_OFF_MARK,                  /* a MARK rule */
	NCD_OFF_MARK_QUEUE,            /* a MARK and QUEUE rule */
};

struct ncd_chan_offload {
	struct rte_flow *flow[2];      /* one per family (two for a rule without addresses) */
	uint8_t state;                 /* enum ncd_off_state */
	bool beaten;                   /* in software: a channel that wins over it overlaps it */
	char why[80];                  /* in software: the reason */
};

/* Most consumers a shared static channel has at once. */
#define NCD_SHARE_MAX 16

/* One consumer of a shared channel: an isolated client, and the ring of its region it gets. */
struct ncd_share_consumer {
	struct ncd_region *rg;
	int ring;
	uint32_t limit;                /* entries it may fill of that ring */
	uint32_t *wakeup;              /* the ring's want_wakeup */
	int efd;                       /* its own eventfd, once it asks; or -1 */
	int slot;                      /* its connection's client slot */
};

/*
 * A shared channel's consumers, as the workers see them: each packet goes to
 * one of them by a hash of its flow (SO_REUSEPORT's way), so a flow stays
 * with one consumer while the consumers stay the same. Replaced whole, never
 * changed in place (but for an efd given later).
 */
struct ncd_share {
	uint32_t n;
	struct ncd_share_consumer c[NCD_SHARE_MAX];
};

/*
 * A channel's meter (channels[].meter): one profile, and a bucket state for
 * each worker, which meters at its share of the rate (the rate over the
 * workers; the bursts whole), on its own cache line.
 */
struct ncd_meter {
	struct ncd_meter_conf conf;    /* as the config gave it (show channel) */
	enum ncd_meter_kind kind;
	bool bytes;                    /* a packet counts its frame's bytes; otherwise 1 */
	bool exceed_kernel;            /* red: to the kernel, else dropped */
	union {
		struct rte_meter_srtcm_profile sr;
		struct rte_meter_trtcm_profile tr;
		struct rte_meter_trtcm_rfc4115_profile r4;
	} prof;
	struct ncd_meter_state {
		union {
			struct rte_meter_srtcm sr;
			struct rte_meter_trtcm tr;
			struct rte_meter_trtcm_rfc4115 r4;
		} m;
	} __rte_cache_aligned st[];
};

/**
 * A meter's colour (colour-blind) for len units now, from bucket state st
 * (one of mt->st[]), which it updates: red takes nothing. A unit is a byte
 * for a bytes meter, else a packet: the caller says how many.
 */
static inline enum rte_color
ncd_meter_colour(struct ncd_meter *mt, struct ncd_meter_state *st, uint64_t now, uint32_t len)
{
	return mt->kind == NCD_METER_SRTCM ?
		rte_meter_srtcm_color_blind_check(&st->m.sr, &mt->prof.sr, now, len) :
	       mt->kind == NCD_METER_TRTCM ?
		rte_meter_trtcm_color_blind_check(&st->m.tr, &mt->prof.tr, now, len) :
		rte_meter_trtcm_rfc4115_color_blind_check(&st->m.r4, &mt->prof.r4, now, len);
}

/* Most meters one transmit meter checks: a user's packets and bits a second. */
#define NCD_TXM_MAX 2

/*
 * A transmit meter (channels[].tx_meter, or a user's control.limits.tx_pps
 * and tx_bps): one bucket, whichever workers drain its clients' rings, so
 * taken under its lock. A user's is shared by the user's connections:
 * refs counts them (control thread only).
 */
struct ncd_txm {
	rte_spinlock_t lock;
	uint32_t refs;
	uid_t uid;                     /* a user's: whose */
	unsigned int n;
	struct ncd_meter *m[NCD_TXM_MAX]; /* each with one bucket state: m[k]->st[0] */
};

/**
 * A transmit meter of n meters as mc[] say (a packet passes when all pass
 * it), with one reference. Control thread.
 * @param what  what it meters, for the log
 * @return it, or NULL (out of memory, or rte_meter refused it: logged)
 */
struct ncd_txm *ncd_txm_new(const struct ncd_meter_conf *mc, unsigned int n, const char *what);

/** Drop a reference to t (NULL: none), freeing it with the last. Control thread, after the
 *  workers are done with it (a grace period). */
void ncd_txm_put(struct ncd_txm *t);

/**
 * Whether a client's packet of len bytes may be sent now, under its
 * channel's transmit meter and its user's (either NULL: none): if every
 * meter passes it, each takes it, and *colour is the worst of their colours
 * (green or yellow); if one does not, none does (red). Workers.
 */
bool ncd_txm_pass(struct ncd_txm *ch, struct ncd_txm *user, uint32_t len, uint64_t now,
		  enum rte_color *colour);

struct ncd_channel {
	/*
	 * What a worker reads of every packet it delivers, on the first cache
	 * line: all of it for an isolated client's channel (with 100,000
	 * channels, each line a packet touches is a miss of its own); a
	 * zero-copy one's byte budget is on the second.
	 */
	uint32_t id;
	enum nc_dir_action action;
	struct ncd_capture *capture;   /* a capture of its packets (workers read it), or NULL */
	struct ncd_region *region;     /* an isolated client's channel: delivered into its region */
	int region_ring;               /* its rx ring there */
	uint32_t region_limit;         /* entries it may fill of that ring (its ring_size) */
	uint32_t *wakeup;              /* the consumer's want_wakeup: the directory's or the region's */
	uint32_t desc_gen;             /* its generation's low 16 bits, as rx descriptors carry them */
	bool shared;                   /* "consumers": "shared": isolated clients share it */
	struct rte_ring *rx;
	struct nc_dir_entry *dir;
	uint64_t queue_bytes;
	uint64_t out_seen;             /* dir->bytes_out as a worker last read it (never above it) */
	char name[NC_NAME_SIZE];
	struct nc_trie_rule rule;
	int owner;                     /* NCD_OWNER_CONFIG, or the client's slot */
	uint32_t ns;                   /* its name's namespace: NCD_NS_ROOT, or a user's */
	int efd;                       /* eventfd that wakes a sleeping consumer, or -1 (none asked yet) */
	struct rte_ring *tx;           /* the client's transmit ring, or NULL */
	bool can_tx;                   /* it may transmit: a tx ring, or its region's */
	uint16_t port;                 /* the port it transmits on */
	unsigned int tx_worker;        /* the worker that empties tx */
	struct nc_trie_rule tx_rule;   /* what a sent packet's reversed key must match */
	uint64_t seq;                  /* creation order: among equal priorities the older wins */
	int32_t queue;                 /* offload: the rx queue to steer to, or -1 */
	bool consumer_gone;            /* its client died: its rings are drained from their tail */
	int consumer;                  /* a static deliver channel's one attached client: slot + 1, or 0 */
	struct ncd_share *share;       /* a shared channel's consumers; NULL while it has none */
	uint8_t nattach;               /* a static channel's "attach": who may, besides root */
	struct ncd_attach_conf attach[NCD_ATTACH_MAX];
	struct ncd_nat_conf nat;       /* a NAT channel's translation (action NC_ACTION_NAT) */
	struct ncd_meter *meter;       /* its meter (channels[].meter), or NULL */
	struct ncd_txm *tx_meter;      /* its clients' transmit meter (channels[].tx_meter), or NULL */
	/* Per port: the mark its flow rule sets, 0 for none. Workers trust only this one. */
	uint32_t mark[NCD_MAX_PORTS];
	struct ncd_chan_offload off[NCD_MAX_PORTS];
};

_Static_assert(offsetof(struct ncd_channel, dir) + sizeof(void *) <= 64,
	       "what a worker reads of a channel for every packet is on its first line");

#define NCD_OWNER_CONFIG (-1)
#define NCD_OWNER_OPERATOR (-2)        /* created with the CLI; attachable, like the config's */

/**
 * Drain a ring of mbufs back into the pool, unmarked. from_tail: its
 * consumer died, maybe in the middle of a dequeue: start from the tail.
 * @return how many
 */
unsigned int ncd_ring_drain(const struct ncd *d, struct rte_ring *r, bool from_tail);

/** One burst of ncd_ring_drain(): up to NCD_BURST mbufs unmarked, into the pool. @return them */
unsigned int ncd_ring_free_burst(const struct ncd *d, struct rte_ring *r);

/*
 * What the modules above the channels do as a channel comes and goes: the
 * workers' lists and counters, NAT's mappings, packets waiting for a next
 * hop, flow rules, a zero-copy consumer's rings. Each module gives its part
 * as one of these (any member NULL), added before ncd_channels_init() in the
 * order main() starts the modules. ncd_channel_add() calls them in that
 * order; ncd_channel_del() in the reverse one. Control thread.
 */
struct ncd_channel_hooks {
	/* Before the rule goes into the classifier: < 0 refuses the channel with that error. */
	int (*prepare)(struct ncd *d, const struct ncd_channel_conf *cc);
	/* Its id known, before the workers can see it: whatever the id held before is reset. */
	void (*init)(struct ncd *d, struct ncd_channel *ch);
	/* Published: < 0 and the channel is removed again (ncd_channel_add() returns -ENOTSUP). */
	int (*added)(struct ncd *d, struct ncd_channel *ch);
	/* Before it leaves the classifier: workers may still meet it. */
	void (*leaving)(struct ncd *d, struct ncd_channel *ch);
	/* Out of the classifier and a grace period later: no worker holds it; still found by id. */
	void (*quiet)(struct ncd *d, struct ncd_channel *ch);
	/* No longer found by id or name. */
	void (*left)(struct ncd *d, const struct ncd_channel *ch);
	/*
	 * A static channel's rings, which its zero-copy consumer (slot) may be
	 * reading: 0 if the hook keeps them until it lets go, -1 to have them
	 * drained and freed now.
	 */
	int (*hold_rings)(struct ncd *d, unsigned int slot, struct rte_ring *rx,
			  struct rte_ring *tx);
	/* Freed (or refused): rule is what it had. */
	void (*gone)(struct ncd *d, const struct nc_trie_rule *rule);
};

/** Give a module's part in channels' lives (before ncd_channels_init()). @return 0 or -ENOSPC. */
int ncd_channel_hooks_add(const struct ncd_channel_hooks *h);

/** Create the channel directory, the classifier and the config's channels. @return 0 or -1. */
int ncd_channels_init(struct ncd *d);

/*
 * Channel names are unique within a namespace: NCD_NS_ROOT's holds the
 * config's, the operator's and root's clients' channels; each other user's
 * clients' channels are in a namespace of their own (its uid + 1), so that
 * a name one user takes tells no other user anything.
 */
#define NCD_NS_ROOT 0u

/**
 * Add a channel while the workers run, its name in namespace ns. An
 * isolated client's (region non-NULL) has no rte_rings: it is delivered
 * into the region and transmits from it.
 * @return its id, or -EEXIST (the name is taken in ns), -EBUSY (another
 *   channel has the same rule and priority), -ENOSPC, -ENOMEM, or the ring's
 *   error.
 */
int ncd_channel_add(struct ncd *d, const struct ncd_channel_conf *cc, int owner, uint32_t ns,
		    struct ncd_region *region);

/** Remove a channel while the workers run: out of the classifier, a grace period, then freed. */
void ncd_channel_del(struct ncd *d, uint32_t id);

/**
 * A deliver channel's eventfd, made on the first call (control thread): what
 * wakes its sleeping consumers. @return the fd, or -errno of eventfd().
 */
int ncd_channel_eventfd(struct ncd_channel *ch);

/**
 * The bytes of the heap one of a channel's rings of ring_size entries takes
 * (what a user's control.limits.memory_mb counts), or 0 for a size no ring can have.
 */
size_t ncd_ring_memsize(uint32_t ring_size);

/**
 * The first channel, from id `from` on, whose packets a rule would take: its
 * rule overlaps r (nc_trie_rules_overlap()) at a priority not above r's.
 * @return its id, or -1
 */
int32_t ncd_channel_shadowed(const struct ncd *d, const struct nc_trie_rule *r, uint32_t from);

/**
 * The channel whose rule is r's, priority included: the one that holds the flows a new
 * channel with r could not have (ncd_channel_add()'s -EBUSY). @return its id, or -1
 */
int32_t ncd_channel_same_rule(const struct ncd *d, const struct nc_trie_rule *r);

/**
 * An isolated client attaches to a static deliver channel: from now on the
 * workers copy its packets into a ring of the client's region, not onto its
 * own ring (control thread). One such client at a time.
 * @return the region's ring, or -EBUSY (another holds it), -ENOSPC (no ring left)
 */
int ncd_channel_region_attach(struct ncd_channel *ch, struct ncd_region *rg);

/** The isolated client lets go: the channel's packets go to its own ring again. */
void ncd_channel_region_detach(struct ncd *d, struct ncd_channel *ch);

/**
 * An isolated client becomes one more consumer of a shared static channel
 * (control thread): a ring of its region gets its share of the flows.
 * @return 0, or -EALREADY (it is one), -EBUSY (NCD_SHARE_MAX consumers),
 *   -ENOSPC (no ring left in its region), -ENOMEM
 */
int ncd_channel_share_join(struct ncd *d, struct ncd_channel *ch, struct ncd_region *rg, int slot);

/**
 * The consumer in client slot `slot` leaves a shared channel: its flows go to
 * the others (or to the channel's own ring when none is left), then its ring
 * is given back.
 */
void ncd_channel_share_leave(struct ncd *d, struct ncd_channel *ch, int slot);

/**
 * The eventfd that wakes one consumer of a shared channel, made on its first
 * ask: each has its own, so that one's read cannot take another's wake-up.
 * @return the fd, or -ENOENT (slot is not a consumer), or -errno of eventfd()
 */
int ncd_channel_share_eventfd(struct ncd_channel *ch, int slot);

/**
 * The connection in client slot `slot` as a consumer of shared channel ch (control
 * thread). @return its entry, or NULL: it is none
 */
static inline struct ncd_share_consumer *
ncd_channel_consumer(const struct ncd_channel *ch, int slot)
{
	for (uint32_t k = 0; ch->share != NULL && k < ch->share->n; k++)
		if (ch->share->c[k].slot == slot)
			return &ch->share->c[k];
	return NULL;
}

/** Consumers a shared channel has now (control thread). */
static inline uint32_t
ncd_channel_consumers(const struct ncd_channel *ch)
{
	return ch->share != NULL ? ch->share->n : ch->consumer != 0;
}

/** Packets waiting on a deliver channel's receive ring, as far as the daemon knows. */
uint32_t ncd_channel_rx_count(const struct ncd_channel *ch);

/**
 * Put a meter on channel id, change it, or take it off (kind
 * NCD_METER_NONE), while its traffic flows: each worker meters a burst under
 * the old meter or the new one, which starts with full buckets. Control
 * thread; returns once no worker holds the old one.
 * @return 0, -ENOENT (no channel) or -ENOMEM (rte_meter refused it, logged)
 */
int ncd_channel_set_meter(struct ncd *d, uint32_t id, const struct ncd_meter_conf *mc);

/**
 * The id of the channel named name in NCD_NS_ROOT's namespace (the
 * config's, the operator's, root's clients'); control thread.
 * @return it, or -1 for none.
 */
int32_t ncd_channel_find(const struct ncd *d, const char *name);

/** ncd_channel_find() in namespace ns (a user's: its uid + 1). */
int32_t ncd_channel_find_ns(const struct ncd *d, uint32_t ns, const char *name);

/** Drain every channel's ring, free them, the directory and the classifier. */
void ncd_channels_free(struct ncd *d);

#endif
