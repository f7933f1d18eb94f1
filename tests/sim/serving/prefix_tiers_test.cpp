// The prefix tiers on their own: a prefill reuses what an earlier one cached and
// books it once, blocks gone from HBM load from the host tier over the host link
// and from the SSD after its read, a failed GPU's pins are never given back
// twice, and a move pins its reuse at the destination, then hands the pins to
// the request or gives them back.
#include "sim/serving/prefix_tiers.hpp"

#include <gtest/gtest.h>

#include "tests/sim/serving/fake_fabric.hpp"
#include "tests/sim/serving/simple_costs.hpp"

namespace kvshift::sim {
namespace {

constexpr std::int64_t kBlockTokens = 16;
constexpr std::int64_t kBlockBytes = 1000;
constexpr std::int64_t kHbm = 100'000;  // KV room of each GPU
constexpr std::int64_t kDram = 10'000;  // host DRAM of each node
constexpr std::int64_t kPrompt = 64;    // 3 whole blocks before its last token

/// Two nodes of one GPU each; host links move a byte a ns, SSDs 2 ns a byte.
class PrefixTiersTest : public ::testing::Test {
 protected:
  PrefixTiersTest() {
    for (int node = 0; node < 2; ++node) {
      router_.add_gpu(node, kHbm);
      links_.add_gpu();
    }
    spec_.enabled = true;
    spec_.block_tokens = kBlockTokens;
    spec_.host_offload = true;
    spec_.ssd_tier =
        PrefixCacheSpec::SsdTier{Bytes{100'000}, BitsPerSecond{4e9}, BitsPerSecond{4e9}};
    const PrefixTiers::Gpu gpus[] = {{0, kBlockBytes, &costs_}, {1, kBlockBytes, &costs_}};
    tiers_ = std::make_unique<PrefixTiers>(
        spec_, PrefixTiers::Parts{sim_, fabric_, router_, links_, replicas_, node_up_, stats_}, 2,
        gpus, -1, kBlockBytes);
  }

  /// Prefills request `id` (keys 1, 2, 3) on `gpu` and caches its prompt; returns its hold.
  PrefixHold prefill(std::uint64_t id, int gpu) {
    PrefixHold h{{1, 2, 3}};
    SimTime load;
    std::size_t fetch = 0;
    const std::int64_t cached = tiers_->reuse(h, kPrompt, gpu, load, fetch);
    router_.reserve(gpu, id, 10 * kBlockBytes - tiers_->pinned_bytes(h));
    tiers_->cache_prompt(h, id, gpu, 10 * kBlockBytes);
    last_cached_ = cached;
    last_load_ = load;
    return h;
  }

  Simulator sim_;
  FakeFabric fabric_{sim_};
  RequestRouter router_{Router::kLeastLoaded, 1};
  HostLinkStats link_stats_;
  HostLinks links_{sim_, BitsPerSecond{8e9}, link_stats_};
  ReplicaStore replicas_{
      {NodeKind::kGpu, NodeKind::kGpu}, {kDram, kDram}, ReplicaPlacement::kNextNode, -1};
  std::vector<bool> node_up_ = {true, true};
  PrefixCacheStats stats_;
  SimpleServingCosts simple_;
  const ServingCosts& costs_ = simple_.costs;
  PrefixCacheSpec spec_;
  std::unique_ptr<PrefixTiers> tiers_;
  std::int64_t last_cached_ = -1;
  SimTime last_load_;
};

TEST_F(PrefixTiersTest, APrefillReusesWhatAnEarlierOneCachedAndBooksItOnce) {
  PrefixHold a = prefill(1, 0);
  EXPECT_EQ(last_cached_, 0);
  // The request's own copy of its blocks is dropped: they are booked once, as the cache's.
  EXPECT_EQ(router_.held(0, 1), 7 * kBlockBytes);
  EXPECT_EQ(router_.reserved(0), 10 * kBlockBytes);
  EXPECT_EQ(stats_.host.written_blocks, 3);  // written through to the host tier
  EXPECT_EQ(link_stats_.from_gpu_bytes, 3 * kBlockBytes);

  PrefixHold b = prefill(2, 0);
  EXPECT_EQ(last_cached_, 3 * kBlockTokens);
  EXPECT_EQ(last_load_, SimTime{});  // all in HBM
  EXPECT_EQ(tiers_->pinned_bytes(b), 3 * kBlockBytes);
  EXPECT_EQ(router_.reserved(0), 2 * 7 * kBlockBytes + 3 * kBlockBytes);
  EXPECT_EQ(stats_.prefills, 2);
  EXPECT_EQ(stats_.lookups, 2);
  EXPECT_EQ(stats_.hits, 1);
  EXPECT_EQ(stats_.hit_tokens, 3 * kBlockTokens);
  EXPECT_EQ(stats_.inserted_blocks, 3);
  EXPECT_EQ(stats_.saved_prefill_ns,
            costs_.prefill(kPrompt).ns - costs_.extend(48, kPrompt - 48).ns);

  // Unpinned, the blocks stay in the free room until a booking needs it.
  tiers_->unpin(a);
  EXPECT_EQ(router_.reserved(0), 2 * 7 * kBlockBytes + 3 * kBlockBytes);
  tiers_->unpin(b);
  EXPECT_EQ(router_.reserved(0), 2 * 7 * kBlockBytes);
  router_.reserve(0, 3, kHbm - router_.reserved(0) - kBlockBytes);
  tiers_->fit_cache(0);
  EXPECT_EQ(stats_.evicted_blocks, 2);  // one block's room was left
}

TEST_F(PrefixTiersTest, BlocksGoneFromHbmLoadFromTheHostTierThenFromTheSsd) {
  PrefixHold a = prefill(1, 0);
  tiers_->unpin(a);
  router_.release(0, 1);
  router_.reserve(0, 9, kHbm);  // evicts all three from HBM
  tiers_->fit_cache(0);
  router_.release(0, 9);

  PrefixHold b = prefill(2, 0);
  EXPECT_EQ(last_cached_, 3 * kBlockTokens);
  EXPECT_EQ(last_load_, links_.time(3 * kBlockBytes));  // over an idle host link
  EXPECT_EQ(last_load_.ns, 3 * kBlockBytes);
  EXPECT_EQ(stats_.host.hits, 1);
  EXPECT_EQ(stats_.host.read_bytes, 3 * kBlockBytes);
  tiers_->unpin(b);
  router_.release(0, 2);

  // Replicas take all but one block of host DRAM: two blocks go down to the SSD.
  replicas_.book(0, kDram - kBlockBytes);
  tiers_->fit_host_tier(0);
  EXPECT_EQ(stats_.host.evicted_blocks, 2);
  EXPECT_EQ(stats_.ssd.written_blocks, 2);  // a copy tier passes the chain's head down first
  router_.reserve(0, 9, kHbm);
  tiers_->fit_cache(0);
  router_.release(0, 9);

  const PrefixHold c{{1, 2, 3}};
  const PrefixRun run = tiers_->run(c, kPrompt, 0);
  EXPECT_EQ(run.in_hbm, 0U);
  EXPECT_EQ(run.from_host, 0U);  // block 3 stayed in host DRAM, after the gap
  EXPECT_EQ(run.from_ssd, 2U);
  // The SSD's two blocks are read into host DRAM after the write ahead of them (2 ns a byte
  // each way); then they cross the host link, which the earlier load left idle by then.
  const std::int64_t ssd_write = 2 * kBlockBytes * 2;
  const std::int64_t ssd_read = 2 * kBlockBytes * 2;
  EXPECT_EQ(run.load.ns, ssd_write + ssd_read + 2 * kBlockBytes);
}

TEST_F(PrefixTiersTest, AFailedGpuLosesItsCacheAndItsOldPinsAreNotGivenBackTwice) {
  PrefixHold a = prefill(1, 0);
  router_.clear(0);
  tiers_->gpu_failed(0);
  EXPECT_EQ(stats_.lost_blocks, 3);
  PrefixHold b = prefill(2, 0);  // cached again, in a new generation
  EXPECT_EQ(router_.reserved(0), 10 * kBlockBytes);
  tiers_->unpin(a);  // the lost generation's pins: nothing changes
  EXPECT_EQ(router_.reserved(0), 10 * kBlockBytes);
  EXPECT_EQ(a.gpu, -1);
  tiers_->unpin(b);
  EXPECT_EQ(router_.reserved(0), 7 * kBlockBytes);
}

TEST_F(PrefixTiersTest, AMovePinsItsReuseAtTheDestinationThenHandsThePinsOverOrGivesThemBack) {
  PrefixHold cached_by_other = prefill(1, 1);
  tiers_->unpin(cached_by_other);
  router_.release(1, 1);

  PrefixHold moving{{1, 2, 3}};
  ASSERT_EQ(tiers_->cached_at(moving, kPrompt, 1).blocks(), 3U);
  const PrefixTiers::MoveLoad failed = tiers_->load_for_move(moving, kPrompt, 1, 3);
  EXPECT_EQ(failed.load, SimTime{});
  EXPECT_EQ(failed.fetch_blocks, 0U);
  EXPECT_EQ(router_.reserved(1), 3 * kBlockBytes);
  tiers_->give_back(moving, 1, failed.pins);
  EXPECT_EQ(router_.reserved(1), 0);

  const PrefixTiers::MoveLoad landed = tiers_->load_for_move(moving, kPrompt, 1, 2);
  tiers_->take_pins(moving, 1, landed.pins);
  EXPECT_EQ(moving.gpu, 1);
  EXPECT_EQ(moving.pinned, 2U);
  EXPECT_EQ(tiers_->pinned_bytes(moving), 2 * kBlockBytes);
  EXPECT_EQ(tiers_->cached_at(moving, kPrompt, 1).blocks(), 0U);  // never pinned twice
  tiers_->unpin(moving);
  EXPECT_EQ(router_.reserved(1), 0);
}

}  // namespace
}  // namespace kvshift::sim
