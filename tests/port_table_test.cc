// The ports and uplinks as the datapath has them: rx queues counted on their
// workers exactly while a port holds them, through every way a port gains
// and loses its device. No EAL: the table calls no DPDK.
#include "control/switch/port_table.h"

#include <gtest/gtest.h>

namespace strait::ctl {
namespace {

PortRuntime vhost_port(PortTable& t, const std::string& path) {
  PortRuntime rt;
  rt.dp = DpPort{*t.alloc_index(), 0, {}, 1, false, dp::PortKind::kVhost, -1};
  rt.vhost_path = path;
  rt.has_device = true;
  return rt;
}

Ethdev nic(uint16_t port_id, uint16_t n_rxq) {
  Ethdev d;
  d.port_id = port_id;
  d.n_rxq = n_rxq;
  d.n_txq = 2;
  return d;
}

TEST(PortTable, AGuestDriverTakesQueuesAndGivesThemBack) {
  PortTable t(8, 2);
  t.add("a", vhost_port(t, "/s/a.sock"));
  std::string id;
  PortRuntime* p = t.by_vhost_path("/s/a.sock", &id);
  ASSERT_TRUE(p);
  EXPECT_EQ(id, "a");
  t.vhost_ready(*p, 7, 2);
  EXPECT_TRUE(p->dp.live);
  EXPECT_EQ(p->dp.rxq_worker, (std::vector<uint16_t>{0, 1}));
  EXPECT_EQ(t.rx_queues(), (std::vector<uint32_t>{1, 1}));
  EXPECT_EQ(t.by_vid(7, &id), p);
  // A second device on the same port before the first was seen to go:
  // its queues replace the old ones, they are not counted twice.
  t.vhost_ready(*p, 9, 1);
  EXPECT_EQ(t.rx_queues(), (std::vector<uint32_t>{1, 0}));
  EXPECT_FALSE(t.by_vid(7, &id));
  t.vhost_gone(*p);
  EXPECT_FALSE(p->dp.live);
  EXPECT_EQ(p->dp.vid, -1);
  EXPECT_EQ(t.rx_queues(), (std::vector<uint32_t>{0, 0}));
  EXPECT_FALSE(t.by_vid(-1, &id));  // no device is no match
}

TEST(PortTable, ATakenPortGivesItsQueuesBackButKeepsItsIndex) {
  PortTable t(2, 1);
  ASSERT_TRUE(t.add_uplink("phys", nic(0, 2)));
  EXPECT_EQ(t.rx_queues(), (std::vector<uint32_t>{2}));
  t.add("a", vhost_port(t, "/s/a.sock"));
  t.vhost_ready(*t.find("a"), 3, 1);
  EXPECT_EQ(t.rx_queues(), (std::vector<uint32_t>{3}));
  EXPECT_FALSE(t.alloc_index());  // both indexes taken
  PortRuntime rt = t.take("a");
  EXPECT_FALSE(t.find("a"));
  EXPECT_EQ(t.rx_queues(), (std::vector<uint32_t>{2}));
  EXPECT_FALSE(t.alloc_index());  // until the caller frees it, after a grace period
  t.free_index(rt.dp.dp);
  EXPECT_EQ(t.alloc_index(), rt.dp.dp);
  // No index left for another uplink: refused, nothing half added.
  EXPECT_FALSE(t.add_uplink("other", nic(1, 1)));
  EXPECT_FALSE(t.uplink("other"));
  EXPECT_EQ(t.rx_queues(), (std::vector<uint32_t>{2}));
}

TEST(PortTable, NamesAndSnapshotInput) {
  PortTable t(8, 1);
  ASSERT_TRUE(t.add_uplink("phys", nic(0, 1)));
  t.add("a", vhost_port(t, "/s/a.sock"));
  EXPECT_EQ(t.name_of(t.uplink("phys")->dp.dp), "physnet:phys");
  EXPECT_EQ(t.name_of(t.find("a")->dp.dp), "a");
  EXPECT_EQ(t.name_of(7), "");
  BuildInput in;
  t.fill(in);
  ASSERT_EQ(in.ports.count("a"), 1u);
  ASSERT_EQ(in.uplinks.count("phys"), 1u);
  EXPECT_EQ(in.uplinks["phys"].rxq_worker, (std::vector<uint16_t>{0}));
}

TEST(PortTable, AMovedQueueIsPausedUntilUnpaused) {
  PortTable t(8, 2);
  ASSERT_TRUE(t.add_uplink("phys", nic(0, 2)));  // queues on workers 0 and 1
  Uplink& u = *t.uplink("phys");
  t.move_rx_queue(u.dp, 1, 0);
  EXPECT_EQ(u.dp.rxq_worker, (std::vector<uint16_t>{0, 0}));
  EXPECT_EQ(u.dp.rxq_paused, 2u);
  EXPECT_EQ(t.rx_queues(), (std::vector<uint32_t>{2, 0}));
  t.move_rx_queue(u.dp, 0, 0);  // to where it is: nothing moves, nothing pauses
  EXPECT_EQ(u.dp.rxq_paused, 2u);
  t.unpause_all();
  EXPECT_EQ(u.dp.rxq_paused, 0u);
}

}  // namespace
}  // namespace strait::ctl
