// The dlckpt-codec service: one MPI process per node (data nodes and spares).
//
// Rank 0 listens on TCP, publishes the rendezvous file and serves the
// protocol of dlckpt/control/protocol.h; every command it accepts is broadcast to all
// codec processes and executed collectively:
//   HELLO (application): forms the groups from the application's layout;
//   ENCODE(e): every data node contributes the images of its stores' epoch e
//     (read in place) to the parity of its group, written double-buffered
//     into the group's spare nodes; DONE when every group finished;
//   SURVEY: every node reports its stores and parity objects;
//   RECOVER: every surviving store is restored to the chosen epoch and every
//     lost member is rebuilt on its target node from the survivors and the
//     parity (stores created there, CRC-checked);
//   SHUTDOWN: ends the service (optionally removing the job's objects).
// Idle processes wait in non-blocking MPI calls with sleeps, never spinning.
// Errors of one process are agreed on by all and answered as a DONE/ERROR
// with a message naming the node, group and epoch; the service keeps running.
#ifndef DLCKPT_CODEC_SERVICE_H_
#define DLCKPT_CODEC_SERVICE_H_

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dlckpt/codec/groups.h"
#include "dlckpt/codec/reduce_transport.h"
#include "dlckpt/base/status.h"

namespace dlckpt::codec {

struct ServiceConfig {
  std::string job;
  std::string node;              // this process's node
  std::string rendezvous;        // path of the rendezvous file (rank 0 writes it)
  std::string rendezvous_host;   // address clients connect to ("" = this host's address)
  int port = 0;                  // TCP port (0 = any)
  int group_size = 0;            // data nodes per group (0 = all)
  int spares_per_group = 1;      // k: parity chunks per stripe
  ParityMode parity = ParityMode::kSpares;  // where the parity lives (groups.h)
  std::string scheme = "xor";    // xor | rs
  uint64_t generation = 1;
  bool cleanup_on_shutdown = false;
  ReduceTransport::Options transport;
};

class Service;

// Runs the service until SHUTDOWN (collective over `world`). Returns the
// error that made it stop early, if any.
Status RunService(MPI_Comm world, const ServiceConfig& config);

// One-shot modes, for scripts and operators (collective over `world`, one
// process per node as for the service; no network, no rendezvous):
// encode `epoch` of the job's stores found on the nodes (the layout is what
// the nodes hold), or survey the nodes, decide like dlckpt-run (the newest
// epoch recoverable in every group, or `epoch` if given) and rebuild the
// stores of the `lost` nodes on spare nodes. Rank 0 prints what it did.
Status RunEncodeOnce(MPI_Comm world, const ServiceConfig& config, uint64_t epoch);
Status RunRecoverOnce(MPI_Comm world, const ServiceConfig& config, const std::vector<std::string>& lost,
                      uint64_t epoch);

}  // namespace dlckpt::codec

#endif  // DLCKPT_CODEC_SERVICE_H_
