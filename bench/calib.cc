// strait-calib: how fast is this (virtual) machine right now?
//
//   strait-calib [CPU_A CPU_B]     (default 0 1)
//   CALIB c2c_ns=<median> c2c_min_ns=<min> alu_ns=<ns per dependent mul-add>
//
// c2c: round trip of one cache line between two CPUs (ping-pong on an
// atomic), median and min of 5 blocks.  On the 2-vCPU cloud VM it reads
// ~60 ns when both vCPUs share an L3 and ~300+ ns when the host placed them
// apart; every vhost-user virtqueue is a ring shared by the generator core
// and the switch core, so Mpps moves with it (up to 2x).  Run it only while
// both CPUs are otherwise idle (before/after a benchmark, not during).
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

namespace {

alignas(64) std::atomic<long> g_ball{0};

bool pin(int cpu) {
  cpu_set_t s;
  CPU_ZERO(&s);
  CPU_SET(cpu, &s);
  return pthread_setaffinity_np(pthread_self(), sizeof(s), &s) == 0;
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// One block of `rounds` round trips; returns ns per round trip.
double c2c_block(int a, int b, long rounds) {
  g_ball.store(0);
  std::thread pong([&] {
    pin(b);
    for (long i = 0; i < rounds; i++) {
      while (g_ball.load(std::memory_order_acquire) != 2 * i + 1) {
      }
      g_ball.store(2 * i + 2, std::memory_order_release);
    }
  });
  pin(a);
  const double t0 = now_s();
  for (long i = 0; i < rounds; i++) {
    g_ball.store(2 * i + 1, std::memory_order_release);
    while (g_ball.load(std::memory_order_acquire) != 2 * i + 2) {
    }
  }
  const double dt = now_s() - t0;
  pong.join();
  return dt / rounds * 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  int a = 0, b = 1;
  if (argc == 3) {
    a = std::atoi(argv[1]);
    b = std::atoi(argv[2]);
  } else if (argc != 1) {
    std::fprintf(stderr, "usage: strait-calib [CPU_A CPU_B]\n");
    return 1;
  }
  if (!pin(a)) {
    std::fprintf(stderr, "strait-calib: cannot pin to CPU %d\n", a);
    return 1;
  }
  // ALU speed: a chain of dependent 64-bit multiply-adds.
  const long n = 50'000'000;
  volatile uint64_t sink;
  uint64_t x = 1;
  double t0 = now_s();
  for (long i = 0; i < n; i++) x = x * 6364136223846793005ULL + 1442695040888963407ULL;
  const double alu = (now_s() - t0) / n * 1e9;
  sink = x;
  (void)sink;

  std::vector<double> v;
  for (int k = 0; k < 5; k++) v.push_back(c2c_block(a, b, 100'000));
  std::sort(v.begin(), v.end());
  std::printf("CALIB c2c_ns=%.0f c2c_min_ns=%.0f alu_ns=%.3f cpus=%d,%d\n", v[2], v[0], alu, a,
              b);
  return 0;
}
