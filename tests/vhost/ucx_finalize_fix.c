/* libdlckpt_vhost_ucxfix.so — an LD_PRELOAD fix for MPI_Finalize hanging with MPICH 4.0.2
 * (ch4:ucx) over UCX 1.13 TCP, between hosts or on one host with UCX_TLS=tcp.
 *
 * The hang, reproduced here with 2..6 ranks every time over TCP:
 *   MPICH's UCX finalize hook closes every endpoint with ucp_disconnect_nb() (a flush-mode
 *   close), progresses the UCX worker until all those requests complete, then enters a PMI
 *   barrier (a blocking read() on the PMI socket, PMI_FD) that no longer progresses UCX.
 *   Over TCP, the flush of an endpoint needs its peer to progress its worker (UCX waits for
 *   the peer's answer before the close completes). A rank whose closes complete first sits in
 *   the PMI barrier; a peer still closing its endpoint to that rank then waits forever,
 *   spinning in ucp_worker_progress(), and the job never ends. (UCX over shared memory does
 *   not need the peer, which is why jobs on one host finish.)
 *
 * The fix: keep MPICH's graceful close, and keep the worker progressing while a rank waits in
 * that barrier. Once an endpoint close has started (MPICH is finalizing), a read() on the PMI
 * socket first waits for it to become readable with poll() in 1 ms slices, calling
 * ucp_worker_progress() on every live worker between slices; then it reads. Peers' flushes are
 * answered, every close completes, the barrier completes. Nothing spins: the thread sleeps in
 * poll(). (Skipping ucp_disconnect_nb() altogether also ends the hang, but drops the flush, so
 * bytes still queued in UCX at finalize could be lost; this fix loses nothing.)
 *
 * Contract:
 *   - Interposes ucp_worker_create/ucp_worker_destroy (to know the live workers, at most
 *     kMaxWorkers), ucp_disconnect_nb/ucp_ep_close_nb/ucp_ep_close_nbx (to know finalization
 *     has begun; each calls the real function unchanged) and read() (only reads on the fd named
 *     by PMI_FD, only after a close began, only while a worker is alive, are changed).
 *   - Finds the real functions with dlsym(RTLD_NEXT); it does not link libucp, so preloading it
 *     into a process without UCX changes nothing.
 *   - Meant for MPICH's default single-threaded use of UCX during MPI_Finalize: it progresses
 *     workers from the thread that called read(), as MPICH itself does; it is not safe if
 *     another thread drives the same workers at that time.
 *   - If poll() fails (other than EINTR), it stops helping and lets read() proceed.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <unistd.h>
#include <ucp/api/ucp.h>

enum { kMaxWorkers = 16 };

static ucp_worker_h g_workers[kMaxWorkers];
static int g_closing;    /* set once an endpoint close has started */
static int g_pmi_fd = -2; /* -2: not looked up yet; -1: none */

static void* real_fn(const char* name) { return dlsym(RTLD_NEXT, name); }

static int pmi_fd(void) {
  if (g_pmi_fd == -2) {
    const char* s = getenv("PMI_FD");
    char* end = NULL;
    long v = s ? strtol(s, &end, 10) : -1;
    g_pmi_fd = (s && *s && end && *end == '\0' && v >= 0 && v < 1 << 20) ? (int)v : -1;
  }
  return g_pmi_fd;
}

ucs_status_t ucp_worker_create(ucp_context_h context, const ucp_worker_params_t* params,
                               ucp_worker_h* worker_p) {
  ucs_status_t (*real)(ucp_context_h, const ucp_worker_params_t*, ucp_worker_h*) =
      (ucs_status_t(*)(ucp_context_h, const ucp_worker_params_t*, ucp_worker_h*))real_fn(
          "ucp_worker_create");
  if (real == NULL) return UCS_ERR_UNSUPPORTED;
  ucs_status_t status = real(context, params, worker_p);
  if (status == UCS_OK) {
    for (int i = 0; i < kMaxWorkers; ++i) {
      if (g_workers[i] == NULL) {
        g_workers[i] = *worker_p;
        break;
      }
    }
  }
  return status;
}

void ucp_worker_destroy(ucp_worker_h worker) {
  void (*real)(ucp_worker_h) = (void (*)(ucp_worker_h))real_fn("ucp_worker_destroy");
  for (int i = 0; i < kMaxWorkers; ++i) {
    if (g_workers[i] == worker) g_workers[i] = NULL;
  }
  if (real != NULL) real(worker);
}

ucs_status_ptr_t ucp_disconnect_nb(ucp_ep_h ep) {
  ucs_status_ptr_t (*real)(ucp_ep_h) = (ucs_status_ptr_t(*)(ucp_ep_h))real_fn("ucp_disconnect_nb");
  g_closing = 1;
  return real ? real(ep) : UCS_STATUS_PTR(UCS_ERR_UNSUPPORTED);
}

ucs_status_ptr_t ucp_ep_close_nb(ucp_ep_h ep, unsigned mode) {
  ucs_status_ptr_t (*real)(ucp_ep_h, unsigned) =
      (ucs_status_ptr_t(*)(ucp_ep_h, unsigned))real_fn("ucp_ep_close_nb");
  g_closing = 1;
  return real ? real(ep, mode) : UCS_STATUS_PTR(UCS_ERR_UNSUPPORTED);
}

ucs_status_ptr_t ucp_ep_close_nbx(ucp_ep_h ep, const ucp_request_param_t* param) {
  ucs_status_ptr_t (*real)(ucp_ep_h, const ucp_request_param_t*) =
      (ucs_status_ptr_t(*)(ucp_ep_h, const ucp_request_param_t*))real_fn("ucp_ep_close_nbx");
  g_closing = 1;
  return real ? real(ep, param) : UCS_STATUS_PTR(UCS_ERR_UNSUPPORTED);
}

/* Progresses every live worker until fd is readable; returns when it is, or on error. */
static void progress_until_readable(int fd) {
  unsigned (*progress)(ucp_worker_h) = (unsigned (*)(ucp_worker_h))real_fn("ucp_worker_progress");
  if (progress == NULL) return;
  for (;;) {
    struct pollfd p = {.fd = fd, .events = POLLIN, .revents = 0};
    int n = poll(&p, 1, 1);
    if (n > 0) return;
    if (n < 0 && errno != EINTR) return;
    int any = 0;
    for (int i = 0; i < kMaxWorkers; ++i) {
      if (g_workers[i] != NULL) {
        any = 1;
        while (progress(g_workers[i]) != 0) {
        }
      }
    }
    if (!any) return;
  }
}

ssize_t read(int fd, void* buf, size_t count) {
  static ssize_t (*real)(int, void*, size_t);
  if (real == NULL) {
    real = (ssize_t(*)(int, void*, size_t))real_fn("read");
    if (real == NULL) {
      errno = ENOSYS;
      return -1;
    }
  }
  if (g_closing && fd >= 0 && fd == pmi_fd()) {
    int saved = errno;
    progress_until_readable(fd);
    errno = saved;
  }
  return real(fd, buf, count);
}
