/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libnetchannel: the control protocol on one side; on the other an isolated
 * client's region (no DPDK at run time), or a zero-copy client's rings in
 * the daemon's memory (a DPDK secondary process).
 */
#define _GNU_SOURCE /* sched_getaffinity, strerrordesc_np */
#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <sys/un.h>
#include <unistd.h>

#include "nc_internal.h"
#include "nc_version.h"

#define REPLY_TIMEOUT_S 10
#define GONE_CHECK_MS 10           /* how often an idle client looks whether the daemon hung up */
#define TX_FLUSH_MS 500            /* how long a closing client waits for the daemon to take its frames */
#define RECONNECT_POLL_MS 50       /* how often nc_reconnect() tries the socket while no daemon answers */
#define DIM(a) (sizeof(a) / sizeof((a)[0]))
#define NC_MAX_FDS 2              /* the most a reply carries: the two parts of a region */

/* The zero-copy model's calls, once libnetchannel_zc is loaded. */
static const struct nc_zc_ops *zc;

NC_EXPORT void
nc__zc_register(const struct nc_zc_ops *ops)
{
	zc = ops;
}

static void tx_flush(struct nc_client *c);

/* The last reply's body, for requests whose answer has no fixed size. */
static __thread uint8_t last_body[NC_CTL_MAX_MSG];
static __thread uint32_t last_len;
/* The daemon's reason for the last refusal (nc_last_reason()). */
static __thread char last_reason[NC_CTL_REASON_MAX];

/* A refusal's body is its reason, in words, if it has one. */
static void
keep_reason(int32_t status, const uint8_t *body, uint32_t len)
{
	if (status >= 0)
		return;
	if (len >= sizeof(last_reason))
		len = 0;
	memcpy(last_reason, body, len);
	last_reason[len] = '\0';
}

void
nc__reason(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(last_reason, sizeof(last_reason), fmt, ap);
	va_end(ap);
}

int
nc__sized_in(const void *p, size_t known, void *out, const char *type)
{
	const uint8_t *b = p;
	uint32_t size;

	memset(out, 0, known);
	memcpy(&size, p, sizeof(size));
	if (size < sizeof(size)) {
		nc__reason("struct %s's size is %u: set it to sizeof(struct %s)", type, size, type);
		return -EINVAL;
	}
	/* A caller's newer header may add fields: unset, they ask for nothing this library lacks. */
	for (size_t i = known; i < size; i++)
		if (b[i] != 0) {
			nc__reason("struct %s: byte %zu of %u is set, past the %zu this libnetchannel "
				   "(%s) knows", type, i, size, known, NC_PROJECT_VERSION);
			return -EOPNOTSUPP;
		}
	memcpy(out, p, size < known ? size : known);
	((uint32_t *)out)[0] = (uint32_t)known;
	return 0;
}

int
nc__sized_out(void *p, const void *ours, size_t known)
{
	uint8_t *b = p;
	uint32_t size, n;

	memcpy(&size, p, sizeof(size));
	if (size < sizeof(size))
		return -EINVAL;
	n = size < known ? size : (uint32_t)known;
	memcpy(b + sizeof(size), (const uint8_t *)ours + sizeof(size), n - sizeof(size));
	memset(b + n, 0, size - n);
	memcpy(b, &n, sizeof(n));
	return 0;
}

/*
 * Whether a reply is one the daemon sent unasked (id 0): a refusal as it
 * accepted us (every slot is taken), or its notice that it is stopping (then
 * the client is gone: ESHUTDOWN). Its reason is kept.
 */
static bool
unasked(struct nc_client *c, const struct nc_ctl_rep *rep, const uint8_t *body, ssize_t n)
{
	if (rep->magic != NC_CTL_MAGIC || rep->for_id != 0 || rep->status >= 0 ||
	    rep->len != n - sizeof(*rep))
		return false;
	keep_reason(rep->status, body, rep->len);
	if (rep->status == -ESHUTDOWN)
		c->gone = ESHUTDOWN;
	return true;
}

/*
 * One request, one reply. Returns the reply's status, or -errno of the
 * transport. A successful reply's body goes to out: at least out_min bytes
 * of it, and at most out_max (a newer daemon's may be longer: what it adds
 * is cut; a shorter one's missing fields are 0). The file descriptors the
 * reply carries go to fds_out[0..nfds) (-1 for each it lacks); any more are
 * closed.
 */
static int
call_fds(struct nc_client *c, uint16_t type, const void *body, uint32_t len, void *out,
	 uint32_t out_min, uint32_t out_max, int *fds_out, unsigned int nfds)
{
	struct nc_ctl_req req = { .magic = NC_CTL_MAGIC, .type = type, .id = ++c->next_id,
				  .len = len };
	struct iovec iov[2] = { { &req, sizeof(req) }, { (void *)body, len } };
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = len ? 2 : 1 };
	static __thread uint8_t buf[NC_CTL_MAX_MSG];
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(NC_MAX_FDS * sizeof(int))];
	} cm;
	struct iovec riov = { buf, sizeof(buf) };
	struct msghdr rmh = { .msg_iov = &riov, .msg_iovlen = 1, .msg_control = cm.buf,
			      .msg_controllen = sizeof(cm.buf) };
	struct nc_ctl_rep rep;
	struct cmsghdr *h;
	unsigned int got = 0;
	ssize_t n;

	for (unsigned int i = 0; i < nfds; i++)
		fds_out[i] = -1;

	last_reason[0] = '\0';
	/* A daemon that said it stops, or hung up, answers nothing more: no wait for it. */
	if (c->gone)
		return -c->gone;
	if (sendmsg(c->fd, &mh, MSG_NOSIGNAL) < 0) {
		int err = errno;

		/* A daemon that refused us as it accepted us has hung up: its reason still waits. */
		n = recv(c->fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n >= (ssize_t)sizeof(rep)) {
			memcpy(&rep, buf, sizeof(rep));
			if (unasked(c, &rep, buf + sizeof(rep), n))
				return rep.status;
		}
		if (err == ECONNRESET || err == EPIPE) {
			c->gone = EPIPE;
			return -EPIPE;
		}
		return -err;
	}
	do
		n = recvmsg(c->fd, &rmh, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	/*
	 * A daemon that refused us as it accepted us may have closed before it
	 * read our request: the kernel then reports the reset first, and the
	 * daemon's reason is still queued behind it.
	 */
	if (n < 0 && errno == ECONNRESET) {
		rmh.msg_controllen = sizeof(cm.buf);
		n = recvmsg(c->fd, &rmh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
		if (n < 0)
			errno = ECONNRESET;
	}
	for (h = n > 0 ? CMSG_FIRSTHDR(&rmh) : NULL; h != NULL; h = CMSG_NXTHDR(&rmh, h)) {
		if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS)
			continue;
		for (size_t k = 0; k < (h->cmsg_len - CMSG_LEN(0)) / sizeof(int); k++) {
			int fd;

			memcpy(&fd, CMSG_DATA(h) + k * sizeof(int), sizeof(int));
			if (got < nfds)
				fds_out[got++] = fd;
			else
				close(fd);
		}
	}
	/* A daemon that died with the request unanswered: gone, as when it hangs up. */
	if (n == 0 || (n < 0 && errno == ECONNRESET)) {
		c->gone = EPIPE;
		return -EPIPE;
	}
	if (n < 0)
		return errno == EAGAIN ? -ETIMEDOUT : -errno;
	if ((size_t)n < sizeof(rep))
		return -EBADMSG;
	memcpy(&rep, buf, sizeof(rep));
	if (unasked(c, &rep, buf + sizeof(rep), n))
		return rep.status;
	if (rep.magic != NC_CTL_MAGIC || rep.for_id != req.id || rep.len != n - sizeof(rep))
		return -EBADMSG;
	last_len = rep.len;
	memcpy(last_body, buf + sizeof(rep), rep.len);
	keep_reason(rep.status, last_body, rep.len);
	if (rep.status == 0 && out != NULL) {
		if (rep.len < out_min)
			return -EBADMSG;
		memset(out, 0, out_max);
		memcpy(out, buf + sizeof(rep), rep.len < out_max ? rep.len : out_max);
	}
	return rep.status;
}

