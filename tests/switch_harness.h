#pragma once
// An in-process switch for tests: a real Switch with real worker lcores,
// whose ports are net_ring ethdevs the test feeds and drains.
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <rte_mempool.h>
#include <rte_ring.h>

#include "control/switch/switch.h"
#include "tests/test_util.h"

namespace strait::test {

// A net_ring ethdev: frames the test sends appear on the port's rx queue,
// frames the switch transmits land in `out`.
class RingPort {
 public:
  explicit RingPort(const std::string& name);
  ~RingPort();
  const std::string& name() const { return name_; }
  void send(const std::vector<Frame>& frames);
  // Frames transmitted to this port so far (drains them).
  std::vector<Frame> take();
  // Waits until `n` frames were received in total (or the timeout), returns them all.
  std::vector<Frame> wait_for(size_t n, std::chrono::milliseconds timeout = std::chrono::seconds(3));

 private:
  std::string name_;
  rte_ring* in_;
  rte_ring* out_;
  std::vector<Frame> got_;
};

// A guest NIC: DPDK's virtio-user frontend (an ethdev in this process)
// connected to a vhost-user socket the switch serves. Destroying it makes
// the switch's destroy_device wait for the control thread: pump meanwhile.
class VirtioGuest {
 public:
  VirtioGuest(const std::string& name, const std::string& sock, const std::string& mac);
  ~VirtioGuest();
  // Sends the frames once; returns how many the ring took.
  unsigned send(const std::vector<Frame>& frames);
  // Frames the switch delivered so far (drains them).
  std::vector<Frame> take();

 private:
  std::string name_;
  uint16_t port_ = 0;
  rte_mempool* pool_;
};

class Harness {
 public:
  // Removes cfg.state_dir at the end unless keep_state (restart tests).
  explicit Harness(ctl::Config cfg, bool keep_state = false);
  ~Harness();
  ctl::Switch& sw() { return *sw_; }
  // Runs an API call to completion, pumping the control loop like straitd.
  nlohmann::json call(const std::string& method, const nlohmann::json& params = {});
  // Like call() but expects success and returns the result.
  nlohmann::json ok(const std::string& method, const nlohmann::json& params = {});
  // Pumps the control loop (learning, aging, grace periods) for `d`.
  void pump(std::chrono::milliseconds d);
  // Destroys the guest, if any, pumping the control loop meanwhile: the
  // switch's destroy_device waits for this (the control) thread.
  void release(std::unique_ptr<VirtioGuest>& guest);
  uint64_t drops(const std::string& reason);
  // A worker counter of `stats` (cache_misses, ...), summed over the
  // workers; throws when a worker lacks it.
  uint64_t worker_sum(const std::string& counter);

 private:
  std::unique_ptr<ctl::Switch> sw_;
  std::string state_dir_;
  bool keep_state_;
};

ctl::Config test_config(std::vector<unsigned> workers = {1});
// The n-th test port's id, a canonical UUID: 00000000-0000-4000-8000-<n, 12 digits>.
std::string port_uuid(int n);
nlohmann::json port_params(const std::string& id, const std::string& net, const std::string& mac,
                           const std::string& devargs);

}  // namespace strait::test
