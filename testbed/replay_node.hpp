// One node of `kvshift replay`: a forked process that serves requests for real
// on the CPU backend, with continuous batching (each iteration: rebuild what
// moved in, then prefill one waiting request while the batch has room, else one
// batched decode step of every running request), and moves requests' KV to
// other nodes over loopback TCP through its Agent (shaped as the scenario's
// path, framed and CRC-checked as in `kvshift testbed`). A move that needs no
// GPU work to be used (full KV, ProxyKV's kept tokens) is unpacked beside the
// loop, on the Agent's compute thread; RISK-KV's reconstruction and replay's
// prefill are the loop's work, queued behind its current iteration.
//
// The coordinator talks to it over its Channel (replay_channel.hpp), one JSON
// object per line. Commands ("op"):
//   admit   {id, epoch, prompt: [ids], output}         a new request
//   resume  {id, epoch, context: [ids], next, remaining} a request whose node failed:
//                                                      rebuilt from its tokens (prefill)
//   move    {id, epoch, to, port, strategy}             ship the request's KV to node `to`
//   drop    {id, epoch}                                 forget it (a stale copy)
//   quality {id, epoch, steps, seed, following: [ids]}  what its move did to its text
//   halt                                                the run is over: serve nothing more
//   stop
// Events ("ev"):
//   ready   {port}                         its Agent listens on 127.0.0.1:port
//   tokens  {items: [[id, epoch, token]...], done: [[id, epoch]...]}  one iteration's tokens
//   landed  {id, epoch, strategy, work, queue_s, decode_s, compute_s, kv_bytes, token_bytes}
//           a moved-in (or resumed) request decodes again
//   sent    {id, epoch, ok, reason, wait_s, prepare_s, transfer_s, bytes}   a move left (or
//           failed): it waited wait_s for the iteration in flight, packed for prepare_s
//   requeue {id, epoch}   a move asked of a request still waiting for its prefill
//   gone    {id, epoch}   a move or quality asked of a request this node no longer holds
//   quality {id, epoch, steps, greedy_agreement, sampled_agreement, delta_nll, text_delta_nll}
// A move's payload is the strategy's (kv_payload.hpp) plus one last segment of JSON
// (layer kMetaLayer): the request's id, epoch, strategy, context ids, next token and the
// tokens it still has to produce.
#pragma once

#include <cstdint>
#include <string>

#include "input/scenario_spec.hpp"
#include "testbed/move_setup.hpp"

namespace kvshift::testbed {

/// The segment layer that marks a move's metadata.
inline constexpr std::uint16_t kMetaLayer = 0xFFFF;

struct NodeConfig {
  std::string name;
  const input::ScenarioSpec* spec = nullptr;
  const MoveSetup* setup = nullptr;
  /// Keep a copy of each moved-in cache for `quality` (the copy is taken off the clock).
  bool keep_moved_caches = true;
  /// Score each prompt for ProxyKV after its prefill, as the simulator's scoring job does
  /// (the run's strategy is ProxyKV), so a move ships at once.
  bool score_prompts = false;
};

/// Serves until told to stop or its channel closes (`control_fd` is the node's end);
/// returns the process's exit code.
int serve_node(const NodeConfig& config, int control_fd);

}  // namespace kvshift::testbed
