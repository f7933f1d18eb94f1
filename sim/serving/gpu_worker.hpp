// GpuWorker: one GPU's compute timeline. It runs queued jobs (prefill, token
// replay, RISK-KV reconstruction, ProxyKV scoring) ahead of decoding, and
// decodes its batch with continuous batching in *epochs*: while the batch does
// not change, k steps of equal duration run as one event (k is capped so the
// step time follows the growing context and replica streams keep their
// granularity). A job or a batch change interrupts an epoch at the next step
// boundary, so a recovery never waits for a whole epoch. The worker keeps at
// most one pending event of its own.
// With growth booking on (preemption), each decode pass first asks its owner to
// book the KV the batch grows by; the owner may preempt requests to make room.
// Leaves out: multi-GPU tensor parallelism.
#pragma once

#include <boost/container/small_vector.hpp>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "sim/serving/results.hpp"
#include "sim/serving/serving_costs.hpp"
#include "sim/simulator.hpp"

namespace kvshift::sim {

/// kRecompute: a preempted request's prompt and produced tokens, prefilled again.
enum class JobKind { kPrefill, kReplay, kReconstruct, kProxyScore, kRecompute };

constexpr const char* job_kind_name(JobKind k) {
  switch (k) {
    case JobKind::kPrefill:
      return "prefill";
    case JobKind::kReplay:
      return "replay";
    case JobKind::kReconstruct:
      return "reconstruct";
    case JobKind::kProxyScore:
      return "proxy_score";
    case JobKind::kRecompute:
      return "recompute";
  }
  return "?";
}

/// A unit of GPU work. Reconstruct jobs queued together run as one batched GEMM.
struct GpuJob {
  JobKind kind = JobKind::kPrefill;
  std::uint64_t request = 0;
  std::int64_t tokens = 0;
  std::function<void(SimTime start, SimTime end)> done;  ///< called when the job ends
  /// Replay, or a prefill on a cached prefix: tokens whose KV is in place, attended to.
  std::int64_t prefix = 0;
  /// Chunked: when its first chunk began (-1: not begun); `done` gets it as the start.
  std::int64_t started_ns = -1;
};

/// A request in the decode batch.
struct DecodeState {
  std::uint64_t request = 0;
  std::int64_t context = 0;    ///< KV tokens held
  std::int64_t remaining = 0;  ///< output tokens still to produce
};

/// What the worker tells its owner.
class GpuListener {
 public:
  virtual ~GpuListener() = default;
  /// `steps` tokens were produced for each request of `batch` (their states are already advanced;
  /// those that finished are still in it). It must not add or remove work on this GPU.
  virtual void on_decoded(int gpu, std::span<const DecodeState> batch, std::int64_t steps) = 0;
  /// `request` produced its last token.
  virtual void on_finished(int gpu, std::uint64_t request) = 0;
  /// With growth booking on, before a decode pass of up to `steps` steps: books the KV that
  /// `batch` grows by and returns the steps booked (at least 1 unless every request left),
  /// after preempting (taking off this GPU, its bookings given back) the requests it names in
  /// `preempt`, of the batch or of those waiting for a slot, when the rest would not fit
  /// otherwise. It must not add work to this GPU.
  virtual std::int64_t book_growth(int gpu, std::span<const DecodeState> batch, std::int64_t steps,
                                   std::vector<std::uint64_t>& preempt) {
    (void)gpu, (void)batch, (void)preempt;
    return steps;
  }
};

class GpuWorker {
 public:
  GpuWorker(Simulator& sim, GpuListener& listener, const ServingCosts& costs, int index,
            std::string track, int max_batch, std::int64_t epoch_cap_steps, GpuTime& gpu_time,
            std::vector<TraceSpan>* trace);

  int index() const { return index_; }
  /// Whether queued reconstructions merge into one GEMM (default true).
  void set_batch_reconstructions(bool on) { batch_reconstructions_ = on; }
  /// Chunked prefill: prefills and replays run `tokens` at a time (0: whole), and each chunk
  /// carries one decode step of the batch in the same pass, as vLLM's scheduler mixes them.
  void set_prefill_chunk(std::int64_t tokens) { chunk_ = tokens; }
  /// Preemption: each decode pass asks the listener to book the batch's growth first.
  void set_growth_booking(bool on) { growth_booking_ = on; }
  bool up() const { return up_; }