/* call_fds() for a reply that carries one file descriptor at most (to *fd_out). */
static int
call_fd(struct nc_client *c, uint16_t type, const void *body, uint32_t len, void *out,
	uint32_t out_len, int *fd_out)
{
	return call_fds(c, type, body, len, out, out_len, out_len, fd_out, fd_out != NULL);
}

/* A request whose reply is out_len bytes, or more from a newer daemon (those are kept). */
static int
call(struct nc_client *c, uint16_t type, const void *body, uint32_t len, void *out,
     uint32_t out_len)
{
	return call_fds(c, type, body, len, out, out_len, out_len, NULL, 0);
}



/* Whether [off, off + len) lies in a region of size bytes. */
static int
inside(uint64_t off, uint64_t len, uint64_t size)
{
	return off <= size && len <= size - off;
}

/* A part of the region the daemon passed: its size, mapped (the fd closed). 0 or -errno. */
static int
part_map(int fd, int prot, uint8_t **base, uint64_t *size)
{
	struct stat st;

	*base = NULL;
	if (fd < 0)
		return -EPROTO;
	if (fstat(fd, &st) != 0 || st.st_size < NC_REGION_HDR_SIZE) {
		close(fd);
		return -EPROTO;
	}
	*size = (uint64_t)st.st_size;
	*base = mmap(NULL, *size, prot, MAP_SHARED, fd, 0);
	close(fd);
	if (*base == MAP_FAILED) {
		*base = NULL;
		return -errno;
	}
	return 0;
}

static void
region_unmap(struct region *g)
{
	if (g->cbase != NULL && g->cbase != g->base)
		munmap(g->cbase, g->csize);
	if (g->base != NULL)
		munmap(g->base, g->size);
	g->base = g->cbase = NULL;
}

/* Rx ring k's consumer line: in our part (layout 2), or the ring's own (layout 1). */
static struct nc_region_cons *
rx_cons(const struct region *g, uint32_t k)
{
	if (g->layout == NC_REGION_LAYOUT_ONE_PART)
		return &((struct nc_region_ring *)(g->base + g->h.rx_off + k * g->h.rx_stride))->cons;
	return (struct nc_region_cons *)(g->cbase + g->h.rx_cons_off) + k;
}

/*
 * Map the region the daemon passed with HELLO and check its geometry before
 * anything is read through it: a daemon of another version, or a broken one,
 * makes nc_connect() fail, not this process crash. Layout 2 (control protocol
 * 5): the daemon's part (read-only) and ours. Layout 1 (4): one part, ours
 * to write, every offset in it, each rx ring's consumer line its own.
 */
static int
region_map(struct nc_client *c, const int fds[2], uint32_t layout)
{
	struct region *g = &c->rg;
	const struct nc_region_hdr *h = &g->h;
	const uint64_t ring = sizeof(struct nc_region_ring);
	const int one_part = layout == NC_REGION_LAYOUT_ONE_PART;
	int ret = part_map(fds[0], one_part ? PROT_READ | PROT_WRITE : PROT_READ, &g->base, &g->size);

	if (one_part) {
		if (fds[1] >= 0)
			close(fds[1]);
		g->cbase = g->base;
		g->csize = 0;
	} else if (ret == 0) {
		ret = part_map(fds[1], PROT_READ | PROT_WRITE, &g->cbase, &g->csize);
	} else if (fds[1] >= 0) {
		close(fds[1]);
	}
	if (ret != 0) {
		region_unmap(g);
		return ret;
	}
	/* Where the client's own lines are: its part, or (layout 1) the one part. */
	const uint64_t mine = one_part ? g->size : g->csize;

	memcpy(&g->h, g->base, sizeof(g->h));
	if (h->magic != NC_REGION_MAGIC || h->version != layout || h->size != g->size ||
	    g->size != c->hello.region_size || h->client_size != g->csize ||
	    h->rx_size == 0 || (h->rx_size & (h->rx_size - 1)) || h->tx_size == 0 ||
	    (h->tx_size & (h->tx_size - 1)) || h->free_size == 0 ||
	    (h->free_size & (h->free_size - 1)) || h->free_size < h->rx_bufs ||
	    h->rx_stride < ring + (uint64_t)h->rx_size * sizeof(struct nc_desc) ||
	    !inside(h->rx_off, h->rx_stride * h->nrx, g->size) ||
	    !inside(h->buf_off, (uint64_t)h->rx_bufs * h->buf_size, g->size) ||
	    (!one_part && !inside(h->rx_cons_off, (uint64_t)h->nrx * sizeof(struct nc_region_cons),
				  g->csize)) ||
	    !inside(h->tx_off, ring + (uint64_t)h->tx_size * sizeof(struct nc_desc), mine) ||
	    !inside(h->free_off, ring + (uint64_t)h->free_size * sizeof(struct nc_desc), mine) ||
	    !inside(h->tx_buf_off, (uint64_t)h->tx_size * h->buf_size, mine) ||
	    (h->rx_off | h->tx_off | h->free_off | h->rx_stride | h->rx_cons_off) % 64 != 0) {
		region_unmap(g);
		return -EPROTO;
	}
	g->layout = layout;
	/* One ring for all (it was asked for), or a ring per channel: the region says which. */
	if ((c->flags & NC_CONNECT_ONE_RING) &&
	    (h->nrx != 1 || ((struct nc_region_ring *)(g->base + h->rx_off))->channel !=
			    NC_RING_ALL_CHANNELS)) {
		region_unmap(g);
		return -EPROTO;
	}
	if (c->flags & NC_CONNECT_ONE_RING) {
		g->rx_all = (struct nc_region_ring *)(g->base + h->rx_off);
		g->rx_all_cons = rx_cons(g, 0);
		g->rx_tail = __atomic_load_n(&g->rx_all_cons->tail, __ATOMIC_RELAXED);
	}
	g->tx = (struct nc_region_ring *)(g->cbase + h->tx_off);
	g->fr = (struct nc_region_ring *)(g->cbase + h->free_off);
	g->tx_head = __atomic_load_n(&g->tx->head, __ATOMIC_RELAXED);
	g->fr_head = __atomic_load_n(&g->fr->head, __ATOMIC_RELAXED);
	return 0;
}

/*
 * HELLO, agreeing on the newest control protocol both sides speak: this
 * library's range and build, and should the daemon refuse that HELLO without
 * a reason, as a daemon of version 4 refuses any HELLO but its own, that one.
 * The region's parts go to rfd. 0 or -errno, with a reason.
 */
static int
hello(struct nc_client *c, uint32_t flags, int rfd[2])
{
	struct nc_ctl_hello h = { .version = NC_CONTROL_PROTOCOL_VERSION,
				  .min_version = NC_CONTROL_PROTOCOL_MIN,
				  .pid = (uint32_t)getpid(), .flags = flags };
	const uint32_t v4 = NC_CTL_HELLO_REPLY_V4_SIZE;
	int ret;

	if (flags & NC_HELLO_F_ZEROCOPY)
		zc->build(h.build, sizeof(h.build));
	else
		snprintf(h.build, sizeof(h.build), "libnetchannel %s (%s)", NC_PROJECT_VERSION,
			 NC_GIT_DESCRIBE);
	ret = call_fds(c, NC_CTL_HELLO, &h, sizeof(h), &c->hello, v4, sizeof(c->hello), rfd, 2);
	if ((ret == -EINVAL || ret == -EPROTO) && last_reason[0] == '\0' && !c->gone) {
		/* A zero-copy client must be of the daemon's build, which an older one does not say. */
		if (flags & NC_HELLO_F_ZEROCOPY) {
			nc__reason("zero-copy needs the daemon's exact build: the daemon speaks an "
				   "older control protocol than %d and does not say its own; this "
				   "library is \"%s\"", NC_CONTROL_PROTOCOL_MIN + 1, h.build);
			return -EPROTO;
		}
		h = (struct nc_ctl_hello){ .version = NC_CONTROL_PROTOCOL_MIN,
					   .pid = (uint32_t)getpid(), .flags = flags };
		ret = call_fds(c, NC_CTL_HELLO, &h, NC_CTL_HELLO_V4_SIZE, &c->hello, v4, v4, rfd, 2);
	}
	if (ret != 0)
		return ret;
	/* What was agreed: one of ours, and, from version 5, the whole reply. */
	if (c->hello.version < NC_CONTROL_PROTOCOL_MIN ||
	    c->hello.version > NC_CONTROL_PROTOCOL_VERSION ||
	    (c->hello.version >= 5 && last_len < sizeof(c->hello))) {
		nc__reason("HELLO's reply: control protocol %u, %u bytes", c->hello.version,
			   last_len);
		return -EPROTO;
	}
	if (c->hello.version < 5) {
		/* A daemon of version 4 says nothing of its range, and passes regions of one part. */
		c->hello.min_version = c->hello.max_version = c->hello.version;
		c->hello.region_layout = c->hello.region_size != 0 ? NC_REGION_LAYOUT_ONE_PART : 0;
	}
	c->hello.file_prefix[sizeof(c->hello.file_prefix) - 1] = '\0';
	c->hello.build[sizeof(c->hello.build) - 1] = '\0';
	return 0;
}

