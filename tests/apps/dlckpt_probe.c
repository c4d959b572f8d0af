/* dlckpt_probe.c — a test double of the dlckpt application API, preloaded
 * (LD_PRELOAD) into a proxy app to check that its weak hooks find and call
 * the API: init once, checkpoint once per checkpoint, finalize once.
 *
 * Each call appends "<rank>:<name>\n" to $DLCKPT_PROBE_LOG (one write with
 * O_APPEND, so lines of different ranks do not mix). The rank comes from
 * the launcher's environment (Hydra's PMI_RANK, Open MPI's
 * OMPI_COMM_WORLD_RANK), so the probe needs no MPI library of its own. With
 * DLCKPT_PROBE_FAIL_AT=N the N-th dlckpt_checkpoint call of each rank fails
 * with EIO and the message "probe: refusing checkpoint N", and
 * dlckpt_restarted_epoch() returns $DLCKPT_PROBE_EPOCH (default 0). Not the real
 * service: nothing is stored or encoded. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dlckpt/dlckpt.h"

static char probe_error[128];
static long probe_checkpoints;

static void probe_log(const char* name) {
  const char* path = getenv("DLCKPT_PROBE_LOG");
  if (path == NULL) return;
  const char* rank = getenv("PMI_RANK");
  if (rank == NULL) rank = getenv("OMPI_COMM_WORLD_RANK");
  char line[64];
  int n = snprintf(line, sizeof line, "%s:%s\n", rank ? rank : "?", name);
  int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return;
  if (write(fd, line, (size_t)n) != n) probe_error[0] = '\0';
  close(fd);
}

int dlckpt_init(MPI_Comm comm) {
  (void)comm;
  probe_log("init");
  return 0;
}

int dlckpt_checkpoint(void) {
  probe_log("checkpoint");
  probe_checkpoints++;
  const char* fail_at = getenv("DLCKPT_PROBE_FAIL_AT");
  if (fail_at != NULL && atol(fail_at) == probe_checkpoints) {
    snprintf(probe_error, sizeof probe_error, "probe: refusing checkpoint %ld", probe_checkpoints);
    errno = EIO;
    return -1;
  }
  return 0;
}

int dlckpt_encode(void) { return dlckpt_checkpoint(); }

/* $DLCKPT_PROBE_EPOCH, as if dlckpt had restored that epoch. */
long long dlckpt_restarted_epoch(void) {
  const char* epoch = getenv("DLCKPT_PROBE_EPOCH");
  return epoch != NULL ? atoll(epoch) : 0;
}

int dlckpt_finalize(void) {
  probe_log("finalize");
  return 0;
}

const char* dlckpt_last_error(void) { return probe_error; }
