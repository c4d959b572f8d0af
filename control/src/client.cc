// The codec service's client: see dlckpt/control/client.h.
#include "dlckpt/control/client.h"

#include <algorithm>
#include <cerrno>

namespace dlckpt::control {
namespace {

bool SameLayout(const std::vector<protocol::RankEntry>& a, const std::vector<protocol::RankEntry>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const auto& x, const auto& y) {
    return x.rank == y.rank && x.node == y.node && x.store == y.store;
  });
}

// A wait for a reply is cut into slices of this length, between which the
// caller's idle function runs.
constexpr int kSliceMs = 50;

}  // namespace

void CodecClient::SetLayout(std::vector<protocol::RankEntry> layout) {
  if (!SameLayout(layout, layout_)) {
    conn_.reset();
    layout_ = std::move(layout);
  }
}

Status CodecClient::Named(const Status& s, std::string_view what) const {
  return s.Prefixed("codec service (rendezvous " + o_.rendezvous + "): " + std::string(what));
}

Status CodecClient::Connect() {
  if (conn_) return Status::OK();
  auto r = protocol::ReadRendezvous(o_.rendezvous, o_.rendezvous_wait_ms);
  if (!r.ok()) return r.status().Prefixed("codec service");
  if (!o_.job.empty() && r->job != o_.job) {
    return Status::InvalidArgument("the codec service of " + o_.rendezvous + " serves job " + r->job +
                                   ", not job " + o_.job);
  }
  auto conn = protocol::Connection::Connect(r->host, r->port, o_.connect_timeout_ms);
  if (!conn.ok()) return Named(conn.status(), "connect");
  protocol::Hello h;
  h.token = r->token;
  h.role = o_.role;
  h.job = r->job;
  h.layout = layout_;
  auto f = (*conn)->Call(protocol::MsgType::kHello, protocol::EncodeHello(h), o_.hello_timeout_ms);
  if (!f.ok()) return Named(f.status(), "HELLO");
  if (f->type != protocol::MsgType::kHelloOk) {
    return Status::Error(EPROTO, "codec service answered HELLO with " +
                                     std::string(protocol::MsgTypeName(f->type)));
  }
  conn_ = std::move(*conn);
  job_ = r->job;
  return Status::OK();
}

Status CodecClient::Send(protocol::MsgType type, std::string_view payload, std::string_view what) {
  Status connected = Connect();
  if (!connected.ok()) return connected.Prefixed(std::string(what));
  Status s = conn_->Send(type, payload);
  if (!s.ok()) {
    conn_.reset();
    return Named(s, what);
  }
  return Status::OK();
}

Result<protocol::Frame> CodecClient::Receive(std::string_view what, int timeout_ms, const IdleFn& idle,
                                             bool keep_on_timeout) {
  if (!conn_) return Status::Error(ENOTCONN, "codec service: " + std::string(what) + ": not connected");
  // Wait in slices when the caller has work to do meanwhile.
  int left = timeout_ms;
  for (;;) {
    int slice = !idle ? left : (left < 0 ? kSliceMs : std::min(left, kSliceMs));
    Result<protocol::Frame> f = conn_->Receive(slice);
    if (!f.ok() && f.status().code() == ETIMEDOUT && idle && (left < 0 || left > slice)) {
      if (left > 0) left -= slice;
      Status busy = idle();
      if (!busy.ok()) {
        conn_.reset();
        return busy.Prefixed(std::string(what));
      }
      continue;
    }
    if (!f.ok()) {
      if (!(keep_on_timeout && f.status().code() == ETIMEDOUT)) conn_.reset();
      return Named(f.status(), what);
    }
    if (f->type == protocol::MsgType::kError) {
      auto e = protocol::DecodeError(f->payload);
      if (!e.ok()) {
        conn_.reset();
        return Named(e.status(), what);
      }
      return Status::Error(e->code > 0 ? e->code : EPROTO, "codec service: " + std::string(what) +
                                                               ": refused: " + e->message);
    }
    return f;
  }
}