/*
 * The connection: the socket at c->path, HELLO as c->flags say, and an
 * isolated client's region mapped. 0 or -errno (c->fd -1 when the socket
 * could not connect).
 */
static int
connect_once(struct nc_client *c)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct timeval tv = { .tv_sec = REPLY_TIMEOUT_S };
	const unsigned int flags = c->flags;
	int ret, rfd[2] = { -1, -1 };

	strcpy(sa.sun_path, c->path);
	c->fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (c->fd < 0 || connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		ret = -errno;
		if (c->fd >= 0)
			close(c->fd);
		c->fd = -1;
		return ret;
	}
	/* A daemon that stops answering gives an error, not a hang. */
	setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	ret = (flags & NC_CONNECT_ZEROCOPY) && zc == NULL ? -ENOSYS :
	      hello(c, flags & NC_CONNECT_CONTROL ? NC_HELLO_F_CONTROL :
		       flags & NC_CONNECT_ZEROCOPY ? NC_HELLO_F_ZEROCOPY :
		       flags & NC_CONNECT_ONE_RING ? NC_HELLO_F_ONE_RING : 0, rfd);
	/* The region's parts are an isolated client's to map (region_map() takes them). */
	if (ret == 0 && !(flags & (NC_CONNECT_ZEROCOPY | NC_CONNECT_CONTROL)))
		return region_map(c, rfd, c->hello.region_layout);
	for (int i = 0; i < 2; i++)
		if (rfd[i] >= 0)
			close(rfd[i]);
	return ret;
}

NC_EXPORT struct nc_client *
nc_connect(const char *path, unsigned int flags)
{
	struct sockaddr_un sa;
	const unsigned int known = NC_CONNECT_NO_EAL | NC_CONNECT_CONTROL | NC_CONNECT_ZEROCOPY |
				   NC_CONNECT_ONE_RING;
	struct nc_client *c;
	int ret;

	last_reason[0] = '\0';
	if (path == NULL)
		path = NC_DEFAULT_SOCKET;
	/* The application's own EAL is a zero-copy client's. */
	if (flags & NC_CONNECT_NO_EAL)
		flags |= NC_CONNECT_ZEROCOPY;
	if (strlen(path) >= sizeof(sa.sun_path) || (flags & ~known) ||
	    ((flags & NC_CONNECT_CONTROL) && (flags & NC_CONNECT_ZEROCOPY)) ||
	    ((flags & NC_CONNECT_ONE_RING) && (flags & ~NC_CONNECT_ONE_RING))) {
		errno = EINVAL;
		return NULL;
	}
	c = calloc(1, sizeof(*c));
	if (c == NULL)
		return NULL;
	c->flags = flags;
	c->rx_tsc_off = -1;
	c->rg.efd = -1;
	strcpy(c->path, path);
	ret = connect_once(c);
	if (ret != 0)
		goto out_close;
	/* A zero-copy client becomes a DPDK secondary: libnetchannel_zc's business. */
	if (flags & NC_CONNECT_ZEROCOPY) {
		ret = zc->attach(c);
		if (ret != 0)
			goto out_close;
	}
	return c;

out_close:
	if (c->eal_owned)
		zc->detach(c);
	if (c->fd >= 0)
		close(c->fd);
	free(c);
	errno = -ret;
	return NULL;
}

NC_EXPORT void
nc_disconnect(struct nc_client *c)
{
	if (c == NULL)
		return;
	tx_flush(c);
	if (c->pool != NULL)
		zc->flush(c);
	close(c->fd);
	if (c->rg.efd >= 0)
		close(c->rg.efd);
	free(c->rg.gen);
	region_unmap(&c->rg);
	if (c->eal_owned)
		zc->detach(c);
	free(c);
}


/* The one ring's packets of channel id are ours while its generation is this one (0: none). */
static int
gen_set(struct region *g, uint32_t id, uint64_t generation)
{
	if (id >= g->ngen) {
		uint32_t n = g->ngen ? g->ngen : 1024;
		uint32_t *p;

		while (n <= id)
			n *= 2;
		p = realloc(g->gen, (size_t)n * sizeof(*p));
		if (p == NULL) {
			errno = ENOMEM;
			return -1;
		}
		memset(p + g->ngen, 0, (size_t)(n - g->ngen) * sizeof(*p));
		g->gen = p;
		g->ngen = n;
	}
	g->gen[id] = generation == 0 ? 0 : (uint32_t)(generation & 0xffff) + 1;
	return 0;
}

/*
 * A channel handle's part of the daemon's reply (CREATE, ATTACH): its id,
 * and where its packets come (a ring of the region, the one ring, or, zero-
 * copy, rings in the daemon's memory). 0, or -1 with errno set.
 */
static int
channel_fill(struct nc_client *c, struct nc_channel *ch, const struct nc_ctl_channel *info)
{
	ch->id = info->id;
	ch->generation = info->generation;
	memcpy(ch->tx_mac, info->tx_mac, sizeof(ch->tx_mac));
	ch->tx_mtu = info->tx_mtu;
	ch->can_tx = (info->flags & NC_CHANNEL_F_TX) != 0;
	ch->ring = NULL;
	ch->cons = NULL;
	ch->one_ring = 0;
	ch->lost = 0;
	if (c->rg.base != NULL) {
		/* An isolated client's: a ring of its region, or nothing (drop and NAT). */
		if ((info->flags & NC_CHANNEL_F_REGION) && c->rg.rx_all != NULL) {
			if (info->region_ring != 0) {
				errno = EBADMSG;
				return -1;
			}
			if (gen_set(&c->rg, info->id, info->generation) != 0)
				return -1;
			ch->one_ring = 1;
		} else if (info->flags & NC_CHANNEL_F_REGION) {
			if (info->region_ring >= c->rg.h.nrx) {
				errno = EBADMSG;
				return -1;
			}
			ch->ring = (struct nc_region_ring *)(c->rg.base + c->rg.h.rx_off +
							     info->region_ring * c->rg.h.rx_stride);
			ch->cons = rx_cons(&c->rg, info->region_ring);
			ch->rx_tail = __atomic_load_n(&ch->cons->tail, __ATOMIC_RELAXED);
		}
		return 0;
	}
	if (c->dir == NULL) {
		errno = EOPNOTSUPP;            /* a connection for control only */
		return -1;
	}
	return zc->open(c, ch, info);
}

/* A handle for a channel the daemon made for this client, on its list. */
static struct nc_channel *
channel_open(struct nc_client *c, const struct nc_ctl_channel *info, int owned)
{
	struct nc_channel *ch = calloc(1, sizeof(*ch));

	if (ch == NULL)
		return NULL;
	ch->efd = -1;
	ch->client = c;
	ch->owned = owned;
	if (channel_fill(c, ch, info) != 0) {
		free(ch);
		return NULL;
	}
	ch->next = c->channels;
	if (c->channels != NULL)
		c->channels->prev = ch;
	c->channels = ch;
	return ch;
}

/* The API's NAT flags, and the wire's that say the same. */
static const struct {
	uint32_t opt, wire;
} nat_flags[] = {
	{ NC_NAT_OPT_DST, NC_NAT_F_DST }, { NC_NAT_OPT_DPORT, NC_NAT_F_DPORT },
	{ NC_NAT_OPT_SRC, NC_NAT_F_SRC }, { NC_NAT_OPT_SPORT, NC_NAT_F_SPORT },
	{ NC_NAT_OPT_PORT, NC_NAT_F_PORT }, { NC_NAT_OPT_VIA, NC_NAT_F_VIA },
	{ NC_NAT_OPT_REVERSE, NC_NAT_F_REVERSE },
};