  /// The end of the run: busy time is counted up to here, never past it.
  void set_horizon(SimTime end) { horizon_ = end; }

  /// Queues a job; it runs before further decode steps.
  void submit(GpuJob job);
  /// Drops `request`'s queued jobs (a move that ended). A job already running finishes
  /// (its kernel is launched); its owner ignores the result.
  void cancel_jobs(std::uint64_t request);
  /// Adds a request to the decode batch (it joins at the next step boundary).
  void add_decoding(DecodeState state);
  /// Takes a request out of the batch (a migration); its state counts the steps done so far.
  std::optional<DecodeState> remove_decoding(std::uint64_t request);
  /// The GPU fails: all work is dropped. Returns the requests it held (decoding or queued).
  /// The decode steps that ended before the failure count (their tokens reached the client);
  /// the step in flight is lost.
  std::vector<std::uint64_t> fail();
  /// The GPU is back, empty.
  void repair();

  /// Time until a job submitted now would start (the step in flight plus queued jobs), estimated.
  SimTime backlog() const;
  std::size_t decoding() const { return batch_.size() + waiting_.size(); }
  std::size_t queued_jobs() const { return jobs_.size(); }

 private:
  void kick();
  void next_iteration();
  void start_job();
  void start_epoch(std::int64_t cap);
  /// Growth booking: the steps (≤ `steps`) the listener booked for the batch, after the
  /// requests it preempted left the batch (refilled from those waiting); the batch may be empty.
  std::int64_t book_batch(std::int64_t steps);
  /// The job's next chunk (the whole job unless chunked prefill splits it).
  GpuJob next_chunk(const GpuJob& job) const;
  void end_epoch();
  void interrupt_epoch();
  /// The batch made `k` steps: its states advance, the listener hears, the finished leave.
  void advance_batch(std::int64_t k);
  /// At a failure: the steps of the epoch in flight that have ended advance the batch.
  void credit_steps_done();
  void fill_batch();
  SimTime job_duration(const GpuJob& job, std::int64_t* batch_requests) const;
  void record(const char* name, SimTime start, SimTime length);
  /// Busy time of a span, clipped to the horizon.
  std::int64_t busy_ns(SimTime start, SimTime length) const;
  std::int64_t* busy_counter(JobKind kind);

  // Ordered by use: an epoch's end reads the first four cache lines and little else (a
  // fleet run ends each GPU's epoch long after it last touched that GPU).
  Simulator& sim_;
  GpuListener& listener_;
  const ServingCosts& costs_;
  GpuTime& gpu_time_;
  std::vector<TraceSpan>* trace_;
  std::size_t max_batch_;
  std::int64_t epoch_cap_;
  SimTime horizon_ = SimTime::max();
  // The epoch in flight.
  EventId epoch_event_{};
  SimTime epoch_start_{};
  SimTime step_{};
  std::int64_t epoch_steps_ = 0;
  int index_;
  bool in_epoch_ = false;
  bool busy_ = false;
  bool up_ = true;
  bool mixed_ = false;  ///< the job in flight carries one decode step of the batch
  /// Decoding now; a small batch lives in the worker itself (one cache miss less an epoch).
  boost::container::small_vector<DecodeState, 4> batch_;
  std::vector<std::uint64_t> finished_;  ///< end_epoch's scratch: who finished
  std::deque<DecodeState> waiting_;      ///< admitted, waiting for a batch slot
  std::deque<GpuJob> jobs_;
  // The job (or batch of reconstructions) in flight.
  std::vector<GpuJob> running_jobs_;
  EventId job_event_{};
  SimTime job_end_{};
  std::int64_t chunk_ = 0;
  std::int64_t running_chunk_ = 0;  ///< tokens of the chunk in flight (0: a whole job)
  bool chunk_cancelled_ = false;    ///< its job was cancelled: no further chunks
  bool batch_reconstructions_ = true;
  bool growth_booking_ = false;
  std::vector<std::uint64_t> preempt_;  ///< book_batch's scratch
  std::string track_;
};

}  // namespace kvshift::sim