Result<protocol::Frame> CodecClient::Call(protocol::MsgType type, std::string_view payload,
                                          std::string_view what, int timeout_ms, const IdleFn& idle) {
  awaiting_ = 0;
  DLCKPT_RETURN_IF_ERROR(Send(type, payload, what));
  return Receive(what, timeout_ms, idle, false);
}

Result<protocol::Done> CodecClient::ToDone(Result<protocol::Frame> f, std::string_view what) {
  DLCKPT_RETURN_IF_ERROR(f.status());
  if (f->type != protocol::MsgType::kDone) {
    conn_.reset();
    return Status::Error(EPROTO, "codec service: " + std::string(what) + ": answered with " +
                                     protocol::MsgTypeName(f->type));
  }
  auto d = protocol::DecodeDone(f->payload);
  if (!d.ok()) {
    conn_.reset();
    return Named(d.status(), what);
  }
  if (d->code != 0) return Status::Error(d->code, "codec service: " + std::string(what) + ": " + d->message);
  return *d;
}

Result<protocol::Done> CodecClient::CallDone(protocol::MsgType type, std::string_view payload,
                                             std::string_view what, int timeout_ms, const IdleFn& idle) {
  return ToDone(Call(type, payload, what, timeout_ms, idle), what);
}

Status CodecClient::StartEncode(uint64_t epoch, uint64_t keep) {
  awaiting_ = 0;
  DLCKPT_RETURN_IF_ERROR(Send(protocol::MsgType::kEncode, protocol::EncodeEncode({epoch, keep}),
                              "encode of epoch " + std::to_string(epoch)));
  awaiting_ = epoch;
  return Status::OK();
}

EncodeOutcome CodecClient::AwaitEncode(uint64_t epoch, int timeout_ms, bool keep_waiting) {
  const std::string what = "encode of epoch " + std::to_string(epoch);
  EncodeOutcome out;
  if (awaiting_ != epoch) {
    out.status = Status::InvalidArgument("codec service: " + what + ": no such encode was started");
    return out;
  }
  auto d = ToDone(Receive(what, timeout_ms, {}, keep_waiting), what);
  if (!d.ok() && keep_waiting && d.status().code() == ETIMEDOUT && conn_) {
    out.status = d.status();
    out.running = true;
    return out;
  }
  awaiting_ = 0;
  if (!d.ok()) {
    out.status = d.status();
    // Sent, and the connection dropped without a definite answer.
    out.unknown = !conn_;
    return out;
  }
  if (d->epoch != epoch) {
    conn_.reset();
    out.status = Status::Error(EPROTO, "codec service: " + what + ": answered for epoch " +
                                           std::to_string(d->epoch));
    out.unknown = true;
  }
  return out;
}

EncodeOutcome CodecClient::Encode(uint64_t epoch, uint64_t keep, int timeout_ms) {
  EncodeOutcome out;
  out.status = StartEncode(epoch, keep);
  if (!out.status.ok()) return out;
  return AwaitEncode(epoch, timeout_ms);
}

Result<protocol::SurveyReply> CodecClient::Survey(int timeout_ms, const IdleFn& idle) {
  DLCKPT_ASSIGN_OR_RETURN(protocol::Frame f, Call(protocol::MsgType::kSurvey, "", "survey", timeout_ms, idle));
  if (f.type != protocol::MsgType::kSurveyReply) {
    conn_.reset();
    return Status::Error(EPROTO, std::string("survey: unexpected reply ") + protocol::MsgTypeName(f.type));
  }
  return protocol::DecodeSurveyReply(f.payload);
}

Result<protocol::Done> CodecClient::Recover(const protocol::Recover& plan, int timeout_ms, const IdleFn& idle) {
  return CallDone(protocol::MsgType::kRecover, protocol::EncodeRecover(plan), "recover", timeout_ms, idle);
}

Status CodecClient::Shutdown(int timeout_ms) {
  if (!conn_) return Status::OK();
  auto d = CallDone(protocol::MsgType::kShutdown, "", "shutdown", timeout_ms, {});
  conn_.reset();
  return d.status();
}

}  // namespace dlckpt::control