/* A NAT channel's options as struct nc_ctl_nat has them. Unknown flags go on as a bit the
 * daemon refuses (EINVAL), not dropped in silence. */
static void
nat_to_wire(const struct nc_nat_opts *o, struct nc_ctl_nat *n)
{
	uint32_t known = 0;

	memset(n, 0, sizeof(*n));
	for (size_t i = 0; i < DIM(nat_flags); i++) {
		known |= nat_flags[i].opt;
		if (o->flags & nat_flags[i].opt)
			n->flags |= nat_flags[i].wire;
	}
	if (o->flags & ~known)
		n->flags |= UINT32_C(1) << 31;
	n->family = o->family;
	memcpy(n->dst, o->dst, sizeof(n->dst));
	memcpy(n->src, o->src, sizeof(n->src));
	n->dport = o->dport;
	n->sport = o->sport;
	n->port = o->port;
	memcpy(n->via, o->via, sizeof(n->via));
}

/* A rule as the wire has it. */
static void
rule_to_wire(const struct nc_rule *r, struct nc_ctl_rule *w)
{
	*w = (struct nc_ctl_rule){
		.family = r->family, .proto = r->proto, .proto_mask = r->proto_mask,
		.dst_len = r->dst_len, .src_len = r->src_len, .dport_kind = r->dport.kind,
		.sport_kind = r->sport.kind, .dport_lo = r->dport.lo, .dport_hi = r->dport.hi,
		.sport_lo = r->sport.lo, .sport_hi = r->sport.hi, .priority = r->priority,
	};
	memcpy(w->dst, r->dst, 16);
	memcpy(w->src, r->src, 16);
}

/* A meter as the wire has it (id 0). */
static void
meter_to_wire(const struct nc_meter_opts *o, uint32_t id, struct nc_ctl_meter *w)
{
	*w = (struct nc_ctl_meter){
		.id = id, .rate = o->rate, .burst = o->burst, .excess_burst = o->excess_burst,
		.peak_rate = o->peak_rate, .peak_burst = o->peak_burst,
		/* Unknown flags go on as they are, for the daemon to refuse with its reason. */
		.flags = o->flags,
	};
	_Static_assert(NC_METER_OPT_BITS == NC_METER_F_BITS &&
		       NC_METER_OPT_EXCEED_KERNEL == NC_METER_F_EXCEED_KERNEL &&
		       NC_METER_OPT_RFC4115 == NC_METER_F_RFC4115,
		       "nc_meter_opts flags are the wire's");
}

/* Meters are control protocol 6's: an older daemon is told nothing it would misread. */
static int
meters_spoken(const struct nc_client *c)
{
	if (c->hello.version >= 6)
		return 0;
	nc__reason("meters need control protocol 6; the daemon speaks %u", c->hello.version);
	return -EOPNOTSUPP;
}

/* CHANNEL_CREATE: the daemon's reply in *info. 0 or -errno. */
static int
create_request(struct nc_client *c, const char *name, const struct nc_rule *r,
	       const struct nc_channel_opts *opts, const struct nc_nat_opts *nat,
	       const struct nc_meter_opts *meter, struct nc_ctl_channel *info)
{
	struct nc_ctl_create m;
	uint8_t body[sizeof(m) + sizeof(struct nc_ctl_nat) + sizeof(struct nc_ctl_meter)];
	size_t len = sizeof(m);

	if (c == NULL || name == NULL || r == NULL || strlen(name) >= sizeof(m.name))
		return -EINVAL;
	if (meter != NULL && meters_spoken(c) != 0)
		return -EOPNOTSUPP;
	if (opts != NULL && opts->shared && c->hello.version < 7) {
		nc__reason("shared channels need control protocol 7; the daemon speaks %u",
			   c->hello.version);
		return -EOPNOTSUPP;
	}
	memset(&m, 0, sizeof(m));
	strcpy(m.name, name);
	rule_to_wire(r, &m.rule);
	if (opts != NULL) {
		m.action = opts->drop ? NC_ACTION_DROP : NC_ACTION_DELIVER;
		m.ring_size = opts->ring_size;
		m.queue_bytes = opts->queue_bytes;
		m.memory_limit_order = opts->memory_limit_order;
		m.flags = (opts->tx ? NC_CREATE_F_TX : 0) | (opts->shared ? NC_CREATE_F_SHARED : 0);
		m.port = opts->port;
	}
	if (nat != NULL) {
		struct nc_ctl_nat n;

		nat_to_wire(nat, &n);
		m.action = NC_ACTION_NAT;
		memcpy(body + sizeof(m), &n, sizeof(n));
		len += sizeof(n);
	}
	if (meter != NULL) {
		struct nc_ctl_meter w;

		meter_to_wire(meter, 0, &w);
		m.flags |= NC_CREATE_F_METER;
		memcpy(body + len, &w, sizeof(w));
		len += sizeof(w);
	}
	memcpy(body, &m, sizeof(m));
	return call(c, NC_CTL_CHANNEL_CREATE, body, len, info, sizeof(*info));
}

struct nc_channel *
nc__channel_create(struct nc_client *c, const char *name, const struct nc_rule *r,
		   const struct nc_channel_opts *opts, const struct nc_nat_opts *nat,
		   const struct nc_meter_opts *meter)
{
	struct nc_ctl_channel info;
	struct nc_channel *ch;
	int ret = create_request(c, name, r, opts, nat, meter, &info);

	if (ret != 0) {
		errno = -ret;
		return NULL;
	}
	ch = channel_open(c, &info, 1);
	if (ch == NULL)
		return NULL;
	/* What nc_reconnect() asks a new daemon for. */
	snprintf(ch->name, sizeof(ch->name), "%s", name);
	ch->rule = *r;
	ch->has_opts = opts != NULL;
	if (opts != NULL)
		ch->opts = *opts;
	ch->opts.nat = NULL;
	ch->opts.meter = NULL;
	ch->has_nat = nat != NULL;
	if (nat != NULL)
		ch->nat = *nat;
	ch->has_meter = meter != NULL;
	if (meter != NULL)
		ch->meter = *meter;
	return ch;
}

/* nc_channel_create() of NETCHANNEL_0.4: its structs carry their sizes. */
NC_EXPORT struct nc_channel *
nc_channel_create_v04(struct nc_client *c, const char *name, const struct nc_rule *rule,
		      const struct nc_channel_opts *opts)
{
	struct nc_channel_opts o;
	struct nc_meter_opts mt;
	struct nc_nat_opts n;
	struct nc_rule r;
	int ret;

	last_reason[0] = '\0';
	if (rule == NULL) {
		errno = EINVAL;
		return NULL;
	}
	ret = nc__sized_in(rule, sizeof(r), &r, "nc_rule");
	if (ret == 0 && opts != NULL)
		ret = nc__sized_in(opts, sizeof(o), &o, "nc_channel_opts");
	if (ret == 0 && opts != NULL && o.nat != NULL)
		ret = nc__sized_in(o.nat, sizeof(n), &n, "nc_nat_opts");
	if (ret == 0 && opts != NULL && o.meter != NULL)
		ret = nc__sized_in(o.meter, sizeof(mt), &mt, "nc_meter_opts");
	if (ret != 0) {
		errno = -ret;
		return NULL;
	}
	return nc__channel_create(c, name, &r, opts != NULL ? &o : NULL,
				  opts != NULL && o.nat != NULL ? &n : NULL,
				  opts != NULL && o.meter != NULL ? &mt : NULL);
}
NC_SYMVER_DEFAULT(nc_channel_create_v04, nc_channel_create, "NETCHANNEL_0.4");

/* CHANNEL_ATTACH: the daemon's reply in *info. 0 or -errno. */
static int
attach_request(struct nc_client *c, const char *name, struct nc_ctl_channel *info)
{
	struct nc_ctl_name m;

	memset(&m, 0, sizeof(m));
	snprintf(m.name, sizeof(m.name), "%s", name);
	return call(c, NC_CTL_CHANNEL_ATTACH, &m, sizeof(m), info, sizeof(*info));
}

