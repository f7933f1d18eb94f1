#include "sim/serving/gpu_worker.hpp"

#include <algorithm>
#include <stdexcept>

namespace kvshift::sim {
namespace {

constexpr std::size_t kMaxTraceSpans = 200'000;  // keeps trace.json openable on big runs

}  // namespace

GpuWorker::GpuWorker(Simulator& sim, GpuListener& listener, const ServingCosts& costs, int index,
                     std::string track, int max_batch, std::int64_t epoch_cap_steps,
                     GpuTime& gpu_time, std::vector<TraceSpan>* trace)
    : sim_(sim),
      listener_(listener),
      costs_(costs),
      gpu_time_(gpu_time),
      trace_(trace),
      max_batch_(static_cast<std::size_t>(std::max(max_batch, 1))),
      epoch_cap_(std::max<std::int64_t>(epoch_cap_steps, 1)),
      index_(index),
      track_(std::move(track)) {}

void GpuWorker::submit(GpuJob job) {
  if (!up_) throw std::logic_error("GpuWorker::submit on a failed GPU");
  jobs_.push_back(std::move(job));
  if (in_epoch_) interrupt_epoch();
  kick();
}

void GpuWorker::cancel_jobs(std::uint64_t request) {
  std::erase_if(jobs_, [&](const GpuJob& j) { return j.request == request; });
  // A chunk in flight finishes; the chunks after it do not run.
  if (running_chunk_ > 0 && running_jobs_.front().request == request) chunk_cancelled_ = true;
}

void GpuWorker::add_decoding(DecodeState state) {
  if (!up_) throw std::logic_error("GpuWorker::add_decoding on a failed GPU");
  waiting_.push_back(state);
  if (in_epoch_ && batch_.size() < max_batch_) interrupt_epoch();
  kick();
}

std::optional<DecodeState> GpuWorker::remove_decoding(std::uint64_t request) {
  auto w = std::find_if(waiting_.begin(), waiting_.end(),
                        [&](const DecodeState& s) { return s.request == request; });
  if (w != waiting_.end()) {
    DecodeState s = *w;
    waiting_.erase(w);
    return s;
  }
  auto b = std::find_if(batch_.begin(), batch_.end(),
                        [&](const DecodeState& s) { return s.request == request; });
  if (b == batch_.end()) return std::nullopt;
  DecodeState s = *b;
  if (in_epoch_) {
    // Steps completed so far count for the leaving request; the one in flight does not.
    const std::int64_t done = (sim_.now() - epoch_start_).ns / step_.ns;
    const std::int64_t steps = std::min(done, epoch_steps_);
    s.context += steps;
    s.remaining -= steps;
  }
  batch_.erase(b);
  if (in_epoch_) interrupt_epoch();
  return s;
}

std::vector<std::uint64_t> GpuWorker::fail() {
  std::vector<std::uint64_t> lost;
  up_ = false;  // first: the owner hears of the epoch's last steps from a failed GPU
  if (in_epoch_) credit_steps_done();
  if (!running_jobs_.empty()) {  // the part of the job that will never run is not busy time
    const SimTime now = sim_.now();
    *busy_counter(running_jobs_.front().kind) -= busy_ns(now, job_end_ - now);
  }
  for (const DecodeState& s : batch_) lost.push_back(s.request);
  for (const DecodeState& s : waiting_) lost.push_back(s.request);
  for (const GpuJob& j : jobs_) lost.push_back(j.request);
  for (const GpuJob& j : running_jobs_) lost.push_back(j.request);
  sim_.cancel(epoch_event_);
  sim_.cancel(job_event_);
  batch_.clear();
  waiting_.clear();
  jobs_.clear();
  running_jobs_.clear();
  running_chunk_ = 0;
  mixed_ = false;
  up_ = false;
  busy_ = false;
  in_epoch_ = false;
  std::sort(lost.begin(), lost.end());
  lost.erase(std::unique(lost.begin(), lost.end()), lost.end());
  return lost;
}

void GpuWorker::credit_steps_done() {
  // Capped below the epoch's length: the epoch ends with the first request that finishes, so
  // no request finishes in the steps credited here.
  const std::int64_t k = std::min((sim_.now() - epoch_start_).ns / step_.ns, epoch_steps_ - 1);
  if (k <= 0) return;
  gpu_time_.decode += busy_ns(epoch_start_, SimTime{step_.ns * k});
  record("decode", epoch_start_, SimTime{step_.ns * k});
  for (DecodeState& s : batch_) {
    s.context += k;
    s.remaining -= k;
  }
  listener_.on_decoded(index_, {batch_.data(), batch_.size()}, k);
}

void GpuWorker::repair() { up_ = true; }

SimTime GpuWorker::backlog() const {
  SimTime t{};
  const SimTime now = sim_.now();
  if (!running_jobs_.empty()) {
    t = job_end_ - now;
    if (running_chunk_ > 0 && !chunk_cancelled_) {  // the chunks still to come
      GpuJob rest = running_jobs_.front();
      rest.tokens -= running_chunk_;
      rest.prefix += running_chunk_;
      std::int64_t n = 1;
      t += job_duration(rest, &n);
    }
  } else if (in_epoch_) {
    const std::int64_t elapsed = (now - epoch_start_).ns;
    t = SimTime{step_.ns - elapsed % step_.ns};
  }
  for (const GpuJob& j : jobs_) {
    std::int64_t n = 1;
    t += job_duration(j, &n);
  }
  return t;
}

void GpuWorker::kick() {
  if (!busy_ && up_) next_iteration();
}

void GpuWorker::next_iteration() {
  busy_ = false;
  if (!up_) return;
  if (!jobs_.empty()) {
    start_job();
    return;
  }
  fill_batch();
  if (!batch_.empty()) start_epoch(epoch_cap_);
}

GpuJob GpuWorker::next_chunk(const GpuJob& job) const {
  GpuJob chunk{job.kind, job.request, job.tokens, {}, job.prefix};
  const bool prompt = job.kind == JobKind::kPrefill || job.kind == JobKind::kReplay ||
                      job.kind == JobKind::kRecompute;
  if (prompt && chunk_ > 0) chunk.tokens = std::min(job.tokens, chunk_);
  return chunk;
}

SimTime GpuWorker::job_duration(const GpuJob& job, std::int64_t* batch_requests) const {
  if (GpuJob chunk = next_chunk(job); chunk.tokens < job.tokens) {
    // Chunked: the sum of its chunks, each on the prefix the ones before it left.
    SimTime t{};
    for (std::int64_t done = 0; done < job.tokens; done += chunk.tokens) {
      chunk.prefix = job.prefix + done;
      chunk.tokens = std::min(chunk_, job.tokens - done);
      t += job_duration(chunk, batch_requests);
    }
    return t;
  }
  switch (job.kind) {
    case JobKind::kPrefill:  // on top of a cached prefix, when it has one
    case JobKind::kRecompute:
      return job.prefix > 0 ? costs_.extend(job.prefix, job.tokens) : costs_.prefill(job.tokens);
    case JobKind::kReplay:
      return costs_.extend(job.prefix, job.tokens);
    case JobKind::kReconstruct:
      return costs_.reconstruct(job.tokens, *batch_requests);
    case JobKind::kProxyScore:
      return costs_.proxy_score(job.tokens);
  }
  return {};
}

void GpuWorker::start_job() {
  busy_ = true;
  running_jobs_.clear();
  running_jobs_.push_back(std::move(jobs_.front()));
  jobs_.pop_front();
  const JobKind kind = running_jobs_.front().kind;
  // Reconstructions waiting together share one GEMM over all their rows.
  std::int64_t rows = running_jobs_.front().tokens;
  if (kind == JobKind::kReconstruct && batch_reconstructions_) {
    for (auto it = jobs_.begin(); it != jobs_.end();) {
      if (it->kind == JobKind::kReconstruct) {
        rows += it->tokens;
        running_jobs_.push_back(std::move(*it));
        it = jobs_.erase(it);
      } else {
        ++it;
      }
    }
  }
  std::int64_t n = static_cast<std::int64_t>(running_jobs_.size());
  if (n > 1) ++gpu_time_.batched_reconstructions;
  const SimTime start = sim_.now();
  GpuJob& first = running_jobs_.front();
  if (first.started_ns < 0) first.started_ns = start.ns;
  // Chunked prefill runs the job's next chunk (the rest goes back to the queue's front), and
  // the decode batch rides along for one step in the same pass.
  GpuJob shape = next_chunk(first);
  running_chunk_ = shape.tokens < first.tokens ? shape.tokens : 0;
  chunk_cancelled_ = false;
  if (n > 1) shape.tokens = (rows + n - 1) / n;
  SimTime length = job_duration(shape, &n);
  SimTime prompt_part = length;
  mixed_ = false;
  if (chunk_ > 0 &&
      (kind == JobKind::kPrefill || kind == JobKind::kReplay || kind == JobKind::kRecompute)) {
    fill_batch();
    if (!batch_.empty() && growth_booking_) book_batch(1);
    if (!batch_.empty()) {
      std::int64_t context = 0;
      for (const DecodeState& s : batch_) context += s.context;
      mixed_ = true;
      length = costs_.mixed_step(shape.prefix, shape.tokens,
                                 static_cast<std::int64_t>(batch_.size()), context);
      prompt_part = std::min(prompt_part, length);
    }
  }
  job_end_ = start + length;
  *busy_counter(kind) += busy_ns(start, prompt_part);
  gpu_time_.decode += busy_ns(start + prompt_part, length - prompt_part);
  record(mixed_ ? "prefill+decode" : job_kind_name(kind), start, length);
  job_event_ = sim_.schedule_at(job_end_, [this, start] {
    std::vector<GpuJob> finished = std::move(running_jobs_);
    running_jobs_.clear();
    if (mixed_) {
      mixed_ = false;
      advance_batch(1);
    }
    if (running_chunk_ > 0) {
      GpuJob rest = std::move(finished.front());
      rest.tokens -= running_chunk_;
      rest.prefix += running_chunk_;
      running_chunk_ = 0;
      if (!chunk_cancelled_) jobs_.push_front(std::move(rest));
      next_iteration();
      return;
    }
    // busy_ stays set while owners react, so their submissions queue up instead
    // of starting a second iteration; one iteration starts afterwards.
    for (GpuJob& j : finished) {
      if (j.done) j.done(j.started_ns >= 0 ? SimTime{j.started_ns} : start, sim_.now());
    }
    next_iteration();
  });
}

void GpuWorker::fill_batch() {
  while (batch_.size() < max_batch_ && !waiting_.empty()) {
    batch_.push_back(waiting_.front());
    waiting_.pop_front();
  }
}

std::int64_t GpuWorker::book_batch(std::int64_t steps) {
  // Each pass either books or preempts at least one request, so this ends.
  while (!batch_.empty()) {
    preempt_.clear();
    const std::int64_t booked =
        listener_.book_growth(index_, {batch_.data(), batch_.size()}, steps, preempt_);
    if (preempt_.empty()) {
      if (booked < 1 || booked > steps) {
        throw std::logic_error("GpuWorker: book_growth booked " + std::to_string(booked) + " of " +
                               std::to_string(steps) + " steps and preempted none");
      }
      return booked;
    }
    for (const std::uint64_t request : preempt_) {
      const auto is = [&](const DecodeState& s) { return s.request == request; };
      const auto in_batch = std::remove_if(batch_.begin(), batch_.end(), is);
      const auto removed = (batch_.end() - in_batch) + std::erase_if(waiting_, is);
      batch_.erase(in_batch, batch_.end());
      if (removed != 1) {
        throw std::logic_error("GpuWorker: preempted request " + std::to_string(request) +
                               " is not decoding on GPU " + std::to_string(index_));
      }
    }
    fill_batch();
    for (const DecodeState& s : batch_) steps = std::min(steps, s.remaining);
  }
  return 0;
}

void GpuWorker::start_epoch(std::int64_t cap) {
  std::int64_t steps = cap;
  for (const DecodeState& s : batch_) steps = std::min(steps, s.remaining);
  steps = std::max<std::int64_t>(steps, 1);
  if (growth_booking_) {
    steps = book_batch(steps);
    if (batch_.empty()) return;  // every request was preempted
  }
  busy_ = true;
  std::int64_t context = 0;
  for (const DecodeState& s : batch_) context += s.context;
  step_ = costs_.decode_step(static_cast<std::int64_t>(batch_.size()), context);
  if (step_.ns <= 0) step_ = SimTime{1};
  epoch_start_ = sim_.now();
  epoch_steps_ = steps;
  in_epoch_ = true;
  epoch_event_ =
      sim_.schedule_at(epoch_start_ + SimTime{step_.ns * steps}, [this] { end_epoch(); });
}

void GpuWorker::interrupt_epoch() {
  // The step in flight finishes; one not yet begun (elapsed == 0) is not started.
  const std::int64_t elapsed = (sim_.now() - epoch_start_).ns;
  const std::int64_t k = (elapsed + step_.ns - 1) / step_.ns;
  if (k >= epoch_steps_) return;
  sim_.cancel(epoch_event_);
  epoch_steps_ = k;
  epoch_event_ = sim_.schedule_at(epoch_start_ + SimTime{step_.ns * k}, [this] { end_epoch(); });
}

void GpuWorker::end_epoch() {
  in_epoch_ = false;
  const std::int64_t k = epoch_steps_;
  gpu_time_.decode += busy_ns(epoch_start_, SimTime{step_.ns * k});
  record("decode", epoch_start_, SimTime{step_.ns * k});
  advance_batch(k);
  next_iteration();
}

void GpuWorker::advance_batch(std::int64_t k) {
  // on_decoded reads the batch in place (it changes no work here); on_finished may add work,
  // so it walks a scratch list, a member so that an epoch allocates nothing.
  finished_.clear();
  for (DecodeState& s : batch_) {
    s.context += k;
    s.remaining -= k;
    if (s.remaining <= 0) finished_.push_back(s.request);
  }
  listener_.on_decoded(index_, {batch_.data(), batch_.size()}, k);
  if (!finished_.empty()) {
    batch_.erase(std::remove_if(batch_.begin(), batch_.end(),
                                [](const DecodeState& s) { return s.remaining <= 0; }),
                 batch_.end());
  }
  for (std::uint64_t r : finished_) listener_.on_finished(index_, r);
}

std::int64_t GpuWorker::busy_ns(SimTime start, SimTime length) const {
  if (start >= horizon_) return 0;
  return std::min(length.ns, (horizon_ - start).ns);
}

std::int64_t* GpuWorker::busy_counter(JobKind kind) {
  switch (kind) {
    case JobKind::kPrefill:
      return &gpu_time_.prefill;
    case JobKind::kReplay:
      return &gpu_time_.replay;
    case JobKind::kReconstruct:
      return &gpu_time_.reconstruct;
    case JobKind::kProxyScore:
      return &gpu_time_.proxy_scoring;
    case JobKind::kRecompute:
      return &gpu_time_.recompute;
  }
  return &gpu_time_.prefill;
}

void GpuWorker::record(const char* name, SimTime start, SimTime length) {
  if (trace_ && trace_->size() < kMaxTraceSpans) {
    trace_->push_back({track_, name, start.ns, length.ns});
  }
}

}  // namespace kvshift::sim
