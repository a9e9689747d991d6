/* Tries one way of reaching a Unix-domain socket at PATH and sending it
 * MESSAGE, as code inside the process sandbox would; for the process
 * sandbox's tests (compiled with `cc` at test time, no library needed).
 *
 *   unix_socket_probe WAY PATH MESSAGE
 *
 * Prints `sent` (exit 0) when MESSAGE was handed to a socket (the
 * listener says whether it arrived: a connected pair sends to its peer), else
 * `refused at STEP: STRERROR (errno N)` (exit 1). WAY is one of:
 *
 *   socket-stream               socket(AF_UNIX, SOCK_STREAM), connect, write
 *   socket-dgram                socket(AF_UNIX, SOCK_DGRAM), sendto
 *   socketpair-dgram-connect    socketpair(AF_UNIX, SOCK_DGRAM), connect, send
 *   socketpair-dgram-sendto     socketpair(AF_UNIX, SOCK_DGRAM), sendto
 *   socketpair-stream-connect   socketpair(AF_UNIX, SOCK_STREAM), connect, send
 *   socketpair-stream-sendto    socketpair(AF_UNIX, SOCK_STREAM), sendto
 *   socketpair-seqpacket-sendto socketpair(AF_UNIX, SOCK_SEQPACKET), sendto
 *   io-uring-stream             io_uring IORING_OP_SOCKET (AF_UNIX stream), connect, write
 *   io-uring-dgram              io_uring IORING_OP_SOCKET (AF_UNIX datagram), sendto
 *   x32-stream                  socket, connect, write with the x32 bit (x86_64)
 *   x32-dgram                   socket, sendto with the x32 bit (x86_64)
 *   inherited                   every inherited AF_UNIX descriptor: write, sendto
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <linux/io_uring.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#define X32_BIT 0x40000000L
/* IORING_OP_SOCKET (Linux 5.19), by number: older headers lack it. */
#define OP_SOCKET 45

static struct sockaddr_un addr;
static socklen_t addr_len;
static const char *message;

static int refused(const char *step) {
    int e = errno;
    printf("refused at %s: %s (errno %d)\n", step, strerror(e), e);
    return 1;
}

static int sent(void) {
    printf("sent\n");
    return 0;
}

/* connect + write on a stream socket. */
static int stream(int fd) {
    if (connect(fd, (struct sockaddr *)&addr, addr_len) < 0) return refused("connect");
    if (write(fd, message, strlen(message)) < 0) return refused("write");
    return sent();
}

/* sendto on a datagram socket. */
static int dgram(int fd) {
    if (sendto(fd, message, strlen(message), 0, (struct sockaddr *)&addr, addr_len) < 0)
        return refused("sendto");
    return sent();
}

static int pair(int type, int *fd) {
    int fds[2];
    if (socketpair(AF_UNIX, type, 0, fds) < 0) return -1;
    *fd = fds[0];
    return 0;
}

/* An AF_UNIX socket made by io_uring's IORING_OP_SOCKET, without socket(). */
static int io_uring_socket(int type) {
    struct io_uring_params p;
    memset(&p, 0, sizeof p);
    int ring = (int)syscall(__NR_io_uring_setup, 4, &p);
    if (ring < 0) return refused("io_uring_setup");
    size_t sq_len = p.sq_off.array + p.sq_entries * sizeof(unsigned);
    size_t cq_len = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
    char *sq = mmap(0, sq_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, ring,
                    IORING_OFF_SQ_RING);
    char *cq = mmap(0, cq_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, ring,
                    IORING_OFF_CQ_RING);
    struct io_uring_sqe *sqes =
        mmap(0, p.sq_entries * sizeof(struct io_uring_sqe), PROT_READ | PROT_WRITE,
             MAP_SHARED | MAP_POPULATE, ring, IORING_OFF_SQES);
    if (sq == MAP_FAILED || cq == MAP_FAILED || sqes == MAP_FAILED) return refused("mmap");
    unsigned *tail = (unsigned *)(sq + p.sq_off.tail);
    unsigned mask = *(unsigned *)(sq + p.sq_off.ring_mask);
    unsigned index = *tail & mask;
    struct io_uring_sqe *sqe = &sqes[index];
    memset(sqe, 0, sizeof *sqe);
    sqe->opcode = OP_SOCKET;
    sqe->fd = AF_UNIX;
    sqe->off = (unsigned)type;
    sqe->len = 0;
    ((unsigned *)(sq + p.sq_off.array))[index] = index;
    __atomic_store_n(tail, *tail + 1, __ATOMIC_RELEASE);
    if (syscall(__NR_io_uring_enter, ring, 1, 1, IORING_ENTER_GETEVENTS, NULL, 0) < 0)
        return refused("io_uring_enter");
    unsigned *head = (unsigned *)(cq + p.cq_off.head);
    struct io_uring_cqe *cqes = (struct io_uring_cqe *)(cq + p.cq_off.cqes);
    unsigned cq_mask = *(unsigned *)(cq + p.cq_off.ring_mask);
    struct io_uring_cqe *cqe = &cqes[*head & cq_mask];
    if (cqe->res < 0) {
        errno = -cqe->res;
        return refused("IORING_OP_SOCKET");
    }
    int fd = cqe->res;
    return type == SOCK_STREAM ? stream(fd) : dgram(fd);
}