NC_EXPORT struct nc_channel *
nc_channel_attach(struct nc_client *c, const char *name)
{
	struct nc_ctl_channel info;
	struct nc_channel *ch;
	int ret;

	if (c == NULL || name == NULL || strlen(name) >= NC_NAME_SIZE) {
		errno = EINVAL;
		return NULL;
	}
	ret = attach_request(c, name, &info);
	if (ret != 0) {
		errno = -ret;
		return NULL;
	}
	ch = channel_open(c, &info, 0);
	if (ch != NULL)
		snprintf(ch->name, sizeof(ch->name), "%s", name);
	return ch;
}

NC_EXPORT int
nc_channel_set_meter(struct nc_channel *ch, const struct nc_meter_opts *meter)
{
	struct nc_ctl_meter w = { 0 };
	struct nc_meter_opts mt;
	int ret;

	last_reason[0] = '\0';
	if (ch == NULL)
		return -EINVAL;
	if (ch->lost)
		return -ch->lost;
	if (!ch->owned) {
		nc__reason("channel %s is not this client's: a static channel's meter is the "
			   "operator's", ch->name);
		return -EPERM;
	}
	ret = meters_spoken(ch->client);
	if (ret == 0 && meter != NULL)
		ret = nc__sized_in(meter, sizeof(mt), &mt, "nc_meter_opts");
	if (ret != 0)
		return ret;
	if (meter != NULL)
		meter_to_wire(&mt, ch->id, &w);
	w.id = ch->id;
	ret = call(ch->client, NC_CTL_CHANNEL_METER, &w, sizeof(w), NULL, 0);
	if (ret == 0) {
		ch->has_meter = meter != NULL;
		if (meter != NULL)
			ch->meter = mt;
	}
	return ret;
}

NC_EXPORT int
nc_channel_destroy(struct nc_channel *ch)
{
	struct nc_ctl_id m;
	int ret = 0;

	if (ch == NULL)
		return -EINVAL;
	if (ch->can_tx)
		tx_flush(ch->client);
	/* Its own goes; a static one it receives from is let go of (not one nc_reconnect() lost). */
	if (!ch->lost && (ch->owned || ch->ring != NULL || ch->rx != NULL || ch->one_ring)) {
		m.id = ch->id;
		ret = call(ch->client, NC_CTL_CHANNEL_DESTROY, &m, sizeof(m), NULL, 0);
	}
	/* What its packets still hold of the one ring is given back as nc_client_rx_bufs() meets it. */
	if (ch->one_ring)
		gen_set(&ch->client->rg, ch->id, 0);
	if (ch->efd >= 0)
		close(ch->efd);
	if (ch->prev != NULL)
		ch->prev->next = ch->next;
	else
		ch->client->channels = ch->next;
	if (ch->next != NULL)
		ch->next->prev = ch->prev;
	free(ch);
	return ret;
}

/*
 * Whether the daemon hung up: the socket polled without blocking, at most
 * every GONE_CHECK_MS, so a busy client makes no syscall per call.
 */
static uint64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/*
 * Whether the daemon has gone, looked at now: 0, or why, as the errno the
 * calls then fail with. Unasked, the daemon sends only its notice that it is
 * stopping (ESHUTDOWN) and its hang-up (EPIPE), and whatever comes first
 * stays at the head of the socket.
 */
static int
gone_now(struct nc_client *c)
{
	struct pollfd p = { .fd = c->fd, .events = POLLIN };
	struct nc_ctl_rep rep;

	if (c->gone == 0 && poll(&p, 1, 0) > 0) {
		ssize_t n = recv(c->fd, &rep, sizeof(rep), MSG_PEEK | MSG_DONTWAIT);

		c->gone = n >= (ssize_t)sizeof(rep) && rep.magic == NC_CTL_MAGIC && rep.for_id == 0 &&
			  rep.status == -ESHUTDOWN ? ESHUTDOWN : EPIPE;
	}
	return c->gone;
}

/* gone_now(), looked at every GONE_CHECK_MS at most: a busy receive loop costs no syscall. */
static int
daemon_gone(struct nc_client *c)
{
	uint64_t now = now_ms();

	if (c->gone || now < c->next_check)
		return c->gone;
	c->next_check = now + GONE_CHECK_MS;
	return gone_now(c);
}

NC_EXPORT int
nc__daemon_gone(struct nc_client *c, int now)
{
	return now ? gone_now(c) : daemon_gone(c);
}

/*
 * What this client put on its tx ring goes out before its channels do: wait
 * (a moment at most) until the daemon has taken it, as close() lingers on a
 * socket with data queued.
 */
static void
tx_flush(struct nc_client *c)
{
	uint64_t until = now_ms() + TX_FLUSH_MS;

	while (c->rg.base != NULL && !daemon_gone(c) && now_ms() < until &&
	       __atomic_load_n(&c->rg.tx->cons.tail, __ATOMIC_ACQUIRE) != c->rg.tx_head)
		sched_yield();
}



















static ssize_t
send_region(struct nc_channel *ch, const void *buf, size_t len, int ip)
{
	struct nc_buf b;

	if (!ch->can_tx)
		return -EINVAL;
	if (len > ch->client->rg.h.buf_size)
		return -EMSGSIZE;
	if (daemon_gone(ch->client))
		return -ch->client->gone;
	if (nc_tx_bufs_get(ch->client, &b, 1) != 1)
		return -EAGAIN;
	memcpy(b.data, buf, len);
	b.len = (uint32_t)len;
	nc_tx_bufs_send(ch, &b, 1, ip);
	return (ssize_t)len;
}

/*
 * Whether a frame (ip: an IP packet) of len bytes fits the port's MTU: the
 * daemon drops a longer one (tx_too_big), which the NIC would not send.
 */
static int
fits_mtu(const struct nc_channel *ch, size_t len, int ip)
{
	return ch->tx_mtu == 0 || len <= (size_t)ch->tx_mtu + (ip ? 0 : 14);
}

static ssize_t
send_copy(struct nc_channel *ch, const void *buf, size_t len, int ip)
{
	if (ch->can_tx && !fits_mtu(ch, len, ip))
		return -EMSGSIZE;
	if (ch->client->rg.base != NULL)
		return send_region(ch, buf, len, ip);
	if (ch->tx == NULL)
		return -EINVAL;
	return zc->send(ch, buf, len, ip);
}

NC_EXPORT ssize_t
nc_send(struct nc_channel *ch, const void *buf, size_t len)
{
	return send_copy(ch, buf, len, 0);
}

NC_EXPORT ssize_t
nc_send_ip(struct nc_channel *ch, const void *buf, size_t len)
{
	return send_copy(ch, buf, len, 1);
}

_Static_assert(NC_BUF_F_MORE == NC_DESC_F_MORE, "nc_rx_bufs() passes the flag as it is");

/* Whether a descriptor of the one ring is of a channel this client has (by its generation). */
static inline int
live(const struct region *g, const struct nc_desc *d)
{
	return d->channel < g->ngen &&
	       g->gen[d->channel] == (d->flags >> NC_DESC_GEN_SHIFT) + 1;
}

/*
 * Up to n buffers off rx ring r, whose tail we keep in *tailp. For the one
 * ring (all), those of channels we no longer have go back to the daemon at
 * once. *taken: the entries consumed, returned or not.
 */
static uint16_t
ring_read(struct nc_client *c, const struct nc_region_ring *r, struct nc_region_cons *cons,
	  uint32_t *tailp, struct nc_buf *bufs, uint16_t n, int all, uint32_t *taken)
{
	uint32_t tail = *tailp, mask = c->rg.h.rx_size - 1, k, got = 0;

	*taken = 0;
	k = __atomic_load_n(&r->head, __ATOMIC_ACQUIRE) - tail;
	if (k > c->rg.h.rx_size)       /* not the daemon's doing: this process wrote there */
		k = 0;
	if (k == 0) {
		if (daemon_gone(c))
			errno = c->gone;
		return 0;
	}
	if (k > n)
		k = n;
	for (uint32_t i = 0; i < k; i++) {
		const struct nc_desc *d = &r->desc[(tail + i) & mask];
		uint32_t off = d->offset, len = d->length;
		struct nc_buf b;

		if (!inside(off, len, c->rg.size))
			off = len = 0;
		b = (struct nc_buf){ .data = c->rg.base + off, .len = len, .channel = d->channel,
				     .offset = off, .flags = d->flags & NC_DESC_F_MORE };
		if (all && !live(&c->rg, d))
			nc_bufs_release(c, &b, 1);
		else
			bufs[got++] = b;
	}
	*tailp = tail + k;
	*taken = k;
	/* The entries are read: the ring's, to reuse. The buffers stay ours until released. */
	__atomic_store_n(&cons->tail, tail + k, __ATOMIC_RELEASE);
	return (uint16_t)got;
}

NC_EXPORT uint16_t
nc_rx_bufs(struct nc_channel *ch, struct nc_buf *bufs, uint16_t n)
{
	struct nc_region_ring *r = ch->ring;
	uint32_t taken;

	if (ch->lost) {
		errno = ch->lost;
		return 0;
	}
	if (r == NULL) {
		errno = ch->client->gone ? ch->client->gone :
			ch->rx != NULL || ch->one_ring ? EOPNOTSUPP : EINVAL;
		return 0;
	}
	/* The daemon relabels the ring before it takes back what the ring holds. */
	/* Relabelled: destroyed by an operator, or, if the daemon said so first, its stop. */
	if (__atomic_load_n(&r->channel, __ATOMIC_ACQUIRE) != ch->id ||
	    r->generation != (uint32_t)ch->generation) {
		errno = gone_now(ch->client) ? ch->client->gone : ESTALE;
		return 0;
	}
	return ring_read(ch->client, r, ch->cons, &ch->rx_tail, bufs, n, 0, &taken);
}

NC_EXPORT uint16_t
nc_client_rx_bufs(struct nc_client *c, struct nc_buf *bufs, uint16_t n)
{
	uint16_t got = 0;
	uint32_t taken;

	if (c->rg.rx_all == NULL) {
		/* Not such a client, or one whose daemon went and has not come back. */
		errno = c->gone ? c->gone : EOPNOTSUPP;
		return 0;
	}
	/* Until n, or the ring is empty: entries of channels gone count for nothing. */
	for (;;) {
		uint16_t want = (uint16_t)(n - got);

		got += ring_read(c, c->rg.rx_all, c->rg.rx_all_cons, &c->rg.rx_tail, bufs + got, want,
				 1, &taken);
		if (got == n || taken < want)
			return got;
	}
}

NC_EXPORT int
nc_bufs_release(struct nc_client *c, const struct nc_buf *bufs, uint16_t n)
{
	struct region *g = &c->rg;
	uint32_t room, mask;

	if (g->base == NULL)
		return -EOPNOTSUPP;
	mask = g->h.free_size - 1;
	room = g->h.free_size - (g->fr_head - __atomic_load_n(&g->fr->cons.tail, __ATOMIC_ACQUIRE));
	if (room > g->h.free_size)
		room = 0;
	if (n > room)
		n = (uint16_t)room;
	for (uint16_t i = 0; i < n; i++)
		g->fr->desc[(g->fr_head + i) & mask] = (struct nc_desc){ .offset = bufs[i].offset };
	g->fr_head += n;
	__atomic_store_n(&g->fr->head, g->fr_head, __ATOMIC_RELEASE);
	return n;
}

NC_EXPORT uint16_t
nc_tx_bufs_get(struct nc_client *c, struct nc_buf *bufs, uint16_t n)
{
	struct region *g = &c->rg;
	uint32_t used, k, mask;

	if (g->base == NULL) {
		errno = EOPNOTSUPP;
		return 0;
	}
	mask = g->h.tx_size - 1;
	used = g->tx_head - __atomic_load_n(&g->tx->cons.tail, __ATOMIC_ACQUIRE) + g->tx_pending;
	k = used < g->h.tx_size ? g->h.tx_size - used : 0;
	if (k > n)
		k = n;
	for (uint32_t i = 0; i < k; i++) {
		/* Ring slot i uses tx buffer i: a slot the daemon consumed is a buffer it is done with. */
		uint32_t slot = (g->tx_head + g->tx_pending + i) & mask;
		uint64_t off = g->h.tx_buf_off + (uint64_t)slot * g->h.buf_size;

		bufs[i] = (struct nc_buf){ .data = g->cbase + off, .len = g->h.buf_size,
					   .offset = (uint32_t)off };
	}
	g->tx_pending += k;
	if (k == 0)
		errno = daemon_gone(c) ? c->gone : EAGAIN;
	return (uint16_t)k;
}

NC_EXPORT uint16_t
nc_tx_bufs_send(struct nc_channel *ch, const struct nc_buf *bufs, uint16_t n, int ip)
{
	struct region *g = &ch->client->rg;
	uint32_t mask, k = 0;
	int err = EINVAL;

	if (g->base == NULL || !ch->can_tx) {
		errno = g->base == NULL ? EOPNOTSUPP : EINVAL;
		return 0;
	}
	mask = g->h.tx_size - 1;
	/* In the order nc_tx_bufs_get() gave them: each one is its ring slot's buffer. */
	for (; k < n && k < g->tx_pending; k++) {
		uint32_t slot = (g->tx_head + k) & mask;

		if (bufs[k].offset != g->h.tx_buf_off + (uint64_t)slot * g->h.buf_size ||
		    bufs[k].len > g->h.buf_size)
			break;
		if (!fits_mtu(ch, bufs[k].len, ip)) {
			err = EMSGSIZE;
			break;
		}
		g->tx->desc[slot] = (struct nc_desc){ .offset = bufs[k].offset, .length = bufs[k].len,
						      .channel = ch->id,
						      .flags = ip ? NC_DESC_F_IP : 0 };
	}
	g->tx_head += k;
	g->tx_pending -= k;
	__atomic_store_n(&g->tx->head, g->tx_head, __ATOMIC_RELEASE);
	if (k < n)
		errno = err;
	return (uint16_t)k;
}

NC_EXPORT struct nc_client *
nc_channel_client(const struct nc_channel *ch)
{
	return ch->client;
}



int
nc__channel_stats(const struct nc_channel *ch, struct nc_channel_stats *st)
{
	struct nc_ctl_id m = { .id = ch->id };
	struct nc_ctl_channel_stats w;
	int ret = call(ch->client, NC_CTL_CHANNEL_STATS, &m, sizeof(m), &w, sizeof(w));

	if (ret != 0)
		return ret;
#define COPY(name, what) .name = w.name,
	*st = (struct nc_channel_stats){ .size = sizeof(*st), NC_CHANNEL_STATS(COPY, COPY) };
#undef COPY
	return 0;
}

/* nc_channel_stats() of NETCHANNEL_0.4: as much as the caller's size covers. */
NC_EXPORT int
nc_channel_stats_v04(const struct nc_channel *ch, struct nc_channel_stats *st)
{
	struct nc_channel_stats all;
	uint32_t size;
	int ret;

	memcpy(&size, st, sizeof(size));
	if (size < sizeof(size))
		return -EINVAL;
	ret = nc__channel_stats(ch, &all);
	return ret != 0 ? ret : nc__sized_out(st, &all, sizeof(all));
}
NC_SYMVER_DEFAULT(nc_channel_stats_v04, nc_channel_stats, "NETCHANNEL_0.4");

/* The eventfd a request brings (CHANNEL_EVENTFD or CLIENT_EVENTFD), kept in *efd once had. */
static int
ask_eventfd(struct nc_client *c, uint16_t type, const void *body, uint32_t len, int *efd)
{
	int fd = -1, ret;

	if (*efd >= 0)
		return *efd;
	/* Asked for on first use: a client that only polls holds no fd, nor does the daemon. */
	ret = call_fd(c, type, body, len, NULL, 0, &fd);
	if (ret == 0 && fd < 0)
		ret = -EBADMSG;
	if (ret != 0) {
		if (fd >= 0)
			close(fd);
		return ret;
	}
	*efd = fd;
	return fd;
}

NC_EXPORT int
nc_client_fd(struct nc_client *c)
{
	if (c == NULL || c->rg.rx_all == NULL)
		return -EOPNOTSUPP;
	return ask_eventfd(c, NC_CTL_CLIENT_EVENTFD, NULL, 0, &c->rg.efd);
}