static int x32(int type) {
#if defined(__x86_64__)
    long fd = syscall(__NR_socket | X32_BIT, AF_UNIX, type, 0);
    if (fd < 0) return refused("socket (x32)");
    if (type == SOCK_STREAM) {
        if (syscall(__NR_connect | X32_BIT, fd, &addr, addr_len) < 0)
            return refused("connect (x32)");
        if (syscall(__NR_write | X32_BIT, fd, message, strlen(message)) < 0)
            return refused("write (x32)");
        return sent();
    }
    if (syscall(__NR_sendto | X32_BIT, fd, message, strlen(message), 0, &addr, addr_len) < 0)
        return refused("sendto (x32)");
    return sent();
#else
    (void)type;
    errno = ENOSYS;
    return refused("x32 (not x86_64)");
#endif
}

/* Every inherited descriptor that is an AF_UNIX socket: written to
 * (a connected stream) and sent to PATH (a datagram socket). */
static int inherited(void) {
    int found = 0;
    for (int fd = 3; fd < 4096; fd++) {
        struct stat st;
        if (fstat(fd, &st) < 0 || !S_ISSOCK(st.st_mode)) continue;
        int domain = 0;
        socklen_t len = sizeof domain;
        if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) < 0 || domain != AF_UNIX)
            continue;
        found = 1;
        if (write(fd, message, strlen(message)) >= 0 ||
            sendto(fd, message, strlen(message), 0, (struct sockaddr *)&addr, addr_len) >= 0) {
            printf("sent through descriptor %d\n", fd);
            return 0;
        }
    }
    errno = found ? ENOTCONN : EBADF;
    return refused(found ? "inherited (none reaches)" : "inherited (none)");
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: unix_socket_probe WAY PATH MESSAGE\n");
        return 2;
    }
    const char *way = argv[1];
    memset(&addr, 0, sizeof addr);
    addr.sun_family = AF_UNIX;
    if (strlen(argv[2]) >= sizeof addr.sun_path) {
        fprintf(stderr, "path too long\n");
        return 2;
    }
    strcpy(addr.sun_path, argv[2]);
    addr_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(argv[2]) + 1);
    message = argv[3];
    setvbuf(stdout, NULL, _IONBF, 0);
    int fd;
    if (!strcmp(way, "socket-stream")) {
        if ((fd = socket(AF_UNIX, SOCK_STREAM, 0)) < 0) return refused("socket");
        return stream(fd);
    }
    if (!strcmp(way, "socket-dgram")) {
        if ((fd = socket(AF_UNIX, SOCK_DGRAM, 0)) < 0) return refused("socket");
        return dgram(fd);
    }
    if (!strcmp(way, "socketpair-dgram-connect")) {
        if (pair(SOCK_DGRAM, &fd) < 0) return refused("socketpair");
        if (connect(fd, (struct sockaddr *)&addr, addr_len) < 0) return refused("connect");
        if (send(fd, message, strlen(message), 0) < 0) return refused("send");
        return sent();
    }
    if (!strcmp(way, "socketpair-dgram-sendto")) {
        if (pair(SOCK_DGRAM, &fd) < 0) return refused("socketpair");
        return dgram(fd);
    }
    if (!strcmp(way, "socketpair-stream-connect")) {
        if (pair(SOCK_STREAM, &fd) < 0) return refused("socketpair");
        if (connect(fd, (struct sockaddr *)&addr, addr_len) < 0) return refused("connect");
        if (send(fd, message, strlen(message), 0) < 0) return refused("send");
        return sent();
    }
    if (!strcmp(way, "socketpair-stream-sendto")) {
        if (pair(SOCK_STREAM, &fd) < 0) return refused("socketpair");
        return dgram(fd);
    }
    if (!strcmp(way, "socketpair-seqpacket-sendto")) {
        if (pair(SOCK_SEQPACKET, &fd) < 0) return refused("socketpair");
        return dgram(fd);
    }
    if (!strcmp(way, "io-uring-stream")) return io_uring_socket(SOCK_STREAM);
    if (!strcmp(way, "io-uring-dgram")) return io_uring_socket(SOCK_DGRAM);
    if (!strcmp(way, "x32-stream")) return x32(SOCK_STREAM);
    if (!strcmp(way, "x32-dgram")) return x32(SOCK_DGRAM);
    if (!strcmp(way, "inherited")) return inherited();
    fprintf(stderr, "unknown way %s\n", way);
    return 2;
}