NC_EXPORT int
nc_channel_fd(struct nc_channel *ch)
{
	struct nc_ctl_id m;

	if (ch == NULL || (ch->rx == NULL && ch->ring == NULL && !ch->one_ring))
		return -EINVAL;
	if (ch->one_ring)
		return nc_client_fd(ch->client);
	m.id = ch->id;
	return ask_eventfd(ch->client, NC_CTL_CHANNEL_EVENTFD, &m, sizeof(m), &ch->efd);
}

/* Ask for a wake-up from rx ring r, read up to tail: 0 if it is empty (sleep), else 1. */
static int
ring_arm(const struct nc_region_ring *r, struct nc_region_cons *cons, uint32_t tail)
{
	__atomic_store_n(&cons->want_wakeup, 1, __ATOMIC_RELAXED);
	/* Full fence: the worker has one between its enqueue and its look at the flag. */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	return __atomic_load_n(&r->head, __ATOMIC_ACQUIRE) == tail ? 0 : 1;
}

NC_EXPORT int
nc_client_arm(struct nc_client *c)
{
	int fd = nc_client_fd(c);

	if (fd < 0)
		return fd;
	return ring_arm(c->rg.rx_all, c->rg.rx_all_cons, c->rg.rx_tail);
}

NC_EXPORT int
nc_channel_arm(struct nc_channel *ch)
{
	int fd;

	if (ch != NULL && ch->one_ring)
		return nc_client_arm(ch->client);
	if (ch == NULL || (ch->rx == NULL && ch->ring == NULL))
		return -EINVAL;
	fd = nc_channel_fd(ch);
	if (fd < 0)
		return fd;
	if (ch->ring != NULL)
		return ring_arm(ch->ring, ch->cons, ch->rx_tail);
	__atomic_store_n(&ch->dir->want_wakeup, 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	return zc->ring_empty(ch) ? 0 : 1;
}

NC_EXPORT int
nc_channel_arm_tx(struct nc_channel *ch)
{
	struct region *g;
	uint32_t used;
	int fd;

	if (ch == NULL || !ch->can_tx)
		return -EINVAL;
	g = &ch->client->rg;
	if (g->base == NULL)
		return -EOPNOTSUPP;
	/* An older daemon never looks at the flag: the client would sleep for good. */
	if (ch->client->hello.version < 6) {
		nc__reason("a wake-up for transmit room needs control protocol 6; the daemon "
			   "speaks %u", ch->client->hello.version);
		return -EOPNOTSUPP;
	}
	fd = nc_channel_fd(ch);
	if (fd < 0)
		return fd;
	/* Which channel's fd to signal: the daemon checks that it is one of ours. */
	__atomic_store_n(&g->tx->cons.want_wakeup, ch->id + 1, __ATOMIC_RELAXED);
	/* Full fence: the daemon has one between its consumer index and its look at the flag. */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	used = g->tx_head - __atomic_load_n(&g->tx->cons.tail, __ATOMIC_ACQUIRE) + g->tx_pending;
	return used < g->h.tx_size ? 1 : 0;
}

/* One buffer of channel ch, or (ch NULL) of any channel of a one-ring client. */
static uint16_t
take_one(struct nc_client *c, struct nc_channel *ch, struct nc_buf *b)
{
	return ch != NULL ? nc_rx_bufs(ch, b, 1) : nc_client_rx_bufs(c, b, 1);
}

/*
 * The next frame of an isolated channel (or, ch NULL, of a one-ring
 * client), copied out and its buffers given back: its length (what did not
 * fit in len is cut), 0 if none is waiting, or -ESTALE. The daemon puts all
 * of a frame's buffers on the ring at once.
 */
static ssize_t
recv_region(struct nc_client *c, struct nc_channel *ch, void *buf, size_t len, uint32_t *channel)
{
	struct nc_buf b;
	size_t total = 0;
	uint32_t more;

	if (take_one(c, ch, &b) != 1)
		return errno == ESTALE ? -ESTALE : 0;
	if (channel != NULL)
		*channel = b.channel;
	do {
		more = b.flags & NC_BUF_F_MORE;
		if (total < len)
			memcpy((uint8_t *)buf + total, b.data, b.len < len - total ? b.len : len - total);
		total += b.len;
		nc_bufs_release(c, &b, 1);
	} while (more && take_one(c, ch, &b) == 1);
	return (ssize_t)total;
}

/* nc_recv() of channel ch, or nc_client_recv() (ch NULL): the same wait. */
static ssize_t
recv_wait(struct nc_client *c, struct nc_channel *ch, void *buf, size_t len, uint32_t *channel,
	  int timeout_ms)
{
	uint64_t deadline = timeout_ms > 0 ? now_ms() + (uint64_t)timeout_ms : 0;
	const int *efd = ch != NULL ? &ch->efd : &c->rg.efd;

	for (;;) {
		struct pollfd p[2] = { { .fd = *efd, .events = POLLIN },
				       { .fd = c->fd, .events = POLLIN } };
		uint64_t v;
		int wait, ret;

		errno = 0;
		if (ch == NULL || ch->ring != NULL) {
			ssize_t got = recv_region(c, ch, buf, len, channel);

			if (got != 0)
				return got;
		}
		if (ch != NULL && ch->rx != NULL) {
			ssize_t n = zc->recv_one(ch, buf, len);

			if (n >= 0 || n == -ESTALE)
				return n;
		}
		if (c->gone)
			return -c->gone;
		if (timeout_ms == 0)
			return -EAGAIN;
		ret = ch != NULL ? nc_channel_arm(ch) : nc_client_arm(c);
		if (ret < 0)
			return ret;
		if (ret > 0)
			continue;              /* a packet came in meanwhile */
		wait = timeout_ms < 0 ? -1 : (int)(deadline > now_ms() ? deadline - now_ms() : 0);
		if (wait == 0 && timeout_ms > 0)
			return -EAGAIN;
		/* Asleep until the worker signals, the timeout, or the daemon hangs up. */
		p[0].fd = *efd;            /* the first arm may just have asked for it */
		if (poll(p, 2, wait) < 0 && errno != EINTR)
			return -errno;
		if (p[1].revents & (POLLHUP | POLLERR | POLLIN))
			return -gone_now(c);
		if (p[0].revents & POLLIN && read(*efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
			return -errno;
	}
}

NC_EXPORT ssize_t
nc_recv(struct nc_channel *ch, void *buf, size_t len, int timeout_ms)
{
	if (ch->one_ring)
		return -EOPNOTSUPP;
	return recv_wait(ch->client, ch, buf, len, NULL, timeout_ms);
}

NC_EXPORT ssize_t
nc_client_recv(struct nc_client *c, void *buf, size_t len, uint32_t *channel, int timeout_ms)
{
	if (c->rg.rx_all == NULL)
		return -EOPNOTSUPP;
	return recv_wait(c, NULL, buf, len, channel, timeout_ms);
}

NC_EXPORT int
nc_channel_tx_mac(const struct nc_channel *ch, uint8_t mac[6])
{
	if (!ch->can_tx)
		return -EINVAL;
	memcpy(mac, ch->tx_mac, 6);
	return 0;
}

NC_EXPORT uint32_t
nc_channel_id(const struct nc_channel *ch)
{
	return ch->id;
}

NC_EXPORT int
nc_cli(struct nc_client *c, const char *line, int json, char **out)
{
	return nc_cli_fd(c, line, json, out, NULL);
}

NC_EXPORT int
nc_cli_fd(struct nc_client *c, const char *line, int json, char **out, int *fd)
{
	size_t n = line ? strlen(line) : 0;
	uint8_t body[sizeof(struct nc_ctl_cli) + 1024];
	struct nc_ctl_cli *m = (struct nc_ctl_cli *)body;
	int ret;

	*out = NULL;
	if (fd != NULL)
		*fd = -1;
	if (c == NULL || line == NULL || n >= 1024)
		return -EINVAL;
	m->flags = json ? NC_CLI_F_JSON : 0;
	memcpy(m->line, line, n);
	last_len = 0;
	ret = call_fd(c, NC_CTL_CLI, body, (uint32_t)(sizeof(*m) + n), NULL, 0, fd);
	if (ret == -EPIPE || ret == -ETIMEDOUT || ret == -EBADMSG)
		return ret;
	*out = malloc(last_len + 1);
	if (*out == NULL)
		return -ENOMEM;
	memcpy(*out, last_body, last_len);
	(*out)[last_len] = '\0';
	return ret;
}

int
nc__rule_flow(struct nc_rule *r, const char *proto, const char *dst, long dport)
{
	static const struct { const char *name; uint8_t num; } protos[] = {
		{ "tcp", 6 }, { "udp", 17 }, { "udplite", 136 }, { "sctp", 132 },
	};
	char addr[INET6_ADDRSTRLEN + 8], *slash, *end;
	long v;

	*r = (struct nc_rule){ .size = sizeof(*r) };
	if (proto == NULL || dport < 0 || dport > 65535)
		return -EINVAL;
	r->proto_mask = 0xff;
	v = strtol(proto, &end, 10);
	if (*proto != '\0' && *end == '\0' && v >= 0 && v <= 255) {
		r->proto = (uint8_t)v;
	} else {
		size_t i;

		for (i = 0; i < DIM(protos) && strcmp(proto, protos[i].name) != 0; i++)
			;
		if (i == DIM(protos))
			return -EINVAL;
		r->proto = protos[i].num;
	}
	r->dport = (struct nc_port){ (uint16_t)dport, (uint16_t)dport, NC_PORT_RANGE, 0 };
	if (dst == NULL)
		return 0;
	if (strlen(dst) >= sizeof(addr))
		return -EINVAL;
	strcpy(addr, dst);
	slash = strchr(addr, '/');
	if (slash != NULL)
		*slash++ = '\0';
	r->family = strchr(addr, ':') ? NC_AF_INET6 : NC_AF_INET;
	if (inet_pton(r->family == NC_AF_INET6 ? AF_INET6 : AF_INET, addr, r->dst) != 1)
		return -EINVAL;
	v = r->family == NC_AF_INET6 ? 128 : 32;
	if (slash != NULL) {
		long len = strtol(slash, &end, 10);

		if (*slash == '\0' || *end != '\0' || len < 0 || len > v)
			return -EINVAL;
		v = len;
	}
	r->dst_len = (uint8_t)v;
	return 0;
}

/* nc_rule_flow() of NETCHANNEL_0.4: into a struct nc_rule, as far as its size covers. */
NC_EXPORT int
nc_rule_flow_v04(struct nc_rule *r, const char *proto, const char *dst, long dport)
{
	const size_t needed = offsetof(struct nc_rule, dport) + sizeof(r->dport);
	struct nc_rule all;
	uint32_t size;
	int ret;

	memcpy(&size, r, sizeof(size));
	if (size < needed)
		return -EINVAL;
	ret = nc__rule_flow(&all, proto, dst, dport);
	if (ret != 0)
		all = (struct nc_rule){ .size = sizeof(all) };
	nc__sized_out(r, &all, sizeof(all));
	return ret;
}
NC_SYMVER_DEFAULT(nc_rule_flow_v04, nc_rule_flow, "NETCHANNEL_0.4");

/*
 * A new daemon's channels for the handles: each owned one created again from
 * its request, each static one attached again. @return 0, or the first
 * failure's -errno (that handle's calls fail with it from then on).
 */
static int
channels_again(struct nc_client *c)
{
	int first = 0;

	for (struct nc_channel *ch = c->channels; ch != NULL; ch = ch->next) {
		struct nc_ctl_channel info;
		int ret = ch->owned ?
			create_request(c, ch->name, &ch->rule, ch->has_opts ? &ch->opts : NULL,
				       ch->has_nat ? &ch->nat : NULL,
				       ch->has_meter ? &ch->meter : NULL, &info) :
			attach_request(c, ch->name, &info);

		if (ret == 0 && channel_fill(c, ch, &info) != 0)
			ret = -errno;
		if (ret != 0) {
			ch->lost = -ret;
			ch->can_tx = 0;
			if (first == 0)
				first = ret;
		}
	}
	return first;
}

NC_EXPORT int
nc_reconnect(struct nc_client *c, int timeout_ms)
{
	uint64_t deadline = timeout_ms < 0 ? UINT64_MAX : now_ms() + (uint64_t)timeout_ms;
	int ret;

	last_reason[0] = '\0';
	if (c == NULL)
		return -EINVAL;
	/* EAL starts once in a process: a zero-copy client starts again instead (exec). */
	if (c->flags & NC_CONNECT_ZEROCOPY)
		return -EOPNOTSUPP;
	/* What the old daemon gave: its socket, its region, its eventfds. */
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	if (c->rg.efd >= 0)
		close(c->rg.efd);
	free(c->rg.gen);
	region_unmap(&c->rg);
	c->rg = (struct region){ .efd = -1 };
	for (struct nc_channel *ch = c->channels; ch != NULL; ch = ch->next) {
		if (ch->efd >= 0)
			close(ch->efd);
		ch->efd = -1;
		ch->ring = NULL;
		ch->cons = NULL;
	}
	c->gone = 0;
	c->next_check = 0;
	/*
	 * A new daemon: until one says HELLO, or the time is up. Until then the
	 * socket may be gone (ENOENT), stale (ECONNREFUSED), or still the old
	 * daemon's as it stops, which takes a connection and then drops it
	 * (EPIPE, ECONNRESET) or never answers (ETIMEDOUT): all of them mean "not
	 * yet". Anything else (a refusal: EPERM, EPROTO, ...) is the answer.
	 */
	for (;;) {
		ret = connect_once(c);
		if (ret == 0)
			break;
		if (c->fd >= 0)
			close(c->fd);
		c->fd = -1;
		region_unmap(&c->rg);
		c->gone = EPIPE;
		if (ret != -ENOENT && ret != -ECONNREFUSED && ret != -EPIPE && ret != -ECONNRESET &&
		    ret != -ETIMEDOUT)
			return ret;
		if (now_ms() >= deadline) {
			nc__reason("no daemon answered on %s in %d ms (the last try: %s)", c->path,
				   timeout_ms, strerror(-ret));
			return -ETIMEDOUT;
		}
		c->gone = 0;
		usleep(RECONNECT_POLL_MS * 1000);
	}
	return channels_again(c);
}

NC_EXPORT const char *
nc_strerror(int err)
{
	const char *s;

	if (err < 0)
		err = -err;
	switch (err) {
	case EPERM: return "not allowed by the daemon's control.allow";
	case EBUSY: return "another channel has the same rule and priority, or another client is "
			   "attached to the channel";
	case EEXIST: return "a channel with that name exists";
	case EPIPE: return "the daemon is gone";
	case ESHUTDOWN: return "the daemon is stopping (a clean stop: nc_reconnect() once a new one "
			       "runs)";
	case ENOSPC: return "the daemon is busy (every connection slot is taken) or full (every "
			    "channel)";
	case EPROTO: return "protocol error (version mismatch, or HELLO missing)";
	case ENOSYS: return "zero-copy needs libnetchannel_zc (pkg-config libnetchannel-zc)";
	case EDQUOT: return "over one of the user's limits (the daemon's control.limits)";
	case ESTALE: return "the channel is gone (destroyed by the operator)";
	case EADDRINUSE: return "another user's channel has these flows (at this priority or "
				"a lower one)";
	}
	s = strerrordesc_np(err);
	return s ? s : "unknown error";
}

NC_EXPORT int
nc_client_info(const struct nc_client *c, struct nc_client_info *info)
{
	struct nc_client_info all;

	if (c == NULL)
		return -EINVAL;
	all = (struct nc_client_info){
		.size = sizeof(all), .control_protocol = c->hello.version,
		.daemon_min_protocol = c->hello.min_version,
		.daemon_max_protocol = c->hello.max_version,
		.region_layout = c->rg.base != NULL ? c->rg.layout : 0,
	};
	memcpy(all.daemon_build, c->hello.build, sizeof(all.daemon_build));
	return nc__sized_out(info, &all, sizeof(all));
}

NC_EXPORT const char *
nc_last_reason(void)
{
	return last_reason;
}

NC_EXPORT const char *
nc_version(void)
{
	return NC_PROJECT_VERSION " (" NC_GIT_DESCRIBE ")";
}
